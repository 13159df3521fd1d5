"""Start-up benchmark, run by hand: ``python benchmarks/startup.py [--repeat 5]``. Prints a markdown table.

Each command runs as a new process, as a user times it (``time roofline-opt --help``): the ``roofline-opt`` script
next to this interpreter (``python -m roofline_opt`` when there is none). Commands run in rounds, one of each per
round, so that a change in the machine's load touches all of them alike; medians over the rounds. Wall seconds and
the CPU seconds of the child (user + system, from ``resource.getrusage(RUSAGE_CHILDREN)``): on a shared machine the
CPU time is the steadier figure. The load average is printed before and after.

Floors, measured the same way: the interpreter alone (``python -c pass``), numpy alone, and the solver stack
(numpy, ``pyomo.core``, Pyomo's HiGHS interface and highspy) that any solving command needs.

One warm-up round is not counted (the first run writes bytecode caches). Children run without
``PYTHONDONTWRITEBYTECODE`` unless ``--keep-env`` is given: a user's installation keeps compiled bytecode, and an
environment that forbids writing it compiles every module of the package on every run.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

FASTEST = ("fastest", "--model", "llama-3-70b", "--gpu", "h100-sxm", "--max-usd-per-mtok", "5")
COMMANDS = {
    "python -c pass": ((sys.executable, "-c", "pass"), None),
    "python -c 'import numpy'": ((sys.executable, "-c", "import numpy"), None),
    "python -c 'import numpy, pyomo.core, <HiGHS interface>, highspy'": (
        (sys.executable, "-c", "import numpy, pyomo.core, pyomo.contrib.solver.solvers.highs, highspy"),
        None,
    ),
    "roofline-opt --help": (("--help",), 0.3),
    "roofline-opt models": (("models",), 0.3),
    "roofline-opt gpus": (("gpus",), 0.3),
    "roofline-opt " + " ".join(FASTEST): (FASTEST, 0.6),
}
"""Label -> (argv: a full command for floors, else the tool's arguments; target wall seconds or None)."""


def tool() -> list[str]:
    """The command a user types: the console script installed beside this interpreter, else ``python -m``."""
    script = Path(sys.executable).with_name("roofline-opt")
    if script.is_file():
        return [str(script)]
    found = shutil.which("roofline-opt")
    return [found] if found else [sys.executable, "-m", "roofline_opt"]


def argv_of(args: tuple[str, ...]) -> list[str]:
    return list(args) if args[0] == sys.executable else [*tool(), *args]


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system of the child) of one run; a failing command stops the benchmark."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="rounds counted (default 5)")
    parser.add_argument("--keep-env", action="store_true", help="keep PYTHONDONTWRITEBYTECODE for the children")
    args = parser.parse_args()
    env = dict(os.environ)
    if not args.keep_env:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    load_before = os.getloadavg()
    times: dict[str, list[tuple[float, float]]] = {label: [] for label in COMMANDS}
    for round_ in range(args.repeat + 1):
        for label, (command, _) in COMMANDS.items():
            measured = run_once(argv_of(command), env)
            if round_ > 0:
                times[label].append(measured)
    load_after = os.getloadavg()

    print(f"start-up, medians of {args.repeat} rounds (one warm-up round not counted); {os.cpu_count()} CPUs")
    print(
        f"load average (1, 5, 15 min) before: {', '.join(f'{x:.2f}' for x in load_before)}; "
        f"after: {', '.join(f'{x:.2f}' for x in load_after)}"
    )
    bytecode = "kept (--keep-env)" if args.keep_env else "removed"
    print(
        f"PYTHONDONTWRITEBYTECODE in the environment: {os.environ.get('PYTHONDONTWRITEBYTECODE', 'unset')}, "
        f"for the children: {bytecode}; tool: {' '.join(tool())}\n"
    )
    print("| command | median wall s | min wall s | median CPU s | target wall s |")
    print("|---|---:|---:|---:|---:|")
    for label, (_, target) in COMMANDS.items():
        walls = [w for w, _ in times[label]]
        cpus = [c for _, c in times[label]]
        goal = "floor" if target is None else f"<= {target}"
        print(
            f"| `{label}` | {statistics.median(walls):.3f} | {min(walls):.3f} | {statistics.median(cpus):.3f} | "
            f"{goal} |"
        )


if __name__ == "__main__":
    main()
