"""The estimate's interval in words: the ``*_low``/``*_high`` fields of an answer, stated as what they are.

The fields come from the profile's validation residuals (``optimize.results.interval_fields``): the 10% and 90%
quantiles of ln(measured / estimate) over the measured rows of the profile on the answer's accelerator family. They
say how far measured serving fell from such estimates, not how uncertain the physics is (no confidence interval).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from roofline_opt.report.tables import format_number

NOTE = "10-90% of measured/estimate on the profile's validation rows; not a confidence interval"


def _factor(record: Mapping[str, Any], name: str, end: str) -> float | None:
    value, bound = record.get(name), record.get(f"{name}_{end}")
    return None if not value or bound is None else bound / value


def interval_line(records: Sequence[Mapping[str, Any]]) -> str | None:
    """One line for a table of answers: the measured/estimate range and, for one answer, its figures' ranges."""
    if not records:
        return None
    first = records[0]
    low, high = _factor(first, "tok_s_per_request", "low"), _factor(first, "tok_s_per_request", "high")
    if low is None or high is None:
        return None
    text = (
        f"range: measured serving ran at {low:.2f}x-{high:.2f}x such estimates ({first.get('profile')} profile on "
        f"{first.get('gpu')}; {NOTE})"
    )
    if len(records) == 1:
        parts = []
        for name, label in (
            ("tok_s_per_request", "tok/s per request"),
            ("tok_s_per_gpu", "tok/s per GPU"),
            ("usd_per_mtok", "$/Mtok"),
        ):
            lo, hi = first.get(f"{name}_low"), first.get(f"{name}_high")
            if lo is not None and hi is not None:
                parts.append(f"{label} {format_number(lo)}-{format_number(hi)}")
        text += ": " + ", ".join(parts)
    return text
