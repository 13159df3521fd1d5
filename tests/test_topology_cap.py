"""Irregular cluster graphs without a near-linear derivation are refused above a stated cap, in one line (issue 27:
a 4,000-GPU irregular tree ran past 180 s); smaller ones are derived as before."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import networkx as nx
import pytest

from roofline_opt.cli import EXIT_BAD_INPUT, EXIT_OK, main
from roofline_opt.topology.derive import MAX_PATH_WORK

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "irregular_tree.py"


def _tree(servers: int, path: Path) -> Path:
    spec = importlib.util.spec_from_file_location("irregular_tree", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    nx.write_graphml(module.build(servers), path)
    return path


def test_an_irregular_tree_beyond_the_cap_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["cluster", "show", str(_tree(500, tmp_path / "tree.graphml"))])
    err = capsys.readouterr().err.strip()
    assert code == EXIT_BAD_INPUT and "\n" not in err
    assert err.startswith("roofline-opt: error: cluster: has 4,000 classes of GPUs")
    assert f"more than the {MAX_PATH_WORK:,} allowed" in err


def test_a_small_irregular_tree_is_still_derived(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["cluster", "show", str(_tree(10, tmp_path / "small.graphml"))])
    assert code == EXIT_OK and "h100-sxm    80  10 x 8" in capsys.readouterr().out
