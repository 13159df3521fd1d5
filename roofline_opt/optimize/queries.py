"""The one place the query pipeline is wired: tables -> formulation -> HiGHS -> decode -> exact re-evaluation.

After every solve the chosen setup is re-evaluated by the evaluator. Where the MIP used a chord below a concave term
(MoE memory) and the exact time differs, the chosen batch interval is split so the point becomes exact and the
question is solved again: the loop ends when the MIP's value and the exact value agree, which proves optimality
(the MIP was a relaxation). Dense models agree on the first solve.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import pyomo.core as pyo

from roofline_opt import checks
from roofline_opt.errors import Infeasible, InvalidInput, SolverFailure
from roofline_opt.optimize import tables as tables_module
from roofline_opt.optimize.cost_range import check_costs_representable
from roofline_opt.optimize.enumerate import Points, enumerate_best, feasible_points
from roofline_opt.optimize.formulation import (
    CHEAPEST,
    FASTEST,
    build_model,
    choice_bounds,
    load_choices,
    power_of_ten,
    scales,
    target_batch_bounds,
)
from roofline_opt.optimize.nearest import no_layout
from roofline_opt.optimize.results import Answer, Setup, reevaluate, setup_of
from roofline_opt.optimize.solve import PersistentHighs, SolveReport
from roofline_opt.optimize.space import (
    DEFAULT_MIP_GAP,
    TARGET_RTOL,
    Layouts,
    Question,
    meets_speed,
    within_budget,
)
from roofline_opt.optimize.tables import Tables, build_tables, refine_rows, split_choice

TABLE_CACHE_SIZE = 16
SCREEN_KEEP = 8
REFINE_AHEAD = 64
"""Rows among this many best that are coarse and could enter the kept ones are refined together."""
HOPELESS = 1e6
"""Rows whose bound is this many times the best one's are not loaded: they cannot be the optimum (the best bound is
reached), and their coefficients would stretch the model's range beyond what HiGHS resolves."""
SCAN_FIRST = 1024
"""Rows a query's screening bounds first, in order of their bound without a target (more when they do not settle it)."""
EXACT_RTOL = 1e-7
MAX_REPAIRS = 60
TIE_RTOL = 1e-12
"""A setup faster than the cheapest answer by less than this is not looked for (rounding of the tables' bounds)."""
MAX_DINKELBACH_STEPS = 40
METHODS = ("mip", "enumerate")


@dataclass
class SolverOptions:
    """HiGHS options every query accepts."""

    time_limit_s: float | None = None
    mip_gap: float = DEFAULT_MIP_GAP


@dataclass
class Prepared:
    """A question's tables and its built, loaded models, reused across a sweep.

    Every query is screened: each choice's best value under the target is computed from the tables
    (formulation.choice_bounds: exactly the MIP restricted to that choice), and the SCREEN_KEEP best, which contain
    the optimum, are loaded into the slots of one persistent model per query kind (built and loaded into HiGHS once
    per question; a query changes only its parameters). The model's size, and so its time, does not depend on the
    size of the space.
    """

    question: Question
    tables: Tables
    options: SolverOptions
    _solvers: dict[str, PersistentHighs] = field(default_factory=dict)
    repairs: int = 0
    rows: np.ndarray | None = None
    best_bound: float | None = None
    blocked: set[tuple[int, int]] = field(default_factory=set)
    query_repairs: int = 0
    excluded_layouts: set[int] = field(default_factory=set)
    """Layout indices no query may pick (the runner-up search excludes the answers already given)."""
    _worst: tuple[Tables, np.ndarray] | None = None
    _orders: dict[str, tuple[Tables, np.ndarray, np.ndarray]] = field(default_factory=dict)

    def start_query(self) -> None:
        """Forget the previous query's rejected points and repair count (splits themselves are kept)."""
        self.blocked.clear()
        self.query_repairs = 0

    def solver(self, kind: str, **target: float | None) -> PersistentHighs | None:
        """The kind's persistent model, loaded with the SCREEN_KEEP choices of best bound under the target (None when
        no choice has a point meeting the target: the query is infeasible).

        Kept rows with coarse MoE chords are refined first, and the screening repeated, until every kept row is
        refined: refining only raises bounds, so the kept rows still contain the optimum.
        """
        while True:
            t = self.tables
            rows, lo, hi, bound, ahead = self._screen(kind, target)
            keep = ahead[:SCREEN_KEEP]
            keep = keep[bound[keep] <= bound[keep[0]] * HOPELESS] if np.isfinite(bound[keep[0]]) else keep[:1]
            refined = t.refined[rows]
            coarse = ahead[~refined[ahead] & np.isfinite(bound[ahead])] if not refined[keep].all() else keep[:0]
            if not len(coarse):
                break
            self.tables = refine_rows(t, self.question, rows[coarse])
        best = float(bound.min())
        self.best_bound = best if np.isfinite(best) and best > 0 else None
        self.rows = rows[keep]
        if not np.isfinite(best):  # the bounds are exact: no choice has a point meeting the target
            return None
        if kind not in self._solvers:
            model = build_model(t, kind, slots=SCREEN_KEEP)
            self._solvers[kind] = PersistentHighs(model, self.options.time_limit_s, self.options.mip_gap)
        solver = self._solvers[kind]
        solver.configure(self.options.time_limit_s, self.options.mip_gap)
        m, (loose_usd, loose_time) = solver.model, self.loaded_limits()
        scale = scales(t, self.rows, lo[keep], hi[keep])
        if kind == FASTEST:
            budget = target.get("max_usd_per_mtok") or loose_usd
            m.budget_usd_per_mtok.set_value(budget)
            # dollars near the budget: rows far cheaper get coefficients HiGHS drops (their budget cannot bind)
            scale = replace(scale, usd=power_of_ten(np.array([budget])))
        else:
            m.max_time_per_token.set_value(target.get("max_time_per_token") or loose_time)
        load_choices(m, t, self.rows, lo[keep], hi[keep], scale)
        m.objective_scale.set_value(self.objective_scale * (scale.time if kind == FASTEST else scale.usd))
        return solver

    def _screen(self, kind: str, target: dict) -> tuple[np.ndarray, ...]:
        """Rows screened, their target batch ranges and bounds, and the REFINE_AHEAD best (positions in rows).

        The bounds are computed for rows in order of their bound without a target (a target only shrinks a row's
        batch range, so its bound only rises): the scan stops once the REFINE_AHEAD-th best bound is below every
        unscanned row's untargeted bound, so the best rows, ties broken by row as over all rows, are the same.
        """
        t = self.tables
        order, floor = self._screen_order(kind)
        size = min(len(t), SCAN_FIRST)
        while True:
            rows = np.arange(len(t)) if size == len(t) else np.sort(order[:size])
            lo, hi = target_batch_bounds(t, **target, rows=rows)
            layout_of = t.layout_of[rows]
            for layout, batch in self.blocked:
                hi[(layout_of == layout) & (t.batch_lo[rows] == batch) & (t.batch_hi[rows] == batch)] = batch - 1.0
            if self.excluded_layouts:
                off = np.isin(layout_of, list(self.excluded_layouts))
                hi[off] = lo[off] - 1.0
            bound = choice_bounds(t, kind, lo, hi, rows=rows)
            ahead = smallest(bound, REFINE_AHEAD)
            if size == len(t) or (len(ahead) == REFINE_AHEAD and bound[ahead[-1]] < floor[order[size]]):
                return rows, lo, hi, bound, ahead
            size = min(len(t), size * 4)

    def _screen_order(self, kind: str) -> tuple[np.ndarray, np.ndarray]:
        """Rows by their bound without a target, and those bounds, once per version of the tables and kind. Valid
        only where time per token rises and cost per token falls with the batch in every piece (a0, a1 >= 0, as
        chords of the evaluator's terms are); otherwise every row is screened (an order whose first bound is inf)."""
        t = self.tables
        if kind not in self._orders or self._orders[kind][0] is not t:
            if np.all(t.pieces_a0 >= 0) and np.all(t.pieces_a1 >= 0):
                floor = choice_bounds(t, kind, t.batch_lo, t.batch_hi)
            else:
                floor = np.full(len(t), -np.inf)
            self._orders[kind] = (t, np.argsort(floor, kind="stable"), floor)
        return self._orders[kind][1:]

    @property
    def objective_scale(self) -> float:
        """1 / the best choice bound: the objective divided by it is near 1 (both query kinds' bound is the optimum's
        value); the model's own ``objective_scale`` also undoes the loaded rows' units (formulation.Scales)."""
        return 1.0 if self.best_bound is None else 1.0 / self.best_bound

    def choice_row(self, c: int) -> int:
        """Row of the full tables behind slot c of the loaded model."""
        assert self.rows is not None  # set when a model is loaded
        return int(self.rows[c])

    def split(self, row: int, batch: int) -> None:
        """Make ``batch`` exact in the row's interval (the loaded models stay: the next query loads new rows)."""
        if self.query_repairs >= MAX_REPAIRS:
            msg = f"the exactness repair did not converge after {MAX_REPAIRS} splits; please report this question"
            raise SolverFailure(msg)
        self.tables = split_choice(self.tables, self.question, row, batch)
        self.repairs += 1
        self.query_repairs += 1

    def reject(self, row: int, batch: int) -> None:
        """The exact figures at ``batch`` miss the target: make the point exact, or drop it for this query."""
        if self.tables.batch_lo[row] == self.tables.batch_hi[row] == batch:
            self.blocked.add((int(self.tables.layout_of[row]), batch))
        else:
            self.split(row, batch)

    @property
    def max_cost_usd_per_mtok(self) -> float:
        """A budget no choice reaches (an inactive budget constraint with sane coefficients)."""
        most = float(np.max(self.tables.usd_per_mtok_coef * self._worst_tau() / self.tables.batch_lo))
        return most * 2.0 if most > 0 else 1.0  # relative headroom: an absolute one swamps $1e-300 prices

    @property
    def max_time_per_token(self) -> float:
        return float(self._worst_tau().max() * 2.0 + 1.0)

    def loaded_limits(self) -> tuple[float, float]:
        """A budget and a time per token no loaded choice reaches: the inactive targets' values, near the loaded rows'
        own figures (so their coefficients stay within a few decades of the rows' whatever the rest of the tables)."""
        t, rows = self.tables, self.rows
        tau = (t.pieces_a0[rows] + t.pieces_a1[rows] * t.batch_hi[rows, None]).max(axis=1)
        fast = (t.pieces_a0[rows] + t.pieces_a1[rows] * t.batch_lo[rows, None]).max(axis=1)
        cost = np.maximum(t.usd_per_mtok_coef[rows] * fast / t.batch_lo[rows], t.floors[rows])
        most_usd, most_tau = float(cost.max()) * 2.0, float(tau.max()) * 2.0
        return (most_usd if most_usd > 0 else 1.0), (most_tau if most_tau > 0 else 1.0)

    def tau_at(self, row: int, batch: int) -> float:
        """The tables' time per token of a row at a batch (the MIP's value there, in the tables' time unit)."""
        t = self.tables
        return float((t.pieces_a0[row] + t.pieces_a1[row] * batch).max())

    def _worst_tau(self) -> np.ndarray:
        """Each row's time per token at its largest batch, computed once per version of the tables."""
        if self._worst is None or self._worst[0] is not self.tables:
            t = self.tables
            self._worst = (t, (t.pieces_a0 + t.pieces_a1 * t.batch_hi[:, None]).max(axis=1))
        return self._worst[1]


def smallest(values: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k smallest values in order, ties by index: ``np.argsort(values, kind="stable")[:k]`` without
    sorting all of them."""
    if len(values) <= k:
        return np.argsort(values, kind="stable")
    kth = np.partition(values, k - 1)[k - 1]
    if np.isnan(kth):
        return np.argsort(values, kind="stable")[:k]
    candidates = np.flatnonzero(values <= kth)
    return candidates[np.argsort(values[candidates], kind="stable")][:k]


@functools.lru_cache(maxsize=TABLE_CACHE_SIZE)
def _cached_tables(question: Question, chord_tolerance: float) -> Tables:
    return build_tables(question, coarse=True)


def prepare(question: Question, options: SolverOptions | None = None) -> Prepared:
    """Tables for the question; raises Infeasible (with the reason) when no layout can run at all.

    Tables are immutable and depend only on the question (and the chord tolerance), so the last TABLE_CACHE_SIZE
    questions' tables are kept: asking the same question again (another target, method or solver option) skips them.
    """
    check_costs_representable(question)
    tables = _cached_tables(question, tables_module.MOE_CHORD_TOLERANCE)
    if len(tables) == 0:
        raise no_layout(question, tables)
    return Prepared(question, tables, options or SolverOptions())


def _decode(prep: Prepared, model: pyo.ConcreteModel) -> tuple[int, Setup, float]:
    """The picked choice, its setup and the tables' time per token there (the MIP's value without HiGHS's
    tolerances, in the tables' time unit)."""
    t = prep.tables
    picks = np.array([pyo.value(model.pick[c]) for c in model.C])
    local = int(np.argmax(picks))
    c = prep.choice_row(local)
    batch = int(round(pyo.value(model.batch[local])))
    option = -1 if t.option_of is None else int(t.option_of[c])
    setup = setup_of(prep.question, t.layouts, int(t.layout_of[c]), batch, t.options, option)
    return c, setup, prep.tau_at(c, batch)


def _cost_numerator(t: Tables, c: int, tau: float, batch: int) -> float:
    """$/Mtok times the batch at the MIP's tau: the Dinkelbach numerator (with a disaggregated unit's floor)."""
    return max(float(t.usd_per_mtok_coef[c]) * tau, float(t.floors[c]) * batch)


def _exact(prep: Prepared, c: int, setup: Setup, tau: float, report: SolveReport) -> Answer | None:
    """The re-evaluated answer if the MIP's figure is exact at this point (always where the row is that one batch:
    its coefficients are the evaluator's there); otherwise split there and return None."""
    answer = reevaluate(prep.question, setup, "mip", report)
    exact = answer.figures["time_per_token_s"] / prep.tables.time_unit_s
    t = prep.tables
    if exact <= tau * (1.0 + EXACT_RTOL) or t.batch_lo[c] == t.batch_hi[c]:
        return answer
    prep.split(c, setup.batch)
    return None


def _no_solution(report: SolveReport) -> None:
    """Infeasible is an answer (None from the caller); any other stop without a solution is a solver failure."""
    if not report.infeasible:
        msg = f"HiGHS stopped ({report.termination}) before finding any setup: raise --time-limit"
        raise SolverFailure(msg)


def solve_fastest(prep: Prepared, max_usd_per_mtok: float | None) -> Answer | None:
    """Most tok/s per request within the budget (None when nothing meets it)."""
    prep.start_query()
    if max_usd_per_mtok is not None and max_usd_per_mtok >= prep.max_cost_usd_per_mtok:
        max_usd_per_mtok = None  # no setup costs that much: the budget binds nothing (and would scale the MIP badly)
    while True:
        solver = prep.solver(FASTEST, max_usd_per_mtok=max_usd_per_mtok)
        if solver is None:
            return None
        report = solver.solve()
        if not report.has_solution:
            _no_solution(report)
            return None
        c, setup, tau = _decode(prep, solver.model)
        answer = _exact(prep, c, setup, tau, report)
        if answer is None:
            continue
        if max_usd_per_mtok is not None and not within_budget(answer.usd_per_mtok, max_usd_per_mtok):
            prep.reject(c, setup.batch)
            continue
        answer = _cheapest_of_equals(prep, c, answer, report)
        bound = None if report.bound is None else report.bound / prep.objective_scale
        if bound is None or bound <= 0:
            bound = prep.best_bound
        unit = prep.tables.time_unit_s
        bounds = {} if bound is None else {"bound_tok_s_per_request": 1.0 / (bound * unit)}
        return replace(answer, bounds=bounds)


def _cheapest_of_equals(prep: Prepared, c: int, answer: Answer, report: SolveReport) -> Answer:
    """Among choices with the answer's decode layout and batch (hence its exact speed), the cheapest: only prefill
    partners differ, so the fastest answer is the one that costs least (as the oracle breaks ties)."""
    t = prep.tables
    if t.option_of is None or t.option_of[c] < 0:
        return answer
    b = answer.setup.batch
    rows = np.flatnonzero((t.layout_of == t.layout_of[c]) & (t.batch_lo <= b) & (t.batch_hi >= b))
    tau = answer.figures["time_per_token_s"] / t.time_unit_s
    cost = np.maximum(t.usd_per_mtok_coef[rows] * tau / b, t.floors[rows])
    best = int(rows[np.argmin(cost)])
    if best == c or cost.min() >= answer.usd_per_mtok * (1 - EXACT_RTOL):
        return answer
    setup = setup_of(prep.question, t.layouts, int(t.layout_of[best]), b, t.options, int(t.option_of[best]))
    return reevaluate(prep.question, setup, "mip", report)


def solve_cheapest(prep: Prepared, min_tok_s: float | None) -> Answer | None:
    """Least $/Mtok at or above the speed, by Dinkelbach iterations on the ratio (None when unreachable)."""
    prep.start_query()
    if min_tok_s is not None and min_tok_s * prep.tables.time_unit_s * prep.max_time_per_token <= 1.0:
        min_tok_s = None  # every setup is faster than that: the speed target binds nothing
    while True:
        max_time = None if min_tok_s is None else 1.0 / (min_tok_s * prep.tables.time_unit_s)
        solver = prep.solver(CHEAPEST, max_time_per_token=max_time)
        if solver is None:
            return None
        m = solver.model
        lam: float | None = prep.best_bound
        for _ in range(MAX_DINKELBACH_STEPS):
            m.dinkelbach_lambda.set_value(0.0 if lam is None else lam)
            report = solver.solve()
            if not report.has_solution:
                _no_solution(report)
                return None
            c, setup, tau = _decode(prep, m)
            numerator = _cost_numerator(prep.tables, c, tau, setup.batch)
            denominator = float(setup.batch)
            if lam is not None and numerator - lam * denominator >= -1e-9 * numerator:
                break
            lam = numerator / denominator
        answer = _exact(prep, c, setup, tau, report)
        if answer is None:
            continue
        if min_tok_s is not None and not meets_speed(answer.tok_s_per_request, min_tok_s):
            prep.reject(c, setup.batch)
            continue
        bound = max(0.0, prep.best_bound or 0.0, _ratio_bound(lam, report, prep.objective_scale))
        answer = _fastest_of_equals(prep, answer)
        gap = max(0.0, (answer.usd_per_mtok - bound) / answer.usd_per_mtok)
        return replace(answer, report=replace(report, mip_gap=gap), bounds={"bound_usd_per_mtok": bound})


def _fastest_of_equals(prep: Prepared, answer: Answer) -> Answer:
    """The fastest setup costing within the budget tolerance of the cheapest answer (the oracle's tie rule, see
    enumerate.best_point): a second, fastest query at the answer's cost. It is at least as fast as the answer, so
    it meets the same speed target."""
    prep.start_query()
    bound = prep._screen(FASTEST, {"max_usd_per_mtok": answer.usd_per_mtok})[3]
    if bound.min() * prep.tables.time_unit_s >= answer.figures["time_per_token_s"] * (1 - TIE_RTOL):
        return answer  # the bounds are optimistic: no setup within that budget is faster (the usual case, no solve)
    faster = solve_fastest(prep, answer.usd_per_mtok)
    if faster is None or faster.tok_s_per_request <= answer.tok_s_per_request:
        return answer
    return replace(faster, report=answer.report)


def _ratio_bound(lam: float | None, report: SolveReport, scale: float) -> float:
    """Lower bound on $/Mtok from Dinkelbach's last step: every setup has cost >= lambda + min(0, F bound) / batch,
    and batch >= 1 (F is the unscaled objective)."""
    lam = 0.0 if lam is None else lam
    f_bound = report.bound / scale if report.bound is not None else 0.0
    return lam + min(0.0, f_bound)


def check_method(method: str) -> None:
    if method not in METHODS:
        raise InvalidInput("method", f"must be one of {', '.join(METHODS)}. Got {method!r} instead.")


def fastest(
    question: Question,
    max_usd_per_mtok: float | None = None,
    method: str = "mip",
    options: SolverOptions | None = None,
) -> Answer:
    """The fastest setup (tok/s per request) whose cost is at most ``max_usd_per_mtok`` dollars per million tokens."""
    return _answer(question, FASTEST, max_usd_per_mtok, method, options)


def cheapest(
    question: Question,
    min_tok_s: float | None = None,
    method: str = "mip",
    options: SolverOptions | None = None,
) -> Answer:
    """The cheapest setup ($/Mtok) that serves each request at ``min_tok_s`` tokens per second or faster."""
    return _answer(question, CHEAPEST, min_tok_s, method, options)


def enumerated_points(question: Question) -> Points:
    """Every feasible point for the oracle; none at all raises Infeasible with the reason, as the MIP path does."""
    pts = feasible_points(question)
    if not len(pts.batch):
        prepare(question)
    return pts


def _answer(question: Question, kind: str, target: float | None, method: str, options: SolverOptions | None) -> Answer:
    """One query by either method; an unreachable target raises Infeasible naming the limit and the nearest figure."""
    return top_n(question, kind, target, 1, method, options)[0]


def _same_choices(question: Question, lay: Layouts, setup: Setup) -> np.ndarray:
    """Layouts making every choice ``setup`` makes but 1-D or 2-D tensor parallelism."""
    g = next(i for i, gpu in enumerate(question.gpus) if gpu.name == setup.gpu)
    return (
        (lay.gpu_index == g)
        & (lay.weight_bits == setup.weight_bits)
        & (lay.tp == setup.tp)
        & (lay.pp == setup.pp)
        & (lay.ep == setup.ep)
        & (lay.gamma == setup.gamma)
        & (lay.kv_bits == setup.kv_bits)
        & (lay.disagg == (setup.serving == "disagg"))
        & (lay.chunk == setup.chunk_tokens)
        & (lay.dp_attention == setup.dp_attention)
    )


def alternative_indices(question: Question, lay: Layouts, setup: Setup) -> list[int]:
    """The layouts ``top_n`` excludes once ``setup`` is listed: its own and its 1-D/2-D tensor-parallel twin. The
    twins differ by a fraction of a percent and by no choice a user makes (the serving engine picks the sharding),
    so the next answer is an alternative a user would choose between: another accelerator, precision or degree."""
    return [int(i) for i in np.flatnonzero(_same_choices(question, lay, setup))]


def top_n(
    question: Question,
    kind: str,
    target: float | None,
    n: int,
    method: str = "mip",
    options: SolverOptions | None = None,
) -> list[Answer]:
    """The best answer, then the best among the remaining layouts, and so on: up to ``n`` distinct layouts, each
    proven best once the previous ones are excluded (fewer when no other layout meets the target). A listed layout
    is excluded with its 1-D/2-D tensor-parallel twin (``alternative_indices``), a disaggregated one with every
    prefill partner it was paired with."""
    check_method(method)
    if method == "mip":
        return _prepared_top(prepare(question, options), kind, target, n)
    other = CHEAPEST if kind == FASTEST else FASTEST
    pts = enumerated_points(question)
    excluded: list[int] = []

    def best(goal: float | None) -> Answer | None:
        answer = enumerate_best(question, kind, goal, pts.subset(~np.isin(pts.layout_index, excluded)))
        if answer is not None:
            excluded.extend(alternative_indices(question, pts.layouts, answer.setup))
        return answer

    return _checked(question, kind, target, n, best, lambda: enumerate_best(question, other, None, pts))


def solve_prepared(prep: Prepared, kind: str, target: float | None) -> Answer:
    """One MIP query on prepared tables and models (reused across targets, as a study's sweep does)."""
    return _prepared_top(prep, kind, target, 1)[0]


def _prepared_top(prep: Prepared, kind: str, target: float | None, n: int) -> list[Answer]:
    """``top_n`` on prepared tables and models; the exclusions are lifted afterwards so the models can be reused."""
    solve = {FASTEST: solve_fastest, CHEAPEST: solve_cheapest}
    other = CHEAPEST if kind == FASTEST else FASTEST

    def best(goal: float | None) -> Answer | None:
        answer = solve[kind](prep, goal)
        if answer is not None:
            prep.excluded_layouts.update(alternative_indices(prep.question, prep.tables.layouts, answer.setup))
        return answer

    try:
        return _checked(prep.question, kind, target, n, best, lambda: solve[other](prep, None))
    finally:
        prep.excluded_layouts.clear()


def _checked(
    question: Question,
    kind: str,
    target: float | None,
    n: int,
    best: Callable[[float | None], Answer | None],
    nearest: Callable[[], Answer | None],
) -> list[Answer]:
    """Up to ``n`` successive best answers at the target (and the TPOT limit); Infeasible naming the limit and the
    nearest figure when there is none."""
    tpot_speed = question.min_tok_s_per_request
    goal = target
    if kind == CHEAPEST and tpot_speed is not None:
        goal = tpot_speed if target is None else max(target, tpot_speed)
    answers: list[Answer] = []
    for _ in range(n):
        answer = best(goal)
        if answer is None:
            break
        answers.append(answer)
    if not answers:
        other = nearest()
        assert other is not None  # the other extreme has no target, so an answer (see _unreachable)
        raise _unreachable(question, kind, goal, other)
    if kind == FASTEST and tpot_speed is not None and question.max_tpot_s is not None:
        first = answers[0]
        if not meets_speed(first.tok_s_per_request, tpot_speed):
            within = "at any price" if target is None else f"within ${checks.figure(target)}/Mtok"
            raise Infeasible(
                f"no setup {within} meets TPOT <= {checks.figure(question.max_tpot_s * 1e3)} ms",
                reason="tpot",
                nearest=f"the fastest {within} has TPOT {checks.figure(1e3 / first.tok_s_per_request)} ms at "
                f"${checks.figure(first.usd_per_mtok)}/Mtok",
            )
        answers = [a for a in answers if meets_speed(a.tok_s_per_request, tpot_speed)]
    return answers


def _unreachable(question: Question, kind: str, target: float | None, nearest: Answer) -> Infeasible:
    """The target nobody meets, and the figure the best setup at the other extreme reaches."""
    cost, speed = f"${checks.figure(nearest.usd_per_mtok)}/Mtok", f"{checks.figure(nearest.tok_s_per_request)} tok/s"
    assert target is not None  # without a target every query has an answer (the tables hold feasible rows only)
    if kind == FASTEST:
        return Infeasible(
            f"no setup costs at most ${checks.figure(target)}/Mtok",
            reason="target",
            nearest=f"the cheapest setup costs {cost} at {speed}",
        )
    tpot_speed = question.min_tok_s_per_request
    if question.max_tpot_s is not None and tpot_speed is not None and target <= tpot_speed * (1 + TARGET_RTOL):
        return Infeasible(
            f"no setup meets TPOT <= {checks.figure(question.max_tpot_s * 1e3)} ms",
            reason="tpot",
            nearest=f"the fastest setup has TPOT {checks.figure(1e3 / nearest.tok_s_per_request)} ms at {cost}",
        )
    return Infeasible(
        f"no setup reaches {checks.figure(target)} tok/s per request",
        reason="target",
        nearest=f"the fastest setup reaches {speed} at {cost}",
    )
