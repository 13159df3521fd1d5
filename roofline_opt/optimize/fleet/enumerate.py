"""Brute-force oracle for small fleets: its own candidates from the full batch grid, every replica-count vector,
and an exhaustive placement search; independent of the MIP, its bisection and its dominance pruning.

A disaggregated model's plans are one prefill pool (every prefill layout and decode accelerator at the batch of
highest requests/s among all batches meeting the limits; its instance count the first, counting up one by one,
that carries the demand within the TTFT limit: fewer fail, more cost more for nothing) combined with every decode
vector over decode candidates of that pool's decode accelerator.

Limits (``--method enumerate``): one period, at most MAX_MODELS models, MAX_GPUS GPUs in the pool, and at most
MAX_COMBINATIONS count vectors in all; larger fleets are refused with that message.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from roofline_opt.errors import Infeasible, InvalidInput
from roofline_opt.optimize.fleet import kv
from roofline_opt.optimize.fleet.candidates import (
    DECODE,
    PREFILL,
    Candidate,
    best_per_shape,
    decode_candidate,
    max_instances,
    pool_carries,
    prefill_candidates_at,
    prefill_space,
    time_and_fit,
)
from roofline_opt.optimize.fleet.problem import COST, Fleet
from roofline_opt.optimize.space import layouts

MAX_MODELS = 3
MAX_GPUS = 64
MAX_COMBINATIONS = 2_000_000
RTOL = 1e-9


def grid_candidates(fleet: Fleet, i: int) -> list[Candidate]:
    """Each layout at the batch of highest throughput among all batches meeting the limits (full grid)."""
    fm = fleet.models[i]
    q = fm.question
    lay = layouts(q)
    batches = np.arange(1, q.max_batch + 1, dtype=float)
    found = []
    for gi, bits, idx in lay.groups():
        gpu = q.gpus[gi]
        room = fleet.pool.largest_domain(gpu.name)
        for j in idx:
            if room is not None and lay.tp[j] > room:
                continue
            tau, fits, other = time_and_fit(q, gi, bits, lay, np.array([j]), batches)
            ok = fits & other & (batches >= lay.pp[j])
            if fm.mean_time_per_token_limit_s is not None:
                ok &= tau <= fm.mean_time_per_token_limit_s * (1 + 1e-12)
            if not ok.any():
                continue
            thr = np.where(ok, batches / tau, -np.inf)
            b = int(np.argmax(thr))
            found.append(decode_candidate(i, gpu, lay, j, batches[b], tau[b]))
    if fm.disaggregated:
        found += _grid_prefill(fleet, i)
    return best_per_shape(found)


def _grid_prefill(fleet: Fleet, i: int) -> list[Candidate]:
    """Prefill candidates at the batch of most requests/s among all meeting memory and the idle TTFT limit (batch
    1 with a percentile limit)."""
    fm = fleet.models[i]
    q = fm.question
    lay, groups = prefill_space(fm, fleet.pool)
    batches = np.arange(1, (1 if fm.percentile is not None else q.max_batch) + 1, dtype=float)
    found = []
    for gi, bits, idx, partner in groups:
        for j in idx:
            fig = kv.prefill_points(q, gi, bits, lay, np.array([j]), batches, partner)
            ok = np.asarray(fig["fits_in_memory"], dtype=bool) & (batches >= lay.pp[j])
            if q.max_ttft_s is not None and fm.percentile is None:
                ok &= fig["ttft_s"] <= q.max_ttft_s * (1 + 1e-12)
            if ok.any():
                b = int(np.argmax(np.where(ok, fig["requests_per_s"], -np.inf)))
                found += prefill_candidates_at(i, fm, gi, bits, lay, [j], [batches[b]], partner)
    return found


def _pool_sizes(fleet: Fleet, c: Candidate) -> list[int]:
    """Instance counts of prefill candidate ``c`` worth trying: objective cost the first that carries the demand
    (counting up), objective served every count up to the first that carries the whole demand."""
    demand = fleet.models[c.model].demand_tok_s[0]
    top = max_instances(fleet.pool, c)
    if fleet.objective != COST:
        sizes = []
        for n in range(1, top + 1):
            sizes.append(n)
            if fleet.max_utilisation * n * c.throughput_tok_s >= demand:
                break
        return sizes
    counts = np.arange(1, top + 1)
    ok = pool_carries(fleet, c, counts, demand)
    return [int(counts[np.argmax(ok)])] if ok.any() else []


def _model_vectors(fleet: Fleet, cands: Sequence[Candidate], limit: int) -> list[tuple[int, ...]]:
    """Count vectors over a model's candidates: ``_vectors`` for an aggregated one; for a disaggregated one every
    prefill pool with every decode vector of its decode accelerator (and, objective served, serving none)."""
    if not cands or not fleet.models[cands[0].model].disaggregated:
        return _vectors(fleet, cands, limit)
    out = [] if fleet.objective == COST else [(0,) * len(cands)]
    for p, c in enumerate(cands):
        if c.role != PREFILL:
            continue
        decode = [j for j, d in enumerate(cands) if d.role == DECODE and d.gpu == c.decode_gpu]
        sub = _vectors(fleet, [cands[j] for j in decode], limit) if decode else []
        for n in _pool_sizes(fleet, c):
            for v in sub:
                full = [0] * len(cands)
                full[p] = n
                for j, count in zip(decode, v, strict=True):
                    full[j] = count
                out.append(tuple(full))
                if len(out) > limit:
                    raise InvalidInput("method", f"enumerate handles small fleets only: over {limit} plans per model")
    return out


def _vectors(fleet: Fleet, cands: Sequence[Candidate], limit: int) -> list[tuple[int, ...]]:
    """Replica-count vectors of one model's candidates in which every instance is needed: dropping any one lowers
    the served demand (so it also covers the demand, objective cost). Any other vector costs more for no more
    service, so no optimum is lost. Vectors stay within the pool's GPU counts."""
    if not cands:
        return [()]
    demand = fleet.models[cands[0].model].demand_tok_s[0]
    u = fleet.max_utilisation
    counts = fleet.pool.counts
    out: list[tuple[int, ...]] = []

    budget = math.inf if fleet.max_usd_per_hour is None else fleet.max_usd_per_hour * (1 + RTOL)

    def walk(j: int, v: list[int], capacity: float, smallest: float, gpus: dict[str, int]) -> None:
        if capacity - smallest >= demand * (1 - RTOL):
            return
        if sum(c.instance_usd_per_hour * n for c, n in zip(cands, v, strict=False)) > budget:
            return
        if j == len(cands):
            if fleet.objective != COST or capacity >= demand * (1 - RTOL):
                out.append(tuple(v))
                if len(out) > limit:
                    raise InvalidInput("method", f"enumerate handles small fleets only: over {limit} plans per model")
            return
        c = cands[j]
        n = 0
        while True:
            used = gpus.get(c.gpu, 0) + n * c.n_gpus
            have = counts.get(c.gpu)
            if have is not None and used > have:
                break
            thr = u * c.throughput_tok_s
            walk(j + 1, [*v, n], capacity + n * thr, min(smallest, thr) if n else smallest, {**gpus, c.gpu: used})
            if capacity + n * thr - min(smallest, thr) >= demand * (1 - RTOL):
                break
            n += 1

    walk(0, [], 0.0, math.inf, {})
    return out


def placeable(fleet: Fleet, instances: list[tuple[str, int, int]]) -> bool:
    """Exhaustive search: can instances (gpu, tp, pp) be placed with TP groups inside domains, stages on distinct
    domains and no GPU twice? Domains of equal type and free GPUs are interchangeable: each choice is tried once."""
    domains = fleet.pool.domains
    free = [d.size for d in domains]
    order = sorted(instances, key=lambda s: (-s[1] * s[2], -s[1]))

    def search(n: int) -> bool:
        if n == len(order):
            return True
        gpu, tp, pp = order[n]
        fitting = [d for d, dom in enumerate(domains) if dom.gpu == gpu and free[d] >= tp]
        tried = set()
        for combo in itertools.combinations(fitting, pp):
            key = tuple(sorted(free[d] for d in combo))
            if key in tried:
                continue
            tried.add(key)
            for d in combo:
                free[d] -= tp
            if search(n + 1):
                return True
            for d in combo:
                free[d] += tp
        return False

    return search(0)


def enumerate_plan(fleet: Fleet):
    """The best plan by brute force, decoded like the MIP's (replicas, stage counts, no split, solve report)."""
    pool = fleet.pool
    known = [n for n in pool.counts.values() if n is not None]
    if fleet.has_profile or len(fleet.models) > MAX_MODELS or len(known) < len(pool.counts) or sum(known) > MAX_GPUS:
        msg = (
            f"enumerate handles small fleets only: one period, at most {MAX_MODELS} models and {MAX_GPUS} GPUs, "
            "none unlimited"
        )
        raise InvalidInput("method", msg)
    per_model = [grid_candidates(fleet, i) for i in range(len(fleet.models))]
    for i, cands in enumerate(per_model):
        if not any(c.role != PREFILL for c in cands):
            raise Infeasible(f"model {fleet.models[i].name}: no layout meets its limits", reason="target")
    vectors = [_model_vectors(fleet, cands, MAX_COMBINATIONS) for cands in per_model]
    if math.prod(len(v) for v in vectors) > MAX_COMBINATIONS:
        raise InvalidInput("method", f"enumerate handles small fleets only: more than {MAX_COMBINATIONS} plans")
    flat = [c for cands in per_model for c in cands]
    offsets = np.cumsum([0] + [len(c) for c in per_model])
    best: dict[int, int] | None = None
    best_key: tuple[float, float] | None = None
    for combo in itertools.product(*vectors):
        key = _score(fleet, per_model, combo)
        if key is None or (best_key is not None and key >= best_key):
            continue
        counts = {int(offsets[i] + j): n for i, v in enumerate(combo) for j, n in enumerate(v) if n}
        if not _within_counts(fleet, flat, counts):
            continue
        if pool.has_graph and not placeable(fleet, _instances(flat, counts)):
            continue
        best, best_key = counts, key
    if best is None or best_key is None:
        raise Infeasible("no plan meets every demand on this pool (brute force)", reason="gpu_shortage")
    stages = _stages(fleet, flat, best) if pool.has_graph else {}
    solve = {
        "method": "enumerate",
        "status": "enumerated",
        "objective": best_key[-1] if fleet.objective == COST else -best_key[0],
        "mip_gap": 0.0,
        "solve_seconds": None,
    }
    return flat, [best], [stages], None, solve


def _score(fleet: Fleet, per_model, combo) -> tuple[float, float] | None:
    """(minus value, cost) to minimise lexicographically; None over the budget."""
    cost = value = 0.0
    for i, (cands, v) in enumerate(zip(per_model, combo, strict=True)):
        cost += sum(c.instance_usd_per_hour * n for c, n in zip(cands, v, strict=True))
        capacity: dict[str, float] = {}
        for c, n in zip(cands, v, strict=True):
            capacity[c.role] = capacity.get(c.role, 0.0) + fleet.max_utilisation * c.throughput_tok_s * n
        demand = fleet.models[i].demand_tok_s[0]
        served = min([demand, *capacity.values()])
        if fleet.objective == COST and served < demand * (1 - RTOL):
            return None
        value += fleet.models[i].value_per_tok_s() * served
    if fleet.max_usd_per_hour is not None and cost > fleet.max_usd_per_hour * (1 + RTOL):
        return None
    return (0.0 if fleet.objective == COST else -round(value, 9), round(cost, 9))


def _within_counts(fleet: Fleet, flat: Sequence[Candidate], counts: dict[int, int]) -> bool:
    used: dict[str, int] = {}
    for k, n in counts.items():
        used[flat[k].gpu] = used.get(flat[k].gpu, 0) + n * flat[k].n_gpus
    return all((have := fleet.pool.counts.get(g)) is None or n <= have for g, n in used.items())


def _instances(flat: Sequence[Candidate], counts: dict[int, int]) -> list[tuple[str, int, int]]:
    return [(flat[k].gpu, flat[k].tp, flat[k].pp) for k, n in counts.items() for _ in range(n)]


def _stages(fleet: Fleet, flat: Sequence[Candidate], counts: dict[int, int]) -> dict[tuple[int, int], int]:
    """Stage counts per (candidate, domain) of one valid placement (the search again, recording its choices)."""
    domains = fleet.pool.domains
    free = [d.size for d in domains]
    order = sorted(((k, flat[k]) for k, n in counts.items() for _ in range(n)), key=lambda e: (-e[1].n_gpus, -e[1].tp))
    chosen: list[tuple[int, ...]] = []

    def search(n: int) -> bool:
        if n == len(order):
            return True
        _, c = order[n]
        fitting = [d for d, dom in enumerate(domains) if dom.gpu == c.gpu and free[d] >= c.tp]
        for combo in itertools.combinations(fitting, c.pp):
            for d in combo:
                free[d] -= c.tp
            chosen.append(combo)
            if search(n + 1):
                return True
            chosen.pop()
            for d in combo:
                free[d] += c.tp
        return False

    search(0)
    stages: dict[tuple[int, int], int] = {}
    for (k, _), combo in zip(order, chosen, strict=True):
        for d in combo:
            stages[k, d] = stages.get((k, d), 0) + 1
    return stages
