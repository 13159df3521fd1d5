"""Figures the infeasibility messages quote: the lowest TTFT any layout reaches, the demands a space can serve and
the GPUs a question may use (all from the evaluator, through the tables where they help)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from roofline_opt.optimize import pairing
from roofline_opt.optimize.space import Question, layouts, prefill_layouts
from roofline_opt.optimize.tables import build_tables, group_layout, option_of_rows, unit_throughput
from roofline_opt.physics import requests as rq


def best_ttft_s(question: Question) -> float:
    """The lowest TTFT any layout offered reaches at its smallest batch (memory aside): the nearest achievable."""
    best = np.inf
    lay = layouts(question)
    for gi, bits, idx in lay.groups(np.flatnonzero(~lay.disagg)):
        layout = group_layout(lay, idx, question)
        ttft = rq.ttft_aggregated_s(
            question.model, question.gpus[gi], question.preset, bits, layout, lay.pp[idx], question.workload,
            lay.chunk[idx],
        )  # fmt: skip
        best = min(best, float(np.min(ttft)))
    pre = prefill_layouts(question)
    for d in (g for g in range(len(question.gpus)) if question.offers(rq.DISAGG, g)):
        for gi, bits, idx in pre.groups():
            fig = pairing.prefill_points(question, pre, idx, gi, bits, pre.pp[idx], d, False)
            best = min(best, float(np.min(fig["ttft_s"])))
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
