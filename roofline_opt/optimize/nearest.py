"""Figures the infeasibility messages quote: the lowest TTFT any layout reaches, the demands a space can serve and
the GPUs a question may use (all from the evaluator, through the tables where they help)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from roofline_opt import checks
from roofline_opt.errors import Infeasible
from roofline_opt.optimize import pairing
from roofline_opt.optimize.pieces import speculation
from roofline_opt.optimize.space import DEFAULT_TP_DEGREES, Question, layouts, prefill_layouts
from roofline_opt.optimize.tables import (
    Tables,
    aggregated_ttft_s,
    build_tables,
    group_layout,
    option_of_rows,
    percentile_tpot_s,
    unit_throughput,
)
from roofline_opt.physics import requests as rq


def best_ttft_s(question: Question) -> float:
    """The lowest TTFT any layout offered reaches at its smallest batch (memory aside): the nearest achievable."""
    best = np.inf
    lay = layouts(question)
    for gi, bits, idx in lay.groups(np.flatnonzero(~lay.disagg)):
        layout = group_layout(lay, idx, question)
        spec = speculation(question, lay, idx)
        ttft = aggregated_ttft_s(
            question, question.gpus[gi], bits, layout, lay.pp[idx].astype(float), lay.chunk[idx], spec
        )
        best = min(best, float(np.min(ttft)))
    pre = prefill_layouts(question)
    for d in (g for g in range(len(question.gpus)) if question.offers(rq.DISAGG, g)):
        for gi, bits, idx in pre.groups():
            fig = pairing.prefill_points(question, pre, idx, gi, bits, pre.pp[idx], d, False)
            best = min(best, float(np.min(fig["ttft_s"])))
    return best


def best_tpot_s(question: Question) -> float:
    """The lowest TPOT at the question's percentile any layout offered reaches at its smallest batch (memory
    aside): the nearest achievable."""
    best = np.inf
    lay = layouts(question)
    for gi, bits, idx in lay.groups():
        layout = group_layout(lay, idx, question)
        batch, spec = lay.pp[idx].astype(float), speculation(question, lay, idx)
        tpot = percentile_tpot_s(
            question, question.gpus[gi], bits, layout, batch, lay.chunk[idx], lay.disagg[idx], spec
        )
        best = min(best, float(np.min(tpot)))
    return best


def demand_range_tok_s(question: Question) -> tuple[float, float, float]:
    """(least, most, best per GPU) output tok/s of this space: one aggregated instance at its smallest batch serves
    the least (a smaller demand cannot fill it), the most is what any setup serves within the GPU limit and the
    cluster (its units times their throughput at the largest batch), and the best tok/s per GPU of an aggregated
    instance (at its largest batch) says how many GPUs a demand needs at least."""
    t = build_tables(replace(question, demand_tok_s=None), coarse=True)
    least, most, per_gpu = np.inf, 0.0, 0.0
    option_of = option_of_rows(t)
    for gi, bits, pos in t.layouts.groups(t.layout_of):
        j, q = t.layout_of[pos], option_of[pos]
        top = unit_throughput(question, gi, bits, t.layouts, t.options, j, q, t.batch_hi[pos])
        most = max(most, float(np.max(np.minimum(t.replicas_cap[pos], 1 << 20) * top)))
        agg = q < 0
        if agg.any():
            low = unit_throughput(question, gi, bits, t.layouts, t.options, j[agg], q[agg], t.batch_lo[pos][agg])
            least = min(least, float(np.min(low)))
            per_gpu = max(per_gpu, float(np.max(top[agg] / t.n_gpus[pos][agg])))
    return least, most, per_gpu


def gpus_available(question: Question) -> int:
    """GPUs the question may use in all: --max-gpus and the cluster's count of its accelerators (0: unlimited)."""
    limits = [] if question.max_gpus is None else [question.max_gpus]
    if question.instance_limit is not None:
        limits.append(sum(question.instance_limit(g, 1, 1) for g in question.gpus))
    return min(limits) if limits else 0


EXCLUSION_HINTS = {
    "memory": "the model does not fit in memory on {n}: "
    "allow larger --tp-degrees/--pp-degrees, fewer weight or KV bits or a shorter --context",
    "ttft": "{n} cannot meet the TTFT limit (the lowest TTFT any layout offered reaches is {ttft}): raise --ttft-ms",
    "tpot": "{n} cannot meet the TPOT limit at its percentile (the lowest any layout offered reaches at load is "
    "{tpot}): raise --tpot-ms",
    "chunk": "{n} cannot prefill their prompts within the chunk budget at any batch: raise --chunk-tokens",
    "demand": "{n} cannot meet that demand (one instance would out-serve it, or the replicas it needs exceed "
    "--max-gpus or the cluster; {demand}): change --demand-tok-s/--demand-req-s or --max-gpus",
    "topology": "{n} cannot be placed on the cluster: offer smaller degrees",
    "gpu_limit": "{n} need more GPUs than --max-gpus allows: raise it",
}


def no_layout(question: Question, tables: Tables) -> Infeasible:
    """Why no layout survives: each reason with its count and the flag that would relax it, most frequent first."""
    counts = sorted(((v, k) for k, v in tables.exclusions.items() if v), reverse=True)
    if not counts:
        return _empty_space(question)
    ttft = f"{checks.figure(best_ttft_s(question) * 1e3)} ms" if tables.exclusions.get("ttft") else ""
    tpot = f"{checks.figure(best_tpot_s(question) * 1e3)} ms" if tables.exclusions.get("tpot") else ""
    demand = _demand_text(question) if tables.exclusions.get("demand") else ""
    hints = "; ".join(
        EXCLUSION_HINTS[k].format(n=f"{v} layout{'s' * (v > 1)}", ttft=ttft, tpot=tpot, demand=demand)
        for v, k in counts
    )
    return Infeasible("no setup can serve this question", reason=counts[0][1], nearest=hints)


def _empty_space(question: Question) -> Infeasible:
    """No layout at all: most often a precision none of the accelerators has a FLOP rate for."""
    unsupported = [
        f"{g.name} has no FLOP rate for {b}-bit weights"
        for g in question.gpus
        for b in question.weight_bits
        if not g.supports(b)
    ]
    if unsupported:
        runs = "; ".join(
            f"{g.name} runs {', '.join(str(b) for b in sorted(g.flop_per_s_by_bits))}-bit" for g in question.gpus
        )
        return Infeasible(
            "no layout can run: " + "; ".join(unsupported),
            reason="space",
            nearest=f"{runs}: choose --weight-bits among those",
        )
    model = question.model
    presets = [question.preset_on(g) for g in question.gpus]
    if all(p.tp_divides_attention_heads for p in presets) and not any(map(model.tp_splits_heads, question.tp_degrees)):
        given = ", ".join(map(str, question.tp_degrees))
        divisors = ", ".join(str(d) for d in DEFAULT_TP_DEGREES if model.tp_splits_heads(d))
        return Infeasible(
            f"no TP degree offered ({given}) divides {model.name}'s {model.n_q_heads} attention heads, as engines "
            "require",
            reason="space",
            nearest=f"offer --tp-degrees among {divisors}",
        )
    return Infeasible("the search space is empty", reason="space", nearest="offer more degrees or accelerators")


def _demand_text(question: Question) -> str:
    """The demands this space can serve, in output tok/s (and requests/s for whole requests)."""
    least, most, per_gpu = demand_range_tok_s(question)

    def both(tok_s: float) -> str:
        if question.workload is None:
            return f"{checks.figure(tok_s)} tok/s"
        return f"{checks.figure(tok_s)} output tok/s = {checks.figure(tok_s / question.workload.mean_osl)} req/s"

    low = f"at least {both(least)} fills one instance; " if np.isfinite(least) else ""
    text = f"{low}at most {both(most)} fits the GPUs" if most > 0 else f"{low}no setup fits the GPUs"
    available, demand = gpus_available(question), question.demand_tok_s or 0.0
    needed = math.ceil(demand / per_gpu - 1e-9) if per_gpu > 0 else 0
    if available and needed > available:
        text = (
            f"{text}; the demand of {both(demand)} needs at least {needed} GPUs (at the best "
            f"{checks.figure(per_gpu)} tok/s per GPU any setup reaches), and there are {available}"
        )
    return text
