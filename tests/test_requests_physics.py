"""The physics of whole requests (physics.md 10.1-10.4): KV precision, prefill, aggregated, disaggregated serving."""

from __future__ import annotations

import math

import numpy as np
import pytest

from roofline_opt import api, catalog
from roofline_opt.optimize.queries import cheapest, fastest
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics import requests as rq
from roofline_opt.physics.specs import DEFAULT, PAPER

H100 = catalog.load_gpu("h100-sxm")
H200 = catalog.load_gpu("h200")
LLAMA70 = catalog.resolve_model("llama-3-70b", "model")[0]
MIXTRAL = catalog.resolve_model("mixtral-8x22b", "model")[0]
BATCHES = np.array([[1.0], [7.0], [64.0], [900.0]])


def _layouts(context: float, kv_bits: int = 16) -> ev.Layout:
    return ev.Layout.of(
        np.array([1, 8, 8, 16]), np.array([False, False, True, False]), np.array([1, 1, 2, 4]), context, kv_bits=kv_bits
    )


@pytest.mark.parametrize("model", [LLAMA70, MIXTRAL], ids=["dense", "moe"])
@pytest.mark.parametrize("preset", [PAPER, DEFAULT], ids=["paper", "default"])
def test_no_prompt_aggregated_figures_are_the_decode_only_figures_exactly(model, preset):
    """I = 0: every figure of an aggregated instance equals today's decode step at the same context, bit for bit."""
    layout = _layouts(6000.0)
    old = ev.evaluate(model, H100, preset, 16, layout, BATCHES)
    new = rq.aggregated_figures(model, H100, preset, 16, layout, BATCHES, rq.Workload.single(0, 12000), 2048)
    for key in (
        "step_time_s",
        "memory_s",
        "compute_s",
        "network_s",
        "usd_per_mtok",
        "throughput_tok_s",
        "kv_cache_bytes_per_device",
        "activations_bytes_per_device",
        "fits_in_memory",
    ):
        assert np.array_equal(np.broadcast_to(old[key], new[key].shape), new[key]), key
    assert np.array_equal(new["tpot_s"], old["time_per_token_s"])


@pytest.mark.parametrize("kind", ["fastest", "cheapest"])
def test_no_prompt_questions_answer_like_decode_only_questions(kind):
    """isl = 0 and osl = 2 C prices requests at context C: the same setup and figures as a decode-only question."""
    space = dict(tp_degrees=(1, 2, 4, 8, 16), pp_degrees=(1, 2, 4))
    decode_only = api.question("llama-3-70b", "h100-sxm", context=4000, **space)
    requests = api.question("llama-3-70b", "h100-sxm", isl=0, osl=8000, **space)
    assert requests.context == 4000
    ask = fastest if kind == "fastest" else cheapest
    for target in (None, 3.0) if kind == "fastest" else (None, 40.0):
        old, new = ask(decode_only, target), ask(requests, target)
        assert old.setup.tp == new.setup.tp and old.setup.pp == new.setup.pp and old.setup.batch == new.setup.batch
        assert new.tok_s_per_request == old.tok_s_per_request
        assert new.usd_per_mtok == old.usd_per_mtok


def test_fp8_kv_halves_the_kv_cache_and_its_traffic():
    batch = np.array([32.0])
    bf16, fp8 = (ev.evaluate(LLAMA70, H100, DEFAULT, 8, _layouts(8000.0, kv), batch) for kv in (16, 8))
    assert np.allclose(fp8["kv_cache_bytes_per_device"], bf16["kv_cache_bytes_per_device"] / 2)
    kv_read = ev.kv_bytes_per_token(LLAMA70, 2.0) * 8000 * 32
    saved_s = (bf16["memory_s"] - fp8["memory_s"]) * _layouts(0.0).n_gpus * H100.hbm_bytes_per_s * 0.75
    copies = np.array([1.0, 1.0, 1.0, 2.0])  # TP16 holds its 8 KV heads twice, and each copy is read
    assert np.allclose(saved_s, copies * kv_read / 2)
    assert np.array_equal(fp8["weights_bytes_per_device"], bf16["weights_bytes_per_device"])


def test_prefill_of_a_long_prompt_is_compute_bound_and_writes_its_kv_cache():
    layout = ev.Layout.of(8, False, 1, 0.0)
    step = rq.prefill_step(LLAMA70, H100, DEFAULT, 16, layout, 2.0, 4000)
    assert float(step.compute_s) > float(step.memory_s)
    sizes = ev.model_sizes(LLAMA70)
    flop = 2 * sizes.active_params * 8000 + sizes.attn_flop_per_ctx_token_per_layer * 80 * (3999 / 2) * 8000
    assert float(step.compute_s) == pytest.approx(flop / (8 * H100.flop_per_s_by_bits[16] * 0.7))
    no_write = ev.step(LLAMA70, H100, DEFAULT, 16, ev.Layout.of(8, False, 1, 0.0, 4000), 2.0)
    written = float(step.memory_s - no_write.memory_s) * 8 * H100.hbm_bytes_per_s * 0.75
    assert written == pytest.approx(ev.kv_bytes_per_token(LLAMA70) * 4000 * 2)


def test_aggregated_ttft_counts_one_chunk_step_per_chunk():
    layout = ev.Layout.of(8, False, 1, 4500.0)
    w = rq.Workload.single(4000, 1000)
    small, large = (rq.ttft_aggregated_s(LLAMA70, H100, DEFAULT, 16, layout, 16.0, w, c) for c in (1000, 4000))
    one_chunk = rq._loaded_step(LLAMA70, H100, DEFAULT, 16, layout, 16.0, 1000.0, 1000 * 3999 / 2, 1000 + 1500.0)
    assert float(small) == pytest.approx(4 * float(one_chunk.step_time_s))
    assert float(large) < float(small)


def test_aggregated_tpot_carries_the_prompt_tokens_of_the_steady_state():
    layout = ev.Layout.of(8, False, 1, 4500.0)
    w = rq.Workload.single(4000, 1000)
    with_prompts = rq.aggregated_figures(LLAMA70, H100, DEFAULT, 16, layout, 32.0, w, 2048)
    decode_only = ev.evaluate(LLAMA70, H100, DEFAULT, 16, layout, 32.0)
    assert float(with_prompts["tpot_s"]) > float(decode_only["time_per_token_s"]) * 1.2
    assert float(with_prompts["requests_per_s"]) == pytest.approx(32 / (1000 * float(with_prompts["tpot_s"])))
    assert float(with_prompts["usd_per_mtok"]) == pytest.approx(
        1e6 * float(with_prompts["usd_per_request"]) / 1000, rel=1e-12
    )
    assert float(with_prompts["usd_per_mtok_blended"]) == pytest.approx(float(with_prompts["usd_per_mtok"]) / 5)


def test_chunk_budget_limits_the_batch():
    w = rq.Workload.single(4000, 1000)
    assert float(rq.stable_batch_limit(w, 2048)) == 512
    assert math.isinf(float(rq.stable_batch_limit(rq.Workload.single(0, 100), 2048)))


def test_disaggregated_unit_serves_the_slower_side_and_pays_for_both():
    w = rq.Workload.single(4000, 1000)
    prefill = (H200, ev.Layout.of(4, False, 1, 0.0, kv_bits=8), 2.0, 3)
    decode = (H100, ev.Layout.of(8, False, 1, 4500.0, kv_bits=8), 64.0, 2)
    out = rq.disaggregated_figures(LLAMA70, DEFAULT, 16, w, prefill, decode)
    r_p, r_d = float(out["prefill_requests_per_s"]), float(out["decode_requests_per_s"])
    assert float(out["requests_per_s"]) == pytest.approx(min(3 * r_p, 2 * r_d))
    usd_per_s = 3 * 4 * H200.usd_per_s + 2 * 8 * H100.usd_per_s
    assert float(out["usd_per_request"]) == pytest.approx(usd_per_s / float(out["requests_per_s"]))
    assert float(out["tok_s_per_gpu"]) == pytest.approx(float(out["requests_per_s"]) * 1000 / 28)
    one_direction = 2.0 * min(H200.inter_bytes_per_s, H100.inter_bytes_per_s)  # point to point: the whole link
    transfer = ev.kv_bytes_per_token(LLAMA70, 1.0) * 4000 / (4 * one_direction)
    assert float(out["ttft_s"]) == pytest.approx(float(out["prefill_step_s"]) + transfer)


def test_kv_moves_over_the_scale_up_link_inside_one_domain():
    assert rq.kv_link_bytes_per_s(H100, H100, True) == 2.0 * H100.intra_bytes_per_s  # one direction of NVLink
    assert bool(rq.shares_domain(H100, H100, 2, 4)) and not bool(rq.shares_domain(H100, H100, 4, 8))
    assert not bool(rq.shares_domain(H100, H200, 1, 1))


def test_a_mix_decodes_at_its_output_weighted_context():
    w = rq.Workload((1000, 3000), (1000, 200), (1.0, 1.0))
    assert w.mean_isl == 2000 and w.mean_osl == 600
    assert w.decode_context == pytest.approx((1000 * 1500 + 200 * 3100) / 1200)
    assert rq.Workload.single(4000, 1000).decode_context == 4500


def test_utilisation_cap_raises_prices_and_lowers_served_rate():
    layout = ev.Layout.of(8, False, 1, 4500.0)
    w = rq.Workload.single(4000, 1000)
    full, capped = (rq.aggregated_figures(LLAMA70, H100, DEFAULT, 16, layout, 32.0, w, 2048, u) for u in (1.0, 0.8))
    assert float(capped["usd_per_mtok"]) == pytest.approx(float(full["usd_per_mtok"]) / 0.8)
    assert float(capped["requests_per_s"]) == pytest.approx(float(full["requests_per_s"]) * 0.8)
    assert float(capped["tpot_s"]) == float(full["tpot_s"])
