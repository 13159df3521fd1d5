"""Answers as text: aligned terminal tables and JSON, numbers formatted for reading.

Imports neither numpy nor pandas at module level: the catalog listings and a single answer print without them
(numpy's scalars register as ``numbers.Real``/``numbers.Integral``; ``frame_to_table`` imports pandas for its dtypes).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from numbers import Integral, Real
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

MISSING_CELL = "-"


"""What a table shows for NaN / None."""


def _is_number(value: Any) -> bool:
    """An int or float of Python or numpy, not a bool (numpy's bool is no ``numbers.Real``)."""
    return isinstance(value, Real) and not isinstance(value, bool)


def format_number(value: Any) -> str:
    """A number for a human: integers plainly, else 4 significant digits without trailing zeros; '-' for NaN/None."""
    if value is None or (_is_number(value) and not isinstance(value, Integral) and math.isnan(value)):
        return MISSING_CELL
    if not _is_number(value):
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


def _aligned(columns: Sequence[str], cells: Sequence[Sequence[str]], numeric: Sequence[bool], n_rows: int) -> str:
    """Columns of formatted cells as aligned text: numbers right-aligned, text left-aligned, header and rule."""
    widths = [max([len(name), *(len(cell) for cell in col)]) for name, col in zip(columns, cells, strict=True)]

    def line(items: Iterable[str]) -> str:
        parts = [
            item.rjust(width) if right else item.ljust(width)
            for item, width, right in zip(items, widths, numeric, strict=True)
        ]
        return "  ".join(parts).rstrip()

    rows = [line(columns), line("-" * w for w in widths)]
    rows += [line(col[i] for col in cells) for i in range(n_rows)]
    return "\n".join(rows)


def frame_to_table(df: pd.DataFrame) -> str:
    """An aligned plain-text table of ``df`` (numbers right-aligned, text left-aligned), without the index."""
    import pandas as pd

    columns = [str(c) for c in df.columns]
    cells = [[format_number(v) for v in df[c].tolist()] for c in df.columns]
    numeric = [pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c]) for c in df.columns]
    return _aligned(columns, cells, numeric, len(df))


def records_table(records: Sequence[Mapping[str, Any]]) -> str:
    """The table ``frame_to_table`` prints for ``pandas.DataFrame(records)``, without pandas: columns in first-seen
    order; a column is a number column when its values are numbers or missing (NaN/None), at least one a number."""
    columns = list(dict.fromkeys(key for record in records for key in record))
    values = [[record.get(c) for record in records] for c in columns]
    numeric = [all(_is_number(v) or v is None for v in col) and any(_is_number(v) for v in col) for col in values]
    cells = [[format_number(v) for v in col] for col in values]
    return _aligned([str(c) for c in columns], cells, numeric, len(records))


def _plain(value: Any) -> Any:
    """``value`` with numpy scalars and arrays turned into Python values and NaN/inf into None."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    np = sys.modules.get("numpy")  # numpy values exist only once numpy is imported
    if isinstance(value, list | tuple) or (np is not None and isinstance(value, np.ndarray)):
        return [_plain(v) for v in value]
    if np is not None and isinstance(value, np.generic):
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


def _id_ranges(ids: list[str]) -> str:
    """``n0-g0, n0-g1, n0-g2`` -> ``n0-g0..2``: runs of ids that differ only by a rising trailing number."""
    import re

    parts: list[str] = []
    run: list[tuple[str, int]] = []
    for gpu_id in ids:
        match = re.fullmatch(r"(.*?)(\d+)", gpu_id)
        key = (match.group(1), int(match.group(2))) if match else (gpu_id, -1)
        if run and key[1] >= 0 and key[0] == run[-1][0] and key[1] == run[-1][1] + 1:
            run.append(key)
            continue
        if run:
            parts.append(_run_text(run))
        run = [key] if key[1] >= 0 else []
        if key[1] < 0:
            parts.append(gpu_id)
    if run:
        parts.append(_run_text(run))
    return ",".join(parts)


def _run_text(run: list[tuple[str, int]]) -> str:
    prefix, first = run[0]
    return f"{prefix}{first}" if len(run) == 1 else f"{prefix}{first}..{run[-1][1]}"


def placement_text(placement: Mapping[str, Any] | None) -> str:
    """GPU ids per replica and pipeline stage, compactly: ``r0: [n0-g0..7] [n1-g0..7]; r1: ...``."""
    if not placement:
        return MISSING_CELL
    replicas = placement["replicas"]
    return "; ".join(
        f"r{r}: " + " ".join(f"[{_id_ranges(list(group))}]" for group in stages) for r, stages in enumerate(replicas)
    )
