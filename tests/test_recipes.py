"""InferenceX launch-script table (roofline_opt.fidelity.recipes): what a row that leaves its KV cache and MTP depth
unstated is read with, and how the bound treats what the script fixes."""

from __future__ import annotations

import itertools
from dataclasses import replace
from operator import attrgetter

import pytest

from roofline_opt import catalog
from roofline_opt.fidelity import measured, recipes
from roofline_opt.fidelity.validate import predict
from roofline_opt.physics import evaluator, requests
from roofline_opt.physics.specs import DEFAULT

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
    text = _row().setup.recipe_reading
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


def _typed_values(prefill: recipes.Prefill) -> list[int]:
    cases = [v for c in prefill.cases for v in (c.chunk_tokens, c.prefill_tokens)]
    return [v for v in (prefill.chunk_tokens, prefill.prefill_tokens, *cases) if v is not None]


def test_every_typed_prefill_value_is_written_in_the_recipes_text():
    for r in recipes.RECIPES:
        assert all(str(v) in r.other for v in _typed_values(r.prefill)), (r.source, r.prefill)


def test_every_recipe_whose_text_states_a_prefill_flag_has_it_typed():
    for r in recipes.RECIPES:
        states = "chunked prefill" in r.other or "max_num_tokens" in r.other
        assert states == (r.prefill != recipes.Prefill()), r.source


def test_a_trt_max_num_tokens_formula_is_typed_as_its_rule():
    for r in recipes.RECIPES:
        if "max_num_tokens max(8192, concurrency + ISL" in r.other.replace('" "', ""):
            assert (r.prefill.rule, r.prefill.prefill_tokens) == ("concurrency + isl", 8192), r.source
        elif "(MTP+1) x max batch + ISL" in r.other:
            assert r.prefill.rule == "decode tokens + isl", r.source


def _run(tp: int, isl: int, osl: int, concurrency: int) -> recipes.Run:
    return recipes.Run(tp, False, isl, osl, concurrency)


def test_a_run_without_lengths_states_no_step_budget():
    assert recipes.Prefill(32768, 16384).step_prompt_tokens(recipes.Run(8, False, None, None, 64)) is None


def test_sglang_step_carries_the_smaller_of_chunk_and_prefill_budget():
    assert recipes.Prefill(32768, 16384).step_prompt_tokens(_run(8, 1024, 1024, 64)) == 16384


def test_sglang_chunk_alone_meets_sglangs_default_prefill_budget():
    assert recipes.Prefill(32768).step_prompt_tokens(_run(8, 1024, 1024, 64)) == recipes.SGLANG_MAX_PREFILL_TOKENS


def test_a_tp_case_sets_the_budget_at_its_tensor_parallelism():
    prefill = recipes.Prefill(cases=(recipes.PrefillCase(32768, 32768, tp=8), recipes.PrefillCase(8192, 8192, tp=4)))
    at_tp = [prefill.step_prompt_tokens(_run(tp, 8192, 1024, 4)) for tp in (8, 4)]
    assert at_tp == [32768, 8192]


def test_a_workload_case_applies_only_above_its_concurrency():
    case = recipes.PrefillCase(32768, 32768, isl=8192, osl=1024, above_concurrency=32)
    prefill = recipes.Prefill(196608, 196608, cases=(case,))
    assert [prefill.step_prompt_tokens(_run(8, 8192, 1024, c)) for c in (32, 64)] == [196608, 32768]


def test_trt_concurrency_formula_leaves_the_floor_less_the_decode_tokens():
    prefill = recipes.Prefill(prefill_tokens=8192, rule="concurrency + isl")
    assert prefill.step_prompt_tokens(_run(8, 1024, 1024, 4)) == 8192 - 4


def test_trt_concurrency_formula_holds_a_whole_prompt_above_the_floor():
    prefill = recipes.Prefill(prefill_tokens=8192, rule="concurrency + isl")
    assert prefill.step_prompt_tokens(_run(8, 8192, 1024, 100)) == 8320 - 100  # 8292 rounded up to 64, less 100


def test_trt_decode_tokens_formula_holds_one_prompt_rounded_up_to_64():
    assert recipes.Prefill(rule="decode tokens + isl").step_prompt_tokens(_run(8, 1000, 1024, 16)) == 1024


def test_a_recipe_rows_chunk_budget_is_its_scripts():
    assert _row().setup.chunk_tokens == 131072  # dsr1_fp8_mi325x_mtp.sh: chunked prefill = max prefill 131072


def test_row_assumptions_name_the_chunk_budget_used():
    assert "a step carries at most 131072 prompt tokens" in _row().setup.recipe_reading


def test_a_recipe_without_prefill_flags_keeps_the_default_budget():
    s = _row(gpu="MI355X", framework="ATOM (AMD) (image rocm7.2.0), MTP on", date="2026-02-11").setup
    assert s.chunk_tokens is None


def test_a_row_without_a_recipe_keeps_the_default_budget():
    assert _row(notes="image x").setup.chunk_tokens is None


def _b200_8k_row(notes: str | None = None) -> measured.MeasuredSetup:
    cells = {
        "model": "DeepSeek-R1-0528",
        "precision": "FP8 (DeepSeek-R1-0528 block-scaled FP8 checkpoint); KV precision not stated",
        "gpu": "B200 180GB",
        "n_gpus": "8",
        "layout": "TP8",
        "batch_or_concurrency": "concurrency 16",
        "input_len": "8192",
        "output_len": "1024",
        "tok_s_per_request": "50",
        "tok_s_per_gpu": "100",
        "framework": "SGLang v0.5.12",
        "notes": RUN.format(date="2026-05-22") if notes is None else notes,
        "line": "2",
    }
    setup = measured.map_row(cells).setup
    assert setup is not None
    return setup


def test_a_larger_recipe_chunk_prefills_an_8k_prompt_sooner():
    s = _b200_8k_row()  # dsr1_fp8_b200.sh @ed5867f9 at TP8: 32768 prompt tokens per step
    assert s.chunk_tokens == 32768
    mine = predict(s, None, DEFAULT)
    default = predict(replace(s, chunk_tokens=None), None, DEFAULT)
    assert mine.ttft_s < default.ttft_s  # one step of 8192 prompt tokens, not four of 2048


def test_a_recipe_rows_estimate_is_the_aggregated_model_at_its_chunk():
    s = _b200_8k_row()
    layout = evaluator.Layout.of(s.tp, False, s.pp, s.context, 1, s.ep, s.kv_bits)
    model, gpu = catalog.load_model(s.model_card), catalog.load_gpu(s.gpu_card)
    workload = requests.Workload.single(8192, 1024)
    out = requests.aggregated_figures(model, gpu, DEFAULT, s.weight_bits, layout, 16.0, workload, 32768)
    assert predict(s, None, DEFAULT).tok_s_per_request == pytest.approx(1.0 / float(out["tpot_s"]))


def test_a_row_without_a_recipe_is_estimated_at_the_default_chunk():
    s = _b200_8k_row(notes="image x")
    at_default = replace(s, chunk_tokens=requests.DEFAULT_CHUNK_TOKENS)
    assert predict(s, None, DEFAULT).tok_s_per_gpu == predict(at_default, None, DEFAULT).tok_s_per_gpu


def test_an_unknown_prefill_rule_is_refused():
    with pytest.raises(ValueError, match="prefill rule"):
        recipes.Prefill(rule="isl")


def test_a_row_read_with_its_recipe_is_fitted_by_calibrate():
    """The script's settings are facts of the run, not guesses: calibrate fits the row (it fitted none of the 2026
    file's InferenceX rows while the recipe's reading counted as an assumption)."""
    from roofline_opt.fidelity.calibration.calibrate import fitted_rows

    row = _row(framework="SGLang v0.5.12")
    assert row.setup.recipe_reading and not row.setup.assumptions
    assert [r for r, _ in fitted_rows([row])] == [row]


def test_the_assumptions_column_starts_with_the_recipe_reading():
    setup = _row().setup
    assert setup.notes[0] == setup.recipe_reading and setup.notes[1:] == setup.assumptions


def test_every_aggregated_inferencex_point_row_without_mtp_is_fitted():
    from pathlib import Path

    from roofline_opt.fidelity.calibration.calibrate import fitted_rows

    rows = [
        measured.map_row(c) for c in measured.read_measured(Path(__file__).parent / "data" / "measured_public_2026.csv")
    ]
    plain = [
        r
        for r in rows
        if r.setup is not None and r.setup.recipe_reading and r.setup.serving == "aggregated" and not r.setup.mtp_depth
    ]
    assert len(plain) > 100
    assert {id(r) for r, _ in fitted_rows(rows)} >= {id(r) for r in plain}
