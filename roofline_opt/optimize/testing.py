"""Assertion helpers shared by tests: compare a MIP answer (or fleet plan) with the enumeration oracle on the same
space."""

from __future__ import annotations

from typing import TYPE_CHECKING

from roofline_opt.optimize.results import Answer
from roofline_opt.optimize.space import TARGET_RTOL

if TYPE_CHECKING:
    from roofline_opt.optimize.fleet.problem import Fleet
    from roofline_opt.optimize.fleet.results import FleetPlan

OBJECTIVE_RTOL = 1e-5
"""Default tolerance between the MIP's objective and the oracle's: ten times the solver's default gap."""
EXACT_RTOL = 1e-6
"""The solver's default relative MIP gap: the tolerance of a comparison that expects the MIP to be exact."""


def _objective(kind: str, answer: Answer) -> float:
    return answer.tok_s_per_request if kind == "fastest" else answer.usd_per_mtok


def assert_same_optimum(
    kind: str, mip: Answer, oracle: Answer, target: float | None, rtol: float = OBJECTIVE_RTOL
) -> None:
    """Both answers fit and meet the target, and the MIP's re-evaluated objective EQUALS the oracle's within
    ``rtol``, both ways: worse means the MIP missed the optimum, better means one of the two is wrong."""
    for answer in (mip, oracle):
        assert answer.fits_in_memory, answer.setup
        if target is not None and kind == "fastest":
            assert answer.usd_per_mtok <= target * (1 + TARGET_RTOL), (answer.usd_per_mtok, target)
        elif target is not None:
            assert answer.tok_s_per_request >= target * (1 - TARGET_RTOL), (answer.tok_s_per_request, target)
    ours, best = _objective(kind, mip), _objective(kind, oracle)
    assert abs(ours - best) <= rtol * abs(best), (kind, ours, best, mip.setup, oracle.setup)


FLEET_RTOL = 1e-7
"""Tolerance between a fleet plan's objective and the brute-force oracle's (plans solved to a 1e-9 gap)."""


def fleet_objective(fleet: Fleet, plan: FleetPlan) -> tuple[float, float]:
    """(weighted demand served, $/hour) of a fleet plan: what objective ``served`` maximises and ``cost`` minimises."""
    served = sum(m.value_per_tok_s() * s["served_tok_s"] for m, s in zip(fleet.models, plan.models, strict=True))
    return served, plan.usd_per_hour


def assert_same_fleet_optimum(fleet: Fleet, plan: FleetPlan, oracle: FleetPlan, rtol: float = FLEET_RTOL) -> None:
    """The plan serves the same weighted demand at the same $/hour as the brute-force oracle, within ``rtol``: both
    ways, as ``assert_same_optimum``."""
    (value, cost), (best_value, best_cost) = fleet_objective(fleet, plan), fleet_objective(fleet, oracle)
    assert abs(value - best_value) <= rtol * max(abs(best_value), 1e-300), (value, best_value)
    assert abs(cost - best_cost) <= rtol * max(abs(best_cost), 1e-300), (cost, best_cost)
