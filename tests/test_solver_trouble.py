"""When HiGHS cannot finish or fails: time limits, incumbents and their gaps, one-line errors, status names, scaling.

A real time limit that stops HiGHS *with* an incumbent depends on the machine's speed (and the queries' batch-range
cuts let HiGHS prove optimality at the root), so the tests of how a query handles such a stop force it
deterministically: every solve's report is turned into a time-limited one whose bound is weakened to a valid but loose
lower bound (the real objective minus 10%), as HiGHS reports when stopped early. They never skip.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import subprocess
import sys

import numpy as np
import pyomo.environ as pyo
import pytest
from pyomo.contrib.solver.common.results import TerminationCondition
from pyomo.contrib.solver.solvers.highs import Highs
from pyomo.repn import generate_standard_repn

from roofline_opt import api, catalog
from roofline_opt.cli import EXIT_SOLVER, main
from roofline_opt.errors import SolverFailure
from roofline_opt.optimize import formulation, queries, solve
from roofline_opt.optimize.enumerate import enumerate_best
from roofline_opt.optimize.formulation import CHEAPEST, FASTEST, build_model
from roofline_opt.optimize.queries import SolverOptions, prepare, solve_cheapest, solve_fastest
from roofline_opt.optimize.solve import TERMINATION_NAMES, PersistentHighs, SolveReport
from roofline_opt.optimize.tables import build_tables
from roofline_opt.physics.specs import ModelSpec

LARGE = dict(
    model="llama-3-70b",
    gpu=("h100-sxm", "h200", "b200"),
    weight_bits=(16, 8, 4),
    draft="llama-3-8b",
    gamma_max=8,
    preset="paper",
    context=1000,
)
"""3 accelerators x 3 precisions x gamma 0..8 over the default degrees: about 32,000 MIP choices."""
MEDIUM = dict(LARGE, gamma_max=4, tp_degrees=(1, 2, 4, 8), pp_degrees=(1, 2), max_batch=512)
"""The same choices on a space small enough to enumerate in about a second."""
SMALL_CLI = "--model llama-3-8b --gpu h100-sxm --tp-degrees 1,2 --pp-degrees 1 --max-batch 64".split()
NO_TIME = 1e-9
"""A time limit HiGHS reaches before its presolve: no incumbent, deterministically."""
LOOSENESS = 0.1
"""How far below the objective a forced time-limited report puts its bound (relative, plus this much absolute)."""
BUDGET_USD_PER_MTOK = 2.0
SPEED_TOK_S = 50.0
MAX_COEFFICIENT_RATIO = 1e9
"""Largest max/min of nonzero |coefficient| tolerated over a whole model handed to HiGHS."""
MAX_ROW_RATIO = 1e6
"""Largest max/min of nonzero |coefficient| tolerated within one constraint."""
STATUS_NAME = r"[a-z]+(_[a-z]+)*"
SLOW_MODEL_ROWS = 4000
"""Choices of a raw model HiGHS needs about 3 s to solve (and 1 s to load) on the reference machine."""
SMALL_SPACE = dict(tp_degrees=(1, 2, 4, 8), pp_degrees=(1, 2), max_batch=512)
H100_AT_A_TENTH_OF_A_CENT = dataclasses.replace(catalog.load_gpu("h100-sxm"), usd_per_hour=0.001)
H100_WITHOUT_LAUNCH_TIME = dataclasses.replace(catalog.load_gpu("h100-sxm"), kernel_launch_s=0.0)
MINUSCULE = ModelSpec("minuscule", 16, 64, 1, 1, 1, 16, 256)
"""d_model 16, one layer, vocab 256: a decoding step of nanoseconds."""


@pytest.fixture(scope="module")
def large_question():
    return api.question(**LARGE)


@pytest.fixture(scope="module")
def large_tables(large_question):
    return build_tables(large_question)


@pytest.fixture(scope="module")
def medium_oracle():
    """The medium question, its fastest answer within the budget and cheapest at the speed, by enumeration."""
    q = api.question(**MEDIUM)
    return q, enumerate_best(q, "fastest", BUDGET_USD_PER_MTOK), enumerate_best(q, "cheapest", SPEED_TOK_S)


def raw_model(tables, rows: int) -> pyo.ConcreteModel:
    """The fastest-within-budget model over the first ``rows`` choices, without a query's batch-range cuts: a MIP
    HiGHS needs seconds to prove optimal (see SLOW_MODEL_ROWS)."""
    model = build_model(tables.take(np.arange(rows)), FASTEST)
    model.budget_usd_per_mtok.set_value(1.0)
    return model


def assert_report_consistent(report: SolveReport, requested_gap: float = 1e-6) -> None:
    """Termination, incumbent, bound and gap agree with each other."""
    assert report.termination in ("optimal", "time_limit"), report
    assert report.has_solution == (report.objective is not None), report
    if report.termination == "optimal":
        assert report.has_solution, report
    if report.has_solution:
        assert report.bound is not None and report.bound <= report.objective + 1e-9 * abs(report.objective), report
        assert report.mip_gap is not None and math.isfinite(report.mip_gap), report
        assert report.mip_gap == pytest.approx(abs(report.objective - report.bound) / abs(report.objective)), report
    if report.termination == "optimal":
        assert report.mip_gap <= requested_gap, report


# ----------------------------------------------------------------------------------------------- status names


def test_every_pyomo_termination_condition_has_a_name():
    missing = [condition.name for condition in TerminationCondition if condition not in TERMINATION_NAMES]

    assert missing == []


def test_termination_names_are_lower_snake_case_words():
    bad = {c.name: n for c, n in TERMINATION_NAMES.items() if not re.fullmatch(STATUS_NAME, n)}

    assert bad == {}


def test_an_unrecognised_termination_becomes_unknown_with_a_warning(monkeypatch, large_tables):
    monkeypatch.setattr(solve, "TERMINATION_NAMES", {})
    model = raw_model(large_tables, rows=20)

    with pytest.warns(UserWarning, match="unrecognised HiGHS termination"):
        report = PersistentHighs(model).solve()

    assert report.termination == "unknown"
    assert report.has_solution


# ----------------------------------------------------------------------------------------------- time limits


def test_the_time_limit_stops_a_solve_that_needs_seconds(large_tables):
    """No wall-clock assertion (a loaded machine takes longer to load the model): HiGHS must stop on the limit,
    without proving optimality."""
    model = raw_model(large_tables, rows=SLOW_MODEL_ROWS)

    report = PersistentHighs(model, time_limit_s=0.2).solve()

    assert report.termination == "time_limit"
    assert report.mip_gap is None or report.mip_gap > 1e-6, report


def test_a_solve_stopped_before_any_incumbent_reports_no_solution(large_tables):
    report = PersistentHighs(raw_model(large_tables, rows=200), time_limit_s=NO_TIME).solve()

    assert (report.termination, report.has_solution) == ("time_limit", False)
    assert (report.objective, report.mip_gap) == (None, None)


@pytest.mark.parametrize("kind", [FASTEST, CHEAPEST])
def test_no_incumbent_within_the_time_limit_is_a_solver_failure_naming_the_flag(large_question, kind):
    query = queries.fastest if kind == FASTEST else queries.cheapest

    with pytest.raises(SolverFailure, match="--time-limit") as failure:
        query(large_question, None, options=SolverOptions(time_limit_s=NO_TIME))

    assert "\n" not in str(failure.value)


def test_cli_exits_3_with_one_line_when_the_time_limit_leaves_no_incumbent(capsys):
    code = main(["fastest", *SMALL_CLI, "--time-limit", str(NO_TIME)])
    err = capsys.readouterr().err

    assert code == EXIT_SOLVER
    assert err.count("\n") == 1 and "--time-limit" in err, err


def _stopped_at_time_limit(report: SolveReport) -> SolveReport:
    """The report HiGHS gives when a time limit stops it holding this incumbent: a valid, looser lower bound."""
    bound = report.objective - LOOSENESS * (abs(report.objective) + 1.0)
    gap = abs(report.objective - bound) / abs(report.objective) if report.objective else None
    return dataclasses.replace(report, termination="time_limit", bound=bound, mip_gap=gap)


def stopped_answers(q, solve_once, monkeypatch) -> list:
    """The answer of a query whose every solve HiGHS stopped at a time limit holding an incumbent (forced)."""
    original = PersistentHighs.solve
    monkeypatch.setattr(PersistentHighs, "solve", lambda self: _stopped_at_time_limit(original(self)))
    answer = solve_once(prepare(q))
    assert answer.report.termination == "time_limit", answer.report
    return [answer]


def fastest_within_budget(prep):
    return solve_fastest(prep, BUDGET_USD_PER_MTOK)


def cheapest_at_speed(prep):
    return solve_cheapest(prep, SPEED_TOK_S)


def test_a_time_limited_fastest_answer_carries_its_status_and_a_gap_that_bounds_it(medium_oracle, monkeypatch):
    q, best, _ = medium_oracle

    for answer in stopped_answers(q, fastest_within_budget, monkeypatch):
        record = answer.to_record()
        assert_report_consistent(answer.report)
        assert record["solver_status"] == "time_limit"
        assert 0.0 < record["mip_gap"] <= 1.0
        assert answer.usd_per_mtok <= BUDGET_USD_PER_MTOK * (1 + 1e-9)
        assert answer.tok_s_per_request >= best.tok_s_per_request * (1 - record["mip_gap"]) * (1 - 1e-9)


def test_a_time_limited_fastest_answer_reports_a_valid_speed_bound(medium_oracle, monkeypatch):
    q, best, _ = medium_oracle

    for answer in stopped_answers(q, fastest_within_budget, monkeypatch):
        bound = answer.to_record().get("bound_tok_s_per_request")
        assert bound is not None, answer.to_record()
        assert bound >= best.tok_s_per_request * (1 - 1e-9), (bound, best.tok_s_per_request)
        assert bound > answer.tok_s_per_request, (bound, answer.tok_s_per_request)


def test_a_time_limited_cheapest_answer_carries_its_status(medium_oracle, monkeypatch):
    q, _, _ = medium_oracle

    for answer in stopped_answers(q, cheapest_at_speed, monkeypatch):
        record = answer.to_record()
        assert (record["solver_status"], answer.report.has_solution) == ("time_limit", True)
        assert answer.tok_s_per_request >= SPEED_TOK_S * (1 - 1e-9)


def test_a_time_limited_cheapest_answer_reports_a_cost_bound_and_gap_between_0_and_1(medium_oracle, monkeypatch):
    q, _, best = medium_oracle

    for answer in stopped_answers(q, cheapest_at_speed, monkeypatch):
        record = answer.to_record()
        assert record.get("bound_usd_per_mtok") is not None, record
        assert 0.0 <= record["bound_usd_per_mtok"] <= best.usd_per_mtok * (1 + 1e-9), record["bound_usd_per_mtok"]
        assert 0.0 <= record["mip_gap"] <= 1.0, record["mip_gap"]
        assert best.usd_per_mtok >= answer.usd_per_mtok * (1 - record["mip_gap"]) * (1 - 1e-9)


def test_a_finished_solve_reports_optimal_within_the_requested_gap(medium_oracle):
    q, best, _ = medium_oracle

    answer = queries.fastest(q, BUDGET_USD_PER_MTOK, options=SolverOptions(time_limit_s=60.0))

    assert_report_consistent(answer.report)
    assert (answer.report.termination, answer.tok_s_per_request) == ("optimal", pytest.approx(best.tok_s_per_request))


# ----------------------------------------------------------------------------------------------- HiGHS errors


def _highs_raises(monkeypatch, message: str) -> None:
    def fail(self, model, **kwargs):
        raise RuntimeError(message)

    monkeypatch.setattr(Highs, "solve", fail)


def test_a_highs_exception_becomes_a_solver_failure_naming_highs(monkeypatch, large_tables):
    _highs_raises(monkeypatch, "Highs::run() returned kError")

    with pytest.raises(SolverFailure) as failure:
        PersistentHighs(raw_model(large_tables, rows=20)).solve()

    assert str(failure.value) == "HiGHS failed: Highs::run() returned kError"


def test_a_multi_line_highs_exception_becomes_a_one_line_message(monkeypatch, large_tables):
    _highs_raises(monkeypatch, "Highs::run() returned kError\n  model status: kSolveError\n")

    with pytest.raises(SolverFailure) as failure:
        PersistentHighs(raw_model(large_tables, rows=20)).solve()

    message = str(failure.value)
    assert "\n" not in message.strip() and "kSolveError" in message, repr(message)


def test_cli_reports_a_highs_exception_on_one_line_with_exit_code_3(monkeypatch, capsys):
    _highs_raises(monkeypatch, "Highs::run() returned kError")

    code = main(["fastest", *SMALL_CLI])
    captured = capsys.readouterr()

    assert code == EXIT_SOLVER
    assert captured.err == "roofline-opt: solver failure: HiGHS failed: Highs::run() returned kError\n"
    assert captured.out == ""


# ----------------------------------------------------------------------------------------------- numerical scaling

SCALING_QUESTIONS = {
    "llama70b-paper": dict(model="llama-3-70b", gpu="h100-sxm", preset="paper"),
    "mixtral-ep-default": dict(model="mixtral-8x7b", gpu="h200", ep_degrees=(1, 2, 4)),
    "specdec-three-gpus-three-precisions": MEDIUM,
    "deepseek-v3-fp8": dict(model="deepseek-v3", gpu="h200", weight_bits=8, ep_degrees=(1, 8), tp_degrees=(8, 16, 32)),
    "llama8b-v100-all-degrees": dict(model="llama-3-8b", gpu="v100"),
    "price-0.001-usd-per-hour": dict(model="llama-3-8b", gpu=H100_AT_A_TENTH_OF_A_CENT, **SMALL_SPACE),
    "minuscule-model-no-kernel-launch": dict(model=MINUSCULE, gpu=H100_WITHOUT_LAUNCH_TIME, **SMALL_SPACE),
}


def coefficient_ranges(model: pyo.ConcreteModel) -> tuple[dict[str, tuple[float, float]], float]:
    """Per constraint family (and the objective) the smallest and largest nonzero |coefficient|, and the largest
    max/min ratio within one row."""
    families: dict[str, tuple[float, float]] = {}
    worst_row = 1.0
    rows = [(c.parent_component().name, c.body) for c in model.component_data_objects(pyo.Constraint, active=True)]
    rows += [("objective", o.expr) for o in model.component_data_objects(pyo.Objective, active=True)]
    for family, body in rows:
        coefs = np.abs([pyo.value(c) for c in generate_standard_repn(body).linear_coefs])
        coefs = coefs[coefs > 0]
        if not len(coefs):
            continue
        lo, hi = families.get(family, (math.inf, 0.0))
        families[family] = (min(lo, coefs.min()), max(hi, coefs.max()))
        worst_row = max(worst_row, coefs.max() / coefs.min())
    return families, worst_row


@pytest.fixture
def models_sent_to_highs(monkeypatch):
    """Coefficient ranges of every model a query hands to HiGHS, taken at its first solve."""
    seen: dict[int, tuple] = {}
    original = PersistentHighs.solve

    def spy(self):
        if id(self.model) not in seen:
            seen[id(self.model)] = coefficient_ranges(self.model)
        return original(self)

    monkeypatch.setattr(PersistentHighs, "solve", spy)
    return seen


@pytest.mark.parametrize("kind", [FASTEST, CHEAPEST])
@pytest.mark.parametrize("name", list(SCALING_QUESTIONS))
def test_models_handed_to_highs_are_well_scaled(models_sent_to_highs, name, kind):
    q = api.question(**SCALING_QUESTIONS[name])
    prep = prepare(q)
    least_usd, most_tok_s = solve_cheapest(prep, None).usd_per_mtok, solve_fastest(prep, None).tok_s_per_request
    models_sent_to_highs.clear()
    for factor in (1.0, 3.0):
        if kind == FASTEST:
            solve_fastest(prep, least_usd * factor)
        else:
            solve_cheapest(prep, most_tok_s / factor)

    assert models_sent_to_highs
    for families, worst_row in models_sent_to_highs.values():
        lo = min(a for a, _ in families.values())
        hi = max(b for _, b in families.values())
        assert hi / lo <= MAX_COEFFICIENT_RATIO, families
        assert worst_row <= MAX_ROW_RATIO, families


@pytest.mark.parametrize(("kind", "target_family"), [(FASTEST, "budget"), (CHEAPEST, "speed_target")])
def test_a_built_model_is_well_scaled_apart_from_its_target_placeholder(large_tables, kind, target_family):
    """build_model starts the budget at 1e9 $/Mtok and the speed limit at 1e12 ms; every query sets them before
    HiGHS sees the model (test above)."""
    families, _ = coefficient_ranges(formulation.build_model(large_tables.take(np.arange(300)), kind))
    others = [r for f, r in families.items() if f != target_family]

    assert max(b for _, b in others) / min(a for a, _ in others) <= MAX_COEFFICIENT_RATIO


THREADED_QUESTIONS = """
import json, os, threading
from roofline_opt import api

def speeds(first_context):
    contexts = range(first_context, first_context + 6)
    questions = [api.question(model="llama-3-8b", gpu="h100-sxm", context=c) for c in contexts]
    return [api.fastest_answer(q, max_usd_per_mtok=5.0).tok_s_per_request for q in questions]

threaded = {}

def ask(i):
    threaded[i] = speeds(1000 * (i + 1))

threads = [threading.Thread(target=ask, args=(i,), daemon=True) for i in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join(timeout=15)
finished = sum(not t.is_alive() for t in threads)
with open(OUT, "w") as out:
    if finished < 4:  # deadlocked: the stuck threads hold the process's stdout, so leave at once
        json.dump({"finished": finished}, out)
        out.close()
        os._exit(0)
    json.dump({"finished": finished, "threaded": threaded, "alone": {i: speeds(1000 * (i + 1)) for i in range(4)}}, out)
"""


def test_questions_asked_from_several_threads_at_once_finish_with_the_answers_asked_one_at_a_time(tmp_path):
    """As in a Dask worker with several threads: loading models into HiGHS from four threads at once must not
    deadlock (Pyomo redirects the process's stdout while it loads), and each thread gets the sequential answers."""
    out = tmp_path / "answers.json"
    code = f"OUT = {str(out)!r}\n" + THREADED_QUESTIONS
    subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    answers = json.loads(out.read_text())
    assert answers["finished"] == 4
    assert answers["threaded"] == answers["alone"]
