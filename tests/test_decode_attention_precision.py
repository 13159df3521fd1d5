"""Decode attention at the KV cache's precision (``Preset.decode_attention_at_kv_precision``): the tokens a step decodes
or verifies attend over the cached context at the tensor-core rate of the cache's precision, not the weights'; prompt
attention and the GEMMs keep the weights' rate; the paper preset keeps the notebook's rate. Expected values are built
from the evaluator's own parts."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from roofline_opt import catalog
from roofline_opt.physics import dp_attention
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics import requests as rq
from roofline_opt.physics.specs import DEFAULT, PAPER

H200 = catalog.load_gpu("h200")
B200 = catalog.load_gpu("b200")
V100 = catalog.load_gpu("v100")
MI325X = catalog.load_gpu("mi325x")
DEEPSEEK_V3 = catalog.load_model("deepseek-v3")
OFF = replace(DEFAULT, decode_attention_at_kv_precision=False)
FP8_OVER_BF16 = H200.flop_per_s_by_bits[8] / H200.flop_per_s_by_bits[16]
"""How much slower the H200's 16-bit tensor cores are than its FP8 ones (about 2)."""
TP8 = ev.Layout.of(8, False, 1, 8704, 1, 8, kv_bits=16)
DP8 = ev.Layout.of(8, False, 1, 8704, 1, 8, kv_bits=16, dp_attention=True)


def _attention_flop(layout: ev.Layout, batch: float) -> float:
    sz = ev.model_sizes(DEEPSEEK_V3)
    s = float(layout.tokens_per_step)
    return (
        sz.attn_flop_per_ctx_token_per_layer * DEEPSEEK_V3.n_layers * (float(layout.context) + (s - 1) / 2) * batch * s
    )


def test_paper_times_decode_attention_at_the_weights_rate_and_default_at_the_caches():
    assert not PAPER.decode_attention_at_kv_precision
    assert DEFAULT.decode_attention_at_kv_precision


@pytest.mark.parametrize("kv_bits", [16, 8])
def test_the_rate_is_the_caches_precision_on_a_card_that_has_it(kv_bits):
    layout = replace(TP8, kv_bits=np.asarray(float(kv_bits)))
    assert ev.decode_attention_flop_rate(B200, DEFAULT, 4, layout) == B200.flop_per_s_by_bits[kv_bits]


def test_without_the_setting_the_rate_is_the_weights_even_for_an_fp4_model():
    assert ev.decode_attention_flop_rate(B200, OFF, 4, TP8) == B200.flop_per_s_by_bits[4]


def test_a_cache_precision_the_card_has_no_rate_for_takes_the_next_wider_one():
    four_bit = replace(TP8, kv_bits=np.asarray(4.0))
    assert 4 not in MI325X.flop_per_s_by_bits
    assert ev.decode_attention_flop_rate(MI325X, DEFAULT, 8, four_bit) == MI325X.flop_per_s_by_bits[8]


def test_the_rate_follows_each_layouts_own_cache_precision():
    layouts = ev.Layout.of(8, False, 1, 8704, 1, 8, kv_bits=np.array([16.0, 8.0]))
    rates = ev.decode_attention_flop_rate(H200, DEFAULT, 8, layouts)
    np.testing.assert_array_equal(rates, [H200.flop_per_s_by_bits[16], H200.flop_per_s_by_bits[8]])


def test_a_16_bit_cache_times_an_fp8_models_decode_attention_at_the_16_bit_rate():
    step = ev.step(DEEPSEEK_V3, H200, DEFAULT, 8, TP8, 64.0)
    expected = _attention_flop(TP8, 64.0) / (8 * H200.flop_per_s_by_bits[16] * DEFAULT.flop_efficiency)
    assert float(step.decode_attention_compute_s) == pytest.approx(expected, rel=1e-12)


def test_the_gemms_keep_the_weights_rate():
    on = ev.step(DEEPSEEK_V3, H200, DEFAULT, 8, TP8, 64.0)
    off = ev.step(DEEPSEEK_V3, H200, OFF, 8, TP8, 64.0)
    assert float(on.gemm_compute_s) == pytest.approx(float(off.gemm_compute_s), rel=1e-12)
    assert float(on.decode_attention_compute_s) == pytest.approx(
        FP8_OVER_BF16 * float(off.decode_attention_compute_s), rel=1e-12
    )


def test_a_verification_steps_attention_costs_gamma_plus_one_times_the_flops_at_the_caches_rate():
    gamma = 3.0
    verifying = TP8.verifying(gamma)
    step = ev.step(DEEPSEEK_V3, H200, DEFAULT, 8, verifying, 64.0)
    expected = _attention_flop(verifying, 64.0) / (8 * H200.flop_per_s_by_bits[16] * DEFAULT.flop_efficiency)
    assert float(step.decode_attention_compute_s) == pytest.approx(expected, rel=1e-12)


def test_data_parallel_attention_times_the_busiest_gpus_attention_at_the_caches_rate():
    on = ev.step(DEEPSEEK_V3, H200, DEFAULT, 8, DP8.verifying(1.0), 256.0)
    off = ev.step(DEEPSEEK_V3, H200, OFF, 8, DP8.verifying(1.0), 256.0)
    busiest = float(dp_attention.busiest_gpu_attention_flop(DEEPSEEK_V3, DEFAULT, DP8.verifying(1.0), 256.0))
    rates = H200.flop_per_s_by_bits
    moved = busiest * (1 / rates[16] - 1 / rates[8]) / DEFAULT.flop_efficiency
    assert float(on.compute_s) == pytest.approx(float(off.compute_s) + moved, rel=1e-12)


def test_prompt_attention_in_a_loaded_step_keeps_the_weights_rate():
    workload = rq.Workload.single(8192, 1024)
    on = rq.tpot_step(DEEPSEEK_V3, H200, DEFAULT, 8, TP8, 64.0, workload, 2048, 1.0).chunk
    off = rq.tpot_step(DEEPSEEK_V3, H200, OFF, 8, TP8, 64.0, workload, 2048, 1.0).chunk
    assert float(on.prefill_attention_compute_s) == pytest.approx(float(off.prefill_attention_compute_s), rel=1e-12)
    assert float(on.decode_attention_compute_s) == pytest.approx(
        FP8_OVER_BF16 * float(off.decode_attention_compute_s), rel=1e-12
    )
    added = float(on.decode_attention_compute_s) - float(off.decode_attention_compute_s)
    assert float(on.compute_s) == pytest.approx(float(off.compute_s) + added, rel=1e-12)


def test_a_prefill_step_is_unchanged():
    on = rq.prefill_step(DEEPSEEK_V3, H200, DEFAULT, 8, TP8, 4.0, 4096)
    off = rq.prefill_step(DEEPSEEK_V3, H200, OFF, 8, TP8, 4.0, 4096)
    assert float(on.step_time_s) == float(off.step_time_s)


def test_a_card_without_fp8_runs_an_8_bit_caches_attention_at_its_16_bit_rate():
    eight_bit = replace(TP8, kv_bits=np.asarray(8.0))
    v100 = replace(V100, flop_per_s_by_bits={16: V100.flop_per_s_by_bits[16]})
    assert ev.decode_attention_flop_rate(v100, DEFAULT, 16, eight_bit) == V100.flop_per_s_by_bits[16]
