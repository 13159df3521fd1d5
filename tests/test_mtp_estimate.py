"""MTP rows: the estimate runs the engine's depth at its published acceptance length, the bound keeps the favourable
reading (best depth in 0..3 at 0.9 per drafted token) unless the row states its settings."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from roofline_opt import fidelity
from roofline_opt.fidelity.measured import (
    DEFAULT_MTP_ACCEPTANCE,
    DEFAULT_MTP_DEPTH,
    ENGINE_MTP_ACCEPTANCE_LENGTH,
    acceptance_for_length,
    gpu_card,
    map_row,
    model_card,
)
from roofline_opt.fidelity.validate import predict
from roofline_opt.physics import evaluator
from roofline_opt.physics.mtp import mtp_module
from roofline_opt.physics.specs import DEFAULT

COLUMNS = (
    "model,precision,gpu,n_gpus,layout,batch_or_concurrency,input_len,output_len,tpot_ms,tok_s_per_request,"
    "tok_s_per_gpu,framework,notes"
)


def _row(**cells: str) -> dict[str, str]:
    """A DeepSeek-R1 FP8 decode-only row on 8 x H200 measured with MTP."""
    base = dict(
        model="DeepSeek-R1",
        precision="FP8, FP8 KV",
        gpu="H200",
        n_gpus="8",
        layout="TP8 EP8",
        batch_or_concurrency="batch 16",
        input_len="1024",
        output_len="1024",
        tpot_ms="",
        tok_s_per_request="60",
        tok_s_per_gpu="120",
        framework="SGLang v0.5.12, MTP on",
        notes="decode-only figures",
    )
    return base | cells


def _tokens_per_round(alpha: float, depth: int) -> float:
    return float(evaluator.expected_tokens_per_round(alpha, depth))


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_acceptance_for_length_inverts_the_tokens_per_round(depth: int) -> None:
    for length in np.linspace(1.05, depth + 0.95, 7):
        assert _tokens_per_round(acceptance_for_length(length, depth), depth) == pytest.approx(length, rel=1e-9)


def test_acceptance_length_beyond_the_depth_is_refused() -> None:
    with pytest.raises(ValueError):
        acceptance_for_length(3.5, 2)


def test_sglang_row_is_estimated_at_two_drafted_tokens_and_bounded_at_the_generous_reading() -> None:
    setup = map_row(_row()).setup
    assert setup is not None
    assert setup.mtp_depth == 2 and not setup.mtp_best_depth
    assert _tokens_per_round(setup.acceptance, 2) == pytest.approx(ENGINE_MTP_ACCEPTANCE_LENGTH[2])
    bound = setup.for_bound()
    assert (bound.mtp_depth, bound.acceptance, bound.mtp_best_depth) == (
        DEFAULT_MTP_DEPTH,
        DEFAULT_MTP_ACCEPTANCE,
        True,
    )


@pytest.mark.parametrize(
    ("layout", "depth"), [("TP8 EP8", 3), ("TP8 EP8 with attention DP (DEP8)", 1)], ids=["tp8", "dep8"]
)
def test_tensorrt_llm_row_runs_mtp3_or_mtp1_with_attention_dp(layout: str, depth: int) -> None:
    setup = map_row(_row(layout=layout, framework="TensorRT-LLM 1.3.0rc14, MTP on")).setup
    assert setup is not None and setup.mtp_depth == depth
    assert _tokens_per_round(setup.acceptance, depth) == pytest.approx(ENGINE_MTP_ACCEPTANCE_LENGTH[depth])


def test_dynamo_over_tensorrt_llm_takes_tensorrt_llms_recipe() -> None:
    setup = map_row(_row(framework="NVIDIA Dynamo + TensorRT-LLM, MTP on")).setup
    assert setup is not None and setup.mtp_depth == 3


def test_a_stated_window_and_acceptance_length_are_used_by_the_estimate() -> None:
    setup = map_row(_row(framework="SGLang, MTP on (3-token window, topk=1)", notes="acceptance length 2.18")).setup
    assert setup is not None and setup.mtp_depth == 2
    assert _tokens_per_round(setup.acceptance, 2) == pytest.approx(2.18)
    bound = setup.for_bound()
    assert bound.mtp_depth == 2 and bound.acceptance == pytest.approx(setup.acceptance) and bound.mtp_best_depth


def test_a_stated_rate_sets_both_readings() -> None:
    setup = map_row(_row(notes="decode-only figures; MTP-2 enabled; acceptance rate 0.6")).setup
    assert setup is not None and (setup.mtp_depth, setup.acceptance) == (2, 0.6)
    assert (setup.for_bound().mtp_depth, setup.for_bound().acceptance) == (2, 0.6)


def test_the_estimate_runs_its_fixed_depth_and_stays_under_the_bound(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    path.write_text(COLUMNS + "\n" + ",".join(f'"{v}"' for v in _row().values()) + "\n")
    (row,) = fidelity.validate(path)
    setup = row.row.setup
    assert setup is not None and row.bound_holds is not None
    model = model_card(setup.model_card)
    assert model is not None
    layout = evaluator.Layout.of(setup.tp, False, setup.pp, setup.context, 1, setup.ep, setup.kv_bits)
    fixed = evaluator.evaluate(
        model,
        gpu_card(setup.gpu_card),
        DEFAULT,
        setup.weight_bits,
        layout,
        np.array([16.0]),
        draft=mtp_module(model),
        acceptance=setup.acceptance,
        gamma=2,
        draft_weight_bits=setup.weight_bits,
    )
    assert row.estimate.tok_s_per_request == pytest.approx(float(fixed["tok_s_per_request"][0]))
    assert row.estimate.tok_s_per_request < row.predicted_tok_s_per_request


def test_an_nvfp4_rows_mtp_block_is_estimated_unquantized_and_bounded_at_the_targets_bits() -> None:
    fp4 = map_row(_row(precision="NVFP4, FP8 KV", gpu="B200")).setup
    fp8 = map_row(_row(gpu="B200")).setup
    assert fp4 is not None and fp8 is not None
    assert (fp4.weight_bits, fp4.draft_weight_bits, fp4.for_bound().draft_weight_bits) == (4, 16, 0)
    assert fp8.draft_weight_bits == 0


def test_an_unquantized_mtp_block_slows_the_estimate(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    row = _row(precision="NVFP4, FP8 KV", gpu="B200", batch_or_concurrency="batch 64")
    path.write_text(COLUMNS + "\n" + ",".join(f'"{v}"' for v in row.values()) + "\n")
    (validated,) = fidelity.validate(path)
    setup = validated.row.setup
    assert setup is not None
    light = predict(replace(setup, draft_weight_bits=0), None, DEFAULT)
    assert validated.estimate.tok_s_per_request < light.tok_s_per_request
