"""Properties over random valid models, accelerators and small clusters (hypothesis, derandomized).

Each example is a small discrete space (TP 1..8, PP 1..2, batches up to 256) so that the enumeration oracle is cheap.
The properties: the MIP optimum equals enumeration, frontiers are monotone, the cost identity holds for every answer,
more budget or more GPUs never hurt, and no NaN or infinity reaches an answer or the evaluator.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from roofline_opt import topology
from roofline_opt.errors import Infeasible
from roofline_opt.optimize.enumerate import best_point, enumerate_best, feasible_points
from roofline_opt.optimize.queries import cheapest, fastest, prepare, solve_fastest
from roofline_opt.optimize.results import Answer
from roofline_opt.optimize.space import Question
from roofline_opt.optimize.sweep import frontier_answers, pareto
from roofline_opt.optimize.testing import EXACT_RTOL, assert_same_optimum
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics.specs import DEFAULT, PAPER, GpuSpec, ModelSpec

OPTIONAL_RECORD_FIELDS = ("solve_seconds", "mip_gap", "placement")
"""Answer.to_record() fields that may be None: no solve time for enumeration, SolveReport.mip_gap (Optional), no
placement off a cluster."""

PROPERTY = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

# ----------------------------------------------------------------------------------------------- strategies


def log_uniform(lo: float, hi: float) -> st.SearchStrategy[float]:
    return st.floats(math.log10(lo), math.log10(hi)).map(lambda x: 10.0**x)


@st.composite
def models(draw: st.DrawFn, max_d_model: int = 8192, name: str = "synthetic") -> ModelSpec:
    """A valid decoder: d_model = heads x d_head x k, GQA group dividing the heads, optional MoE or MLA."""
    n_q_heads = draw(st.sampled_from((1, 2, 4, 8, 16, 32, 64)))
    d_head = draw(st.sampled_from((16, 32, 64, 128)))
    widths = [k for k in (1, 2) if n_q_heads * d_head * k <= max_d_model] or [1]
    d_model = n_q_heads * d_head * draw(st.sampled_from(widths))
    group_size = draw(st.sampled_from([g for g in (1, 2, 4, 8, 16, 64) if n_q_heads % g == 0]))
    n_layers = draw(st.integers(1, 120))
    fields = dict(
        name=name,
        d_model=d_model,
        d_ff=draw(st.integers(1, 16)) * d_model // 4,
        n_layers=n_layers,
        n_q_heads=n_q_heads,
        group_size=group_size,
        d_head=d_head,
        vocab=draw(st.integers(256, 160_000)),
        m_in=draw(st.sampled_from((1, 2))),
        parallel_attention=draw(st.booleans()),
        tie_embeddings=draw(st.booleans()),
    )
    if draw(st.booleans()):
        n_experts = draw(st.sampled_from((2, 4, 8, 16, 64)))
        n_dense = draw(st.integers(0, min(3, n_layers - 1)))
        fields |= dict(
            n_experts=n_experts,
            n_active_experts=draw(st.integers(1, min(8, n_experts))),
            n_shared_experts=draw(st.integers(0, 2)),
            n_dense_layers=n_dense,
            dense_layer_d_ff=draw(st.sampled_from((0, 4 * d_model))) if n_dense else 0,
            d_ff=max(64, fields["d_ff"] // 4),
        )
    if draw(st.integers(0, 5)) == 0:
        rope = draw(st.sampled_from((0, 64)))
        fields |= dict(kv_lora_rank=draw(st.sampled_from((64, 128, 512))), qk_rope_head_dim=rope)
    return ModelSpec(**fields)


@st.composite
def accelerators(draw: st.DrawFn, name: str = "acc") -> GpuSpec:
    """An accelerator with random FLOP/s (per precision), HBM size and bandwidth, links, launch time and price."""
    flop16 = draw(log_uniform(1e13, 5e15))
    rates = {16: flop16}
    if draw(st.booleans()):
        rates[8] = flop16 * draw(st.sampled_from((1.0, 2.0)))
        if draw(st.booleans()):
            rates[4] = rates[8] * draw(st.sampled_from((1.0, 2.0)))
    intra = draw(log_uniform(1e9, 1e13))
    return GpuSpec(
        name=name,
        flop_per_s_by_bits=rates,
        hbm_bytes=draw(log_uniform(8e9, 3e11)),
        hbm_bytes_per_s=draw(log_uniform(3e11, 1.5e13)),
        scaleup_gpus=draw(st.sampled_from((1, 2, 4, 8))),
        intra_bytes_per_s=intra,
        inter_bytes_per_s=intra * draw(log_uniform(1e-3, 1.0)),
        usd_per_hour=draw(log_uniform(0.01, 100.0)),
        kernel_launch_s=draw(st.sampled_from((0.0, 1e-6, 4e-6, 2e-5))),
        intra_hop_latency_s=draw(st.sampled_from((0.0, 1e-6))),
        inter_hop_latency_s=draw(st.sampled_from((0.0, 5e-6))),
    )


def _cluster_graph(kind: str, size: int):
    if kind == "single":
        return topology.single_node(("hgx-h100", "hgx-h100-4gpu", "pcie-8gpu", "mi300x-8")[size % 4], gpu="acc")
    if kind == "pod":
        return topology.pod([topology.NodeGroup(("hgx-h100", "hgx-h100-4gpu")[size % 2], 1 + size % 3, gpu="acc")])
    return topology.torus(((2, 2), (4,), (2, 4), (3, 3))[size % 4], gpu="acc", link_gb_s=50.0 * (1 + size))


@st.composite
def questions(draw: st.DrawFn, allow_cluster: bool = True, allow_demand: bool = True) -> Question:
    """A small discrete space over one or two random accelerators, optionally on a cluster graph."""
    model = draw(models())
    gpus = [draw(accelerators("acc"))]
    cluster, limit = None, None
    if allow_cluster and draw(st.integers(0, 3)) == 0:
        cluster = _cluster_graph(draw(st.sampled_from(("single", "pod", "torus"))), draw(st.integers(0, 11)))
        gpus = [topology.effective_gpu(cluster, "acc", gpus[0])]

        def limit(gpu: GpuSpec, tp: int, pp: int, graph=cluster) -> int:
            return topology.max_instances(graph, gpu.name, tp, pp)

    elif draw(st.booleans()):
        gpus.append(draw(accelerators("acc-b")))
    bits = sorted({b for g in gpus for b in g.flop_per_s_by_bits}, reverse=True)
    draft = None
    gamma_max = 0
    if draw(st.integers(0, 3)) == 0:
        draft = draw(models(max_d_model=1024, name="draft"))
        gamma_max = draw(st.integers(1, 3))
    ep = (1,)
    if model.is_moe and draw(st.booleans()):
        ep = (1, 2)
    return Question(
        model=model,
        gpus=tuple(gpus),
        weight_bits=tuple(draw(st.lists(st.sampled_from(bits), min_size=1, max_size=len(bits), unique=True))),
        tp_degrees=tuple(sorted(draw(st.sets(st.sampled_from((1, 2, 4, 8)), min_size=1)))),
        tp_modes=draw(st.sampled_from(((False,), (True,), (False, True)))),
        pp_degrees=tuple(sorted(draw(st.sets(st.sampled_from((1, 2)), min_size=1)))),
        ep_degrees=ep,
        max_batch=draw(st.integers(1, 256)),
        context=draw(st.sampled_from((0, 1, 1000, 8000, 32000))),
        draft=draft,
        acceptance=draw(st.floats(0.05, 0.95)),
        gamma_max=gamma_max,
        preset=draw(st.sampled_from((PAPER, DEFAULT))),
        max_gpus=draw(st.sampled_from((None, None, 2, 5, 16))),
        demand_tok_s=draw(st.sampled_from((None, None, None, 500.0, 2e4))) if allow_demand else None,
        instance_limit=limit,
        cluster_name=None if cluster is None else cluster.graph["name"],
        cluster=cluster,
    )


# ----------------------------------------------------------------------------------------------- regressions

LLAMA_3_8B = ModelSpec("llama-3-8b", 4096, 14336, 32, 32, 4, 128, 128256)
H100 = GpuSpec("h100-sxm", {16: 1e15, 8: 2e15, 4: 2e15}, 8e10, 3.3e12, 8, 9e11 / 4, 5e10 / 2, 2.10)
MINUSCULE = ModelSpec("minuscule", 16, 64, 1, 1, 1, 16, 256)
"""d_model 16, one layer, vocab 256: a decoding step of nanoseconds."""
SLOW_ACC = GpuSpec("acc", {16: 1e13}, 1e10, 1e12, 1, 1e9, 1e9, 1.0, kernel_launch_s=0.0)


def one_layout(model: ModelSpec, gpu: GpuSpec, **fields) -> Question:
    """A space of one layout (TP 1 in 1-D, PP 1) unless ``fields`` say otherwise."""
    return Question(model, (gpu,), **{"tp_degrees": (1,), "tp_modes": (False,), "pp_degrees": (1,), **fields})


FLAT_COST_PLATEAU = one_layout(
    LLAMA_3_8B, dataclasses.replace(H100, kernel_launch_s=0.0), max_batch=512, context=0, preset=PAPER
)
"""No launch time, no context, no network: compute-bound batches all cost exactly the cheapest cost (their time chord
has a zero intercept)."""
BUDGET_CANCELLATION = one_layout(
    MINUSCULE, dataclasses.replace(H100, kernel_launch_s=0.0), max_batch=512, context=8000, preset=DEFAULT
)
"""The cheapest batch's budget room is a difference of nearly equal numbers: its batch bound rounds up past it."""
TINY_OBJECTIVE = one_layout(MINUSCULE, SLOW_ACC, max_batch=64, context=0, preset=DEFAULT)
"""Dinkelbach objective values of 1e-7: below what HiGHS distinguishes from 0."""
SINGLE_BATCH_AT_FULL_SPEED = one_layout(LLAMA_3_8B, H100, tp_degrees=(8,), max_batch=1, context=481, preset=PAPER)
"""One whole batch per choice (a1 = 0): the speed target 1e3 / (1 / tau) differs from tau by one ulp."""

# ----------------------------------------------------------------------------------------------- helpers


def oracle_extremes(q: Question) -> tuple[float, float]:
    """The oracle's cheapest $/Mtok and fastest tok/s per request (the example is discarded if nothing runs)."""
    pts = feasible_points(q)
    assume(len(pts.batch) > 0)
    cheapest_usd = float(pts.usd_per_mtok[best_point(pts, "cheapest", None)])
    fastest_tok_s = float(1.0 / pts.time_per_token_s[best_point(pts, "fastest", None)])
    return cheapest_usd, fastest_tok_s


def price_per_s(q: Question, answer: Answer) -> float:
    return next(g for g in q.gpus if g.name == answer.setup.gpu).usd_per_s


def answers_of(q: Question) -> list[Answer]:
    """Every kind of answer a question gives: fastest and cheapest at any price or speed, and the frontier."""
    return [fastest(q), cheapest(q), *frontier_answers(q, points=5)]


def non_decreasing(values: list[float], rtol: float = 1e-9) -> bool:
    return all(b >= a * (1 - rtol) for a, b in zip(values, values[1:], strict=False))


def answer_or_none(query: Callable[[], Answer]) -> Answer | None:
    try:
        return query()
    except Infeasible:
        return None


# ----------------------------------------------------------------------------------------------- properties


@PROPERTY
@given(q=questions(), budget_factor=st.floats(1.0, 10.0))
@example(q=FLAT_COST_PLATEAU, budget_factor=1.0)
@example(q=BUDGET_CANCELLATION, budget_factor=1.0)
def test_fastest_within_a_random_budget_equals_enumeration(q: Question, budget_factor: float) -> None:
    cheapest_usd, _ = oracle_extremes(q)
    budget = cheapest_usd * budget_factor

    mip, oracle = fastest(q, budget), enumerate_best(q, "fastest", budget)

    assert_same_optimum("fastest", mip, oracle, budget, rtol=EXACT_RTOL)


@PROPERTY
@given(q=questions(), speed_factor=st.floats(0.3, 1.0))
@example(q=TINY_OBJECTIVE, speed_factor=0.3)
@example(q=SINGLE_BATCH_AT_FULL_SPEED, speed_factor=1.0)
def test_cheapest_at_a_random_speed_equals_enumeration(q: Question, speed_factor: float) -> None:
    _, fastest_tok_s = oracle_extremes(q)
    speed = fastest_tok_s * speed_factor

    mip, oracle = cheapest(q, speed), enumerate_best(q, "cheapest", speed)

    assert_same_optimum("cheapest", mip, oracle, speed, rtol=EXACT_RTOL)


@PROPERTY
@given(q=questions())
def test_frontier_speed_and_cost_rise_together(q: Question) -> None:
    oracle_extremes(q)

    frontier = frontier_answers(q, points=6)

    assert non_decreasing([a.tok_s_per_request for a in frontier]), [a.setup for a in frontier]
    assert non_decreasing([a.usd_per_mtok for a in frontier]), [a.setup for a in frontier]


@PROPERTY
@given(q=questions())
def test_cost_is_gpus_times_price_over_throughput_for_every_answer(q: Question) -> None:
    oracle_extremes(q)

    for answer in answers_of(q):
        expected = 1e6 * answer.setup.n_gpus * price_per_s(q, answer) / answer.figures["throughput_tok_s"]
        assert answer.usd_per_mtok == pytest.approx(expected, rel=1e-9), answer.setup


@PROPERTY
@given(q=questions(), low=st.floats(1.0, 10.0), raise_by=st.floats(1.0, 4.0))
def test_more_budget_never_buys_less_speed(q: Question, low: float, raise_by: float) -> None:
    cheapest_usd, _ = oracle_extremes(q)
    prep = prepare(q)

    tight = solve_fastest(prep, cheapest_usd * low)
    loose = solve_fastest(prep, cheapest_usd * low * raise_by)

    assert tight is not None and loose is not None
    assert loose.tok_s_per_request >= tight.tok_s_per_request * (1 - EXACT_RTOL), (tight.setup, loose.setup)


@PROPERTY
@given(q=questions(allow_cluster=False), few=st.sampled_from((1, 2, 3, 4, 8)), more=st.sampled_from((2, 4, 8, None)))
def test_more_gpus_available_never_hurt(q: Question, few: int, more: int | None) -> None:
    assume(more is None or more > few)
    small, large = dataclasses.replace(q, max_gpus=few), dataclasses.replace(q, max_gpus=more)
    small_fast, small_cheap = answer_or_none(lambda: fastest(small)), answer_or_none(lambda: cheapest(small))
    assume(small_fast is not None and small_cheap is not None)

    large_fast, large_cheap = fastest(large), cheapest(large)

    assert large_fast.tok_s_per_request >= small_fast.tok_s_per_request * (1 - EXACT_RTOL)
    assert large_cheap.usd_per_mtok <= small_cheap.usd_per_mtok * (1 + EXACT_RTOL)


@PROPERTY
@given(q=questions())
def test_no_nan_or_infinity_reaches_an_answer(q: Question) -> None:
    oracle_extremes(q)

    for answer in answers_of(q):
        for key, value in answer.to_record().items():
            if value is None:
                assert key in OPTIONAL_RECORD_FIELDS, key
            elif isinstance(value, float):
                assert math.isfinite(value), (key, value, answer.setup)


@st.composite
def setups(draw: st.DrawFn):
    """A random valid fully specified setup for the evaluator: layout, batch, context and draft length."""
    model = draw(models())
    gpu = draw(accelerators())
    tp = draw(st.sampled_from((1, 2, 4, 8, 16, 32, 64)))
    eps = [e for e in (1, 2, 4, 8) if tp % e == 0 and model.n_experts % e == 0]
    draft = draw(st.none() | models(max_d_model=1024, name="draft"))
    return dict(
        model=model,
        gpu=gpu,
        preset=draw(st.sampled_from((PAPER, DEFAULT))),
        weight_bits=draw(st.sampled_from(sorted(gpu.flop_per_s_by_bits))),
        layout=ev.Layout.of(
            tp=tp,
            tp_2d=tp > 1 and draw(st.booleans()),
            pp=draw(st.sampled_from((1, 2, 4, 8))),
            context=draw(st.integers(0, 1_000_000)),
            ep=draw(st.sampled_from(eps)),
        ),
        batch=draw(st.integers(1, 100_000)),
        draft=draft,
        acceptance=draw(st.floats(0.0, 0.99)),
        gamma_max=0 if draft is None else draw(st.integers(0, 8)),
    )


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(s=setups())
def test_evaluator_figures_are_finite_for_valid_setups(s: dict) -> None:
    out = ev.evaluate(**s)
    uses_draft = s["draft"] is not None and s["gamma_max"] > 0
    for key, value in out.items():
        if key == "draft_step_time_s" and not uses_draft:
            continue  # NaN stands for "no draft step" when no draft model runs
        if np.asarray(value).dtype.kind == "f":
            assert np.all(np.isfinite(value)), (key, value)


def test_a_frontier_keeps_only_points_faster_than_every_cheaper_one():
    def answer(speed: float, cost: float) -> SimpleNamespace:
        return SimpleNamespace(tok_s_per_request=speed, usd_per_mtok=cost)

    near_tie = [answer(574.18, 0.80), answer(584.3473594, 0.90), answer(584.3473011, 0.91), answer(600.0, 1.5)]
    kept = pareto(near_tie)
    assert [a.tok_s_per_request for a in kept] == [574.18, 584.3473594, 600.0]
