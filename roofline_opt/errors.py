"""Exception types of roofline_opt; the CLI maps them to exit codes (InvalidInput 2, Infeasible 1)."""

from __future__ import annotations


class RooflineError(Exception):
    """Base of every error roofline_opt raises on purpose."""


class InvalidInput(RooflineError, ValueError):
    """A field of the user's input is not valid: the message names the field and what would be."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class Infeasible(RooflineError):
    """A well-formed question that no setup in the search space answers."""

    def __init__(self, message: str, reason: str, nearest: str | None = None) -> None:
        self.reason = reason
        self.nearest = nearest
        super().__init__(message if nearest is None else f"{message}; {nearest}")


class SolverFailure(RooflineError):
    """HiGHS stopped without a usable solution (error, or time limit with no incumbent)."""
