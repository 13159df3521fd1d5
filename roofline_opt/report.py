"""Formatting and output: aligned terminal tables, JSON, and files written atomically. No physics, no solving."""

from __future__ import annotations

import errno
import json
import math
import os
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import pandas as pd

from roofline_opt.errors import InvalidInput

MISSING_CELL = "-"
"""What a table shows for NaN / None."""


def write_text_atomic(path: str | os.PathLike[str], text: str, field: str = "output") -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder: all of it or nothing.

    An unwritable destination raises InvalidInput naming ``field`` (the flag that gave the path).
    """
    path = Path(path)
    tmp_name = None
    try:
        with tempfile.NamedTemporaryFile(
            "w", encoding="utf-8", dir=path.parent, prefix=f".{path.name}.", delete=False
        ) as f:
            tmp_name = f.name
            f.write(text)
        os.chmod(tmp_name, 0o666 & ~_umask())
        os.replace(tmp_name, path)
    except OSError as exc:
        if tmp_name is not None and os.path.exists(tmp_name):
            os.unlink(tmp_name)
        raise InvalidInput(field, f"cannot write {str(path)!r}: {exc.strerror or exc}") from exc


def _umask() -> int:
    """The process umask (read by setting and restoring it), so written files get the usual permissions."""
    current = os.umask(0)
    os.umask(current)
    return current


def format_number(value: Any) -> str:
    """A number for a human: integers plainly, else 4 significant digits without trailing zeros; '-' for NaN/None."""
    if value is None or (isinstance(value, float | np.floating) and math.isnan(value)):
        return MISSING_CELL
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.integer | np.floating):
        return str(value)
    value = float(value)
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if 1e-3 <= abs(value) < 1e6:
        decimals = max(0, 3 - math.floor(math.log10(abs(value))))
        text = f"{value:.{decimals}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    return f"{value:.4g}"


def frame_to_table(df: pd.DataFrame) -> str:
    """An aligned plain-text table of ``df`` (numbers right-aligned, text left-aligned), without the index."""
    columns = [str(c) for c in df.columns]
    cells = [[format_number(v) for v in df[c].tolist()] for c in df.columns]
    numeric = [pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c]) for c in df.columns]
    widths = [max([len(name), *(len(cell) for cell in col)]) for name, col in zip(columns, cells, strict=True)]

    def line(items: Iterable[str]) -> str:
        parts = [
            item.rjust(width) if right else item.ljust(width)
            for item, width, right in zip(items, widths, numeric, strict=True)
        ]
        return "  ".join(parts).rstrip()

    rows = [line(columns), line("-" * w for w in widths)]
    rows += [line(col[i] for col in cells) for i in range(len(df))]
    return "\n".join(rows)


def _plain(value: Any) -> Any:
    """``value`` with numpy scalars and arrays turned into Python values and NaN/inf into None."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | np.ndarray):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def to_json(records: Iterable[Mapping[str, Any]]) -> str:
    """A JSON list of ``records`` (NaN -> null, numpy types converted), indented for reading."""
    return json.dumps([_plain(r) for r in records], indent=2, allow_nan=False)


def to_json_object(record: Mapping[str, Any]) -> str:
    """One record as a JSON object (NaN -> null, numpy types converted), indented for reading."""
    return json.dumps(_plain(record), indent=2, allow_nan=False)


# ----------------------------------------------------------------------------------------------- progress


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


# ----------------------------------------------------------------------------------------------- figures


def plot_formats() -> tuple[str, ...]:
    """File extensions matplotlib can save a figure as (png, pdf, svg, ...)."""
    from matplotlib.figure import Figure

    return tuple(sorted(Figure().canvas.get_supported_filetypes()))


def check_destination(path: str | os.PathLike[str], field: str, formats: Iterable[str] | None = None) -> None:
    """Fail early (InvalidInput naming ``field``) if ``path`` cannot be written: no such folder, a folder, or an
    extension outside ``formats``; lets a command refuse before hours of work and leave no partial output."""
    path = Path(path)
    if path.is_dir():
        raise InvalidInput(field, f"cannot write {str(path)!r}: {os.strerror(errno.EISDIR)}")
    if not path.parent.is_dir():
        raise InvalidInput(field, f"cannot write {str(path)!r}: {os.strerror(errno.ENOENT)}")
    if formats is not None:
        formats = tuple(formats)
        if path.suffix.lower().lstrip(".") not in formats:
            wanted = ", ".join(f".{f}" for f in formats)
            raise InvalidInput(field, f"must end in one of {wanted}. Got {str(path)!r} instead.")


def save_figure_atomic(figure: Any, path: str | os.PathLike[str], field: str = "--plot") -> None:
    """Save a matplotlib figure (format from the extension) through a temporary file: all of it or nothing."""
    path = Path(path)
    check_destination(path, field, plot_formats())
    tmp_name = None
    try:
        with tempfile.NamedTemporaryFile("wb", dir=path.parent, prefix=f".{path.name}.", delete=False) as f:
            tmp_name = f.name
            figure.savefig(f, format=path.suffix.lower().lstrip("."))
        os.chmod(tmp_name, 0o666 & ~_umask())
        os.replace(tmp_name, path)
    except BaseException as exc:
        if tmp_name is not None and os.path.exists(tmp_name):
            os.unlink(tmp_name)
        if isinstance(exc, OSError):
            raise InvalidInput(field, f"cannot write {str(path)!r}: {exc.strerror or exc}") from exc
        raise


def plot_frontier(
    frame: pd.DataFrame,
    path: str | os.PathLike[str],
    *,
    title: str,
    preferred_label: str | None = None,
    observed: pd.DataFrame | None = None,
    field: str = "--plot",
) -> None:
    """The frontier as in the paper: x tok/s per request, y $/Mtok (log), the preferred point starred and annotated,
    observed points (columns tok_s_per_request, usd_per_mtok, optional label) overlaid as crosses."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 5), layout="constrained")
    ax = figure.add_subplot()
    ax.plot(frame["tok_s_per_request"], frame["usd_per_mtok"], "o-", ms=3.5, lw=1.5, label="optimal setups")
    _mark_preferred(ax, frame, preferred_label)
    if observed is not None and len(observed):
        _overlay_observed(ax, observed)
    ax.set_yscale("log")
    ax.set_xlabel("tokens per second per request")
    ax.set_ylabel("$ per million output tokens (log scale)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left")
    save_figure_atomic(figure, path, field)


def _mark_preferred(ax: Any, frame: pd.DataFrame, label: str | None) -> None:
    if "preferred" not in frame or not frame["preferred"].any():
        return
    row = frame[frame["preferred"].astype(bool)].iloc[0]
    x, y = row["tok_s_per_request"], row["usd_per_mtok"]
    ax.scatter([x], [y], marker="*", s=220, color="C3", zorder=4, label="preferred")
    if label:
        # the lower right corner is empty on any frontier: fast and cheap is what no setup reaches
        ax.annotate(label, (x, y), xytext=(0.97, 0.05), textcoords="axes fraction", ha="right", va="bottom",
                    fontsize=8, arrowprops={"arrowstyle": "->", "color": "C3", "lw": 0.8})  # fmt: skip


def _overlay_observed(ax: Any, observed: pd.DataFrame) -> None:
    ax.scatter(observed["tok_s_per_request"], observed["usd_per_mtok"], marker="x", s=40, color="k", zorder=3,
               label="observed")  # fmt: skip
    if "label" not in observed:
        return
    for x, y, text in zip(observed["tok_s_per_request"], observed["usd_per_mtok"], observed["label"], strict=True):
        if isinstance(text, str) and text.strip():
            ax.annotate(text.strip(), (x, y), xytext=(4, -10), textcoords="offset points", fontsize=7)


def read_csv_cells(path: str | os.PathLike[str], field: str, required: Sequence[str], rows_are: str) -> pd.DataFrame:
    """A user's CSV as stripped text cells (blank = ""), with its required columns; any problem is InvalidInput.

    ``field`` names the flag for messages; ``rows_are`` says what one row holds ("setup", "point", ...).
    """
    path = Path(path)
    if not path.is_file():
        raise InvalidInput(field, f"must be an existing CSV file. Got {str(path)!r} instead (no such file).")
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True)
    except pd.errors.EmptyDataError as exc:
        raise InvalidInput(field, f"{path} is empty: it needs a header line and one row per {rows_are}") from exc
    except (pd.errors.ParserError, UnicodeDecodeError, OSError) as exc:
        raise InvalidInput(field, f"{path} cannot be read as CSV: {' '.join(str(exc).split())}") from exc
    frame.columns = [str(c).strip() for c in frame.columns]
    missing = [c for c in required if c not in frame.columns]
    if missing:
        msg = f"column is missing: {field} needs columns {', '.join(required)}"
        raise InvalidInput(f"{path}: {missing[0]}", msg)
    if frame.empty:
        raise InvalidInput(field, f"{path} has a header but no rows")
    return frame
