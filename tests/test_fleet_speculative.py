"""Speculative decoding (a draft model) with whole requests in fleets: aggregated models choose gamma per layout, the
MIP equals brute force (with limits at a percentile too, and with prefill and decode pools), every row is priced as
the single-model evaluator prices it."""

from __future__ import annotations

import numpy as np
import pytest
from fleet_cases import OPTIONS, fleet_of, solved

from roofline_opt.optimize.fleet import plan_fleet
from roofline_opt.optimize.testing import assert_same_fleet_optimum
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics import queueing
from roofline_opt.physics import requests as rq
from roofline_opt.physics import tpot_percentiles as tq

SMALL = {"tp_degrees": [1, 2, 4, 8], "pp_degrees": [1], "tp_modes": ["1d"], "max_batch": 256}


def _chat(tpot_ms: float, gamma_max: int = 4, **extra) -> dict:
    """llama-3-70b at 8 bits, 2,000 / 400 tokens per request, 4 requests/s, drafted by llama-3-8b."""
    entry = {"name": "chat", "model": "llama-3-70b", "weight_bits": [8], "demand_req_s": 4, "isl": 2000, "osl": 400}
    draft = {"draft": "llama-3-8b", "gamma_max": gamma_max}
    return {**entry, "tpot_ms": tpot_ms, "ttft_ms": 1000, **SMALL, **draft, **extra}


CODE = {"name": "code", "model": "llama-3-8b", "demand_tok_s": 5000, "tpot_ms": 20, **SMALL}
FLEETS = {
    "tight TPOT": {"gpus": {"h100-sxm": 16}, "models": [_chat(15)]},
    "beside a model without a draft": {"gpus": {"h100-sxm": 16}, "models": [_chat(12), CODE]},
    "served within a budget": {
        "gpus": {"h100-sxm": 16},
        "objective": "served",
        "max_usd_per_hour": 12,
        "models": [_chat(15), {**CODE, "weight": 0.2}],
    },
}


@pytest.fixture(scope="module")
def plans() -> dict:
    return solved(FLEETS)


@pytest.mark.parametrize("key", list(FLEETS))
def test_the_mip_equals_brute_force_with_a_drafted_model(plans, key) -> None:
    assert_same_fleet_optimum(*plans[key])


def test_a_draft_serves_a_tight_tpot_for_half_the_cost(plans) -> None:
    spec, mip, _ = plans["tight TPOT"]
    plain = plan_fleet(fleet_of({**FLEETS["tight TPOT"], "models": [_chat(15, gamma_max=0)]}), "mip", OPTIONS)
    assert all(r["gamma"] > 0 for r in mip.rows)
    assert mip.usd_per_hour == pytest.approx(plain.usd_per_hour / 2, rel=1e-9)


@pytest.mark.parametrize("key", list(FLEETS))
def test_every_drafted_row_is_priced_as_the_evaluator_prices_its_rounds(plans, key) -> None:
    spec, mip, _ = plans[key]
    by_name = {m.name: m for m in spec.models}
    for row in mip.rows:
        fm = by_name[row["model"]]
        q = fm.question
        assert row["meets_limits"]
        if q.draft is None or row["gamma"] == 0:
            continue
        gpu = spec.pool.gpu(row["gpu"])
        layout = ev.Layout.of(row["tp"], row["tp_2d"], row["pp"], q.context, 1, row["ep"], row["kv_bits"])
        draft = rq.Speculation(q.draft, float(row["gamma"]), q.acceptance)
        args = (q.model, gpu, q.preset_on(gpu), row["weight_bits"], layout, float(row["batch"]))
        w, chunk = q.whole_requests, float(row["chunk_tokens"])
        tpot = float(np.asarray(rq.tpot_step(*args, w, chunk, 1.0, draft).step_time_s))
        ttft = float(np.asarray(rq.ttft_aggregated_s(*args, w, chunk, draft)))
        assert row["tpot_ms"] == pytest.approx(tpot * 1e3, rel=1e-9)
        assert row["ttft_ms"] == pytest.approx(ttft * 1e3, rel=1e-9)
        assert tpot <= fm.max_time_per_token_s * (1 + 1e-9) and ttft <= q.max_ttft_s * (1 + 1e-9)
        assert bool(np.asarray(rq.aggregated_memory(*args, w, 1.0, draft).fits))
        assert row["batch"] <= rq.stable_batch_limit(w, chunk, draft)


POOLED_FLEETS = {
    "pools with a draft": {"gpus": {"h100-sxm": 16}, "models": [_chat(15, gamma_max=3, serving="disagg")]},
    "p90 pools with a draft beside a model without one": {
        "gpus": {"h100-sxm": 16},
        "models": [_chat(20, gamma_max=2, serving="disagg", percentile=90), CODE],
    },
}


@pytest.fixture(scope="module")
def pooled_plans() -> dict:
    return solved(POOLED_FLEETS)


@pytest.mark.parametrize("key", list(POOLED_FLEETS))
def test_the_mip_equals_brute_force_with_drafted_pools(pooled_plans, key) -> None:
    assert_same_fleet_optimum(*pooled_plans[key])


@pytest.mark.parametrize("key", list(POOLED_FLEETS))
def test_drafted_pools_prefill_the_draft_and_decode_its_rounds(pooled_plans, key) -> None:
    """Every prefill row prefills the draft too (gamma 1: ``requests.prefill_figures`` with it); a decode row that
    drafts is priced with its rounds, at the percentile where the TPOT limit holds there."""
    spec, mip, _ = pooled_plans[key]
    fm = next(m for m in spec.models if m.name == "chat")
    q = fm.question
    rows = [r for r in mip.rows if r["model"] == "chat"]
    assert {r["role"] for r in rows} == {"prefill", "decode"}
    for row in rows:
        gpu = spec.pool.gpu(row["gpu"])
        if row["role"] == "prefill":
            assert row["gamma"] == 1
            continue
        assert row["gamma"] > 0
        layout = ev.Layout.of(row["tp"], row["tp_2d"], row["pp"], q.context, 1, row["ep"], row["kv_bits"])
        draft = rq.Speculation(q.draft, float(row["gamma"]), q.acceptance)
        args = (q.model, gpu, q.preset, row["weight_bits"], layout, float(row["batch"]))
        if fm.tpot_percentile is None:
            tpot = float(np.asarray(rq.tpot_step(*args, q.whole_requests, 0.0, 0.0, draft).step_time_s))
        else:
            tpot = float(tq.decode_percentile_tpot_s(fm.tpot_percentile, *args, q.whole_requests, 1.0, draft))
        assert row["tpot_ms"] == pytest.approx(tpot * 1e3, rel=1e-9)
        assert tpot <= fm.max_time_per_token_s * (1 + 1e-9)


def test_a_drafted_pool_is_cheaper_than_the_same_pool_without_its_draft(pooled_plans) -> None:
    _, mip, _ = pooled_plans["pools with a draft"]
    plain = {**POOLED_FLEETS["pools with a draft"], "models": [_chat(15, gamma_max=0, serving="disagg")]}
    assert mip.usd_per_hour < plan_fleet(fleet_of(plain), "mip", OPTIONS).usd_per_hour


PERCENTILE_FLEETS = {
    "p90 limits with a draft": {"gpus": {"h100-sxm": 16}, "models": [_chat(20, percentile=90), CODE]},
    "bursty p99 with a draft": {"gpus": {"h100-sxm": 16}, "models": [_chat(25, percentile=99, burstiness=2.0)]},
}


@pytest.fixture(scope="module")
def percentile_plans() -> dict:
    return solved(PERCENTILE_FLEETS)


@pytest.mark.parametrize("key", list(PERCENTILE_FLEETS))
def test_the_mip_equals_brute_force_with_a_drafted_model_at_a_percentile(percentile_plans, key) -> None:
    assert_same_fleet_optimum(*percentile_plans[key])


@pytest.mark.parametrize("key", list(PERCENTILE_FLEETS))
def test_a_drafted_row_at_a_percentile_reports_the_queueing_models_figures_of_its_rounds(percentile_plans, key):
    spec, mip, _ = percentile_plans[key]
    fm = next(m for m in spec.models if m.name == "chat")
    q = fm.question
    rows = [r for r in mip.rows if r["model"] == "chat"]
    assert rows and all(r["gamma"] > 0 for r in rows)
    for row in rows:
        gpu = spec.pool.gpu(row["gpu"])
        layout = ev.Layout.of(row["tp"], row["tp_2d"], row["pp"], q.context, 1, row["ep"], row["kv_bits"])
        draft = rq.Speculation(q.draft, float(row["gamma"]), q.acceptance)
        args = (q.slo_percentile, q.model, gpu, q.preset_on(gpu), row["weight_bits"], layout, float(row["batch"]))
        w, chunk = q.whole_requests, float(row["chunk_tokens"])
        ttft = float(queueing.aggregated_percentile_ttft_s(*args, w, chunk, q.arrival_scv, draft))
        tpot = float(tq.aggregated_percentile_tpot_s(*args, w, chunk, q.arrival_scv, draft))
        assert row["ttft_ms"] == pytest.approx(ttft * 1e3, rel=1e-9)
        assert row["tpot_ms"] == pytest.approx(tpot * 1e3, rel=1e-9)
        assert ttft <= q.max_ttft_s * (1 + 1e-9) and tpot <= fm.max_time_per_token_s * (1 + 1e-9)
