"""How many measured rows got a verdict, how many the bound holds on, and the median ratio, overall and per
framework; which rows are well stated (model, precision, accelerator and layout named)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from roofline_opt import report
from roofline_opt.fidelity.validate import ValidationRow

UNSTATED_RE = re.compile(
    r"^\s*(?:-|n/?a|none|unknown|undisclosed|not (?:disclosed|stated|reported|recovered|given|available)\b.*)?\s*$",
    re.IGNORECASE,
)
"""A cell that names nothing: empty, a dash, "unknown", "not disclosed", "not recovered (...)"."""


def well_stated(row: ValidationRow) -> bool:
    """Model, precision, accelerator and layout named (known to our catalog or not): the rows a verdict is owed to."""
    r = row.row
    return not any(UNSTATED_RE.match(cell) for cell in (r.model, r.precision, r.gpu, r.layout))


def framework_family(text: str) -> str:
    """``"TensorRT-LLM v0.6.1"`` -> ``"TensorRT-LLM"``; ``"NVIDIA NIM 1.8.0"`` -> ``"NIM"``."""
    words = re.sub(r"^nvidia\s+", "", text.strip(), flags=re.IGNORECASE).split()
    return re.sub(r"[,(].*$", "", words[0]) if words else "-"


@dataclass(frozen=True)
class ValidationSummary:
    """Rows read, rows well stated, rows with a verdict, how many the bound holds on, and median ratios."""

    rows: int
    well_stated: int
    compared: int
    bounded: int
    median_ratio_tok_s_per_request: float | None
    median_ratio: float | None
    median_estimate_ratio: float | None = None

    @property
    def fraction_bounded(self) -> float | None:
        return self.bounded / self.compared if self.compared else None

    @property
    def fraction_with_verdict(self) -> float | None:
        return self.compared / self.rows if self.rows else None

    def line(self) -> str:
        """The one-line summary the command prints."""
        if not self.compared:
            return f"validate: 0 of {self.rows} rows could be mapped to a setup"
        return (
            f"validate: {self.compared} of {self.rows} rows mapped ({self.rows - self.compared} listed with a "
            f"reason; {self.compared} of {self.well_stated} well-stated rows have a verdict); bound holds on "
            f"{self.bounded}/{self.compared} = {self.fraction_bounded:.0%}; median bound/measured "
            f"{report.format_number(self.median_ratio)} (tok/s per request "
            f"{report.format_number(self.median_ratio_tok_s_per_request)}); median estimate/measured "
            f"{report.format_number(self.median_estimate_ratio)}"
        )


def _median(values: list[float]) -> float | None:
    return float(np.median(values)) if values else None


def summarise(rows: Sequence[ValidationRow]) -> ValidationSummary:
    """Counts and median ratios over the rows with a verdict."""
    judged = [r for r in rows if r.bound_holds is not None]
    return ValidationSummary(
        rows=len(rows),
        well_stated=sum(well_stated(r) for r in rows),
        compared=len(judged),
        bounded=sum(bool(r.bound_holds) for r in judged),
        median_ratio_tok_s_per_request=_median(
            [r.ratio_tok_s_per_request for r in judged if r.ratio_tok_s_per_request is not None]
        ),
        median_ratio=_median([r.ratio for r in judged if r.ratio is not None]),
        median_estimate_ratio=_median([r.estimate_ratio for r in judged if r.estimate_ratio is not None]),
    )


def by_framework(rows: Sequence[ValidationRow]) -> list[dict]:
    """One record per framework family: rows, verdicts, bounded, fractions and the median ratio of its verdicts."""
    families: dict[str, list[ValidationRow]] = {}
    for r in rows:
        families.setdefault(framework_family(r.row.framework), []).append(r)
    out = []
    for name, members in sorted(families.items()):
        s = summarise(members)
        out.append(
            {
                "framework": name,
                "rows": s.rows,
                "verdicts": s.compared,
                "bounded": s.bounded,
                "fraction_with_verdict": s.fraction_with_verdict,
                "fraction_bounded": s.fraction_bounded,
                "median_ratio": s.median_ratio,
                "median_estimate_ratio": s.median_estimate_ratio,
            }
        )
    return out


def plot_panels(rows: Sequence[ValidationRow]) -> dict[str, list[report.PlottedRow]]:
    """The rows with a verdict, per accelerator card, as the validation plot draws them."""
    panels: dict[str, list[report.PlottedRow]] = {}
    for r in rows:
        p = r.prediction
        if r.bound_holds is None or p.curve_tok_s_per_request is None:
            continue
        x = r.row.measured_tok_s_per_request or p.tok_s_per_request
        y = r.row.measured_tok_s_per_gpu or p.tok_s_per_gpu
        if x is None or y is None:
            continue
        assert r.row.setup is not None  # a row with a verdict has a setup
        panels.setdefault(r.row.setup.gpu_card, []).append(
            report.PlottedRow(
                label=str(r.row.line),
                check=r.check,
                bound_holds=bool(r.bound_holds),
                tok_s_per_user=x,
                tok_s_per_gpu=y,
                curve_tok_s_per_user=p.curve_tok_s_per_request,
                curve_tok_s_per_gpu=p.curve_tok_s_per_gpu,
            )
        )
    return dict(sorted(panels.items()))
