"""Speed benchmarks, run by hand: ``python benchmarks/run.py [--repeat 5]``. Prints a table of medians (seconds).

Measured in one process so the figures compare as ratios on a noisy machine: a warm single query (tables, model
build and solve, after a first query has loaded everything), a 50-point frontier with and without speculative
decoding, the same frontiers by brute-force enumeration, and a large space (4 accelerator types x 3 precisions x
gamma <= 8 x TP/PP/EP) where one MIP query is compared with one enumeration.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from roofline_opt import api
from roofline_opt.optimize.enumerate import best_point, feasible_points
from roofline_opt.optimize.sweep import budgets


def _median_s(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _enumerated_frontier(q, points: int) -> int:
    """The same frontier by enumeration: evaluate every point once, then pick the fastest within each budget."""
    pts = feasible_points(q)
    cheapest = pts.usd_per_mtok[best_point(pts, "cheapest", None)]
    fastest = pts.usd_per_mtok[best_point(pts, "fastest", None)]
    return len({best_point(pts, "fastest", b * (1 + 1e-9)) for b in budgets(cheapest, fastest, points)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    r = args.repeat
    llama = api.question("llama-3-70b", "h100-sxm", preset="paper")
    spec = api.question("llama-3-70b", "h100-sxm", preset="paper", draft="llama-3-8b", gamma_max=20)
    large = api.question(
        "mixtral-8x22b",
        "h100-sxm,h200,b200,mi300x",
        weight_bits=(16, 8, 4),
        ep_degrees=(1, 2, 4, 8),
        draft="llama-3-8b",
        gamma_max=8,
    )
    api.fastest_answer(llama, 2.0)
    rows = [
        (
            "warm single query: fastest, Llama 3 70B, H100, $2/Mtok",
            _median_s(lambda: api.fastest_answer(llama, 2.0), r),
        ),
        (
            "warm single query: cheapest, Llama 3 70B, H100, 50 tok/s",
            _median_s(lambda: api.cheapest_answer(llama, 50.0), r),
        ),
        ("50-point frontier, Llama 3 70B, H100 (MIP)", _median_s(lambda: api.frontier_frame(llama, 50), r)),
        ("50-point frontier, same, enumeration", _median_s(lambda: _enumerated_frontier(llama, 50), r)),
        ("50-point frontier, + spec. decoding gamma<=20 (MIP)", _median_s(lambda: api.frontier_frame(spec, 50), r)),
        ("50-point frontier, + spec. decoding, enumeration", _median_s(lambda: _enumerated_frontier(spec, 50), r)),
        ("large space, one fastest query (MIP)", _median_s(lambda: api.fastest_answer(large, 5.0), r)),
        (
            "large space, one fastest query (enumeration)",
            _median_s(lambda: api.fastest_answer(large, 5.0, method="enumerate"), max(1, r // 2)),
        ),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"{'benchmark':<{width}}  median_s")
    for name, seconds in rows:
        print(f"{name:<{width}}  {seconds:8.3f}")
    mip, enum = rows[-2][1], rows[-1][1]
    print(f"large space: enumeration / MIP = {enum / mip:.1f}x")


if __name__ == "__main__":
    main()
