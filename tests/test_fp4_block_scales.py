"""4-bit weights carry their block scales (``Preset.card_fp4_block_scales``, ``GpuSpec.fp4_format``).

NVFP4 (NVIDIA's Blackwell checkpoints) stores one FP8 scale per 16 weights: 4.5 bits per weight. OCP MXFP4 (AMD's
CDNA 4 checkpoints) stores one 8-bit scale per 32: 4.25 bits. Both are in memory and read with the weights every
step; the paper preset keeps the notebook's flat 4 bits.
"""

from dataclasses import replace
from pathlib import Path

import pytest

from roofline_opt import catalog
from roofline_opt.catalog import cards
from roofline_opt.errors import InvalidInput
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics.specs import DEFAULT, PAPER

LLAMA = catalog.load_model("llama-3.3-70b")
DEEPSEEK = catalog.load_model("deepseek-v3")
B200 = catalog.load_gpu("b200")
MI355X = catalog.load_gpu("mi355x")
FLAT = replace(DEFAULT, card_fp4_block_scales=False)
LAYOUT = ev.Layout.of(8, False, 1, 2048)


def _weight_bytes(model, gpu, preset, bits: int = 4) -> float:
    return ev.weight_bytes(model, ev.weight_precision(model, gpu, preset, bits))


def test_nvfp4_weights_on_b200_take_4_5_bits_each() -> None:
    params = ev.model_sizes(LLAMA).total_params
    assert _weight_bytes(LLAMA, B200, DEFAULT) == pytest.approx(4.5 / 8 * params, rel=1e-12)


def test_mxfp4_weights_on_mi355x_take_4_25_bits_each() -> None:
    params = ev.model_sizes(LLAMA).total_params
    assert _weight_bytes(LLAMA, MI355X, DEFAULT) == pytest.approx(4.25 / 8 * params, rel=1e-12)


def test_the_paper_preset_keeps_4_bit_weights_at_4_bits() -> None:
    params = ev.model_sizes(LLAMA).total_params
    assert _weight_bytes(LLAMA, B200, PAPER) == pytest.approx(0.5 * params, rel=1e-12)


def test_a_card_stating_no_fp4_format_keeps_4_bit_weights_at_4_bits() -> None:
    unstated = replace(B200, fp4_format="")
    assert _weight_bytes(LLAMA, unstated, DEFAULT) == _weight_bytes(LLAMA, B200, FLAT)


def test_8_bit_weights_carry_no_fp4_scales() -> None:
    assert _weight_bytes(LLAMA, B200, DEFAULT, 8) == _weight_bytes(LLAMA, B200, FLAT, 8)


def test_the_groups_a_4_bit_deepseek_keeps_in_bf16_carry_no_scales() -> None:
    sz = ev.model_sizes(DEEPSEEK)
    kept = DEEPSEEK.n_layers * sz.qkv_params_per_layer + sz.embedding_params  # BF16 in NVFP4 DeepSeek-R1
    quantized = sz.total_params - kept
    scaled, flat = _weight_bytes(DEEPSEEK, B200, DEFAULT), _weight_bytes(DEEPSEEK, B200, FLAT)
    assert scaled - flat == pytest.approx(0.5 / 8 * quantized, rel=1e-12)


def test_a_step_reads_the_scales_with_the_weights() -> None:
    flat4, flat8 = (ev.hbm_traffic_bytes(LLAMA, B200, FLAT, bits, LAYOUT, 16.0) for bits in (4, 8))
    params_read = float(flat8 - flat4) / 0.5  # one byte per parameter at 8 bits, half at 4: the rest is unchanged
    scaled = ev.hbm_traffic_bytes(LLAMA, B200, DEFAULT, 4, LAYOUT, 16.0)
    assert float(scaled - flat4) == pytest.approx(0.5 / 8 * params_read, rel=1e-9)


def test_the_scales_slow_a_memory_bound_4_bit_step() -> None:
    scaled = ev.step(LLAMA, B200, DEFAULT, 4, LAYOUT, 1.0)
    flat = ev.step(LLAMA, B200, FLAT, 4, LAYOUT, 1.0)
    assert float(scaled.memory_s) > float(flat.memory_s)


def test_a_card_naming_an_unknown_fp4_format_is_refused(tmp_path: Path) -> None:
    text = (cards.packaged_root() / cards.GPUS_SUBDIR / "b200.yaml").read_text()
    card = tmp_path / "my-b200.yaml"
    card.write_text(text.replace('name: "b200"', 'name: "my-b200"').replace('fp4_format: "nvfp4"', 'fp4_format: "fp4"'))
    with pytest.raises(InvalidInput, match="fp4_format.*nvfp4, mxfp4"):
        catalog.load_gpu(str(card))
