"""The fleet pipeline: candidates -> one MIP -> HiGHS -> decode -> placement (checked on the graph) -> exact
re-evaluation.

An infeasible fleet is answered with why: a model whose limit no layout meets on any accelerator offered (with the
fastest figure it reaches there), a budget below the cheapest plan (its cost), or a GPU shortage (the fewest extra
GPUs per type a plan needs, from the same model with the counts relaxed), or domains too fragmented to pack.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pyomo.core as pyo

from roofline_opt import checks
from roofline_opt.errors import Infeasible, InvalidInput, SolverFailure
from roofline_opt.optimize.fleet.candidates import (
    PREFILL,
    Candidate,
    ModelCandidates,
    PrefillPool,
    model_candidates,
    prefill_pools,
)
from roofline_opt.optimize.fleet.formulation import CLASSES, DOMAINS, build_fleet_model, use_cost_objective
from roofline_opt.optimize.fleet.placement import (
    PlacedInstance,
    decompose,
    greedy_place,
    kv_path_problems,
    placement_problems,
)
from roofline_opt.optimize.fleet.problem import COST, Fleet
from roofline_opt.optimize.fleet.results import FleetPlan, build_plan
from roofline_opt.optimize.queries import SolverOptions
from roofline_opt.optimize.solve import PersistentHighs, SolveReport
from roofline_opt.optimize.space import DEFAULT_FLEET_MIP_GAP

FLEET_MIP_GAP = DEFAULT_FLEET_MIP_GAP
VALUE_RTOL = 1e-7
METHODS = ("mip", "enumerate")


def fleet_candidates(fleet: Fleet) -> tuple[list[Candidate], list[PrefillPool]]:
    """Every model's candidates, flattened, and the prefill pools of disaggregated models; Infeasible naming the
    model and accelerators when one has none."""
    out: list[Candidate] = []
    for i, fm in enumerate(fleet.models):
        mc = model_candidates(i, fm, fleet.pool)
        if not any(c.role != PREFILL for c in mc.candidates):
            raise _no_candidate(fleet, i, mc)
        out += mc.candidates
    pools = prefill_pools(fleet, out)
    for i, fm in enumerate(fleet.models):
        if fm.disaggregated and not any(p.model == i for p in pools):
            raise _no_prefill_pool(fleet, i, [c for c in out if c.model == i and c.role == PREFILL])
    return out, pools


def _no_prefill_pool(fleet: Fleet, i: int, prefill: Sequence[Candidate]) -> Infeasible:
    fm = fleet.models[i]
    q = fm.question
    where = f"model {fm.name} ({q.model.name})"
    limit = "" if q.max_ttft_s is None else f"ttft {checks.figure(q.max_ttft_s * 1e3)} ms"
    if fm.percentile is not None:
        limit += f" at p{fm.percentile:g}"
    if not prefill:
        return Infeasible(
            f"{where}: no prefill layout fits in memory and meets {limit or 'its limits'}",
            reason="target",
            nearest="offer more tp/pp degrees, fewer weight bits or a looser ttft_ms",
        )
    fastest = min(c.ttft_s for c in prefill if c.ttft_s is not None)
    return Infeasible(
        f"{where}: no prefill pool the GPUs allow meets {limit} at its demand",
        reason="target",
        nearest=f"an idle prefill instance takes {checks.figure(fastest * 1e3)} ms to the first token",
    )


def _no_candidate(fleet: Fleet, i: int, mc: ModelCandidates) -> Infeasible:
    fm = fleet.models[i]
    parts = []
    for gpu, fastest in mc.fastest_time_per_token_s.items():
        if gpu in mc.refused_by:
            kind, floor_s = mc.refused_by[gpu]
            q = fm.question
            limit_s, at = (q.max_ttft_s, fm.percentile) if kind == "ttft" else (q.max_tpot_s, fm.tpot_percentile)
            assert limit_s is not None  # a floor is recorded only for a limit the question sets
            where = "" if at is None else f" at p{at:g}"
            limit, best = checks.figure(limit_s * 1e3), checks.figure(floor_s * 1e3)
            quickest = f"the quickest layout takes {best} ms at its smallest batch"
            parts.append(f"cannot meet {kind} {limit} ms{where} on {gpu}: {quickest}")
        elif fastest == float("inf"):
            room = fleet.pool.largest_domain(gpu)
            where = "" if room is None else f" with TP groups inside one scale-up domain of at most {room} GPUs"
            parts.append(f"does not fit in memory on {gpu}{where} (offer more pp degrees or fewer weight bits)")
        else:
            assert fm.max_time_per_token_s is not None  # a finite fastest layout was refused only by the limit
            limit, best = checks.figure(fm.max_time_per_token_s * 1e3), checks.figure(fastest * 1e3)
            parts.append(f"cannot meet tpot {limit} ms on {gpu}: the fastest layout takes {best} ms")
    if not parts:
        parts.append("has no layout in its search space")
    return Infeasible(f"model {fm.name} ({fm.question.model.name}) " + "; ".join(parts), reason="target")


def _solve(model: pyo.ConcreteModel, options: SolverOptions) -> SolveReport:
    return PersistentHighs(model, options.time_limit_s, options.mip_gap, near_integral=False).solve()


def _report(rep: SolveReport, unit: str) -> dict:
    return {
        "status": rep.termination,
        "objective": rep.objective,
        f"bound_{unit}": rep.bound,
        "mip_gap": rep.mip_gap,
        "solve_seconds": rep.seconds,
    }


def _solve_model(fleet: Fleet, cands: Sequence[Candidate], options: SolverOptions, place: str, pools=()):
    """Build and solve (both phases for objective served); the solved model and its report."""
    m = build_fleet_model(fleet, cands, place, pools=pools)
    rep = _solve(m, options)
    if rep.infeasible:
        raise diagnose(fleet, cands, options, pools)
    if not rep.has_solution:
        raise SolverFailure(f"HiGHS stopped ({rep.termination}) without a plan; raise the time limit")
    unit = ("usd" if fleet.has_profile else "usd_per_hour") if fleet.objective == COST else "value"
    solve = {"method": "mip", **_report(rep, unit)}
    if fleet.objective != COST:
        use_cost_objective(m, pyo.value(m.value) * (1 - VALUE_RTOL))
        rep2 = _solve(m, options)
        if not rep2.has_solution:
            raise SolverFailure(f"HiGHS stopped ({rep2.termination}) without a plan in the cost phase")
        solve["cost_phase"] = _report(rep2, "usd")
    return m, solve


def solve_mip(
    fleet: Fleet,
    cands: Sequence[Candidate],
    options: SolverOptions,
    exact_placement: bool = False,
    pools: Sequence[PrefillPool] = (),
):
    """Decoded plan (replicas, placement, reserved/on-demand split) and solve report of the fleet MIP.

    On a graph the model over classes of identical domains is solved first; it is a relaxation of the exact
    placement, so when its replica counts place (greedy best fit) the plan is optimal for the exact model too.
    Otherwise (or with ``exact_placement``) the exact per-domain model is solved and its stage counts are split
    into instances.
    """
    names = [fm.name for fm in fleet.models]
    if fleet.pool.has_graph and not exact_placement:
        m, solve = _solve_model(fleet, cands, options, CLASSES, pools)
        replicas, _, split = decode(fleet, cands, m)
        placed = [greedy_place(fleet.pool, cands, names, r) for r in replicas]
        if all(p is not None for p in placed):
            solve["placement_model"] = "classes of identical domains (relaxation), placed by best fit"
            return replicas, placed, split, solve
    m, solve = _solve_model(fleet, cands, options, DOMAINS, pools)
    replicas, stages, split = decode(fleet, cands, m)
    solve["placement_model"] = "per domain (exact)" if fleet.pool.has_graph else "GPU counts"
    return replicas, place_all(fleet, cands, replicas, stages), split, solve


def decode(fleet: Fleet, cands: Sequence[Candidate], m: pyo.ConcreteModel):
    """Integer values of x, y and the reserved/on-demand split from a solved model."""
    replicas = [
        {k: round(pyo.value(m.x[k, t])) for k in m.K if round(pyo.value(m.x[k, t])) > 0} for t in range(fleet.periods)
    ]
    stages: list[dict[tuple[int, int], int]] = [{} for _ in range(fleet.periods)]
    if hasattr(m, "y"):
        for k, d, t in m.y:
            n = round(pyo.value(m.y[k, d, t]))
            if n:
                stages[t][k, d] = n
    split = None
    if fleet.has_profile:
        split = {
            g: (round(pyo.value(m.reserved[g])), [round(pyo.value(m.on_demand[g, t])) for t in m.T]) for g in m.reserved
        }
    return replicas, stages, split


def place_all(fleet: Fleet, cands: Sequence[Candidate], replicas, stages) -> list[list[PlacedInstance]]:
    if not fleet.pool.has_graph:
        return [[] for _ in replicas]
    names = [fm.name for fm in fleet.models]
    return [decompose(fleet.pool, cands, names, r, s) for r, s in zip(replicas, stages, strict=True)]


def diagnose(fleet: Fleet, cands: Sequence[Candidate], options: SolverOptions, pools=()) -> Infeasible:
    """Why no plan exists: the budget, a GPU shortage per type, or packing into the scale-up domains."""
    if fleet.max_usd_per_hour is not None:
        free = dataclasses.replace(fleet, max_usd_per_hour=None)
        m = build_fleet_model(free, cands, CLASSES, pools=pools)
        rep = _solve(m, options)
        if rep.has_solution:
            cost = pyo.value(m.cost) / (fleet.periods * fleet.period_hours)
            return Infeasible(
                f"no plan meets every demand within ${fleet.max_usd_per_hour:.6g}/hour",
                reason="budget",
                nearest=f"the cheapest plan costs ${cost:.6g}/hour",
            )
        fleet = free
    m = build_fleet_model(fleet, cands, extra_gpus=True, pools=pools)
    rep = _solve(m, options)
    if rep.has_solution:
        extra = {g: round(pyo.value(m.extra[g])) for g in m.extra}
        short = {g: n for g, n in extra.items() if n > 0}
        if short:
            more = ", ".join(f"{n} more {g}" for g, n in short.items())
            have = ", ".join(f"{fleet.pool.counts[g]} x {g}" for g in m.extra)
            return Infeasible(
                f"the pool ({have}) is too small for these demands",
                reason="gpu_shortage",
                nearest=f"it would take at least {more} GPUs",
            )
        return Infeasible(
            "enough GPUs in number, but the instances cannot be packed into the scale-up domains "
            "(TP groups inside one domain, pipeline stages on distinct domains)",
            reason="topology",
            nearest="offer smaller tp/pp degrees or a cluster with larger domains",
        )
    return Infeasible("no plan meets every demand", reason="target")


def plan_fleet(
    fleet: Fleet, method: str = "mip", options: SolverOptions | None = None, exact_placement: bool = False
) -> FleetPlan:
    """The optimal plan of ``fleet`` by the MIP or by brute force (small fleets only); ``exact_placement`` skips
    the class relaxation and solves the per-domain model directly."""
    if method not in METHODS:
        raise InvalidInput("method", f"must be one of {', '.join(METHODS)}. Got {method!r} instead.")
    options = options or SolverOptions(mip_gap=FLEET_MIP_GAP)
    if method == "enumerate":
        from roofline_opt.optimize.fleet.enumerate import enumerate_plan

        cands, replicas, stages, split, solve = enumerate_plan(fleet)
        placement = place_all(fleet, cands, replicas, stages)
    else:
        cands, pools = fleet_candidates(fleet)
        replicas, placement, split, solve = solve_mip(fleet, cands, options, exact_placement, pools)
        if pools:
            solve["prefill_pools"] = len(pools)
    solve["candidates"] = len(cands)
    if fleet.pool.has_graph:
        cluster = fleet.pool.cluster
        checks_of = (placement_problems, kv_path_problems)
        problems = [p for period in placement for check in checks_of for p in check(cluster, period)]
        if problems:
            raise SolverFailure(f"the decoded placement is invalid on the graph ({problems[0]}); please report this")
    return build_plan(fleet, cands, replicas, placement, split, solve)
