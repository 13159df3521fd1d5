"""Formatting and output: aligned terminal tables, JSON, and files written atomically. No physics, no solving."""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

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
        return f"{value:.{decimals}f}".rstrip("0").rstrip(".")
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
