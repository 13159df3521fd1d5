"""Prefix caching: a cached prefix of P tokens is read, not prefilled (physics/requests.py), in the evaluator, the
simulator, the queueing model and the queries (MIP equal to enumeration)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from roofline_opt import api, catalog
from roofline_opt.cli import main
from roofline_opt.errors import InvalidInput
from roofline_opt.optimize.enumerate import best_point, enumerate_best, feasible_points
from roofline_opt.optimize.queries import cheapest, fastest
from roofline_opt.optimize.testing import assert_same_optimum
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics import queueing as qm
from roofline_opt.physics import requests as rq
from roofline_opt.physics.specs import DEFAULT, PRESETS
from roofline_opt.simulate import arrivals, engine

H100 = catalog.load_gpu("h100-sxm")
LLAMA8 = catalog.resolve_model("llama-3-8b", "model")[0]
PHYSICS = engine.Physics(LLAMA8, DEFAULT, 16)


def _layout(context: float) -> ev.Layout:
    return ev.Layout.of(1, False, 1, context, 1, 1, 16)


def test_a_prefix_of_zero_tokens_changes_no_figure():
    plain, zero = rq.Workload.single(2000, 300), rq.Workload((2000,), (300,), (1.0,), (0,))
    layout = _layout(2150.0)
    for preset in (DEFAULT, PRESETS["paper"]):
        a = rq.aggregated_figures(LLAMA8, H100, preset, 16, layout, 32.0, plain, 2048)
        b = rq.aggregated_figures(LLAMA8, H100, preset, 16, layout, 32.0, zero, 2048)
        assert all(np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in a)


def test_a_prefill_step_over_a_cached_prefix_adds_exactly_its_attention_to_the_new_tokens_alone():
    """I = 3000 with P = 1000 cached computes 2000 tokens at context 1000: the FLOPs of 2000 uncached tokens plus
    2000 x 1000 context tokens of attention; it writes the KV cache of 2000 tokens and reads that of 1000."""
    paper = PRESETS["paper"]
    layout = _layout(0.0)
    cached = rq.prefill_step(LLAMA8, H100, paper, 16, layout, 1.0, 3000, 1000)
    alone = rq.prefill_step(LLAMA8, H100, paper, 16, layout, 1.0, 2000)
    sz = ev.model_sizes(LLAMA8)
    flop_s = ev.flop_rate(ev.hardware(H100, paper), 16) * paper.flop_efficiency
    extra = sz.attn_flop_per_ctx_token_per_layer * LLAMA8.n_layers * 2000 * 1000 / flop_s
    assert float(cached.compute_s) == pytest.approx(float(alone.compute_s) + extra, rel=1e-12)
    kv = ev.kv_bytes_per_token(LLAMA8, layout.kv_bytes_per_value) * 1000 * ev.kv_copies(LLAMA8, paper, layout)
    hbm = ev.hardware(H100, paper).hbm_bytes_per_s * paper.hbm_efficiency
    assert float(cached.memory_s) == pytest.approx(float(alone.memory_s) + kv / hbm, rel=1e-9)


def test_a_disaggregated_unit_sends_only_the_uncached_kv_cache():
    link = rq.kv_link_bytes_per_s(H100, H100, False)
    fig = rq.prefill_figures(
        LLAMA8, H100, DEFAULT, 16, _layout(0.0), 1.0, rq.Workload((3000,), (10,), (1.0,), (1000,)), link
    )
    step = rq.prefill_step(LLAMA8, H100, DEFAULT, 16, _layout(0.0), 1.0, 3000, 1000).step_time_s
    transfer = rq.kv_transfer_s(LLAMA8, _layout(0.0), 2000, link)
    assert float(fig["ttft_s"]) == pytest.approx(float(step + transfer), rel=1e-12)


def test_a_hit_rate_splits_each_class_into_a_hit_and_a_miss():
    w = rq.Workload((2000, 500), (100, 50), (3.0, 1.0)).with_prefix(800, 0.25)
    assert w.classes == ((2000, 800), (2000, 0), (500, 499), (500, 0))
    np.testing.assert_allclose(w._w(), [0.75 * 0.25, 0.75 * 0.75, 0.25 * 0.25, 0.25 * 0.75])
    assert w.mean_isl == pytest.approx(0.75 * 2000 + 0.25 * 500)


def test_a_cached_prefix_lowers_ttft_and_the_prefill_load_of_an_aggregated_instance():
    layout = _layout(2150.0)
    plain, cached = rq.Workload.single(2000, 300), rq.Workload.single(2000, 300).with_prefix(1500)
    a = rq.aggregated_figures(LLAMA8, H100, DEFAULT, 16, layout, 64.0, plain, 2048)
    b = rq.aggregated_figures(LLAMA8, H100, DEFAULT, 16, layout, 64.0, cached, 2048)
    assert b["ttft_s"] < a["ttft_s"] and b["tpot_s"] < a["tpot_s"] and b["usd_per_mtok"] < a["usd_per_mtok"]
    assert cached.prompt_tokens_per_output == pytest.approx(500 / 300)


@pytest.mark.parametrize(("isl", "prefix"), [(2500, 1000), (5096, 1000)])
def test_the_simulator_at_low_load_reproduces_the_evaluators_ttft_with_a_prefix(isl, prefix):
    """One chunk and two whole chunks of new tokens after the prefix: the simulator's pieces start after the prefix
    and read it; the evaluator's chunk schedule prices the same steps."""
    layout = _layout(isl + 50.0)
    reqs = arrivals.Requests(np.arange(4) * 60.0, np.full(4, isl), np.full(4, 100), np.full(4, prefix))
    served = engine.aggregated(PHYSICS, H100, layout, 8, 2048, reqs)
    one = rq.Workload((isl,), (100,), (1.0,), (prefix,))
    ttft = rq.ttft_aggregated_s(LLAMA8, H100, DEFAULT, 16, layout, 1.0, one, 2048)
    assert served.ttft_s == pytest.approx(float(ttft), rel=1e-9)


def test_the_disaggregated_simulator_at_low_load_reproduces_the_evaluator_with_a_prefix():
    reqs = arrivals.Requests(np.arange(4) * 60.0, np.full(4, 3000), np.full(4, 20), np.full(4, 1000))
    served = engine.disaggregated(PHYSICS, (H100, _layout(0.0), 1, 1), (H100, _layout(3010.0), 8, 1), reqs)
    one = rq.Workload((3000,), (20,), (1.0,), (1000,))
    fig = rq.disaggregated_figures(
        LLAMA8, DEFAULT, 16, one, (H100, _layout(0.0), 1.0, 1), (H100, _layout(3010.0), 1.0, 1)
    )
    assert served.ttft_s == pytest.approx(float(fig["ttft_s"]), rel=1e-9)


def test_drawn_requests_carry_the_prefix_of_their_class_and_give_the_workload_back():
    w = rq.Workload.single(2000, 100).with_prefix(600, 0.5)
    reqs = arrivals.draw(qm.Arrivals(5.0), w, 4000, 0)
    assert set(zip(reqs.isl.tolist(), reqs.cached.tolist(), strict=True)) == {(2000, 600), (2000, 0)}
    assert reqs.workload.classes == ((2000, 0), (2000, 600))
    assert reqs.workload._w()[1] == pytest.approx(0.5, abs=0.03)


# ----------------------------------------------------------------------------------------------- queries

SMALL = dict(tp_degrees=(1, 2), pp_degrees=(1, 2), tp_modes=("1d",), max_batch=256, max_instances=3)
QUESTIONS = {
    "llama8b-agg-disagg-half-hits": dict(
        model="llama-3-8b",
        gpu="h100-sxm",
        isl=3000,
        osl=300,
        serving=["agg", "disagg"],
        ttft_ms=400,
        prefix_tokens=2000,
        prefix_hit_rate=0.5,
    ),
    "llama8b-p90-all-hits": dict(
        model="llama-3-8b",
        gpu="h100-sxm",
        isl=2000,
        osl=200,
        serving=["agg", "disagg"],
        ttft_ms=300,
        percentile=90,
        prefix_tokens=1500,
    ),
}


def _question(name: str):
    spec = {**SMALL, **QUESTIONS[name]}
    return api.question(spec.pop("model"), spec.pop("gpu"), **spec)


@pytest.mark.parametrize("name", QUESTIONS)
def test_prefix_questions_equal_enumeration_both_ways(name):
    q = _question(name)
    pts = feasible_points(q)
    cheapest_usd = float(pts.usd_per_mtok[best_point(pts, "cheapest", None)])
    fastest_tok_s = float(1.0 / pts.time_per_token_s[best_point(pts, "fastest", None)])
    for kind, target, solve in (
        ("fastest", 1.5 * cheapest_usd, fastest),
        ("cheapest", 0.7 * fastest_tok_s, cheapest),
        ("cheapest", None, cheapest),
    ):
        oracle, answer = enumerate_best(q, kind, target, pts), solve(q, target)
        assert_same_optimum(kind, answer, oracle, target)
        assert_same_optimum(kind, oracle, answer, target)
        assert answer.figures["ttft_s"] <= q.max_ttft_s * (1 + 1e-9)


def test_a_cached_prefix_makes_the_cheapest_answer_cheaper():
    q = _question("llama8b-agg-disagg-half-hits")
    plain = dataclasses.replace(q, workload=rq.Workload.single(3000, 300))
    assert cheapest(q, None).usd_per_mtok < cheapest(plain, None).usd_per_mtok


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        (dict(prefix_tokens=1000), "prefix_tokens"),
        (dict(prefix_tokens=-1), "prefix_tokens"),
        (dict(prefix_tokens=100, prefix_hit_rate=1.5), "prefix_hit_rate"),
        (dict(prefix_hit_rate=0.5), "prefix_hit_rate"),
    ],
)
def test_bad_prefixes_name_the_parameter(kwargs, field):
    with pytest.raises(InvalidInput) as err:
        api.question("llama-3-8b", "h100-sxm", isl=1000, osl=100, **kwargs)
    assert err.value.field == field


def test_cli_prefix_flags_headline_and_errors(capsys):
    args = ["cheapest", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--isl", "2000", "--osl", "200"]
    args += ["--tp-degrees", "1", "--pp-degrees", "1"]
    assert main([*args, "--prefix-tokens", "1500", "--prefix-hit-rate", "0.5"]) == 0
    assert "a 1500-token prefix cached for 50% of requests" in capsys.readouterr().out
    assert main([*args, "--prefix-tokens", "2000"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--prefix-tokens" in err[0]


def test_simulate_takes_a_prefix(capsys):
    args = ["simulate", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--tp", "1", "--pp", "1", "--batch", "32"]
    args += ["--isl", "2000", "--osl", "50", "--rate-req-s", "2", "--requests", "200", "--json"]
    assert main([*args, "--prefix-tokens", "1500"]) == 0
    assert main([*args, "--prefix-tokens", "2500"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--prefix-tokens" in err[-1]
