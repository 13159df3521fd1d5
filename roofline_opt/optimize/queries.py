"""The one place the query pipeline is wired: tables -> formulation -> HiGHS -> decode -> exact re-evaluation.

After every solve the chosen setup is re-evaluated by the evaluator. Where the MIP used a chord below a concave term
(MoE memory) and the exact time differs, the chosen batch interval is split so the point becomes exact and the
question is solved again: the loop ends when the MIP's value and the exact value agree, which proves optimality
(the MIP was a relaxation). Dense models agree on the first solve.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pyomo.environ as pyo

from roofline_opt.errors import Infeasible, InvalidInput, SolverFailure
from roofline_opt.optimize.enumerate import Points, enumerate_best, feasible_points
from roofline_opt.optimize.formulation import (
    CHEAPEST,
    FASTEST,
    TARGET_RTOL,
    build_model,
    choice_bounds,
    load_choices,
    target_batch_bounds,
)
from roofline_opt.optimize.results import Answer, Setup, reevaluate
from roofline_opt.optimize.solve import PersistentHighs, SolveReport
from roofline_opt.optimize.space import Question
from roofline_opt.optimize.tables import Tables, build_tables, refine_rows, split_choice

SCREEN_KEEP = 8
REFINE_AHEAD = 64
"""Rows among this many best that are coarse and could enter the kept ones are refined together."""
EXACT_RTOL = 1e-7
MAX_REPAIRS = 60
MAX_DINKELBACH_STEPS = 40
METHODS = ("mip", "enumerate")


@dataclass
class SolverOptions:
    """HiGHS options every query accepts."""

    time_limit_s: float | None = None
    mip_gap: float = 1e-6


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

    def start_query(self) -> None:
        """Forget the previous query's rejected points and repair count (splits themselves are kept)."""
        self.blocked.clear()
        self.query_repairs = 0

    def solver(self, kind: str, **target: float | None) -> PersistentHighs:
        """The kind's persistent model, loaded with the SCREEN_KEEP choices of best bound under the target.

        Kept rows with coarse MoE chords are refined first, and the screening repeated, until every kept row is
        refined: refining only raises bounds, so the kept rows still contain the optimum.
        """
        while True:
            t = self.tables
            lo, hi = target_batch_bounds(t, **target)
            for layout, batch in self.blocked:
                hi[(t.layout_of == layout) & (t.batch_lo == batch) & (t.batch_hi == batch)] = batch - 1.0
            bound = choice_bounds(t, kind, lo, hi)
            keep = np.argsort(bound, kind="stable")[:SCREEN_KEEP]
            keep = keep[np.isfinite(bound[keep])] if np.isfinite(bound[keep[0]]) else keep[:1]
            ahead = np.argsort(bound, kind="stable")[:REFINE_AHEAD]
            coarse = ahead[~t.refined[ahead] & np.isfinite(bound[ahead])] if not t.refined[keep].all() else keep[:0]
            if not len(coarse):
                break
            self.tables = refine_rows(t, self.question, coarse)
        best = float(bound.min())
        self.best_bound = best if np.isfinite(best) and best > 0 else None
        self.rows = keep
        if kind not in self._solvers:
            model = build_model(t, kind, slots=SCREEN_KEEP)
            self._solvers[kind] = PersistentHighs(model, self.options.time_limit_s, self.options.mip_gap)
        solver = self._solvers[kind]
        solver.configure(self.options.time_limit_s, self.options.mip_gap)
        load_choices(solver.model, t, keep, lo[keep], hi[keep])
        solver.model.objective_scale.set_value(self.objective_scale)
        return solver

    @property
    def objective_scale(self) -> float:
        """1 / the best choice bound: keeps the objective near 1 (both query kinds' bound is the optimum's value)."""
        return 1.0 if self.best_bound is None else 1.0 / self.best_bound

    def choice_row(self, c: int) -> int:
        """Row of the full tables behind slot c of the loaded model."""
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
        t = self.tables
        worst = (t.pieces_a0 + t.pieces_a1 * t.batch_hi[:, None]).max(axis=1)
        return float(np.max(t.usd_per_mtok_coef * worst / t.batch_lo) * 2.0 + 1.0)

    @property
    def max_time_per_token(self) -> float:
        t = self.tables
        return float((t.pieces_a0 + t.pieces_a1 * t.batch_hi[:, None]).max() * 2.0 + 1.0)


def prepare(question: Question, options: SolverOptions | None = None) -> Prepared:
    """Tables for the question; raises Infeasible (with the reason) when no layout can run at all."""
    tables = build_tables(question)
    if len(tables) == 0:
        raise _no_layout(question, tables)
    return Prepared(question, tables, options or SolverOptions())


EXCLUSION_HINTS = {
    "memory": "the model does not fit in memory on {n}: "
    "allow larger --tp-degrees/--pp-degrees, fewer weight bits or a shorter --context",
    "demand": "{n} cannot be filled by that demand: raise --demand-tok-s",
    "topology": "{n} cannot be placed on the cluster: offer smaller degrees",
    "gpu_limit": "{n} need more GPUs than --max-gpus allows: raise it",
}


def _no_layout(question: Question, tables: Tables) -> Infeasible:
    """Why no layout survives: each reason with its count and the flag that would relax it, most frequent first."""
    counts = sorted(((v, k) for k, v in tables.exclusions.items() if v), reverse=True)
    if not counts:
        return Infeasible("the search space is empty", reason="space", nearest="offer more degrees or accelerators")
    hints = "; ".join(EXCLUSION_HINTS[k].format(n=f"{v} layout{'s' * (v > 1)}") for v, k in counts)
    return Infeasible("no setup can serve this question", reason=counts[0][1], nearest=hints)


def _decode(prep: Prepared, model: pyo.ConcreteModel) -> tuple[int, Setup, float]:
    """The picked choice, its setup and the MIP's own time per token (in the tables' time unit)."""
    t = prep.tables
    picks = np.array([pyo.value(model.pick[c]) for c in model.C])
    local = int(np.argmax(picks))
    c = prep.choice_row(local)
    j = int(t.layout_of[c])
    lay = t.layouts
    setup = Setup(
        gpu=prep.question.gpus[int(lay.gpu_index[j])].name,
        weight_bits=int(lay.weight_bits[j]),
        tp=int(lay.tp[j]),
        tp_2d=bool(lay.tp_2d[j]),
        pp=int(lay.pp[j]),
        ep=int(lay.ep[j]),
        batch=int(round(pyo.value(model.batch[local]))),
        gamma=int(lay.gamma[j]),
    )
    return c, setup, float(pyo.value(model.tau[local]))


def _exact(prep: Prepared, c: int, setup: Setup, tau: float, report: SolveReport) -> Answer | None:
    """The re-evaluated answer if the MIP's figure is exact at this point; otherwise split there and return None."""
    answer = reevaluate(prep.question, setup, "mip", report)
    exact = answer.figures["time_per_token_s"] / prep.tables.time_unit_s
    if exact <= tau * (1.0 + EXACT_RTOL) + 1e-12:
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
    while True:
        solver = prep.solver(FASTEST, max_usd_per_mtok=max_usd_per_mtok)
        budget = prep.max_cost_usd_per_mtok if max_usd_per_mtok is None else max_usd_per_mtok
        solver.model.budget_usd_per_mtok.set_value(budget)
        report = solver.solve()
        if not report.has_solution:
            _no_solution(report)
            return None
        c, setup, tau = _decode(prep, solver.model)
        answer = _exact(prep, c, setup, tau, report)
        if answer is None:
            continue
        if max_usd_per_mtok is not None and answer.usd_per_mtok > max_usd_per_mtok * (1 + TARGET_RTOL):
            prep.reject(c, setup.batch)
            continue
        bound = None if report.bound is None else report.bound / prep.objective_scale
        if bound is None or bound <= 0:
            bound = prep.best_bound
        unit = prep.tables.time_unit_s
        bounds = {} if bound is None else {"bound_tok_s_per_request": 1.0 / (bound * unit)}
        return replace(answer, bounds=bounds)


def solve_cheapest(prep: Prepared, min_tok_s: float | None) -> Answer | None:
    """Least $/Mtok at or above the speed, by Dinkelbach iterations on the ratio (None when unreachable)."""
    prep.start_query()
    while True:
        max_time = None if min_tok_s is None else 1.0 / (min_tok_s * prep.tables.time_unit_s)
        solver = prep.solver(CHEAPEST, max_time_per_token=max_time)
        m = solver.model
        m.max_time_per_token.set_value(prep.max_time_per_token if max_time is None else max_time)
        lam: float | None = prep.best_bound
        for _ in range(MAX_DINKELBACH_STEPS):
            m.dinkelbach_lambda.set_value(0.0 if lam is None else lam)
            report = solver.solve()
            if not report.has_solution:
                _no_solution(report)
                return None
            c, setup, tau = _decode(prep, m)
            numerator = float(prep.tables.usd_per_mtok_coef[c]) * tau
            denominator = float(setup.batch)
            if lam is not None and numerator - lam * denominator >= -1e-9 * max(numerator, 1e-12):
                break
            lam = numerator / denominator
        answer = _exact(prep, c, setup, tau, report)
        if answer is None:
            continue
        if min_tok_s is not None and answer.tok_s_per_request < min_tok_s * (1 - TARGET_RTOL):
            prep.reject(c, setup.batch)
            continue
        bound = max(0.0, prep.best_bound or 0.0, _ratio_bound(lam, report, prep.objective_scale))
        gap = max(0.0, (answer.usd_per_mtok - bound) / answer.usd_per_mtok)
        return replace(answer, report=replace(report, mip_gap=gap), bounds={"bound_usd_per_mtok": bound})


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
    """One query by either method; an unreachable target raises Infeasible naming the other extreme."""
    check_method(method)
    other = CHEAPEST if kind == FASTEST else FASTEST
    if method == "enumerate":
        pts = enumerated_points(question)
        answer = enumerate_best(question, kind, target, pts)
        nearest = (lambda: enumerate_best(question, other, None, pts)) if answer is None else None
    else:
        prep = prepare(question, options)
        solve = {FASTEST: solve_fastest, CHEAPEST: solve_cheapest}
        answer = solve[kind](prep, target)
        nearest = (lambda: solve[other](prep, None)) if answer is None else None
    if answer is None:
        raise _unreachable(kind, target, nearest())
    return answer


def _unreachable(kind: str, target: float | None, nearest: Answer) -> Infeasible:
    """The target nobody meets, and the figure the best setup at the other extreme reaches."""
    cost, speed = f"${nearest.usd_per_mtok:.4g}/Mtok", f"{nearest.tok_s_per_request:.4g} tok/s"
    if kind == FASTEST:
        return Infeasible(
            f"no setup costs at most ${target:.4g}/Mtok",
            reason="target",
            nearest=f"the cheapest setup costs {cost} at {speed}",
        )
    return Infeasible(
        f"no setup reaches {target:.4g} tok/s per request",
        reason="target",
        nearest=f"the fastest setup reaches {speed} at {cost}",
    )
