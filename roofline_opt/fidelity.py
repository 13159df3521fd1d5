"""How far to trust the roofline: measured serving figures against it, efficiency fits, the paper's headline results
and the answer's sensitivity to contested assumptions.

``validate`` maps each row of a measured-points CSV (columns of ``shared/reference/measured_points.csv``) to a setup
and checks the roofline bound (prediction >= measurement). ``calibrate`` fits the FLOP and HBM efficiency caps and
the NCCL latency factor to one accelerator's rows and writes an accelerator card that carries the fit. ``reproduce``
compares our integer frontiers with the notebook's continuous headline numbers (model-notes section 8).
``sensitivity`` re-solves a frontier with the contested assumptions moved. Only the public API is used.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from roofline_opt import api, catalog, files, report
from roofline_opt.errors import InvalidInput
from roofline_opt.physics import evaluator
from roofline_opt.physics.specs import DEFAULT, GpuSpec, ModelSpec, Preset

# ----------------------------------------------------------------------------------------------- measured rows

MEASURED_COLUMNS = (
    "model",
    "precision",
    "gpu",
    "layout",
    "batch_or_concurrency",
    "input_len",
    "output_len",
    "tok_s_per_request",
    "tok_s_per_gpu",
)
"""Columns a measured-points CSV must have (``n_gpus``, ``framework`` and ``notes`` are read when present)."""

MODEL_ALIASES = {
    "llama-2-70b-chat": "llama-2-70b",
    "llama-3.3-70b-instruct": "llama-3.3-70b",
    "llama-3.1-405b-instruct": "llama-3.1-405b",
    "deepseek-r1": "deepseek-v3",
    "deepseek-r1-0528": "deepseek-v3",
    "deepseek-v3/r1": "deepseek-v3",
}
"""Normalised measured model names -> catalog cards where they differ (other names are looked up as they are)."""

GPU_PATTERNS = (
    ("gb200", "gb200"),
    ("b200", "b200"),
    ("h100", "h100-sxm"),
    ("h200", "h200"),
    ("h800", "h800"),
    ("a100", "a100-80gb"),
    ("mi325x", "mi325x"),
    ("mi300x", "mi300x"),
    ("v100", "v100"),
)
"""Substring of a lower-cased measured GPU name -> catalog card, first match wins (GB200 before B200)."""

PRECISION_BITS = {"nvfp4": 4, "mxfp4": 4, "fp4": 4, "int4": 4, "fp8": 8, "int8": 8, "bf16": 16, "fp16": 16}
"""Weight precision of a measured row: the first of these words its precision text names."""

_PRECISION_RE = re.compile("|".join(PRECISION_BITS))
_FP8_KV_RE = re.compile(r"fp8\s*kv|fp8 \(weights\+kv\)")
_SPECULATIVE_RE = re.compile(r"\bspeculative\b|\bmtp(-?\d+)?\s+(on|enabled|included)", re.IGNORECASE)
_BATCH_RE = re.compile(r"(?:static batch|batch|concurrency)\s+(\d+)|^~?(\d+)\s+in flight")
_NUMBER_RE = re.compile(r"^~?\s*(\d+(?:\.\d+)?)")


@dataclass(frozen=True)
class MeasuredSetup:
    """What a measured row describes, in catalog terms: one instance of ``tp * pp`` GPUs, ``instances`` of them."""

    model_card: str
    weight_bits: int
    kv_bits: int
    gpu_card: str
    tp: int
    pp: int
    ep: int
    instances: int
    batch: int
    context: int

    @property
    def n_gpus(self) -> int:
        return self.tp * self.pp

    @property
    def label(self) -> str:
        extra = f" ep{self.ep}" if self.ep > 1 else ""
        copies = f" x{self.instances}" if self.instances > 1 else ""
        return f"tp{self.tp} pp{self.pp}{extra}{copies}"


@dataclass(frozen=True)
class MeasuredRow:
    """One CSV row: its line, names as written, the measured speeds, and the setup (None with the reasons why)."""

    line: int
    model: str
    precision: str
    gpu: str
    layout: str
    measured_tok_s_per_request: float | None
    measured_tok_s_per_gpu: float | None
    setup: MeasuredSetup | None
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class ValidationRow:
    """A measured row next to the roofline's prediction for its setup; ``bound_holds`` is None with a reason."""

    row: MeasuredRow
    predicted_tok_s_per_request: float | None
    predicted_tok_s_per_gpu: float | None
    fits_in_memory: bool | None
    bottleneck: str | None

    @property
    def ratio_tok_s_per_request(self) -> float | None:
        return _ratio(self.predicted_tok_s_per_request, self.row.measured_tok_s_per_request)

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
            "reason": "; ".join(self.row.reasons) or None,
        }


@dataclass(frozen=True)
class ValidationSummary:
    """Rows read, rows compared, how many the bound holds on, and the median predicted/measured speed ratio."""

    rows: int
    compared: int
    bounded: int
    median_ratio_tok_s_per_request: float | None

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
            f"predicted/measured tok/s per request {report.format_number(self.median_ratio_tok_s_per_request)}"
        )


def _ratio(predicted: float | None, measured: float | None) -> float | None:
    return None if predicted is None or measured is None else predicted / measured


def _number(text: str) -> float | None:
    match = _NUMBER_RE.match(text.strip())
    return float(match.group(1)) if match else None


def _normalise(name: str) -> str:
    """``"DeepSeek-R1 (671B MoE)"`` -> ``"deepseek-r1"``: lower case, remarks dropped, blanks as dashes."""
    return re.sub(r"[\s_]+", "-", re.sub(r"\(.*?\)", "", name).strip().lower())


@cache
def _model_card(card: str) -> ModelSpec | None:
    try:
        return catalog.load_model(card)
    except InvalidInput:
        return None


@cache
def _gpu_card(card: str) -> GpuSpec:
    return catalog.load_gpu(card)


def read_measured(path: str | Path, field: str = "--measured") -> list[dict[str, str]]:
    """The rows of a measured-points CSV as text cells with their line numbers; bad files are InvalidInput."""
    frame = files.read_csv_cells(path, field, MEASURED_COLUMNS, "measurement")
    return [row | {"line": str(line)} for line, row in enumerate(frame.to_dict("records"), start=2)]


def _map_model(text: str, reasons: list[str]) -> ModelSpec | None:
    name = _normalise(text)
    model = _model_card(MODEL_ALIASES.get(name, name)) if name else None
    if model is None:
        reasons.append(f"model {text!r} has no catalog card")
    return model


def _map_precision(text: str, reasons: list[str]) -> tuple[int, int] | None:
    """(weight bits, KV-cache bits) from a precision text such as ``"FP8 (weights+KV)"``."""
    low = text.lower()
    match = _PRECISION_RE.search(low)
    if match is None:
        reasons.append(f"precision {text!r} names no weight format")
        return None
    return PRECISION_BITS[match.group(0)], 8 if _FP8_KV_RE.search(low) else 16


def _map_gpu(text: str, reasons: list[str]) -> str | None:
    low = text.lower()
    card = next((card for pattern, card in GPU_PATTERNS if pattern in low), None)
    if card is None:
        reasons.append(f"gpu {text!r} has no catalog card")
    return card


def _map_layout(text: str, n_gpus: str, model: ModelSpec | None, reasons: list[str]) -> tuple[int, ...] | None:
    """(tp, pp, ep, instances) from a layout such as ``"TP2 x 4 instances"`` or ``"TP8, MoE EP4"``."""
    low = text.lower()
    if re.search(r"prefill|disagg", low):
        reasons.append(f"layout {text!r} is disaggregated prefill/decode: one instance does not model it")
        return None
    found = {key: re.search(rf"\b{key}\s*(\d+)", low) for key in ("tp", "pp", "ep")}
    if found["tp"] is None:
        reasons.append(f"layout {text!r} gives no tensor-parallel degree TPn")
        return None
    tp, pp, ep = (int(m.group(1)) if m else 1 for m in found.values())
    copies = re.search(r"x\s*(\d+)\s*instances?", low)
    instances = int(copies.group(1)) if copies else 1
    stated = _number(n_gpus)
    if stated is not None and stated != tp * pp * instances:
        reasons.append(f"layout {text!r} uses {tp * pp * instances} GPUs but n_gpus is {n_gpus}")
        return None
    if ep > 1 and model is not None and (not model.is_moe or model.n_experts % ep or tp % ep):
        reasons.append(f"layout {text!r}: EP{ep} must divide TP{tp} and the experts of a MoE model")
        return None
    return tp, pp, ep, instances


def _map_batch(text: str, instances: int, pp: int, reasons: list[str]) -> int | None:
    match = _BATCH_RE.search(text.lower())
    if match is None:
        reasons.append(f"batch {text!r} states no batch or concurrency")
        return None
    batch = max(round(int(match.group(1) or match.group(2)) / instances), 1)
    if batch < pp:
        reasons.append(f"batch {batch} per instance is smaller than the pipeline degree {pp}")
        return None
    return batch


def _map_lengths(input_len: str, output_len: str, reasons: list[str]) -> int | None:
    """Mean context during decode: input + output / 2."""
    lengths = _number(input_len), _number(output_len)
    for name, text, value in zip(("input_len", "output_len"), (input_len, output_len), lengths, strict=True):
        if value is None:
            reasons.append(f"{name} {text!r} is not a number of tokens")
    if None in lengths:
        return None
    return round(lengths[0] + lengths[1] / 2)


def map_row(cells: Mapping[str, str]) -> MeasuredRow:
    """A measured row in catalog terms; every problem found is listed in ``reasons``."""
    text = {k: str(cells.get(k, "")).strip() for k in (*MEASURED_COLUMNS, "n_gpus", "framework", "notes", "line")}
    reasons: list[str] = []
    model = _map_model(text["model"], reasons)
    bits = _map_precision(text["precision"], reasons)
    gpu_card = _map_gpu(text["gpu"], reasons)
    if bits is not None and gpu_card is not None and not _gpu_card(gpu_card).supports(bits[0]):
        reasons.append(f"gpu {gpu_card} has no FLOP rate for {bits[0]}-bit weights")
    layout = _map_layout(text["layout"], text["n_gpus"], model, reasons)
    batch = _map_batch(text["batch_or_concurrency"], layout[3], layout[1], reasons) if layout else None
    context = _map_lengths(text["input_len"], text["output_len"], reasons)
    per_request, per_gpu = _number(text["tok_s_per_request"]), _number(text["tok_s_per_gpu"])
    if per_request is None and per_gpu is None:
        reasons.append("no measured tok/s per request or per GPU")
    setup = None
    if None not in (model, bits, gpu_card, layout, batch, context) and not reasons:
        tp, pp, ep, instances = layout
        setup = MeasuredSetup(model.name, bits[0], bits[1], gpu_card, tp, pp, ep, instances, batch, context)
        extra = " ".join((text["layout"], text["framework"], text["notes"]))
        if _SPECULATIVE_RE.search(extra):
            reasons.append("measured with speculative decoding (MTP): a one-token-per-step roofline does not bound it")
    return MeasuredRow(
        line=int(text["line"] or 0),
        model=text["model"],
        precision=text["precision"],
        gpu=text["gpu"],
        layout=text["layout"],
        measured_tok_s_per_request=per_request,
        measured_tok_s_per_gpu=per_gpu,
        setup=setup,
        reasons=tuple(reasons),
    )


# ----------------------------------------------------------------------------------------------- prediction


@dataclass(frozen=True)
class _Group:
    """Setups sharing model, precision and accelerator, evaluated in one vectorised call."""

    model: ModelSpec
    weight_bits: int
    kv_bits: int
    gpu_card: str
    indices: np.ndarray
    layout: evaluator.Layout
    batch: np.ndarray


def _groups(setups: Sequence[MeasuredSetup]) -> list[_Group]:
    keys: dict[tuple[str, int, int, str], list[int]] = {}
    for i, s in enumerate(setups):
        keys.setdefault((s.model_card, s.weight_bits, s.kv_bits, s.gpu_card), []).append(i)
    groups = []
    for (model, bits, kv_bits, gpu), indices in keys.items():
        chosen = [setups[i] for i in indices]

        def column(name: str, chosen: list[MeasuredSetup] = chosen) -> np.ndarray:
            return np.array([getattr(s, name) for s in chosen])

        layout = evaluator.Layout.of(column("tp"), False, column("pp"), column("context"), 1, column("ep"))
        spec = _model_card(model)
        assert spec is not None  # map_row only builds setups of catalog models
        groups.append(_Group(spec, bits, kv_bits, gpu, np.array(indices), layout, column("batch").astype(float)))
    return groups


def _predict(
    groups: Sequence[_Group], n: int, preset: Preset, gpu_for: Callable[[str], GpuSpec]
) -> dict[str, np.ndarray]:
    """tok/s per request and per GPU, memory fit and bottleneck of ``n`` setups (FP8 KV: 1-byte activations)."""
    out = {
        "tok_s_per_request": np.zeros(n),
        "tok_s_per_gpu": np.zeros(n),
        "fits_in_memory": np.zeros(n, dtype=bool),
        "bottleneck": np.empty(n, dtype=object),
    }
    for g in groups:
        physics = replace(preset, activation_bytes=g.kv_bits / 8) if g.kv_bits < 16 else preset
        figures = evaluator.evaluate(g.model, gpu_for(g.gpu_card), physics, g.weight_bits, g.layout, g.batch)
        out["tok_s_per_request"][g.indices] = figures["tok_s_per_request"]
        out["tok_s_per_gpu"][g.indices] = figures["throughput_tok_s"] / figures["n_gpus"]
        out["fits_in_memory"][g.indices] = figures["fits_in_memory"]
        out["bottleneck"][g.indices] = figures["bottleneck"]
    return out


def validate(path: str | Path, preset: Preset = DEFAULT) -> list[ValidationRow]:
    """Every row of a measured-points CSV with the roofline's prediction where it maps to a setup."""
    rows = [map_row(cells) for cells in read_measured(path)]
    mapped = [r for r in rows if r.setup is not None]
    figures = _predict(_groups([r.setup for r in mapped]), len(mapped), preset, _gpu_card)
    at = {r.line: i for i, r in enumerate(mapped)}
    results = []
    for r in rows:
        if r.setup is None:
            results.append(ValidationRow(r, None, None, None, None))
            continue
        i = at[r.line]
        results.append(
            ValidationRow(
                r,
                float(figures["tok_s_per_request"][i]),
                float(figures["tok_s_per_gpu"][i]),
                bool(figures["fits_in_memory"][i]),
                str(figures["bottleneck"][i]),
            )
        )
    return results


def summarise(rows: Sequence[ValidationRow]) -> ValidationSummary:
    """Counts and the median predicted/measured tok/s per request over the rows with a verdict."""
    judged = [r for r in rows if r.bound_holds is not None]
    ratios = [r.ratio_tok_s_per_request for r in judged if r.ratio_tok_s_per_request is not None]
    return ValidationSummary(
        rows=len(rows),
        compared=len(judged),
        bounded=sum(bool(r.bound_holds) for r in judged),
        median_ratio_tok_s_per_request=float(np.median(ratios)) if ratios else None,
    )


# ----------------------------------------------------------------------------------------------- calibration

FIT_PARAMETERS = ("flop_efficiency", "hbm_efficiency", "network_latency_factor")
FIT_BOUNDS = {"flop_efficiency": (0.05, 1.0), "hbm_efficiency": (0.05, 1.0), "network_latency_factor": (0.1, 10.0)}
FIT_STEPS = (1.0, 0.3, 0.1, 0.03, 0.01, 0.003, 0.001, 0.0003)
"""Half-widths (natural-log units) of the coordinate search's grids, coarse to fine."""
LOO_STEPS = FIT_STEPS[2:]
"""Leave-one-out refits start from the full fit, which one row moves little, with the finer grids only."""
FIT_GRID = 9
IDENTIFIED_LOSS_CHANGE = 1e-6
"""A parameter is identified when moving it by 20% raises the mean squared log error by more than this."""
HOP_LATENCY_BOUNDS_S = (1e-8, 1e-3)


@dataclass(frozen=True)
class CalibrationFit:
    """Fitted efficiency caps, which the rows identify, and the errors (rms of natural-log speed ratios)."""

    gpu: str
    rows: int
    flop_efficiency: float
    hbm_efficiency: float
    network_latency_factor: float
    identified: tuple[str, ...]
    default_rms_log_error: float
    fitted_rms_log_error: float
    leave_one_out_rms_log_error: float | None
    card_rms_log_error: float
    hop_latency_s: float

    def values(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in FIT_PARAMETERS}


@dataclass(frozen=True)
class _Problem:
    """The rows of one accelerator that a fit uses: grouped setups and measured tok/s per request."""

    groups: tuple[_Group, ...]
    measured_tok_s_per_request: np.ndarray
    gpu: GpuSpec

    def predicted(self, preset: Preset, gpu: GpuSpec | None = None) -> np.ndarray:
        spec = gpu or self.gpu
        return _predict(self.groups, len(self.measured_tok_s_per_request), preset, lambda _: spec)["tok_s_per_request"]

    def loss(self, values: Sequence[float], mask: np.ndarray | None = None) -> float:
        """Mean squared natural-log error of the rows in ``mask`` (all by default) at these parameter values."""
        errors = self.log_errors(_fit_preset(values))
        return float(np.mean(errors[mask] ** 2 if mask is not None else errors**2))

    def log_errors(self, preset: Preset, gpu: GpuSpec | None = None) -> np.ndarray:
        return np.log(self.predicted(preset, gpu) / self.measured_tok_s_per_request)


def _fit_preset(values: Sequence[float]) -> Preset:
    return replace(DEFAULT, **dict(zip(FIT_PARAMETERS, values, strict=True)))


def _default_values() -> np.ndarray:
    return np.array([getattr(DEFAULT, name) for name in FIT_PARAMETERS])


def _coordinate_search(
    loss: Callable[[np.ndarray], float],
    start: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
    free: Sequence[bool],
    steps: Sequence[float] = FIT_STEPS,
) -> np.ndarray:
    """Minimise ``loss`` over the free coordinates in log space: grids around the best point, shrinking."""
    x, lo, hi = np.log(start), np.log(low), np.log(high)
    best = loss(np.exp(x))
    for width in steps:
        improved = True
        while improved:
            improved = False
            for i in np.flatnonzero(free):
                for candidate in np.clip(x[i] + width * np.linspace(-1.0, 1.0, FIT_GRID), lo[i], hi[i]):
                    trial = x.copy()
                    trial[i] = candidate
                    value = loss(np.exp(trial))
                    if value < best * (1 - 1e-12):
                        best, x, improved = value, trial, True
    return np.exp(x)


def _fit(
    problem: _Problem,
    mask: np.ndarray | None = None,
    start: np.ndarray | None = None,
    steps: Sequence[float] = FIT_STEPS,
) -> tuple[np.ndarray, tuple[str, ...]]:
    """Fitted values and the parameters the rows identify; the others are pinned at the default preset's values."""
    low = np.array([FIT_BOUNDS[name][0] for name in FIT_PARAMETERS])
    high = np.array([FIT_BOUNDS[name][1] for name in FIT_PARAMETERS])
    free = [True] * len(FIT_PARAMETERS)

    def loss(values: np.ndarray) -> float:
        return problem.loss(values, mask)

    while True:
        begin = _default_values() if start is None else np.where(free, start, _default_values())
        values = _coordinate_search(loss, begin, low, high, free, steps)
        base = loss(values)
        flat = []
        for i in np.flatnonzero(free):
            moved = [np.clip(values[i] * f, low[i], high[i]) for f in (1.2, 1 / 1.2)]
            changes = [loss(np.where(np.arange(len(values)) == i, v, values)) - base for v in moved]
            if max(changes) <= IDENTIFIED_LOSS_CHANGE:
                flat.append(i)
        if not flat:
            return values, tuple(name for name, f in zip(FIT_PARAMETERS, free, strict=True) if f)
        for i in flat:
            free[i] = False


def _card_with_fit(gpu: GpuSpec, values: np.ndarray, hop_latency_s: float, name: str, source: str) -> GpuSpec:
    """``gpu`` with peak rates scaled by fitted / default efficiency and ``hop_latency_s`` added per collective."""
    fitted = dict(zip(FIT_PARAMETERS, values, strict=True))
    flop_scale = fitted["flop_efficiency"] / DEFAULT.flop_efficiency
    hbm_scale = fitted["hbm_efficiency"] / DEFAULT.hbm_efficiency
    return replace(
        gpu,
        name=name,
        display_name=f"{gpu.display_name or gpu.name} (calibrated)",
        flop_per_s_by_bits={bits: float(rate * flop_scale) for bits, rate in gpu.flop_per_s_by_bits.items()},
        hbm_bytes_per_s=float(gpu.hbm_bytes_per_s * hbm_scale),
        intra_hop_latency_s=float(gpu.intra_hop_latency_s + hop_latency_s),
        inter_hop_latency_s=float(gpu.inter_hop_latency_s + hop_latency_s),
        source=source,
    )


def _hop_latency(problem: _Problem, values: np.ndarray) -> float:
    """Added seconds per collective call that best reproduce the fitted latency factor (0 for a factor <= 1)."""
    # an added latency only slows, so a factor below the default's cannot be carried by a card
    if values[2] <= DEFAULT.network_latency_factor:
        return 0.0
    target = problem.predicted(_fit_preset(values))
    scaled = _fit_preset([values[0], values[1], DEFAULT.network_latency_factor])

    def mismatch(h: np.ndarray) -> float:
        card = replace(
            problem.gpu,
            intra_hop_latency_s=problem.gpu.intra_hop_latency_s + h[0],
            inter_hop_latency_s=problem.gpu.inter_hop_latency_s + h[0],
        )
        return float(np.mean(np.log(problem.predicted(scaled, card) / target) ** 2))

    low, high = (np.array([b]) for b in HOP_LATENCY_BOUNDS_S)
    best = _coordinate_search(mismatch, np.array([1e-6]), low, high, [True])
    return float(best[0]) if mismatch(best) < mismatch(np.array([0.0])) else 0.0


def calibrate(path: str | Path, gpu: GpuSpec, card_name: str | None = None) -> tuple[CalibrationFit, GpuSpec]:
    """Fit the efficiency caps to the rows of ``gpu`` in a measured-points CSV; the fit and a card carrying it."""
    rows = [r for r in map(map_row, read_measured(path)) if r.setup is not None and not r.reasons]
    chosen = [r for r in rows if r.setup.gpu_card == gpu.name and r.measured_tok_s_per_request is not None]
    if not chosen:
        found = sorted({r.setup.gpu_card for r in rows}) or ["none"]
        msg = f"must be an accelerator the file has mapped rows of ({', '.join(found)}). Got {gpu.name!r} instead."
        raise InvalidInput("--gpu", msg)
    measured = np.array([r.measured_tok_s_per_request for r in chosen])
    problem = _Problem(tuple(_groups([r.setup for r in chosen])), measured, gpu)
    values, identified = _fit(problem)
    loo = None
    if len(chosen) > 1:
        held_out = []
        for i in range(len(chosen)):
            keep = np.arange(len(chosen)) != i
            fitted_without = _fit(problem, keep, start=values, steps=LOO_STEPS)[0]
            held_out.append(problem.log_errors(_fit_preset(fitted_without))[i])
        loo = float(np.sqrt(np.mean(np.square(held_out))))
    hop = _hop_latency(problem, values)
    source = (
        f"calibrated by roofline-opt calibrate from {gpu.name} and {len(chosen)} rows of {Path(path).name}: fitted "
        f"flop_efficiency {values[0]:.3f}, hbm_efficiency {values[1]:.3f}, network_latency_factor {values[2]:.3f} "
        f"(identified: {', '.join(identified) or 'none'}). Use with the default preset: flop_per_s_by_bits is scaled "
        f"by {values[0]:.3f}/{DEFAULT.flop_efficiency} and hbm_bytes_per_s by {values[1]:.3f}/"
        f"{DEFAULT.hbm_efficiency}; the latency factor is carried as {hop * 1e6:.2f} us added hop latency per "
        f"collective call (fitted to reproduce the factor on these rows; a factor below 1 cannot be carried)."
    )
    card = _card_with_fit(gpu, values, hop, card_name or f"{gpu.name}-calibrated", source)
    fit = CalibrationFit(
        gpu=gpu.name,
        rows=len(chosen),
        flop_efficiency=float(values[0]),
        hbm_efficiency=float(values[1]),
        network_latency_factor=float(values[2]),
        identified=identified,
        default_rms_log_error=_rms(problem.log_errors(DEFAULT)),
        fitted_rms_log_error=_rms(problem.log_errors(_fit_preset(values))),
        leave_one_out_rms_log_error=loo,
        card_rms_log_error=_rms(problem.log_errors(DEFAULT, card)),
        hop_latency_s=hop,
    )
    return fit, card


def _rms(errors: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(errors))))


def card_yaml(gpu: GpuSpec) -> str:
    """An accelerator card (every GpuSpec field) as the YAML ``--gpu path/to/card.yaml`` reads."""
    return yaml.safe_dump(asdict(gpu), sort_keys=False, allow_unicode=True, width=120)


# ----------------------------------------------------------------------------------------------- reproduce


@dataclass(frozen=True)
class NotebookFigures:
    """One row of model-notes section 8: the notebook's continuous-N grid-search headline numbers."""

    max_tok_s_per_request: float
    usd_per_mtok_at_max: float
    n_gpus: float
    batch: float
    cheapest_usd_per_mtok: float


@dataclass(frozen=True)
class PaperCase:
    """One comparison: a frontier question (paper preset) and the notebook's numbers for it.

    ``context`` None takes the context chosen for the notebook's unstated default; ``draft_mqa`` turns the draft into
    its multi-query variant (one KV head) as the notebook's Mistral Large 2 draft is.
    """

    key: str
    label: str
    model: str
    gpu: str
    notebook: NotebookFigures
    context: int | None = None
    draft: str | None = None
    draft_mqa: bool = False
    gamma_max: int = 0
    observed: tuple[tuple[str, float, float], ...] = ()


CASES = (
    PaperCase(
        "llama-3-70b",
        "Llama 3 70B",
        "llama-3-70b",
        "h100-sxm",
        NotebookFigures(125.0, 70.3, 31.9, 2.1, 0.083),
        observed=(("provider Llama 3 70B", 158.0, 0.90),),
    ),
    PaperCase("llama-3-8b", "Llama 3 8B", "llama-3-8b", "h100-sxm", NotebookFigures(483.6, 3.07, 7.6, 3.0, 0.0094)),
    PaperCase(
        "llama-3-70b-int8",
        "Llama 3 70B 8-bit",
        "llama-3-70b-int8",
        "h100-sxm",
        NotebookFigures(155.0, 9.82, 7.8, 3.0, 0.041),
    ),
    PaperCase(
        "llama-3-70b-int4",
        "Llama 3 70B 4-bit",
        "llama-3-70b-int4",
        "h100-sxm",
        NotebookFigures(195.3, 5.46, 7.0, 3.8, 0.041),
    ),
    PaperCase(
        "llama-3.1-405b",
        "Llama 3.1 405B",
        "llama-3.1-405b",
        "h100-sxm",
        NotebookFigures(57.1, 421.8, 127.2, 3.1, 0.498),
    ),
    PaperCase(
        "mixtral-8x22b",
        "Mixtral 8x22B",
        "mixtral-8x22b",
        "h100-sxm",
        NotebookFigures(189.3, 44.2, 14.3, 1.0, 0.046),
        observed=(("provider Mixtral 8x22B", 89.25, 1.20),),
    ),
    PaperCase(
        "mistral-large-2-100k",
        "Mistral Large 2, 100K context",
        "mistral-large-2",
        "h100-sxm",
        NotebookFigures(96.3, 174.4, 31.6, 1.1, 9.84),
        context=100_000,
    ),
    PaperCase(
        "llama-3.1-405b-int8-h100",
        "Llama 3.1 405B 8-bit, H100",
        "llama-3.1-405b-int8",
        "h100-sxm",
        NotebookFigures(66.5, 148.0, 31.7, math.nan, 0.24),
    ),
    PaperCase(
        "llama-3.1-405b-int8-a100",
        "Llama 3.1 405B 8-bit, A100",
        "llama-3.1-405b-int8",
        "a100-80gb",
        NotebookFigures(58.9, 240.0, 47.6, math.nan, 0.55),
    ),
    PaperCase(
        "llama-3.1-405b-int8-v100",
        "Llama 3.1 405B 8-bit, V100",
        "llama-3.1-405b-int8",
        "v100",
        NotebookFigures(49.7, 234.0, 103.0, math.nan, 1.01),
    ),
    PaperCase(
        "mistral-large-2-100k-specdec",
        "Mistral Large 2, 100K + spec. decoding",
        "mistral-large-2",
        "h100-sxm",
        NotebookFigures(160.3, 28.3, 16.0, 2.1, 4.30),
        context=100_000,
        draft="llama-3-8b",
        draft_mqa=True,
        gamma_max=20,
    ),
    PaperCase(
        "llama-3-70b-specdec",
        "Llama 3 70B + spec. decoding",
        "llama-3-70b",
        "h100-sxm",
        NotebookFigures(201.5, 15.1, 15.6, 3.0, 0.083),
        draft="llama-3-8b",
        gamma_max=20,
    ),
    PaperCase(
        "llama-3.1-405b-specdec",
        "Llama 3.1 405B + spec. decoding",
        "llama-3.1-405b",
        "h100-sxm",
        NotebookFigures(112.6, 38.6, 31.4, 4.2, 0.498),
        draft="llama-3-8b",
        gamma_max=20,
    ),
)
"""The notebook's headline comparisons (model-notes section 8); speculative decoding with a Llama 3 8B draft at
acceptance 0.8 and gamma <= 20. The notes give B "~1-2" for the 405B 8-bit rows: NaN here."""

CONTEXT_CANDIDATES = (0, 2000, 8000)
CONTEXT_PROBE = CASES[0]
"""The notes do not state the notebook's default context: it is chosen on Llama 3 70B among these candidates."""
UTILITY_EXPONENT = 4.0
REPRODUCE_MAX_BATCH = 16_384
"""The notebook's cheapest figures are compute-bound floors; a MoE reaches its floor only beyond 4096 sequences
(Mixtral 8x22B: 0.0524 $/Mtok at batch 4096, 0.0460 at 16384, notebook 0.046)."""


def _question(case: PaperCase, context: int) -> api.Question:
    draft: str | ModelSpec | None = case.draft
    if case.draft is not None and case.draft_mqa:
        base, _ = catalog.resolve_model(case.draft, "draft")
        draft = replace(base, name=f"{base.name}-mqa", group_size=base.n_q_heads)
    ctx = case.context if case.context is not None else context
    return api.question(
        case.model,
        case.gpu,
        context=ctx,
        draft=draft,
        gamma_max=case.gamma_max,
        preset="paper",
        max_batch=REPRODUCE_MAX_BATCH,
    )


def _rel(ours: float, theirs: float) -> float:
    return ours / theirs - 1.0 if theirs and not math.isnan(theirs) else math.nan


def choose_context(candidates: Sequence[int] = CONTEXT_CANDIDATES) -> tuple[int, pd.DataFrame]:
    """The context nearest the notebook on Llama 3 70B (|log ratio| of max speed + of cheapest) and every candidate."""
    nb = CONTEXT_PROBE.notebook
    rows = []
    for context in candidates:
        q = _question(CONTEXT_PROBE, context)
        fastest, cheapest = api.fastest_answer(q), api.cheapest_answer(q)
        rows.append(
            {
                "context": context,
                "max_tok_s_per_request": fastest.tok_s_per_request,
                "max_rel_diff": _rel(fastest.tok_s_per_request, nb.max_tok_s_per_request),
                "cheapest_usd_per_mtok": cheapest.usd_per_mtok,
                "cheapest_rel_diff": _rel(cheapest.usd_per_mtok, nb.cheapest_usd_per_mtok),
            }
        )
    table = pd.DataFrame(rows)
    score = np.abs(np.log1p(table["max_rel_diff"])) + np.abs(np.log1p(table["cheapest_rel_diff"]))
    table["score"] = score
    return int(table.loc[int(np.argmin(score.to_numpy())), "context"]), table


def _setup_text(row: Mapping[str, Any]) -> str:
    """``"16x h100-sxm 16b tp16 pp1 B1"`` for a frontier row (``-2d`` marks 2-D TP, ``g`` the draft length)."""
    tp = f"tp{int(row['tp'])}{'-2d' if bool(row['tp_2d']) else ''}"
    ep = f" ep{int(row['ep'])}" if int(row["ep"]) > 1 else ""
    gamma = f" g{int(row['gamma'])}" if int(row["gamma"]) > 0 else ""
    return (
        f"{int(row['n_gpus'])}x {row['gpu']} {int(row['weight_bits'])}b {tp} pp{int(row['pp'])}{ep} "
        f"B{int(row['batch'])}{gamma}"
    )


def preferred_row(frame: pd.DataFrame, utility_exponent: float) -> pd.Series:
    """The frontier row maximising speed^a / price (model-notes section 7)."""
    score = utility_exponent * np.log(frame["tok_s_per_request"]) - np.log(frame["usd_per_mtok"])
    return frame.iloc[int(np.argmax(score.to_numpy()))]


def compare_case(case: PaperCase, context: int, points: int) -> tuple[dict[str, Any], pd.DataFrame]:
    """Our frontier for one case and its comparison row against the notebook's numbers."""
    q = _question(case, context)
    frame = api.frontier_frame(q, points=points, utility_exponent=UTILITY_EXPONENT)
    top = frame.iloc[int(np.argmax(frame["tok_s_per_request"].to_numpy()))]
    nb = case.notebook
    at_nb_speed = math.nan
    if top["tok_s_per_request"] >= nb.max_tok_s_per_request:
        at_nb_speed = api.cheapest_answer(q, min_tok_s=nb.max_tok_s_per_request).usd_per_mtok
    best = preferred_row(frame, UTILITY_EXPONENT)
    cheapest = float(frame["usd_per_mtok"].min())
    row = {
        "case": case.label,
        "context": q.context,
        "max_tok_s_per_request": float(top["tok_s_per_request"]),
        "nb_max_tok_s_per_request": nb.max_tok_s_per_request,
        "max_rel_diff": _rel(float(top["tok_s_per_request"]), nb.max_tok_s_per_request),
        "usd_per_mtok_at_max": float(top["usd_per_mtok"]),
        "nb_usd_per_mtok_at_max": nb.usd_per_mtok_at_max,
        "usd_per_mtok_at_nb_max_speed": at_nb_speed,
        "n_gpus_at_max": int(top["n_gpus"]),
        "nb_n_gpus_at_max": nb.n_gpus,
        "batch_at_max": int(top["batch"]),
        "nb_batch_at_max": nb.batch,
        "setup_at_max": _setup_text(top),
        "cheapest_usd_per_mtok": cheapest,
        "nb_cheapest_usd_per_mtok": nb.cheapest_usd_per_mtok,
        "cheapest_rel_diff": _rel(cheapest, nb.cheapest_usd_per_mtok),
        "preferred_tok_s_per_request": float(best["tok_s_per_request"]),
        "preferred_usd_per_mtok": float(best["usd_per_mtok"]),
        "preferred_setup": _setup_text(best),
    }
    return row, frame


@dataclass(frozen=True)
class Reproduction:
    """The comparison table, the context choice behind it and how long it took."""

    comparison: pd.DataFrame
    context: int
    context_table: pd.DataFrame | None
    seconds: float
    points: int


def _pct(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:+.1%}"


def _num(value: Any) -> str:
    return report.format_number(value)


def comparison_markdown(result: Reproduction) -> str:
    """The report: the context choice and every case, ours (integer N) next to the notebook's (continuous N)."""
    lines = [
        "# Reproduction of the paper's headline results (model-notes section 8)",
        "",
        "Our frontiers: `paper` preset, whole GPUs and real degrees (TP 1-64, 1-D/2-D, PP 1-8, batch <= "
        f"{REPRODUCE_MAX_BATCH}), {result.points} budget points each, preferred point = max speed^"
        f"{UTILITY_EXPONENT:g} / price. Notebook: continuous-N grid search. Relative differences are ours / "
        f"notebook - 1. Total time {result.seconds:.1f} s.",
        "",
    ]
    if result.context_table is not None:
        lines += [
            "## Context",
            "",
            "The notes do not state the notebook's context. Candidates on Llama 3 70B (notebook: 125.0 tok/s max, "
            "0.083 $/Mtok cheapest):",
            "",
            "| context | our max tok/s | vs notebook | our cheapest $/Mtok | vs notebook |",
            "|---:|---:|---:|---:|---:|",
        ]
        for r in result.context_table.to_dict("records"):
            lines.append(
                f"| {r['context']} | {_num(r['max_tok_s_per_request'])} | {_pct(r['max_rel_diff'])} | "
                f"{_num(r['cheapest_usd_per_mtok'])} | {_pct(r['cheapest_rel_diff'])} |"
            )
        closest = result.context_table.loc[result.context_table["max_rel_diff"].abs().idxmin(), "context"]
        lines += [
            "",
            f"Max speed alone barely depends on context (batch 1 reads little KV cache); it is closest at context "
            f"{closest}. The cheapest $/Mtok does depend on it, and the notebook's cheapest figures (0.083, 0.0094, "
            "0.041, 0.24 ...) are the compute-bound floors 2 x params x price / FLOP rate that only a near-empty KV "
            f"cache reaches. Chosen (smallest sum of |log ratio| of both): context {result.context}.",
            "",
        ]
    else:
        lines += [f"Context {result.context} (given).", ""]
    lines += [
        "## Comparison",
        "",
        "| case | max tok/s (nb) | diff | $/Mtok at max (nb) | ours at nb's speed | N (nb) | B (nb) | "
        "cheapest $/Mtok (nb) | diff | preferred tok/s @ $/Mtok | preferred setup |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in result.comparison.to_dict("records"):
        lines.append(
            f"| {r['case']} | {_num(r['max_tok_s_per_request'])} ({_num(r['nb_max_tok_s_per_request'])}) | "
            f"{_pct(r['max_rel_diff'])} | {_num(r['usd_per_mtok_at_max'])} ({_num(r['nb_usd_per_mtok_at_max'])}) | "
            f"{_num(r['usd_per_mtok_at_nb_max_speed'])} | {r['n_gpus_at_max']} ({_num(r['nb_n_gpus_at_max'])}) | "
            f"{r['batch_at_max']} ({_num(r['nb_batch_at_max'])}) | {_num(r['cheapest_usd_per_mtok'])} "
            f"({_num(r['nb_cheapest_usd_per_mtok'])}) | {_pct(r['cheapest_rel_diff'])} | "
            f"{_num(r['preferred_tok_s_per_request'])} @ {_num(r['preferred_usd_per_mtok'])} | "
            f"{r['preferred_setup']} |"
        )
    lines += [
        "",
        "Our fastest setups run batch 1 on whole GPUs; the notebook's grid lands a little below the top speed at "
        "batch 2-4, where cost per token is several times lower, so the `$/Mtok at max` columns differ most. "
        "`ours at nb's speed` is our cheapest setup at the notebook's max speed (where we reach it).",
        "",
    ]
    return "\n".join(lines)


def ensure_out_dir(path: str | Path, field: str = "--out") -> Path:
    """The folder ``path``, created if missing; a file there or an uncreatable folder is InvalidInput."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise InvalidInput(field, f"must be a folder. Got {str(out)!r} instead (a file).")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidInput(field, f"cannot create {str(out)!r}: {exc.strerror or exc}") from exc
    return out


def reproduce(
    out_dir: str | Path,
    cases: Sequence[PaperCase] = CASES,
    context: int | None = None,
    points: int = 30,
    progress: Callable[[int, int], None] | None = None,
) -> Reproduction:
    """Every case's frontier (CSV, PNG) and the comparison (CSV, markdown) written to ``out_dir``."""
    out = ensure_out_dir(out_dir)
    start = time.perf_counter()
    context_table = None
    if context is None:
        context, context_table = choose_context()
    rows = []
    for done, case in enumerate(cases, start=1):
        row, frame = compare_case(case, context, points)
        rows.append(row)
        if progress is not None:
            progress(done, len(cases))
        files.write_text_atomic(out / f"{case.key}.csv", frame.to_csv(index=False), field="--out")
        nb = case.notebook
        observed = pd.DataFrame(
            [("notebook max (continuous N)", nb.max_tok_s_per_request, nb.usd_per_mtok_at_max), *case.observed],
            columns=["label", "tok_s_per_request", "usd_per_mtok"],
        )
        preferred = f"preferred (a={UTILITY_EXPONENT:g}): {row['preferred_setup']}"
        report.plot_frontier(
            frame,
            out / f"{case.key}.png",
            title=f"{case.label} ({case.gpu}, paper preset)",
            preferred_label=preferred,
            observed=observed,
            field="--out",
        )
    result = Reproduction(pd.DataFrame(rows), context, context_table, time.perf_counter() - start, points)
    files.write_text_atomic(out / "comparison.csv", result.comparison.to_csv(index=False), field="--out")
    files.write_text_atomic(out / "reproduce.md", comparison_markdown(result), field="--out")
    return result


# ----------------------------------------------------------------------------------------------- sensitivity


@dataclass(frozen=True)
class Variant:
    """One moved assumption: how it changes the question, and the utility exponent choosing the preferred point."""

    group: str
    label: str
    change: Callable[[api.Question], api.Question]
    utility_exponent: float = UTILITY_EXPONENT


def _preset_change(**fields: float) -> Callable[[api.Question], api.Question]:
    return lambda q: replace(q, preset=replace(q.preset, **fields))


def _same(q: api.Question) -> api.Question:
    return q


CAPS = (0.5, 0.7, 1.0)
"""Efficiency caps tried for FLOP/s and HBM bandwidth."""


def variants(with_draft: bool) -> list[Variant]:
    """The contested assumptions of model-notes sections 4-7, each moved both ways."""
    out = [
        Variant("baseline", "as given", _same),
        Variant("all-reduce", "2-D TP only", lambda q: replace(q, tp_modes=(True,))),
        Variant("all-reduce", "1-D TP only", lambda q: replace(q, tp_modes=(False,))),
        Variant("all-reduce", "all-reduce time x0.5", _preset_change(allreduce_time_factor=0.5)),
        Variant("all-reduce", "all-reduce time x2", _preset_change(allreduce_time_factor=2.0)),
        *(Variant("FLOP efficiency", f"flop_efficiency {v:g}", _preset_change(flop_efficiency=v)) for v in CAPS),
        *(Variant("HBM efficiency", f"hbm_efficiency {v:g}", _preset_change(hbm_efficiency=v)) for v in CAPS),
        Variant("NCCL latency", "latency x0.5", _preset_change(network_latency_factor=0.5)),
        Variant("NCCL latency", "latency x2", _preset_change(network_latency_factor=2.0)),
        Variant("kernel launch", "launch x0.5", _preset_change(kernel_launch_factor=0.5)),
        Variant("kernel launch", "launch x2", _preset_change(kernel_launch_factor=2.0)),
    ]
    if with_draft:
        out += [
            Variant("acceptance", f"acceptance {a:g}", lambda q, a=a: replace(q, acceptance=a)) for a in (0.6, 0.7, 0.9)
        ]
    out += [Variant("utility exponent", f"exponent {a:g}", _same, a) for a in (2.0, 3.0, 4.0, 5.0)]
    return out


CHANGE_COLUMNS = {
    "max_rel_change": "max_tok_s_per_request",
    "cheapest_rel_change": "cheapest_usd_per_mtok",
    "preferred_rel_change": "preferred_tok_s_per_request",
}
"""Changes against the baseline (variant / baseline - 1) the sensitivity table adds."""


@dataclass(frozen=True)
class Sensitivity:
    """One row per variant and each variant's frontier (variants with the same question share one)."""

    table: pd.DataFrame
    frontiers: dict[str, pd.DataFrame]


def sensitivity(
    q: api.Question,
    points: int = 20,
    chosen: Sequence[Variant] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Sensitivity:
    """How the fastest, cheapest and preferred setups move when each contested assumption moves."""
    chosen = list(chosen) if chosen is not None else variants(q.draft is not None)
    solved: dict[tuple[Any, ...], pd.DataFrame] = {}
    rows, frontiers = [], {}
    for done, v in enumerate(chosen, start=1):
        varied = v.change(q)
        key = (varied.preset, varied.tp_modes, varied.acceptance)
        if key not in solved:
            solved[key] = api.frontier_frame(varied, points=points)
        frame = solved[key]
        if progress is not None:
            progress(done, len(chosen))
        frontiers[v.label] = frame
        top = frame.iloc[int(np.argmax(frame["tok_s_per_request"].to_numpy()))]
        best = preferred_row(frame, v.utility_exponent)
        rows.append(
            {
                "group": v.group,
                "variant": v.label,
                "max_tok_s_per_request": float(top["tok_s_per_request"]),
                "usd_per_mtok_at_max": float(top["usd_per_mtok"]),
                "setup_at_max": _setup_text(top),
                "cheapest_usd_per_mtok": float(frame["usd_per_mtok"].min()),
                "preferred_tok_s_per_request": float(best["tok_s_per_request"]),
                "preferred_usd_per_mtok": float(best["usd_per_mtok"]),
                "preferred_setup": _setup_text(best),
            }
        )
    table = pd.DataFrame(rows)
    base = table.iloc[0]
    for name, column in CHANGE_COLUMNS.items():
        table[name] = table[column] / base[column] - 1.0
    table["preferred_moved"] = table["preferred_setup"] != base["preferred_setup"]
    return Sensitivity(table, frontiers)


def plot_sensitivity(result: Sensitivity, path: str | Path, title: str) -> None:
    """One panel per group of assumptions: baseline (black) and variant frontiers, preferred points starred."""
    from matplotlib.figure import Figure

    groups = [g for g in dict.fromkeys(result.table["group"]) if g != "baseline"]
    columns = 3
    rows = math.ceil(len(groups) / columns)
    figure = Figure(figsize=(5 * columns, 3.8 * rows), layout="constrained")
    figure.suptitle(title)
    base = result.frontiers[result.table.iloc[0]["variant"]]
    for n, group in enumerate(groups):
        ax = figure.add_subplot(rows, columns, n + 1)
        ax.plot(base["tok_s_per_request"], base["usd_per_mtok"], "-", color="k", lw=1.2, label="baseline")
        if group != "utility exponent":
            start = result.table.iloc[0]
            ax.scatter(
                [start["preferred_tok_s_per_request"]],
                [start["preferred_usd_per_mtok"]],
                marker="*",
                s=120,
                color="k",
                zorder=4,
                label="preferred, baseline",
            )
        for i, v in enumerate(result.table[result.table["group"] == group].to_dict("records")):
            frame = result.frontiers[v["variant"]]
            color = f"C{i}"
            if frame is not base:
                ax.plot(
                    frame["tok_s_per_request"],
                    frame["usd_per_mtok"],
                    "o-",
                    ms=2.5,
                    lw=1,
                    color=color,
                    label=v["variant"],
                )
            label = None if frame is not base else f"preferred, {v['variant']}"
            point = [v["preferred_tok_s_per_request"]], [v["preferred_usd_per_mtok"]]
            ax.scatter(*point, marker="*", s=120, color=color, zorder=4, label=label)
        ax.set_yscale("log")
        ax.set_title(group)
        ax.set_xlabel("tokens per second per request")
        ax.set_ylabel("$ per million output tokens")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    files.save_figure_atomic(figure, path, field="--out")
