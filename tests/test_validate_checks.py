"""validate on modern serving rows: replicas, data-parallel attention, disaggregated decode sides, rows without a
batch (throughput ceiling, frontier), MTP, FP4/FP8 KV, name aliases, the JSON verdicts and the plot."""

from __future__ import annotations

import contextlib
import functools
import io
import json
from pathlib import Path

import numpy as np
import pytest

from roofline_opt import catalog, fidelity
from roofline_opt.cli import main
from roofline_opt.errors import InvalidInput
from roofline_opt.fidelity.measured import CHECKS
from roofline_opt.fidelity.names import gpu_card_name, model_candidates
from roofline_opt.fidelity.validate import largest_fitting_batch
from roofline_opt.physics import evaluator
from roofline_opt.physics.specs import DEFAULT

PEAK = DEFAULT.at_peak()
"""The physics of the bound validate checks: the default preset at peak FLOP/s and HBM bandwidth."""

SHARED = Path(__file__).parent / "data" / "measured_points.csv"
EXTRA = Path(__file__).parent / "data" / "measured_public_extra.csv"
COLUMNS = (
    "model,precision,gpu,n_gpus,layout,batch_or_concurrency,input_len,output_len,tpot_ms,tok_s_per_request,"
    "tok_s_per_gpu,framework,notes"
)


def _row(**cells: str) -> dict[str, str]:
    """A well-stated row of decode-only figures (whole requests: tests/test_validate_whole_requests.py)."""
    base = dict(
        model="Llama-3.3-70B",
        precision="FP8, BF16 KV",
        gpu="H100 SXM 80GB",
        n_gpus="2",
        layout="TP2",
        batch_or_concurrency="batch 8",
        input_len="1000",
        output_len="1000",
        tpot_ms="",
        tok_s_per_request="20",
        tok_s_per_gpu="80",
        framework="vLLM",
        notes="decode-only figures",
    )
    return base | cells


def _validate(tmp_path: Path, *rows: dict[str, str]) -> list[fidelity.ValidationRow]:
    path = tmp_path / "m.csv"
    lines = [",".join(f'"{r[c]}"' for c in COLUMNS.split(",")) for r in rows]
    path.write_text(COLUMNS + "\n" + "\n".join(lines) + "\n")
    return fidelity.validate(path)


@functools.cache
def _shared_rows() -> list[fidelity.ValidationRow]:
    return fidelity.validate(SHARED)


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


# ----------------------------------------------------------------------------------------------- layouts


@pytest.mark.parametrize("layout", ["TP1 x 8 replicas", "TP1 DP8", "TP1 x8 instances"])
def test_replicas_are_instances_of_one_layout(layout: str) -> None:
    setup = fidelity.map_row(_row(layout=layout, n_gpus="8", gpu="H200", batch_or_concurrency="concurrency 64")).setup
    assert (setup.tp, setup.instances, setup.batch, setup.gpus_in_all) == (1, 8, 8, 8)


@pytest.mark.parametrize(
    ("layout", "batch", "label", "per_instance"),
    [
        ("TP8EP8", "batch 32", "tp8 pp1 ep8", 32),
        ("tp=8, ep=8", "bs=32", "tp8 pp1 ep8", 32),
        ("TP4 DP2", "concurrency=64", "tp4 pp1 x2", 32),
        ("2 x TP4", "64 concurrent requests", "tp4 pp1 x2", 32),
        ("TP8 DP8 enable-dp-attention", "conc 512", "dp-attention8 ep8", 512),
        ("DEP8", "concurrency 1024 (max 128/rank)", "dp-attention8 ep8", 1024),
    ],
)
def test_layout_and_batch_spellings(layout: str, batch: str, label: str, per_instance: int) -> None:
    cells = _row(
        model="Mixtral-8x7B", precision="FP16", gpu="H100", n_gpus="8", layout=layout, batch_or_concurrency=batch
    )
    row = fidelity.map_row(cells)
    assert row.reasons == ()
    assert (row.setup.label, row.setup.batch) == (label, per_instance)


def test_a_maximum_batch_is_a_cap_not_a_batch(tmp_path: Path) -> None:
    capped, free = _validate(
        tmp_path,
        _row(batch_or_concurrency="max batch 16", tok_s_per_request=""),
        _row(batch_or_concurrency="max load", tok_s_per_request=""),
    )
    assert (capped.row.setup.batch, capped.row.setup.batch_cap) == (None, 16)
    assert capped.prediction.batch <= 16 < free.prediction.batch
    assert capped.predicted_tok_s_per_gpu < free.predicted_tok_s_per_gpu


@pytest.mark.parametrize(
    ("text", "bits"),
    [
        ("FP8 (weights+KV)", (8, 8)),
        ("FP8, kv_cache_dtype=fp8", (8, 8)),
        ("W8A8", (8, 16)),
        ("bfloat16", (16, 16)),
        ("INT4-AWQ", (4, 16)),
        ("NVFP4 weights, FP8 KV", (4, 8)),
    ],
)
def test_precision_spellings(text: str, bits: tuple[int, int]) -> None:
    s = fidelity.map_row(_row(precision=text, gpu="B200")).setup
    assert (s.weight_bits, s.kv_bits) == bits


def test_an_unstated_kv_cache_is_16_bit_for_the_estimate_and_8_bit_for_the_bound_under_fp8_weights() -> None:
    s = fidelity.map_row(_row(precision="FP8")).setup
    assert (s.kv_bits, s.for_bound().kv_bits, s.kv_stated) == (16, 8, False)
    assert s.bound_assumptions[0].startswith("KV precision not stated: 16-bit (the engines' default) for the estimate")


@pytest.mark.parametrize(
    ("framework", "gpu", "bound_kv_bits"),
    [
        ("TensorRT-LLM v0.6.1", "H100 SXM 80GB", 8),
        ("TensorRT-LLM 1.0", "B200", 4),
        ("SGLang 0.4", "H200", 8),
        ("SGLang 0.5", "B200", 4),
        ("vLLM 0.8", "B200", 8),
        ("LMDeploy 0.6", "A100 SXM 80GB", 4),
        ("vLLM 0.8", "V100", 16),
        ("NVIDIA NIM 1.8", "H100 SXM 80GB", 4),
    ],
)
def test_an_unstated_kv_cache_takes_the_engines_lowest_precision_on_that_gpu_for_the_bound(
    framework: str, gpu: str, bound_kv_bits: int
) -> None:
    """Even under 16-bit weights (the KV cache is its own setting); NIM is no listed engine: the lowest any runs."""
    s = fidelity.map_row(_row(precision="BF16", gpu=gpu, framework=framework)).setup
    assert (s.kv_bits, s.for_bound().kv_bits) == (16, bound_kv_bits)
    assert f"{bound_kv_bits}-bit" in s.bound_assumptions[0]


@pytest.mark.parametrize(
    ("precision", "notes", "kv_bits"),
    [
        ("BF16 (weights+KV)", "", 16),
        ("FP8, BF16 KV", "", 16),
        ("FP8", "FP8 KV for DeepSeek", 16),
        ("FP8", "FP8 KV for llama", 8),
    ],
)
def test_a_stated_kv_cache_is_read_the_same_by_the_bound(precision: str, notes: str, kv_bits: int) -> None:
    s = fidelity.map_row(_row(precision=precision, notes=notes)).setup
    assert s.kv_bits == s.for_bound().kv_bits == kv_bits


def test_numbers_with_thousands_separators_and_k_suffixes() -> None:
    s = fidelity.map_row(_row(input_len="8k", output_len="1,024", tok_s_per_gpu="10,907")).setup
    assert s.context == 8512
    assert fidelity.map_row(_row(tok_s_per_gpu="10,907")).measured_tok_s_per_gpu == 10907


def test_more_gpus_than_one_instance_are_replicas_and_say_so() -> None:
    setup = fidelity.map_row(_row(layout="TP2", n_gpus="8", batch_or_concurrency="concurrency 64")).setup
    assert (setup.instances, setup.batch) == (4, 16)
    assert "8 GPUs with 2 per instance: 4 replicas assumed" in setup.assumptions


def test_replicas_give_the_same_tok_s_per_gpu_as_one_instance(tmp_path: Path) -> None:
    one, eight = _validate(
        tmp_path,
        _row(gpu="H200", n_gpus="1", layout="TP1", batch_or_concurrency="batch 8"),
        _row(gpu="H200", n_gpus="8", layout="TP1 x 8 replicas", batch_or_concurrency="concurrency 64"),
    )
    assert eight.predicted_tok_s_per_gpu == pytest.approx(one.predicted_tok_s_per_gpu)
    assert eight.predicted_tok_s_per_request == pytest.approx(one.predicted_tok_s_per_request)


@pytest.mark.parametrize(
    ("layout", "n_gpus", "group", "instances"),
    [("DEP8", "8", 8, 1), ("TP8 EP8 with attention DP (DEP8)", "8", 8, 1), ("DEP4", "8", 4, 2)],
)
def test_dep_layouts_are_data_parallel_attention_groups(layout: str, n_gpus: str, group: int, instances: int) -> None:
    row = fidelity.map_row(_row(model="DeepSeek-R1-0528", layout=layout, n_gpus=n_gpus, gpu="B200"))
    assert row.reasons == ()
    s = row.setup
    assert (s.dp_attention, s.tp, s.ep, s.pp, s.instances) == (True, group, group, 1, instances)


def test_attention_dp_stated_in_the_notes_makes_a_moe_tp_group_an_attention_group() -> None:
    cells = _row(model="Qwen3-235B-A22B", n_gpus="8", layout="TP8", notes="yaml sets enable_attention_dp: true")
    s = fidelity.map_row(cells).setup
    assert (s.dp_attention, s.tp, s.ep) == (True, 8, 8)
    assert "data-parallel attention stated in the notes: the TP degree is the attention group" in s.assumptions


def test_attention_dp_in_the_notes_of_a_dense_model_changes_nothing() -> None:
    s = fidelity.map_row(_row(notes="enable_attention_dp: true")).setup
    assert (s.dp_attention, s.tp) == (False, 2)


def test_disaggregated_rows_are_predicted_on_their_decode_side_over_all_gpus() -> None:
    row = fidelity.map_row(
        _row(
            model="DeepSeek-R1-0528",
            precision="NVFP4",
            gpu="GB200 NVL72",
            n_gpus="36",
            layout="prefill 4 GPU TP4 + decode 32 GPU EP32",
            batch_or_concurrency="concurrency 180",
        )
    )
    s = row.setup
    assert (s.serving, s.dp_attention, s.tp, s.instances, s.batch, s.gpus_in_all) == (
        "disaggregated",
        True,
        32,
        1,
        180,
        36,
    )


def test_a_data_parallel_attention_prediction_is_the_evaluators(tmp_path: Path) -> None:
    cells = _row(model="DeepSeek-R1", gpu="H200", n_gpus="8", layout="DEP8", batch_or_concurrency="concurrency 1024")
    (row,) = _validate(tmp_path, cells)
    figures = evaluator.evaluate(
        catalog.load_model("deepseek-v3"),
        catalog.load_gpu("h200"),
        PEAK,
        8,
        evaluator.Layout.of(8, False, 1, 1500, 1, 8, dp_attention=True),
        1024.0,
    )
    assert row.predicted_tok_s_per_request == pytest.approx(float(figures["tok_s_per_request"]))
    assert row.predicted_tok_s_per_gpu == pytest.approx(float(figures["throughput_tok_s"]) / 8)


def test_a_stated_two_batch_overlap_hides_the_all_to_all_behind_compute(tmp_path: Path) -> None:
    cells = _row(model="DeepSeek-V3", gpu="H100 SXM 80GB", n_gpus="16", layout="DEP16", batch_or_concurrency="bs 512")
    plain, overlapped = _validate(tmp_path, cells, cells | {"layout": "DEP16, two-batch overlap"})
    assert (plain.row.setup.a2a_overlap, overlapped.row.setup.a2a_overlap) == (False, True)
    figures = evaluator.evaluate(
        catalog.load_model("deepseek-v3"),
        catalog.load_gpu("h100-sxm"),
        PEAK,
        8,
        evaluator.Layout.of(16, False, 1, 1500, 1, 16, dp_attention=True, a2a_overlap=True),
        512.0,
    )
    assert overlapped.predicted_tok_s_per_request == pytest.approx(float(figures["tok_s_per_request"]))
    assert overlapped.predicted_tok_s_per_request > plain.predicted_tok_s_per_request


def test_the_bound_is_at_peak_and_the_estimate_at_the_presets_efficiencies(tmp_path: Path) -> None:
    (row,) = _validate(tmp_path, _row())
    model, gpu, layout = (
        catalog.load_model("llama-3.3-70b"),
        catalog.load_gpu("h100-sxm"),
        evaluator.Layout.of(2, 0, 1, 1500),
    )
    at_peak, estimate = (
        float(evaluator.evaluate(model, gpu, p, 8, layout, 8.0)["tok_s_per_request"]) for p in (PEAK, DEFAULT)
    )
    assert row.predicted_tok_s_per_request == pytest.approx(at_peak)
    assert row.estimate.tok_s_per_request == pytest.approx(estimate)
    assert row.estimate_ratio == pytest.approx(min(estimate / 20.0, row.estimate.tok_s_per_gpu / 80.0))


def test_a_measurement_beyond_the_realistic_estimate_but_below_peak_is_bounded(tmp_path: Path) -> None:
    (probe,) = _validate(tmp_path, _row())
    between = (probe.estimate.tok_s_per_request + probe.predicted_tok_s_per_request) / 2
    (row,) = _validate(tmp_path, _row(tok_s_per_request=f"{between:.6f}", tok_s_per_gpu=f"{between * 4:.6f}"))
    assert row.estimate_ratio < 1.0 < row.ratio
    assert row.bound_holds is True


# ----------------------------------------------------------------------------------------------- checks


def test_a_row_at_maximum_load_is_checked_against_the_best_fitting_batch(tmp_path: Path) -> None:
    (row,) = _validate(tmp_path, _row(batch_or_concurrency="max load (batch not reported)", tok_s_per_request=""))
    setup = row.row.setup
    top = largest_fitting_batch(setup, DEFAULT)
    layout = evaluator.Layout.of(2, False, 1, 1500)
    model, gpu = catalog.load_model("llama-3.3-70b"), catalog.load_gpu("h100-sxm")
    figures = evaluator.evaluate(model, gpu, PEAK, 8, layout, np.arange(1.0, top + 2))
    assert figures["fits_in_memory"][top - 1] and not figures["fits_in_memory"][top]
    assert row.check == "throughput ceiling"
    assert row.predicted_tok_s_per_gpu == pytest.approx(float(np.max(figures["throughput_tok_s"][:top])) / 2)
    assert row.bound_holds is (row.predicted_tok_s_per_gpu >= 80.0)


def test_a_row_with_a_speed_and_a_throughput_is_checked_against_the_frontier(tmp_path: Path) -> None:
    (row,) = _validate(tmp_path, _row(batch_or_concurrency="not stated", tok_s_per_request="", tpot_ms="40"))
    setup = row.row.setup
    model, gpu = catalog.load_model("llama-3.3-70b"), catalog.load_gpu("h100-sxm")
    batches = np.arange(1.0, largest_fitting_batch(setup, DEFAULT) + 1)
    figures = evaluator.evaluate(model, gpu, PEAK, 8, evaluator.Layout.of(2, False, 1, 1500), batches)
    fast_enough = figures["tok_s_per_request"] >= 25.0
    assert row.check == "frontier"
    assert row.predicted_tok_s_per_gpu == pytest.approx(float(np.max(figures["throughput_tok_s"][fast_enough])) / 2)
    assert row.predicted_tok_s_per_request >= 25.0


def test_a_row_with_only_a_per_user_speed_is_checked_against_the_fastest_batch(tmp_path: Path) -> None:
    (row,) = _validate(tmp_path, _row(batch_or_concurrency="not stated", tok_s_per_gpu=""))
    model, gpu = catalog.load_model("llama-3.3-70b"), catalog.load_gpu("h100-sxm")
    fastest = evaluator.evaluate(model, gpu, PEAK, 8, evaluator.Layout.of(2, False, 1, 1500), 1.0)
    assert row.check == "speed ceiling"
    assert row.predicted_tok_s_per_request == pytest.approx(float(fastest["tok_s_per_request"]))
    assert row.bound_holds is True


def test_a_speed_beyond_every_fitting_batch_fails_the_frontier_check_with_the_reason(tmp_path: Path) -> None:
    (row,) = _validate(tmp_path, _row(batch_or_concurrency="not stated", tok_s_per_request="", tpot_ms="1"))
    assert row.bound_holds is False
    assert "no batch fitting in memory reaches the measured tok/s per user" in row.to_record()["why_not_bounded"]


def test_in_flight_requests_from_littles_law_are_not_a_batch() -> None:
    row = fidelity.map_row(_row(batch_or_concurrency="~3346 in flight (Little's law, computed)"))
    assert (row.setup.batch, row.setup.check) == (None, "frontier")
    assert any("Little's law" in note for note in row.setup.assumptions)


def test_a_missing_input_length_takes_empty_prompts_and_says_so() -> None:
    row = fidelity.map_row(_row(input_len="dataset (see notes)", output_len="~290 mean (computed)"))
    assert row.setup.context == 145
    assert any("prompts taken as empty" in note for note in row.setup.assumptions)


# ----------------------------------------------------------------------------------------------- precisions, MTP


def test_fp4_weights_and_fp8_kv_are_read_from_the_row() -> None:
    s = fidelity.map_row(
        _row(model="DeepSeek-R1-0528", precision="NVFP4 weights, FP8 KV", gpu="B200 180GB", layout="DEP8", n_gpus="8")
    ).setup
    assert (s.weight_bits, s.kv_bits, s.gpu_card) == (4, 8, "b200")


def test_mi355x_and_gh200_cards_carry_their_own_figures() -> None:
    mi355x, gh200, h200 = (catalog.load_gpu(n) for n in ("mi355x", "gh200", "h200"))
    assert mi355x.supports(4) and mi355x.hbm_bytes == 2.88e11
    assert not gh200.supports(4)
    assert (gh200.hbm_bytes, gh200.hbm_bytes_per_s) != (h200.hbm_bytes, h200.hbm_bytes_per_s)


def test_an_mtp_row_gets_a_verdict_from_the_mtp_draft(tmp_path: Path) -> None:
    base = _row(
        model="DeepSeek-R1",
        gpu="H200",
        n_gpus="8",
        layout="TP8, MoE EP4",
        batch_or_concurrency="batch 1",
        tok_s_per_request="150",
        tok_s_per_gpu="18",
    )
    plain, mtp, stated = _validate(
        tmp_path, base, base | {"notes": "MTP-3 enabled"}, base | {"notes": "MTP-2 enabled; acceptance rate 0.6"}
    )
    assert mtp.bound_holds is not None and mtp.row.setup.mtp_depth == 3
    assert mtp.predicted_tok_s_per_request > plain.predicted_tok_s_per_request
    assert (stated.row.setup.mtp_depth, stated.row.setup.acceptance) == (2, 0.6)
    assert stated.predicted_tok_s_per_request < mtp.predicted_tok_s_per_request


# ----------------------------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("name", "card"),
    [
        ("deepseek-ai/DeepSeek-R1-0528", "deepseek-v3"),
        ("meta-llama/Llama-3.3-70B-Instruct", "llama-3.3-70b"),
        ("Meta-Llama-3.1-8B-Instruct", "llama-3.1-8b"),
        ("Llama-2-70b-chat-hf", "llama-2-70b"),
        ("DeepSeek-V3-0324", "deepseek-v3"),
        ("Qwen/Qwen3-235B-A22B-FP8", "qwen3-235b-a22b"),
        ("Qwen3-30B-A3B-Instruct-2507", "qwen3-30b-a3b"),
        ("mistralai/Mistral-7B-Instruct-v0.3", "mistral-7b"),
        ("Mistral-Large-Instruct-2407", "mistral-large-2"),
        ("llama2-70b-99.9", "llama-2-70b"),
        ("llama3.1-405b", "llama-3.1-405b"),
        ("gptj-99", "gpt-j-6b"),
    ],
)
def test_model_aliases_resolve_to_the_architectures_card(name: str, card: str) -> None:
    assert card in model_candidates(name)
    assert fidelity.map_row(_row(model=name)).setup is not None


@pytest.mark.parametrize(
    ("name", "card"),
    [
        ("H100-SXM-80GB", "h100-sxm"),
        ("B200-180GB", "b200"),
        ("GH200 144GB", "gh200"),
        ("GB200 NVL72", "gb200"),
        ("MI355X", "mi355x"),
        ("L40S 48GB", "l40s"),
        ("H100 PCIe", None),
        ("H100 NVL", None),
    ],
)
def test_accelerator_aliases(name: str, card: str | None) -> None:
    assert gpu_card_name(name) == card


# ----------------------------------------------------------------------------------------------- output


@pytest.fixture(scope="module")
def shared_cli(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, list[dict], str, Path]:
    """One CLI run on the shared file with --json and --plot: exit code, records, stderr, plot path."""
    plot = tmp_path_factory.mktemp("plot") / "v.png"
    code, out, err = _run(["validate", "--measured", str(SHARED), "--json", "--plot", str(plot)])
    return code, json.loads(out), err, plot


def test_json_gives_every_row_a_verdict_and_its_kind_or_null_with_a_reason(shared_cli) -> None:
    code, records, err, _ = shared_cli
    assert code == 0 and err.startswith("validate: ")
    for r in records:
        if r["bound_holds"] is None:
            assert r["reason"] and r["check"] is None
        else:
            assert r["check"] in CHECKS and r["reason"] is None and r["ratio"] > 0
    summary = fidelity.summarise(_shared_rows())
    assert summary.compared / summary.well_stated >= 0.85
    assert summary.bounded / summary.compared >= 0.95


def test_public_rows_outside_the_shared_file_get_verdicts_and_the_bound_holds() -> None:
    """80 rows collected from public sources not in ../shared (TensorRT-LLM performance docs of v0.9 and v1.0,
    LMDeploy, MLPerf Inference v4.1/v5.0, OCI's MI300X blog, SGLang), each with its source and arithmetic."""
    summary = fidelity.summarise(fidelity.validate(EXTRA))
    assert summary.rows == 80
    assert summary.compared / summary.well_stated >= 0.85
    assert summary.bounded / summary.compared >= 0.95


def test_plot_draws_every_accelerator_with_a_verdict(shared_cli) -> None:
    plot = shared_cli[3]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    panels = fidelity.plot_panels(_shared_rows())
    assert {"h100-sxm", "h200", "b200", "gb200"} <= set(panels)
    assert sum(len(p) for p in panels.values()) == fidelity.summarise(_shared_rows()).compared


def test_per_framework_summary_counts_every_row() -> None:
    rows = _shared_rows()
    table = fidelity.by_framework(rows)
    assert sum(t["rows"] for t in table) == len(rows)
    assert {"TensorRT-LLM", "vLLM", "SGLang", "LMDeploy"} <= {t["framework"] for t in table}


@pytest.mark.parametrize(
    ("cells", "reason"),
    [
        ({"n_gpus": "0"}, "names a GPU count of 0"),
        ({"tok_s_per_request": "", "tok_s_per_gpu": ""}, "no measured tok/s per request or per GPU"),
        ({"gpu": "H100 PCIe"}, "has no catalog card"),
        ({"model": "Kimi-K2"}, "has no catalog card"),
        ({"model": "Llama-4-Scout-17B-16E"}, "chunked local attention"),
        ({"model": "GPT-OSS-120B"}, "sliding-window attention"),
        ({"model": "Qwen3-30B-A3B", "layout": "DEP2,PP2", "n_gpus": "4"}, "with pipeline parallelism PP2 is not"),
    ],
)
def test_rows_that_cannot_be_checked_name_what_is_missing(cells: dict[str, str], reason: str) -> None:
    row = fidelity.map_row(_row(**cells))
    assert row.setup is None
    assert any(reason in r for r in row.reasons)


@pytest.mark.parametrize("cells", [{"layout": "DEP0", "model": "DeepSeek-V3"}, {"layout": "TP8 DP0"}])
def test_an_impossible_degree_is_refused_naming_the_line(cells: dict[str, str]) -> None:
    with pytest.raises(InvalidInput, match="line 7: layout"):
        fidelity.map_row(_row(**cells) | {"line": "7"})
