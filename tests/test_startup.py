"""Start-up: a command imports what it needs when it needs it (behaviour, not timing: see benchmarks/)."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("pyomo", "pandas", "networkx", "highspy", "matplotlib")


def modules_after(argv: list[str]) -> set[str]:
    """Top-level modules imported by running the CLI with ``argv`` in a fresh interpreter."""
    code = (
        "import sys\n"
        "from roofline_opt.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(out.split("\n")[-2].split())


@pytest.mark.parametrize("argv", [["--help"], ["fastest", "--help"], ["cluster", "show", "--help"]])
def test_help_imports_no_solver_dataframe_or_graph_library(argv):
    assert modules_after(argv).isdisjoint(HEAVY)


def test_a_query_still_imports_the_solver_when_it_solves():
    argv = ["fastest", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--tp-degrees", "1", "--pp-degrees", "1"]
    assert {"pyomo", "highspy"} <= modules_after(argv)
