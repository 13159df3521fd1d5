"""One validation path: ``evaluate`` checks its setups in the API as the queries check their questions, with the same
defaults; the API names its parameters, the command line its flags (or a CSV file's line and column)."""

from __future__ import annotations

import argparse
import inspect
import json
from pathlib import Path

import pytest

from roofline_opt import api, checks
from roofline_opt.cli import EXIT_BAD_INPUT, EXIT_OK, build_parser, main
from roofline_opt.cli import query_cmds as qc
from roofline_opt.errors import InvalidInput
from roofline_opt.optimize import setups

SETUP = {"model": "llama-3-8b", "gpu": "h100-sxm", "tp": 1, "pp": 1, "batch": 8}
FLAGS = ["evaluate", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--tp", "1", "--pp", "1", "--batch", "8"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _subparser(command: str) -> argparse.ArgumentParser:
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return subparsers.choices[command]


def test_evaluate_prices_whole_requests_at_the_queries_decode_context(capsys: pytest.CaptureFixture[str]) -> None:
    """isl 1001, osl 3: the decode context is I + O / 2 = 1002.5 for a query and for evaluate alike."""
    q = api.question("llama-3-8b", "h100-sxm", isl=1001, osl=3)
    row = api.evaluate_setups([SETUP | {"isl": 1001, "osl": 3}]).iloc[0]
    code, out, _ = run(capsys, *FLAGS, "--isl", "1001", "--osl", "3", "--json")

    assert q.context == 1002.5
    assert row["context"] == q.context
    assert code == EXIT_OK and json.loads(out)[0]["context"] == q.context


def test_an_explicit_context_is_a_whole_number_of_tokens_in_both() -> None:
    for ask in (
        lambda: api.question("llama-3-8b", "h100-sxm", context=1002.5),
        lambda: api.evaluate_setups([SETUP | {"context": 1002.5}]),
    ):
        with pytest.raises(InvalidInput, match="must be an integer >= 0"):
            ask()


@pytest.mark.parametrize(("preset", "bits"), [("default", 8), ("paper", 16)])
def test_evaluate_takes_the_queries_default_weight_precision(preset: str, bits: int) -> None:
    """DeepSeek-V3 is released in FP8: the queries and evaluate both default to it (16-bit under the paper preset)."""
    q = api.question("deepseek-v3", "h100-sxm", preset=preset, ep_degrees=(1,), dp_attention=False)
    row = api.evaluate_setups([SETUP | {"model": "deepseek-v3", "tp": 8, "preset": preset}]).iloc[0]

    assert q.weight_bits == (bits,)
    assert row["weight_bits"] == bits


def test_the_api_names_the_parameter_of_a_bad_setup() -> None:
    with pytest.raises(InvalidInput) as exc:
        api.evaluate_setups([SETUP, SETUP | {"tp": 0}])
    assert exc.value.field == "setups[1].tp"
    with pytest.raises(InvalidInput) as single:
        api.evaluate("llama-3-8b", "h100-sxm", 1, 1, 8, ep=3)
    assert single.value.field == "ep"


def test_the_api_refuses_a_field_no_setup_has() -> None:
    with pytest.raises(InvalidInput) as exc:
        api.evaluate_setups([SETUP | {"tensor_parallel": 2}])
    assert exc.value.field == "setups[0].tensor_parallel"


def test_the_command_line_names_the_flag_and_its_fields_in_the_message(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [*FLAGS[:2], "deepseek-v3", *FLAGS[3:], "--two-batch-overlap"]
    with pytest.raises(InvalidInput) as exc:
        api.evaluate_setups([SETUP | {"model": "deepseek-v3", "two_batch_overlap": True}])
    code, _, err = run(capsys, *argv)

    assert exc.value.field == "setups[0].two_batch_overlap" and "give `dp_attention` too" in exc.value.message
    assert code == EXIT_BAD_INPUT
    assert err.startswith("roofline-opt: error: --two-batch-overlap: ") and "give --dp-attention too" in err


def test_a_csv_row_error_names_the_file_line_and_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "setups.csv"
    path.write_text("model,gpu,tp,pp,batch,acceptance\nllama-3-8b,h100-sxm,1,1,8,\nllama-3-8b,h100-sxm,1,1,8,2\n")
    code, _, err = run(capsys, "evaluate", "--from-csv", str(path))

    assert code == EXIT_BAD_INPUT
    assert f"{path} line 3: acceptance: must be a number in (0, 1)" in err


def test_evaluate_flags_leave_every_default_to_the_api() -> None:
    """An absent flag is None, so the API's default applies (and a CSV cell wins over it when present)."""
    p = _subparser("evaluate")
    defaults = {a.dest: a.default for a in p._actions if a.dest in setups.DEFAULTS}

    assert set(defaults) == set(setups.DEFAULTS)
    assert all(value is None for value in defaults.values()), defaults


@pytest.mark.parametrize("field", ["acceptance", "ep", "tokens_per_step", "gamma_max", "kv_bits", "chunk_tokens"])
def test_evaluate_help_states_the_apis_default(field: str) -> None:
    p = _subparser("evaluate")
    action = next(a for a in p._actions if a.dest == field)

    assert f"{setups.DEFAULTS[field]})" in (action.help or "")


def _api_defaults() -> dict[str, object]:
    out: dict[str, object] = {}
    for function in (api.question, api.fastest, api.cheapest, api.frontier):
        for name, parameter in inspect.signature(function).parameters.items():
            if parameter.default is not inspect.Parameter.empty:
                out.setdefault(name, parameter.default)
    return out


def test_query_flag_defaults_are_the_apis() -> None:
    """Every default a query flag shows (and --save-dir writes) is the API parameter's default."""
    api_defaults = _api_defaults()
    checked = 0
    for flag, value in qc.SHARED_DEFAULTS.items():
        name = flag[2:].replace("-", "_")
        expected = api_defaults[name]
        if isinstance(expected, tuple):
            given = checks.parse_name_list(name, value) if name == "tp_modes" else checks.parse_int_list(name, value)
            assert given == tuple(expected), flag
        else:
            assert value == expected, flag
        checked += 1
    assert checked == len(qc.SHARED_DEFAULTS)


@pytest.mark.parametrize(
    ("command", "flag", "parameter"),
    [("frontier", "points", "points"), ("frontier", "utility_exponent", "utility_exponent")],
)
def test_frontier_flag_defaults_are_the_apis(command: str, flag: str, parameter: str) -> None:
    action = next(a for a in _subparser(command)._actions if a.dest == flag)

    assert action.default == inspect.signature(api.frontier).parameters[parameter].default


def test_plan_flag_defaults_are_the_apis() -> None:
    actions = {a.dest: a.default for a in _subparser("plan")._actions}
    parameters = inspect.signature(api.plan).parameters

    assert actions["mip_gap"] == parameters["mip_gap"].default
    assert actions["method"] == parameters["method"].default


def test_simulate_checks_its_setup_in_the_api_and_names_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", *FLAGS[1:], "--isl", "100", "--osl", "10", "--rate-req-s", "1", "--serving", "disagg"]
    code, _, err = run(capsys, *argv, "--prefill-tp", "0")

    assert code == EXIT_BAD_INPUT
    assert err.startswith("roofline-opt: error: --prefill-tp: must be a positive integer")
