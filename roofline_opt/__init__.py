"""roofline_opt: proven-optimal LLM serving setups under cost and speed targets (inference-economics roofline + MIP).

Public API: ``question``, ``fastest``, ``cheapest``, ``frontier`` (pandas results). They load lazily so that
importing the evaluator alone does not import Pyomo.
"""

from __future__ import annotations

__all__ = ["cheapest", "fastest", "frontier", "plan", "question"]


def __getattr__(name: str):
    if name in __all__:
        from roofline_opt import api

        return getattr(api, name)
    msg = f"module 'roofline_opt' has no attribute {name!r}"
    raise AttributeError(msg)
