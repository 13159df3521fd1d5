"""Brute-force oracle: the exact evaluator over every point of the discrete space, filtered, then the best one.

The MIP is tested against this, and ``--method enumerate`` exposes it. Each layout is evaluated at every whole
batch from its pipeline degree to ``max_batch`` in one vectorised call per (accelerator, precision). Aggregated
points are checked against the chunk budget and the TTFT limit point by point, and every point against a TPOT limit
at a percentile. A disaggregated decode point is priced
with every prefill partner: every prefill layout evaluated at every batch (keeping, per layout and link, the batch
with the most requests/s among those that fit and meet the TTFT limit: the same GPUs for more requests), times every
(x, y) in lowest terms; the point keeps its cheapest partner that the GPU limit and demand allow.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from roofline_opt.optimize import pairing
from roofline_opt.optimize.cost_range import check_costs_representable
from roofline_opt.optimize.pieces import speculation
from roofline_opt.optimize.results import Answer, Setup, reevaluate, setup_of
from roofline_opt.optimize.space import (
    Layouts,
    Question,
    layouts,
    meets_speed,
    prefill_layouts,
    replica_caps,
    within_budget,
)
from roofline_opt.optimize.tables import (
    aggregated_ttft_s,
    group_layout,
    instance_memory,
    target_step,
    within_tpot_limit,
)
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics import requests as rq

CHUNK_CELLS = 2_000_000


@dataclass(frozen=True)
class Points:
    """Every feasible (layout, batch) with its exact time per token and cost; a disaggregated point also carries
    its cheapest feasible prefill partner (prefill layout and batch, x and y; -1 / 0 otherwise)."""

    layouts: Layouts
    layout_index: np.ndarray
    batch: np.ndarray
    time_per_token_s: np.ndarray
    usd_per_mtok: np.ndarray
    prefill: Partners | None = None
    partner: np.ndarray | None = None

    def subset(self, mask: np.ndarray) -> Points:
        """The points where ``mask`` holds (same layouts table)."""
        partner = None if self.partner is None else self.partner[mask]
        return Points(
            self.layouts,
            self.layout_index[mask],
            self.batch[mask],
            self.time_per_token_s[mask],
            self.usd_per_mtok[mask],
            self.prefill,
            partner,
        )


@dataclass(frozen=True)
class Partners:
    """The oracle's prefill partners: every prefill layout at its batch of most requests/s (over every batch that fits
    and meets the TTFT limit), per decode accelerator and link, times every (x, y)."""

    layouts: Layouts
    layout: np.ndarray
    batch: np.ndarray
    requests_per_s: np.ndarray
    decode_gpu: np.ndarray
    same_domain: np.ndarray
    x: np.ndarray
    y: np.ndarray


def _partners(question: Question) -> Partners:
    lay = prefill_layouts(question)
    # the queueing model's prefill instance serves one prompt at a time
    batches = np.arange(1, (1 if question.queued_ttft else question.max_batch) + 1, dtype=float)
    cols: dict[str, list] = {k: [] for k in ("layout", "batch", "requests_per_s", "decode_gpu", "same_domain")}
    decode_gpus = [g for g in range(len(question.gpus)) if question.offers(rq.DISAGG, g)]
    for gi, bits, pos in lay.groups():
        for d in decode_gpus:
            same_type = question.gpus[gi].name == question.gpus[d].name
            for same in (False, True) if same_type else (False,):
                fig = pairing.prefill_points(question, lay, pos[:, None], gi, bits, batches[None, :], d, same)
                ok = np.asarray(fig["fits_in_memory"], dtype=bool) & (batches[None, :] >= lay.pp[pos][:, None])
                if question.max_ttft_s is not None:
                    ok &= fig["ttft_s"] <= question.max_ttft_s * (1 + 1e-12)
                rate = np.where(ok, fig["requests_per_s"], -np.inf)
                best = np.argmax(rate, axis=1)
                has = np.isfinite(rate[np.arange(len(pos)), best])
                cols["layout"].append(pos[has])
                cols["batch"].append(batches[best[has]])
                cols["requests_per_s"].append(rate[np.arange(len(pos)), best][has])
                cols["decode_gpu"].append(np.full(int(has.sum()), d))
                cols["same_domain"].append(np.full(int(has.sum()), same))
    base = {k: np.concatenate(v) if v else np.zeros(0) for k, v in cols.items()}
    ratios = np.array(question.ratios)
    n = len(base["layout"])
    rep = {k: np.repeat(v, len(ratios)) for k, v in base.items()}
    rep["x"], rep["y"] = np.tile(ratios[:, 0], n), np.tile(ratios[:, 1], n)
    if question.queued_ttft:
        rep["requests_per_s"] = _slo_rates(question, lay, rep)
        rep = {k: v[rep["requests_per_s"] > 0.0] for k, v in rep.items()}
    return Partners(
        layouts=lay,
        layout=rep["layout"].astype(int),
        batch=rep["batch"],
        requests_per_s=rep["requests_per_s"],
        decode_gpu=rep["decode_gpu"].astype(int),
        same_domain=rep["same_domain"].astype(bool),
        x=rep["x"],
        y=rep["y"],
    )


def _slo_rates(question: Question, lay: Layouts, rep: dict[str, np.ndarray]) -> np.ndarray:
    """Requests/s per prefill instance (batch 1) of each partner row with its x instances under the TTFT percentile
    (0 where no rate meets it), one call per accelerator, precision, decode accelerator and link."""
    rates = np.zeros(len(rep["x"]))
    k = rep["layout"].astype(int)
    keys = np.column_stack([lay.gpu_index[k], lay.weight_bits[k], rep["decode_gpu"], rep["same_domain"]])
    for key in np.unique(keys, axis=0) if len(k) else ():
        rows = np.flatnonzero(np.all(keys == key, axis=1))
        gi, bits, d, same = (int(v) for v in key)
        rates[rows] = pairing.slo_requests_per_s(question, lay, k[rows], gi, bits, d, bool(same), rep["x"][rows])
    return rates


def _request_limits(question: Question, gpu_index: int, bits: int, lay: Layouts, idx, batches) -> np.ndarray:
    """Points meeting the chunk budget and the TTFT limit (aggregated) and a TPOT limit at a percentile (every
    layout), evaluated point by point."""
    col = idx[:, None]
    spec = speculation(question, lay, col)
    ok = batches[None, :] <= rq.stable_batch_limit(question.whole_requests, lay.chunk[col], spec)
    layout = group_layout(lay, col, question)
    gpu = question.gpus[gpu_index]
    if question.max_ttft_s is not None:
        ttft = aggregated_ttft_s(question, gpu, bits, layout, batches[None, :], lay.chunk[col], spec)
        ok &= ttft <= question.max_ttft_s * (1 + 1e-12)
    ok |= lay.disagg[col]
    if question.queued_tpot:
        ok &= within_tpot_limit(question, gpu, bits, layout, batches[None, :], lay.chunk[col], lay.disagg[col], spec)
    return ok


def feasible_points(question: Question) -> Points:
    """Evaluate and keep the points that fit in memory, respect the batch range, limits and demand."""
    check_costs_representable(question)
    lay = layouts(question)
    batches = np.arange(1, question.max_batch + 1, dtype=float)
    keep_j, keep_b, keep_t, keep_c, keep_p = [], [], [], [], []
    caps = replica_caps(question, lay)
    partners = _partners(question) if np.any(lay.disagg) else None
    u = question.max_utilisation
    for gi, bits, group in lay.groups():
        gpu = question.gpus[gi]
        idx_all = group[(caps[group] >= 1) | lay.disagg[group]]
        step = max(1, CHUNK_CELLS // len(batches))
        for start in range(0, len(idx_all), step):
            idx = idx_all[start : start + step]
            col = idx[:, None]
            if question.workload is None:
                layout = group_layout(lay, col, question)
                gamma = lay.gamma[col].astype(float)
                tau = ev.time_per_token_with_gamma(
                    question.model,
                    gpu,
                    question.preset_on(gpu),
                    bits,
                    layout,
                    batches[None, :],
                    gamma,
                    question.draft,
                    question.acceptance,
                )
            else:
                tau = target_step(question, gi, bits, lay, col, batches[None, :]).step_time_s
            tau = np.broadcast_to(tau, (len(idx), len(batches)))
            fits = instance_memory(question, gi, bits, lay, col, batches[None, :]).fits
            if question.draft is not None and question.workload is None:
                with_draft = instance_memory(question, gi, bits, lay, col, batches[None, :], question.draft)
                fits = np.where(lay.gamma[col] > 0, with_draft.fits, fits)
            ok = np.broadcast_to(fits, tau.shape) & (batches[None, :] >= lay.pp[col])
            if question.workload is not None:
                ok &= _request_limits(question, gi, bits, lay, idx, batches)
            cost = np.broadcast_to(rq.usd_per_mtok(lay.n_gpus[col], gpu.usd_per_s, tau, batches[None, :], u), tau.shape)
            partner = np.full(tau.shape, -1)
            if partners is not None and np.any(lay.disagg[idx]):
                cost, partner, ok = _pair(question, lay, idx, batches, tau, cost, ok, partners)
            if question.demand_tok_s is not None:
                thr = batches[None, :] / tau * u
                agg = ~lay.disagg[col]
                ok &= ~agg | (thr <= question.demand_tok_s * (1 + 1e-12))
                ok &= ~agg | (np.ceil(question.demand_tok_s / thr - 1e-9) <= caps[col])
            rows, cols = np.nonzero(ok)
            keep_j.append(idx[rows])
            keep_b.append(batches[cols])
            keep_t.append(tau[rows, cols])
            keep_c.append(cost[rows, cols])
            keep_p.append(partner[rows, cols])
    return Points(
        lay,
        _cat(keep_j, int),
        _cat(keep_b, float),
        _cat(keep_t, float),
        _cat(keep_c, float),
        partners,
        _cat(keep_p, int),
    )


def _pair(question: Question, lay: Layouts, idx, batches, tau, cost, ok, partners: Partners):
    """Disaggregated rows: the cheapest feasible partner of each decode point, by brute force over partners (every
    matching partner at every batch, one matrix per decode layout)."""
    cost, ok = cost.copy(), ok.copy()
    partner = np.full(tau.shape, -1)
    w, u = question.whole_requests, question.max_utilisation
    decode_rate = batches[None, :] / (w.mean_osl * tau)
    pl = partners.layouts
    k = partners.layout
    p_gpu = pl.gpu_index[k]
    p_names = np.array([question.gpus[g].name for g in p_gpu])
    p_usd = pl.n_gpus[k] * np.array([question.gpus[g].usd_per_s for g in p_gpu])
    p_domain = np.array([question.gpus[g].scaleup_gpus for g in p_gpu])
    for row, j in enumerate(idx):
        if not lay.disagg[j]:
            continue
        d_gpu = question.gpus[int(lay.gpu_index[j])]
        same = (p_names == d_gpu.name) & (pl.n_gpus[k] + lay.n_gpus[j] <= p_domain)
        match = np.flatnonzero(
            (partners.decode_gpu == lay.gpu_index[j])
            & (pl.weight_bits[k] == lay.weight_bits[j])
            & (pl.kv_bits[k] == lay.kv_bits[j])
            & ((pl.gamma[k] > 0) == (lay.gamma[j] > 0))
            & (partners.same_domain == same)
        )
        caps = np.array(
            [_unit_cap(question, pl, int(k[q]), lay, int(j), int(partners.x[q]), int(partners.y[q])) for q in match],
            dtype=float,
        )
        x, y = partners.x[match, None], partners.y[match, None]
        served = np.minimum(x * partners.requests_per_s[match, None], y * decode_rate[row][None, :]) * u
        usd = 1e6 * (x * p_usd[match, None] + y * lay.n_gpus[j] * d_gpu.usd_per_s) / (served * w.mean_osl)
        feasible = np.broadcast_to(ok[row], usd.shape) & (caps[:, None] >= 1)
        if question.demand_tok_s is not None:
            feasible = feasible & (np.ceil(question.demand_tok_s / (served * w.mean_osl) - 1e-9) <= caps[:, None])
        usd = np.where(feasible, usd, np.inf)
        best = np.argmin(usd, axis=0) if len(match) else np.zeros(len(batches), dtype=int)
        lowest = usd[best, np.arange(len(batches))] if len(match) else np.full(len(batches), np.inf)
        cost[row] = lowest
        partner[row] = np.where(np.isfinite(lowest), match[best] if len(match) else -1, -1)
        ok[row] &= np.isfinite(lowest)
    return cost, partner, ok


def _unit_cap(question: Question, pl: Layouts, k: int, lay: Layouts, j: int, x: int, y: int) -> int:
    gpus = x * int(pl.n_gpus[k]) + y * int(lay.n_gpus[j])
    cap = 1 << 30 if question.max_gpus is None else question.max_gpus // gpus
    if question.instance_limit is not None:
        p_gpu, d_gpu = question.gpus[int(pl.gpu_index[k])], question.gpus[int(lay.gpu_index[j])]
        cap = min(cap, question.instance_limit(p_gpu, int(pl.tp[k]), int(pl.pp[k])) // x)
        cap = min(cap, question.instance_limit(d_gpu, int(lay.tp[j]), int(lay.pp[j])) // y)
        if p_gpu.name == d_gpu.name:
            cap = min(cap, question.instance_limit(d_gpu, 1, 1) // gpus)
    return cap


def _cat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


def _setup(question: Question, pts: Points, i: int) -> Setup:
    j, q = int(pts.layout_index[i]), -1 if pts.partner is None else int(pts.partner[i])
    setup = setup_of(question, pts.layouts, j, int(pts.batch[i]))
    if q < 0:
        return setup
    p = pts.prefill
    assert p is not None  # a partner index names a row of the prefill options
    k = int(p.layout[q])
    return replace(
        setup,
        prefill_gpu=question.gpus[int(p.layouts.gpu_index[k])].name,
        prefill_tp=int(p.layouts.tp[k]),
        prefill_tp_2d=bool(p.layouts.tp_2d[k]),
        prefill_pp=int(p.layouts.pp[k]),
        prefill_batch=int(p.batch[q]),
        prefill_instances=int(p.x[q]),
        decode_instances=int(p.y[q]),
    )


def best_point(pts: Points, kind: str, target: float | None) -> int | None:
    """Index of the fastest point within a budget, or of the cheapest at a speed.

    Ties: the fastest point goes to the cheaper of equally fast points; the cheapest point is the fastest of the points
    costing within the budget tolerance of the least cost (``within_budget(cost, least)``), the rule the MIP applies
    with a second query (queries.solve_cheapest)."""
    speed = 1.0 / pts.time_per_token_s
    if kind == "fastest":
        ok = np.ones(len(pts.batch), bool) if target is None else within_budget(pts.usd_per_mtok, target)
    else:
        ok = np.ones(len(pts.batch), bool) if target is None else meets_speed(speed, target)
    cand = np.flatnonzero(ok)
    if not len(cand):
        return None
    if kind != "fastest":
        cand = cand[within_budget(pts.usd_per_mtok[cand], float(pts.usd_per_mtok[cand].min()))]
    order = np.lexsort((pts.usd_per_mtok[cand], pts.time_per_token_s[cand]))
    return int(cand[order[0]])


def enumerate_best(question: Question, kind: str, target: float | None, pts: Points | None = None) -> Answer | None:
    """The oracle's answer (re-evaluated like every answer), or None when nothing meets the target."""
    pts = feasible_points(question) if pts is None else pts
    i = best_point(pts, kind, target)
    return None if i is None else reevaluate(question, _setup(question, pts, i), "enumerate")
