"""Efficiency caps and the NCCL latency factor fitted to one accelerator's measured rows, written as a card."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from roofline_opt.errors import InvalidInput
from roofline_opt.fidelity.measured import MeasuredSetup, map_row, read_measured
from roofline_opt.fidelity.validate import group_setups, predict_group
from roofline_opt.physics.specs import DEFAULT, GpuSpec, Preset

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


class _Problem:
    """The rows of one accelerator that a fit uses: their distinct setups (each evaluated once per parameter point,
    and each point once: ``predicted`` is cached) and the measured tok/s per request of every row."""

    def __init__(self, setups: Sequence[MeasuredSetup], measured_tok_s_per_request: np.ndarray, gpu: GpuSpec) -> None:
        distinct = list(dict.fromkeys(setups))
        where = {s: i for i, s in enumerate(distinct)}
        self.groups = tuple(group_setups(distinct))
        self.n_setups = len(distinct)
        self.setup_of_row = np.array([where[s] for s in setups])
        self.measured_tok_s_per_request = measured_tok_s_per_request
        self.gpu = gpu
        self._predicted: dict[tuple[Preset, GpuSpec], np.ndarray] = {}

    def predicted(self, preset: Preset, gpu: GpuSpec | None = None) -> np.ndarray:
        spec = gpu or self.gpu
        key = (preset, spec)
        if key not in self._predicted:
            by_setup = predict_group(self.groups, self.n_setups, preset, lambda _: spec)["tok_s_per_request"]
            self._predicted[key] = by_setup
        return self._predicted[key][self.setup_of_row]

    def loss(self, values: Sequence[float] | np.ndarray, mask: np.ndarray | None = None) -> float:
        """Mean squared natural-log error of the rows in ``mask`` (all by default) at these parameter values."""
        errors = self.log_errors(_fit_preset(values))
        return float(np.mean(errors[mask] ** 2 if mask is not None else errors**2))

    def held_out_losses(self, values: Sequence[float] | np.ndarray, held_out: np.ndarray) -> np.ndarray:
        """``loss(values, mask)`` for each mask leaving out one row of ``held_out``: all rows' sum less that row's
        term (equal to the masked mean to rounding, at the cost of one sum for any number of rows)."""
        squares = self.log_errors(_fit_preset(values)) ** 2
        return (np.sum(squares) - squares[held_out]) / (len(squares) - 1)

    def log_errors(self, preset: Preset, gpu: GpuSpec | None = None) -> np.ndarray:
        return np.log(self.predicted(preset, gpu) / self.measured_tok_s_per_request)


Losses = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""Losses at one parameter point of several fits (members) at once: ``losses(values, members)``."""
ONE = np.zeros(1, dtype=int)
"""The members of a single fit."""


def _fit_preset(values: Sequence[float] | np.ndarray) -> Preset:
    fitted: dict[str, Any] = dict(zip(FIT_PARAMETERS, values, strict=True))  # FIT_PARAMETERS name Preset floats
    return replace(DEFAULT, **fitted)


def _default_values() -> np.ndarray:
    return np.array([getattr(DEFAULT, name) for name in FIT_PARAMETERS])


@dataclass
class _Search:
    """Where a coordinate search stands for the fits (members) that have taken the same steps so far."""

    members: np.ndarray
    x: np.ndarray
    best: np.ndarray
    width: int = 0
    position: int = 0
    improved: bool = False
    candidates: np.ndarray | None = None
    candidate: int = 0


def _coordinate_search(
    losses: Losses,
    members: np.ndarray,
    start: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
    free: Sequence[bool],
    steps: Sequence[float] = FIT_STEPS,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Minimise each member's loss over the free coordinates in log space: grids around the best point, shrinking
    (each grid swept coordinate by coordinate, again while a sweep improves). All members move in lockstep while they
    accept the same candidates and split where they differ, so each member follows the steps a search of its own
    would take. Returns (members, values) for each group that ended at the same point."""
    lo, hi = np.log(low), np.log(high)
    coordinates = np.flatnonzero(free)
    x = np.log(start)
    pending = [_Search(members, x, losses(np.exp(x), members))]
    done = []
    while pending:
        s = pending.pop()
        while s.width < len(steps):
            if s.position == len(coordinates):  # a sweep ended: again at this width if it improved, else narrower
                s.width += 0 if s.improved else 1
                s.position, s.improved = 0, False
                continue
            i = coordinates[s.position]
            if s.candidates is None:
                s.candidates = np.clip(s.x[i] + steps[s.width] * np.linspace(-1.0, 1.0, FIT_GRID), lo[i], hi[i])
                s.candidate = 0
            trial = s.x.copy()
            trial[i] = s.candidates[s.candidate]
            values = losses(np.exp(trial), s.members)
            better = values < s.best * (1 - 1e-12)
            if better.any():
                if not better.all():
                    rest = replace(s, members=s.members[~better], best=s.best[~better])
                    pending.append(_next_candidate(rest))
                    s.members, values = s.members[better], values[better]
                s.x, s.best, s.improved = trial, values, True
            _next_candidate(s)
        done.append((s.members, np.exp(s.x)))
    return done


def _next_candidate(s: _Search) -> _Search:
    s.candidate += 1
    if s.candidate == FIT_GRID:
        s.candidates, s.position = None, s.position + 1
    return s


def _fit_many(
    losses: Losses,
    members: np.ndarray,
    start: np.ndarray | None = None,
    steps: Sequence[float] = FIT_STEPS,
) -> list[tuple[np.ndarray, np.ndarray, tuple[str, ...]]]:
    """Fitted values and the parameters the rows identify, for each group of members ending at the same point; the
    parameters not identified are pinned at the default preset's values and the rest fitted again."""
    low = np.array([FIT_BOUNDS[name][0] for name in FIT_PARAMETERS])
    high = np.array([FIT_BOUNDS[name][1] for name in FIT_PARAMETERS])
    pending = [(members, (True,) * len(FIT_PARAMETERS))]
    out = []
    while pending:
        group, free = pending.pop()
        begin = _default_values() if start is None else np.where(free, start, _default_values())
        for ended, values in _coordinate_search(losses, group, begin, low, high, free, steps):
            base = losses(values, ended)
            flat = np.zeros((len(ended), len(FIT_PARAMETERS)), dtype=bool)
            for i in np.flatnonzero(free):
                moved = [np.clip(values[i] * f, low[i], high[i]) for f in (1.2, 1 / 1.2)]
                changes = [losses(np.where(np.arange(len(values)) == i, v, values), ended) - base for v in moved]
                flat[:, i] = np.maximum(*changes) <= IDENTIFIED_LOSS_CHANGE
            for pattern in np.unique(flat, axis=0):
                same = ended[(flat == pattern).all(axis=1)]
                if not pattern.any():
                    out.append((same, values, tuple(n for n, f in zip(FIT_PARAMETERS, free, strict=True) if f)))
                else:
                    pending.append((same, tuple(f and not p for f, p in zip(free, pattern, strict=True))))
    return out


def _fit(problem: _Problem) -> tuple[np.ndarray, tuple[str, ...]]:
    """The fit to every row: fitted values and the parameters the rows identify."""
    ((_, values, identified),) = _fit_many(lambda v, _: np.array([problem.loss(v)]), ONE)
    return values, identified


def _leave_one_out(problem: _Problem, values: np.ndarray) -> np.ndarray:
    """Each row's log error under the fit to the other rows (started from the full fit, finer grids only)."""
    rows = np.arange(len(problem.measured_tok_s_per_request))
    held_out = np.empty(len(rows))
    for members, fitted, _ in _fit_many(problem.held_out_losses, rows, start=values, steps=LOO_STEPS):
        held_out[members] = problem.log_errors(_fit_preset(fitted))[members]
    return held_out


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
    ((_, best),) = _coordinate_search(lambda h, _: np.array([mismatch(h)]), ONE, np.array([1e-6]), low, high, [True])
    return float(best[0]) if mismatch(best) < mismatch(np.array([0.0])) else 0.0


def calibrate(path: str | Path, gpu: GpuSpec, card_name: str | None = None) -> tuple[CalibrationFit, GpuSpec]:
    """Fit the efficiency caps to the rows of ``gpu`` in a measured-points CSV; the fit and a card carrying it.

    Only rows checked at a stated batch, aggregated, without speculation or an assumed length
    are fitted (a ceiling is not a point, and an assumed context is not a measured one)."""
    rows = [(r, s) for r in map(map_row, read_measured(path)) if (s := r.setup) is not None and not r.reasons]
    rows = [(r, s) for r, s in rows if s.check == "point" and s.serving == "aggregated"]
    rows = [(r, s) for r, s in rows if not (s.mtp_depth or s.assumptions)]
    chosen = [(r, s) for r, s in rows if s.gpu_card == gpu.name and r.measured_tok_s_per_request is not None]
    if not chosen:
        found = sorted({s.gpu_card for _, s in rows}) or ["none"]
        msg = f"must be an accelerator the file has mapped rows of ({', '.join(found)}). Got {gpu.name!r} instead."
        raise InvalidInput("--gpu", msg)
    measured = np.array([r.measured_tok_s_per_request for r, _ in chosen])
    problem = _Problem([s for _, s in chosen], measured, gpu)
    values, identified = _fit(problem)
    loo = _rms(_leave_one_out(problem, values)) if len(chosen) > 1 else None
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
