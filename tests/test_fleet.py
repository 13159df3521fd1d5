"""Fleet planning: candidates, the MIP against brute force, limits re-checked, placements checked on the graph."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from fleet_cases import OPTIONS, fleet_of, solved

from roofline_opt import topology
from roofline_opt.errors import Infeasible, InvalidInput
from roofline_opt.optimize.fleet import plan_fleet
from roofline_opt.optimize.fleet.baseline import per_model_baseline
from roofline_opt.optimize.fleet.candidates import model_candidates
from roofline_opt.optimize.fleet.enumerate import grid_candidates
from roofline_opt.optimize.fleet.placement import PlacedInstance, greedy_place, placement_problems
from roofline_opt.optimize.testing import assert_same_fleet_optimum
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics import requests as rq

POD4 = "instances/clusters/pod-4x-hgx-h100.yaml"
SMALL = {"tp_degrees": [1, 2, 4, 8], "pp_degrees": [1, 2], "tp_modes": ["1d"], "max_batch": 512}


def _model(name: str, model: str, demand: float | None, tpot: float, **extra) -> dict:
    """A model entry of the small search space; ``demand`` in tok/s (None: the entry gives demand_req_s)."""
    given = {} if demand is None else {"demand_tok_s": demand}
    return {"name": name, "model": model, "tpot_ms": tpot, **given, **SMALL, **extra}


def _fleet(models: list[dict], **top) -> dict:
    return {"cluster": POD4, "models": models, **top} if "gpus" not in top else {"models": models, **top}


FLEETS = {
    "two models on 4 servers": _fleet(
        [_model("chat", "llama-3-70b", 6000, 40, weight_bits=[16, 8]), _model("code", "llama-3-8b", 20000, 20)]
    ),
    "three models on 4 servers": _fleet(
        [
            _model("chat", "llama-3-70b", 2500, 45),
            _model("code", "llama-3-8b", 9000, 25),
            _model("small", "llama-2-7b", 3000, 30, context=2000),
        ]
    ),
    "two models on one server": {
        "cluster": "instances/clusters/hgx-h100.yaml",
        "models": [_model("chat", "llama-3-70b", 1500, 40, weight_bits=[8]), _model("code", "llama-3-8b", 6000, 25)],
    },
    "two accelerator types by count": _fleet(
        [_model("chat", "llama-3-70b", 3000, 40), _model("code", "llama-3-8b", 12000, 20)],
        gpus={"h100-sxm": 8, "a100-80gb": 16},
    ),
    "served within a budget": _fleet(
        [
            {**_model("chat", "llama-3-70b", 4000, 40), "weight": 3.0},
            _model("code", "llama-3-8b", 15000, 20),
        ],
        objective="served",
        max_usd_per_hour=20,
    ),
    "draft model and MoE by count": {
        "gpus": {"h100-sxm": 16},
        "models": [
            {
                **_model("chat", "llama-3-70b", 3000, 20, draft="llama-3-8b", gamma_max=4),
                "tp_degrees": [4, 8],
                "pp_degrees": [1],
            },
            {**_model("moe", "mixtral-8x7b", 5000, 30, ep_degrees=[1, 2]), "tp_degrees": [2, 4], "pp_degrees": [1]},
        ],
    },
    "whole requests with TTFT and KV precision": _fleet(
        [
            {
                **_model("chat", "llama-3-70b", None, 45),
                "demand_req_s": 8,
                "isl": 2000,
                "osl": 400,
                "ttft_ms": 800,
                "kv_bits": [16, 8],
                "weight_bits": [8],
            },
            {
                **_model("rag", "llama-3-8b", None, 25),
                "demand_req_s": 20,
                "isl": 6000,
                "osl": 300,
                "ttft_ms": 500,
                "chunk_tokens": [1024, 4096],
            },
        ]
    ),
    "utilisation cap and mixed cluster": {
        "cluster": "instances/clusters/mixed-h100-a100.yaml",
        "max_utilisation": 0.8,
        "models": [_model("chat", "llama-3-70b", 2000, 50), _model("code", "llama-3-8b", 8000, 25)],
    },
}


@pytest.fixture(scope="module")
def plans() -> dict:
    return solved(FLEETS, exact_placement=True)


@pytest.mark.parametrize("key", list(FLEETS))
def test_the_mip_equals_brute_force(plans, key) -> None:
    spec, mip, exact, brute = plans[key]
    for plan in (mip, exact):
        assert_same_fleet_optimum(spec, plan, brute)


@pytest.mark.parametrize("key", list(FLEETS))
def test_every_instance_re_evaluated_meets_its_limits_and_the_demand_is_served(plans, key) -> None:
    spec, mip, _, _ = plans[key]
    by_name = {m.name: m for m in spec.models}
    for row in mip.rows:
        fm = by_name[row["model"]]
        q = fm.question
        gpu = next(g for g in q.gpus if g.name == row["gpu"])
        layout = ev.Layout.of(row["tp"], row["tp_2d"], row["pp"], q.context, 1, row["ep"], row["kv_bits"])
        if q.workload is None:
            draft = {"draft": q.draft, "acceptance": q.acceptance, "gamma": row["gamma"]} if row["gamma"] else {}
            out = ev.evaluate(q.model, gpu, q.preset, row["weight_bits"], layout, row["batch"], **draft)
            tpot = float(out["time_per_token_s"])
        else:
            out = rq.aggregated_figures(
                q.model, gpu, q.preset, row["weight_bits"], layout, row["batch"], q.workload, row["chunk_tokens"]
            )
            tpot = float(out["tpot_s"])
            assert float(out["ttft_s"]) <= q.max_ttft_s * (1 + 1e-9)
            assert row["ttft_ms"] == pytest.approx(float(out["ttft_s"]) * 1e3, rel=1e-12)
            assert bool(out["prefill_within_chunk_budget"])
        assert bool(np.asarray(out["fits_in_memory"]))
        assert tpot <= fm.max_time_per_token_s * (1 + 1e-9)
        assert row["tpot_ms"] == pytest.approx(tpot * 1e3, rel=1e-12)
        assert row["utilisation"] <= spec.max_utilisation + 1e-12
    if spec.objective == "cost":
        for summary in mip.models:
            assert summary["served_tok_s"] == pytest.approx(summary["demand_tok_s"], rel=1e-12)


def _scaleup_component(cluster: nx.Graph) -> dict[str, int]:
    """Each GPU's connected component over nvswitch/nvlink/xgmi edges (computed here, not by the package)."""
    kinds = {"nvswitch", "nvlink", "xgmi"}
    view = nx.Graph([(u, v) for u, v, k in cluster.edges(data="kind") if k in kinds])
    view.add_nodes_from(n for n, k in cluster.nodes(data="kind") if k == "gpu")
    return {n: i for i, comp in enumerate(nx.connected_components(view)) for n in comp}


@pytest.mark.parametrize("key", [k for k in FLEETS if "gpus" not in FLEETS[k]])
def test_placements_are_valid_on_the_graph(plans, key) -> None:
    spec, mip, exact, brute = plans[key]
    cluster = spec.pool.cluster
    component = _scaleup_component(cluster)
    for plan in (mip, exact, brute):
        used: list[str] = []
        assert sum(len(p["stages"]) for p in plan.placement[0]) == sum(r["replicas"] * r["pp"] for r in plan.rows)
        for inst in plan.placement[0]:
            assert len(inst["stages"]) == inst["pp"]
            homes = set()
            for group in inst["stages"]:
                assert len(group) == inst["tp"]
                assert all(cluster.nodes[g]["kind"] == "gpu" and cluster.nodes[g]["gpu"] == inst["gpu"] for g in group)
                assert len({component[g] for g in group}) == 1
                homes.add(component[group[0]])
                used += group
            assert len(homes) == inst["pp"]
        assert len(used) == len(set(used))


def test_the_placement_check_names_what_is_wrong() -> None:
    cluster = topology.load_cluster(POD4)
    spanning = PlacedInstance("a#1", "a", 0, "h100-sxm", 2, 1, (("n0.gpu0", "n1.gpu0"),))
    shared = PlacedInstance("b#1", "b", 0, "h100-sxm", 1, 2, (("n2.gpu0",), ("n2.gpu1",)))
    twice = PlacedInstance("c#1", "c", 0, "h100-sxm", 1, 1, (("n0.gpu0",),))
    problems = placement_problems(cluster, [spanning, shared, twice])
    assert any("spans scale-up domains" in p for p in problems)
    assert any("share a scale-up domain" in p for p in problems)
    assert any("used twice" in p for p in problems)


def test_the_largest_batch_meeting_the_limit_is_the_best_batch_on_the_full_grid() -> None:
    spec = fleet_of(FLEETS["three models on 4 servers"])
    for i, fm in enumerate(spec.models):
        bisected = model_candidates(i, fm, spec.pool, prune=False).candidates
        grid = grid_candidates(spec, i)
        assert [(c.gpu, c.tp, c.pp, c.batch) for c in bisected] == [(c.gpu, c.tp, c.pp, c.batch) for c in grid]


def test_the_plan_is_never_dearer_than_planning_each_model_alone(plans) -> None:
    for key, (spec, mip, _, _) in plans.items():
        if spec.objective != "cost":
            continue
        base = per_model_baseline(spec, OPTIONS)
        assert mip.usd_per_hour <= base["usd_per_hour"] * (1 + 1e-9), key


def test_mixing_layouts_is_strictly_cheaper_than_repeating_one() -> None:
    """Demand a little above one large instance: per-model planning buys a second large one, the plan a small one."""
    spec = fleet_of(_fleet([_model("chat", "llama-3-70b", 1, 40, weight_bits=[8])]))
    big = max(model_candidates(0, spec.models[0], spec.pool).candidates, key=lambda c: c.throughput_tok_s)
    spec = fleet_of(_fleet([_model("chat", "llama-3-70b", big.throughput_tok_s * 1.05, 40, weight_bits=[8])]))
    plan = plan_fleet(spec, "mip", OPTIONS)
    base = per_model_baseline(spec, OPTIONS)
    assert len(plan.rows) >= 2
    assert plan.usd_per_hour < base["usd_per_hour"] * 0.9


def test_sharing_a_server_between_models_fits_where_per_model_plans_do_not() -> None:
    """One HGX server: per-model planning picks a 16-GPU layout for chat and 4 GPUs for code (20 GPUs, does not
    fit); the plan puts both models on the same server, for less."""
    spec = fleet_of(FLEETS["two models on one server"])
    plan = plan_fleet(spec, "mip", OPTIONS)
    base = per_model_baseline(spec, OPTIONS)
    assert not base["packs_onto_pool"]
    assert plan.usd_per_hour < base["usd_per_hour"]
    assert {inst["model"] for inst in plan.placement[0]} == {"chat", "code"}
    assert plan.cluster["gpus_used"] == {"h100-sxm": 8}


def test_the_exact_placement_model_decides_where_best_fit_cannot_place() -> None:
    """3 servers: two TP8 instances and one TP4 x PP2 fill the 24 GPUs in sum but cannot be placed (the PP2 stages
    need two servers with 4 free GPUs each). Best fit refuses them; the plan still equals brute force."""
    models = [
        {**_model("a", "llama-3-70b", 1, 40, weight_bits=[8]), "tp_degrees": [8], "pp_degrees": [1]},
        {**_model("b", "llama-3-8b", 1, 30), "tp_degrees": [4], "pp_degrees": [2]},
    ]
    spec = fleet_of({"cluster": {"nodes": 3, "node_type": "hgx-h100"}, "models": models})
    a = model_candidates(0, spec.models[0], spec.pool).candidates[0]
    b = model_candidates(1, spec.models[1], spec.pool).candidates[0]
    assert greedy_place(spec.pool, [a, b], ["a", "b"], {0: 2, 1: 1}) is None
    assert greedy_place(spec.pool, [a, b], ["a", "b"], {0: 1, 1: 1}) is not None
    models[0]["demand_tok_s"] = a.throughput_tok_s * 1.5
    spec = fleet_of({"cluster": {"nodes": 3, "node_type": "hgx-h100"}, "models": models})
    with pytest.raises(Infeasible, match="cannot be packed into the scale-up domains"):
        plan_fleet(spec, "mip", OPTIONS)
    with pytest.raises(Infeasible):
        plan_fleet(spec, "enumerate")


def test_a_limit_no_layout_meets_names_the_model_and_the_accelerator() -> None:
    spec = fleet_of(_fleet([_model("fast", "llama-3-70b", 1000, 5)]))
    with pytest.raises(Infeasible, match=r"model fast \(llama-3-70b\) cannot meet tpot 5 ms on h100-sxm: the fastest"):
        plan_fleet(spec, "mip", OPTIONS)


def test_a_gpu_shortage_says_how_many_more_gpus_of_which_type() -> None:
    spec = fleet_of(_fleet([_model("code", "llama-3-8b", 400_000, 20)], gpus={"h100-sxm": 16}))
    with pytest.raises(Infeasible, match=r"it would take at least \d+ more h100-sxm GPUs") as info:
        plan_fleet(spec, "mip", OPTIONS)
    assert info.value.reason == "gpu_shortage"


def test_a_budget_below_the_cheapest_plan_gives_its_cost() -> None:
    spec = fleet_of(_fleet([_model("code", "llama-3-8b", 20000, 20)], max_usd_per_hour=5))
    with pytest.raises(Infeasible, match=r"within \$5/hour; the cheapest plan costs \$\d"):
        plan_fleet(spec, "mip", OPTIONS)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"objective": "fastest"}, "objective"),
        ({"colour": 1}, "colour"),
        ({"models": []}, "models"),
        ({"models": [{"model": "llama-3-8b", "tpot_ms": 20}]}, "models[0].demand_tok_s"),
        ({"models": [{"model": "llama-3-8b", "demand_req_s": 2}]}, "models[0].osl"),
        ({"models": [{"model": "llama-3-8b", "demand_tok_s": 10, "tp_degrees": [0]}]}, "models[0].tp_degrees"),
        ({"models": [{"model": "llama-3-8b", "demand_tok_s": 10, "ttft_ms": 500}]}, "models[0].ttft_ms"),
        ({"gpus": {"h100-sxm": -1}}, "gpus.h100-sxm"),
        ({"models": [{"name": ["a"], "model": "llama-3-8b", "demand_tok_s": 10}]}, "models[0].name"),
        ({"models": [{"name": b"\x00", "model": "llama-3-8b", "demand_tok_s": 10}]}, "models[0].name"),
        ({"models": [{"name": "a\nb", "model": "llama-3-8b", "demand_tok_s": 10}]}, "models[0].name"),
        ({"models": [{"name": "x" * 65, "model": "llama-3-8b", "demand_tok_s": 10}]}, "models[0].name"),
    ],
)
def test_bad_fleet_input_names_the_field(change, field) -> None:
    data = {"gpus": {"h100-sxm": 8}, "models": [_model("code", "llama-3-8b", 1000, 20)], **change}
    with pytest.raises(InvalidInput) as info:
        fleet_of(data)
    assert info.value.field == field


def test_a_model_the_plan_does_not_serve_reports_nothing_served() -> None:
    """Objective served within a budget that buys only one model: the other has no instances and serves 0."""
    chat = {**_model("chat", "llama-3-70b", None, 15, weight_bits=[8]), "demand_req_s": 4, "isl": 2000, "osl": 400}
    code = {**_model("code", "llama-3-8b", 5000, 20), "weight": 0.2}
    spec = fleet_of(_fleet([chat, code], objective="served", max_usd_per_hour=12))
    plan = plan_fleet(spec, "mip", OPTIONS)
    served = {m["model"]: m for m in plan.models}
    assert not any(r["model"] == "chat" for r in plan.rows)
    assert (served["chat"]["served_tok_s"], served["chat"]["served_share"]) == (0.0, 0.0)
    assert served["code"]["served_tok_s"] == pytest.approx(5000.0, rel=1e-12)
