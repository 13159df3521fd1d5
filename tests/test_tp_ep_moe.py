"""Expert parallelism inside a 1-D tensor-parallel group (``Preset.tp_ep_moe_all_reduce``): every rank holds all
tokens after the attention all-reduce, so the experts need no token dispatch and the layer's output is all-reduced
once over the whole TP group, as SGLang (no all-to-all backend) and TensorRT-LLM (no attention DP) run it."""

from __future__ import annotations

import numpy as np
import pytest

from roofline_opt import catalog
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics import requests
from roofline_opt.physics.specs import DEFAULT, PAPER

H200 = catalog.load_gpu("h200")
DEEPSEEK = catalog.load_model("deepseek-v3")
BATCH = 32.0


def _network_s(model, preset, layout: ev.Layout) -> float:
    return float(sum(np.ravel(c.time_s(BATCH))[0] for c in ev.collectives(model, H200, preset, 8, layout)))


def _dispatch_counts(model, preset, layout: ev.Layout) -> list[float]:
    """Counts of the collectives run twice per MoE layer (a dispatch and a combine; no other collective is)."""
    per_step = 2.0 * ev.model_sizes(model).n_moe_layers
    counts = [float(np.max(c.count)) for c in ev.collectives(model, H200, preset, 8, layout)]
    return [n for n in counts if n == per_step]


def _decode(tp: int, ep: int, tp_2d: bool = False) -> ev.Layout:
    return ev.Layout.of(tp, tp_2d, 1, 4000.0, 1, ep)


def test_the_default_preset_prices_expert_parallelism_inside_tp_groups_as_engines_run_it() -> None:
    assert DEFAULT.tp_ep_moe_all_reduce and not PAPER.tp_ep_moe_all_reduce


def test_a_tp8_ep8_step_dispatches_no_tokens() -> None:
    assert _dispatch_counts(DEEPSEEK, DEFAULT, _decode(8, 8)) == []


def test_a_tp8_ep8_step_communicates_like_its_tp8_twin() -> None:
    assert _network_s(DEEPSEEK, DEFAULT, _decode(8, 8)) == pytest.approx(
        _network_s(DEEPSEEK, DEFAULT, _decode(8, 1)), rel=1e-12
    )


def test_the_expert_output_is_reduced_over_the_whole_tp_group_when_ep_is_below_tp() -> None:
    mixtral = catalog.load_model("mixtral-8x7b")
    assert _network_s(mixtral, DEFAULT, _decode(8, 2)) == pytest.approx(
        _network_s(mixtral, DEFAULT, _decode(8, 1)), rel=1e-12
    )


def test_the_paper_preset_keeps_the_notebooks_dispatch_and_combine() -> None:
    assert _dispatch_counts(DEEPSEEK, PAPER, _decode(8, 8)) == [2.0 * ev.model_sizes(DEEPSEEK).n_moe_layers]


def test_two_dimensional_tp_keeps_the_notebooks_dispatch_and_combine() -> None:
    assert _dispatch_counts(DEEPSEEK, DEFAULT, _decode(8, 8, tp_2d=True)) == [
        2.0 * ev.model_sizes(DEEPSEEK).n_moe_layers
    ]


def test_a_tp8_ep8_prefill_step_is_no_slower_than_its_tp8_twin() -> None:
    def step_s(ep: int) -> float:
        layout = ev.Layout.of(8, False, 1, 0.0, 1, ep)
        return float(np.ravel(requests.prefill_step(DEEPSEEK, H200, DEFAULT, 8, layout, 2.0, 8192).step_time_s)[0])

    assert step_s(8) <= step_s(1)
