"""Random MIP-vs-enumeration comparison at the edges, run by hand: ``python benchmarks/exactness.py [--n 1000]``.

Draws small catalog spaces (one or two accelerators, a few precisions, TP/PP degrees, batches up to 64) and asks
each one question by both methods (``method="mip"`` and ``method="enumerate"``): fastest within a budget or cheapest
at a speed, the target drawn as a setup's own figure (computed by the evaluator, exactly at it or exactly at the
edge of the target tolerance) or at a random factor of it, a third of the spaces at a price drawn log-uniformly over
$1e-14..$1e300 per GPU-hour (the price override), and one space in eight about whole requests with aggregated and
disaggregated serving, asked for its frontier. Two answers agree when both are infeasible, or their objectives (the
frontier: every row's cost and speed) are equal within 1e-6 (the solver's default gap). Prints one line per
disagreement and the totals; exit status 1 when any differ. Uses only the public API, so it runs on older checkouts
(``PYTHONPATH=OLD_CHECKOUT python benchmarks/exactness.py``) for a before/after count.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings

import numpy as np

from roofline_opt import api
from roofline_opt.errors import Infeasible
from roofline_opt.optimize.enumerate import feasible_points

MODELS = ("llama-3-8b", "mistral-7b", "llama-2-13b", "qwen2.5-72b", "llama-3-70b", "mixtral-8x7b", "qwen3-30b-a3b")
GPUS = ("h100-sxm", "h200", "a100-80gb", "b200", "mi300x", "mi355x", "l40s")
RTOL = 1e-6
TARGET_RTOL = 1e-9


def draw_space(rng: np.random.Generator) -> dict:
    """A small question's keyword arguments for api.question."""
    gpus = list(rng.choice(GPUS, size=int(rng.integers(1, 3)), replace=False))
    space = dict(
        model=str(rng.choice(MODELS)),
        gpu=tuple(gpus),
        weight_bits=sorted({int(b) for b in rng.choice((16, 8, 4), size=int(rng.integers(1, 4)))}),
        tp_degrees=sorted({int(d) for d in rng.choice((1, 2, 4, 8, 16), size=int(rng.integers(1, 4)))}),
        pp_degrees=sorted({int(d) for d in rng.choice((1, 2), size=int(rng.integers(1, 3)))}),
        tp_modes=(["1d"], ["2d"], ["1d", "2d"])[int(rng.integers(3))],
        max_batch=int(rng.choice((1, 8, 16, 32, 64))),
        context=int(rng.choice((0, 1000, 4000, 8000))),
        max_gpus=None if rng.random() < 0.5 else int(rng.choice((4, 8, 16))),
    )
    if rng.random() < 1 / 3:
        space["usd_per_gpu_hour"] = ",".join(f"{g}={10.0 ** rng.uniform(-14, 300):.6g}" for g in gpus)
    return space


def draw_requests(rng: np.random.Generator) -> dict:
    """A small whole-request question with aggregated and disaggregated serving."""
    return dict(
        model=str(rng.choice(MODELS[:3])),
        gpu=str(rng.choice(("h100-sxm", "h200", "a100-80gb"))),
        weight_bits=[int(rng.choice((16, 8)))],
        tp_degrees=[1, 2, 4],
        pp_degrees=[1],
        tp_modes=["1d"],
        max_batch=int(rng.choice((8, 16, 32))),
        isl=int(rng.choice((500, 2000))),
        osl=int(rng.choice((100, 500))),
        serving=("agg", "disagg"),
        max_instances=2,
    )


def draw_target(rng: np.random.Generator, q, kind: str) -> float | None:
    """A setup's own figure (its speed for cheapest, its cost for fastest), at it, at the tolerance's edge, or at a
    random factor; None (no target) one time in eight."""
    pts = feasible_points(q)
    if not len(pts.batch) or rng.random() < 1 / 8:
        return None
    i = int(rng.integers(len(pts.batch)))
    figure = float(1.0 / pts.time_per_token_s[i] if kind == "cheapest" else pts.usd_per_mtok[i])
    how = rng.integers(4)
    if how == 0:
        return figure
    if how == 1:
        return figure / (1 - TARGET_RTOL) if kind == "cheapest" else figure / (1 + TARGET_RTOL)
    if how == 2:
        return float(np.nextafter(figure, math.inf if kind == "cheapest" else -math.inf))
    return figure * float(rng.uniform(0.5, 2.0))


def outcome(run) -> tuple[str, object]:
    try:
        return "ok", run()
    except Infeasible:
        return "infeasible", None
    except Exception as exc:  # noqa: BLE001 - a crash is a disagreement to count, not to stop at
        return "error", f"{type(exc).__name__}: {' '.join(str(exc).split())[:120]}"


def close(a: float, b: float) -> bool:
    return abs(a - b) <= RTOL * abs(b)


def compare_query(rng: np.random.Generator, space: dict) -> tuple[bool, str]:
    kind = "cheapest" if rng.random() < 0.5 else "fastest"
    q = api.question(**space)
    target = draw_target(rng, q, kind)
    ask = api.cheapest_answer if kind == "cheapest" else api.fastest_answer
    mip, oracle = (outcome(lambda m=m: ask(q, target, m)) for m in ("mip", "enumerate"))
    if mip[0] != oracle[0] or "error" in (mip[0], oracle[0]):
        return False, f"{kind} {target!r}: mip {mip[0]} {mip[1] if mip[0] == 'error' else ''} vs {oracle[0]}"
    if mip[0] == "infeasible":
        return True, ""
    objective = "usd_per_mtok" if kind == "cheapest" else "tok_s_per_request"
    ours, best = getattr(mip[1], objective), getattr(oracle[1], objective)
    return close(ours, best), f"{kind} {target!r}: mip {objective}={ours!r} vs {best!r}"


def compare_frontier(space: dict) -> tuple[bool, str]:
    q = api.question(**space)
    mip, oracle = (outcome(lambda m=m: api.frontier_frame(q, points=5, method=m)) for m in ("mip", "enumerate"))
    if mip[0] != "ok" or oracle[0] != "ok":
        return mip[0] == oracle[0] != "error", f"frontier: mip {mip[0]} vs {oracle[0]}"
    rows = lambda f: list(zip(f["usd_per_mtok"], f["tok_s_per_request"], strict=True))  # noqa: E731
    a, b = rows(mip[1]), rows(oracle[1])
    same = len(a) == len(b) and all(close(x[0], y[0]) and close(x[1], y[1]) for x, y in zip(a, b, strict=True))
    return same, f"frontier: mip {a[:2]}... ({len(a)} rows) vs {b[:2]}... ({len(b)} rows)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="questions to compare (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    warnings.simplefilter("error", RuntimeWarning)  # a numpy warning is a disagreement too (counted as an error)
    differ, asked, start = 0, 0, time.perf_counter()
    while asked < args.n:
        requests = rng.random() < 1 / 8
        space = draw_requests(rng) if requests else draw_space(rng)
        try:
            api.question(**space)
        except Exception:  # noqa: BLE001 - an invalid draw (e.g. no precision the accelerators run) is skipped
            continue
        asked += 1
        same, text = compare_frontier(space) if requests else compare_query(rng, space)
        if not same:
            differ += 1
            print(f"DIFFER #{asked}: {space} {text}", flush=True)
    seconds = time.perf_counter() - start
    print(f"{differ} of {asked} questions differ (seed {args.seed}, {seconds:.0f} s)")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
