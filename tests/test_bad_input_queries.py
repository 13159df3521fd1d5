"""Bad input to `fastest`, `cheapest` and `frontier`: exit 2 (1 when well-formed but infeasible), one stderr line
naming the field, no traceback, no output and no file left behind."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from roofline_opt.cli import EXIT_BAD_INPUT, EXIT_INFEASIBLE, main

SMALL = ["--preset", "paper", "--tp-degrees", "1,2,4,8", "--pp-degrees", "1,2", "--max-batch", "256"]
MODEL = ["--model", "llama-3-70b", "--gpu", "h100-sxm"]

Argv = Callable[[Path], list[str]]


def query(command: str, *flags: str, model: list[str] = MODEL) -> Argv:
    """A small valid question with ``flags`` added (a later flag overrides the space's)."""

    def argv(_: Path) -> list[str]:
        return [command, *model, *SMALL, *flags]

    return argv


def observed(text: str) -> Argv:
    """A frontier whose --observed file holds ``text``."""

    def argv(tmp_path: Path) -> list[str]:
        path = tmp_path / "observed.csv"
        path.write_text(text)
        return query("frontier", "--observed", str(path))(tmp_path)

    return argv


def workload(text: str) -> Argv:
    """A fastest question whose --workload file holds ``text``."""

    def argv(tmp_path: Path) -> list[str]:
        path = tmp_path / "mix.csv"
        path.write_text(text)
        return query("fastest", "--workload", str(path), "--max-usd-per-mtok", "5")(tmp_path)

    return argv


def plot(relative: str) -> Argv:
    return lambda tmp_path: query("frontier", "--plot", str(tmp_path / relative))(tmp_path)


BUDGET = "must be a finite number > 0"
CASES = {
    "unknown model": (query("fastest", model=["--model", "llama3-70b", "--gpu", "h100-sxm"]), "--model", "Got"),
    "unknown gpu": (query("fastest", model=["--model", "llama-3-70b", "--gpu", "h100-sx"]), "--gpu", "'h100-sxm'"),
    "unknown gpu in a list": (query("fastest", "--gpu", "h100-sxm,h300"), "--gpu", "Got 'h300' instead"),
    "no gpu": (query("fastest", model=["--model", "llama-3-70b"]), "--gpu", "must name at least one accelerator"),
    "no model": (query("cheapest", model=["--gpu", "h100-sxm"]), "--model", "is required"),
    "budget zero": (query("fastest", "--max-usd-per-mtok", "0"), "--max-usd-per-mtok", BUDGET),
    "budget negative": (query("fastest", "--max-usd-per-mtok", "-1"), "--max-usd-per-mtok", "Got '-1' instead"),
    "budget nan": (query("fastest", "--max-usd-per-mtok", "nan"), "--max-usd-per-mtok", "Got 'nan' instead"),
    "budget inf": (query("fastest", "--max-usd-per-mtok", "inf"), "--max-usd-per-mtok", "Got 'inf' instead"),
    "budget text": (query("fastest", "--max-usd-per-mtok", "abc"), "--max-usd-per-mtok", "Got 'abc' instead"),
    "speed zero": (query("cheapest", "--min-tok-s", "0"), "--min-tok-s", BUDGET),
    "tp degree zero": (query("fastest", "--tp-degrees", "0,2"), "--tp-degrees", "must be a positive integer"),
    "tp degrees text": (query("cheapest", "--tp-degrees", "a,b"), "--tp-degrees", "Got 'a' instead"),
    "tp degrees empty": (query("frontier", "--tp-degrees", ""), "--tp-degrees", "comma-separated list"),
    "tp degrees repeated": (query("fastest", "--tp-degrees", "1,1,1"), "--tp-degrees", "1 is given 3 times"),
    "pp degrees repeated in another spelling": (query("cheapest", "--pp-degrees", "1,2,01"), "--pp-degrees", "1 is"),
    "ep degrees repeated": (query("fastest", "--ep-degrees", "1,1"), "--ep-degrees", "must list each value once"),
    "chunk tokens repeated": (query("fastest", "--chunk-tokens", "512,512"), "--chunk-tokens", "512 is given twice"),
    "weight bits repeated": (query("cheapest", "--weight-bits", "16,8,16"), "--weight-bits", "16 is given twice"),
    "kv bits repeated": (query("frontier", "--kv-bits", "8,8"), "--kv-bits", "8 is given twice"),
    "tp modes repeated": (query("fastest", "--tp-modes", "1d,1d"), "--tp-modes", "'1d' is given twice"),
    "serving repeated": (query("fastest", "--serving", "agg,agg"), "--serving", "'agg' is given twice"),
    "recipe engine repeated": (
        query("fastest", "--engine", "vllm,vllm", "--emit", "/nonexistent/recipes"),
        "--engine",
        "'vllm' is given twice",
    ),
    "pp degree fractional": (query("fastest", "--pp-degrees", "1,1.5"), "--pp-degrees", "Got '1.5' instead"),
    "tp mode 3d": (query("fastest", "--tp-modes", "3d"), "--tp-modes", "must be one of 1d, 2d"),
    "one frontier point": (query("frontier", "--points", "1"), "--points", "must be an integer >= 2"),
    "weight bits 3": (query("cheapest", "--weight-bits", "3"), "--weight-bits", "must be one of 16, 8, 4"),
    "acceptance above one": (query("fastest", "--acceptance", "1.5"), "--acceptance", "must be a number in (0, 1)"),
    "gamma without a draft": (query("fastest", "--gamma-max", "5"), "--gamma-max", "needs a draft model"),
    "unknown draft": (query("fastest", "--draft", "tiny", "--gamma-max", "2"), "--draft", "Got 'tiny' instead"),
    "no gpus allowed": (query("cheapest", "--max-gpus", "0"), "--max-gpus", "must be a positive integer"),
    "negative demand": (query("cheapest", "--demand-tok-s", "-5"), "--demand-tok-s", BUDGET),
    "zero time limit": (query("fastest", "--time-limit", "0"), "--time-limit", BUDGET),
    "negative mip gap": (query("fastest", "--mip-gap", "-1"), "--mip-gap", "must be a finite number >= 0"),
    "negative context": (query("frontier", "--context", "-1"), "--context", "must be an integer >= 0"),
    "zero max batch": (query("cheapest", "--max-batch", "0"), "--max-batch", "must be a positive integer"),
    "unknown preset": (query("fastest", "--preset", "papr"), "--preset", "Did you mean 'paper'"),
    "zero utility exponent": (query("frontier", "--utility-exponent", "0"), "--utility-exponent", BUDGET),
    "unknown method": (query("fastest", "--method", "xyz"), "--method", "must be one of mip, enumerate"),
    "observed file missing": (query("frontier", "--observed", "no-such.csv"), "--observed", "no such file"),
    "observed column missing": (observed("tok_s_per_request,label\n40,a\n"), "observed.csv: usd_per_mtok", "missing"),
    "observed price zero": (observed("tok_s_per_request,usd_per_mtok\n40,3\n50,0\n"), "line 3: usd_per_mtok", BUDGET),
    "observed speed text": (observed("tok_s_per_request,usd_per_mtok\nfast,3\n"), "line 2: tok_s_per_request", BUDGET),
    "observed cell names the flag": (observed("tok_s_per_request,usd_per_mtok\n0,3\n"), "--observed: /", "line 2"),
    "workload column missing": (workload("isl,osl\n100,10\n"), "--workload: /", "mix.csv: weight: column is missing"),
    "workload cell": (workload("isl,osl,weight\n100,x,1\n"), "--workload: /", "mix.csv line 2: osl: must be a"),
    "cluster file missing": (
        query("fastest", "--cluster", "no-such-cluster.yaml", model=["--model", "llama-3-70b"]),
        "--cluster: must be a catalog cluster name or an existing file",
        "(no such file /",
    ),
    "observed empty": (observed(""), "--observed", "is empty"),
    "plot into a missing folder": (plot("missing/frontier.png"), "--plot", "No such file or directory"),
    "plot format unknown": (plot("frontier.xyz"), "--plot", "must end in one of"),
    "unknown flag": (query("fastest", "--budget", "3"), "unrecognized arguments", "--budget 3"),
}


def _written(tmp_path: Path) -> set[str]:
    return {p.name for p in tmp_path.rglob("*")}


def _outputs(argv: list[str], tmp_path: Path) -> list[str]:
    """Output files for every command (and a plot for the frontier unless the case gives one)."""
    extra = ["--csv", str(tmp_path / "out.csv")]
    if argv[0] == "frontier" and "--plot" not in argv:
        extra += ["--plot", str(tmp_path / "out.png")]
    return extra


def _run(argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    before = _written(tmp_path)
    code = main([*argv, *_outputs(argv, tmp_path)])
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert _written(tmp_path) == before
    return code, captured.err


@pytest.mark.parametrize(("make_argv", "field", "message"), CASES.values(), ids=CASES.keys())
def test_bad_input_is_one_line_naming_the_field(
    make_argv: Argv, field: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run(make_argv(tmp_path), tmp_path, capsys)

    assert code == EXIT_BAD_INPUT
    assert err.startswith("roofline-opt: error: ")
    assert field in err and message in err


INFEASIBLE = {
    "model fits nowhere": (
        query(
            "fastest",
            "--tp-degrees",
            "1",
            "--pp-degrees",
            "1",
            model=["--model", "llama-3.1-405b", "--gpu", "h100-sxm"],
        ),
        "does not fit in memory",
    ),
    "frontier of a model that fits nowhere": (
        query(
            "frontier", "--tp-degrees", "1", "--pp-degrees", "1", model=["--model", "llama-3.1-405b", "--gpu", "v100"]
        ),
        "does not fit in memory",
    ),
    "budget below the cheapest setup": (query("fastest", "--max-usd-per-mtok", "0.01"), "cheapest setup costs $"),
    "speed above the fastest setup": (query("cheapest", "--min-tok-s", "5000"), "fastest setup reaches"),
    "too few gpus for the model": (query("cheapest", "--max-gpus", "1"), "does not fit in memory"),
}


@pytest.mark.parametrize(("make_argv", "message"), INFEASIBLE.values(), ids=INFEASIBLE.keys())
def test_well_formed_but_infeasible_is_exit_one_with_the_reason(
    make_argv: Argv, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run(make_argv(tmp_path), tmp_path, capsys)

    assert code == EXIT_INFEASIBLE
    assert err.startswith("roofline-opt: infeasible: ") and message in err


@pytest.mark.parametrize("destination", ["missing-folder/out.csv", "."], ids=["no such folder", "a folder"])
def test_unwritable_csv_is_refused_before_solving(
    destination: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _written(tmp_path)

    code = main([*query("frontier")(tmp_path), "--csv", str(tmp_path / destination)])

    captured = capsys.readouterr()
    assert code == EXIT_BAD_INPUT
    assert captured.err.startswith("roofline-opt: error: --csv: cannot write") and captured.err.count("\n") == 1
    assert captured.out == "" and _written(tmp_path) == before
