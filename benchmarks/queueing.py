"""Queueing model against the simulator, run by hand: ``python benchmarks/queueing.py [--requests 20000 --seeds 4]``.

Prints the p90/p99 TTFT error of ``physics.queueing`` against ``simulate.engine`` in percent (negative: the model is
lower) on the grid of docs/physics/queueing.md: Llama-3-8B on one H100 SXM (TP 1, default preset); disaggregated
2,000-token prompts on x = 1, 2 prefill instances, Poisson and c_a^2 = 4; aggregated 3000/1024 and 1500/2048
(prompt/chunk) with 50 output tokens and 256 slots.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from roofline_opt import catalog
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics import queueing as qm
from roofline_opt.physics import requests as rq
from roofline_opt.physics.specs import DEFAULT
from roofline_opt.simulate import arrivals, engine

H100 = catalog.load_gpu("h100-sxm")
MODEL = catalog.resolve_model("llama-3-8b", "model")[0]
PHYSICS = engine.Physics(MODEL, DEFAULT, 16)
UTILISATIONS = (0.3, 0.5, 0.7, 0.8, 0.9)


def _layout(context: float) -> ev.Layout:
    return ev.Layout.of(1, False, 1, context, 1, 1, 16)


def _error(model_s: np.ndarray, runs: list[engine.Served]) -> str:
    sim = np.mean([np.percentile(r.ttft_s, [90.0, 99.0]) for r in runs], axis=0)
    p90, p99 = 100.0 * (model_s[1:] / sim - 1.0)
    return f"{p90:+.1f} / {p99:+.1f}"


def disaggregated(n: int, seeds: int) -> None:
    workload, prefill = rq.Workload.single(2000, 2), _layout(0.0)
    service = float(rq.prefill_step(MODEL, H100, DEFAULT, 16, prefill, 1.0, 2000).step_time_s)
    print("| x | c_a^2 | " + " | ".join(f"rho {u}" for u in UTILISATIONS) + " |")
    print("|---" * (2 + len(UTILISATIONS)) + "|")
    for x in (1, 2):
        for scv in (1.0, 4.0):
            cells = []
            for u in UTILISATIONS:
                process = qm.Arrivals(u * x / service, scv)
                model = qm.disaggregated_ttft(
                    MODEL, DEFAULT, 16, workload, (H100, prefill, x), (H100, _layout(2001.0)), process
                )
                runs = [
                    engine.disaggregated(
                        PHYSICS,
                        (H100, prefill, 1, x),
                        (H100, _layout(2001.0), 64, x),
                        arrivals.draw(process, workload, n, s),
                    )
                    for s in range(seeds)
                ]
                cells.append(_error(model["ttft_s"], runs))
            print(f"| {x} | {scv:g} | " + " | ".join(cells) + " |")


def _aggregated_rate(layout: ev.Layout, workload: rq.Workload, chunk: int, utilisation: float) -> float:
    lo, hi = 1e-3, 1e3
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        u = qm.aggregated_ttft(MODEL, H100, DEFAULT, 16, layout, workload, chunk, qm.Arrivals(mid))["utilisation"]
        lo, hi = (mid, hi) if u < utilisation else (lo, mid)
    return lo


def aggregated(n: int, seeds: int) -> None:
    print("| prompt / chunk | " + " | ".join(f"rho {u}" for u in UTILISATIONS) + " |")
    print("|---" * (1 + len(UTILISATIONS)) + "|")
    for isl, chunk in ((3000, 1024), (1500, 2048)):
        workload, layout = rq.Workload.single(isl, 50), _layout(isl + 25.0)
        cells = []
        for u in UTILISATIONS:
            process = qm.Arrivals(_aggregated_rate(layout, workload, chunk, u))
            model = qm.aggregated_ttft(MODEL, H100, DEFAULT, 16, layout, workload, chunk, process)
            runs = [
                engine.aggregated(PHYSICS, H100, layout, 256, chunk, arrivals.draw(process, workload, n, s))
                for s in range(seeds)
            ]
            cells.append(_error(model["ttft_s"], runs))
        print(f"| {isl} / {chunk} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000, help="requests per seed (default 20000)")
    parser.add_argument("--seeds", type=int, default=4, help="seeds averaged (default 4)")
    args = parser.parse_args()
    disaggregated(args.requests, args.seeds)
    print()
    aggregated(args.requests, args.seeds)


if __name__ == "__main__":
    main()
