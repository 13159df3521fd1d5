"""`roofline-opt fastest`, `cheapest` and `frontier` answer with consistent figures, honour targets and write files."""

from __future__ import annotations

import io
import json
import math
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from roofline_opt import catalog
from roofline_opt.cli import EXIT_INFEASIBLE, EXIT_OK, main
from roofline_opt.report import ProgressBar, format_number

SMALL = ["--preset", "paper", "--tp-degrees", "1,2,4,8", "--pp-degrees", "1,2", "--max-batch", "256"]
"""A small search space: each solve takes milliseconds."""
BASE = ["--model", "llama-3-70b", "--gpu", "h100-sxm", *SMALL]
JSON_FIELDS = (
    "gpu",
    "n_gpus",
    "tp",
    "tp_2d",
    "pp",
    "ep",
    "replicas",
    "batch",
    "gamma",
    "weight_bits",
    "tok_s_per_request",
    "usd_per_mtok",
    "time_per_token_s",
    "throughput_tok_s",
    "mfu_fraction",
    "bottleneck",
    "solver_status",
    "mip_gap",
    "layout",
    "total_gpus",
    "tok_s_per_gpu",
    "usd_per_hour",
    "model",
    "context",
    "preset",
)
SETUP_FIELDS = ("gpu", "n_gpus", "tp", "tp_2d", "pp", "ep", "replicas", "batch", "gamma", "weight_bits")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    code = main([*argv, "--json"])
    captured = capsys.readouterr()
    assert code == EXIT_OK, captured.err
    assert captured.err == ""
    return json.loads(captured.out)


def assert_consistent(record: dict[str, Any]) -> None:
    """Cost and speed follow from the setup: $/Mtok = 1e6 x GPUs x $/s / throughput, tok/s = 1 / time per token."""
    assert set(JSON_FIELDS) <= set(record)
    price_per_s = catalog.load_gpu(record["gpu"]).usd_per_s
    expected_cost = 1e6 * record["n_gpus"] * price_per_s / record["throughput_tok_s"]
    assert record["usd_per_mtok"] == pytest.approx(expected_cost, rel=1e-9)
    assert record["tok_s_per_request"] == pytest.approx(1 / record["time_per_token_s"], rel=1e-9)
    assert record["throughput_tok_s"] == pytest.approx(record["batch"] * record["tok_s_per_request"], rel=1e-9)
    assert record["n_gpus"] == record["tp"] * record["pp"]
    assert record["solver_status"] in ("optimal", "enumerated")
    assert record["fits_in_memory"] is True


def test_fastest_honours_the_budget_with_consistent_figures(capsys: pytest.CaptureFixture[str]) -> None:
    record = run_json(capsys, "fastest", *BASE, "--max-usd-per-mtok", "3")

    assert_consistent(record)
    assert record["usd_per_mtok"] <= 3 * (1 + 1e-9)
    assert record["mip_gap"] <= 1e-6


def test_cheapest_honours_the_speed_target_with_consistent_figures(capsys: pytest.CaptureFixture[str]) -> None:
    record = run_json(capsys, "cheapest", *BASE, "--min-tok-s", "60")

    assert_consistent(record)
    assert record["tok_s_per_request"] >= 60 * (1 - 1e-9)


def test_a_larger_budget_never_buys_less_speed(capsys: pytest.CaptureFixture[str]) -> None:
    speeds = [run_json(capsys, "fastest", *BASE, "--max-usd-per-mtok", b)["tok_s_per_request"] for b in ("2", "4")]
    unlimited = run_json(capsys, "fastest", *BASE)

    assert speeds[0] <= speeds[1] <= unlimited["tok_s_per_request"] * (1 + 1e-9)


def test_cheapest_at_any_speed_is_the_cheapest_of_all(capsys: pytest.CaptureFixture[str]) -> None:
    anything = run_json(capsys, "cheapest", *BASE)
    at_speed = run_json(capsys, "cheapest", *BASE, "--min-tok-s", "50")

    assert anything["usd_per_mtok"] <= at_speed["usd_per_mtok"] * (1 + 1e-9)


def test_several_gpu_types_give_the_best_of_each(capsys: pytest.CaptureFixture[str]) -> None:
    gpus = ("h100-sxm", "h200", "a100-80gb")
    budget = ["--max-usd-per-mtok", "3"]
    space = ["--model", "llama-3-70b", *SMALL]
    each = [run_json(capsys, "fastest", *space, "--gpu", g, *budget)["tok_s_per_request"] for g in gpus]

    record = run_json(capsys, "fastest", *space, "--gpu", ",".join(gpus), *budget)

    assert record["gpu"] in gpus
    assert record["tok_s_per_request"] == pytest.approx(max(each), rel=1e-7)
    assert_consistent(record)


@pytest.mark.parametrize(
    ("command", "target"),
    [("fastest", ["--max-usd-per-mtok", "2.5"]), ("cheapest", ["--min-tok-s", "70"]), ("cheapest", [])],
    ids=["fastest within a budget", "cheapest at a speed", "cheapest at any speed"],
)
def test_enumeration_finds_the_same_optimum_as_the_mip(
    command: str, target: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    mip = run_json(capsys, command, *BASE, *target)
    enumerated = run_json(capsys, command, *BASE, *target, "--method", "enumerate")

    assert enumerated["solver_status"] == "enumerated"
    for figure in ("tok_s_per_request", "usd_per_mtok", "throughput_tok_s"):
        assert mip[figure] == pytest.approx(enumerated[figure], rel=1e-7)
    assert {k: mip[k] for k in SETUP_FIELDS} == {k: enumerated[k] for k in SETUP_FIELDS}


def test_weight_bits_default_to_the_name_suffix_and_can_be_offered_together(
    capsys: pytest.CaptureFixture[str],
) -> None:
    int8 = run_json(capsys, "cheapest", *BASE[2:], "--model", "llama-3-70b-int8")
    either = run_json(capsys, "cheapest", *BASE, "--weight-bits", "16,8")

    assert int8["weight_bits"] == 8
    assert either["weight_bits"] in (16, 8)
    assert either["usd_per_mtok"] == pytest.approx(int8["usd_per_mtok"], rel=1e-7)


def test_demand_and_gpu_limit_shape_the_replicas(capsys: pytest.CaptureFixture[str]) -> None:
    record = run_json(capsys, "cheapest", *BASE, "--demand-tok-s", "20000", "--max-gpus", "64")

    assert record["replicas"] == math.ceil(20000 / record["throughput_tok_s"] - 1e-9)
    assert record["n_gpus"] * record["replicas"] <= 64


def test_summary_shows_setup_figures_with_units_and_solver_status(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["fastest", *BASE, "--max-usd-per-mtok", "3"])

    out = capsys.readouterr().out
    assert code == EXIT_OK
    lines = out.splitlines()
    assert lines[0].startswith("fastest setup of llama-3-70b within $3/Mtok (decode only: usd_per_mtok_decode_only")
    assert lines[0].endswith("; decode context 8000 tokens, paper preset")
    columns = (
        "gpu",
        "weight_bits",
        "layout",
        "total_gpus",
        "replicas",
        "batch",
        "tok_s_per_request",
        "tok_s_per_gpu",
        "time_per_token_ms",
        "usd_per_mtok_decode_only",
        "usd_per_hour",
        "mfu_fraction",
        "bottleneck",
    )
    for column in columns:
        assert column in lines[1]
    assert "h100-sxm" in lines[3]
    assert lines[-1].startswith("solver: mip, optimal, gap ")


def test_csv_holds_the_json_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "answer.csv"

    record = run_json(capsys, "cheapest", *BASE, "--min-tok-s", "40", "--csv", str(out))

    row = pd.read_csv(out).iloc[0]
    assert row["gpu"] == record["gpu"] and row["batch"] == record["batch"]
    assert row["usd_per_mtok"] == pytest.approx(record["usd_per_mtok"], rel=1e-12)
    assert [p.name for p in tmp_path.iterdir()] == ["answer.csv"]


def test_frontier_files_are_monotone_with_one_preferred_point(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    observed = tmp_path / "observed.csv"
    observed.write_text("tok_s_per_request,usd_per_mtok,label\n40,3.5,provider A\n70,6,\n")
    csv, png = tmp_path / "frontier.csv", tmp_path / "frontier.png"

    records = run_json(
        capsys, "frontier", *BASE, "--points", "12", "--csv", str(csv), "--plot", str(png), "--observed", str(observed)
    )

    frame = pd.read_csv(csv)
    assert len(frame) == len(records) >= 3
    assert frame["tok_s_per_request"].is_monotonic_increasing and frame["usd_per_mtok"].is_monotonic_increasing
    assert frame["preferred"].sum() == 1
    assert png.read_bytes()[:8] == PNG_MAGIC
    for record in records:
        assert_consistent(record)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["frontier.csv", "frontier.png", "observed.csv"]


def test_frontier_summary_marks_the_preferred_point(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["frontier", *BASE, "--points", "8"])

    out = capsys.readouterr().out
    assert code == EXIT_OK
    assert "(monotone)" in out.splitlines()[0]
    assert sum(line.startswith("*") for line in out.splitlines()) == 1
    assert out.splitlines()[-1].startswith("solver: mip, optimal (every point), gap ")


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_frontier_draws_progress_on_a_terminal_only(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["frontier", *BASE, "--points", "6", "--json"]) == EXIT_OK
    assert capsys.readouterr().err == ""
    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", terminal)

    assert main(["frontier", *BASE, "--points", "6", "--json"]) == EXIT_OK

    drawn = terminal.getvalue()
    assert drawn.startswith("\r[") and drawn.endswith("] 6/6\n") and drawn.count("\n") == 1


def test_progress_bar_format_and_unfinished_line() -> None:
    terminal = FakeTerminal()
    with ProgressBar(terminal, width=10) as bar:
        bar(5, 10)
    assert terminal.getvalue() == "\r[#####     ] 5/10\n"
    pipe = io.StringIO()
    ProgressBar(pipe)(1, 2)
    assert pipe.getvalue() == ""


def test_unreachable_budget_names_the_cheapest_cost(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["fastest", *BASE, "--max-usd-per-mtok", "0.01"])

    err = capsys.readouterr().err
    assert code == EXIT_INFEASIBLE
    assert err.count("\n") == 1 and "cheapest setup costs $" in err


def test_unreachable_speed_names_the_fastest_speed(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["cheapest", *BASE, "--min-tok-s", "5000"])

    err = capsys.readouterr().err
    assert code == EXIT_INFEASIBLE
    assert err.count("\n") == 1 and "fastest setup reaches" in err


def test_help_states_the_context_assumption(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["fastest", "--help"])

    assert exit_info.value.code == 0
    assert "8000" in capsys.readouterr().out


def test_summary_numbers_keep_their_integer_zeros() -> None:
    assert [format_number(x) for x in (1519.9, 38440.0, 0.05041, 114.3)] == ["1520", "38440", "0.05041", "114.3"]


def test_frontier_by_enumeration_matches_the_mip_frontier(capsys):
    argv = [
        "frontier",
        "--model",
        "llama-3-8b",
        "--gpu",
        "a100-80gb",
        "--preset",
        "paper",
        "--points",
        "8",
        "--tp-degrees",
        "1,2,4",
        "--pp-degrees",
        "1,2",
        "--max-batch",
        "128",
        "--json",
    ]
    assert main(argv) == 0
    mip = json.loads(capsys.readouterr().out)
    assert main([*argv, "--method", "enumerate"]) == 0
    enumerated = json.loads(capsys.readouterr().out)
    assert [r["tok_s_per_request"] for r in mip] == pytest.approx([r["tok_s_per_request"] for r in enumerated])
