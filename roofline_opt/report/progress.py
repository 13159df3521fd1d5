"""A progress bar for long sweeps, shown on a terminal only."""

from __future__ import annotations

import sys
import time
from typing import TextIO

CLEAR_LINE_END = "\x1b[K"
"""Erases what a longer earlier line left behind (an ETA that got shorter)."""


class ProgressBar:
    """A ``\\r[#####     ] 12/50`` bar on ``stream`` (stderr) only when it is a terminal; call it as (done, total).

    Used as a context manager it ends an unfinished bar's line, so a following error message starts on its own line.
    With ``eta`` it adds the estimated time left, from the mean pace since the bar was created.
    """

    def __init__(self, stream: TextIO | None = None, width: int = 30, eta: bool = False) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.width = width
        self.enabled = _is_terminal(self.stream)
        self._line_open = False
        self._eta = eta
        self._start = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total <= 0:
            return
        filled = self.width * min(max(done, 0), total) // total
        bar = f"\r[{'#' * filled}{' ' * (self.width - filled)}] {done}/{total}"
        if self._eta:
            left = format_duration(self._seconds_left(done, total)) if 0 < done < total else ""
            bar += (f"  eta {left}" if left else "") + CLEAR_LINE_END
        self.stream.write(bar)
        self._line_open = done < total
        if not self._line_open:
            self.stream.write("\n")
        self.stream.flush()

    def _seconds_left(self, done: int, total: int) -> float:
        return (time.monotonic() - self._start) / done * (total - done)

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


def format_duration(seconds: float) -> str:
    """``75`` -> ``1m15s``, ``3725`` -> ``1h02m``; whole seconds below a minute."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
