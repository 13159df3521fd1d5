"""Checkpoints that keep some weight groups wider than their weight bits (``Preset.mixed_precisions``).

NVIDIA's NVFP4 DeepSeek-R1 checkpoints quantize the experts and dense layers to 4 bits and keep the attention's q/kv
projections, the embedding and the output head in BF16 (``specs.NVFP4_MLA_MOE``): the default preset stores, reads
and multiplies those groups at 16 bits; the paper preset keeps every weight at the weight bits. The tests here leave
the 4-bit groups' block scales out (``card_fp4_block_scales``, tests/test_fp4_block_scales.py).
"""

from dataclasses import replace

import numpy as np
import pytest

from roofline_opt import catalog
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics.specs import DEFAULT, PAPER

DEEPSEEK = catalog.load_model("deepseek-v3")
LLAMA = catalog.load_model("llama-3.3-70b")
B200 = catalog.load_gpu("b200")
FLAT_FP4 = replace(DEFAULT, card_fp4_block_scales=False)
ALL_AT_WEIGHT_BITS = replace(FLAT_FP4, mixed_precisions=())
LAYOUT = ev.Layout.of(8, False, 1, 2048, ep=8)


def _kept_params() -> float:
    """Parameters NVFP4 DeepSeek keeps at 16 bits: every layer's q/kv projections, the embedding and the head."""
    sz = ev.model_sizes(DEEPSEEK)
    return DEEPSEEK.n_layers * sz.qkv_params_per_layer + sz.embedding_params


def test_a_step_reads_the_bf16_kept_projections_and_head_at_two_bytes_per_parameter():
    mixed = ev.hbm_traffic_bytes(DEEPSEEK, B200, FLAT_FP4, 4, LAYOUT, 16.0)
    uniform = ev.hbm_traffic_bytes(DEEPSEEK, B200, ALL_AT_WEIGHT_BITS, 4, LAYOUT, 16.0)
    sz = ev.model_sizes(DEEPSEEK)
    read_per_step = DEEPSEEK.n_layers * sz.qkv_params_per_layer + DEEPSEEK.vocab * DEEPSEEK.d_model
    assert mixed - uniform == pytest.approx((2.0 - 0.5) * read_per_step, rel=1e-12)


def test_memory_holds_the_bf16_kept_groups_at_two_bytes_per_parameter():
    mixed = ev.memory(DEEPSEEK, B200, FLAT_FP4, 4, LAYOUT, 16.0).weights_bytes
    uniform = ev.memory(DEEPSEEK, B200, ALL_AT_WEIGHT_BITS, 4, LAYOUT, 16.0).weights_bytes
    assert mixed - uniform == pytest.approx((2.0 - 0.5) * _kept_params() / 8, rel=1e-12)


def test_a_dp_attention_gpu_holds_its_replicated_bf16_groups_whole():
    dep8 = ev.Layout.of(8, False, 1, 2048, ep=8, dp_attention=True)
    mixed = ev.memory(DEEPSEEK, B200, FLAT_FP4, 4, dep8, 16.0).weights_bytes
    uniform = ev.memory(DEEPSEEK, B200, ALL_AT_WEIGHT_BITS, 4, dep8, 16.0).weights_bytes
    assert mixed - uniform == pytest.approx((2.0 - 0.5) * _kept_params(), rel=1e-12)


def test_the_bf16_kept_gemms_run_at_the_16_bit_rate_and_the_experts_at_the_4_bit_rate():
    tokens = 4096.0
    mixed = ev.step(DEEPSEEK, B200, FLAT_FP4, 4, LAYOUT, tokens).compute_s
    uniform = ev.step(DEEPSEEK, B200, ALL_AT_WEIGHT_BITS, 4, LAYOUT, tokens).compute_s
    per_gpu_flop = 2.0 * _kept_params() * tokens / 8
    at_16, at_4 = (ev.sustained_flop_per_s(B200, DEFAULT, bits) for bits in (16, 4))
    assert mixed - uniform == pytest.approx(per_gpu_flop * (1.0 / at_16 - 1.0 / at_4), rel=1e-9)


def test_an_8_bit_deepseek_and_a_4_bit_llama_keep_every_weight_at_their_weight_bits():
    assert ev.weight_precision(DEEPSEEK, B200, DEFAULT, 8).uniform
    assert ev.weight_precision(LLAMA, B200, DEFAULT, 4).uniform
    assert not ev.weight_precision(DEEPSEEK, B200, DEFAULT, 4).uniform


def test_the_paper_preset_prices_every_weight_of_a_4_bit_model_at_4_bits():
    assert ev.weight_precision(DEEPSEEK, B200, PAPER, 4).uniform
    weights = ev.memory(DEEPSEEK, B200, PAPER, 4, LAYOUT, 1.0).weights_bytes
    assert np.all(weights == 0.5 * ev.model_sizes(DEEPSEEK).total_params)
