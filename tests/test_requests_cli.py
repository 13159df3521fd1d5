"""Whole requests on the command line: answer fields, files, evaluate, infeasible reasons and bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from roofline_opt.cli import EXIT_BAD_INPUT, EXIT_INFEASIBLE, EXIT_OK, main

SMALL = ["--tp-degrees", "1,2,4,8", "--pp-degrees", "1,2", "--tp-modes", "1d", "--max-batch", "256"]
LLAMA = ["--model", "llama-3-70b", "--gpu", "h100-sxm", *SMALL, "--isl", "4000", "--osl", "1000"]
REQUEST_FIELDS = (
    "serving",
    "ttft_s",
    "tpot_s",
    "requests_per_s",
    "usd_per_request",
    "usd_per_mtok",
    "usd_per_mtok_blended",
    "tok_s_per_gpu",
    "kv_bits",
    "chunk_tokens",
    "decode_layout",
    "decode_gpu",
    "decode_instances",
)
PREFILL_FIELDS = ("prefill_layout", "prefill_gpu", "prefill_instances")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    code, out, err = run(capsys, *argv, "--json")
    assert code == EXIT_OK, err
    return json.loads(out)


def test_cheapest_disaggregated_answer_carries_every_request_field(capsys: pytest.CaptureFixture[str]) -> None:
    record = run_json(capsys, "cheapest", *LLAMA, "--serving", "disagg", "--kv-bits", "8", "--ttft-ms", "1500")
    assert set(REQUEST_FIELDS + PREFILL_FIELDS) <= set(record)
    assert record["serving"] == "disagg" and record["kv_bits"] == 8
    assert record["ttft_s"] <= 1.5
    assert record["usd_per_mtok"] == pytest.approx(1e6 * record["usd_per_request"] / 1000)
    assert record["usd_per_mtok_blended"] == pytest.approx(1e6 * record["usd_per_request"] / 5000)
    assert record["tok_s_per_request"] == pytest.approx(1 / record["tpot_s"])


def test_tpot_limit_is_the_speed_target(capsys: pytest.CaptureFixture[str]) -> None:
    by_tpot = run_json(capsys, "cheapest", *LLAMA, "--tpot-ms", "25")
    by_speed = run_json(capsys, "cheapest", *LLAMA, "--min-tok-s", "40")
    assert by_tpot["tpot_s"] <= 0.025 and by_tpot["usd_per_mtok"] == pytest.approx(by_speed["usd_per_mtok"])


def test_table_and_csv_show_the_request_columns(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_csv = tmp_path / "answer.csv"
    code, out, err = run(
        capsys, "fastest", *LLAMA, "--serving", "agg,disagg", "--max-usd-per-mtok", "3", "--csv", str(out_csv)
    )
    assert code == EXIT_OK, err
    assert "ttft_ms" in out and "tpot_ms" in out and "usd_per_request" in out and "for whole requests of 4000 in" in out
    frame = pd.read_csv(out_csv)
    assert set(REQUEST_FIELDS) <= set(frame.columns)


def test_workload_file_mix_is_served_by_one_deployment(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    mix = tmp_path / "mix.csv"
    mix.write_text("isl,osl,weight\n500,500,3\n6000,300,1\n")
    argv = ["--model", "llama-3-8b", "--gpu", "h100-sxm", *SMALL, "--workload", str(mix), "--ttft-ms", "400"]
    record = run_json(capsys, "cheapest", *argv, "--serving", "agg,disagg")
    assert record["ttft_s"] <= 0.4
    assert record["usd_per_mtok_blended"] == pytest.approx(record["usd_per_mtok"] * 450 / (1875 + 450))


def test_frontier_over_both_serving_modes_is_monotone(capsys: pytest.CaptureFixture[str]) -> None:
    records = run_json(capsys, "frontier", *LLAMA, "--serving", "agg,disagg", "--points", "8", "--ttft-ms", "2000")
    speeds = [r["tok_s_per_request"] for r in records]
    costs = [r["usd_per_mtok"] for r in records]
    assert speeds == sorted(speeds) and costs == sorted(costs)
    assert all(r["ttft_s"] <= 2.0 for r in records)


def test_frontier_with_a_tpot_limit_starts_at_the_cheapest_setup_meeting_it(capsys) -> None:
    records = run_json(capsys, "frontier", *LLAMA, "--points", "6", "--tpot-ms", "20")
    cheapest = run_json(capsys, "cheapest", *LLAMA, "--tpot-ms", "20")
    assert all(r["tpot_s"] <= 0.02 for r in records)
    assert records[0]["usd_per_mtok"] == pytest.approx(cheapest["usd_per_mtok"])


INFEASIBLE = {
    "ttft below any layout": (["fastest", *LLAMA, "--ttft-ms", "5"], "TTFT limit (the lowest TTFT"),
    "tpot below any layout": (["cheapest", *LLAMA, "--tpot-ms", "2"], "no setup meets TPOT <= 2 ms; the fastest"),
    "tpot not within the budget": (
        ["fastest", *LLAMA, "--tpot-ms", "12", "--max-usd-per-mtok", "1.5", "--usd-per-gpu-hour", "h100-sxm=2.1"],
        "meets TPOT <= 12 ms; the fastest within $1.5/Mtok has TPOT",
    ),
    "demand beyond the gpus": (
        ["cheapest", *LLAMA, "--demand-req-s", "1000", "--max-gpus", "16"],
        "req/s fits the GPUs",
    ),
}


@pytest.mark.parametrize(("argv", "message"), INFEASIBLE.values(), ids=INFEASIBLE.keys())
def test_infeasible_requests_name_the_binding_limit(argv, message, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, *argv)
    assert code == EXIT_INFEASIBLE and out == ""
    assert err.startswith("roofline-opt: infeasible: ") and message in err, err


BAD = {
    "kv bits": (["--kv-bits", "7"], "--kv-bits"),
    "serving": (["--serving", "split"], "--serving"),
    "utilisation above one": (["--max-utilisation", "1.5"], "--max-utilisation"),
    "disagg without a prompt": (["--isl", "0", "--serving", "disagg"], "--serving"),
    "demand in two units": (["--demand-req-s", "5", "--demand-tok-s", "100"], "--demand-req-s"),
    "chunk tokens": (["--chunk-tokens", "0"], "--chunk-tokens"),
    "unknown prefill gpu": (["--serving", "disagg", "--prefill-gpu", "h1000"], "--prefill-gpu"),
}


@pytest.mark.parametrize(("flags", "field"), BAD.values(), ids=BAD.keys())
def test_bad_request_input_is_one_line_naming_the_flag(flags, field, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "cheapest", *LLAMA, *flags)
    assert code == EXIT_BAD_INPUT and out == ""
    assert err.startswith("roofline-opt: error: ") and field in err and err.count("\n") == 1, err


@pytest.mark.parametrize(("flags", "field"), [(["--isl", "100"], "--osl"), (["--ttft-ms", "100"], "--ttft-ms")])
def test_request_flags_need_both_lengths(flags, field, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "cheapest", "--model", "llama-3-70b", "--gpu", "h100-sxm", *flags)
    assert code == EXIT_BAD_INPUT and field in err and err.count("\n") == 1


def test_a_workload_file_without_a_weight_column_is_refused(capsys, tmp_path: Path) -> None:
    mix = tmp_path / "mix.csv"
    mix.write_text("isl,osl\n500,500\n")
    code, out, err = run(capsys, "cheapest", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--workload", str(mix))
    assert code == EXIT_BAD_INPUT and "weight" in err and err.count("\n") == 1


EVALUATE = ["evaluate", "--model", "llama-3-70b", "--gpu", "h100-sxm", "--tp", "8", "--pp", "1", "--batch", "32"]


def test_evaluate_prices_an_aggregated_request(capsys: pytest.CaptureFixture[str]) -> None:
    (row,) = run_json(capsys, *EVALUATE, "--isl", "4000", "--osl", "1000", "--kv-bits", "8", "--chunk-tokens", "1024")
    assert row["context"] == 4500 and row["kv_bits"] == 8 and row["serving"] == "agg"
    assert row["ttft_s"] > 0 and row["tpot_s"] > 0 and row["requests_per_s"] > 0


def test_evaluate_without_a_prompt_equals_the_decode_step(capsys: pytest.CaptureFixture[str]) -> None:
    (req,) = run_json(capsys, *EVALUATE, "--isl", "0", "--osl", "16000")
    (dec,) = run_json(capsys, *EVALUATE, "--context", "8000")
    assert req["tok_s_per_request"] == dec["tok_s_per_request"] and req["usd_per_mtok"] == dec["usd_per_mtok"]


def test_evaluate_prices_a_disaggregated_unit(capsys: pytest.CaptureFixture[str]) -> None:
    flags = [
        "--isl",
        "4000",
        "--osl",
        "1000",
        "--serving",
        "disagg",
        "--prefill-gpu",
        "h200",
        "--prefill-tp",
        "4",
        "--prefill-batch",
        "2",
        "--prefill-instances",
        "2",
        "--decode-instances",
        "3",
    ]
    (row,) = run_json(capsys, *EVALUATE, *flags)
    assert row["prefill_gpu"] == "h200" and row["prefill_instances"] == 2 and row["decode_instances"] == 3
    served = min(2 * row["prefill_requests_per_s"], 3 * row["decode_requests_per_s"])
    assert row["requests_per_s"] == pytest.approx(served)
    assert row["tok_s_per_gpu"] == pytest.approx(served * 1000 / (2 * 4 + 3 * 8))


def test_python_api_answers_whole_requests_as_a_series() -> None:
    from roofline_opt import api

    answer = api.cheapest(
        "llama-3-8b",
        "h100-sxm",
        isl=1000,
        osl=200,
        serving=("agg", "disagg"),
        kv_bits=(16, 8),
        ttft_ms=200,
        tp_degrees=(1, 2, 4),
        pp_degrees=(1,),
        max_batch=128,
    )
    assert set(REQUEST_FIELDS) <= set(answer.index)
    assert answer["ttft_s"] <= 0.2 and answer["kv_bits"] in (16, 8)
