"""Disaggregated pools in fleets: the MIP against brute force (fixed and random small fleets), every pool re-checked
with the evaluator and the queueing model, the KV transfer's path and link on the graph, bad input named."""

from __future__ import annotations

import json
import random

import networkx as nx
import numpy as np
import pandas as pd
import pytest
from fleet_cases import OPTIONS, fleet_of, solved

from roofline_opt import topology
from roofline_opt.cli import main
from roofline_opt.errors import Infeasible, InvalidInput
from roofline_opt.optimize.fleet import kv as fleet_kv
from roofline_opt.optimize.fleet import plan as plan_mod
from roofline_opt.optimize.fleet import plan_fleet
from roofline_opt.optimize.fleet.placement import PlacedInstance, kv_path_problems
from roofline_opt.optimize.fleet.results import exact_figures
from roofline_opt.optimize.testing import assert_same_fleet_optimum
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics import queueing
from roofline_opt.physics import requests as rq
from roofline_opt.physics import tpot_percentiles as tq

POD4 = "instances/clusters/pod-4x-hgx-h100.yaml"
MIXED = "instances/clusters/mixed-h100-a100.yaml"
SMALL = {"tp_degrees": [1, 2, 4, 8], "pp_degrees": [1, 2], "tp_modes": ["1d"], "max_batch": 512}


def _pooled(name: str, model: str, req_s: float, tpot: float, ttft: float, **extra) -> dict:
    """A disaggregated model entry of the small search space (2,000 / 400 tokens per request)."""
    entry = {"name": name, "model": model, "serving": "disagg", "demand_req_s": req_s, "isl": 2000, "osl": 400}
    return {**entry, "tpot_ms": tpot, "ttft_ms": ttft, **SMALL, **extra}


def _agg(name: str, model: str, tok_s: float | None, tpot: float, **extra) -> dict:
    """An aggregated model entry; ``tok_s`` None when the entry gives demand_req_s."""
    demand = {} if tok_s is None else {"demand_tok_s": tok_s}
    return {"name": name, "model": model, "tpot_ms": tpot, **demand, **SMALL, **extra}


FLEETS = {
    "pools beside an aggregated model on 4 servers": {
        "cluster": POD4,
        "models": [_pooled("chat", "llama-3-70b", 6, 40, 600, weight_bits=[8]), _agg("code", "llama-3-8b", 9000, 25)],
    },
    "p90 TTFT pools for two models": {
        "cluster": POD4,
        "models": [
            _pooled("chat", "llama-3-70b", 5, 45, 500, weight_bits=[8], percentile=90),
            _pooled("rag", "llama-3-8b", 30, 25, 150, percentile=90),
        ],
    },
    "p99 pools, prefill on A100 and decode on H100, by count": {
        "gpus": {"h100-sxm": 8, "a100-80gb": 8},
        "max_utilisation": 0.9,
        "models": [
            _pooled("chat", "llama-3-8b", 20, 25, 400, prefill_gpu="a100-80gb", decode_gpu="h100-sxm", percentile=99),
            _agg("code", "llama-3-8b", 6000, 25),
        ],
    },
    "p90 TPOT pools (no TTFT limit) beside an aggregated model": {
        "gpus": {"h100-sxm": 16},
        "models": [
            {k: v for k, v in _pooled("chat", "llama-3-8b", 30, 20, 0, percentile=90).items() if k != "ttft_ms"},
            _agg("code", "llama-3-8b", 6000, 25),
        ],
    },
    "prefill and decode types on a mixed cluster": {
        "cluster": MIXED,
        "models": [_pooled("chat", "llama-3-8b", 15, 30, 300, prefill_gpu=["a100-80gb", "h100-sxm"])],
    },
    "a cached prompt prefix in both serving modes": {
        "gpus": {"h100-sxm": 16},
        "models": [
            _pooled("chat", "llama-3-8b", 25, 30, 200, prefix_tokens=1500, prefix_hit_rate=0.8, percentile=90),
            {**_agg("rag", "llama-3-8b", None, 30, isl=4000, osl=200, prefix_tokens=3000), "demand_req_s": 10},
        ],
    },
    "served within a budget with pools": {
        "cluster": POD4,
        "objective": "served",
        "max_usd_per_hour": 14,
        "models": [
            {**_pooled("chat", "llama-3-70b", 8, 40, 800, weight_bits=[8]), "weight": 2.0},
            _agg("code", "llama-3-8b", 12000, 20),
        ],
    },
}


@pytest.fixture(scope="module")
def plans() -> dict:
    return solved(FLEETS, exact_placement=True)


def _assert_equal(spec, mip, exact, brute) -> None:
    for plan in (mip, exact):
        assert_same_fleet_optimum(spec, plan, brute)


@pytest.mark.parametrize("key", list(FLEETS))
def test_the_mip_equals_brute_force_with_pools(plans, key) -> None:
    _assert_equal(*plans[key])


def _random_fleet(seed: int) -> dict:
    """One or two models, each pooled or aggregated, with demands and limits drawn at random; 8 to 16 GPUs."""
    rng = random.Random(seed)
    models = []
    for i in range(rng.choice([1, 2])):
        name, model = rng.choice([("a", "llama-3-8b"), ("b", "llama-2-7b"), ("c", "llama-3-70b")])
        tpot = rng.choice([30, 40, 60])
        bits = {"weight_bits": [8]} if model == "llama-3-70b" else {}
        if i == 0 or rng.random() < 0.5:
            extra = {"percentile": rng.choice([50, 90, 99])} if rng.random() < 0.5 else {}
            req_s = rng.uniform(1, 4) if model == "llama-3-70b" else rng.uniform(3, 25)
            models.append(
                _pooled(f"{name}{i}", model, round(req_s, 2), tpot, rng.choice([300, 600, 1200]), **bits, **extra)
            )
        else:
            models.append(_agg(f"{name}{i}", model, rng.choice([1000, 3000, 6000]), tpot, **bits))
    top = {"max_utilisation": rng.choice([1.0, 0.85])}
    if rng.random() < 0.5:
        return {"cluster": "instances/clusters/hgx-h100.yaml", "models": models, **top}
    return {"gpus": {"h100-sxm": rng.choice([8, 12, 16])}, "models": models, **top}


@pytest.mark.parametrize("seed", range(6))
def test_the_mip_equals_brute_force_on_random_small_fleets_with_pools(seed) -> None:
    _assert_equal(*solved({"random": _random_fleet(seed)}, exact_placement=True)["random"])


def _prefill_check(spec, fm, row, instances: int) -> tuple[float, float]:
    """(TTFT the row should report, requests/s per instance), computed here from requests and queueing."""
    q = fm.question
    gpu = spec.pool.gpu(row["gpu"])
    partner = spec.pool.kv_partners[row["gpu"], row["decode_gpu"]]
    layout = ev.Layout.of(row["tp"], row["tp_2d"], row["pp"], 0.0, 1.0, 1.0, row["kv_bits"])
    link = rq.kv_link_bytes_per_s(gpu, partner, False)
    hop = max(gpu.inter_hop_latency_s, partner.inter_hop_latency_s)
    args = (q.model, gpu, q.preset, row["weight_bits"], layout, float(row["batch"]))
    fig = rq.prefill_figures(*args, q.workload, link, hop)
    assert bool(np.asarray(fig["fits_in_memory"]))
    if fm.percentile is None:
        return float(fig["ttft_s"]), float(fig["requests_per_s"])
    pool = (gpu, layout, instances)
    arrivals = queueing.Arrivals(row["served_req_s"])
    out = queueing.disaggregated_ttft(
        q.model, q.preset, row["weight_bits"], q.workload, pool, (partner, layout), arrivals, (fm.percentile,)
    )
    return float(out["ttft_s"][0]), float(fig["requests_per_s"])


@pytest.mark.parametrize("key", list(FLEETS))
def test_every_pool_re_evaluated_meets_its_limits_and_carries_the_demand(plans, key) -> None:
    spec, mip, _, _ = plans[key]
    by_name = {m.name: m for m in spec.models}
    u = spec.max_utilisation
    for row in mip.rows:
        fm = by_name[row["model"]]
        assert row["meets_limits"]
        if row["role"] == "prefill":
            ttft, per_instance = _prefill_check(spec, fm, row, row["replicas"])
            assert fm.question.max_ttft_s is None or ttft <= fm.question.max_ttft_s * (1 + 1e-9)
            assert row["ttft_ms"] == pytest.approx(ttft * 1e3, rel=1e-9)
            assert row["served_req_s"] <= u * row["replicas"] * per_instance * (1 + 1e-9)
        elif row["role"] == "decode":
            q = fm.question
            gpu = spec.pool.gpu(row["gpu"])
            layout = ev.Layout.of(row["tp"], row["tp_2d"], row["pp"], q.context, 1, row["ep"], row["kv_bits"])
            args = (q.model, gpu, q.preset, row["weight_bits"], layout, float(row["batch"]))
            tpot = float(rq.tpot_step(*args, q.workload, 0.0, 0.0).step_time_s)
            if fm.tpot_percentile is not None:  # the limit holds at the percentile, and the row reports it
                tpot = float(tq.decode_percentile_tpot_s(fm.tpot_percentile, *args, q.workload, q.arrival_scv))
                assert tpot > float(rq.tpot_step(*args, q.workload, 0.0, 0.0).step_time_s)
            assert bool(np.asarray(rq.aggregated_memory(*args, q.workload, 0.0).fits))
            assert tpot <= fm.max_time_per_token_s * (1 + 1e-9)
            assert row["tpot_ms"] == pytest.approx(tpot * 1e3, rel=1e-12)
        assert row["utilisation"] <= u + 1e-12
    if spec.objective == "cost":
        for summary in mip.models:
            assert summary["served_tok_s"] == pytest.approx(summary["demand_tok_s"], rel=1e-12)


def test_a_tpot_percentile_sizes_a_pools_decode_instances_below_the_mean_limits_batch(plans) -> None:
    """The same pool with its TPOT limit on the mean plans larger decode batches: the percentile is what the decode
    window's spread adds."""
    key = "p90 TPOT pools (no TTFT limit) beside an aggregated model"
    spec, mip, _, _ = plans[key]
    assert spec.models[0].tpot_percentile == 90 and spec.models[0].percentile is None
    data = FLEETS[key]
    mean_only = {
        **data,
        "models": [{k: v for k, v in data["models"][0].items() if k != "percentile"}, data["models"][1]],
    }
    mean_plan = plan_fleet(fleet_of(mean_only), "mip", OPTIONS)

    def decode_batches(plan):
        return [r["batch"] for r in plan.rows if r["model"] == "chat" and r["role"] == "decode"]

    assert max(decode_batches(mip)) < max(decode_batches(mean_plan))
    assert mip.usd_per_hour >= mean_plan.usd_per_hour * (1 - 1e-9)


@pytest.mark.parametrize("key", [k for k in FLEETS if "cluster" in FLEETS[k]])
def test_pool_instances_are_placed_with_a_path_for_the_kv_transfer(plans, key) -> None:
    spec, mip, exact, brute = plans[key]
    cluster = spec.pool.cluster
    component = {n: i for i, comp in enumerate(nx.connected_components(cluster)) for n in comp}
    for plan in (mip, exact, brute):
        placed = plan.placement[0]
        counts = {}
        for inst in placed:
            role = inst.get("role", "agg")
            counts[inst["model"], role] = counts.get((inst["model"], role), 0) + 1
        for row in plan.rows:
            assert counts[row["model"], row["role"]] >= row["replicas"]
        for inst in (p for p in placed if p.get("role") == "prefill"):
            decode = [p for p in placed if p["model"] == inst["model"] and p.get("role") == "decode"]
            home = component[inst["stages"][0][0]]
            assert any(component[d["stages"][0][0]] == home for d in decode)


def test_summaries_name_the_pools_as_single_model_answers_do(plans) -> None:
    spec, mip, _, _ = plans["pools beside an aggregated model on 4 servers"]
    chat, code = mip.models
    rows = [r for r in mip.rows if r["model"] == "chat"]
    prefill = next(r for r in rows if r["role"] == "prefill")
    assert chat["serving"] == "disagg" and code["serving"] == "agg"
    assert chat["prefill_instances"] == prefill["replicas"]
    assert chat["decode_instances"] == sum(r["replicas"] for r in rows if r["role"] == "decode")
    assert chat["prefill_gpu"] == prefill["gpu"]
    assert chat["prefill_layout"] == f"tp{prefill['tp']}pp{prefill['pp']}"
    assert chat["prefill_batch"] == prefill["batch"]
    assert {r["serving"] for r in mip.rows if r["model"] == "code"} == {"agg"}
    names = [p["instance"] for p in mip.placement[0] if p["model"] == "chat"]
    assert all(n.startswith(("chat:prefill#", "chat:decode#")) for n in names)


def test_a_percentile_limit_needs_at_least_the_prefill_instances_of_an_idle_limit() -> None:
    base = _pooled("chat", "llama-3-8b", 40, 30, 250, tp_degrees=[1], pp_degrees=[1])
    counts = []
    for extra in ({}, {"percentile": 50}, {"percentile": 90}, {"percentile": 99}):
        spec = fleet_of({"gpus": {"h100-sxm": 64}, "models": [{**base, **extra}]})
        plan = plan_fleet(spec, "mip", OPTIONS)
        counts.append(plan.models[0]["prefill_instances"])
    assert counts[1] <= counts[2] <= counts[3]
    assert counts[3] > counts[0]


def test_bursty_arrivals_need_at_least_the_prefill_instances_of_poisson_ones() -> None:
    base = _pooled("chat", "llama-3-8b", 40, 30, 120, tp_degrees=[1], pp_degrees=[1], percentile=90)
    counts = []
    for burstiness in (0, 1, 4):
        spec = fleet_of({"gpus": {"h100-sxm": 64}, "models": [{**base, "burstiness": burstiness}]})
        assert spec.models[0].question.arrival_scv == burstiness
        counts.append(plan_fleet(spec, "mip", OPTIONS).models[0]["prefill_instances"])
    assert counts[0] <= counts[1] < counts[2]


def test_the_kv_link_comes_from_the_graph() -> None:
    cluster = topology.load_cluster(MIXED)
    spec = fleet_of({"cluster": MIXED, "models": [FLEETS["prefill and decode types on a mixed cluster"]["models"][0]]})
    a100, h100 = spec.pool.gpu("a100-80gb"), spec.pool.gpu("h100-sxm")
    partner = fleet_kv.kv_partner(a100, h100, cluster)
    ids = topology.gpu_ids(cluster, "a100-80gb") + topology.gpu_ids(cluster, "h100-sxm")
    f = topology.collective_figures(cluster, ids)
    assert partner.inter_bytes_per_s == pytest.approx(0.5 * f.inter_link_bytes_per_s)
    bandwidth, hop = fleet_kv.link(a100, partner)
    assert bandwidth == pytest.approx(
        ev.POINT_TO_POINT_LINK_FACTOR * min(a100.inter_bytes_per_s, partner.inter_bytes_per_s)
    )
    assert hop >= f.inter_latency_s
    assert spec.pool.kv_partners["a100-80gb", "h100-sxm"] == partner


def test_a_prefill_instance_without_a_path_to_its_decode_instances_is_named() -> None:
    cluster = nx.Graph()
    for g in ("a0", "b0"):
        cluster.add_node(g, kind="gpu", gpu="h100-sxm")
    prefill = PlacedInstance("m:prefill#1", "m", 0, "h100-sxm", 1, 1, (("a0",),), "prefill")
    decode = PlacedInstance("m:decode#1", "m", 1, "h100-sxm", 1, 1, (("b0",),), "decode")
    assert kv_path_problems(cluster, [prefill, decode]) == [
        "m:prefill#1: no path to a decode instance of m for the KV transfer"
    ]
    cluster.add_edge("a0", "b0")
    assert kv_path_problems(cluster, [prefill, decode]) == []


BAD = [
    ({"prefill_gpu": "h100-sxm", "serving": "agg"}, "models[0].prefill_gpu"),
    ({"decode_gpu": "h100-sxm", "serving": "agg", "percentile": 90}, "models[0].decode_gpu"),
    ({"percentile": 95}, "models[0].percentile"),
    ({"percentile": 95, "serving": "agg"}, "models[0].percentile"),
    ({"serving": "both"}, "models[0].serving"),
    ({"burstiness": 2}, "models[0].burstiness"),
    ({"burstiness": 2, "serving": "agg"}, "models[0].burstiness"),
]


@pytest.mark.parametrize(("change", "field"), BAD)
def test_bad_pool_input_names_the_field(change, field) -> None:
    entry = {**_pooled("chat", "llama-3-8b", 5, 30, 300), **change}
    with pytest.raises(InvalidInput) as err:
        fleet_of({"gpus": {"h100-sxm": 8}, "models": [entry]})
    assert err.value.field == field


def test_a_percentile_needs_a_ttft_or_tpot_limit_and_a_ttft_percentile_objective_cost() -> None:
    limits = ("ttft_ms", "tpot_ms")
    entry = {k: v for k, v in _pooled("chat", "llama-3-8b", 5, 30, 300, percentile=90).items() if k not in limits}
    with pytest.raises(InvalidInput, match="give ttft_ms or tpot_ms"):
        fleet_of({"gpus": {"h100-sxm": 8}, "models": [entry]})
    served = {
        "gpus": {"h100-sxm": 8},
        "objective": "served",
        "models": [_pooled("c", "llama-3-8b", 5, 30, 300, percentile=90)],
    }
    with pytest.raises(InvalidInput, match="objective cost"):
        fleet_of(served)


def test_every_candidate_is_priced_as_it_is_re_evaluated_data_parallel_attention_included() -> None:
    space = {"weight_bits": [8], "tp_degrees": [8], "pp_degrees": [1], "max_batch": 1024, "isl": 1000, "osl": 500}
    moe = {**_pooled("moe", "mixtral-8x22b", 20, 50, 1500), **space}
    agg = {**_agg("moe-agg", "mixtral-8x22b", 20000, 50), **space}
    spec = fleet_of({"gpus": {"h100-sxm": 64}, "models": [moe, agg]})
    cands, _ = plan_mod.fleet_candidates(spec)
    assert {c.role for c in cands if c.dp_attention} == {"decode", "agg"}
    for c in cands:
        assert exact_figures(spec, c)["throughput_tok_s"] == pytest.approx(c.throughput_tok_s, rel=1e-12)


POOLS_EXAMPLE = "instances/fleets/disagg-pools.yaml"


def test_plan_names_the_pools_alike_in_json_csv_and_the_table(tmp_path, capsys) -> None:
    csv = tmp_path / "plan.csv"
    assert main(["plan", POOLS_EXAMPLE, "--json", "--csv", str(csv)]) == 0
    record = json.loads(capsys.readouterr().out)
    chat = next(m for m in record["models"] if m["model"] == "chat")
    assert chat["serving"] == "disagg" and chat["ttft_percentile"] == 90
    assert chat["prefill_instances"] >= 1 and chat["decode_instances"] >= 1
    roles = {(r["model"], r["role"]) for r in record["rows"]}
    assert roles == {("chat", "prefill"), ("chat", "decode"), ("code", "agg")}
    frame = pd.read_csv(csv)
    assert {"serving", "role", "decode_gpu"} <= set(frame.columns)
    assert sorted(frame["role"]) == sorted(r["role"] for r in record["rows"])
    assert main(["plan", POOLS_EXAMPLE]) == 0
    text = capsys.readouterr().out
    assert "prefill_instances" in text and "chat:prefill#1" in text


def test_an_unreachable_percentile_names_the_model_and_the_idle_ttft() -> None:
    entry = _pooled("chat", "llama-3-70b", 4, 40, 30, weight_bits=[8], percentile=99)
    with pytest.raises(Infeasible, match="model chat .*ttft 30 ms at p99"):
        plan_fleet(fleet_of({"gpus": {"h100-sxm": 16}, "models": [entry]}), "mip", OPTIONS)


def test_pools_over_a_demand_profile_are_sized_per_period() -> None:
    entry = {k: v for k, v in _pooled("chat", "llama-3-8b", 1, 30, 300, percentile=90).items() if k != "demand_req_s"}
    profile = [5, 20, 40, 0, 10]
    spec = fleet_of({"gpus": {"h100-sxm": 32}, "models": [{**entry, "demand_profile": {"req_s": profile}}]})
    plan = plan_fleet(spec, "mip", OPTIONS)
    assert all(r["meets_limits"] for r in plan.rows)
    for t, demand in enumerate(profile):
        rows = [r for r in plan.rows if r["period"] == t]
        prefill = [r for r in rows if r["role"] == "prefill"]
        assert sum(r["served_req_s"] for r in rows if r["role"] == "decode") == pytest.approx(demand, rel=1e-9)
        assert len(prefill) == (1 if demand else 0)
        assert sum(r["served_req_s"] for r in prefill) == pytest.approx(demand, rel=1e-9)
    instances = [sum(r["replicas"] for r in plan.rows if r["period"] == t and r["role"] == "prefill") for t in range(5)]
    assert instances[1] <= instances[2] and instances[3] == 0
