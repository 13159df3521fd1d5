"""Disaggregated pools in a fleet at scale, by hand: ``python benchmarks/fleet_pools.py [--repeat N] [--burstiness X]``.

Five models, each a prefill pool and a decode pool (three with their TTFT limit at p90/p99 under Poisson arrivals,
or arrivals of c_a^2 ``--burstiness``), on 2,048 GPUs: 128 HGX H100 and 128 HGX H200 servers on one rail-optimised
fabric (400 Gb/s NICs); prefill may run on either type and decode on either, so KV links between the types come from
the graph. Solved to a 1e-4 gap. Per repetition (the whole pipeline from the fleet structure: graph figures,
candidates, prefill pools, MIP build and HiGHS, re-evaluation) the seconds of each phase, the MIP's size (variables,
integer variables, constraints) and the solver's status and gap; then the plan's model table once. The machine load
(1-minute load average) is printed first.
"""

from __future__ import annotations

import argparse
import os
import time

import pyomo.core as pyo

from roofline_opt import api
from roofline_opt.cli.plan_cmd import plan_text
from roofline_opt.optimize import fleet as fl
from roofline_opt.optimize.fleet.formulation import CLASSES, build_fleet_model

CLUSTER = {
    "name": "pod-128x-h100-128x-h200",
    "groups": [
        {"node_type": "hgx-h100", "nodes": 128, "nic_gb_s": 50},
        {"node_type": "hgx-h200", "nodes": 128, "nic_gb_s": 50},
    ],
    "fabric": "rail-optimised",
    "spines": 4,
}
SPACE = {"tp_degrees": [1, 2, 4, 8], "pp_degrees": [1, 2, 4], "max_batch": 1024}
MODELS = [
    {
        "name": "chat",
        "model": "llama-3-70b",
        "weight_bits": [16, 8],
        "isl": 2000,
        "osl": 400,
        "demand_req_s": 150,
        "tpot_ms": 40,
        "ttft_ms": 1000,
        "percentile": 90,
    },
    {
        "name": "code",
        "model": "llama-3.1-8b",
        "isl": 1500,
        "osl": 300,
        "demand_req_s": 400,
        "tpot_ms": 20,
        "ttft_ms": 300,
        "percentile": 90,
    },
    {
        "name": "moe",
        "model": "mixtral-8x22b",
        "weight_bits": [16, 8],
        "isl": 1000,
        "osl": 500,
        "demand_req_s": 60,
        "tpot_ms": 50,
        "ttft_ms": 1500,
    },
    {
        "name": "big",
        "model": "llama-3.1-405b",
        "weight_bits": [8],
        "isl": 2000,
        "osl": 400,
        "demand_req_s": 20,
        "tpot_ms": 60,
        "ttft_ms": 2000,
        "percentile": 99,
    },
    {
        "name": "qwen",
        "model": "qwen2.5-72b",
        "isl": 3000,
        "osl": 300,
        "demand_req_s": 100,
        "tpot_ms": 30,
        "ttft_ms": 800,
    },
]


def fleet(burstiness: float = 1.0) -> dict:
    """The fleet file's content; ``burstiness`` (c_a^2) on the models with a TTFT percentile (1: Poisson)."""
    models = [{**m, "serving": "disagg", **SPACE} for m in MODELS]
    if burstiness != 1.0:
        models = [{**m, "burstiness": burstiness} if "percentile" in m else m for m in models]
    return {"cluster": CLUSTER, "models": models}


def size(spec, cands, pools) -> str:
    """Variables, integer variables and constraints of the MIP solved first (over classes of identical domains)."""
    m = build_fleet_model(spec, cands, CLASSES, pools=pools)
    variables = [v for c in m.component_objects(ctype=pyo.Var) for v in c.values()]
    integers = sum(1 for v in variables if v.is_integer() or v.is_binary())
    rows = sum(len(c) for c in m.component_objects(ctype=pyo.Constraint))
    return f"{len(variables)} variables ({integers} integer), {rows} constraints"


def once(data: dict, time_limit: float | None):
    start = time.perf_counter()
    spec = fl.parse_fleet(data, api.question)
    parsed = time.perf_counter()
    cands, pools = fl.plan.fleet_candidates(spec)
    built = time.perf_counter()
    options = api.solver_options(time_limit, 1e-4)
    replicas, placement, split, solve = fl.plan.solve_mip(spec, cands, options, False, pools)
    solved = time.perf_counter()
    solve["candidates"] = len(cands)
    plan = fl.results.build_plan(spec, cands, replicas, placement, split, solve)
    done = time.perf_counter()
    phases = {
        "graph + questions": parsed - start,
        "candidates + pools": built - parsed,
        "MIP build + solve": solved - built,
        "re-evaluation": done - solved,
        "total": done - start,
    }
    return spec, cands, pools, plan, solve, phases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--time-limit", type=float, default=None)
    parser.add_argument(
        "--burstiness", type=float, default=1.0, help="c_a^2 of the percentile models' arrivals (default: 1, Poisson)"
    )
    args = parser.parse_args()
    print(f"load average (1, 5, 15 min): {', '.join(f'{x:.2f}' for x in os.getloadavg())}; cpus {os.cpu_count()}")
    data = fleet(args.burstiness)
    for r in range(args.repeat):
        spec, cands, pools, plan, solve, phases = once(data, args.time_limit)
        if r == 0:
            gpus = sum(n for n in spec.pool.counts.values() if n)
            print(
                f"== {len(spec.models)} models with disaggregated pools on {gpus} GPUs: {len(cands)} candidates "
                f"({sum(c.role == 'prefill' for c in cands)} prefill), {len(pools)} prefill pools; "
                f"MIP {size(spec, cands, pools)}"
            )
        shown = ", ".join(f"{k} {v:.2f} s" for k, v in phases.items())
        print(
            f"run {r + 1}: {shown}; HiGHS {solve['solve_seconds']:.2f} s, status {solve['status']}, "
            f"gap {solve['mip_gap']:.2e}; placement model: {solve['placement_model']}"
        )
    print(plan_text(plan, "fleet_pools"))


if __name__ == "__main__":
    main()
