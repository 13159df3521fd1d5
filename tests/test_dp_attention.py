"""Data-parallel attention with wide expert parallelism (physics.md 10.5) and MTP drafts: the evaluator's figures
per GPU, the all-to-all over scale-up or scale-out links, and the optimiser choosing the layout family."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from roofline_opt import api, catalog
from roofline_opt.errors import InvalidInput
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics.mtp import mtp_module
from roofline_opt.physics.specs import DEFAULT

DEEPSEEK = catalog.load_model("deepseek-v3")
H200 = catalog.load_gpu("h200")
BATCHES = np.array([1.0, 8.0, 64.0, 512.0])


def _dp(group: int, context: int = 2000) -> ev.Layout:
    return ev.Layout.of(group, False, 1, context, 1, group, dp_attention=True)


def test_a_group_of_one_gpu_is_a_single_gpu() -> None:
    single = ev.evaluate(DEEPSEEK, H200, DEFAULT, 8, ev.Layout.of(1, False, 1, 2000), BATCHES)
    group = ev.evaluate(DEEPSEEK, H200, DEFAULT, 8, _dp(1), BATCHES)
    for name in ("time_per_token_s", "weights_bytes_per_device", "kv_cache_bytes_per_device", "compute_s"):
        np.testing.assert_allclose(group[name], single[name], rtol=1e-12)


def test_each_gpu_holds_the_replicated_weights_and_its_share_of_routed_experts() -> None:
    sz = ev.model_sizes(DEEPSEEK)
    routed = sz.n_moe_layers * DEEPSEEK.n_experts * sz.ff_params_per_expert
    out = ev.evaluate(DEEPSEEK, H200, DEFAULT, 8, _dp(8), 64.0)
    assert float(out["weights_bytes_per_device"]) == pytest.approx(sz.total_params - routed + routed / 8)


def test_each_gpu_keeps_the_kv_cache_of_its_own_sequences() -> None:
    group = ev.evaluate(DEEPSEEK, H200, DEFAULT, 8, _dp(8), 64.0)
    single = ev.evaluate(DEEPSEEK, H200, DEFAULT, 8, ev.Layout.of(1, False, 1, 2000), 8.0)
    assert float(group["kv_cache_bytes_per_device"]) == pytest.approx(float(single["kv_cache_bytes_per_device"]))


@pytest.mark.parametrize(("group", "link"), [(8, "intra"), (16, "inter")])
def test_dispatch_and_combine_cross_scaleup_links_in_one_domain_and_scaleout_beyond(group: int, link: str) -> None:
    """At large batches the Simple protocol (bandwidth factor 1) carries (G-1)/G of each GPU's k d_model-wide
    activations per token, twice per MoE layer, at one direction of the link (2x the all-reduce bandwidth)."""
    bandwidth = 2.0 * (H200.intra_bytes_per_s if link == "intra" else H200.inter_bytes_per_s)
    sz = ev.model_sizes(DEEPSEEK)
    big = np.array([1e6, 2e6]) * group
    network = ev.step(DEEPSEEK, H200, DEFAULT, 8, _dp(group), big).network_s
    per_seq = 2 * sz.n_moe_layers * (group - 1) / group * DEEPSEEK.n_active_experts * DEEPSEEK.d_model * 2.0
    expected = per_seq / group / bandwidth
    assert (network[1] - network[0]) / (big[1] - big[0]) == pytest.approx(expected, rel=1e-9)


def test_two_batch_overlap_runs_the_all_to_all_alongside_compute_and_memory() -> None:
    plain = ev.step(DEEPSEEK, H200, DEFAULT, 8, _dp(16), BATCHES)
    overlapped = ev.step(DEEPSEEK, H200, DEFAULT, 8, replace(_dp(16), a2a_overlap=np.array(True)), BATCHES)
    all_to_all = plain.network_s - overlapped.network_s
    assert np.all(all_to_all > 0)
    np.testing.assert_allclose(overlapped.overlapped_network_s, all_to_all, rtol=1e-12)
    # the default preset's busy time: the GEMM class's max plus the attention classes' maxes, one after another
    kernels = np.maximum(plain.gemm_memory_s, plain.gemm_compute_s) + plain.attention_s
    busy = np.maximum(kernels, all_to_all)
    np.testing.assert_allclose(overlapped.step_time_s, plain.kernel_launch_s + overlapped.network_s + busy, rtol=1e-12)
    assert np.all(overlapped.step_time_s < plain.step_time_s)


def test_evaluate_two_batch_overlap_prints_the_evaluators_overlapped_figures(capsys: pytest.CaptureFixture) -> None:
    from roofline_opt.cli import main

    argv = (
        "evaluate --model deepseek-v3 --weight-bits 8 --gpu h200 --tp 16 --pp 1 --ep 16 --dp-attention "
        "--two-batch-overlap --batch 2048 --context 2000 --json"
    ).split()
    assert main(argv) == 0
    (printed,) = json.loads(capsys.readouterr().out)
    layout = ev.Layout.of(16, False, 1, 2000, 1, 16, dp_attention=True, a2a_overlap=True)
    expected = ev.evaluate(DEEPSEEK, H200, DEFAULT, 8, layout, 2048.0)
    assert printed["two_batch_overlap"] is True
    assert printed["overlapped_network_s"] == pytest.approx(float(expected["overlapped_network_s"]))
    assert printed["tok_s_per_request"] == pytest.approx(float(expected["tok_s_per_request"]))


def test_two_batch_overlap_is_a_property_of_data_parallel_attention_only() -> None:
    assert not ev.Layout.of(8, False, 1, 2000, 1, 8, a2a_overlap=True).a2a_overlap
    assert ev.Layout.of(8, False, 1, 2000, 1, 8, dp_attention=True, a2a_overlap=True).a2a_overlap


def test_dp_attention_has_no_tensor_parallel_all_reduce() -> None:
    at_one = ev.step(DEEPSEEK, H200, DEFAULT, 8, _dp(8), 8.0).network_s
    alone = ev.collectives(DEEPSEEK, H200, DEFAULT, 8, _dp(8))
    assert sum(float(np.sum(c.count)) for c in alone[:-1]) == 0.0
    assert float(at_one) == pytest.approx(float(alone[-1].time_s(8.0)))


def test_expert_load_imbalance_slows_the_busiest_gpu() -> None:
    even = ev.evaluate(DEEPSEEK, H200, DEFAULT, 8, _dp(8), BATCHES)["time_per_token_s"]
    skewed = ev.evaluate(DEEPSEEK, H200, replace(DEFAULT, expert_load_imbalance=1.5), 8, _dp(8), BATCHES)
    assert np.all(skewed["time_per_token_s"] > even)


def test_mtp_module_is_one_moe_layer_sharing_the_output_head() -> None:
    module = mtp_module(DEEPSEEK)
    assert (module.n_layers, module.n_dense_layers, module.n_experts) == (1, 0, DEEPSEEK.n_experts)
    assert ev.model_sizes(module).embedding_params == DEEPSEEK.vocab * DEEPSEEK.d_model


def test_mtp_draft_keeps_the_targets_expert_parallel_layout_and_speeds_up_batch_one() -> None:
    layout = _dp(8)
    assert layout.for_draft(mtp_module(DEEPSEEK)) is layout
    assert float(layout.for_draft(catalog.load_model("llama-3-8b")).ep) == 1.0
    plain = ev.evaluate(DEEPSEEK, H200, DEFAULT, 8, layout, 1.0)
    drafted = ev.evaluate(
        DEEPSEEK,
        H200,
        DEFAULT,
        8,
        layout,
        1.0,
        draft=mtp_module(DEEPSEEK),
        acceptance=0.9,
        gamma_max=3,
        draft_weight_bits=8,
    )
    assert float(drafted["best_gamma"]) > 0
    assert float(drafted["tok_s_per_request"]) > float(plain["tok_s_per_request"])


def _question(dp_attention: bool):
    return api.question(
        "deepseek-v3",
        "h200",
        weight_bits=8,
        context=2000,
        tp_degrees=(8, 16),
        pp_degrees=(1,),
        ep_degrees=(1, 8, 16, 32, 64),
        dp_attention=dp_attention,
    )


def test_the_optimiser_chooses_dp_attention_when_it_is_cheaper() -> None:
    with_dp = api.cheapest_answer(_question(True), min_tok_s=20.0)
    without = api.cheapest_answer(_question(False), min_tok_s=20.0)
    assert with_dp.setup.dp_attention
    assert with_dp.setup.ep == with_dp.setup.tp
    assert with_dp.usd_per_mtok < without.usd_per_mtok


def test_dp_attention_needs_a_moe_model() -> None:
    with pytest.raises(InvalidInput, match="dp_attention"):
        api.question("llama-3-70b", "h100-sxm", dp_attention=True)


def test_an_fp8_kv_cache_halves_each_gpus_kv_bytes() -> None:
    full = ev.evaluate(DEEPSEEK, H200, DEFAULT, 8, _dp(8), 64.0)
    fp8 = ev.evaluate(DEEPSEEK, H200, DEFAULT, 8, ev.Layout.of(8, False, 1, 2000, 1, 8, 8, dp_attention=True), 64.0)
    assert float(fp8["kv_cache_bytes_per_device"]) == pytest.approx(float(full["kv_cache_bytes_per_device"]) / 2)
    assert float(fp8["memory_s"]) < float(full["memory_s"])
