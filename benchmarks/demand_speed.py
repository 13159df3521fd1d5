"""Whole process time of a demand-sized whole-request question against a decode-only one (issue 28: within 2x).

Run by hand: ``python benchmarks/demand_speed.py [--repeats 5]``. Each command runs ``--repeats`` times as its own
process (import, solve, print), interleaved so machine load falls on all alike; prints the median wall time and the
median CPU time (user + system of the child) of each, and the ratios to the decode-only question. On a shared
machine the wall time carries the load of other processes; the CPU time is the figure to compare.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

BASE = ["cheapest", "--model", "llama-3-70b", "--gpu", "h100-sxm"]
WHOLE = ["--isl", "2000", "--osl", "500", "--serving", "agg,disagg"]
COMMANDS = {
    "decode-only": BASE,
    "whole requests": [*BASE, *WHOLE],
    "whole requests, --demand-req-s 10": [*BASE, *WHOLE, "--demand-req-s", "10"],
    "whole requests, --ttft-ms 1000 --percentile 90": [*BASE, *WHOLE, "--ttft-ms", "1000", "--percentile", "90"],
    "whole requests, --tpot-ms 50 --percentile 90": [*BASE, *WHOLE, "--tpot-ms", "50", "--percentile", "90"],
}


def _run(args: list[str]) -> tuple[float, float]:
    """(wall s, CPU s) of one ``roofline-opt`` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "roofline_opt", *args], check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    repeats = parser.parse_args().repeats
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in COMMANDS}
    for _ in range(repeats):
        for name, args in COMMANDS.items():
            times[name].append(_run(args))
    base_wall, base_cpu = (statistics.median(t[i] for t in times["decode-only"]) for i in (0, 1))
    print(f"{repeats} runs each, medians; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'question':48s} {'wall s':>7s} {'x':>5s} {'CPU s':>7s} {'x':>5s}")
    for name, runs in times.items():
        wall, cpu = (statistics.median(t[i] for t in runs) for i in (0, 1))
        print(f"{name:48s} {wall:7.2f} {wall / base_wall:5.2f} {cpu:7.2f} {cpu / base_cpu:5.2f}")


if __name__ == "__main__":
    main()
