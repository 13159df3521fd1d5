"""Speculative decoding with whole requests (aggregated and disaggregated serving): a draft round is the target's
verification step plus the draft's steps, the draft prefills every prompt too and holds its weights and KV cache; the
MIP equals enumeration both ways."""

from __future__ import annotations

import functools
from dataclasses import replace

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
from roofline_opt.physics import tpot_percentiles as tq
from roofline_opt.physics.mtp import mtp_module
from roofline_opt.physics.specs import PRESETS

SMALL = dict(tp_degrees=(1, 2, 4, 8), pp_degrees=(1, 2), tp_modes=("1d",), max_batch=256)
QUESTIONS = {
    "llama70b-draft8b-h100": dict(
        model="llama-3-70b", gpu="h100-sxm", draft="llama-3-8b", isl=2000, osl=500, ttft_ms=2000, gamma_max=3
    ),
    "llama70b-draft8b-h200-chunks-kv": dict(
        model="llama-3-70b",
        gpu="h200",
        draft="llama-3-8b",
        isl=4000,
        osl=1000,
        chunk_tokens=(512, 2048),
        kv_bits=(16, 8),
        acceptance=0.8,
    ),
    "llama70b-draft8b-paper-mix": dict(
        model="llama-3-70b",
        gpu="h100-sxm",
        draft="llama-3-8b",
        preset="paper",
        workload=((500, 1500, 1.0), (3000, 300, 1.0)),
        gamma_max=4,
    ),
    "mixtral-draft-prefix-demand": dict(
        model="mixtral-8x7b",
        gpu="h100-sxm",
        draft="mistral-7b",
        isl=1000,
        osl=500,
        prefix_tokens=500,
        demand_req_s=20,
        max_gpus=16,
        gamma_max=2,
    ),
    "llama70b-draft8b-agg-disagg": dict(
        model="llama-3-70b",
        gpu="h100-sxm",
        draft="llama-3-8b",
        isl=2000,
        osl=500,
        ttft_ms=2000,
        gamma_max=3,
        serving=("agg", "disagg"),
        max_instances=3,
    ),
    "llama8b-draft-disagg-two-gpus-kv": dict(
        model="llama-3-70b",
        gpu=("h100-sxm", "h200"),
        draft="llama-3-8b",
        isl=4000,
        osl=1000,
        serving="disagg",
        kv_bits=(16, 8),
        gamma_max=2,
        acceptance=0.6,
        max_instances=2,
    ),
    "llama70b-draft8b-p90-agg-disagg": dict(
        model="llama-3-70b",
        gpu="h100-sxm",
        draft="llama-3-8b",
        isl=2000,
        osl=500,
        ttft_ms=2000,
        tpot_ms=40,
        percentile=90,
        gamma_max=3,
        serving=("agg", "disagg"),
        max_instances=2,
    ),
    "llama70b-draft8b-p99-bursty-agg": dict(
        model="llama-3-70b",
        gpu="h100-sxm",
        draft="llama-3-8b",
        isl=1000,
        osl=200,
        ttft_ms=1500,
        tpot_ms=30,
        percentile=99,
        burstiness=2.0,
        gamma_max=2,
        tp_degrees=(4, 8),
        pp_degrees=(1,),
    ),
    "deepseek-mtp-h200": dict(
        model="deepseek-v3",
        gpu="h200",
        draft="mtp",
        weight_bits=8,
        isl=1000,
        osl=1000,
        tpot_ms=40,
        gamma_max=2,
        pp_degrees=(1,),
    ),
    "deepseek-mtp-p90-agg-disagg": dict(
        model="deepseek-v3",
        gpu="h200",
        draft="mtp",
        weight_bits=8,
        isl=2000,
        osl=500,
        ttft_ms=3000,
        tpot_ms=50,
        percentile=90,
        gamma_max=2,
        serving=("agg", "disagg"),
        max_instances=2,
    ),
}
FACTORS = (None, 1.0, 2.0)


@functools.cache
def _setting(name: str):
    spec = {**SMALL, **QUESTIONS[name]}
    q = api.question(spec.pop("model"), spec.pop("gpu"), **spec)
    pts = feasible_points(q)
    cheapest_usd = float(pts.usd_per_mtok[best_point(pts, "cheapest", None)])
    fastest_tok_s = float(1.0 / pts.time_per_token_s[best_point(pts, "fastest", None)])
    return q, pts, cheapest_usd, fastest_tok_s


@pytest.mark.parametrize("factor", FACTORS)
@pytest.mark.parametrize("name", QUESTIONS)
def test_fastest_with_a_draft_equals_enumeration(name, factor):
    q, pts, cheapest_usd, _ = _setting(name)
    budget = None if factor is None else cheapest_usd * factor
    answer, oracle = fastest(q, budget), enumerate_best(q, "fastest", budget, pts)
    assert_same_optimum("fastest", answer, oracle, budget)
    assert_same_optimum("fastest", oracle, answer, budget)
    if q.max_ttft_s is not None:
        assert answer.figures["ttft_s"] <= q.max_ttft_s * (1 + 1e-9)


@pytest.mark.parametrize("factor", FACTORS)
@pytest.mark.parametrize("name", QUESTIONS)
def test_cheapest_with_a_draft_equals_enumeration(name, factor):
    q, pts, _, fastest_tok_s = _setting(name)
    speed = None if factor is None else fastest_tok_s / factor
    answer, oracle = cheapest(q, speed), enumerate_best(q, "cheapest", speed, pts)
    assert_same_optimum("cheapest", answer, oracle, speed)
    assert_same_optimum("cheapest", oracle, answer, speed)


def test_the_fastest_answer_drafts_and_its_figures_are_the_evaluators():
    q, *_ = _setting("llama70b-draft8b-h100")
    answer = fastest(q, None)
    assert answer.setup.gamma > 0
    s = answer.setup
    layout = ev.Layout.of(s.tp, s.tp_2d, s.pp, q.context, 1, s.ep, s.kv_bits)
    spec = rq.Speculation(q.draft, s.gamma, q.acceptance)
    fig = rq.aggregated_figures(
        q.model, q.gpus[0], q.preset, s.weight_bits, layout, s.batch, q.whole_requests, s.chunk_tokens, 1.0, spec
    )
    assert answer.figures["tpot_s"] == pytest.approx(float(fig["tpot_s"]), rel=1e-12)
    assert answer.figures["ttft_s"] == pytest.approx(float(fig["ttft_s"]), rel=1e-12)


TARGET, DRAFT = catalog.load_model("llama-3-70b"), catalog.load_model("llama-3-8b")
GPU = catalog.load_gpu("h100-sxm")
WORK = rq.Workload.single(2000, 500)
LAYOUT = ev.Layout.of(4, False, 1, WORK.decode_context, 1, 1, 16)


def _agg(preset, batch, spec):
    return rq.aggregated_figures(TARGET, GPU, preset, 16, LAYOUT, batch, WORK, 2048, 1.0, spec)


@pytest.mark.parametrize("preset", ["default", "paper"])
def test_gamma_0_is_no_draft(preset):
    p = PRESETS[preset]
    plain, zero = _agg(p, 64.0, None), _agg(p, 64.0, rq.Speculation(DRAFT, 0.0, 0.7))
    for field in ("tpot_s", "ttft_s", "max_itl_s", "usd_per_mtok", "weights_bytes_per_device", "fits_in_memory"):
        assert np.all(zero[field] == plain[field]), field


def test_tpot_falls_with_acceptance():
    tpots = [float(_agg(PRESETS["default"], 16.0, rq.Speculation(DRAFT, 3.0, a))["tpot_s"]) for a in (0.5, 0.7, 0.9)]
    assert tpots[0] > tpots[1] > tpots[2]


def test_decode_only_round_is_time_per_token_with_gamma():
    p = PRESETS["default"]
    for gamma in (1.0, 3.0):
        round_ = rq.tpot_step(TARGET, GPU, p, 16, LAYOUT, 8.0, None, 0.0, 0.0, rq.Speculation(DRAFT, gamma, 0.7))
        expected = ev.time_per_token_with_gamma(TARGET, GPU, p, 16, LAYOUT, 8.0, gamma, DRAFT, 0.7)
        assert float(round_.step_time_s) == pytest.approx(float(expected), rel=1e-12)


def test_a_round_is_the_verification_step_plus_gamma_draft_steps_over_expected_tokens():
    p = replace(PRESETS["default"], prefill_cycle=False)
    spec = rq.Speculation(DRAFT, 2.0, 0.6)
    step = rq.tpot_step(TARGET, GPU, p, 16, LAYOUT, 32.0, WORK, 2048, 1.0, spec)
    assert isinstance(step, rq.Round)
    e = 1.0 + 0.6 + 0.36
    target, reading, plain = (s.step_time_s for _, s in step.terms)
    assert float(step.step_time_s) == pytest.approx(float((target + reading + plain) / e), rel=1e-12)
    # the draft's step reading the round's prompt tokens is its prefill: slower than its plain step
    assert reading > plain


def test_the_draft_prefills_too_ttft_rises_and_memory_holds_the_draft():
    p = PRESETS["default"]
    plain, drafted = _agg(p, 32.0, None), _agg(p, 32.0, rq.Speculation(DRAFT, 1.0, 0.7))
    assert drafted["ttft_s"] > plain["ttft_s"]
    draft_weights = ev.DRAFT_WEIGHT_BITS / 8 * ev.model_sizes(DRAFT).total_params / 4
    assert float(drafted["weights_bytes_per_device"] - plain["weights_bytes_per_device"]) == pytest.approx(
        draft_weights, rel=1e-12
    )
    assert drafted["kv_cache_bytes_per_device"] > plain["kv_cache_bytes_per_device"]


P_LAYOUT = ev.Layout.of(2, False, 1, 0.0, 1, 1, 16)


def _disagg(spec, batch=16.0):
    return rq.disaggregated_figures(
        TARGET, PRESETS["default"], 16, WORK, (GPU, P_LAYOUT, 4.0, 1), (GPU, LAYOUT, batch, 2), spec=spec
    )


def test_disaggregated_gamma_0_is_no_draft():
    plain, zero = _disagg(None), _disagg(rq.Speculation(DRAFT, 0.0, 0.7))
    for field in ("tpot_s", "ttft_s", "requests_per_s", "usd_per_mtok", "weights_bytes_per_device"):
        assert np.all(zero[field] == plain[field]), field


def test_disaggregated_prefill_runs_the_draft_too():
    plain, drafted = _disagg(None), _disagg(rq.Speculation(DRAFT, 2.0, 0.7))
    p = PRESETS["default"]
    target = rq.prefill_step(TARGET, GPU, p, 16, P_LAYOUT, 4.0, 2000).step_time_s
    draft = rq.prefill_step(DRAFT, GPU, p, ev.DRAFT_WEIGHT_BITS, P_LAYOUT, 4.0, 2000).step_time_s
    assert float(drafted["prefill_step_s"]) == pytest.approx(float(target + draft), rel=1e-12)
    assert float(plain["prefill_step_s"]) == pytest.approx(float(target), rel=1e-12)
    assert float(drafted["prefill_requests_per_s"]) == pytest.approx(4.0 / float(target + draft), rel=1e-12)
    assert drafted["ttft_s"] > plain["ttft_s"]
    assert drafted["decode_requests_per_s"] > plain["decode_requests_per_s"]  # batch 16 is memory-bound: drafting helps


def test_the_fastest_disaggregated_answer_drafts_and_pairs_a_drafting_prefill():
    q, *_ = _setting("llama70b-draft8b-agg-disagg")
    answer = fastest(q, None)
    assert answer.setup.serving == "disagg" and answer.setup.gamma > 0
    s = answer.setup
    fig = rq.disaggregated_figures(
        q.model,
        q.preset,
        s.weight_bits,
        q.whole_requests,
        (
            q.gpus[0],
            ev.Layout.of(s.prefill_tp, s.prefill_tp_2d, s.prefill_pp, 0, 1, 1, s.kv_bits),
            float(s.prefill_batch),
            s.prefill_instances,
        ),
        (
            q.gpus[0],
            ev.Layout.of(s.tp, s.tp_2d, s.pp, q.context, 1, s.ep, s.kv_bits),
            float(s.batch),
            s.decode_instances,
        ),
        spec=rq.Speculation(q.draft, s.gamma, q.acceptance),
    )
    for field in ("tpot_s", "ttft_s", "usd_per_mtok"):
        assert answer.figures[field] == pytest.approx(float(fig[field]), rel=1e-12), field


@pytest.mark.parametrize("name", ["llama70b-draft8b-p90-agg-disagg", "llama70b-draft8b-p99-bursty-agg"])
def test_a_drafted_answer_at_a_percentile_reports_the_queueing_models_figures_of_its_rounds(name):
    """The answer's TTFT and TPOT are those percentiles at its load, from the queueing model priced with its rounds
    (the draft at the answer's gamma), and they meet the limits."""
    q, *_ = _setting(name)
    answer = cheapest(q, None)
    s = answer.setup
    assert s.gamma > 0
    spec = rq.Speculation(q.draft, s.gamma, q.acceptance)
    layout = ev.Layout.of(s.tp, s.tp_2d, s.pp, q.context, 1, s.ep, s.kv_bits)
    args = (q.slo_percentile, q.model, q.gpus[0], q.preset, s.weight_bits, layout, float(s.batch), q.whole_requests)
    if s.disaggregated:
        tpot = tq.decode_percentile_tpot_s(*args, q.arrival_scv, spec)
    else:
        tpot = tq.aggregated_percentile_tpot_s(*args, s.chunk_tokens, q.arrival_scv, spec)
        ttft = qm.aggregated_percentile_ttft_s(*args, s.chunk_tokens, q.arrival_scv, spec)
        assert answer.figures["ttft_s"] == pytest.approx(float(ttft), rel=1e-12)
    assert answer.figures["tpot_s"] == pytest.approx(float(tpot), rel=1e-12)
    assert answer.figures["tpot_s"] <= q.max_tpot_s * (1 + 1e-9)
    assert answer.figures["ttft_s"] <= q.max_ttft_s * (1 + 1e-9)


def test_a_pooled_fleet_model_with_a_draft_plans_prefill_instances_that_prefill_it(tmp_path):
    """Fleet pools with a draft (tests/test_fleet_speculative.py has the MIP against brute force): from a file."""
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        "models:\n  - name: chat\n    model: llama-3-70b\n    draft: llama-3-8b\n    isl: 2000\n    osl: 500\n"
        "    serving: disagg\n    demand_req_s: 1\n    tpot_ms: 15\ngpus:\n  h100-sxm: 16\n"
    )
    rows = api.plan(fleet).rows
    assert {r["role"] for r in rows} == {"prefill", "decode"}
    assert all(r["gamma"] == 1 for r in rows if r["role"] == "prefill")


def test_evaluate_prices_a_drafting_setup_as_the_evaluator():
    setup = dict(model="llama-3-70b", gpu="h100-sxm", tp=4, pp=1, batch=32, isl=2000, osl=500, draft="llama-3-8b")
    row = api.evaluate_setups([{**setup, "gamma_max": 2, "acceptance": 0.7}]).iloc[0]
    fig = _agg(PRESETS["default"], 32.0, rq.Speculation(DRAFT, 2.0, 0.7))
    assert row["tpot_s"] == pytest.approx(float(fig["tpot_s"]), rel=1e-12)
    assert row["ttft_s"] == pytest.approx(float(fig["ttft_s"]), rel=1e-12)


def test_mtp_drafts_with_the_models_own_module_on_its_expert_parallel_layout():
    """``draft="mtp"``: one block of the model's own architecture (its MoE layer, experts split as the target's),
    so the cheapest answer's rounds are priced with that block at the answer's gamma."""
    q, *_ = _setting("deepseek-mtp-h200")
    assert q.draft == mtp_module(q.model) and q.draft.n_layers == 1 and q.draft.n_experts == q.model.n_experts
    answer = cheapest(q, None)
    s = answer.setup
    assert s.gamma > 0 and s.ep > 1
    layout = ev.Layout.of(s.tp, s.tp_2d, s.pp, q.context, 1, s.ep, s.kv_bits, dp_attention=s.dp_attention)
    assert layout.for_draft(q.draft).ep == layout.ep
    spec = rq.Speculation(q.draft, s.gamma, q.acceptance)
    fig = rq.aggregated_figures(
        q.model, q.gpus[0], q.preset, s.weight_bits, layout, s.batch, q.whole_requests, s.chunk_tokens, 1.0, spec
    )
    assert answer.figures["tpot_s"] == pytest.approx(float(fig["tpot_s"]), rel=1e-12)


def test_mtp_for_a_model_without_an_mtp_module_is_one_line_naming_the_draft():
    with pytest.raises(InvalidInput, match="multi-token-prediction") as err:
        api.question("llama-3-70b", "h100-sxm", draft="mtp", isl=2000, osl=500)
    assert err.value.field == "draft" and "\n" not in str(err.value)


def test_an_unknown_draft_is_one_line_that_offers_mtp():
    with pytest.raises(InvalidInput, match="Or give mtp") as err:
        api.question("deepseek-v3", "h200", draft="nonsense", isl=2000, osl=500)
    assert err.value.field == "draft" and "\n" not in str(err.value)


def test_a_query_with_mtp_launches_the_engines_mtp_speculator(tmp_path, capsys):
    args = ["cheapest", "--model", "deepseek-v3", "--gpu", "h200", "--weight-bits", "8", "--draft", "mtp"]
    args += ["--gamma-max", "1", "--isl", "1000", "--osl", "1000", "--tpot-ms", "40", "--tp-degrees", "8"]
    assert main([*args, "--emit", str(tmp_path), "--engine", "sglang,vllm"]) == 0
    capsys.readouterr()
    assert "--speculative-algorithm NEXTN" in (tmp_path / "sglang.serve.sh").read_text()
    assert '"method":"mtp"' in (tmp_path / "vllm.serve.sh").read_text()
