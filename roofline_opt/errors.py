"""Exception types of roofline_opt; the CLI maps them to exit codes (Infeasible 1, InvalidInput 2, SolverFailure 3,
anything else 4: an internal error)."""

from __future__ import annotations

MAX_MESSAGE_CHARS = 400
"""Longest field name or message an error carries: a hostile value never floods the terminal."""


MAX_REPORT_CHARS = 2000
"""Longest line the command line prints for a failed run: our own explanations (an infeasible question's reasons
and nearest figures) are never cut; only runaway text is."""


def one_line(text: object, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` on one line (runs of whitespace as one space), cut to ``limit`` characters with an ellipsis, at a
    word boundary when one is near."""
    flat = " ".join(str(text).split())
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 3]
    space = cut.rfind(" ")
    return (cut[:space] if space >= limit // 2 else cut) + "..."


class RooflineError(Exception):
    """Base of every error roofline_opt raises on purpose."""


class InvalidInput(RooflineError, ValueError):
    """A field of the user's input is not valid: the message names the field and what would be.

    Parameters
    ----------
    field : str
        The API parameter (``tp_degrees``), flag (``--tp-degrees``) or file field (``path line 3: tp``) at fault,
        cut to half of ``MAX_MESSAGE_CHARS``.
    message : str
        What is wrong and what would be valid, on one line (cut to ``MAX_MESSAGE_CHARS``).
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = one_line(field, MAX_MESSAGE_CHARS // 2)
        self.message = one_line(message)
        super().__init__(f"{self.field}: {self.message}")


class Infeasible(RooflineError):
    """A well-formed question that no setup in the search space answers.

    Parameters
    ----------
    message : str
        The question's failure in words.
    reason : str
        Why, as a short key (``"topology"``, ``"engine"``, ...).
    nearest : str, optional
        The nearest achievable figures, appended to the message.
    """

    def __init__(self, message: str, reason: str, nearest: str | None = None) -> None:
        self.reason = reason
        self.nearest = nearest
        super().__init__(message if nearest is None else f"{message}; {nearest}")


class SolverFailure(RooflineError):
    """HiGHS stopped without a usable solution (error, or time limit with no incumbent); the message gives HiGHS's
    status."""
