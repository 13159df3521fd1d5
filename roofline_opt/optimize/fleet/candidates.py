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
(B / TPOT) still rises with B, so the largest batch meeting every limit is still the best one. With a percentile the
TTFT and TPOT limits hold at it under arrivals at the load whose mean decode batch is B (``tables.aggregated_ttft_s``
and ``tables.within_tpot_limit``, as single-model answers; both rise with B): each instance is priced fully loaded,
so one that the plan loads less meets its limits with room.

A disaggregated model (physics.md 10.4) has *decode* candidates (its layouts decoding only, TPOT without prefill load,
the same bisection) and *prefill* candidates: a prefill layout sending to one decode accelerator (its KV link,
``kv``), at the largest batch that fits and meets the TTFT of an idle pool (requests/s b / T_pre(b) never falls with
b, ``optimize.pairing``), or at batch 1 when the TTFT limit is on a percentile (the queueing model's prefill path).
A prefill candidate's throughput is the output tokens/s of the requests it prefills (requests/s x O), so it is
compared with the demand in the same unit. A *prefill pool* (``PrefillPool``) is n instances of one prefill
candidate: n the fewest whose capacity u n r covers the demand and, with a percentile, whose TTFT at that
percentile under the model's arrivals at the demand is within the limit (``queueing.percentile_ttft_s``; more
instances only lower it, Erlang C falls with the servers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from roofline_opt.optimize.fleet import kv
from roofline_opt.optimize.fleet.problem import COST, Fleet, FleetModel, Pool
from roofline_opt.optimize.layout_record import LayoutChoice
from roofline_opt.optimize.pieces import speculation
from roofline_opt.optimize.space import Layouts, Question, layouts, prefill_layouts
from roofline_opt.optimize.tables import aggregated_ttft_s, percentile_tpot_s, within_tpot_limit
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics import requests as rq
from roofline_opt.physics.specs import GpuSpec

LIMIT_RTOL = 1e-12
AGG, PREFILL, DECODE = "agg", "prefill", "decode"
"""Roles of a candidate: an aggregated instance, or a prefill or decode instance of a disaggregated model."""
UNLIMITED_INSTANCES = 1 << 20


CANDIDATE_ORDER = (
    "model",
    "gpu",
    "weight_bits",
    "tp",
    "tp_2d",
    "pp",
    "ep",
    "gamma",
    "kv_bits",
    "chunk_tokens",
    "batch",
    "time_per_token_s",
    "usd_per_hour",
    "role",
    "decode_gpu",
    "ttft_s",
    "dp_attention",
)
"""A candidate's fields in the order a plan's rows print them (``fleet.results``)."""


@dataclass(frozen=True, kw_only=True)
class Candidate(LayoutChoice):
    """One instance kind of one model: a layout (``LayoutChoice``) at its best batch, with exact figures from the
    evaluator."""

    model: int
    gamma: int
    batch: int
    time_per_token_s: float
    usd_per_hour: float
    role: str = AGG
    decode_gpu: str = ""
    """A prefill candidate's decode accelerator (its KV link); empty otherwise."""
    ttft_s: float | None = None
    """A prefill candidate's TTFT of an idle pool (its batch's service time and the KV transfer, longest class)."""

    @property
    def throughput_tok_s(self) -> float:
        return self.batch / self.time_per_token_s

    @property
    def instance_usd_per_hour(self) -> float:
        return self.n_gpus * self.usd_per_hour


@dataclass(frozen=True)
class PrefillPool:
    """``instances`` copies of prefill candidate ``candidate`` (index into the flat list), serving up to
    ``capacity_tok_s`` of its model's demand (output tok/s) within the utilisation cap and the TTFT limit."""

    model: int
    candidate: int
    instances: int
    capacity_tok_s: float
    decode_gpu: str


@dataclass(frozen=True)
class ModelCandidates:
    """A model's surviving candidates and, per accelerator, why layouts were dropped (for infeasibility messages)."""

    candidates: tuple[Candidate, ...]
    memory_excluded: dict[str, int]
    speed_excluded: dict[str, int]
    fastest_time_per_token_s: dict[str, float]
    refused_by: dict[str, tuple[str, float]] = field(default_factory=dict)
    """Per accelerator whose fitting layouts a TTFT limit or a TPOT percentile refuses even at their smallest batch:
    (``"ttft"`` or ``"tpot"``, the lowest such figure there, s), for the infeasibility message."""


def _eval_layout(question: Question, gi: int, bits: int, lay: Layouts, idx: np.ndarray) -> ev.Layout:
    return lay.layout(idx, question.context)


def time_and_fit(question: Question, gi: int, bits: int, lay: Layouts, idx: np.ndarray, batch: np.ndarray):
    """Exact time per generated token (the TPOT with whole requests), the memory check, and the other limits
    (TTFT within its limit and the prefill load within the chunk budget; always true without a workload and for
    decode instances of disaggregated serving, whose TTFT is the prefill pool's) of layouts ``idx`` at the given
    batches."""
    gpu = question.gpus[gi]
    layout = _eval_layout(question, gi, bits, lay, idx)
    shape = np.shape(batch)
    if question.workload is not None:
        w, chunk = question.workload, lay.chunk[idx].astype(float)
        decode_only = lay.disagg[idx]
        aggregated = (~decode_only).astype(float)
        spec = speculation(question, lay, idx)
        args = (question.model, gpu, question.preset_on(gpu), bits, layout, batch)
        tau = rq.tpot_step(*args, w, chunk, aggregated, spec).step_time_s
        fits = rq.aggregated_memory(*args, w, aggregated, spec).fits
        other = decode_only | (batch <= rq.stable_batch_limit(w, chunk, spec))
        if question.max_ttft_s is not None and not decode_only.all():
            ttft = aggregated_ttft_s(question, gpu, bits, layout, batch, chunk, spec)
            other = other & (decode_only | (ttft <= question.max_ttft_s * (1 + LIMIT_RTOL)))
        if question.queued_tpot:
            other = other & within_tpot_limit(question, gpu, bits, layout, batch, chunk, decode_only, spec)
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
        ok = _limits_ok(tau0, fit0, other0, fm.mean_time_per_token_limit_s)
        lo = np.where(ok, lo, lo - 1.0)
        hi = np.where(ok, float(question.max_batch), lo)
        while np.any(lo < hi):
            mid = np.ceil((lo + hi) / 2.0)
            tau, fits, other = time_and_fit(question, gi, bits, lay, idx, np.maximum(mid, 1.0))
            good = _limits_ok(tau, fits, other, fm.mean_time_per_token_limit_s)
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
    refused_by = _refusal_floors(question, lay, fits_lo & ~np.isfinite(tau_lo), fastest)
    found = []
    rows = np.flatnonzero(usable)
    tau_at = np.full(len(lay), np.inf)
    for gi, bits, pos in lay.groups(rows):  # one evaluator call per accelerator and precision
        tau_at[rows[pos]] = time_and_fit(question, gi, bits, lay, rows[pos], batch[rows[pos]])[0]
    for j in rows:
        found.append(decode_candidate(index, question.gpus[int(lay.gpu_index[j])], lay, j, batch[j], tau_at[j]))
    if fm.disaggregated:
        found += prefill_candidates(index, fm, pool)
    kept = best_per_shape(found)
    if prune:
        kept = undominated(kept)
    return ModelCandidates(tuple(kept), memory_excluded, speed_excluded, fastest, refused_by)


def _refusal_floors(question: Question, lay: Layouts, refused: np.ndarray, fastest: dict):
    """``ModelCandidates.refused_by`` of the accelerators whose every fitting layout is refused at its smallest batch
    (``fastest`` infinite there) by a limit other than the mean TPOT: the TTFT limit alone, else a TPOT percentile
    alone (neither: not recorded)."""
    if question.workload is None:
        return {}
    floors: dict[str, dict[str, float]] = {}
    rows = np.flatnonzero(refused)
    for gi, bits, pos in lay.groups(rows):
        idx, gpu = rows[pos], question.gpus[gi]
        if fastest[gpu.name] != np.inf:
            continue
        layout = _eval_layout(question, gi, bits, lay, idx)
        batch, chunk, disagg = lay.pp[idx].astype(float), lay.chunk[idx].astype(float), lay.disagg[idx]
        mine = floors.setdefault(gpu.name, {"ttft": np.inf, "tpot": np.inf})
        spec = speculation(question, lay, idx)
        if question.max_ttft_s is not None and not disagg.all():
            ttft = np.where(disagg, np.inf, aggregated_ttft_s(question, gpu, bits, layout, batch, chunk, spec))
            mine["ttft"] = min(mine["ttft"], float(np.min(ttft)))
        if question.queued_tpot:
            tpot = percentile_tpot_s(question, gpu, bits, layout, batch, chunk, disagg, spec)
            mine["tpot"] = min(mine["tpot"], float(np.min(tpot)))
    limits = {"ttft": question.max_ttft_s, "tpot": question.max_tpot_s if question.queued_tpot else None}
    out = {}
    for name, mine in floors.items():
        for kind, limit in limits.items():
            refuses = limit is not None and np.isfinite(mine[kind]) and mine[kind] > limit * (1 + LIMIT_RTOL)
            if refuses and name not in out:
                out[name] = (kind, mine[kind])
    return out


def decode_candidate(model: int, gpu: GpuSpec, lay: Layouts, j, batch, time_per_token_s) -> Candidate:
    """The aggregated or decode candidate of layout index ``j`` at ``batch`` (its time per token already evaluated)."""
    return Candidate(
        model=model,
        gpu=gpu.name,
        weight_bits=int(lay.weight_bits[j]),
        tp=int(lay.tp[j]),
        tp_2d=bool(lay.tp_2d[j]),
        pp=int(lay.pp[j]),
        ep=int(lay.ep[j]),
        gamma=int(lay.gamma[j]),
        kv_bits=int(lay.kv_bits[j]),
        chunk_tokens=int(lay.chunk[j]),
        batch=int(batch),
        time_per_token_s=float(time_per_token_s),
        usd_per_hour=gpu.usd_per_hour,
        role=DECODE if lay.disagg[j] else AGG,
        dp_attention=bool(lay.dp_attention[j]),
    )


def best_per_shape(found: list[Candidate]) -> list[Candidate]:
    """The highest-throughput candidate per (accelerator, tp, pp, role, decode accelerator); ties go to the first
    found. Prefill candidates keep every one no other beats in both throughput and idle TTFT (with a percentile
    limit both enter the queue's TTFT)."""
    best: dict[tuple, list[Candidate]] = {}
    for c in found:
        key = (c.gpu, c.tp, c.pp, c.role, c.decode_gpu)
        kept = best.setdefault(key, [])
        if c.role != PREFILL:
            if not kept or c.throughput_tok_s > kept[0].throughput_tok_s:
                kept[:] = [c]
            continue
        assert c.ttft_s is not None  # every prefill candidate carries its idle TTFT
        if any(o.throughput_tok_s >= c.throughput_tok_s and (o.ttft_s or 0.0) <= c.ttft_s for o in kept):
            continue
        kept[:] = [o for o in kept if not (c.throughput_tok_s >= o.throughput_tok_s and c.ttft_s <= (o.ttft_s or 0.0))]
        kept.append(c)
    flat = [c for group in best.values() for c in group]
    return sorted(flat, key=lambda c: (c.role, c.gpu, c.decode_gpu, c.n_gpus, c.tp, c.pp, -c.throughput_tok_s))


def undominated(cands: list[Candidate]) -> list[Candidate]:
    """Drop candidates whose GPUs hold enough copies of a smaller shape to serve at least as much (docstring);
    prefill candidates are kept (a pool of small instances queues differently from one of large ones)."""
    kept = []
    for c in cands:
        dominated = False
        for o in cands:
            if c.role == PREFILL or o is c or o.role != c.role or o.gpu != c.gpu or o.tp > c.tp or o.pp > c.pp:
                continue
            copies = (c.tp // o.tp) * (c.pp // o.pp)
            if copies * o.throughput_tok_s >= c.throughput_tok_s:
                dominated = True
                break
        if not dominated:
            kept.append(c)
    return kept


def _largest_prefill_batch(question: Question, gi: int, bits: int, lay: Layouts, idx, partner) -> np.ndarray:
    """Largest batch in [pp, max_batch] that fits and meets the idle TTFT limit (pp - 1 where none does)."""
    lo = lay.pp[idx].astype(float)
    hi = np.full(len(idx), float(question.max_batch))
    start = lo.copy()
    while np.any(lo <= hi):
        mid = np.floor((lo + hi) / 2.0)
        fig = kv.prefill_points(question, gi, bits, lay, idx, np.maximum(mid, 1.0), partner)
        ok = _prefill_ok(question, fig, None)
        lo = np.where(ok & (lo <= hi), mid + 1.0, lo)
        hi = np.where(~ok & (lo <= hi), mid - 1.0, hi)
    return np.maximum(hi, start - 1.0)


def _prefill_ok(question: Question, fig: dict, percentile: float | None) -> np.ndarray:
    """Memory, and the TTFT limit of an idle pool unless the limit is on a percentile (then the pool decides)."""
    ok = np.asarray(fig["fits_in_memory"], dtype=bool)
    if question.max_ttft_s is not None and percentile is None:
        ok = ok & (fig["ttft_s"] <= question.max_ttft_s * (1 + LIMIT_RTOL))
    return ok


def prefill_candidates_at(index: int, fm: FleetModel, gi: int, bits: int, lay: Layouts, idx, batch, partner):
    """The prefill candidates of layouts ``idx`` (one accelerator and precision) at ``batch`` sending to
    ``partner``, with their exact figures (one evaluator call)."""
    q = fm.question
    idx, batch = np.asarray(idx, dtype=int), np.asarray(batch, dtype=float)
    if not len(idx):
        return []
    fig = kv.prefill_points(q, gi, bits, lay, idx, batch, partner)
    rate_tok_s = np.asarray(fig["requests_per_s"]) * q.whole_requests.mean_osl
    return [
        Candidate(
            model=index,
            gpu=q.gpus[gi].name,
            weight_bits=int(bits),
            tp=int(lay.tp[j]),
            tp_2d=bool(lay.tp_2d[j]),
            pp=int(lay.pp[j]),
            ep=1,
            gamma=int(lay.gamma[j]),
            kv_bits=int(lay.kv_bits[j]),
            chunk_tokens=0,
            batch=int(b),
            time_per_token_s=float(b / r),
            usd_per_hour=q.gpus[gi].usd_per_hour,
            role=PREFILL,
            decode_gpu=partner.name.removesuffix(kv.PARTNER_SUFFIX),
            ttft_s=float(t),
        )
        for j, b, r, t in zip(idx, batch, rate_tok_s, np.asarray(fig["ttft_s"]), strict=True)
    ]


def prefill_space(fm: FleetModel, pool: Pool):
    """(prefill layouts, then per (accelerator, precision) group and decode accelerator offered: gpu index, bits,
    positions, KV partner) of a disaggregated model; with a percentile only pp = 1 (one prompt per step); with a
    draft only the layouts that prefill it (``kv.prefill_draft``)."""
    q = fm.question
    lay = prefill_layouts(q)
    keep = (lay.gamma > 0) == (kv.prefill_draft(q) is not None)
    if pool.has_graph:
        keep &= np.array([lay.tp[j] <= (pool.largest_domain(q.gpus[g].name) or 0) for j, g in enumerate(lay.gpu_index)])
    if fm.percentile is not None:
        keep &= lay.pp == 1
    lay = lay.take(keep)
    decode = [d for d in range(len(q.gpus)) if q.offers(rq.DISAGG, d)]
    groups = [
        (gi, bits, idx, pool.kv_partners[q.gpus[gi].name, q.gpus[d].name])
        for gi, bits, idx in lay.groups()
        for d in decode
    ]
    return lay, groups


def prefill_candidates(index: int, fm: FleetModel, pool: Pool) -> list[Candidate]:
    """Every prefill layout and decode accelerator at its best batch (module docstring)."""
    lay, groups = prefill_space(fm, pool)
    out = []
    for gi, bits, idx, partner in groups:
        if fm.percentile is None:
            batch = _largest_prefill_batch(fm.question, gi, bits, lay, idx, partner)
        else:
            fig = kv.prefill_points(fm.question, gi, bits, lay, idx, np.ones(len(idx)), partner)
            batch = np.where(_prefill_ok(fm.question, fig, fm.percentile), 1.0, 0.0)
        ok = batch >= lay.pp[idx]
        out += prefill_candidates_at(index, fm, gi, bits, lay, idx[ok], batch[ok], partner)
    return out


def max_instances(pool: Pool, c: Candidate) -> int:
    """Instances of ``c`` the pool's GPU count of its type allows."""
    have = pool.counts.get(c.gpu)
    return UNLIMITED_INSTANCES if have is None else have // c.n_gpus


def pool_carries(fleet: Fleet, c: Candidate, instances, demand_tok_s: float) -> np.ndarray:
    """Whether ``instances`` copies (an array of counts) of prefill candidate ``c`` carry ``demand_tok_s`` within
    the utilisation cap and, with a percentile, the TTFT limit at that percentile (``kv.percentile_ttft_s``; an
    idle-pool TTFT limit is met by the candidate itself)."""
    n = np.asarray(instances, dtype=float)
    ok = fleet.max_utilisation * n * c.throughput_tok_s >= demand_tok_s * (1 - 1e-12)
    q = fleet.models[c.model].question
    if fleet.models[c.model].percentile is None or q.max_ttft_s is None:
        return ok
    gpu = fleet.pool.gpu(c.gpu)
    partner = fleet.pool.kv_partners[c.gpu, c.decode_gpu]
    layout = kv.prefill_layout_of(c.tp, c.tp_2d, c.pp, c.kv_bits)
    rate = demand_tok_s / q.whole_requests.mean_osl
    ttft = kv.percentile_ttft_s(q, gpu, c.weight_bits, layout, partner, n, rate)
    return ok & (ttft <= q.max_ttft_s * (1 + LIMIT_RTOL))


def fewest_instances(fleet: Fleet, c: Candidate, demand_tok_s: float) -> int | None:
    """Fewest copies of prefill candidate ``c`` carrying ``demand_tok_s`` (``pool_carries``), None if none the
    pool holds does (more copies never raise the TTFT, so the most the pool holds is tried first): counts from the
    utilisation bound up, in windows of growing width, each one evaluator call."""
    top = max_instances(fleet.pool, c)
    lo = max(1, math.ceil(demand_tok_s / (fleet.max_utilisation * c.throughput_tok_s) - 1e-9))
    if lo > top or not pool_carries(fleet, c, [top], demand_tok_s)[0]:
        return None
    width = 16
    while True:
        n = np.arange(lo, min(top, lo + width - 1) + 1)
        ok = pool_carries(fleet, c, n, demand_tok_s)
        if ok.any():
            return int(n[np.argmax(ok)])
        lo, width = int(n[-1]) + 1, 4 * width


def prefill_pools(fleet: Fleet, cands: list[Candidate]) -> list[PrefillPool]:
    """Every useful pool of every prefill candidate: objective cost, the fewest instances for each period's demand
    (its capacity the largest demand it was found for); objective served, 1 up to the fewest for the peak demand,
    each serving u n r."""
    pools = []
    u = fleet.max_utilisation
    for k, c in enumerate(cands):
        if c.role != PREFILL:
            continue
        demands = sorted({d for d in fleet.models[c.model].demand_tok_s if d > 0})
        if fleet.objective == COST:
            found: dict[int, float] = {}
            for d in demands:
                n = fewest_instances(fleet, c, d)
                if n is not None:
                    found[n] = max(found.get(n, 0.0), d)
            pools += [PrefillPool(c.model, k, n, cap, c.decode_gpu) for n, cap in sorted(found.items())]
        elif demands:
            top = min(max_instances(fleet.pool, c), math.ceil(demands[-1] / (u * c.throughput_tok_s) - 1e-9))
            pools += [PrefillPool(c.model, k, n, u * n * c.throughput_tok_s, c.decode_gpu) for n in range(1, top + 1)]
    return pools
