"""roofline_opt: proven-optimal LLM serving setups under cost and speed targets (inference-economics roofline + MIP).

The public API is ``__all__``: the query functions of ``roofline_opt.api`` (pandas results, or ``Answer`` objects
for a ``Question``) and the types they take and return. Everything loads lazily, so that importing the evaluator
alone does not import Pyomo or pandas.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    **dict.fromkeys(
        (
            "question",
            "evaluate",
            "evaluate_setups",
            "fastest",
            "cheapest",
            "frontier",
            "plan",
            "fastest_answer",
            "fastest_answers",
            "cheapest_answer",
            "cheapest_answers",
            "frontier_frame",
        ),
        "roofline_opt.api",
    ),
    "Question": "roofline_opt.optimize.space",
    "Answer": "roofline_opt.optimize.results",
    "Setup": "roofline_opt.optimize.results",
    "FleetPlan": "roofline_opt.optimize.fleet.results",
    "ModelSpec": "roofline_opt.physics.specs",
    "GpuSpec": "roofline_opt.physics.specs",
    "RooflineError": "roofline_opt.errors",
    "InvalidInput": "roofline_opt.errors",
    "Infeasible": "roofline_opt.errors",
    "SolverFailure": "roofline_opt.errors",
}
"""Each public name and the module that defines it."""

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    msg = f"module 'roofline_opt' has no attribute {name!r}"
    raise AttributeError(msg)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
