"""A prefill step on a data-parallel-attention group places whole prompts on its ranks
(``Preset.dp_attention_whole_prompts``): the busiest rank computes ceil(B / G) prompts through attention and the
replicated layers, the routed experts still share the step's B prompts over the group."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from roofline_opt import catalog
from roofline_opt.physics import dp_attention, requests
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics.specs import DEFAULT, PAPER

DEEPSEEK = catalog.load_model("deepseek-v3")
B200 = catalog.load_gpu("b200")
EVEN = replace(DEFAULT, dp_attention_whole_prompts=False)
PROMPT = 8192


def _dep(group: int, tokens: int = PROMPT, context: int = 0) -> ev.Layout:
    return ev.Layout.of(group, False, 1, context, tokens, group, dp_attention=True)


def test_one_prompt_is_computed_whole_by_one_rank_and_its_experts_by_the_group() -> None:
    sz = ev.model_sizes(DEEPSEEK)
    routed = sz.n_moe_layers * DEEPSEEK.n_active_experts * sz.ff_params_per_expert
    attention = sz.attn_flop_per_ctx_token_per_layer * DEEPSEEK.n_layers * (PROMPT - 1) / 2 * PROMPT
    expected = 2.0 * (sz.active_params - routed) * PROMPT + attention + 2.0 * routed * PROMPT / 8
    flop = dp_attention.busiest_gpu_flop(DEEPSEEK, DEFAULT, _dep(8), 1.0, whole_prompts=True)
    assert float(flop) == pytest.approx(expected, rel=1e-12)


def test_a_batch_filling_every_rank_alike_is_the_even_share() -> None:
    whole = requests.prefill_step(DEEPSEEK, B200, DEFAULT, 8, _dep(8), 16.0, PROMPT).step_time_s
    even = requests.prefill_step(DEEPSEEK, B200, EVEN, 8, _dep(8), 16.0, PROMPT).step_time_s
    assert float(whole) == pytest.approx(float(even), rel=1e-12)


def test_nine_prompts_on_eight_ranks_wait_on_the_rank_computing_two() -> None:
    sz = ev.model_sizes(DEEPSEEK)
    routed = sz.n_moe_layers * DEEPSEEK.n_active_experts * sz.ff_params_per_expert
    flop = dp_attention.busiest_gpu_flop(DEEPSEEK, DEFAULT, _dep(8), np.array([9.0, 16.0]), whole_prompts=True)
    replicated = flop - 2.0 * routed * PROMPT * np.array([9.0, 16.0]) / 8
    assert replicated[0] == pytest.approx(replicated[1], rel=1e-12)  # two prompts' worth on the busiest rank
    nine, sixteen = requests.prefill_step(
        DEEPSEEK, B200, DEFAULT, 8, _dep(8), np.array([9.0, 16.0]), PROMPT
    ).step_time_s
    even_nine = requests.prefill_step(DEEPSEEK, B200, EVEN, 8, _dep(8), 9.0, PROMPT).step_time_s
    assert float(even_nine) < nine < sixteen


def test_a_single_prompt_prefills_slower_than_an_eighth_of_it_per_gpu() -> None:
    whole = requests.prefill_step(DEEPSEEK, B200, DEFAULT, 8, _dep(8), 1.0, PROMPT).step_time_s
    even = requests.prefill_step(DEEPSEEK, B200, EVEN, 8, _dep(8), 1.0, PROMPT).step_time_s
    assert float(whole) > 3.0 * float(even)


def test_decode_steps_keep_the_even_share() -> None:
    decode = _dep(8, tokens=1, context=PROMPT)
    batches = np.array([1.0, 3.0, 9.0, 100.0])
    whole = ev.step(DEEPSEEK, B200, DEFAULT, 8, decode, batches).step_time_s
    even = ev.step(DEEPSEEK, B200, EVEN, 8, decode, batches).step_time_s
    np.testing.assert_allclose(whole, even, rtol=1e-12)


def test_the_paper_preset_splits_a_prompt_evenly() -> None:
    paper = requests.prefill_step(DEEPSEEK, B200, PAPER, 8, _dep(8), 1.0, PROMPT).step_time_s
    on = replace(PAPER, dp_attention_whole_prompts=True)
    assert float(requests.prefill_step(DEEPSEEK, B200, on, 8, _dep(8), 1.0, PROMPT).step_time_s) > float(paper)


def test_the_attention_kernel_class_is_the_busiest_ranks_whole_prompt() -> None:
    """Per kernel class, the prompt attention of one 8k prompt on an 8-rank group is the rank holding it."""
    step = ev.step(DEEPSEEK, B200, DEFAULT, 8, _dep(8), 1.0, whole_prompts=True)
    busiest = dp_attention.busiest_gpu_attention_flop(DEEPSEEK, DEFAULT, _dep(8), 1.0, whole_prompts=True)
    rate = ev.sustained_decode_attention_flop_per_s(B200, DEFAULT, 8, _dep(8))
    assert float(step.decode_attention_compute_s) == pytest.approx(float(busiest / rate), rel=1e-12)
