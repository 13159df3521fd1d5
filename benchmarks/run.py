"""Speed benchmarks, run by hand: ``python benchmarks/run.py [--repeat 5]``. Prints a table of medians (seconds).

Measured in one process so the figures compare as ratios on a noisy machine: a warm single query (tables, model
build and solve, after a first query has loaded everything), a 50-point frontier with and without speculative
decoding, the same frontiers by brute-force enumeration, and a large space (4 accelerator types x 3 precisions x
gamma <= 8 x TP/PP/EP) where one MIP query is compared with one enumeration. Whole requests (``--requests``): Llama 3
70B, 4000 in / 1000 out tokens, TTFT <= 2 s, serving agg,disagg over H100 and H200 and KV 16/8 (default degrees and
batches): a warm cheapest (same question again: tables cached), the same with its tables built, a 50-point frontier,
and the same by enumeration. The large space alone (``--large``): one query and a 50-point frontier, each with its
tables built and with them cached, and the peak memory.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
from collections.abc import Callable

from roofline_opt import api
from roofline_opt.optimize import queries
from roofline_opt.optimize.enumerate import best_point, feasible_points
from roofline_opt.optimize.sweep import budgets


def _median_s(run: Callable[[], object], repeat: int, clock: Callable[[], float] = time.perf_counter) -> float:
    times = []
    for _ in range(repeat):
        start = clock()
        run()
        times.append(clock() - start)
    return statistics.median(times)


def _wall_and_cpu(name: str, run: Callable[[], object], repeat: int) -> list[tuple[str, float]]:
    """Median wall-clock and median CPU seconds of this process (the CPU figure is what a shared machine's load
    does not inflate)."""
    return [(name, _median_s(run, repeat)), (name + " [cpu]", _median_s(run, repeat, time.process_time))]


def _enumerated_frontier(q, points: int) -> int:
    """The same frontier by enumeration: evaluate every point once, then pick the fastest within each budget."""
    pts = feasible_points(q)
    cheapest = pts.usd_per_mtok[best_point(pts, "cheapest", None)]
    fastest = pts.usd_per_mtok[best_point(pts, "fastest", None)]
    return len({best_point(pts, "fastest", b * (1 + 1e-9)) for b in budgets(cheapest, fastest, points)})


def _request_rows(r: int) -> list[tuple[str, float]]:
    """Whole-request benchmarks (see the module docstring)."""
    space = dict(isl=4000, osl=1000, serving=("agg", "disagg"), kv_bits=(16, 8), ttft_ms=2000)
    q = api.question("llama-3-70b", ("h100-sxm", "h200"), **space)
    api.cheapest_answer(q, min_tok_s=30.0)
    fresh = iter(range(1, 1000))

    def new_question():
        return api.cheapest_answer(
            api.question("llama-3-70b", ("h100-sxm", "h200"), max_batch=4096 - next(fresh), **space)
        )

    half = max(1, r // 2)
    return [
        *_wall_and_cpu(
            "requests: warm cheapest, agg,disagg, H100+H200, KV 16/8", lambda: api.cheapest_answer(q, min_tok_s=30.0), r
        ),
        *_wall_and_cpu("requests: same, tables built (new question)", new_question, half),
        *_wall_and_cpu("requests: 50-point frontier (MIP)", lambda: api.frontier_frame(q, points=50), half),
        *_wall_and_cpu("requests: 50-point frontier, enumeration", lambda: _enumerated_frontier(q, 50), 1),
    ]


def _large_question():
    """The large space: Mixtral 8x22B, 4 accelerator types x 3 precisions x gamma <= 8 x TP/PP/EP."""
    return api.question(
        "mixtral-8x22b",
        ("h100-sxm", "h200", "b200", "mi300x"),
        weight_bits=(16, 8, 4),
        ep_degrees=(1, 2, 4, 8),
        draft="llama-3-8b",
        gamma_max=8,
    )


def _large_rows(r: int) -> list[tuple[str, float]]:
    """The large space alone (``--large``): a query and a frontier with their tables built (the question's cache
    emptied first) and with them cached, wall and CPU, then the process's peak memory in MB."""
    large = _large_question()
    api.fastest_answer(
        api.question("llama-3-70b", "h100-sxm", preset="paper"), max_usd_per_mtok=2.0
    )  # imports and HiGHS loaded

    def cold(run: Callable[[], object]) -> Callable[[], object]:
        return lambda: (queries._cached_tables.cache_clear(), run())

    query, frontier = (
        (lambda: api.fastest_answer(large, max_usd_per_mtok=5.0)),
        (lambda: api.frontier_frame(large, points=50)),
    )
    rows = [
        *_wall_and_cpu("large space: one fastest query, tables built", cold(query), r),
        *_wall_and_cpu("large space: one fastest query, tables cached", query, r),
        *_wall_and_cpu("large space: 50-point frontier, tables built", cold(frontier), r),
        *_wall_and_cpu("large space: 50-point frontier, tables cached", frontier, r),
    ]
    return [
        *rows,
        ("large space: peak memory of the process, MB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--requests", action="store_true", help="only the whole-request benchmarks")
    parser.add_argument("--large", action="store_true", help="only the large-space benchmarks (cold and cached)")
    args = parser.parse_args()
    r = args.repeat
    if args.requests:
        _print(_request_rows(r))
        return
    if args.large:
        _print(_large_rows(r))
        return
    llama = api.question("llama-3-70b", "h100-sxm", preset="paper")
    spec = api.question("llama-3-70b", "h100-sxm", preset="paper", draft="llama-3-8b", gamma_max=20)
    large = _large_question()
    api.fastest_answer(llama, max_usd_per_mtok=2.0)
    rows = [
        (
            "warm single query: fastest, Llama 3 70B, H100, $2/Mtok",
            _median_s(lambda: api.fastest_answer(llama, max_usd_per_mtok=2.0), r),
        ),
        (
            "warm single query: cheapest, Llama 3 70B, H100, 50 tok/s",
            _median_s(lambda: api.cheapest_answer(llama, min_tok_s=50.0), r),
        ),
        ("50-point frontier, Llama 3 70B, H100 (MIP)", _median_s(lambda: api.frontier_frame(llama, points=50), r)),
        ("50-point frontier, same, enumeration", _median_s(lambda: _enumerated_frontier(llama, 50), r)),
        (
            "50-point frontier, + spec. decoding gamma<=20 (MIP)",
            _median_s(lambda: api.frontier_frame(spec, points=50), r),
        ),
        ("50-point frontier, + spec. decoding, enumeration", _median_s(lambda: _enumerated_frontier(spec, 50), r)),
        ("large space, one fastest query (MIP)", _median_s(lambda: api.fastest_answer(large, max_usd_per_mtok=5.0), r)),
        (
            "large space, one fastest query (enumeration)",
            _median_s(lambda: api.fastest_answer(large, max_usd_per_mtok=5.0, method="enumerate"), max(1, r // 2)),
        ),
    ]
    mip, enum = rows[-2][1], rows[-1][1]
    requests = _request_rows(r)
    _print(rows + requests)
    print(f"large space: enumeration / MIP = {enum / mip:.1f}x")


def _print(rows: list[tuple[str, float]]) -> None:
    width = max(len(name) for name, _ in rows)
    print(f"{'benchmark':<{width}}  median_s")
    for name, seconds in rows:
        print(f"{name:<{width}}  {seconds:8.3f}")
    by_name = dict(rows)
    mip = by_name.get("requests: 50-point frontier (MIP)")
    enum = by_name.get("requests: 50-point frontier, enumeration")
    if mip and enum:
        print(f"requests frontier: enumeration / MIP = {enum / mip:.1f}x")


if __name__ == "__main__":
    main()
