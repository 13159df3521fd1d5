"""Replicated KV caches, the memory rule and the KV transfer (docs/physics/memory-and-kv.md): each GPU reads the KV
copy it holds, memory is a fixed reserve plus activations, a point-to-point transfer gets the whole link."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from roofline_opt import catalog
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics import requests as rq
from roofline_opt.physics.specs import DEFAULT, PAPER

DEEPSEEK = catalog.load_model("deepseek-v3")
LLAMA_70B = catalog.load_model("llama-3-70b")
H200 = catalog.load_gpu("h200")
CONTEXT = 8000.0


def _one_copy(model, layout: ev.Layout, batch: float) -> float:
    return float(ev.kv_bytes_per_token(model, layout.kv_bytes_per_value) * layout.context * batch)


@pytest.mark.parametrize(
    ("model", "tp", "copies"),
    [(LLAMA_70B, 4, 1.0), (LLAMA_70B, 8, 1.0), (LLAMA_70B, 16, 2.0), (DEEPSEEK, 8, 8.0), (DEEPSEEK, 16, 16.0)],
    ids=["gqa-tp4", "gqa-tp8", "gqa-tp16", "mla-tp8", "mla-tp16"],
)
def test_every_gpu_reads_the_kv_copy_it_holds(model, tp: int, copies: float) -> None:
    """8 KV heads split over at most 8 ranks (replicated beyond); an MLA latent sits on every rank."""
    layout = ev.Layout.of(tp, False, 2, CONTEXT)
    assert float(ev.kv_read_bytes(model, DEFAULT, layout, 64.0)) == pytest.approx(copies * _one_copy(model, layout, 64))


def test_per_gpu_kv_read_is_the_per_device_kv_cache_the_memory_check_holds() -> None:
    layout = ev.Layout.of(8, True, 2, CONTEXT)
    held = ev.memory(DEEPSEEK, H200, DEFAULT, 8, layout, 64.0).kv_cache_bytes
    read_per_gpu = ev.kv_read_bytes(DEEPSEEK, DEFAULT, layout, 64.0) / layout.n_gpus
    # the memory check also holds the step's own new token (context + 1)
    assert float(read_per_gpu) == pytest.approx(float(held) * CONTEXT / (CONTEXT + 1.0))


def test_the_paper_preset_reads_one_copy_spread_over_all_gpus() -> None:
    layout = ev.Layout.of(16, True, 2, CONTEXT)
    assert float(ev.kv_read_bytes(DEEPSEEK, PAPER, layout, 64.0)) == pytest.approx(_one_copy(DEEPSEEK, layout, 64))


def test_data_parallel_attention_reads_each_sequences_cache_once() -> None:
    layout = ev.Layout.of(8, False, 1, CONTEXT, 1, 8, dp_attention=True)
    assert float(ev.kv_read_bytes(DEEPSEEK, DEFAULT, layout, 64.0)) == pytest.approx(_one_copy(DEEPSEEK, layout, 64))


def test_hbm_traffic_is_the_kv_read_plus_traffic_that_does_not_grow_with_context() -> None:
    short, long = (ev.Layout.of(8, True, 2, c) for c in (0.0, CONTEXT))
    traffic = [ev.hbm_traffic_bytes(DEEPSEEK, H200, DEFAULT, 8, lay, 64.0) for lay in (short, long)]
    assert float(traffic[1] - traffic[0]) == pytest.approx(float(ev.kv_read_bytes(DEEPSEEK, DEFAULT, long, 64.0)))


def test_replicated_mla_cache_slows_the_step_by_its_extra_reads() -> None:
    """The issue's DeepSeek-R1 case: TP8 x PP8 on H200 at batch 1655 reads seven more copies of the cache per step
    than one copy spread over the 64 GPUs would."""
    layout = ev.Layout.of(8, True, 8, CONTEXT)
    one_copy_preset = replace(DEFAULT, memory_check="aggregate")
    replicated, spread = (ev.step(DEEPSEEK, H200, p, 8, layout, 1655.0).memory_s for p in (DEFAULT, one_copy_preset))
    extra_s = 7.0 * _one_copy(DEEPSEEK, layout, 1655) / (64 * H200.hbm_bytes_per_s * DEFAULT.hbm_efficiency)
    assert float(replicated - spread) == pytest.approx(extra_s)


@pytest.mark.parametrize("same_domain", [True, False], ids=["scale-up", "scale-out"])
def test_a_kv_transfer_gets_one_whole_direction_of_the_link(same_domain: bool) -> None:
    """H200 links: NVLink 900 GB/s both ways (450 one way) inside a domain, a 400 Gb/s NIC (50 GB/s) across."""
    assert rq.kv_link_bytes_per_s(H200, H200, same_domain) == pytest.approx(450e9 if same_domain else 50e9)


def test_kv_transfer_time_is_one_requests_cache_over_the_prefill_gpus_links() -> None:
    """Llama 3 70B, 4000 prompt tokens at 16-bit KV from 4 prefill GPUs over 50 GB/s each: 6.55 ms (13.1 before)."""
    layout = ev.Layout.of(1, False, 4, 0.0)
    seconds = rq.kv_transfer_s(LLAMA_70B, layout, 4000, rq.kv_link_bytes_per_s(H200, H200, False))
    assert float(seconds) == pytest.approx(327680 * 4000 / (4 * 50e9))


@pytest.mark.parametrize(("name", "notebook_bytes"), [("h100-sxm", 8e10), ("h200", 1.41e11), ("a100-80gb", 8e10)])
def test_paper_runs_on_the_notebooks_hardware_figures_and_default_on_the_devices(name: str, notebook_bytes: float):
    gpu = catalog.load_gpu(name)
    layout = ev.Layout.of(2, False, 1, CONTEXT)
    paper = ev.memory(LLAMA_70B, gpu, PAPER, 16, layout, 1.0).capacity_bytes
    assert float(paper) == 2 * notebook_bytes
    assert gpu.hbm_bytes > notebook_bytes  # the device exposes its binary-gigabyte class


B200 = catalog.load_gpu("b200")


def test_capacity_is_the_device_less_a_fixed_reserve_and_a_share_per_instance_gpu() -> None:
    layouts = ev.Layout.of(np.array([1, 4, 8]), False, np.array([1, 1, 2]), CONTEXT)
    cap = ev.memory(LLAMA_70B, B200, DEFAULT, 8, layouts, 1.0).capacity_bytes
    per_gpu = DEFAULT.memory_reserve_bytes_per_instance_gpu
    expected = B200.hbm_bytes - DEFAULT.memory_reserve_bytes - per_gpu * np.array([1, 4, 16])
    np.testing.assert_allclose(cap, expected, rtol=1e-12)
    assert DEFAULT.memory_reserve_bytes > 0 and per_gpu > 0


def test_deepseek_r1_fp8_fits_four_b200s_as_tensorrt_llm_ran_it() -> None:
    """167.7 GB of FP8 weights per device (TP4 x EP4): 90% of the device would refuse it; the reserve does not."""
    layout = ev.Layout.of(4, False, 1, 2048, 1, 4, kv_bits=8)
    mem = ev.memory(DEEPSEEK, B200, DEFAULT, 8, layout, 64.0)
    assert float(mem.weights_bytes) == pytest.approx(167.7e9, rel=1e-3)
    assert float(mem.weights_bytes) > 0.9 * 180e9  # the former rule, 90% of the sheet's 180 GB, refused it
    assert bool(mem.fits)


def test_memory_stays_affine_in_the_batch_for_the_mip_tables() -> None:
    layout = ev.Layout.of(8, True, 2, CONTEXT, 1, 4, kv_bits=8)
    used = [
        float(m.weights_bytes + m.kv_cache_bytes + m.activations_bytes)
        for m in (ev.memory(DEEPSEEK, H200, DEFAULT, 8, layout, b) for b in (0.0, 1.0, 2.0))
    ]
    assert used[2] - used[1] == pytest.approx(used[1] - used[0])


def test_a_hypothetical_part_keeps_its_replaced_figures_under_the_paper_preset() -> None:
    part = catalog.load_gpu("h100-sxm").with_figures({8: 4e15}, hbm_bytes_per_s=6e12)
    for preset in (PAPER, DEFAULT):
        seen = ev.hardware(part, preset)
        assert (seen.hbm_bytes_per_s, seen.flop_per_s_by_bits[8]) == (6e12, 4e15)
    assert ev.hardware(part, PAPER).flop_per_s_by_bits[16] == 1e15  # the figures not replaced stay the notebook's


def test_a_prefill_step_writes_every_copy_of_the_cache_it_holds() -> None:
    """MLA on TP8: every rank writes the prompt's latent, 8 copies, as every rank reads it while decoding."""
    layout = ev.Layout.of(8, False, 1, CONTEXT)
    one = rq.prefill_step(DEEPSEEK, H200, replace(DEFAULT, kv_split_by_kv_heads=True), 8, layout, 4.0, 2000)
    hbm_s = layout.n_gpus * H200.hbm_bytes_per_s * DEFAULT.hbm_efficiency
    base = ev.step(
        DEEPSEEK, H200, DEFAULT, 8, replace(layout, context=np.zeros(()), tokens_per_step=np.full((), 2000.0)), 4.0
    )
    written = ev.kv_bytes_per_token(DEEPSEEK, layout.kv_bytes_per_value) * 2000 * 4 * 8
    assert float(one.memory_s - base.memory_s) == pytest.approx(float(written / hbm_s))


def test_prompt_tokens_under_the_paper_preset_run_on_the_notebooks_hardware() -> None:
    layout = ev.Layout.of(8, False, 1, CONTEXT)
    h100 = catalog.load_gpu("h100-sxm")  # 3.35e12 B/s on the vendor sheet, 3.3e12 in the notebook
    with_vendor_card = rq.prefill_step(LLAMA_70B, h100, PAPER, 16, layout, 4.0, 2000)
    with_notebook_card = rq.prefill_step(LLAMA_70B, h100.in_notebook(), PAPER, 16, layout, 4.0, 2000)
    assert float(with_vendor_card.memory_s) == pytest.approx(float(with_notebook_card.memory_s), rel=1e-12)
