"""What would make an infeasible question feasible: the same question with more offered, each solved exactly.

An infeasible answer names the flags that widen the search space (every weight and KV precision the accelerators
run, expert parallelism with data-parallel attention for a MoE model, disaggregated serving for whole requests) and
the figure each reaches, so that a default that hides the answer is one flag away, not a guess.
"""

from __future__ import annotations

import dataclasses

from roofline_opt import checks
from roofline_opt.errors import Infeasible, InvalidInput
from roofline_opt.optimize.formulation import FASTEST
from roofline_opt.optimize.queries import SolverOptions, top_n
from roofline_opt.optimize.space import MOE_EP_DEGREES, Question
from roofline_opt.physics import requests as rq
from roofline_opt.physics.evaluator import KV_BITS
from roofline_opt.physics.specs import WEIGHT_BITS


def wider_questions(q: Question) -> list[tuple[str, Question]]:
    """Questions offering more than ``q`` does, one widening at a time and then all together, each with the flags
    that offer it; empty when ``q`` already offers everything listed here."""
    widenings: list[tuple[str, dict]] = []
    bits = tuple(b for b in WEIGHT_BITS if any(g.supports(b) for g in q.gpus))
    if set(bits) - set(q.weight_bits):
        widenings.append((f"--weight-bits {_listed(bits)}", {"weight_bits": bits}))
    if set(KV_BITS) - set(q.kv_bits):
        widenings.append((f"--kv-bits {_listed(KV_BITS)}", {"kv_bits": KV_BITS}))
    if q.model.is_moe:
        ep = tuple(sorted({*q.ep_degrees, 1, *(d for d in MOE_EP_DEGREES if q.model.n_experts % d == 0)}))
        if set(ep) - set(q.ep_degrees) or (not q.dp_attention and len(ep) > 1):
            widenings.append((f"--ep-degrees {_listed(ep)} --dp-attention", {"ep_degrees": ep, "dp_attention": True}))
    if q.workload is not None and rq.DISAGG not in q.serving and min(q.workload.isl) >= 1:
        widenings.append(("--serving agg,disagg", {"serving": rq.SERVING_MODES}))
    out = [(flags, dataclasses.replace(q, **changes)) for flags, changes in widenings]
    if len(widenings) > 1:
        everything = {k: v for _, changes in widenings for k, v in changes.items()}
        out.append((" ".join(flags for flags, _ in widenings), dataclasses.replace(q, **everything)))
    return out


def _listed(values: tuple[int, ...]) -> str:
    return ",".join(str(v) for v in values)


def feasible_hints(q: Question, kind: str, target: float | None, options: SolverOptions) -> list[str]:
    """One sentence per wider question that answers ``kind`` at ``target``: its flags and the figures it reaches."""
    hints = []
    for flags, wider in wider_questions(q):
        try:
            answer = top_n(wider, kind, target, 1, "mip", options)[0]
        except (Infeasible, InvalidInput):
            continue
        speed = checks.figure(answer.tok_s_per_request)
        cost = checks.figure(answer.usd_per_mtok)
        reach = f"{speed} tok/s per request at ${cost}/Mtok" if kind == FASTEST else f"${cost}/Mtok at {speed} tok/s"
        hints.append(f"with {flags}: {reach}")
    return hints


def with_hints(error: Infeasible, q: Question, kind: str, target: float | None, options: SolverOptions) -> Infeasible:
    """``error`` with the widenings that would answer the question appended (unchanged when none would)."""
    hints = feasible_hints(q, kind, target, options)
    if not hints:
        return error
    text = f"{error}; feasible with more offered: " + "; ".join(hints)
    return Infeasible(text, error.reason)
