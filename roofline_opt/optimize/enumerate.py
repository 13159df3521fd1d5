"""Brute-force oracle: the exact evaluator over every point of the discrete space, filtered, then the best one.

The MIP is tested against this, and ``--method enumerate`` exposes it. Each layout is evaluated at every whole
batch from its pipeline degree to ``max_batch`` in one vectorised call per (accelerator, precision).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from roofline_opt.optimize.results import Answer, Setup, reevaluate
from roofline_opt.optimize.space import Layouts, Question, layouts, replica_caps
from roofline_opt.physics import evaluator as ev

CHUNK_CELLS = 2_000_000


@dataclass(frozen=True)
class Points:
    """Every feasible (layout, batch) with its exact time per token and cost."""

    layouts: Layouts
    layout_index: np.ndarray
    batch: np.ndarray
    time_per_token_s: np.ndarray
    usd_per_mtok: np.ndarray

    def subset(self, mask: np.ndarray) -> Points:
        """The points where ``mask`` holds (same layouts table)."""
        return Points(self.layouts, self.layout_index[mask], self.batch[mask], self.time_per_token_s[mask],
                      self.usd_per_mtok[mask])  # fmt: skip


def feasible_points(question: Question) -> Points:
    """Evaluate and keep the points that fit in memory, respect the batch range, limits and demand."""
    lay = layouts(question)
    batches = np.arange(1, question.max_batch + 1, dtype=float)
    keep_j, keep_b, keep_t, keep_c = [], [], [], []
    caps = replica_caps(question, lay)
    for gi, bits, group in lay.groups():
        gpu = question.gpus[gi]
        idx_all = group[caps[group] >= 1]
        step = max(1, CHUNK_CELLS // len(batches))
        for start in range(0, len(idx_all), step):
            idx = idx_all[start : start + step]
            col = idx[:, None]
            layout = ev.Layout.of(lay.tp[col], lay.tp_2d[col], lay.pp[col], question.context, 1.0, lay.ep[col])
            gamma = lay.gamma[col].astype(float)
            tau = ev.time_per_token_with_gamma(
                question.model,
                gpu,
                question.preset,
                bits,
                layout,
                batches[None, :],
                gamma,
                question.draft,
                question.acceptance,
            )
            tau = np.broadcast_to(tau, (len(idx), len(batches)))
            fits = ev.memory(question.model, gpu, question.preset, bits, layout, batches[None, :]).fits
            if question.draft is not None:
                with_draft = ev.memory(
                    question.model, gpu, question.preset, bits, layout, batches[None, :], question.draft
                )
                fits = np.where(gamma > 0, with_draft.fits, fits)
            ok = np.broadcast_to(fits, tau.shape) & (batches[None, :] >= lay.pp[col])
            if question.demand_tok_s is not None:
                throughput = batches[None, :] / tau
                ok &= throughput <= question.demand_tok_s * (1 + 1e-12)
                ok &= np.ceil(question.demand_tok_s / throughput - 1e-9) <= caps[col]
            rows, cols = np.nonzero(ok)
            j = idx[rows]
            keep_j.append(j)
            keep_b.append(batches[cols])
            keep_t.append(tau[rows, cols])
            keep_c.append(1e6 * lay.n_gpus[j] * gpu.usd_per_s * tau[rows, cols] / batches[cols])
    return Points(lay, _cat(keep_j, int), _cat(keep_b, float), _cat(keep_t, float), _cat(keep_c, float))


def _cat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


def _setup(question: Question, pts: Points, i: int) -> Setup:
    lay, j = pts.layouts, int(pts.layout_index[i])
    return Setup(
        gpu=question.gpus[int(lay.gpu_index[j])].name,
        weight_bits=int(lay.weight_bits[j]),
        tp=int(lay.tp[j]),
        tp_2d=bool(lay.tp_2d[j]),
        pp=int(lay.pp[j]),
        ep=int(lay.ep[j]),
        batch=int(pts.batch[i]),
        gamma=int(lay.gamma[j]),
    )


def best_point(pts: Points, kind: str, target: float | None) -> int | None:
    """Index of the fastest point within a budget, or of the cheapest at a speed; ties go to the other figure."""
    if kind == "fastest":
        ok = np.ones(len(pts.batch), bool) if target is None else pts.usd_per_mtok <= target
        primary, secondary = pts.time_per_token_s, pts.usd_per_mtok
    else:
        ok = np.ones(len(pts.batch), bool) if target is None else 1.0 / pts.time_per_token_s >= target
        primary, secondary = pts.usd_per_mtok, pts.time_per_token_s
    cand = np.flatnonzero(ok)
    if not len(cand):
        return None
    order = np.lexsort((secondary[cand], primary[cand]))
    return int(cand[order[0]])


def enumerate_best(question: Question, kind: str, target: float | None, pts: Points | None = None) -> Answer | None:
    """The oracle's answer (re-evaluated like every answer), or None when nothing meets the target."""
    pts = feasible_points(question) if pts is None else pts
    i = best_point(pts, kind, target)
    return None if i is None else reevaluate(question, _setup(question, pts, i), "enumerate")
