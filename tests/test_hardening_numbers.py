"""Every number is range-checked before it reaches numpy: absurd sizes, Unicode digits and impossible measurements are
one line and exit 2; huge but valid targets and prices give an answer without warnings."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hardening import EVALUATE, SMALL_QUERY, assert_one_line, run

from roofline_opt import api, catalog, checks
from roofline_opt.catalog import REPO_ROOT
from roofline_opt.cli import EXIT_BAD_INPUT, EXIT_INFEASIBLE, EXIT_OK
from roofline_opt.errors import InvalidInput
from roofline_opt.optimize.space import MAX_GAMMA, MAX_POINTS

MEASURED_HEADER = "model,precision,gpu,layout,batch_or_concurrency,input_len,output_len,tok_s_per_request,tok_s_per_gpu"
GOOD_ROW = {
    "model": "Llama-3-8B",
    "precision": "BF16",
    "gpu": "H100 SXM",
    "layout": "TP1",
    "batch_or_concurrency": "batch 8",
    "input_len": "1000",
    "output_len": "1000",
    "tok_s_per_request": "50",
    "tok_s_per_gpu": "400",
}


def with_flag(argv: list[str], flag: str, value: str) -> list[str]:
    argv = list(argv)
    if flag in argv:
        argv[argv.index(flag) + 1] = value
    else:
        argv += [flag, value]
    return argv


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--tp", "1e20"),
        ("--pp", "99999999999999999999"),
        ("--batch", "1e300"),
        ("--context", "1e18"),
        ("--tokens-per-step", "1e9"),
        ("--ep", "1e10"),
        ("--tp", "٨"),  # Arabic-Indic eight
        ("--batch", "１６"),  # full-width sixteen
        ("--batch", "1_000"),
        ("--context", "-0"),
    ],
)
def test_evaluate_refuses_out_of_range_and_non_ascii_numbers(capsys, flag, value):
    code, _, err = run(capsys, *with_flag(EVALUATE, flag, value))

    if value == "-0":  # -0 is 0 tokens of context: valid
        assert code == EXIT_OK, err
        return
    assert_one_line(err, code, EXIT_BAD_INPUT, flag)


def test_evaluate_gamma_max_is_capped_like_the_queries(capsys):
    argv = [*EVALUATE, "--draft", "llama-3-8b", "--gamma-max", "100000"]

    code, _, err = run(capsys, *argv)

    assert_one_line(err, code, EXIT_BAD_INPUT, "--gamma-max", f"{MAX_GAMMA}")


def test_evaluate_gamma_max_at_the_cap_is_answered(capsys):
    code, out, err = run(capsys, *EVALUATE, "--draft", "llama-3-8b", "--gamma-max", str(MAX_GAMMA))

    assert (code, err) == (EXIT_OK, "")
    assert "best_gamma" in out


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--max-gpus", "1e30"),
        ("--max-batch", "1e20"),
        ("--tp-degrees", "1,99999999999999999999"),
        ("--pp-degrees", "1,٢"),
        ("--demand-tok-s", "1e300"),
        ("--mip-gap", "5"),
        ("--context", "1e40"),
    ],
)
def test_queries_refuse_out_of_range_numbers_before_solving(capsys, flag, value):
    code, _, err = run(capsys, *with_flag(["fastest", *SMALL_QUERY], flag, value))

    assert_one_line(err, code, EXIT_BAD_INPUT, flag)


def test_frontier_points_are_capped(capsys):
    code, _, err = run(capsys, "frontier", *SMALL_QUERY, "--points", "1e6")

    assert_one_line(err, code, EXIT_BAD_INPUT, "--points", f"{MAX_POINTS:,}")


@pytest.mark.parametrize("command", ["reproduce", "sensitivity"])
def test_fidelity_points_are_capped(capsys, tmp_path, command):
    argv = [command, "--points", "1e6", "--out", str(tmp_path / "out")]
    if command == "sensitivity":
        argv += ["--model", "llama-3-8b", "--gpu", "h100-sxm"]

    code, _, err = run(capsys, *argv)

    assert_one_line(err, code, EXIT_BAD_INPUT, "--points")
    assert not (tmp_path / "out").exists()


def answer_fields(out: str) -> dict:
    """The JSON answer without its timing."""
    return {k: v for k, v in json.loads(out).items() if k != "solve_seconds"}


def test_a_budget_beyond_every_setup_answers_like_no_budget(capsys):
    code, out, err = run(capsys, "fastest", *SMALL_QUERY, "--max-usd-per-mtok", "1e15", "--json")
    _, unlimited, _ = run(capsys, "fastest", *SMALL_QUERY, "--json")

    assert (code, err) == (EXIT_OK, "")
    assert answer_fields(out) == answer_fields(unlimited)


def test_a_speed_target_below_every_setup_answers_like_no_target(capsys):
    code, out, err = run(capsys, "cheapest", *SMALL_QUERY, "--min-tok-s", "1e-300", "--json")
    _, unlimited, _ = run(capsys, "cheapest", *SMALL_QUERY, "--json")

    assert (code, err) == (EXIT_OK, "")
    assert answer_fields(out) == answer_fields(unlimited)


def test_a_budget_of_1e_308_is_infeasible_on_one_line_without_a_warning(capsys):
    # pyproject turns every RuntimeWarning into an error, so a warning would fail this test
    code, _, err = run(capsys, "fastest", "--model", "llama-3-70b", "--gpu", "h100-sxm", "--max-usd-per-mtok", "1e-308")

    assert_one_line(err, code, EXIT_INFEASIBLE, "$1e-308/Mtok", "the cheapest setup costs")


@pytest.mark.parametrize("price", [1e300, 1e-300])
def test_a_card_with_an_extreme_price_gets_the_same_setup_with_scaled_costs(price):
    h100 = catalog.load_gpu("h100-sxm")
    extreme = dataclasses.replace(h100, name="h100-extreme", usd_per_hour=price)
    space = dict(tp_degrees=(1, 2, 4, 8), pp_degrees=(1, 2), max_batch=256, context=1000)

    ordinary = api.fastest("llama-3-8b", h100, **space)
    answer = api.fastest("llama-3-8b", extreme, **space)
    budget = api.fastest(
        "llama-3-8b", extreme, max_usd_per_mtok=ordinary["usd_per_mtok"] * price / h100.usd_per_hour * 1.5, **space
    )

    assert answer["solver_status"] == "optimal"
    assert (answer["tp"], answer["pp"], answer["batch"]) == (ordinary["tp"], ordinary["pp"], ordinary["batch"])
    assert answer["usd_per_mtok"] == pytest.approx(ordinary["usd_per_mtok"] * price / h100.usd_per_hour, rel=1e-9)
    assert budget["usd_per_mtok"] <= ordinary["usd_per_mtok"] * price / h100.usd_per_hour * 1.5


def priced_card(path, usd_per_hour: str):
    """The H100 card with another price."""
    lines = (REPO_ROOT / "instances" / "gpus" / "h100-sxm.yaml").read_text().splitlines()
    path.write_text("\n".join(f"usd_per_hour: {usd_per_hour}" if s.startswith("usd_per_hour") else s for s in lines))
    return path


def test_a_card_price_of_1e300_is_answered_by_the_cli(tmp_path, capsys):
    card = tmp_path / "rich.yaml"
    text = (REPO_ROOT / "instances" / "gpus" / "h100-sxm.yaml").read_text()
    card.write_text(
        "\n".join("usd_per_hour: 1.0e+300" if s.startswith("usd_per_hour") else s for s in text.splitlines())
    )

    code, out, err = run(capsys, "fastest", *with_flag(SMALL_QUERY, "--gpu", str(card)))

    assert (code, err) == (EXIT_OK, "")
    assert "e+29" in out or "e+30" in out, out


def test_a_card_number_above_the_cap_is_refused_naming_the_field(tmp_path, capsys):
    card = tmp_path / "huge.yaml"
    text = (REPO_ROOT / "instances" / "gpus" / "h100-sxm.yaml").read_text()
    card.write_text(
        "\n".join("usd_per_hour: 1.0e+308" if s.startswith("usd_per_hour") else s for s in text.splitlines())
    )

    code, _, err = run(capsys, *with_flag(EVALUATE, "--gpu", str(card)))

    assert_one_line(err, code, EXIT_BAD_INPUT, "huge.yaml: usd_per_hour")


@pytest.mark.parametrize(
    "text",
    ["٣", "３", "1_0", "0x10", "1e5000", " 1 2", "Infinity"],
    ids=["arabic", "fullwidth", "us", "hex", "big", "sp", "inf"],
)
def test_checks_read_only_ascii_decimal_numbers_in_range(text):
    with pytest.raises(InvalidInput):
        checks.positive_int("n", text)


def test_checks_still_read_ordinary_spellings():
    assert [checks.positive_int("n", t) for t in ("8", " 8 ", "8.0", "1e3", "+4")] == [8, 8, 8, 1000, 4]
    assert checks.positive_float("x", "2.5e-3") == 0.0025


# ----------------------------------------------------------------------------------------------- measured rows


def measured_file(tmp_path, **changes: str):
    row = GOOD_ROW | changes
    path = tmp_path / "measured.csv"
    path.write_text(MEASURED_HEADER + "\n" + ",".join(row[c] for c in MEASURED_HEADER.split(",")) + "\n")
    return path


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"layout": "TP99999999999999999999"}, ("layout", "TP must be in 1..")),
        ({"layout": "TP0"}, ("layout", "TP must be in 1..")),
        ({"layout": "TP1 PP0"}, ("layout", "PP must be in 1..")),
        ({"layout": "TP1 x 0 instances"}, ("layout", "instances")),
        ({"tok_s_per_request": "0"}, ("tok_s_per_request", "> 0")),
        ({"input_len": "99999999999999999999"}, ("input_len", "number of tokens")),
        ({"output_len": "-5"}, ("output_len", "number of tokens")),
        ({"tok_s_per_gpu": "-3"}, ("tok_s_per_gpu",)),
        ({"tok_s_per_request": "1e300"}, ("tok_s_per_request",)),
        ({"layout": "TP٢"}, ("layout", "digits 0-9")),
        ({"batch_or_concurrency": "batch 99999999999999999999"}, ("batch_or_concurrency",)),
    ],
    ids=[
        "tp-huge",
        "tp0",
        "pp0",
        "no-instances",
        "speed0",
        "length-huge",
        "length-negative",
        "negative",
        "speed-huge",
        "unicode",
        "batch-huge",
    ],
)
@pytest.mark.parametrize("command", ["validate", "calibrate"])
def test_an_impossible_measured_row_is_refused_naming_line_and_column(tmp_path, capsys, changes, words, command):
    argv = [command, "--measured", str(measured_file(tmp_path, **changes))]
    if command == "calibrate":
        argv += ["--gpu", "h100-sxm"]

    code, _, err = run(capsys, *argv)

    assert_one_line(err, code, EXIT_BAD_INPUT, "line 2", *words)


def test_a_plausible_measured_row_still_gets_a_verdict(tmp_path, capsys):
    code, out, err = run(capsys, "validate", "--measured", str(measured_file(tmp_path)))

    assert (code, err) == (EXIT_OK, "")
    assert "1 of 1 rows mapped" in out


@pytest.mark.parametrize("flag", ["--tp-degrees", "--pp-degrees"])
def test_a_list_flag_offering_more_than_the_cap_is_refused(capsys, flag):
    code, _, err = run(capsys, *with_flag(["fastest", *SMALL_QUERY], flag, ",".join(str(i) for i in range(1, 101))))

    assert_one_line(err, code, EXIT_BAD_INPUT, flag, "at most 64")
