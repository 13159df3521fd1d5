"""Scaling benchmarks, run by hand: ``python benchmarks/scaling.py [--repeat 3]``. Prints markdown tables.

Medians of ``--repeat`` runs, wall and CPU seconds (the machine may be shared: CPU time is the steadier figure), all in
one process so that ratios compare. Three series:

- a 50-point frontier against the number of MIP choices (Llama 3 70B on H100 with speculative decoding, gamma <= G
  for growing G, which crosses the old 600-choice screening threshold), with the same frontier by enumeration;
- deriving a cluster's figures (load + every GPU type's collective figures + placement limits) against its size:
  rail-optimised pods of HGX H100 servers and square tori, up to 10,000 GPUs;
- the fitted growth: the slope of log(time) against log(size) over each series.
"""

from __future__ import annotations

import argparse
import math
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from roofline_opt import api, catalog, topology
from roofline_opt.optimize.enumerate import best_point, feasible_points
from roofline_opt.optimize.sweep import budgets
from roofline_opt.optimize.tables import build_tables

GAMMAS = (0, 1, 2, 3, 4, 5, 8, 12, 20)
PODS = (16, 32, 64, 128, 256, 512, 1250)
TORI = (16, 32, 50, 71, 100)


def timed(run: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median wall and CPU seconds of ``run``."""
    wall, cpu = [], []
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        run()
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
    return statistics.median(wall), statistics.median(cpu)


def enumerated_frontier(q, points: int = 50) -> int:
    """The same frontier by enumeration: evaluate every point once, then the fastest within each budget."""
    pts = feasible_points(q)
    cheapest = pts.usd_per_mtok[best_point(pts, "cheapest", None)]
    fastest = pts.usd_per_mtok[best_point(pts, "fastest", None)]
    return len({best_point(pts, "fastest", b * (1 + 1e-9)) for b in budgets(cheapest, fastest, points)})


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of log(y) on log(x): time ~ size^slope."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True)) / sum((a - mx) ** 2 for a in lx)


def choices_series(repeat: int) -> None:
    print("| gamma <= | MIP choices | frontier MIP wall s | CPU s | enumeration wall s | CPU s | enum / MIP (CPU) |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    sizes, cpus = [], []
    for gamma in GAMMAS:
        q = api.question(
            "llama-3-70b", "h100-sxm", preset="paper", draft="llama-3-8b" if gamma else None, gamma_max=gamma
        )
        api.frontier_frame(q, points=50)  # warm: tables cached for the question
        choices = len(build_tables(q))  # every (layout, interval) choice: the space's size, though tables are lazy
        mip = timed(lambda q=q: api.frontier_frame(q, points=50), repeat)
        enum = timed(lambda q=q: enumerated_frontier(q), max(1, repeat if gamma <= 5 else 1))
        sizes.append(choices)
        cpus.append(mip[1])
        print(
            f"| {gamma} | {choices:,} | {mip[0]:.3f} | {mip[1]:.3f} | {enum[0]:.3f} | {enum[1]:.3f} | "
            f"{enum[1] / mip[1]:.1f} |"
        )
    print(f"\nfitted growth of the MIP frontier's CPU time: choices^{slope(sizes, cpus):.2f}\n")


def cluster_run(path: Path) -> None:
    cluster = topology.load_cluster(path)
    for name in topology.gpu_counts(cluster):
        topology.effective_gpu(cluster, name, catalog.load_gpu(name))
        limit = topology.instance_limit(cluster, name)
        for tp in (1, 2, 4, 8, 16, 32, 64):
            for pp in (1, 2, 4, 8):
                limit(tp, pp)


def cluster_series(repeat: int) -> None:
    print("| cluster | GPUs | wall s | CPU s |")
    print("|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for label, specs in (
            ("HGX H100 pod", [(f"nodes: {n}\nnode_type: hgx-h100\n", 8 * n) for n in PODS]),
            ("torus", [(f"torus: [{n}, {n}]\n", n * n) for n in TORI]),
        ):
            sizes, cpus = [], []
            for text, gpus in specs:
                path = Path(tmp) / "cluster.yaml"
                path.write_text(text, encoding="utf-8")
                wall, cpu = timed(lambda path=path: cluster_run(path), repeat)
                sizes.append(gpus)
                cpus.append(cpu)
                print(f"| {label} | {gpus:,} | {wall:.3f} | {cpu:.3f} |")
            print(f"| {label}: fitted growth | | | GPUs^{slope(sizes, cpus):.2f} |")
    print(f"\npeak memory of the process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", choices=("choices", "clusters"))
    args = parser.parse_args()
    if args.only != "clusters":
        choices_series(args.repeat)
    if args.only != "choices":
        cluster_series(args.repeat)


if __name__ == "__main__":
    main()
