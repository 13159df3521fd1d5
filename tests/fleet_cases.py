"""Helpers of the fleet tests: a fleet from its structure, and each fleet of a table solved by the MIP and by brute
force (``optimize.testing.assert_same_fleet_optimum`` compares them)."""

from __future__ import annotations

from collections.abc import Mapping

from roofline_opt import api
from roofline_opt.optimize.fleet import parse_fleet, plan_fleet
from roofline_opt.optimize.queries import SolverOptions

OPTIONS = SolverOptions(mip_gap=1e-9)
"""Fleet MIPs solved to a 1e-9 gap, so they equal brute force to rounding."""


def fleet_of(data: Mapping):
    """The validated Fleet of a fleet file's structure (the API's question factory)."""
    return parse_fleet(data, api.question)


def solved(fleets: Mapping[str, Mapping], exact_placement: bool = False) -> dict[str, tuple]:
    """Per key: (fleet, MIP plan, [MIP plan with the exact placement model,] brute-force plan)."""
    out = {}
    for key, data in fleets.items():
        fleet = fleet_of(data)
        exact = (plan_fleet(fleet, "mip", OPTIONS, exact_placement=True),) if exact_placement else ()
        out[key] = (fleet, plan_fleet(fleet, "mip", OPTIONS), *exact, plan_fleet(fleet, "enumerate"))
    return out
