"""Per-model planning, for comparison: each model alone gets its cheapest $/Mtok layout meeting its TPOT limit
(the single-model ``cheapest`` query), repeated ceil(demand / (u x throughput)) times; then the results are packed
onto the same pool (the fleet MIP with those replica counts fixed). One period only."""

from __future__ import annotations

import dataclasses
import math

from roofline_opt.optimize.fleet.candidates import Candidate
from roofline_opt.optimize.fleet.formulation import build_fleet_model
from roofline_opt.optimize.fleet.problem import COST, Fleet
from roofline_opt.optimize.queries import SolverOptions, cheapest
from roofline_opt.optimize.solve import PersistentHighs


def model_alone(fleet: Fleet, i: int, options: SolverOptions) -> tuple[Candidate, int]:
    """The model's cheapest setup meeting its limit (TP inside one domain on a graph) and the replicas it needs."""
    fm = fleet.models[i]
    q = fm.question
    rooms = [fleet.pool.largest_domain(g.name) for g in q.gpus]
    if fleet.pool.has_graph:
        q = dataclasses.replace(q, tp_degrees=tuple(t for t in q.tp_degrees if t <= max(r or 0 for r in rooms)))
    limit = fm.mean_time_per_token_limit_s  # a TPOT percentile is the query's own batch cap
    speed = None if limit is None else 1.0 / limit
    answer = cheapest(q, speed, "mip", options)
    s = answer.setup
    gpu = fleet.pool.gpu(s.gpu)
    c = Candidate(
        model=i,
        gpu=s.gpu,
        weight_bits=s.weight_bits,
        tp=s.tp,
        tp_2d=s.tp_2d,
        pp=s.pp,
        ep=s.ep,
        gamma=s.gamma,
        kv_bits=s.kv_bits,
        chunk_tokens=s.chunk_tokens,
        batch=s.batch,
        time_per_token_s=answer.figures["time_per_token_s"],
        usd_per_hour=gpu.usd_per_hour,
        dp_attention=s.dp_attention,
    )
    need = max(fm.demand_tok_s) / (fleet.max_utilisation * c.throughput_tok_s)
    return c, max(1, math.ceil(need - 1e-9))


def per_model_baseline(fleet: Fleet, options: SolverOptions) -> dict | None:
    """Cost of planning each model alone and whether the results pack onto the pool (None with a profile or a
    disaggregated model: a single-model answer's xPyD unit is not a fleet candidate yet)."""
    if fleet.has_profile or any(fm.disaggregated for fm in fleet.models):
        return None
    picks = [model_alone(fleet, i, options) for i in range(len(fleet.models))]
    cands = [c for c, _ in picks]
    cost = sum(c.instance_usd_per_hour * n for c, n in picks)
    packs = True
    if fleet.pool.has_graph or any(n is not None for n in fleet.pool.counts.values()):
        m = build_fleet_model(dataclasses.replace(fleet, objective=COST, max_usd_per_hour=None), cands)
        for k, (_, n) in enumerate(picks):
            m.x[k, 0].fix(n)
        rep = PersistentHighs(m, options.time_limit_s, options.mip_gap, near_integral=False).solve()
        packs = rep.has_solution
    return {
        "usd_per_hour": cost,
        "packs_onto_pool": packs,
        "models": [
            {
                "model": fleet.models[c.model].name,
                "gpu": c.gpu,
                "weight_bits": c.weight_bits,
                "tp": c.tp,
                "pp": c.pp,
                "tp_2d": c.tp_2d,
                "batch": c.batch,
                "replicas": n,
                "throughput_tok_s_per_instance": c.throughput_tok_s,
                "usd_per_hour": c.instance_usd_per_hour * n,
            }
            for c, n in picks
        ],
    }
