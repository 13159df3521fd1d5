"""The roofline bound checked against measured serving figures: a prediction and a verdict per mapped row.

Each mapped row gets the check its figures allow (``measured.CHECKS``): at a stated batch the prediction there; at
maximum load the best tok/s per GPU of any batch fitting in memory; with a per-user speed but no batch the most
tok/s per GPU among fitting batches at least that fast. Predicted per-GPU figures are an instance's throughput times
the row's instances over all the GPUs it names (prefill GPUs of a disaggregated deployment included).

The verdict checks the roofline as an upper bound: the preset's physics at 100% of peak FLOP/s and HBM bandwidth
(a tuned engine may sustain more than the paper's 70% / 75%; no engine beats the peak). The preset's own figures are
the realistic estimate, reported next to it as ``estimate_ratio``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from roofline_opt.fidelity import whole_requests
from roofline_opt.fidelity.measured import MeasuredRow, MeasuredSetup, gpu_card, map_row, model_card, read_measured
from roofline_opt.physics import evaluator
from roofline_opt.physics.mtp import mtp_module
from roofline_opt.physics.profiles import EngineProfile
from roofline_opt.physics.specs import DEFAULT, GpuSpec, ModelSpec, Preset

DENSE_SWEEP_BATCHES = 1 << 17
"""Batches up to this are swept one by one; beyond it (wide data-parallel groups), geometrically by 0.1%."""


@dataclass(frozen=True)
class Prediction:
    """The evaluator's figures a verdict rests on, the batch they belong to, and the swept curve (for plots)."""

    tok_s_per_request: float | None
    tok_s_per_gpu: float | None
    fits_in_memory: bool | None
    bottleneck: str | None
    batch: int | None = None
    largest_fitting_batch: int | None = None
    explanation: str | None = None
    curve_tok_s_per_request: np.ndarray | None = None
    curve_tok_s_per_gpu: np.ndarray | None = None
    ttft_s: float | None = None
    """Time to first token at ``batch`` where the row's model has one (whole requests), else None."""


NO_PREDICTION = Prediction(None, None, None, None)


@dataclass(frozen=True)
class ValidationRow:
    """A measured row next to the roofline's figures for its setup: ``prediction`` at 100% of peak FLOP/s and HBM
    bandwidth (the bound the verdict checks), ``estimate`` with the preset's efficiencies (how close our realistic
    figures come). ``bound_holds`` is None with a reason."""

    row: MeasuredRow
    prediction: Prediction = NO_PREDICTION
    estimate: Prediction = NO_PREDICTION

    @property
    def predicted_tok_s_per_request(self) -> float | None:
        return self.prediction.tok_s_per_request

    @property
    def predicted_tok_s_per_gpu(self) -> float | None:
        return self.prediction.tok_s_per_gpu

    @property
    def check(self) -> str | None:
        return self.row.setup.check if self.row.setup and not self.row.reasons else None

    @property
    def ratio_tok_s_per_request(self) -> float | None:
        return _ratio(self.predicted_tok_s_per_request, self.row.measured_tok_s_per_request)

    @property
    def ratio_tok_s_per_gpu(self) -> float | None:
        return _ratio(self.predicted_tok_s_per_gpu, self.row.measured_tok_s_per_gpu)

    @property
    def ratio(self) -> float | None:
        """Bound over measured for the figure(s) the verdict compares (the smaller where it compares two)."""
        return self._compared_ratio(self.prediction)

    @property
    def estimate_ratio(self) -> float | None:
        """The realistic estimate over measured, for the same figure(s) as ``ratio``."""
        return self._compared_ratio(self.estimate)

    def _compared_ratio(self, p: Prediction) -> float | None:
        if self.check is None:
            return None
        per_request = _ratio(p.tok_s_per_request, self.row.measured_tok_s_per_request)
        per_gpu = _ratio(p.tok_s_per_gpu, self.row.measured_tok_s_per_gpu)
        by_check = {
            "point": (per_request, per_gpu),
            "throughput ceiling": (per_gpu,),
            "frontier": (per_request,) if p.explanation else (per_gpu,),
            "speed ceiling": (per_request,),
        }
        ratios = [r for r in by_check[self.check] if r is not None]
        return min(ratios) if ratios else None

    @property
    def bound_holds(self) -> bool | None:
        if self.check is None:
            return None
        if self.prediction.explanation is not None:
            return False
        ratio = self.ratio
        return None if ratio is None else ratio >= 1.0

    def to_record(self) -> dict[str, Any]:
        """Flat dict with unit-named keys (the JSON object and CSV row)."""
        s = self.row.setup
        p = self.prediction
        return {
            "line": self.row.line,
            "model": self.row.model,
            "precision": self.row.precision,
            "gpu": self.row.gpu,
            "layout": self.row.layout,
            "framework": self.row.framework,
            "mapped_layout": s.label if s else None,
            "model_card": s.model_card if s else None,
            "weight_bits": s.weight_bits if s else None,
            "kv_bits": s.kv_bits if s else None,
            "bound_kv_bits": s.for_bound().kv_bits if s else None,
            "gpu_card": s.gpu_card if s else None,
            "tp": s.tp if s else None,
            "pp": s.pp if s else None,
            "ep": s.ep if s else None,
            "dp_attention": s.dp_attention if s else None,
            "a2a_overlap": s.a2a_overlap if s else None,
            "instances": s.instances if s else None,
            "total_gpus": s.gpus_in_all if s else None,
            "serving": s.serving if s else None,
            "mtp_depth": s.mtp_depth if s else None,
            "mtp_acceptance": s.acceptance if s and s.mtp_depth else None,
            "batch_per_instance": s.batch if s else None,
            "predicted_at_batch": p.batch,
            "largest_fitting_batch": p.largest_fitting_batch,
            "context": s.context if s else None,
            "check": self.check,
            "measured_tok_s_per_request": self.row.measured_tok_s_per_request,
            "predicted_tok_s_per_request": p.tok_s_per_request,
            "ratio_tok_s_per_request": self.ratio_tok_s_per_request,
            "measured_tok_s_per_gpu": self.row.measured_tok_s_per_gpu,
            "predicted_tok_s_per_gpu": p.tok_s_per_gpu,
            "ratio_tok_s_per_gpu": self.ratio_tok_s_per_gpu,
            "ratio": self.ratio,
            "estimated_tok_s_per_request": self.estimate.tok_s_per_request,
            "estimated_tok_s_per_gpu": self.estimate.tok_s_per_gpu,
            "estimate_ratio": self.estimate_ratio,
            "measured_ttft_s": self.row.measured_ttft_s,
            "estimated_ttft_s": self.estimate.ttft_s,
            "fits_in_memory": p.fits_in_memory,
            "bottleneck": p.bottleneck,
            "bound_holds": self.bound_holds,
            "why_not_bounded": p.explanation,
            "assumptions": ("; ".join(s.notes + s.bound_assumptions) or None) if s else None,
            "speed_basis": s.speed_basis if s else None,
            "static_batch": s.static_batch if s else None,
            "reason": "; ".join(self.row.reasons) or None,
        }


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
    """Setups with a batch, grouped for one vectorised call per model, precision and accelerator."""
    keys: dict[tuple[str, int, int, str], list[int]] = {}
    for i, s in enumerate(setups):
        keys.setdefault((s.model_card, s.weight_bits, s.kv_bits, s.gpu_card), []).append(i)
    groups = []
    for (model, bits, kv_bits, gpu), indices in keys.items():
        chosen = [setups[i] for i in indices]

        def column(name: str, chosen: list[MeasuredSetup] = chosen) -> np.ndarray:
            return np.array([getattr(s, name) for s in chosen])

        layout = evaluator.Layout.of(
            column("tp"),
            False,
            column("pp"),
            column("context"),
            1,
            column("ep"),
            kv_bits,
            dp_attention=column("dp_attention"),
            a2a_overlap=column("a2a_overlap"),
        )
        spec = model_card(model)
        assert spec is not None  # map_row only builds setups of catalog models
        groups.append(SetupGroup(spec, bits, kv_bits, gpu, np.array(indices), layout, column("batch").astype(float)))
    return groups


def predict_group(
    groups: Sequence[SetupGroup], n: int, preset: Preset, gpu_for: Callable[[str], GpuSpec]
) -> dict[str, np.ndarray]:
    """tok/s per request and per instance GPU, memory fit and bottleneck of ``n`` setups with a batch (no MTP)."""
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


def _evaluate(s: MeasuredSetup, preset: Preset, batch) -> dict[str, np.ndarray]:
    """Every figure of the row's instance at the given batches: whole requests where the row states its lengths
    (``whole_requests``), else decoding at the row's context (its MTP draft included)."""
    model = model_card(s.model_card)
    assert model is not None  # map_row only builds setups of catalog models
    layout = evaluator.Layout.of(
        s.tp, False, s.pp, s.context, 1, s.ep, s.kv_bits, dp_attention=s.dp_attention, a2a_overlap=s.a2a_overlap
    )
    gpu = gpu_card(s.gpu_card)

    def decode(batches) -> dict[str, np.ndarray]:
        return evaluator.evaluate(
            model,
            gpu,
            preset,
            s.weight_bits,
            layout,
            np.asarray(batches, dtype=float),
            draft=mtp_module(model) if s.mtp_depth else None,
            acceptance=s.acceptance,
            gamma_max=s.mtp_depth if s.mtp_best_depth else 0,
            gamma=None if s.mtp_best_depth or not s.mtp_depth else s.mtp_depth,
            draft_weight_bits=s.draft_weight_bits or s.weight_bits,
        )

    if whole_requests.applies(s):
        return whole_requests.figures(s, model, gpu, preset, layout, batch, decode)
    return decode(batch)


def largest_fitting_batch(s: MeasuredSetup, preset: Preset) -> int:
    """The most sequences one instance holds in memory (0 if not even one); memory is affine in the batch."""
    f = _evaluate(s, preset, [1.0, 2.0])
    parts = ("weights_bytes_per_device", "kv_cache_bytes_per_device", "activations_bytes_per_device")
    used = np.broadcast_to(sum(f[k] for k in parts), (2,))
    per_seq = float(used[1] - used[0])
    room = float(np.broadcast_to(f["memory_capacity_bytes"], (2,))[0] - (used[0] - per_seq))
    if not np.broadcast_to(f["fits_in_memory"], (2,))[0]:
        return 0
    batch = max(int(room // per_seq), 1) if per_seq > 0 else DENSE_SWEEP_BATCHES
    while batch > 1 and not bool(np.ravel(_evaluate(s, preset, [batch])["fits_in_memory"])[0]):
        batch -= 1
    return batch


def _sweep_batches(top: int) -> np.ndarray:
    dense = np.arange(1, min(top, DENSE_SWEEP_BATCHES) + 1, dtype=float)
    if top <= DENSE_SWEEP_BATCHES:
        return dense
    sparse = np.unique(np.floor(np.geomspace(DENSE_SWEEP_BATCHES, top, 2000)))
    return np.unique(np.concatenate([dense, sparse, [float(top)]]))


CURVE_POINTS = 256
"""Points of the swept curve a prediction keeps for plots (log-spaced over the swept batches, ends included); the
checks themselves read every swept batch."""
SWEPT = ("tok_s_per_request", "throughput_tok_s", "fits_in_memory", "bottleneck", "ttft_s")
"""The figures of a sweep the checks read, where the model gives them (a whole figures dict of 10^5 batches is some
20 MB; only whole requests have a TTFT)."""


def _shape(s: MeasuredSetup) -> MeasuredSetup:
    """What the evaluator's figures of one instance depend on: the setup without its batch, cap, copies and check
    (a disaggregated row's decode instances share its prefill pool: their number stays)."""
    copies = s.instances if s.serving == "disaggregated" else 1
    return replace(
        s, batch=None, batch_cap=None, instances=copies, total_gpus=0, check="point", assumptions=(), clients=None
    )


def _curve_indices(n: int) -> np.ndarray:
    return np.unique(np.round(np.geomspace(1, n, min(n, CURVE_POINTS))).astype(int) - 1)


class Predictor:
    """Predictions under one preset, each distinct setup evaluated once: rows differing only in their batch, batch
    cap, number of instances or check share one batch sweep (and its largest fitting batch), and a row at a stated
    batch reads its figures from that sweep when the batch is swept."""

    def __init__(self, preset: Preset) -> None:
        self.preset = preset
        self._tops: dict[MeasuredSetup, int] = {}
        self._sweeps: dict[tuple[MeasuredSetup, int], tuple[np.ndarray, dict[str, np.ndarray]]] = {}
        self._curves: dict[tuple[MeasuredSetup, int, int, int], dict[str, Any]] = {}
        self._predictions: dict[tuple[MeasuredSetup, float | None], Prediction] = {}

    def top(self, s: MeasuredSetup) -> int:
        shape = _shape(s)
        if shape not in self._tops:
            self._tops[shape] = largest_fitting_batch(shape, self.preset)
        return self._tops[shape]

    def sweep(self, s: MeasuredSetup, top: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        key = (_shape(s), top)
        if key not in self._sweeps:
            batches = _sweep_batches(max(top, 1))
            figures = _evaluate(key[0], self.preset, batches)
            self._sweeps[key] = batches, {k: np.broadcast_to(figures[k], batches.shape) for k in SWEPT if k in figures}
        return self._sweeps[key]

    def predict(self, s: MeasuredSetup, measured_per_request: float | None) -> Prediction:
        """``predict(s, measured_per_request, preset)``, from the shared sweeps."""
        key = (s, measured_per_request if s.check == "frontier" else None)
        if key not in self._predictions:
            self._predictions[key] = self._predict(s, measured_per_request)
        return self._predictions[key]

    def _predict(self, s: MeasuredSetup, measured_per_request: float | None) -> Prediction:
        top = self.top(s)
        if s.batch_cap is not None:
            top = min(top, s.batch_cap)
        batches, sweep = self.sweep(s, top)
        per_gpu = sweep["throughput_tok_s"] * s.instances / s.gpus_in_all
        speed = sweep["tok_s_per_request"]
        curve_key = (_shape(s), top, s.instances, s.gpus_in_all)
        if curve_key not in self._curves:
            kept = _curve_indices(len(batches))
            self._curves[curve_key] = {
                "curve_tok_s_per_request": speed[kept],
                "curve_tok_s_per_gpu": per_gpu[kept],
                "largest_fitting_batch": top,
            }
        curve = self._curves[curve_key]
        if s.check == "point":
            assert s.batch is not None  # a point check has a batch
            share = s.clients / s.instances if s.clients else float(s.batch)
            if share != s.batch:
                # the instances share the stated clients unevenly: the prediction at their mean share
                f, i = _evaluate(s, self.preset, [share]), 0
            elif top <= DENSE_SWEEP_BATCHES and 1 <= s.batch <= len(batches):
                f, i = sweep, s.batch - 1  # batches[i] == s.batch
            else:
                f, i = _evaluate(s, self.preset, [float(s.batch)]), 0
            return Prediction(
                float(f["tok_s_per_request"][i]),
                float(f["throughput_tok_s"][i] * s.instances / s.gpus_in_all),
                bool(f["fits_in_memory"][i]),
                str(f["bottleneck"][i]),
                batch=s.batch,
                ttft_s=_ttft(f, i),
                **curve,
            )
        nothing_fits = "the model does not fit in memory on this layout even at batch 1" if top < 1 else None
        if s.check == "throughput ceiling" or (s.check == "frontier" and top < 1):
            i = int(np.argmax(per_gpu))
        elif s.check == "frontier":
            fast_enough = speed >= measured_per_request
            if not fast_enough.any():
                fastest = f"{speed.max():.4g}"
                why = f"no batch fitting in memory reaches the measured tok/s per user (fastest: {fastest})"
                return _at(sweep, per_gpu, batches, 0, why, curve)
            i = int(np.argmax(np.where(fast_enough, per_gpu, -np.inf)))
        else:
            i = 0
        return _at(sweep, per_gpu, batches, i, nothing_fits, curve)


def predict(s: MeasuredSetup, measured_per_request: float | None, preset: Preset) -> Prediction:
    """The figures the row's check compares, from the evaluator."""
    return Predictor(preset).predict(s, measured_per_request)


def _at(sweep, per_gpu, batches, i: int, why: str | None, curve: dict) -> Prediction:
    return Prediction(
        float(sweep["tok_s_per_request"][i]),
        float(per_gpu[i]),
        bool(sweep["fits_in_memory"][i]),
        str(sweep["bottleneck"][i]),
        batch=int(batches[i]),
        explanation=why,
        ttft_s=_ttft(sweep, i),
        **curve,
    )


def _ttft(figures: dict[str, np.ndarray], i: int) -> float | None:
    return float(np.ravel(figures["ttft_s"])[i]) if "ttft_s" in figures else None


def validate(
    path: str | Path | list[dict[str, str]],
    preset: Preset = DEFAULT,
    profile_of: Callable[[str], EngineProfile | None] | None = None,
) -> list[ValidationRow]:
    """Every row of a measured-points CSV (or rows already read: ``measurements.read_any``) with the roofline's bound
    (``preset`` at peak FLOP/s and HBM bandwidth, unstated settings read favourably: ``MeasuredSetup.for_bound``) and
    its realistic estimate (``preset`` itself) where it maps to a setup. ``profile_of``: the engine profile of a row's
    framework text, whose preset on the row's accelerator then gives the estimate (None, or a row it gives no
    profile: ``preset``); the bound stays ``preset``'s. A row whose launch script sets the engine's memory fraction
    (``MeasuredSetup.kv_memory_rule``) is estimated under that preset with the script's KV-memory rule in place of the
    preset's or profile's."""
    bound = preset.at_peak()
    at_peak, realistic = Predictor(bound), {preset: Predictor(preset)}
    out = []
    for row in map(map_row, read_measured(path)):
        if row.setup is None:
            out.append(ValidationRow(row))
            continue
        profile = None if profile_of is None else profile_of(row.framework)
        own = preset if profile is None else profile.preset_named(row.setup.gpu_card)
        if row.setup.kv_memory_rule is not None:
            own = replace(own, kv_memory_rule=row.setup.kv_memory_rule)
        bound_setup = row.setup.for_bound()
        upper = at_peak.predict(bound_setup, row.measured_tok_s_per_request)
        same = bound is own and bound_setup is row.setup
        if own not in realistic:
            realistic[own] = Predictor(own)
        estimate = upper if same else realistic[own].predict(row.setup, row.measured_tok_s_per_request)
        out.append(ValidationRow(row, upper, estimate))
    return out
