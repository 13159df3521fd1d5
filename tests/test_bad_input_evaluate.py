"""Bad input to `roofline-opt evaluate` gets exit code 2, one stderr line naming the field, and no output file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from roofline_opt import catalog
from roofline_opt.cli import EXIT_BAD_INPUT, main

SETUP = ["evaluate", "--gpu", "h100-sxm", "--tp", "8", "--pp", "1", "--batch", "4"]
"""A valid setup without --model; cases add the model (or replace a flag)."""
GOOD_ROW = "llama-3-8b,h100-sxm,8,1,4"


def with_flag(flag: str, value: str, model: str = "llama-3-70b") -> Callable[[Path], list[str]]:
    """The valid setup with ``flag`` set to ``value`` (replacing its valid value if there is one)."""

    def argv(_: Path) -> list[str]:
        args = [*SETUP, "--model", model]
        if flag in args:
            args[args.index(flag) + 1] = value
            return args
        return [*args, flag, value]

    return argv


def with_file(name: str, text: str, flag: str) -> Callable[[Path], list[str]]:
    """The valid setup with ``flag`` pointing at a file ``name`` holding ``text``."""

    def argv(tmp_path: Path) -> list[str]:
        path = tmp_path / name
        path.write_text(text)
        return with_flag(flag, str(path))(tmp_path)

    return argv


def from_csv(text: str) -> Callable[[Path], list[str]]:
    def argv(tmp_path: Path) -> list[str]:
        path = tmp_path / "setups.csv"
        path.write_text(text)
        return ["evaluate", "--from-csv", str(path)]

    return argv


def model_card(old: str, new: str) -> str:
    return (catalog.REPO_ROOT / "models" / "llama-3-8b.yaml").read_text().replace(old, new)


def gpu_card(old: str, new: str) -> str:
    return (catalog.REPO_ROOT / "instances" / "gpus" / "v100.yaml").read_text().replace(old, new)


CASES = {
    "unknown model suggests a name": (with_flag("--model", "llama3-70b"), "--model", "Did you mean 'llama-3-70b'"),
    "unknown gpu suggests a name": (with_flag("--gpu", "h100-sx"), "--gpu", "Did you mean 'h100-sxm'"),
    "tp zero": (with_flag("--tp", "0"), "--tp", "must be a positive integer. Got '0' instead."),
    "tp negative": (with_flag("--tp", "-2"), "--tp", "Got '-2' instead"),
    "tp fractional": (with_flag("--tp", "2.5"), "--tp", "Got '2.5' instead"),
    "batch nan": (with_flag("--batch", "nan"), "--batch", "must be a positive integer"),
    "context negative": (with_flag("--context", "-1"), "--context", "must be an integer >= 0"),
    "tokens per step zero": (with_flag("--tokens-per-step", "0"), "--tokens-per-step", "positive integer"),
    "4-bit weights on a100": (
        lambda p: [*with_flag("--weight-bits", "4")(p), "--gpu", "a100-80gb"],
        "--weight-bits",
        "a100-80gb has a FLOP rate for (16, 8)",
    ),
    "weight bits against the name suffix": (
        with_flag("--weight-bits", "16", model="llama-3-70b-int8"),
        "--weight-bits",
        "must agree with the model name's 8-bit suffix",
    ),
    "weight bits 3": (with_flag("--weight-bits", "3"), "--weight-bits", "must be one of 16, 8, 4"),
    "two-batch overlap without dp attention": (
        lambda p: [*SETUP, "--model", "deepseek-v3", "--weight-bits", "8", "--two-batch-overlap"],
        "--two-batch-overlap",
        "give --dp-attention too",
    ),
    "acceptance above one": (with_flag("--acceptance", "1.5"), "--acceptance", "must be a number in (0, 1)"),
    "gamma max without a draft": (with_flag("--gamma-max", "4"), "--gamma-max", "must be 0 without a draft"),
    "draft without gamma max": (with_flag("--draft", "llama-3-8b"), "--gamma-max", "must be at least 1 with a draft"),
    "unknown preset": (with_flag("--preset", "papr"), "--preset", "Did you mean 'paper'"),
    "prefill degree of a decode-only setup": (
        with_flag("--prefill-tp", "4"),
        "--prefill-tp",
        "applies to whole requests: give --isl and --osl too, or drop it",
    ),
    "negative prefill degree of a decode-only setup": (
        with_flag("--prefill-tp", "-5"),
        "--prefill-tp",
        "must be a positive integer. Got '-5' instead.",
    ),
    "chunk of a decode-only setup": (
        with_flag("--chunk-tokens", "512"),
        "--chunk-tokens",
        "applies to whole requests: give --isl and --osl too",
    ),
    "prefill gpu of an aggregated setup": (
        lambda p: [*with_flag("--prefill-gpu", "h200")(p), "--isl", "1000", "--osl", "100"],
        "--prefill-gpu",
        "applies to disaggregated serving: give --serving disagg too, or drop it",
    ),
    "CSV aggregated row with a prefill degree": (
        from_csv(f"model,gpu,tp,pp,batch,isl,osl,prefill_tp\n{GOOD_ROW},1000,100,2\n"),
        "setups.csv line 2: prefill_tp",
        "applies to disaggregated serving: give `serving` disagg too",
    ),
    "expert parallelism on a dense model": (with_flag("--ep", "2"), "--ep", "must be 1 or divide"),
    "TP degree not dividing the attention heads": (
        with_flag("--tp", "3"),
        "--tp",
        "must divide llama-3-70b's 64 attention heads (engines shard whole heads over the TP ranks): one of 1, 2, 4,",
    ),
    "missing batch flag": (lambda p: SETUP[:-2] + ["--model", "llama-3-8b"], "--batch", "is required"),
    "malformed YAML gpu card": (with_file("bad.yaml", "name: [unclosed\n", "--gpu"), "bad.yaml", "is not valid YAML"),
    "model card missing a field": (
        with_file("m.yaml", model_card("d_model: 4096\n", ""), "--model"),
        "m.yaml: d_model",
        "is missing",
    ),
    "model card with a wrong type": (
        with_file("m.yaml", model_card("d_model: 4096", "d_model: big"), "--model"),
        "m.yaml: d_model",
        "must be a positive integer. Got 'big' instead.",
    ),
    "model card with a negative width": (
        with_file("m.yaml", model_card("d_ff: 14336", "d_ff: -5"), "--model"),
        "m.yaml: d_ff",
        "Got -5 instead",
    ),
    "empty gpu card": (with_file("empty.yaml", "", "--gpu"), "empty.yaml", "is empty"),
    "gpu card with a nan rate": (
        with_file("g.yaml", gpu_card("16: 1.25e+14", "16: .nan"), "--gpu"),
        "g.yaml: flop_per_s_by_bits[16]",
        "must be a finite number > 0",
    ),
    "config.json with a syntax error": (
        with_file("config.json", '{"hidden_size": 4096,,}', "--model"),
        "config.json",
        "is not valid JSON",
    ),
    "config.json missing the hidden size": (
        with_file("config.json", '{"num_attention_heads": 32}', "--model"),
        "config.json: hidden_size",
        "is missing from the config",
    ),
    "from-csv file does not exist": (
        lambda p: ["evaluate", "--from-csv", str(p / "nope.csv")],
        "--from-csv",
        "no such file",
    ),
    "empty CSV": (from_csv(""), "--from-csv", "is empty"),
    "CSV without rows": (from_csv("model,gpu,tp,pp,batch\n"), "--from-csv", "has a header but no rows"),
    "CSV missing a column": (
        from_csv("model,gpu,tp,pp\nllama-3-8b,h100-sxm,8,1\n"),
        "--from-csv: /",
        "setups.csv: batch: column is missing: the file needs columns model, gpu, tp, pp, batch",
    ),
    "CSV with a bad cell names the flag and its line": (
        from_csv(f"model,gpu,tp,pp,batch\n{GOOD_ROW}\nllama-3-8b,h100-sxm,8,1,0\n"),
        "--from-csv: /",
        "setups.csv line 3: batch: must be a positive integer. Got '0' instead",
    ),
    "CSV with a bad boolean": (
        from_csv(f"model,gpu,tp,pp,batch,tp_2d\n{GOOD_ROW},maybe\n"),
        "setups.csv line 2: tp_2d",
        "must be one of true, false",
    ),
    "from-csv together with --model": (
        lambda p: [*from_csv(f"model,gpu,tp,pp,batch\n{GOOD_ROW}\n")(p), "--model", "llama-3-8b"],
        "--from-csv",
        "drop --model",
    ),
}


@pytest.mark.parametrize(("make_argv", "field", "message"), CASES.values(), ids=CASES.keys())
def test_bad_input_is_one_line_naming_the_field(
    make_argv: Callable[[Path], list[str]],
    field: str,
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out_csv = tmp_path / "out.csv"

    code = main([*make_argv(tmp_path), "--csv", str(out_csv)])

    captured = capsys.readouterr()
    assert code == EXIT_BAD_INPUT
    assert captured.err.startswith("roofline-opt: error: ") and captured.err.count("\n") == 1
    assert field in captured.err and message in captured.err
    assert "Traceback" not in captured.err and captured.out == ""
    assert not out_csv.exists()


@pytest.mark.parametrize("destination", ["missing-folder/out.csv", "."], ids=["no such folder", "a folder"])
def test_unwritable_csv_destination_names_the_flag_and_leaves_nothing(
    destination: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = sorted(tmp_path.rglob("*"))

    code = main([*SETUP, "--model", "llama-3-8b", "--csv", str(tmp_path / destination)])

    captured = capsys.readouterr()
    assert code == EXIT_BAD_INPUT
    assert captured.err.startswith("roofline-opt: error: --csv: cannot write") and captured.err.count("\n") == 1
    assert captured.out == ""
    assert sorted(tmp_path.rglob("*")) == before


def test_a_prefill_flag_at_its_default_is_accepted_on_a_decode_only_setup(capsys: pytest.CaptureFixture[str]) -> None:
    code = main([*SETUP, "--model", "llama-3-8b", "--prefill-tp", "1", "--json"])

    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert json.loads(captured.out)[0]["tp"] == 8
