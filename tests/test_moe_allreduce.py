"""A MoE layer under 1-D tensor parallelism all-reduces its experts' combined output once (docs/physics/
step-structure.md): d_model values per token, like the attention output, whatever the number of active experts."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from roofline_opt import catalog
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics.specs import DEFAULT, PAPER

H200 = catalog.load_gpu("h200")


def _allreduce_s_per_seq(model, preset, tp: int) -> np.ndarray:
    """Bandwidth seconds per sequence of each all-reduce of a 1-D TP step, fastest protocol."""
    layout = ev.Layout.of(tp, False, 1, 4000.0)
    calls = [c for c in ev.collectives(model, H200, preset, 8, layout) if float(np.max(c.count)) > 0]
    return np.array([float(np.min(c.s_per_seq)) for c in calls[:2]])


@pytest.mark.parametrize("name", ["deepseek-v3", "mixtral-8x7b"])
def test_the_expert_output_all_reduce_carries_d_model_values_per_token(name: str) -> None:
    attention_out, expert_out = _allreduce_s_per_seq(catalog.load_model(name), DEFAULT, 8)
    assert expert_out == pytest.approx(attention_out, rel=1e-12)


def test_the_paper_preset_keeps_one_reduction_per_active_expert() -> None:
    mixtral = catalog.load_model("mixtral-8x7b")  # 2 active experts, no shared one
    attention_out, expert_out = _allreduce_s_per_seq(mixtral, PAPER, 8)
    assert expert_out == pytest.approx(2.0 * attention_out, rel=1e-12)


def test_a_dense_model_reduces_the_same_bytes_either_way() -> None:
    llama = catalog.load_model("llama-3-70b")
    once = _allreduce_s_per_seq(llama, DEFAULT, 8)
    per_expert = _allreduce_s_per_seq(llama, replace(DEFAULT, moe_output_reduced_once=False), 8)
    np.testing.assert_allclose(once, per_expert, rtol=1e-12)
