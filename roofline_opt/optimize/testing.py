"""Assertion helpers shared by tests: compare a MIP answer with the enumeration oracle on the same space."""

from __future__ import annotations

from roofline_opt.optimize.results import Answer

OBJECTIVE_RTOL = 0.005
TARGET_RTOL = 1e-9
EXACT_RTOL = 1e-6
"""The solver's default relative MIP gap: the tolerance of a comparison that expects the MIP to be exact."""


def assert_same_optimum(
    kind: str, mip: Answer, oracle: Answer, target: float | None, rtol: float = OBJECTIVE_RTOL
) -> None:
    """The MIP's re-evaluated answer meets the target and matches the oracle's objective within ``rtol`` (0.5%)."""
    assert mip.fits_in_memory, mip.setup
    if kind == "fastest":
        if target is not None:
            assert mip.usd_per_mtok <= target * (1 + TARGET_RTOL), (mip.usd_per_mtok, target)
        assert mip.tok_s_per_request >= oracle.tok_s_per_request * (1 - rtol), (mip.setup, oracle.setup)
    else:
        if target is not None:
            assert mip.tok_s_per_request >= target * (1 - TARGET_RTOL), (mip.tok_s_per_request, target)
        assert mip.usd_per_mtok <= oracle.usd_per_mtok * (1 + rtol), (mip.setup, oracle.setup)
