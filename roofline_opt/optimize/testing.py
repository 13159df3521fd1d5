"""Assertion helpers shared by tests: compare a MIP answer with the enumeration oracle on the same space."""

from __future__ import annotations

from roofline_opt.optimize.results import Answer
from roofline_opt.optimize.space import TARGET_RTOL

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
