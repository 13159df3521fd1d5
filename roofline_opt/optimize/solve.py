"""HiGHS through Pyomo's persistent interface: options, re-solves without rebuilding, and status normalisation.

Knows nothing of what the variables mean. Two status layers, after linopy and Pyomo: ``termination`` says why
HiGHS stopped, ``has_solution`` whether we hold a usable incumbent; every Pyomo termination condition is mapped
explicitly and an unknown one becomes ``unknown``.
"""

from __future__ import annotations

import io
import math
import threading
import time
import warnings
from dataclasses import dataclass

import highspy
import numpy as np
import pyomo.core as pyo
from pyomo.common.timing import HierarchicalTimer
from pyomo.contrib.solver.common.results import SolutionStatus, TerminationCondition
from pyomo.contrib.solver.solvers.highs import Highs
from pyomo.core.staleflag import StaleFlagManager

from roofline_opt.errors import SolverFailure

TERMINATION_NAMES = {
    TerminationCondition.convergenceCriteriaSatisfied: "optimal",
    TerminationCondition.maxTimeLimit: "time_limit",
    TerminationCondition.iterationLimit: "iteration_limit",
    TerminationCondition.objectiveLimit: "objective_limit",
    TerminationCondition.minStepLength: "numerical",
    TerminationCondition.unbounded: "unbounded",
    TerminationCondition.provenInfeasible: "infeasible",
    TerminationCondition.locallyInfeasible: "infeasible",
    TerminationCondition.infeasibleOrUnbounded: "infeasible",
    TerminationCondition.error: "error",
    TerminationCondition.interrupted: "interrupted",
    TerminationCondition.licensingProblems: "error",
    TerminationCondition.emptyModel: "empty",
    TerminationCondition.unknown: "unknown",
}


@dataclass(frozen=True)
class SolveReport:
    """What HiGHS said about one solve: why it stopped, whether we hold a solution, objective, bound, gap, seconds."""

    termination: str
    has_solution: bool
    objective: float | None
    bound: float | None
    mip_gap: float | None
    seconds: float

    @property
    def infeasible(self) -> bool:
        return self.termination == "infeasible"


RELAXATION_FIRST_MAX_COLUMNS = 1000
"""Larger models (never a query's: those have 8 slots) go straight to the MIP, where start-up does not dominate."""
RELAXATION_TIME_SHARE = 0.1
"""Under a time limit the relaxation may use this share of it; the MIP then gets the whole limit."""
INTEGRALITY_TOLERANCE = 1e-7
"""An integer column of the LP relaxation within this of a whole number counts as integral."""
LOAD_LOCK = threading.Lock()
"""Held while Pyomo loads a model into HiGHS: its loader redirects the process's stdout and stderr file descriptors
(pyomo.common.tee.capture_output), and two threads doing that at once deadlock (each keeps the other's pipe open), as
in a Dask worker with several threads. Re-solves do not redirect and run in parallel."""


class RelaxationFirstHighs(Highs):
    """Pyomo's persistent HiGHS interface, solving the LP relaxation first.

    Every query's model has target-tightened batch ranges, so its LP relaxation is usually integral already; an
    integral relaxation optimum is the MIP's optimum (the relaxation bounds the MIP and the point is feasible for
    it), found in a tenth of a millisecond where HiGHS's MIP machinery takes milliseconds to start. Otherwise the
    MIP is solved as before, with the whole time limit again (a MIP stopped before its root LP has no bound), and
    the relaxation's optimum as a bound if HiGHS reports none. Output capture is skipped: HiGHS runs with
    output_flag off and prints nothing.
    """

    proved_by_relaxation = False
    relaxation_first = True
    _integer_columns: tuple[np.ndarray, np.ndarray] | None = None

    def solve(self, model, **kwds):  # overrides PersistentSolverMixin.solve
        """Load on the first call (Pyomo's path); re-solves only push changed parameters and run, without copying
        Pyomo's configuration each time (a tenth of a frontier's time otherwise)."""
        if kwds or model is not self._model:
            with LOAD_LOCK:
                return super().solve(model, **kwds)
        StaleFlagManager.mark_all_as_stale()
        if self._last_results_object is not None:
            self._last_results_object.solution_loader.invalidate()
        self._active_config = self.config
        self.update(timer=self.config.timer)
        self._last_results_object = self._solve()
        return self._last_results_object

    def _solve(self):  # overrides Highs._solve (pyomo.contrib.solver.solvers.highs)
        config = self._active_config
        highs = self._solver_model
        highs.setOptionValue("time_limit", math.inf if config.time_limit is None else config.time_limit)
        highs.setOptionValue("mip_rel_gap", config.rel_gap)
        if config.abs_gap is not None:
            highs.setOptionValue("mip_abs_gap", config.abs_gap)
        for key, option in config.solver_options.items():
            highs.setOptionValue(key, option)
        config.timer.start("optimize")
        self.proved_by_relaxation, relaxed_bound = False, -math.inf
        if self.relaxation_first and highs.getNumCol() <= RELAXATION_FIRST_MAX_COLUMNS:
            if config.time_limit is not None:
                highs.setOptionValue("time_limit", config.time_limit * RELAXATION_TIME_SHARE)
            highs.setOptionValue("solve_relaxation", True)
            highs.run()
            self.proved_by_relaxation = self._integral_optimum(highs)
            if highs.getModelStatus() == highspy.HighsModelStatus.kOptimal:
                relaxed_bound = highs.getInfo().objective_function_value
        if not self.proved_by_relaxation:
            highs.setOptionValue("time_limit", math.inf if config.time_limit is None else config.time_limit)
            highs.setOptionValue("solve_relaxation", False)
            highs.run()
        config.timer.stop("optimize")
        results = self._postsolve(io.StringIO())
        if self.proved_by_relaxation:
            results.objective_bound = results.incumbent_objective
        elif self.relaxation_first and results.incumbent_objective is not None:  # the relaxation bounds the MIP (min)
            bounds = [b for b in (relaxed_bound, results.objective_bound) if b is not None and math.isfinite(b)]
            results.objective_bound = max(bounds) if bounds else None
        return results

    def _integral_optimum(self, highs) -> bool:
        if highs.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return False
        if self._integer_columns is None or len(self._integer_columns[0]) != highs.getNumCol():
            kinds = np.asarray(highs.getLp().integrality_)
            self._integer_columns = (kinds, np.flatnonzero(kinds != highspy.HighsVarType.kContinuous))
        values = np.asarray(highs.getSolution().col_value)[self._integer_columns[1]]
        return bool(np.all(np.abs(values - np.round(values)) <= INTEGRALITY_TOLERANCE))


class PersistentHighs:
    """One model loaded into HiGHS once; parameters change between solves and only they are pushed."""

    def __init__(
        self,
        model: pyo.ConcreteModel,
        time_limit_s: float | None = None,
        mip_gap: float = 1e-6,
        near_integral: bool = True,
    ) -> None:
        """``near_integral``: the model is a choice formulation whose LP relaxation is nearly integral (below)."""
        self.model = model
        self._solver = RelaxationFirstHighs()
        self._solver.relaxation_first = near_integral
        cfg = self._solver.config
        cfg.load_solutions = False
        cfg.raise_exception_on_nonoptimal_result = False
        cfg.tee = False
        cfg.timer = HierarchicalTimer()
        self.configure(time_limit_s, mip_gap)
        cfg.solver_options["threads"] = 1
        cfg.solver_options["output_flag"] = False
        if near_integral:
            # The convex-hull formulation with target-tightened batch ranges has a near-integral LP relaxation:
            # presolve and primal heuristics only add overhead (measured: a 50-point frontier 1.24 s -> 0.54 s).
            cfg.solver_options["presolve"] = "off"
            cfg.solver_options["mip_heuristic_effort"] = 0.0
            cfg.solver_options["mip_heuristic_run_feasibility_jump"] = False
        updates = cfg.auto_updates
        for name in (
            "check_for_new_or_removed_constraints",
            "check_for_new_or_removed_vars",
            "check_for_new_or_removed_params",
            "check_for_new_objective",
            "update_constraints",
            "update_vars",
            "update_named_expressions",
        ):
            setattr(updates, name, False)

    def configure(self, time_limit_s: float | None, mip_gap: float) -> None:
        """HiGHS time limit (None: none) and relative MIP gap for the next solves."""
        cfg = self._solver.config
        if (cfg.time_limit, cfg.rel_gap) != (time_limit_s, mip_gap):
            cfg.time_limit = time_limit_s
            cfg.rel_gap = mip_gap

    def solve(self) -> SolveReport:
        """Solve (or re-solve after parameter changes) and load the incumbent if there is one."""
        start = time.perf_counter()
        try:
            res = self._solver.solve(self.model)
        except Exception as exc:  # HiGHS or Pyomo failure: one clear message, never a traceback
            msg = "HiGHS failed: " + (" ".join(str(exc).split()) or type(exc).__name__)
            raise SolverFailure(msg) from exc
        seconds = time.perf_counter() - start
        term = TERMINATION_NAMES.get(res.termination_condition)
        if term is None:
            warnings.warn(f"unrecognised HiGHS termination {res.termination_condition}", stacklevel=2)
            term = "unknown"
        has_solution = res.solution_status in (SolutionStatus.optimal, SolutionStatus.feasible)
        if has_solution:
            res.solution_loader.load_vars()
        objective = res.incumbent_objective if has_solution else None
        bound = res.objective_bound
        gap = None
        if objective is not None and bound is not None and abs(objective) > 0:
            gap = abs(objective - bound) / abs(objective)
        return SolveReport(term, has_solution, objective, bound, gap, seconds)
