"""InferenceX launch-script table (roofline_opt.fidelity.recipes): what a row that leaves its KV cache and MTP depth
unstated is read with, and how the bound treats what the script fixes."""

from __future__ import annotations

import itertools
from operator import attrgetter

from roofline_opt.fidelity import measured, recipes

RUN = "run https://github.com/SemiAnalysisAI/InferenceX/actions/runs/26048239142/attempts/1 ({date}); image x"


def _row(
    gpu: str = "MI325X",
    precision: str = "FP8 (DeepSeek-R1-0528 block-scaled FP8 checkpoint); KV precision not stated",
    framework: str = "SGLang v0.5.12, MTP on",
    layout: str = "TP8",
    date: str = "2026-05-18",
    notes: str | None = None,
) -> measured.MeasuredRow:
    cells = {
        "model": "DeepSeek-R1-0528",
        "precision": precision,
        "gpu": gpu,
        "n_gpus": "8",
        "layout": layout,
        "batch_or_concurrency": "concurrency 16",
        "input_len": "1024",
        "output_len": "1024",
        "tok_s_per_request": "100",
        "tok_s_per_gpu": "200",
        "framework": framework,
        "notes": RUN.format(date=date) if notes is None else notes,
        "line": "2",
    }
    row = measured.map_row(cells)
    assert row.setup is not None, row.reasons
    return row


def test_amd_sglang_mtp_row_reads_three_drafted_tokens_and_an_fp8_cache():
    s = _row().setup
    assert (s.mtp_depth, s.kv_bits, s.kv_stated) == (3, 8, True)


def test_recipe_depth_fixes_the_bounds_depth():
    assert _row().setup.for_bound().mtp_depth == 3


def test_recipe_stated_fp8_cache_is_the_bounds_reading_too():
    s = _row(gpu="B200 180GB", framework="SGLang v0.5.12", date="2026-05-22").setup
    assert s.for_bound().kv_bits == 8


def test_recipe_without_a_kv_flag_keeps_the_engine_default_and_the_favourable_bound():
    s = _row(gpu="H200 SXM 141GB", framework="SGLang v0.5.12", date="2026-05-17").setup
    assert (s.kv_bits, s.kv_stated, s.for_bound().kv_bits) == (16, False, 8)


def test_tensorrt_llm_recipe_drafts_one_token_with_attention_data_parallelism():
    framework, date = "TensorRT-LLM 1.3.0rc14, MTP on", "2026-05-18"
    dp = _row(gpu="H200 SXM 141GB", framework=framework, date=date, layout="TP8 EP8 with attention DP (DEP8)")
    assert dp.setup.mtp_depth == 1


def test_tensorrt_llm_recipe_drafts_three_tokens_without_attention_data_parallelism():
    s = _row(gpu="H200 SXM 141GB", framework="TensorRT-LLM 1.3.0rc14, MTP on", date="2026-05-18").setup
    assert s.mtp_depth == 3


def test_atom_recipe_without_a_token_count_runs_atoms_default_single_draft():
    s = _row(gpu="MI355X", framework="ATOM (AMD) (image rocm7.2.0), MTP on", date="2026-02-11").setup
    assert s.mtp_depth == 1


def test_run_date_picks_the_script_version_in_effect():
    recipe = recipes.recipe_for(
        "DeepSeek-R1-0528", "TensorRT-LLM", RUN.format(date="2026-02-05"), "b200", 8, "aggregated", True
    )
    assert recipe is not None and "@5d517074" in recipe.source


def test_a_run_between_script_versions_read_gets_no_recipe():
    notes = RUN.format(date="2026-04-15")
    assert recipes.recipe_for("DeepSeek-R1-0528", "SGLang", notes, "b200", 8, "aggregated", False) is None


def test_a_row_without_a_run_date_gets_no_recipe():
    assert recipes.recipe_for("DeepSeek-R1-0528", "SGLang", "image x", "b200", 8, "aggregated", False) is None


def test_disaggregated_rows_get_no_recipe():
    notes = RUN.format(date="2026-05-22")
    assert recipes.recipe_for("DeepSeek-R1-0528", "SGLang", notes, "b200", 8, "disaggregated", False) is None


def test_dynamo_rows_get_no_recipe():
    notes = RUN.format(date="2026-05-22")
    assert (
        recipes.recipe_for("DeepSeek-R1-0528", "NVIDIA Dynamo + SGLang", notes, "b200", 8, "aggregated", False) is None
    )


def test_a_stated_kv_precision_wins_over_the_recipe():
    s = _row(precision="FP8 weights, BF16 KV cache").setup
    assert (s.kv_bits, s.kv_stated) == (16, True)


def test_a_stated_mtp_depth_wins_over_the_recipe():
    assert _row(framework="SGLang v0.5.12, MTP-1 on").setup.mtp_depth == 1


def test_row_assumptions_name_the_script_and_commit():
    text = " ".join(_row().setup.assumptions)
    assert "benchmarks/single_node/dsr1_fp8_mi325x_mtp.sh @8283444d" in text


def test_every_recipe_cites_an_inferencex_script_at_a_commit():
    assert all(r.source.startswith(f"{recipes.SOURCE_REPO} benchmarks/") and " @" in r.source for r in recipes.RECIPES)


def test_recipe_versions_of_one_script_do_not_overlap():
    key = attrgetter("engine", "gpu_card", "weight_format", "mtp")
    for _, group in itertools.groupby(sorted(recipes.RECIPES, key=key), key=key):
        spans = sorted((r.since, r.until or "9999") for r in group)
        assert all(a[0] < a[1] <= b[0] for a, b in itertools.pairwise(spans)), spans


def test_trt_llm_written_short_is_tensorrt_llm() -> None:
    assert recipes.engine_of("TRT-LLM 1.1 (PyTorch backend)") == "TensorRT-LLM"
