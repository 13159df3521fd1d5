"""Where the MIP's chord of a concave term misleads it, re-evaluation and interval splitting repair the answer."""

from __future__ import annotations

import subprocess
import sys

from roofline_opt import api
from roofline_opt.optimize import tables
from roofline_opt.optimize.enumerate import enumerate_best, feasible_points
from roofline_opt.optimize.queries import prepare, solve_cheapest, solve_fastest


def _mixtral():
    return api.question("mixtral-8x22b", "h100-sxm", preset="paper", context=1000, tp_degrees=(4, 8), pp_degrees=(1, 2))


def test_coarse_moe_chords_are_repaired_to_the_enumeration_optimum(monkeypatch):
    monkeypatch.setattr(tables, "MOE_CHORD_TOLERANCE", 10.0)
    q = _mixtral()
    pts = feasible_points(q)
    prep = prepare(q)
    cheapest_usd = float(enumerate_best(q, "cheapest", None, pts).usd_per_mtok)
    for factor in (1.5, 5.0, 10.0, 20.0, 40.0):
        budget = cheapest_usd * factor
        answer = solve_fastest(prep, budget)
        oracle = enumerate_best(q, "fastest", budget, pts)
        assert answer.usd_per_mtok <= budget
        assert answer.tok_s_per_request >= oracle.tok_s_per_request * (1 - 1e-9)
    assert prep.repairs > 0


def test_coarse_moe_chords_repair_the_cheapest_query_too(monkeypatch):
    monkeypatch.setattr(tables, "MOE_CHORD_TOLERANCE", 10.0)
    q = _mixtral()
    pts = feasible_points(q)
    answer = solve_cheapest(prepare(q), None)
    assert answer.usd_per_mtok <= enumerate_best(q, "cheapest", None, pts).usd_per_mtok * (1 + 1e-9)


def test_dense_models_need_no_repair():
    prep = prepare(api.question("llama-3-70b", "h100-sxm", preset="paper"))
    solve_fastest(prep, 2.0)
    solve_cheapest(prep, 50.0)
    assert prep.repairs == 0


def test_importing_the_evaluator_leaves_pyomo_unloaded():
    code = "import sys, roofline_opt.physics.evaluator, roofline_opt.optimize.enumerate; print('pyomo' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"
