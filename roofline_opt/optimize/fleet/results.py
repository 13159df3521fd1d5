"""A fleet plan as printable figures: every chosen instance re-evaluated by the evaluator, then rows and summaries.

Per model the load is spread over its instances in proportion to their capacity, so every instance of a model runs
at the same utilisation = served / capacity. Capacity is replicas x throughput at the planned batch; the TPOT shown
is the one at that batch (the fully loaded instance), so it is the worst a request sees.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

from roofline_opt.optimize.fleet.candidates import Candidate
from roofline_opt.optimize.fleet.placement import PlacedInstance
from roofline_opt.optimize.fleet.problem import Fleet
from roofline_opt.optimize.results import Setup, reevaluate

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
    )
    answer = reevaluate(q, setup, "fleet")
    limit, q = fleet.models[c.model].max_time_per_token_s, fleet.models[c.model].question
    meets = answer.fits_in_memory and (limit is None or answer.figures["time_per_token_s"] <= limit * (1 + LIMIT_RTOL))
    if q.workload is not None:
        ttft = answer.figures["ttft_s"]
        meets = meets and (q.max_ttft_s is None or ttft <= q.max_ttft_s * (1 + LIMIT_RTOL))
    return {
        **answer.figures,
        "bottleneck": answer.bottleneck,
        "fits_in_memory": answer.fits_in_memory,
        "meets_limits": bool(meets),
    }


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
    for i, fm in enumerate(fleet.models):
        served_total = spend_total = gpu_hours = 0.0
        for t, counts in enumerate(replicas):
            mine = {k: n for k, n in counts.items() if cands[k].model == i and n > 0}
            capacity = sum(n * figures[k]["throughput_tok_s"] for k, n in mine.items())
            served = min(fm.demand_tok_s[t], u * capacity)
            util = served / capacity if capacity else 0.0
            for k, n in sorted(mine.items()):
                rows.append(_row(fleet, i, t, cands[k], n, figures[k], util, price[cands[k].gpu]))
            served_total += served * fleet.period_hours
            spend = sum(n * cands[k].n_gpus * price[cands[k].gpu] for k, n in mine.items())
            spend_total += spend * fleet.period_hours
            gpu_hours += sum(n * cands[k].n_gpus for k, n in mine.items()) * fleet.period_hours
        models.append(_model_summary(fleet, i, served_total, spend_total, gpu_hours))
    return FleetPlan(
        rows,
        models,
        _cluster(fleet, usage, placement, split, price),
        [[p.to_dict() for p in period] for period in placement],
        solve,
    )


def _row(fleet: Fleet, i: int, t: int, c: Candidate, n: int, f: dict, util: float, gpu_price: float) -> dict:
    fm = fleet.models[i]
    capacity = n * f["throughput_tok_s"]
    served = util * capacity
    usd_per_hour = n * c.n_gpus * gpu_price
    row = {"period": t, "model": fm.name, "model_spec": fm.question.model.name}
    row.update({k: v for k, v in asdict(c).items() if k not in ("model", "time_per_token_s", "usd_per_hour")})
    row.update(
        replicas=n,
        n_gpus=c.n_gpus,
        total_gpus=n * c.n_gpus,
        tok_s_per_request=f["tok_s_per_request"],
        tpot_ms=f["time_per_token_s"] * 1e3,
        ttft_ms=f["ttft_s"] * 1e3 if "ttft_s" in f else None,
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
        "served_req_s": served_tok / hours / fm.tok_per_request if fm.tok_per_request else None,
        "tpot_limit_ms": None if fm.max_time_per_token_s is None else fm.max_time_per_token_s * 1e3,
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
