"""A progress bar for long sweeps, shown on a terminal only."""

from __future__ import annotations

import sys
from typing import TextIO


class ProgressBar:
    """A ``\\r[#####     ] 12/50`` bar on ``stream`` (stderr) only when it is a terminal; call it as (done, total).

    Used as a context manager it ends an unfinished bar's line, so a following error message starts on its own line.
    """

    def __init__(self, stream: TextIO | None = None, width: int = 30) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.width = width
        self.enabled = _is_terminal(self.stream)
        self._line_open = False

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total <= 0:
            return
        filled = self.width * min(max(done, 0), total) // total
        self.stream.write(f"\r[{'#' * filled}{' ' * (self.width - filled)}] {done}/{total}")
        self._line_open = done < total
        if not self._line_open:
            self.stream.write("\n")
        self.stream.flush()

    def close(self) -> None:
        """End the bar's line if it is unfinished."""
        if self._line_open:
            self.stream.write("\n")
            self.stream.flush()
            self._line_open = False

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
