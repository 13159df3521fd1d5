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
    set_batch_bounds,
    target_batch_bounds,
)
from roofline_opt.optimize.results import Answer, Setup, reevaluate
from roofline_opt.optimize.solve import PersistentHighs, SolveReport
from roofline_opt.optimize.space import Layouts, Question
from roofline_opt.optimize.tables import Tables, build_tables, split_choice

SCREEN_ABOVE_CHOICES = 600
SCREEN_KEEP = 48
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

    Small spaces keep one persistent model per query kind and only push the target between solves. Spaces of more
    than SCREEN_ABOVE_CHOICES choices are first screened: each choice's best value under the target is computed
    from the tables (formulation.choice_bounds: exactly the MIP restricted to that choice), and the model is built
    over the SCREEN_KEEP best, which contain the optimum.
    """

    question: Question
    tables: Tables
    options: SolverOptions
    _solvers: dict[str, PersistentHighs] = field(default_factory=dict)
    repairs: int = 0
    rows: np.ndarray | None = None
    best_bound: float | None = None
    blocked: set[int] = field(default_factory=set)
    query_repairs: int = 0
    excluded_layouts: set[int] = field(default_factory=set)
    """Layout indices no query may pick (the runner-up search excludes the answers already given)."""

    def start_query(self) -> None:
        """Forget the previous query's rejected points and repair count (splits themselves are kept)."""
        self.blocked.clear()
        self.query_repairs = 0

    def solver(self, kind: str, lo: np.ndarray, hi: np.ndarray) -> PersistentHighs:
        """A loaded model for the target's batch ranges (screened when the space is large)."""
        t = self.tables
        off = np.zeros(len(t), dtype=bool)
        off[list(self.blocked)] = True
        if self.excluded_layouts:
            off |= np.isin(t.layout_of, list(self.excluded_layouts))
        if off.any():
            hi = hi.copy()
            hi[off] = lo[off] - 1.0
        bound = choice_bounds(t, kind, lo, hi)
        best = float(bound.min())
        self.best_bound = best if np.isfinite(best) and best > 0 else None
        if len(t) > SCREEN_ABOVE_CHOICES:
            keep = np.argsort(bound, kind="stable")[:SCREEN_KEEP]
            self.rows = keep[np.isfinite(bound[keep])] if np.isfinite(bound[keep[0]]) else keep[:1]
            solver = PersistentHighs(
                build_model(t.take(self.rows), kind), self.options.time_limit_s, self.options.mip_gap
            )
            set_batch_bounds(solver.model, lo[self.rows], hi[self.rows])
        else:
            self.rows = None
            if kind not in self._solvers:
                model = build_model(t, kind)
                self._solvers[kind] = PersistentHighs(model, self.options.time_limit_s, self.options.mip_gap)
            solver = self._solvers[kind]
            set_batch_bounds(solver.model, lo, hi)
        solver.model.objective_scale.set_value(self.objective_scale)
        return solver

    @property
    def objective_scale(self) -> float:
        """1 / the best choice bound: keeps the objective near 1 (both query kinds' bound is the optimum's value)."""
        return 1.0 if self.best_bound is None else 1.0 / self.best_bound

    def choice_row(self, c: int) -> int:
        """Row of the full tables behind choice c of the loaded model."""
        return c if self.rows is None else int(self.rows[c])

    def split(self, row: int, batch: int) -> None:
        """Make ``batch`` exact in the row's interval and drop the built models (they are rebuilt lazily)."""
        if self.query_repairs >= MAX_REPAIRS:
            msg = f"the exactness repair did not converge after {MAX_REPAIRS} splits; please report this question"
            raise SolverFailure(msg)
        self.tables = split_choice(self.tables, self.question, row, batch)
        self._solvers.clear()
        self.blocked.clear()
        self.repairs += 1
        self.query_repairs += 1

    def reject(self, row: int, batch: int) -> None:
        """The exact figures at ``batch`` miss the target: make the point exact, or drop it for this query."""
        if self.tables.batch_lo[row] == self.tables.batch_hi[row] == batch:
            self.blocked.add(row)
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
    "demand": "{n} would out-serve the demand even at their smallest batch: raise --demand-tok-s",
    "gpu_shortage": "the demand of {demand} tok/s needs at least {needed} GPUs ({n} short of GPUs), and there are "
    "{available}: raise --max-gpus, use a larger cluster or lower --demand-tok-s",
    "topology": "{n} cannot be placed on the cluster: offer smaller degrees",
    "gpu_limit": "{n} need more GPUs than --max-gpus allows: raise it",
}


def _no_layout(question: Question, tables: Tables) -> Infeasible:
    """Why no layout survives: each reason with its count and the flag that would relax it, most frequent first."""
    ex = tables.exclusions
    counts = sorted(((v, k) for k, v in ex.items() if v and k in EXCLUSION_HINTS), reverse=True)
    if not counts:
        return _empty_space(question)
    demand = question.demand_tok_s or 0.0
    figures = {"demand": f"{demand:,.0f}" if demand >= 10 else f"{demand:g}", "needed": ex.get("gpus_needed"),
               "available": ex.get("gpus_available")}  # fmt: skip
    hints = "; ".join(EXCLUSION_HINTS[k].format(n=f"{v} layout{'s' * (v > 1)}", **figures) for v, k in counts)
    reason = "gpu_limit" if counts[0][1] == "gpu_shortage" else counts[0][1]
    return Infeasible("no setup can serve this question", reason=reason, nearest=hints)


def _empty_space(question: Question) -> Infeasible:
    """No layout at all: most often a precision none of the accelerators has a FLOP rate for."""
    unsupported = [
        f"{g.name} has no FLOP rate for {b}-bit weights" for g in question.gpus for b in question.weight_bits
        if not g.supports(b)
    ]  # fmt: skip
    if unsupported:
        runs = "; ".join(f"{g.name} runs {', '.join(str(b) for b in sorted(g.flop_per_s_by_bits))}-bit" for g in
                         question.gpus)  # fmt: skip
        return Infeasible("no layout can run: " + "; ".join(unsupported), reason="space",
                          nearest=f"{runs}: choose --weight-bits among those")  # fmt: skip
    return Infeasible("the search space is empty", reason="space", nearest="offer more degrees or accelerators")


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
        solver = prep.solver(FASTEST, *target_batch_bounds(prep.tables, max_usd_per_mtok=max_usd_per_mtok))
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
        solver = prep.solver(CHEAPEST, *target_batch_bounds(prep.tables, max_time_per_token=max_time))
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
    return top_n(question, kind, target, 1, method, options)[0]


def layout_index(question: Question, lay: Layouts, setup: Setup) -> int:
    """Index in ``lay`` of the layout a setup uses."""
    g = next(i for i, gpu in enumerate(question.gpus) if gpu.name == setup.gpu)
    match = (
        (lay.gpu_index == g) & (lay.weight_bits == setup.weight_bits) & (lay.tp == setup.tp)
        & (lay.tp_2d == setup.tp_2d) & (lay.pp == setup.pp) & (lay.ep == setup.ep) & (lay.gamma == setup.gamma)
    )  # fmt: skip
    return int(np.flatnonzero(match)[0])


def top_n(
    question: Question,
    kind: str,
    target: float | None,
    n: int,
    method: str = "mip",
    options: SolverOptions | None = None,
) -> list[Answer]:
    """The best answer, then the best among the remaining layouts, and so on: up to ``n`` distinct layouts, each
    proven best once the previous ones are excluded (fewer when no other layout meets the target)."""
    check_method(method)
    other = CHEAPEST if kind == FASTEST else FASTEST
    answers: list[Answer] = []
    if method == "enumerate":
        pts = enumerated_points(question)
        excluded: list[int] = []
        nearest = lambda: enumerate_best(question, other, None, pts)  # noqa: E731
        for _ in range(n):
            keep = ~np.isin(pts.layout_index, excluded)
            answer = enumerate_best(question, kind, target, pts.subset(keep))
            if answer is None:
                break
            answers.append(answer)
            excluded.append(layout_index(question, pts.layouts, answer.setup))
    else:
        prep = prepare(question, options)
        solve = {FASTEST: solve_fastest, CHEAPEST: solve_cheapest}
        for _ in range(n):
            answer = solve[kind](prep, target)
            if answer is None:
                break
            answers.append(answer)
            prep.excluded_layouts.add(layout_index(question, prep.tables.layouts, answer.setup))
        prep.excluded_layouts.clear()
        nearest = lambda: solve[other](prep, None)  # noqa: E731
    if not answers:
        raise _unreachable(kind, target, nearest())
    return answers


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
