"""validate with whole requests: rows stating input and output lengths are predicted with prefill in the steps."""

from __future__ import annotations

from pathlib import Path

import pytest

from roofline_opt import catalog, fidelity
from roofline_opt.physics import evaluator, requests
from roofline_opt.physics.specs import DEFAULT

PEAK = DEFAULT.at_peak()
"""The physics of the bound validate checks: the default preset at peak FLOP/s and HBM bandwidth."""

COLUMNS = (
    "model,precision,gpu,n_gpus,layout,batch_or_concurrency,input_len,output_len,tok_s_per_request,tok_s_per_gpu,notes"
)


def _validate(tmp_path: Path, input_len: str, output_len: str, batch: str, notes: str = "") -> fidelity.ValidationRow:
    path = tmp_path / "m.csv"
    row = f'Llama-3.3-70B,"FP8, BF16 KV",H100 SXM 80GB,2,TP2,{batch},{input_len},{output_len},20,80,"{notes}"'
    path.write_text(f"{COLUMNS}\n{row}\n")
    (out,) = fidelity.validate(path)
    return out


def test_a_row_with_both_lengths_is_predicted_with_prefill_in_the_steps(tmp_path: Path) -> None:
    row = _validate(tmp_path, "2000", "500", "concurrency 16")
    model, gpu = catalog.load_model("llama-3.3-70b"), catalog.load_gpu("h100-sxm")
    layout = evaluator.Layout.of(2, False, 1, 2250)
    expected = requests.aggregated_figures(model, gpu, PEAK, 8, layout, 16.0, requests.Workload.single(2000, 500), 2048)
    decode_only = evaluator.evaluate(model, gpu, PEAK, 8, layout, 16.0)
    assert row.predicted_tok_s_per_request == pytest.approx(1.0 / float(expected["tpot_s"]))
    assert row.predicted_tok_s_per_request < float(decode_only["tok_s_per_request"])


def test_a_whole_request_speed_is_compared_with_the_whole_request_prediction(tmp_path: Path) -> None:
    notes = "computed: per_request=total/BS (incl. prefill)"
    row = _validate(tmp_path, "2000", "500", "batch 16", notes)
    model, gpu = catalog.load_model("llama-3.3-70b"), catalog.load_gpu("h100-sxm")
    out = requests.aggregated_figures(
        model, gpu, PEAK, 8, evaluator.Layout.of(2, False, 1, 2250), 16.0, requests.Workload.single(2000, 500), 2048
    )
    whole = 500 / (float(out["ttft_s"]) + 499 * float(out["tpot_s"]))
    assert row.row.setup.speed_basis == "request"
    assert row.predicted_tok_s_per_request == pytest.approx(whole)


def test_without_a_prompt_the_whole_request_model_is_the_decode_model(tmp_path: Path) -> None:
    row = _validate(tmp_path, "0", "1000", "batch 16")
    model, gpu = catalog.load_model("llama-3.3-70b"), catalog.load_gpu("h100-sxm")
    decode = evaluator.evaluate(model, gpu, PEAK, 8, evaluator.Layout.of(2, False, 1, 500), 16.0)
    assert row.predicted_tok_s_per_request == pytest.approx(float(decode["tok_s_per_request"]))


def test_a_static_batch_adds_one_prompt_step_to_its_decode_steps(tmp_path: Path) -> None:
    """A static batch: O tokens per request in T_prefill(B, I) + O x decode step (the prompt's cost included)."""
    notes = "per_request=total/BS"
    row = _validate(tmp_path, "2048", "128", "static batch 96", notes)
    model, gpu = catalog.load_model("llama-3.3-70b"), catalog.load_gpu("h100-sxm")
    layout = evaluator.Layout.of(2, False, 1, 2112)
    prefill = requests.prefill_step(model, gpu, PEAK, 8, layout, 96.0, 2048).step_time_s
    decode = evaluator.step(model, gpu, PEAK, 8, layout, 96.0).step_time_s
    assert row.row.setup.static_batch
    assert row.predicted_tok_s_per_request == pytest.approx(128 / float(prefill + 128 * decode))
    assert row.predicted_tok_s_per_gpu == pytest.approx(row.predicted_tok_s_per_request * 96 / 2)
