"""``--emit DIR`` on the query and plan commands and ``roofline-opt launch ANSWER.json``: recipes whose flags carry
the answer's decisions, and bad input as one line with exit code 2 (nothing written)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from roofline_opt.cli import main

QUESTION = [
    "--model",
    "llama-3-70b",
    "--gpu",
    "h100-sxm",
    "--max-usd-per-mtok",
    "3",
    "--tp-degrees",
    "4,8",
    "--pp-degrees",
    "1",
]


def _flags(script: Path, program: str) -> dict[str, str | None]:
    """The flags of the first command line of ``script`` that starts with ``program``."""
    line = next(x for x in script.read_text().splitlines() if x.startswith(program))
    words = shlex.split(line)
    out: dict[str, str | None] = {}
    for i, w in enumerate(words):
        if w.startswith("--"):
            nxt = words[i + 1] if i + 1 < len(words) else None
            out[w] = None if nxt is None or nxt.startswith("--") else nxt
    return out


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> tuple[Path, dict]:
    """A fastest run saved with --save-dir and recipes emitted beside it (one solve for the module)."""
    root = tmp_path_factory.mktemp("run")
    code = main(["fastest", *QUESTION, "--save-dir", str(root / "run"), "--emit", str(root / "emit")])
    assert code == 0
    return root, json.loads((root / "run" / "answer.json").read_text())


def test_emit_writes_every_engine_with_the_answers_decisions(saved):
    root, record = saved
    v = _flags(root / "emit" / "vllm.serve.sh", "vllm serve")
    assert (v["--tensor-parallel-size"], v["--max-num-seqs"]) == (str(record["tp"]), str(record["batch"]))
    s = _flags(root / "emit" / "sglang.serve.sh", "python3 -m sglang")
    assert s["--max-running-requests"] == str(record["batch"])
    t = _flags(root / "emit" / "trtllm.serve.sh", "trtllm-serve")
    assert t["--tp_size"] == str(record["tp"])
    predicted = json.loads((root / "emit" / "vllm.predicted.json").read_text())
    assert predicted["predicted"]["median_tpot_ms"] == pytest.approx(record["time_per_token_s"] * 1e3)


def test_launch_of_a_saved_answer_gives_the_same_recipe_as_emit(saved, tmp_path):
    root, _ = saved
    assert main(["launch", str(root / "run" / "answer.json"), "--engine", "vllm", "--out", str(tmp_path / "r")]) == 0
    assert (tmp_path / "r" / "vllm.serve.sh").read_text() == (root / "emit" / "vllm.serve.sh").read_text()
    assert not (tmp_path / "r" / "sglang.serve.sh").exists()


def test_the_emit_flags_stay_out_of_the_saved_question(saved):
    root, _ = saved
    text = (root / "run" / "question.yaml").read_text()
    assert "emit" not in text and "engine" not in text


def test_frontier_emits_the_row_asked_for(tmp_path, capsys):
    args = ["frontier", *QUESTION[:4], "--points", "3", "--json", "--emit", str(tmp_path / "e"), "--emit-point", "1"]
    assert main(args) == 0
    rows = json.loads(capsys.readouterr().out)
    v = _flags(tmp_path / "e" / "vllm.serve.sh", "vllm serve")
    assert v["--max-num-seqs"] == str(rows[0]["batch"])


def test_plan_emits_one_recipe_per_layout_pinned_to_its_placement(tmp_path):
    import yaml

    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        "cluster: {nodes: 2, node_type: hgx-h100}\nmodels:\n"
        "  - {name: code, model: llama-3.1-8b, demand_tok_s: 3000, tpot_ms: 20}\n"
    )
    assert main(["plan", str(fleet), "--json", "--emit", str(tmp_path / "e"), "--engine", "vllm"]) == 0
    docs = list(yaml.safe_load_all((tmp_path / "e" / "vllm.k8s.yaml").read_text()))
    hosts = {
        d["spec"]["template"]["spec"]["nodeSelector"].get("kubernetes.io/hostname")
        for d in docs
        if d["kind"] == "Deployment"
    }
    assert docs and None not in hosts


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--engine", "vllm,tensorrt"], "--engine"),
        (["--engine", "dynamo"], "--engine"),
    ],
)
def test_bad_engine_is_one_line_exit_2_and_nothing_written(saved, tmp_path, capsys, args, field):
    root, _ = saved
    code = main(["launch", str(root / "run" / "answer.json"), *args, "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and field in err[0]
    assert not (tmp_path / "r").exists()


def test_a_json_that_is_not_an_answer_is_one_line_exit_2(tmp_path, capsys):
    bad = tmp_path / "a.json"
    bad.write_text(json.dumps({"model": "llama-3-70b", "tp": "eight"}))
    assert main(["launch", str(bad), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not a roofline-opt answer" in err[0]
    bad.write_text(json.dumps({**json.loads('{"x": 1}')}))
    assert main(["launch", str(bad), "--out", str(tmp_path / "r")]) == 2


def test_a_wrongly_typed_answer_field_is_one_line_exit_2(saved, tmp_path, capsys):
    root, record = saved
    bad = tmp_path / "a.json"
    bad.write_text(json.dumps({**record, "batch": "many"}))
    assert main(["launch", str(bad), "--out", str(tmp_path / "r")]) == 2
    assert "wrong type" in capsys.readouterr().err


def test_an_unwritable_emit_folder_is_refused_before_solving(tmp_path, capsys):
    a_file = tmp_path / "f"
    a_file.write_text("x")
    assert main(["fastest", *QUESTION, "--emit", str(a_file)]) == 2
    err = capsys.readouterr()
    assert "--emit" in err.err and err.out == ""


def test_an_answer_no_engine_can_express_says_why_and_exits_1(saved, tmp_path, capsys):
    root, record = saved
    two_d = tmp_path / "a.json"
    two_d.write_text(json.dumps({**record, "tp_2d": True}))
    assert main(["launch", str(two_d), "--out", str(tmp_path / "r")]) == 1
    err = capsys.readouterr().err
    assert err.count("2-D tensor parallelism") >= 3 and not (tmp_path / "r").exists()


def _result(root: Path, **changes) -> Path:
    """A vllm bench serve --save-result file of the emitted recipe's workload (measured 10% slower than predicted)."""
    predicted = json.loads((root / "emit" / "vllm.predicted.json").read_text())
    result = {
        "completed": predicted["workload"]["num_prompts"],
        "failed": 0,
        "num_prompts": predicted["workload"]["num_prompts"],
        "max_concurrency": predicted["workload"]["max_concurrency"],
        "median_tpot_ms": 1.1 * predicted["predicted"]["median_tpot_ms"],
        "output_throughput": predicted["predicted"]["output_throughput"] / 1.1,
        "roofline_recipe": predicted["recipe_id"],
        **changes,
    }
    path = root / "emit" / f"result-{len(changes)}.json"
    path.write_text(json.dumps(result))
    return path


def test_validate_reads_the_benchmark_result_back_against_its_recipe(saved, capsys):
    root, _ = saved
    assert main(["validate", "--bench", str(_result(root)), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ratios = {r["metric"]: r["measured_over_predicted"] for r in out["rows"]}
    assert ratios["median_tpot_ms"] == pytest.approx(1.1) and ratios["output_throughput"] == pytest.approx(1 / 1.1)
    assert out["engine"] == "vllm" and out["workload_differs"] == []


def test_validate_says_when_the_run_is_not_the_recipes_workload(saved, capsys):
    root, _ = saved
    assert main(["validate", "--bench", str(_result(root, max_concurrency=1))]) == 0
    assert "max_concurrency" in capsys.readouterr().out


def test_a_result_without_the_recipe_id_is_one_line_exit_2(saved, capsys):
    root, _ = saved
    assert main(["validate", "--bench", str(_result(root, roofline_recipe=None))]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "roofline_recipe" in err[0]


def test_launch_of_a_plan_json_pins_copies_and_takes_the_lengths_given(tmp_path):
    plan = Path(__file__).parent / "data" / "deploy_plan.json"
    args = ["launch", str(plan), "--engine", "sglang", "--isl", "2000", "--osl", "400", "--out", str(tmp_path / "r")]
    assert main(args) == 0
    bench = (tmp_path / "r" / "sglang.bench.sh").read_text()
    assert "--random-input-len 2000 --random-output-len 400" in bench
    assert "kubernetes.io/hostname: n3" in (tmp_path / "r" / "sglang.k8s.yaml").read_text()


def test_a_bad_length_is_one_line_exit_2(saved, tmp_path, capsys):
    root, _ = saved
    assert main(["launch", str(root / "run" / "answer.json"), "--isl", "many", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--isl" in err[0]
