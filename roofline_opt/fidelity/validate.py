"""The roofline bound checked against measured serving figures: a prediction per mapped row and a summary."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from roofline_opt import report
from roofline_opt.fidelity.measured import MeasuredRow, MeasuredSetup, gpu_card, map_row, model_card, read_measured
from roofline_opt.fidelity.requests_bound import request_prediction
from roofline_opt.physics import evaluator
from roofline_opt.physics.specs import DEFAULT, GpuSpec, ModelSpec, Preset


@dataclass(frozen=True)
class ValidationRow:
    """A measured row next to the roofline's prediction for its setup; ``bound_holds`` is None with a reason."""

    row: MeasuredRow
    predicted_tok_s_per_request: float | None
    predicted_tok_s_per_gpu: float | None
    fits_in_memory: bool | None
    bottleneck: str | None
    request_tok_s_per_request: float | None = None
    request_tok_s_per_gpu: float | None = None
    """Prefill-aware predictions (fidelity/requests_bound.py): the prompts' cost included."""

    @property
    def ratio_tok_s_per_request(self) -> float | None:
        return _ratio(self.predicted_tok_s_per_request, self.row.measured_tok_s_per_request)

    @property
    def request_ratio_tok_s_per_request(self) -> float | None:
        return _ratio(self.request_tok_s_per_request, self.row.measured_tok_s_per_request)

    @property
    def request_bound_holds(self) -> bool | None:
        """Whether the prefill-aware prediction still bounds the measured figures from above."""
        if self.row.reasons or self.request_tok_s_per_request is None:
            return None
        ratios = [
            _ratio(self.request_tok_s_per_request, self.row.measured_tok_s_per_request),
            _ratio(self.request_tok_s_per_gpu, self.row.measured_tok_s_per_gpu),
        ]
        return all(r >= 1.0 for r in ratios if r is not None)

    @property
    def ratio_tok_s_per_gpu(self) -> float | None:
        return _ratio(self.predicted_tok_s_per_gpu, self.row.measured_tok_s_per_gpu)

    @property
    def bound_holds(self) -> bool | None:
        if self.row.reasons:
            return None
        ratios = [r for r in (self.ratio_tok_s_per_request, self.ratio_tok_s_per_gpu) if r is not None]
        return all(r >= 1.0 for r in ratios)

    def to_record(self) -> dict[str, Any]:
        """Flat dict with unit-named keys (the JSON object and CSV row)."""
        s = self.row.setup
        return {
            "line": self.row.line,
            "model": self.row.model,
            "precision": self.row.precision,
            "gpu": self.row.gpu,
            "layout": self.row.layout,
            "mapped_layout": s.label if s else None,
            "model_card": s.model_card if s else None,
            "weight_bits": s.weight_bits if s else None,
            "kv_bits": s.kv_bits if s else None,
            "gpu_card": s.gpu_card if s else None,
            "tp": s.tp if s else None,
            "pp": s.pp if s else None,
            "ep": s.ep if s else None,
            "instances": s.instances if s else None,
            "batch_per_instance": s.batch if s else None,
            "context": s.context if s else None,
            "measured_tok_s_per_request": self.row.measured_tok_s_per_request,
            "predicted_tok_s_per_request": self.predicted_tok_s_per_request,
            "ratio_tok_s_per_request": self.ratio_tok_s_per_request,
            "measured_tok_s_per_gpu": self.row.measured_tok_s_per_gpu,
            "predicted_tok_s_per_gpu": self.predicted_tok_s_per_gpu,
            "ratio_tok_s_per_gpu": self.ratio_tok_s_per_gpu,
            "fits_in_memory": self.fits_in_memory,
            "bottleneck": self.bottleneck,
            "bound_holds": self.bound_holds,
            "speed_basis": s.speed_basis if s else None,
            "prefill_aware_tok_s_per_request": self.request_tok_s_per_request,
            "prefill_aware_ratio_tok_s_per_request": self.request_ratio_tok_s_per_request,
            "prefill_aware_tok_s_per_gpu": self.request_tok_s_per_gpu,
            "prefill_aware_bound_holds": self.request_bound_holds,
            "reason": "; ".join(self.row.reasons) or None,
        }


@dataclass(frozen=True)
class ValidationSummary:
    """Rows read, rows compared, how many the bound holds on, and the median predicted/measured speed ratio."""

    rows: int
    compared: int
    bounded: int
    median_ratio_tok_s_per_request: float | None
    request_bounded: int = 0
    request_median_ratio: float | None = None

    @property
    def fraction_bounded(self) -> float | None:
        return self.bounded / self.compared if self.compared else None

    def line(self) -> str:
        """The one-line summary the command prints."""
        if not self.compared:
            return f"validate: 0 of {self.rows} rows could be mapped to a setup"
        return (
            f"validate: {self.compared} of {self.rows} rows mapped ({self.rows - self.compared} listed with a "
            f"reason); bound holds on {self.bounded}/{self.compared} = {self.fraction_bounded:.0%}; median "
            f"predicted/measured tok/s per request {report.format_number(self.median_ratio_tok_s_per_request)}; "
            f"prefill-aware: bound holds on {self.request_bounded}/{self.compared}, median ratio "
            f"{report.format_number(self.request_median_ratio)}"
        )


def _ratio(predicted: float | None, measured: float | None) -> float | None:
    return None if predicted is None or measured is None else predicted / measured


@dataclass(frozen=True)
class SetupGroup:
    """Setups sharing model, precision and accelerator, evaluated in one vectorised call."""

    model: ModelSpec
    weight_bits: int
    kv_bits: int
    gpu_card: str
    indices: np.ndarray
    layout: evaluator.Layout
    batch: np.ndarray


def group_setups(setups: Sequence[MeasuredSetup]) -> list[SetupGroup]:
    keys: dict[tuple[str, int, int, str], list[int]] = {}
    for i, s in enumerate(setups):
        keys.setdefault((s.model_card, s.weight_bits, s.kv_bits, s.gpu_card), []).append(i)
    groups = []
    for (model, bits, kv_bits, gpu), indices in keys.items():
        chosen = [setups[i] for i in indices]

        def column(name: str, chosen: list[MeasuredSetup] = chosen) -> np.ndarray:
            return np.array([getattr(s, name) for s in chosen])

        layout = evaluator.Layout.of(column("tp"), False, column("pp"), column("context"), 1, column("ep"), kv_bits)
        spec = model_card(model)
        assert spec is not None  # map_row only builds setups of catalog models
        groups.append(SetupGroup(spec, bits, kv_bits, gpu, np.array(indices), layout, column("batch").astype(float)))
    return groups


def predict_group(
    groups: Sequence[SetupGroup], n: int, preset: Preset, gpu_for: Callable[[str], GpuSpec]
) -> dict[str, np.ndarray]:
    """tok/s per request and per GPU, memory fit and bottleneck of ``n`` setups (FP8 KV: a 1-byte KV cache)."""
    out = {
        "tok_s_per_request": np.zeros(n),
        "tok_s_per_gpu": np.zeros(n),
        "fits_in_memory": np.zeros(n, dtype=bool),
        "bottleneck": np.empty(n, dtype=object),
    }
    for g in groups:
        figures = evaluator.evaluate(g.model, gpu_for(g.gpu_card), preset, g.weight_bits, g.layout, g.batch)
        out["tok_s_per_request"][g.indices] = figures["tok_s_per_request"]
        out["tok_s_per_gpu"][g.indices] = figures["throughput_tok_s"] / figures["n_gpus"]
        out["fits_in_memory"][g.indices] = figures["fits_in_memory"]
        out["bottleneck"][g.indices] = figures["bottleneck"]
    return out


def validate(path: str | Path, preset: Preset = DEFAULT) -> list[ValidationRow]:
    """Every row of a measured-points CSV with the roofline's prediction where it maps to a setup."""
    rows = [map_row(cells) for cells in read_measured(path)]
    mapped = [r for r in rows if r.setup is not None]
    figures = predict_group(group_setups([r.setup for r in mapped]), len(mapped), preset, gpu_card)
    at = {r.line: i for i, r in enumerate(mapped)}
    results = []
    for r in rows:
        if r.setup is None:
            results.append(ValidationRow(r, None, None, None, None))
            continue
        i = at[r.line]
        per_request, per_gpu = request_prediction(r.setup, preset)
        results.append(
            ValidationRow(
                r,
                float(figures["tok_s_per_request"][i]),
                float(figures["tok_s_per_gpu"][i]),
                bool(figures["fits_in_memory"][i]),
                str(figures["bottleneck"][i]),
                per_request,
                per_gpu,
            )
        )
    return results


def summarise(rows: Sequence[ValidationRow]) -> ValidationSummary:
    """Counts and the median predicted/measured tok/s per request over the rows with a verdict."""
    judged = [r for r in rows if r.bound_holds is not None]
    ratios = [r.ratio_tok_s_per_request for r in judged if r.ratio_tok_s_per_request is not None]
    request_ratios = [r.request_ratio_tok_s_per_request for r in judged if r.request_ratio_tok_s_per_request]
    return ValidationSummary(
        rows=len(rows),
        compared=len(judged),
        bounded=sum(bool(r.bound_holds) for r in judged),
        median_ratio_tok_s_per_request=float(np.median(ratios)) if ratios else None,
        request_bounded=sum(bool(r.request_bound_holds) for r in judged),
        request_median_ratio=float(np.median(request_ratios)) if request_ratios else None,
    )
