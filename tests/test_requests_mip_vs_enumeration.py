"""Whole-request questions: the MIP's answer equals brute-force enumeration of the same space, limits met exactly.

Each question offers several of the new decisions (serving mode, chunk size, KV precision, prefill layout and xPyD
counts, accelerator types, data-parallel attention); each is asked 8 ways (4 budgets, 4 speeds): 72 queries.
"""

from __future__ import annotations

import functools

import pytest

from roofline_opt import api
from roofline_opt.optimize.enumerate import best_point, enumerate_best, feasible_points
from roofline_opt.optimize.queries import cheapest, fastest
from roofline_opt.optimize.testing import assert_same_optimum

SMALL = dict(tp_degrees=(1, 2, 4, 8), pp_degrees=(1, 2), tp_modes=("1d",), max_batch=256, max_instances=3)
QUESTIONS = {
    "llama8b-a100-agg-chunks-kv": dict(
        model="llama-3-8b",
        gpu="a100-80gb",
        isl=2000,
        osl=500,
        chunk_tokens=(512, 2048),
        kv_bits=(16, 8),
        ttft_ms=400,
    ),
    "llama70b-two-gpus-agg-disagg-kv": dict(
        model="llama-3-70b",
        gpu=("h100-sxm", "h200"),
        isl=4000,
        osl=1000,
        serving=("agg", "disagg"),
        kv_bits=(16, 8),
        ttft_ms=2000,
    ),
    "mixtral8x7b-h200-moe-agg-disagg": dict(
        model="mixtral-8x7b",
        gpu="h200",
        isl=1000,
        osl=500,
        serving=("agg", "disagg"),
        chunk_tokens=(1024, 4096),
    ),
    "llama70b-prefill-h200-decode-h100": dict(
        model="llama-3-70b",
        gpu="h100-sxm",
        prefill_gpu="h200",
        decode_gpu="h100-sxm",
        isl=8000,
        osl=500,
        serving="disagg",
        kv_bits=8,
        ttft_ms=1500,
    ),
    "llama8b-workload-mix": dict(
        model="llama-3-8b",
        gpu="h100-sxm",
        workload=((200, 800, 3.0), (3000, 300, 1.0)),
        serving=("agg", "disagg"),
        chunk_tokens=(256, 1024),
        ttft_ms=300,
    ),
    "llama8b-demand-req-gpu-limit": dict(
        model="llama-3-8b",
        gpu="h100-sxm",
        isl=1000,
        osl=200,
        serving=("agg", "disagg"),
        demand_req_s=40,
        max_gpus=24,
    ),
    "llama70b-int8-kv8-utilisation": dict(
        model="llama-3-70b-int8",
        gpu="h100-sxm",
        isl=2000,
        osl=2000,
        serving=("agg", "disagg"),
        kv_bits=(8,),
        max_utilisation=0.8,
    ),
    "deepseek-v3-dp-attention-agg-disagg": dict(
        model="deepseek-v3",
        gpu="h200",
        weight_bits=8,
        isl=1000,
        osl=1000,
        serving=("agg", "disagg"),
        tp_degrees=(8,),
        ep_degrees=(1, 8, 16, 32),
        dp_attention=True,
        kv_bits=(16, 8),
    ),
    "mixtral8x22b-paper-agg-kv": dict(
        model="mixtral-8x22b",
        gpu="h100-sxm",
        preset="paper",
        isl=500,
        osl=1500,
        kv_bits=(16, 8),
        chunk_tokens=(512, 2048),
    ),
}
BUDGET_FACTORS = (None, 1.0, 1.5, 4.0)
SPEED_FACTORS = (None, 1.0, 0.7, 0.4)


@functools.cache
def _setting(name: str):
    spec = {**SMALL, **QUESTIONS[name]}
    q = api.question(spec.pop("model"), spec.pop("gpu"), **spec)
    pts = feasible_points(q)
    cheapest_usd = float(pts.usd_per_mtok[best_point(pts, "cheapest", None)])
    fastest_tok_s = float(1.0 / pts.time_per_token_s[best_point(pts, "fastest", None)])
    return q, pts, cheapest_usd, fastest_tok_s


def _limits_met(q, answer) -> None:
    """The exact figures of the answer meet every limit of the question."""
    assert answer.fits_in_memory
    if q.max_ttft_s is not None:
        assert answer.figures["ttft_s"] <= q.max_ttft_s * (1 + 1e-9), (answer.figures["ttft_s"], q.max_ttft_s)
    if q.max_gpus is not None:
        assert answer.setup.unit_gpus * answer.setup.replicas <= q.max_gpus
    if q.demand_tok_s is not None:
        assert answer.figures["throughput_tok_s"] * answer.setup.replicas >= q.demand_tok_s * (1 - 1e-9)


@pytest.mark.parametrize("factor", BUDGET_FACTORS)
@pytest.mark.parametrize("name", QUESTIONS)
def test_fastest_whole_requests_equals_enumeration(name, factor):
    q, pts, cheapest_usd, _ = _setting(name)
    budget = None if factor is None else cheapest_usd * factor
    oracle = enumerate_best(q, "fastest", budget, pts)
    answer = fastest(q, budget)
    assert_same_optimum("fastest", answer, oracle, budget)
    assert_same_optimum("fastest", oracle, answer, budget)
    _limits_met(q, answer)


@pytest.mark.parametrize("factor", SPEED_FACTORS)
@pytest.mark.parametrize("name", QUESTIONS)
def test_cheapest_whole_requests_equals_enumeration(name, factor):
    q, pts, _, fastest_tok_s = _setting(name)
    speed = None if factor is None else fastest_tok_s * factor
    oracle = enumerate_best(q, "cheapest", speed, pts)
    answer = cheapest(q, speed)
    assert_same_optimum("cheapest", answer, oracle, speed)
    assert_same_optimum("cheapest", oracle, answer, speed)
    _limits_met(q, answer)


def test_the_questions_exercise_every_new_decision():
    """Across the answers above, both serving modes, both KV precisions and more than one chunk size are chosen."""
    chosen = set()
    for name in QUESTIONS:
        q, pts, cheapest_usd, fastest_tok_s = _setting(name)
        for answer in (fastest(q, cheapest_usd * 1.5), cheapest(q, fastest_tok_s * 0.7), cheapest(q, None)):
            s = answer.setup
            chosen |= {("serving", s.serving), ("kv_bits", s.kv_bits), ("gpu", s.gpu)}
            chosen |= {("chunk", s.chunk_tokens)} if s.serving == "agg" else {("prefill_gpu", s.prefill_gpu)}
    assert {("serving", "agg"), ("serving", "disagg"), ("kv_bits", 16), ("kv_bits", 8)} <= chosen
    assert len({c for c in chosen if c[0] == "chunk"}) >= 2
    assert ("prefill_gpu", "h200") in chosen


def test_enumerate_method_returns_the_prefill_side_of_a_disaggregated_answer():
    q, pts, cheapest_usd, _ = _setting("llama70b-prefill-h200-decode-h100")
    record = fastest(q, 2 * cheapest_usd, method="enumerate").to_record()
    assert record["serving"] == "disagg"
    assert record["prefill_gpu"] == "h200" and record["gpu"] == "h100-sxm"
    assert record["prefill_instances"] >= 1 and record["decode_instances"] >= 1
    assert record["ttft_s"] <= 1.5


def test_a_cluster_bounds_disaggregated_units_and_links_their_kv_cache(tmp_path):
    """On two 8-GPU H100 nodes, x prefill + y decode instances share 16 GPUs; the MIP equals enumeration."""
    from roofline_opt import topology
    from roofline_opt.optimize import pairing

    path = tmp_path / "two-nodes.graphml"
    topology.save_cluster(topology.from_spec({"nodes": 2, "node_type": "hgx-h100", "gpu": "h100-sxm"}), path)
    spec = {**SMALL, "tp_degrees": (1, 2, 4, 8)}
    q = api.question("llama-3-8b", cluster=str(path), isl=2000, osl=500, serving="disagg", **spec)
    pts = feasible_points(q)
    for kind, target in (("cheapest", None), ("fastest", None)):
        ask = cheapest if kind == "cheapest" else fastest
        answer, oracle = ask(q, target), enumerate_best(q, kind, target, pts)
        assert_same_optimum(kind, answer, oracle, target)
        assert answer.setup.unit_gpus * answer.setup.replicas <= 16
    gpu = q.gpus[0]
    # a KV transfer is point to point: one direction of the link, twice the all-reduce figure the card states
    assert pairing.link_of(q, 0, 0, False)[0] == 2.0 * gpu.inter_bytes_per_s
    assert pairing.link_of(q, 0, 0, True)[0] == 2.0 * gpu.intra_bytes_per_s
