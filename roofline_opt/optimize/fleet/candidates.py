"""Per-model instance candidates: every layout at the throughput-maximising batch its latency limit and memory allow.

For a fixed layout the time per token rises with the batch and the time per token per sequence falls
(physics.md section 9), so an instance's throughput B / tau(B) rises with B: the best batch meeting a TPOT limit
and fitting in memory is the largest such batch. Both predicates are monotone in B, so it is found exactly by
bisection on the evaluator. Then:

- per (accelerator, TP, PP) only the highest-throughput layout is kept (same GPUs, same place, same price);
- a candidate is dropped when a smaller shape on the same accelerator packs enough copies into its GPUs to match its
  throughput: floor(tp / tp') * floor(pp / pp') copies of (tp', pp') fit in the GPUs of one (tp, pp) instance, TP
  groups inside the same domains and stages on distinct domains, so the larger one is never needed.

With whole requests (isl/osl; aggregated serving with chunked prefill, physics.md 10.3) the time per token is the
TPOT of a step carrying the prompts' prefill load, memory holds the prompts in flight, and two more limits hold up to
some batch and fail beyond it: TTFT within its limit and the prefill load within the chunk budget. Throughput
(B / TPOT) still rises with B, so the largest batch meeting every limit is still the best one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from roofline_opt.optimize.fleet.problem import FleetModel, Pool
from roofline_opt.optimize.space import Layouts, Question, layouts
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics import requests as rq

LIMIT_RTOL = 1e-12


@dataclass(frozen=True)
class Candidate:
    """One instance kind of one model: a layout at its best batch, with exact figures from the evaluator."""

    model: int
    gpu: str
    weight_bits: int
    tp: int
    tp_2d: bool
    pp: int
    ep: int
    gamma: int
    kv_bits: int
    chunk_tokens: int
    batch: int
    time_per_token_s: float
    usd_per_hour: float

    @property
    def n_gpus(self) -> int:
        return self.tp * self.pp

    @property
    def throughput_tok_s(self) -> float:
        return self.batch / self.time_per_token_s

    @property
    def instance_usd_per_hour(self) -> float:
        return self.n_gpus * self.usd_per_hour


@dataclass(frozen=True)
class ModelCandidates:
    """A model's surviving candidates and, per accelerator, why layouts were dropped (for infeasibility messages)."""

    candidates: tuple[Candidate, ...]
    memory_excluded: dict[str, int]
    speed_excluded: dict[str, int]
    fastest_time_per_token_s: dict[str, float]


def _eval_layout(question: Question, gi: int, bits: int, lay: Layouts, idx: np.ndarray) -> ev.Layout:
    return lay.layout(idx, question.context)


def time_and_fit(question: Question, gi: int, bits: int, lay: Layouts, idx: np.ndarray, batch: np.ndarray):
    """Exact time per generated token (the TPOT with whole requests), the memory check, and the other limits
    (TTFT within its limit and the prefill load within the chunk budget; always true without a workload) of layouts
    ``idx`` at the given batches."""
    gpu = question.gpus[gi]
    layout = _eval_layout(question, gi, bits, lay, idx)
    shape = np.shape(batch)
    if question.workload is not None:
        w, chunk = question.workload, lay.chunk[idx].astype(float)
        args = (question.model, gpu, question.preset_on(gpu), bits, layout, batch)
        tau = rq.tpot_step(*args, w, chunk, 1.0).step_time_s
        fits = rq.aggregated_memory(*args, w).fits
        other = batch <= rq.stable_batch_limit(w, chunk)
        if question.max_ttft_s is not None:
            other = other & (rq.ttft_aggregated_s(*args, w, chunk) <= question.max_ttft_s * (1 + LIMIT_RTOL))
        return tuple(np.broadcast_to(a, shape) for a in (tau, fits, other))
    gamma = lay.gamma[idx].astype(float)
    tau = ev.time_per_token_with_gamma(
        question.model, gpu, question.preset_on(gpu), bits, layout, batch, gamma, question.draft, question.acceptance
    )
    fits = ev.memory(question.model, gpu, question.preset_on(gpu), bits, layout, batch).fits
    if question.draft is not None:
        with_draft = ev.memory(question.model, gpu, question.preset_on(gpu), bits, layout, batch, question.draft).fits
        fits = np.where(gamma > 0, with_draft, fits)
    return np.broadcast_to(tau, shape), np.broadcast_to(fits, shape), np.ones(shape, dtype=bool)


def _limits_ok(tau: np.ndarray, fits: np.ndarray, other: np.ndarray, max_time_per_token_s: float | None) -> np.ndarray:
    """Memory and every latency limit at a batch: each holds up to some batch and fails beyond it."""
    ok = fits & other
    if max_time_per_token_s is None:
        return ok
    return ok & (tau <= max_time_per_token_s * (1 + LIMIT_RTOL))


def largest_batches(fm: FleetModel, question: Question, lay: Layouts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per layout: largest batch meeting the limits (pp - 1 where none does), fits at batch pp, time at batch pp."""
    best = lay.pp.astype(float) - 1.0
    fits_lo = np.zeros(len(lay), dtype=bool)
    tau_lo = np.full(len(lay), np.inf)
    for gi, bits, idx in lay.groups():
        lo = lay.pp[idx].astype(float)
        tau0, fit0, other0 = time_and_fit(question, gi, bits, lay, idx, lo)
        fits_lo[idx], tau_lo[idx] = fit0, np.where(other0, tau0, np.inf)
        ok = _limits_ok(tau0, fit0, other0, fm.max_time_per_token_s)
        lo = np.where(ok, lo, lo - 1.0)
        hi = np.where(ok, float(question.max_batch), lo)
        while np.any(lo < hi):
            mid = np.ceil((lo + hi) / 2.0)
            tau, fits, other = time_and_fit(question, gi, bits, lay, idx, np.maximum(mid, 1.0))
            good = _limits_ok(tau, fits, other, fm.max_time_per_token_s)
            active = lo < hi
            lo = np.where(active & good, mid, lo)
            hi = np.where(active & ~good, mid - 1.0, hi)
        best[idx] = lo
    return best, fits_lo, tau_lo


def model_candidates(index: int, fm: FleetModel, pool: Pool, prune: bool = True) -> ModelCandidates:
    """The model's candidates on the pool (TP groups inside one scale-up domain when the pool has a graph)."""
    question = fm.question
    lay = layouts(question)
    if pool.has_graph:
        room = np.array([pool.largest_domain(question.gpus[g].name) or 0 for g in lay.gpu_index])
        lay = lay.take(lay.tp <= room)
    batch, fits_lo, tau_lo = largest_batches(fm, question, lay)
    names = np.array([question.gpus[g].name for g in lay.gpu_index])
    usable = batch >= lay.pp
    memory_excluded = {n: int(np.sum(~fits_lo & (names == n))) for n in dict.fromkeys(names)}
    speed_excluded = {n: int(np.sum(fits_lo & ~usable & (names == n))) for n in dict.fromkeys(names)}
    fastest = {n: float(np.min(tau_lo[fits_lo & (names == n)], initial=np.inf)) for n in dict.fromkeys(names)}
    found = []
    for j in np.flatnonzero(usable):
        gpu = question.gpus[int(lay.gpu_index[j])]
        tau, _, _ = time_and_fit(
            question, int(lay.gpu_index[j]), int(lay.weight_bits[j]), lay, np.array([j]), np.array([batch[j]])
        )
        found.append(
            Candidate(
                model=index,
                gpu=gpu.name,
                weight_bits=int(lay.weight_bits[j]),
                tp=int(lay.tp[j]),
                tp_2d=bool(lay.tp_2d[j]),
                pp=int(lay.pp[j]),
                ep=int(lay.ep[j]),
                gamma=int(lay.gamma[j]),
                kv_bits=int(lay.kv_bits[j]),
                chunk_tokens=int(lay.chunk[j]),
                batch=int(batch[j]),
                time_per_token_s=float(tau[0]),
                usd_per_hour=gpu.usd_per_hour,
            )
        )
    kept = best_per_shape(found)
    if prune:
        kept = undominated(kept)
    return ModelCandidates(tuple(kept), memory_excluded, speed_excluded, fastest)


def best_per_shape(found: list[Candidate]) -> list[Candidate]:
    """The highest-throughput candidate per (accelerator, tp, pp); ties go to the first found."""
    best: dict[tuple[str, int, int], Candidate] = {}
    for c in found:
        key = (c.gpu, c.tp, c.pp)
        if key not in best or c.throughput_tok_s > best[key].throughput_tok_s:
            best[key] = c
    return sorted(best.values(), key=lambda c: (c.gpu, c.n_gpus, c.tp, c.pp))


def undominated(cands: list[Candidate]) -> list[Candidate]:
    """Drop candidates whose GPUs hold enough copies of a smaller shape to serve at least as much (docstring)."""
    kept = []
    for c in cands:
        dominated = False
        for o in cands:
            if o is c or o.gpu != c.gpu or o.tp > c.tp or o.pp > c.pp:
                continue
            copies = (c.tp // o.tp) * (c.pp // o.pp)
            if copies * o.throughput_tok_s >= c.throughput_tok_s:
                dominated = True
                break
        if not dominated:
            kept.append(c)
    return kept
