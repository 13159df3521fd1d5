"""Host time per speculative round (``Preset.speculative_round_host_s``): an engine whose speculative loop the GPU waits
on pays it once per draft-and-verify round, in the decode-only time per token, in whole requests' TPOT and worst
gap, and in the MIP's pieces (answers equal enumeration); no round, no host time; the paper and default presets pay
none."""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np
import pytest

from roofline_opt import api, catalog
from roofline_opt.catalog.profiles import profile_from_mapping
from roofline_opt.optimize.enumerate import enumerate_best, feasible_points
from roofline_opt.optimize.pieces import request_pieces
from roofline_opt.optimize.queries import cheapest
from roofline_opt.optimize.testing import assert_same_optimum
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics import requests as rq
from roofline_opt.physics.profiles import EngineProfile
from roofline_opt.physics.specs import PRESETS

HOST_S = 2e-3
DEFAULT = PRESETS["default"]
WITH_HOST = replace(DEFAULT, speculative_round_host_s=HOST_S)
TARGET, DRAFT = catalog.load_model("llama-3-70b"), catalog.load_model("llama-3-8b")
GPU = catalog.load_gpu("h100-sxm")
WORK = rq.Workload.single(2000, 500)
LAYOUT = ev.Layout.of(4, False, 1, WORK.decode_context, 1, 1, 16)
ACCEPTANCE = 0.7


def _decode_only(preset, gamma):
    return ev.time_per_token_with_gamma(TARGET, GPU, preset, 16, LAYOUT, 8.0, gamma, DRAFT, ACCEPTANCE)


def _agg(preset, spec):
    return rq.aggregated_figures(TARGET, GPU, preset, 16, LAYOUT, 32.0, WORK, 2048, 1.0, spec)


@pytest.mark.parametrize("gamma", [1.0, 3.0])
def test_decode_only_time_per_token_gains_the_host_time_over_the_rounds_tokens(gamma):
    added = _decode_only(WITH_HOST, gamma) - _decode_only(DEFAULT, gamma)
    assert float(added) == pytest.approx(HOST_S / float(ev.expected_tokens_per_round(ACCEPTANCE, gamma)), rel=1e-9)


@pytest.mark.parametrize("gamma", [1.0, 3.0])
def test_whole_request_tpot_gains_the_host_time_over_the_rounds_tokens(gamma):
    spec = rq.Speculation(DRAFT, gamma, ACCEPTANCE)
    added = _agg(WITH_HOST, spec)["tpot_s"] - _agg(DEFAULT, spec)["tpot_s"]
    assert float(added) == pytest.approx(HOST_S / float(spec.tokens_per_round), rel=1e-9)


def test_the_worst_gap_is_a_round_and_carries_the_host_time_once():
    spec = rq.Speculation(DRAFT, 2.0, ACCEPTANCE)
    added = _agg(WITH_HOST, spec)["max_itl_s"] - _agg(DEFAULT, spec)["max_itl_s"]
    assert float(added) == pytest.approx(HOST_S, rel=1e-9)


def test_without_a_draft_no_host_time_is_paid():
    plain, zero_gamma = _agg(WITH_HOST, None), _agg(WITH_HOST, rq.Speculation(DRAFT, 0.0, ACCEPTANCE))
    for field in ("tpot_s", "ttft_s", "max_itl_s"):
        assert np.all(zero_gamma[field] == plain[field]), field
        assert np.all(plain[field] == _agg(DEFAULT, None)[field]), field


def test_zero_host_time_leaves_a_round_its_steps_over_its_tokens_exactly():
    step = rq.tpot_step(TARGET, GPU, DEFAULT, 16, LAYOUT, 8.0, None, 0.0, 0.0, rq.Speculation(DRAFT, 2.0, ACCEPTANCE))
    assert isinstance(step, rq.Round)
    steps = sum(w * s.step_time_s for w, s in step.terms) / step.tokens
    assert np.all(step.step_time_s == steps)


@pytest.mark.parametrize("preset", ["paper", "default"])
def test_the_packaged_presets_pay_no_host_time(preset):
    assert PRESETS[preset].speculative_round_host_s == 0.0


def test_a_profile_sets_the_host_time_for_every_accelerator():
    where = "test profile"
    profile = profile_from_mapping(
        {
            "name": "spec-v1",
            "engine_versions": "SGLang 0.5.12 without SGLANG_ENABLE_SPEC_V2",
            "settings": {"speculative_round_host_s": 0.00196},
            "accelerators": [{"accelerators": ["*"], "flop_efficiency": 0.7, "hbm_efficiency": 0.75}],
        },
        where,
    )
    assert profile.preset_named("h200").speculative_round_host_s == 0.00196


HOST_PROFILE = EngineProfile("host", "", "", settings=(("speculative_round_host_s", HOST_S),))
SMALL = dict(tp_degrees=(1, 2, 4, 8), pp_degrees=(1,), tp_modes=("1d",), max_batch=128, gamma_max=3)
REQUESTS = {"decode-only": dict(), "whole-requests": dict(isl=2000, osl=500, ttft_ms=2000)}


@functools.cache
def _host_question(requests: str):
    q = api.question("llama-3-70b", "h100-sxm", draft="llama-3-8b", profile=HOST_PROFILE, **SMALL, **REQUESTS[requests])
    return q, feasible_points(q)


@pytest.mark.parametrize("tok_s", [30.0, 60.0, 90.0])
@pytest.mark.parametrize("requests", REQUESTS)
def test_the_mip_answer_with_host_time_equals_enumeration(requests, tok_s):
    q, pts = _host_question(requests)
    answer, oracle = cheapest(q, tok_s), enumerate_best(q, "cheapest", tok_s, pts)
    assert answer.setup.gamma > 0
    assert_same_optimum("cheapest", answer, oracle, tok_s)
    assert_same_optimum("cheapest", oracle, answer, tok_s)


def test_every_whole_request_piece_carries_the_host_time_so_their_max_is_the_tpot():
    q, _ = _host_question("whole-requests")
    batch = np.array([[8.0], [64.0]])
    spec = rq.Speculation(DRAFT, np.array([2.0]), ACCEPTANCE)
    fig = rq.tpot_step(TARGET, GPU, q.preset_on(GPU), 16, LAYOUT, batch, WORK, 2048, np.array([True]), spec)
    values, _ = request_pieces(q, fig, batch[0], batch[1])
    np.testing.assert_allclose(np.max(values, axis=0), fig.step_time_s, rtol=1e-12)
