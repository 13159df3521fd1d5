"""User files in and out: bounded reading of CSV tables, writes that appear whole or not at all."""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from roofline_opt.errors import InvalidInput


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
