"""Benchmark clients' result files as measurements: each client's format read from its schema (samples in
tests/data/bench, written from the schemas the readers cite, with the fields the readers use and their neighbours),
told apart by content, turned into the measured rows ``validate`` and ``calibrate`` read, and bad files refused in one
line naming the file and the field; the recipe's own benchmark read back and matched to the recipe."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest
from hardening import assert_one_line, run

from roofline_opt.deploy import results
from roofline_opt.errors import InvalidInput
from roofline_opt.fidelity import measured, measurements

BENCH = Path(__file__).parent / "data" / "bench"
EXIT_BAD_INPUT = 2
GPUS = 8
"""GPUs of the deployment every sample measured (tests/data/bench/deployment.yaml: TP8 on 8 x H100)."""

SAMPLES = {
    # file: (client, runs, concurrency, median TTFT ms, median TPOT ms, output tok/s) of its last run, as written
    "vllm-bench-serve.json": ("vllm", 1, 64, 640.2, 27.9, 2124.48132780083),
    "sglang-bench-serving.jsonl": ("sglang", 2, 64, 598.4, 26.9, 2211.6630669546437),
    "profile_export_genai_perf.json": ("genai-perf", 1, 64, 631.7, 28.1, 2109.87),
    "profile_export_aiperf.json": ("aiperf", 1, 64, 612.0, 27.6, 2150.76),
    "profile_export_aiperf.csv": ("aiperf", 1, None, 612.0, 27.6, 2150.76),
    "guidellm-benchmarks.json": ("guidellm", 2, 64, 650.3, 28.2, 2094.07),
}


@pytest.mark.parametrize("name", SAMPLES)
def test_each_clients_sample_reads_as_its_runs_with_the_figures_it_states(name):
    client, n_runs, concurrency, ttft, tpot, out_tok_s = SAMPLES[name]
    runs = results.read(BENCH / name)
    last = runs[-1]
    assert (len(runs), last.client, last.concurrency) == (n_runs, client, concurrency)
    assert (last.median_ttft_ms, last.median_tpot_ms, last.output_tok_s) == (ttft, tpot, out_tok_s)
    assert (last.mean_input_tokens, last.mean_output_tokens) == (2000, 400)


@pytest.mark.parametrize("name", SAMPLES)
def test_each_sample_becomes_a_measured_row_per_gpu_per_user_and_ttft(name):
    _, _, concurrency, ttft, tpot, out_tok_s = SAMPLES[name]
    cells = measurements.read_any([BENCH / name])[-1]
    row = measured.map_row(cells)
    assert row.reasons == () and row.setup is not None
    assert row.measured_tok_s_per_gpu == pytest.approx(out_tok_s / GPUS, rel=1e-5)
    assert row.measured_tok_s_per_request == pytest.approx(1000 / tpot, rel=1e-5)
    assert float(cells["ttft_ms"]) == pytest.approx(ttft)
    assert (row.setup.model_card, row.setup.gpu_card, row.setup.tp, row.setup.input_len) == (
        "llama-3.3-70b",
        "h100-sxm",
        8,
        2000,
    )
    assert row.setup.batch == concurrency and row.setup.check == ("point" if concurrency else "frontier")


def test_the_format_is_told_by_content_not_by_the_file_name(tmp_path):
    for name in SAMPLES:
        misleading = tmp_path / f"{name}.txt"
        shutil.copy(BENCH / name, misleading)
        assert results.read(misleading)[-1].client == SAMPLES[name][0]


def test_an_older_genai_perf_export_with_flat_arguments_reads_its_concurrency_and_recipe(tmp_path):
    data = json.loads((BENCH / "profile_export_genai_perf.json").read_text())
    data["input_config"] = {
        "model": ["meta-llama/Llama-3.3-70B-Instruct"],
        "concurrency": 32,
        "request_count": 128,
        "artifact_dir": "recipes/vllm-0123456789ab.genai-perf",
        "service_kind": "openai",
    }
    (run,) = results.parse_text(json.dumps(data), "old.json")
    assert (run.client, run.concurrency, run.num_prompts, run.recipe_id) == ("genai-perf", 32, 128, "vllm-0123456789ab")


def test_a_rate_based_run_states_no_batch_and_is_checked_on_the_frontier():
    data = json.loads((BENCH / "vllm-bench-serve.json").read_text()) | {"max_concurrency": None, "request_rate": 4.0}
    (run,) = results.parse_text(json.dumps(data), "rate.json")
    assert (run.concurrency, run.request_rate) == (None, 4.0)
    row = measured.map_row(measurements.run_cells(run, measurements.read_description(BENCH / "deployment.yaml"), 1))
    assert row.setup is not None and (row.setup.batch, row.setup.check) == (None, "frontier")


def test_flags_override_the_deployment_yaml_beside_the_file():
    flags = measurements.from_flags(tp="4", n_gpus="8", framework="sglang 0.5.2")
    cells = measurements.read_any([BENCH / "vllm-bench-serve.json"], flags)[0]
    row = measured.map_row(cells)
    assert row.setup is not None and (row.setup.tp, row.setup.instances, row.framework) == (4, 2, "sglang 0.5.2")
    assert row.setup.batch == 32  # 64 in flight over two instances
    assert "flags over" in cells["source"]


def _write(tmp_path: Path, name: str, data: object) -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def _vllm(**changes) -> dict:
    return json.loads((BENCH / "vllm-bench-serve.json").read_text()) | changes


BAD_FILES = {
    "negative TPOT": (_vllm(median_tpot_ms=-3.0), "median_tpot_ms"),
    "NaN TTFT": (json.dumps(_vllm()).replace('"median_ttft_ms": 640.2', '"median_ttft_ms": NaN'), "median_ttft_ms"),
    "infinite throughput": (
        json.dumps(_vllm()).replace('"output_throughput": 2124.48132780083', '"output_throughput": Infinity'),
        "output_throughput",
    ),
    "text for a count": (_vllm(completed="256"), "completed"),
    "fractional count": (_vllm(completed=25.5), "completed"),
    "absurd latency": (_vllm(median_tpot_ms=1e12), "median_tpot_ms"),
    "boolean concurrency": (_vllm(max_concurrency=True), "max_concurrency"),
    "control characters in the model": (_vllm(model_id="llama\u0007"), "model_id"),
    "not a result": ({"hello": "world"}, "not a benchmark result"),
    "a list": ([1, 2, 3], "not a benchmark result"),
    "duplicate key": ('{"completed": 1, "completed": 2}', "completed"),
    "deep nesting": ("[" * 200 + "]" * 200, "nests"),
    "broken JSON": ('{"completed": ', "not valid JSON"),
    "GuideLLM without benchmarks": ({"benchmarks": []}, "benchmarks"),
    "GuideLLM bad strategy": (
        {"benchmarks": [{"metrics": {}, "config": {"strategy": {"type_": "concurrent", "streams": -4}}}]},
        "streams",
    ),
    "profile metric not a number": (
        {"time_to_first_token": {"unit": "ms", "avg": "fast", "p50": 1.0}, "input_config": {}},
        "time_to_first_token.avg",
    ),
    "AIPerf CSV bad cell": ("Metric,avg,p50\nTime to First Token (ms),abc,1\n", "Time to First Token"),
    "JSON lines with a bad line": (json.dumps(_vllm()) + "\n{oops}\n", "line 2"),
}


@pytest.mark.parametrize("case", BAD_FILES)
def test_a_malformed_or_hostile_result_is_one_line_naming_the_file_and_field(case, tmp_path, capsys):
    data, word = BAD_FILES[case]
    path = _write(tmp_path, "result.json", data)
    code, _, err = run(capsys, "validate", str(path), "--gpu", "h100-sxm", "--tp", "8", "--precision", "bf16")
    assert_one_line(err, code, EXIT_BAD_INPUT, str(path), word)


def test_a_result_larger_than_the_bound_is_refused_before_parsing(tmp_path, capsys):
    path = tmp_path / "huge.json"
    with path.open("wb") as f:
        f.truncate(results.MAX_RESULT_BYTES + 1)
    code, _, err = run(capsys, "validate", str(path))
    assert_one_line(err, code, EXIT_BAD_INPUT, str(path), "larger than 64 MiB")


def test_an_undescribed_deployment_is_one_line_saying_what_is_missing(tmp_path, capsys):
    path = _write(tmp_path, "result.json", _vllm())
    code, _, err = run(capsys, "validate", str(path))
    assert_one_line(err, code, EXIT_BAD_INPUT, str(path), "gpu, layout, precision", "deployment.yaml")


def test_a_deployment_yaml_with_an_unknown_key_names_it(tmp_path, capsys):
    _write(tmp_path, "result.json", _vllm())
    (tmp_path / "deployment.yaml").write_text("gpu: h100-sxm\nlayout: TP8\nprecision: bf16\nbatch: 64\n")
    code, _, err = run(capsys, "validate", str(tmp_path / "result.json"))
    assert_one_line(err, code, EXIT_BAD_INPUT, "deployment.yaml: batch", "not a deployment key")


def test_layout_and_tp_flags_together_are_refused(capsys):
    code, _, err = run(capsys, "validate", str(BENCH / "vllm-bench-serve.json"), "--tp", "8", "--layout", "TP8")
    assert_one_line(err, code, EXIT_BAD_INPUT, "--layout")


def test_a_deployment_flag_with_only_measured_points_csvs_is_refused_not_ignored(capsys):
    csv = Path(__file__).parent / "data" / "measured_synthetic.csv"
    code, out, err = run(capsys, "validate", "--measured", str(csv), "--model", "llama-3-8b")
    assert_one_line(err, code, EXIT_BAD_INPUT, "--model", "benchmark client's result file", "drop it")
    assert out == ""


def test_calibrate_refuses_a_deployment_flag_with_only_measured_points_csvs(tmp_path, capsys):
    csv = Path(__file__).parent / "data" / "measured_synthetic.csv"
    out = tmp_path / "card.yaml"
    code, _, err = run(capsys, "calibrate", "--measured", str(csv), "--gpu", "h100-sxm", "--tp", "2", "--out", str(out))
    assert_one_line(err, code, EXIT_BAD_INPUT, "--tp", "measured-points CSVs")
    assert not out.exists()


def test_validate_mixes_our_csv_with_result_files_and_says_where_each_row_came_from(capsys):
    csv = Path(__file__).parent / "data" / "measured_synthetic.csv"
    n_csv = len(measured.read_measured(csv))
    code, out, _ = run(capsys, "validate", str(csv), str(BENCH / "vllm-bench-serve.json"), "--json")
    assert code == 0
    records = json.loads(out)
    assert len(records) == n_csv + 1 and [r["line"] for r in records] == list(range(1, n_csv + 2))
    assert records[-1]["source"].startswith(str(BENCH / "vllm-bench-serve.json"))
    assert records[0]["source"] == f"{csv} line 2"


def test_one_csv_keeps_its_line_numbers():
    csv = Path(__file__).parent / "data" / "measured_synthetic.csv"
    assert measurements.read_any([csv]) == [
        row | {"source": f"{csv} line {row['line']}"} for row in measured.read_measured(csv)
    ]


def test_read_any_needs_a_file():
    with pytest.raises(InvalidInput, match="at least one"):
        measurements.read_any([])


# ----------------------------------------------------------------------------------------------- the loop closed


QUESTION = ["--model", "llama-3-70b", "--gpu", "h100-sxm", "--max-usd-per-mtok", "3", "--tp-degrees", "4,8"]


@pytest.fixture(scope="module")
def emitted(tmp_path_factory) -> Path:
    """A recipe folder of one fastest answer (one solve for the module)."""
    from roofline_opt.cli import main

    root = tmp_path_factory.mktemp("loop")
    assert main(["fastest", *QUESTION, "--pp-degrees", "1", "--emit", str(root / "emit")]) == 0
    return root / "emit"


def _command(script: Path, program: str) -> dict[str, str | None]:
    line = next(x for x in script.read_text().splitlines() if x.startswith(program))
    words = shlex.split(line) + ["--"]
    return {
        w: None if nxt.startswith("--") else nxt for w, nxt in zip(words, words[1:], strict=False) if w.startswith("--")
    }


@pytest.mark.parametrize("client", ["genai-perf", "aiperf"])
def test_the_recipe_benchmarks_with_genai_perf_and_aiperf_at_its_batch(emitted, client):
    predicted = json.loads((emitted / "vllm.predicted.json").read_text())
    flags = _command(emitted / "vllm.bench.sh", f"{client} profile")
    workload = predicted["workload"]
    assert flags["--concurrency"] == str(workload["max_concurrency"])
    assert (flags["--synthetic-input-tokens-mean"], flags["--output-tokens-mean"]) == (
        str(workload["isl"]),
        str(workload["osl"]),
    )
    assert flags["--request-count"] == flags["--num-dataset-entries"] == str(workload["num_prompts"])
    assert predicted["recipe_id"] in (flags["--artifact-dir"] or "")


def _genai_perf_export(emitted: Path, slower: float) -> Path:
    """A GenAI-Perf export of the recipe's benchmark, where GenAI-Perf writes it: below the --artifact-dir, in a
    folder named after model, service kind and stimulus; measured ``slower`` times the predicted TPOT."""
    predicted = json.loads((emitted / "vllm.predicted.json").read_text())
    artifact_dir = _command(emitted / "vllm.bench.sh", "genai-perf profile")["--artifact-dir"]
    data = json.loads((BENCH / "profile_export_genai_perf.json").read_text())
    w, p = predicted["workload"], predicted["predicted"]
    data["inter_token_latency"] |= {"p50": slower * p["median_tpot_ms"], "avg": slower * p["median_tpot_ms"]}
    data["output_token_throughput"]["avg"] = p["output_throughput"] / slower
    data["input_sequence_length"]["avg"], data["output_sequence_length"]["avg"] = w["isl"], w["osl"]
    data["input_config"]["perf_analyzer"]["stimulus"] = {"concurrency": w["max_concurrency"]}
    data["input_config"]["perf_analyzer"]["measurement"]["num"] = w["num_prompts"]
    data["input_config"]["output"]["artifact_directory"] = artifact_dir
    folder = emitted / str(artifact_dir) / "meta-llama_Llama-3-70B-openai-completions-concurrency"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "profile_export_genai_perf.json").write_text(json.dumps(data))
    return folder / "profile_export_genai_perf.json"


def test_validate_bench_matches_a_genai_perf_export_to_its_recipe(emitted, capsys):
    export = _genai_perf_export(emitted, slower=1.2)
    code, out, _ = run(capsys, "validate", "--bench", str(export), "--json")
    assert code == 0
    compared = json.loads(out)
    ratios = {r["metric"]: r["measured_over_predicted"] for r in compared["rows"]}
    assert ratios["median_tpot_ms"] == pytest.approx(1.2) and ratios["output_throughput"] == pytest.approx(1 / 1.2)
    assert (compared["client"], compared["engine"], compared["workload_differs"]) == ("genai-perf", "vllm", [])


def test_validate_reads_the_export_as_a_row_of_the_recipes_deployment(emitted, capsys):
    export = _genai_perf_export(emitted, slower=1.2)
    predicted = json.loads((emitted / "vllm.predicted.json").read_text())
    (cells,) = measurements.read_any([export])
    row = measured.map_row(cells)
    (inst,) = predicted["deployment"]["instances"]
    assert row.setup is not None and row.reasons == ()
    assert (row.setup.model_card, row.setup.gpu_card, row.setup.tp, row.setup.pp) == (
        predicted["model"],
        inst["gpu"],
        inst["tp"],
        inst["pp"],
    )
    assert row.setup.batch * row.setup.instances == predicted["workload"]["max_concurrency"]
    assert f"recipe {predicted['recipe_id']}" in cells["source"]
    assert row.framework.startswith("vllm")


def test_calibrate_reads_result_files_of_several_clients_with_its_gpu_as_the_deployments(tmp_path):
    from roofline_opt.cli import build_parser, fidelity_cmds

    shutil.copy(BENCH / "vllm-bench-serve.json", tmp_path / "run.json")  # no deployment.yaml beside it
    files = [str(tmp_path / "run.json"), str(BENCH / "sglang-bench-serving.jsonl")]
    args = build_parser().parse_args(["calibrate", *files, "--gpu", "h100-sxm", "--tp", "8", "--precision", "bf16"])
    rows = fidelity_cmds.measured_rows(args, gpu=args.gpu)
    mapped = [measured.map_row(r) for r in rows]
    assert [m.setup.gpu_card for m in mapped if m.setup] == ["h100-sxm"] * 3
    assert Path(rows).name == "run.json, sglang-bench-serving.jsonl"


def test_rows_already_read_pass_through_read_measured_and_name_their_files():
    rows = measurements.read_any([BENCH / "vllm-bench-serve.json", BENCH / "guidellm-benchmarks.json"])
    assert measured.read_measured(rows) == list(rows)
    assert Path(rows).name == "vllm-bench-serve.json, guidellm-benchmarks.json"


def test_benchmark_clients_are_tables_of_flags_not_engines():
    from roofline_opt.deploy import flags, parse_engines
    from roofline_opt.deploy.flags import ENGINES

    assert {"genai-perf", "aiperf"} <= set(flags.TABLES) and not {"genai-perf", "aiperf"} & set(ENGINES)
    with pytest.raises(InvalidInput, match="--engine"):
        parse_engines("aiperf", False)


def test_validate_bench_and_files_together_are_refused(capsys):
    sample = str(BENCH / "vllm-bench-serve.json")
    code, _, err = run(capsys, "validate", sample, "--bench", sample)
    assert_one_line(err, code, EXIT_BAD_INPUT, "--bench", "FILE")


def test_a_disaggregated_mtp_recipe_reads_as_its_decode_side_over_every_gpu():
    instances = [
        {"role": "prefill", "gpu": "h200", "tp": 8, "pp": 1, "ep": 8, "dp_attention": False, "batch": 1, "count": 2},
        {"role": "decode", "gpu": "h200", "tp": 16, "pp": 1, "ep": 16, "dp_attention": True, "batch": 128, "count": 2},
    ]
    prediction = {
        "recipe_id": "dynamo-0123456789ab",
        "engine": "dynamo",
        "workload": {"max_concurrency": 256},
        "deployment": {
            "model": "deepseek-v3",
            "weight_bits": 8,
            "kv_bits": 8,
            "gamma": 1,
            "draft": "deepseek-v3-mtp",
            "instances": instances,
        },
    }
    desc = measurements.from_prediction(prediction, "p.json")
    run_ = results.BenchRun(
        "vllm",
        "r.json",
        concurrency=256,
        mean_input_tokens=2000,
        mean_output_tokens=400,
        output_tok_s=20000.0,
        median_tpot_ms=20.0,
    )
    row = measured.map_row(measurements.run_cells(run_, desc, 1))
    assert row.reasons == () and row.setup is not None
    s = row.setup
    assert (s.serving, s.dp_attention, s.tp, s.instances, s.batch, s.total_gpus, s.mtp_depth) == (
        "disaggregated",
        True,
        16,
        2,
        128,
        48,
        1,
    )
    assert row.measured_tok_s_per_gpu == pytest.approx(20000 / 48)


@pytest.mark.parametrize("name", ["missing.json", "missing.csv"])
def test_a_missing_measurement_file_is_named_with_both_kinds_it_may_be(tmp_path, name):
    with pytest.raises(InvalidInput) as err:
        measurements.read_any([tmp_path / name], fields=["FILE"])
    assert err.value.field == "FILE"
    assert "measured-points CSV or benchmark result file" in err.value.message
