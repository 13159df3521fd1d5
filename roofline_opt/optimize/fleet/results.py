"""A fleet plan as printable figures: every chosen instance re-evaluated by the evaluator, then rows and summaries.

Per model the load is spread over its instances in proportion to their capacity, so every instance of a model runs
at the same utilisation = served / capacity. Capacity is replicas x throughput at the planned batch; the TPOT shown
is the one at that batch (the fully loaded instance), so it is the worst a request sees. With a percentile an
aggregated row's TTFT and TPOT are at that percentile under arrivals at its batch's load (``results.reevaluate``).

A disaggregated model has a prefill row (its pool: instances, the batch, requests/s per instance, the TTFT at the
plan's load: at the model's percentile from the queueing model, else of an idle pool) and decode rows; it serves
min(u x decode capacity, u x prefill capacity, demand), and each pool's utilisation is that over its own capacity.
Rows and model summaries then carry ``serving`` and ``role`` and the summaries the xPyD counts under the names of
single-model answers (prefill_instances, decode_instances, prefill_gpu, prefill_layout, prefill_batch).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from roofline_opt.optimize.fleet import kv
from roofline_opt.optimize.fleet.candidates import AGG, CANDIDATE_ORDER, DECODE, PREFILL, Candidate
from roofline_opt.optimize.fleet.placement import PlacedInstance
from roofline_opt.optimize.fleet.problem import Fleet
from roofline_opt.optimize.layout_record import layout_label, ordered_fields
from roofline_opt.optimize.results import Setup, _bottleneck, reevaluate
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics import requests as rq
from roofline_opt.physics import tpot_percentiles as tq

LIMIT_RTOL = 1e-9


@dataclass(frozen=True)
class FleetPlan:
    """The answer: one row per (period, model, layout), model and cluster summaries, placement, solve report."""

    rows: list[dict]
    models: list[dict]
    cluster: dict
    placement: list[list[dict]]
    solve: dict
    baseline: dict | None = field(default=None)

    @property
    def usd_per_hour(self) -> float:
        return self.cluster["usd_per_hour"]

    def to_record(self) -> dict:
        return {
            "rows": self.rows,
            "models": self.models,
            "cluster": self.cluster,
            "placement": self.placement,
            "solve": self.solve,
            "baseline": self.baseline,
        }

    def with_baseline(self, baseline: dict | None) -> FleetPlan:
        return replace(self, baseline=baseline)


def exact_figures(fleet: Fleet, c: Candidate) -> dict:
    """The evaluator's figures of candidate ``c`` at its batch (the only source of printed numbers)."""
    if c.role == DECODE:
        return _decode_figures(fleet, c)
    if c.role == PREFILL:
        return _prefill_figures(fleet, c)
    q = fleet.models[c.model].question
    setup = Setup(
        gpu=c.gpu,
        weight_bits=c.weight_bits,
        tp=c.tp,
        tp_2d=c.tp_2d,
        pp=c.pp,
        ep=c.ep,
        batch=c.batch,
        gamma=c.gamma,
        kv_bits=c.kv_bits,
        chunk_tokens=c.chunk_tokens,
        dp_attention=c.dp_attention,
    )
    answer = reevaluate(q, setup, "fleet")
    fm = fleet.models[c.model]
    figures = dict(answer.figures)
    if fm.tpot_percentile is not None:
        figures["tpot_at_percentile_s"] = figures["tpot_s"]
    limit, limited = fm.max_time_per_token_s, figures.get("tpot_at_percentile_s", figures["time_per_token_s"])
    meets = answer.fits_in_memory and (limit is None or limited <= limit * (1 + LIMIT_RTOL))
    if q.workload is not None:
        ttft = figures["ttft_s"]
        meets = meets and (q.max_ttft_s is None or ttft <= q.max_ttft_s * (1 + LIMIT_RTOL))
    return {
        **figures,
        "bottleneck": answer.bottleneck,
        "fits_in_memory": answer.fits_in_memory,
        "meets_limits": bool(meets),
    }


def _decode_figures(fleet: Fleet, c: Candidate) -> dict:
    """A decode instance of a disaggregated model: its steps without prefill load (``requests.tpot_step``)."""
    fm = fleet.models[c.model]
    q = fm.question
    gpu = fleet.pool.gpu(c.gpu)
    layout = ev.Layout.of(c.tp, c.tp_2d, c.pp, q.context, 1, c.ep, c.kv_bits, dp_attention=c.dp_attention)
    args = (q.model, gpu, q.preset, c.weight_bits, layout, float(c.batch))
    spec = None if q.draft is None or c.gamma == 0 else rq.Speculation(q.draft, float(c.gamma), q.acceptance)
    step = rq.tpot_step(*args, q.whole_requests, 0.0, 0.0, spec)
    fits = bool(np.asarray(rq.aggregated_memory(*args, q.whole_requests, 0.0, spec).fits))
    tpot = float(np.asarray(step.step_time_s))
    parts = {k: float(np.asarray(getattr(step, k))) for k in ("network_s", "memory_s", "compute_s")}
    limited, limit = tpot, fm.max_time_per_token_s
    out = {
        "time_per_token_s": tpot,
        "tok_s_per_request": 1.0 / tpot,
        "throughput_tok_s": c.batch / tpot,
        "usd_per_mtok": float(rq.usd_per_mtok(c.n_gpus, gpu.usd_per_s, tpot, c.batch)),
        "bottleneck": _bottleneck(parts),
        "fits_in_memory": fits,
    }
    if fm.tpot_percentile is not None:
        percentile = fm.tpot_percentile
        limited = float(tq.decode_percentile_tpot_s(percentile, *args, q.whole_requests, q.arrival_scv, spec))
        out["tpot_at_percentile_s"] = limited
    out["meets_limits"] = fits and (limit is None or limited <= limit * (1 + LIMIT_RTOL))
    return out


def _prefill_figures(fleet: Fleet, c: Candidate) -> dict:
    """A prefill instance of a disaggregated model at its batch, sending to its decode accelerator: requests/s, the
    TTFT of an idle pool (``requests.prefill_figures``) and its step's bottleneck."""
    q = fleet.models[c.model].question
    gpu = fleet.pool.gpu(c.gpu)
    partner = fleet.pool.kv_partners[c.gpu, c.decode_gpu]
    layout = kv.prefill_layout_of(c.tp, c.tp_2d, c.pp, c.kv_bits)
    bandwidth, hop = kv.link(gpu, partner)
    args = (q.model, gpu, q.preset, c.weight_bits, layout, float(c.batch))
    fig = rq.prefill_figures(*args, q.whole_requests, bandwidth, hop, kv.prefill_draft(q))
    step = rq.prefill_step(*args, q.whole_requests.max_isl)
    parts = {k: float(np.asarray(getattr(step, k))) for k in ("network_s", "memory_s", "compute_s")}
    requests_per_s = float(np.asarray(fig["requests_per_s"]))
    throughput = requests_per_s * q.whole_requests.mean_osl
    return {
        "requests_per_s": requests_per_s,
        "throughput_tok_s": throughput,
        "ttft_s": float(np.asarray(fig["ttft_s"])),
        "kv_link_bytes_per_s": bandwidth,
        "usd_per_mtok": 1e6 * c.n_gpus * gpu.usd_per_s / throughput,
        "bottleneck": _bottleneck(parts),
        "fits_in_memory": bool(np.asarray(fig["fits_in_memory"])),
    }


def _pool_ttft(fleet: Fleet, c: Candidate, f: dict, instances: int, served_tok_s: float) -> tuple[float, bool]:
    """TTFT of ``instances`` copies of prefill candidate ``c`` serving ``served_tok_s`` (at the model's percentile
    from the queueing model, else of an idle pool) and whether every limit holds."""
    fm = fleet.models[c.model]
    q = fm.question
    ttft = f["ttft_s"]
    if fm.percentile is not None:
        gpu = fleet.pool.gpu(c.gpu)
        layout = kv.prefill_layout_of(c.tp, c.tp_2d, c.pp, c.kv_bits)
        rate = served_tok_s / q.whole_requests.mean_osl
        partner = fleet.pool.kv_partners[c.gpu, c.decode_gpu]
        ttft = float(kv.percentile_ttft_s(q, gpu, c.weight_bits, layout, partner, instances, rate))
    within = q.max_ttft_s is None or ttft <= q.max_ttft_s * (1 + LIMIT_RTOL)
    carried = fleet.max_utilisation * instances * f["throughput_tok_s"] >= served_tok_s * (1 - LIMIT_RTOL)
    return ttft, bool(f["fits_in_memory"] and within and carried)


def gpu_prices(fleet: Fleet, usage: Sequence[Mapping[str, int]], split: Mapping[str, tuple] | None) -> dict[str, float]:
    """$ per used GPU-hour per type: the catalog price, or with a profile the day's cost of the type (idle reserved
    GPUs included) over the GPU-hours its instances used."""
    pool = fleet.pool
    if split is None:
        return {g.name: g.usd_per_hour for g in pool.gpus}
    prices = {}
    for g in pool.gpus:
        reserved, on_demand = split[g.name]
        paid = len(usage) * pool.reserved_usd_per_hour[g.name] * reserved
        paid += pool.on_demand_usd_per_hour[g.name] * sum(on_demand)
        used = sum(u.get(g.name, 0) for u in usage)
        prices[g.name] = paid / used if used else 0.0
    return prices


def build_plan(
    fleet: Fleet,
    cands: Sequence[Candidate],
    replicas: Sequence[Mapping[int, int]],
    placement: Sequence[Sequence[PlacedInstance]],
    split: Mapping[str, tuple[int, list[int]]] | None,
    solve: dict,
) -> FleetPlan:
    """Rows and summaries of a decoded plan; ``replicas[t][k]`` per period, ``split`` = (reserved, on-demand list)."""
    figures = {k: exact_figures(fleet, cands[k]) for counts in replicas for k in counts}
    usage = [
        {g.name: sum(cands[k].n_gpus * n for k, n in counts.items() if cands[k].gpu == g.name) for g in fleet.pool.gpus}
        for counts in replicas
    ]
    price = gpu_prices(fleet, usage, split)
    rows, models = [], []
    u = fleet.max_utilisation
    pooled = any(fm.disaggregated for fm in fleet.models)
    for i, fm in enumerate(fleet.models):
        served_total = spend_total = gpu_hours = 0.0
        pools: list[dict] = []
        for t, counts in enumerate(replicas):
            mine = {k: n for k, n in counts.items() if cands[k].model == i and n > 0}
            capacity = {
                role: sum(n * figures[k]["throughput_tok_s"] for k, n in mine.items() if cands[k].role == role)
                for role in dict.fromkeys(cands[k].role for k in mine)
            }
            served = min([fm.demand_tok_s[t], *(u * cap for cap in capacity.values())]) if capacity else 0.0
            if t == 0:
                pools.append(_pool_summary(fleet, cands, mine, figures, served) if fm.disaggregated else {})
            for k, n in sorted(mine.items(), key=lambda item: (cands[item[0]].role != PREFILL, item[0])):
                cap = capacity[cands[k].role]
                f = figures[k]
                if cands[k].role == PREFILL:
                    ttft, meets = _pool_ttft(fleet, cands[k], f, n, served)
                    f = {**f, "ttft_s": ttft, "meets_limits": meets}
                row = _row(fleet, i, t, cands[k], n, f, served / cap if cap else 0.0, price[cands[k].gpu])
                rows.append(_with_roles(row, fm, cands[k]) if pooled else row)
            served_total += served * fleet.period_hours
            spend = sum(n * cands[k].n_gpus * price[cands[k].gpu] for k, n in mine.items())
            spend_total += spend * fleet.period_hours
            gpu_hours += sum(n * cands[k].n_gpus for k, n in mine.items()) * fleet.period_hours
        summary = _model_summary(fleet, i, served_total, spend_total, gpu_hours)
        models.append({**summary, **_pool_fields(fm, pools[0] if pools else {})} if pooled else summary)
    return FleetPlan(
        rows,
        models,
        _cluster(fleet, usage, placement, split, price),
        [[p.to_dict() for p in period] for period in placement],
        solve,
    )


CANDIDATE_ONLY = ("model", "time_per_token_s", "usd_per_hour", "role", "decode_gpu", "ttft_s")
"""Candidate fields that are not row columns (the roles go in only for fleets with pools, ``_with_roles``)."""


def _tpot_ms(figures: dict) -> float | None:
    """A row's TPOT: at the model's percentile where its limit holds there (at the instance's batch), else the
    steady-state time per token (None for a prefill instance)."""
    tpot = figures.get("tpot_at_percentile_s", figures.get("time_per_token_s"))
    return None if tpot is None else tpot * 1e3


def _row(fleet: Fleet, i: int, t: int, c: Candidate, n: int, f: dict, util: float, gpu_price: float) -> dict:
    fm = fleet.models[i]
    capacity = n * f["throughput_tok_s"]
    served = util * capacity
    usd_per_hour = n * c.n_gpus * gpu_price
    row = {"period": t, "model": fm.name, "model_spec": fm.question.model.name}
    row.update({k: v for k, v in ordered_fields(c, CANDIDATE_ORDER).items() if k not in CANDIDATE_ONLY})
    row.update(
        replicas=n,
        n_gpus=c.n_gpus,
        total_gpus=n * c.n_gpus,
        tok_s_per_request=f.get("tok_s_per_request"),
        tpot_ms=_tpot_ms(f),
        ttft_ms=f["ttft_s"] * 1e3 if "ttft_s" in f else None,
        prefill_utilisation=f.get("prefill_utilisation"),
        throughput_tok_s_per_instance=f["throughput_tok_s"],
        capacity_tok_s=capacity,
        served_tok_s=served,
        served_req_s=served / fm.tok_per_request if fm.tok_per_request else None,
        utilisation=util,
        usd_per_gpu_hour=gpu_price,
        usd_per_hour=usd_per_hour,
        effective_usd_per_mtok=usd_per_hour / (served * 3600 / 1e6) if served > 0 else None,
        busy_usd_per_mtok=f["usd_per_mtok"],
        bottleneck=f["bottleneck"],
        fits_in_memory=f["fits_in_memory"],
        meets_limits=f["meets_limits"],
    )
    return row


def _with_roles(row: dict, fm, c: Candidate) -> dict:
    """A row of a fleet with pools: its serving mode and role, a prefill row's requests/s and KV link too."""
    serving = rq.DISAGG if fm.disaggregated else rq.AGG
    out = {**row, "serving": serving, "role": c.role if c.role != AGG else serving}
    out["decode_gpu"] = c.decode_gpu or None
    return out


def _pool_summary(fleet: Fleet, cands: Sequence[Candidate], mine: Mapping[int, int], figures, served: float) -> dict:
    """The xPyD counts of a disaggregated model in period 0, named as in single-model answers."""
    prefill = [k for k in mine if cands[k].role == PREFILL]
    decode = [k for k in mine if cands[k].role == DECODE]
    out: dict = {"prefill_instances": sum(mine[k] for k in prefill), "decode_instances": sum(mine[k] for k in decode)}
    if prefill:
        c = cands[prefill[0]]
        ttft, _ = _pool_ttft(fleet, c, figures[prefill[0]], mine[prefill[0]], served)
        out.update(
            prefill_gpu=c.gpu,
            prefill_layout=layout_label(c.tp, c.tp_2d, c.pp),
            prefill_batch=c.batch,
            ttft_ms=ttft * 1e3,
        )
    if decode:
        out["decode_gpu"] = cands[decode[0]].gpu
    return out


POOL_FIELDS = (
    "serving",
    "prefill_instances",
    "decode_instances",
    "prefill_gpu",
    "prefill_layout",
    "prefill_batch",
    "decode_gpu",
    "ttft_ms",
)


def _pool_fields(fm, pool: dict) -> dict:
    """Model-summary fields of a fleet with pools (None where they do not apply)."""
    out = dict.fromkeys(POOL_FIELDS)
    out["serving"] = rq.DISAGG if fm.disaggregated else rq.AGG
    if fm.disaggregated:
        out.update(pool)
    return out


def _model_summary(fleet: Fleet, i: int, served_tok: float, spend: float, gpu_hours: float) -> dict:
    fm = fleet.models[i]
    hours = fleet.period_hours * fleet.periods
    demand = sum(fm.demand_tok_s) * fleet.period_hours
    return {
        "model": fm.name,
        "model_spec": fm.question.model.name,
        "demand_tok_s": demand / hours,
        "served_tok_s": served_tok / hours,
        "served_share": served_tok / demand if demand else 1.0,
        "mean_osl_tokens": None if fm.question.workload is None else fm.question.workload.mean_osl,
        "served_req_s": served_tok / hours / fm.tok_per_request if fm.tok_per_request else None,
        "tpot_limit_ms": None if fm.max_time_per_token_s is None else fm.max_time_per_token_s * 1e3,
        "ttft_limit_ms": None if fm.question.max_ttft_s is None else fm.question.max_ttft_s * 1e3,
        "ttft_percentile": fm.percentile,
        "tpot_percentile": fm.tpot_percentile,
        "gpus": gpu_hours / hours,
        "usd_per_hour": spend / hours,
        "effective_usd_per_mtok": spend / (served_tok * 3600 / 1e6) if served_tok > 0 else None,
    }


def _cluster(fleet: Fleet, usage, placement, split, price) -> dict:
    pool = fleet.pool
    hours = fleet.period_hours * fleet.periods
    spend = sum(price[g] * n * fleet.period_hours for u in usage for g, n in u.items())
    out = {
        "name": pool.cluster_name,
        "gpus_available": {g: n for g, n in pool.counts.items()},
        "gpus_used": {g: max(u[g] for u in usage) for g in usage[0]},
        "usd_per_hour": spend / hours,
        "usd_total": spend,
        "periods": fleet.periods,
    }
    if split is not None:
        out["reserved_gpus"] = {g: r for g, (r, _) in split.items()}
        out["on_demand_gpus"] = {g: list(o) for g, (_, o) in split.items()}
        out["gpus_used_per_period"] = [dict(u) for u in usage]
    if pool.has_graph and placement:
        home = {g: d for d, dom in enumerate(pool.domains) for g in dom.gpu_ids}
        used = dict.fromkeys(range(len(pool.domains)), 0)
        for inst in placement[0]:
            for stage in inst.stages:
                used[home[stage[0]]] += len(stage)
        out["gpus_used_per_domain"] = {f"{pool.domains[d].gpu}:{d}": n for d, n in used.items()}
        histogram: dict[str, int] = {}
        for d, n in sorted(used.items(), key=lambda item: -item[1]):
            key = f"{n}/{pool.domains[d].size} {pool.domains[d].gpu}"
            histogram[key] = histogram.get(key, 0) + 1
        out["domains_by_gpus_used"] = histogram
    return out
