"""Fleet-planning benchmarks, run by hand: ``python benchmarks/fleet.py [--case five|twenty|profile] [--time-limit S]``.

Cases: five models on the 1,024-GPU pod (128 HGX H100 servers, rail-optimised; chat as whole requests with a TTFT
limit), twenty models on the same pod, and a 24-period demand profile of three models (reserved + on-demand GPUs; the
same pod). Prints, per case, the seconds
spent deriving the graph's figures (topology), building candidates (evaluator), building and solving the MIP, the
solver status and gap, then the plan's model table. The machine load (1-minute load average) is printed first.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from roofline_opt import api
from roofline_opt.cli.plan_cmd import plan_text
from roofline_opt.optimize import fleet as fl

POD = str(Path(__file__).resolve().parents[1] / "instances" / "clusters" / "pod-128x-hgx-h100.yaml")
BASE = [
    {
        "name": "chat",
        "model": "llama-3-70b",
        "weight_bits": [16, 8],
        "kv_bits": [16, 8],
        "demand_req_s": 375,
        "isl": 2000,
        "osl": 400,
        "tpot_ms": 40,
        "ttft_ms": 1500,
    },
    {"name": "code", "model": "llama-3.1-8b", "demand_tok_s": 300_000, "tpot_ms": 20},
    {"name": "moe", "model": "mixtral-8x22b", "weight_bits": [16, 8], "demand_tok_s": 100_000, "tpot_ms": 50},
    {"name": "big", "model": "llama-3.1-405b", "weight_bits": [8], "demand_tok_s": 30_000, "tpot_ms": 60},
    {"name": "qwen", "model": "qwen2.5-72b", "demand_tok_s": 60_000, "tpot_ms": 30},
]
TWENTY_MODELS = (
    "llama-3-70b",
    "llama-3.1-8b",
    "mixtral-8x7b",
    "qwen2.5-72b",
    "llama-2-13b",
    "llama-3.3-70b",
    "mistral-large-2",
    "llama-2-7b",
    "gpt-j-6b",
    "llama-3-8b",
)
DAY = [
    0.35,
    0.3,
    0.25,
    0.25,
    0.3,
    0.4,
    0.55,
    0.7,
    0.85,
    0.95,
    1.0,
    1.0,
    0.95,
    0.95,
    1.0,
    0.95,
    0.9,
    0.85,
    0.8,
    0.75,
    0.7,
    0.6,
    0.5,
    0.4,
]


def five() -> dict:
    return {"cluster": POD, "models": BASE}


def twenty() -> dict:
    models = []
    for i in range(20):
        name = TWENTY_MODELS[i % len(TWENTY_MODELS)]
        models.append(
            {
                "name": f"m{i:02d}-{name}",
                "model": name,
                "demand_tok_s": 8_000 + 3_000 * i,
                "tpot_ms": 25 + 5 * (i % 4),
                "context": 2000 + 1000 * (i % 5),
            }
        )
    return {"cluster": POD, "models": models}


def profile() -> dict:
    models = []
    for m, peak in zip(BASE[:3], (150, 120_000, 40_000), strict=True):
        shifted = DAY[m["name"] == "code" and 3 :] + DAY[: m["name"] == "code" and 3]
        unit = "req_s" if "demand_req_s" in m else "tok_s"
        models.append(
            {
                **{k: v for k, v in m.items() if not k.startswith("demand_")},
                "demand_profile": {unit: [round(peak * f, 1) for f in shifted]},
            }
        )
    prices = {"h100-sxm": {"reserved": 1.4, "on_demand": 2.8}}
    return {"cluster": POD, "models": models, "prices": prices}


CASES = {"five": five, "twenty": twenty, "profile": profile}


def run(case: str, time_limit: float | None, exact_placement: bool = False) -> None:
    start = time.perf_counter()
    spec = fl.parse_fleet(CASES[case](), api.question)
    parsed = time.perf_counter()
    cands, pools = fl.plan.fleet_candidates(spec)
    built = time.perf_counter()
    options = api.solver_options(time_limit, 1e-4)
    replicas, placement, split, solve = fl.plan.solve_mip(spec, cands, options, exact_placement, pools)
    solved = time.perf_counter()
    solve["candidates"] = len(cands)
    plan = fl.results.build_plan(spec, cands, replicas, placement, split, solve)
    done = time.perf_counter()
    print(f"== {case}: {len(spec.models)} models, {spec.periods} period(s), {len(cands)} candidates")
    print(
        f"graph figures + questions {parsed - start:.2f} s, candidates {built - parsed:.2f} s, "
        f"MIP build + solve {solved - built:.2f} s (HiGHS {solve['solve_seconds']:.2f} s"
        + (f" + cost phase {solve['cost_phase']['solve_seconds']:.2f} s" if "cost_phase" in solve else "")
        + f"), re-evaluation {done - solved:.2f} s; status {solve['status']}, gap {solve['mip_gap']}; "
        f"placement model: {solve['placement_model']}"
    )
    print(plan_text(plan, case))
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=[*CASES, "all"], default="all")
    parser.add_argument("--time-limit", type=float, default=None)
    parser.add_argument(
        "--exact-placement",
        action="store_true",
        help="solve the per-domain placement model directly (no class relaxation)",
    )
    args = parser.parse_args()
    print(f"load average (1, 5, 15 min): {', '.join(f'{x:.2f}' for x in os.getloadavg())}; cpus {os.cpu_count()}")
    for case in CASES if args.case == "all" else [args.case]:
        run(case, args.time_limit, args.exact_placement)


if __name__ == "__main__":
    main()
