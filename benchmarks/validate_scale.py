"""``validate`` and ``calibrate`` at their 10,000-row cap: wall time and peak memory (issues 27 and 29).

Builds a measured-points CSV of N rows (default 10,000, the cap) by repeating the rows of
``../shared/reference/measured_points.csv`` with perturbed figures: the measured speeds scaled by a random factor in
0.8..1.2 and, where a row states a batch or a concurrency, that number scaled the same way, so most rows are new
setups (the count of distinct mapped setups is printed), not copies a cache would answer.

    python benchmarks/validate_scale.py --rows 10000 validate
    python benchmarks/validate_scale.py --rows 10000 calibrate      # rows of H100 SXM only, fitted with --gpu h100-sxm

Each run is a fresh ``roofline-opt`` process timed with ``/usr/bin/time``-style accounting (wall seconds and the
child's peak RSS from ``resource.getrusage``).
"""

from __future__ import annotations

import argparse
import csv
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REFERENCE = HERE.parent / ".." / "shared" / "reference" / "measured_points.csv"
SPEED_COLUMNS = ("tpot_ms", "tok_s_per_request", "total_tok_s", "tok_s_per_gpu")
NUMBER = re.compile(r"(?<![\d.])(\d+)(?![\d.])")


def _scaled(text: str, factor: float) -> str:
    try:
        return f"{float(text) * factor:.6g}"
    except ValueError:
        return text


def _batch(text: str, factor: float) -> str:
    """The first whole number of a "static batch 64" / "concurrency 25" cell scaled (at least 1)."""
    if not re.search(r"batch|concurrency|seqs", text):
        return text
    return NUMBER.sub(lambda m: str(max(1, round(int(m.group(1)) * factor))), text, count=1)


def build(rows: int, path: Path, gpu: str | None = None, seed: int = 0) -> None:
    """N rows from the reference rows (only those whose gpu cell contains ``gpu``, when given)."""
    rng = random.Random(seed)
    with open(REFERENCE, newline="") as f:
        reader = csv.DictReader(f)
        columns = reader.fieldnames
        source = [r for r in reader if gpu is None or gpu in r["gpu"]]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        for i in range(rows):
            row = dict(source[i % len(source)])
            if i >= len(source):
                factor = rng.uniform(0.8, 1.2)
                for c in SPEED_COLUMNS:
                    row[c] = _scaled(row[c], factor)
                row["batch_or_concurrency"] = _batch(row["batch_or_concurrency"], rng.uniform(0.8, 1.2))
            writer.writerow(row)


def distinct_setups(path: Path) -> int:
    from roofline_opt.fidelity.measured import map_row, read_measured

    setups = {row.setup for row in map(map_row, read_measured(path)) if row.setup is not None}
    return len(setups)


def run(command: list[str]) -> tuple[float, float, int]:
    """Wall seconds, peak RSS (MB) of the child and its exit code."""
    start = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if done.returncode:
        print(done.stderr, file=sys.stderr)
    return wall, peak_mb, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("validate", "calibrate"))
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--gpu", default="h100-sxm", help="calibrate: the accelerator fitted (default h100-sxm)")
    parser.add_argument("--gpu-cell", default="H100 SXM", help="calibrate: rows whose gpu cell contains this")
    parser.add_argument("--keep", metavar="FILE", help="write the generated CSV here and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.keep) if args.keep else Path(tmp) / "measured.csv"
        build(args.rows, path, args.gpu_cell if args.command == "calibrate" else None)
        print(f"{args.rows} rows, {distinct_setups(path)} distinct mapped setups")
        exe = [sys.executable, "-m", "roofline_opt", args.command, "--measured", str(path)]
        wall, peak_mb, code = run(exe + (["--json"] if args.command == "validate" else ["--gpu", args.gpu]))
        print(f"{args.command}: {wall:.1f} s wall, peak RSS {peak_mb:.0f} MB, exit {code}")


if __name__ == "__main__":
    main()
