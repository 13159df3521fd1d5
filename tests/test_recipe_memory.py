"""InferenceX launch scripts' memory flags (roofline_opt.fidelity.recipes ``Memory``): typed per entry, turned into
the engine's KV-memory rule and applied to the estimate of the row that ran the script."""

from __future__ import annotations

from dataclasses import replace

import pytest

from roofline_opt.catalog.profiles import load_profile
from roofline_opt.fidelity import measured, recipes
from roofline_opt.fidelity.validate import largest_fitting_batch, validate
from roofline_opt.physics.specs import (
    DEFAULT,
    TRTLLM_KV_MEMORY_RULE,
    KvMemoryRule,
    sglang_kv_memory_rule,
    trtllm_kv_memory_rule,
)

GIB = 2.0**30
RUN = "run https://github.com/SemiAnalysisAI/InferenceX/actions/runs/26048239142/attempts/1 ({date}); image x"


def _cells(concurrency: int = 16, notes: str | None = None) -> dict[str, str]:
    """A DeepSeek-R1 FP8 row on 8 MI325X under SGLang, run on 2026-05-20: dsr1_fp8_mi325x.sh @ed5867f9
    (``--mem-fraction-static=0.8``)."""
    return {
        "model": "DeepSeek-R1-0528",
        "precision": "FP8 (DeepSeek-R1-0528 block-scaled FP8 checkpoint); KV precision not stated",
        "gpu": "MI325X",
        "n_gpus": "8",
        "layout": "TP8",
        "batch_or_concurrency": f"concurrency {concurrency}",
        "input_len": "1024",
        "output_len": "1024",
        "tok_s_per_request": "50",
        "tok_s_per_gpu": "100",
        "framework": "SGLang v0.5.12",
        "notes": RUN.format(date="2026-05-20") if notes is None else notes,
        "line": "2",
    }


def _setup(**kwargs) -> measured.MeasuredSetup:
    row = measured.map_row(_cells(**kwargs))
    assert row.setup is not None, row.reasons
    return row.setup


def _recipe(source_part: str) -> recipes.Recipe:
    return next(r for r in recipes.RECIPES if source_part in r.source)


def _run(tp: int = 8, dp_attention: bool = False, isl: int = 1024, osl: int = 1024, concurrency: int = 64):
    return recipes.Run(tp, dp_attention, isl, osl, concurrency)


def _fractions(memory: recipes.Memory) -> list[float]:
    return [f for f in (memory.fraction, *(c.fraction for c in memory.cases)) if f is not None]


def test_every_typed_memory_fraction_is_written_in_the_recipes_text():
    for r in recipes.RECIPES:
        assert all(str(f) in r.other for f in _fractions(r.memory)), (r.source, r.memory)


def test_every_sglang_and_trt_recipe_types_its_memory_flag():
    for r in recipes.RECIPES:
        assert (r.memory != recipes.Memory()) == (r.engine in recipes.MEMORY_RULES), r.source


def test_trt_fraction_drops_to_0_7_with_attention_data_parallelism():
    memory = _recipe("dsr1_fp8_b200_trt_mtp.sh @ed5867f9").memory  # KV_CACHE_FREE_MEM_FRACTION=0.7 under DP_ATTENTION
    assert (memory.fraction_for(_run()), memory.fraction_for(_run(dp_attention=True))) == (0.8, 0.7)


def test_a_workload_case_applies_from_its_concurrency():
    memory = _recipe("dsr1_fp8_b200_trt.sh @ec7bafaa").memory  # 1k/8k at CONC >= 256: 0.7
    assert [memory.fraction_for(_run(isl=1024, osl=8192, concurrency=c)) for c in (128, 256)] == [0.8, 0.7]


def test_a_tp_case_sets_the_fraction_at_its_tensor_parallelism():
    memory = _recipe("single_node/dsr1_fp8_b200.sh @ed5867f9").memory  # MEM_FRAC_STATIC 0.82 at TP8, 0.95 at TP4
    assert (memory.fraction_for(_run(tp=8)), memory.fraction_for(_run(tp=4, isl=8192))) == (0.82, 0.95)


def test_sglang_flag_gives_weights_and_pool_that_fraction_of_the_device():
    assert sglang_kv_memory_rule(0.8).capacity_bytes(256 * GIB, 80 * GIB, 8) == pytest.approx(0.8 * 256 * GIB)


def test_trt_flag_gives_the_kv_cache_that_fraction_of_the_memory_free_after_weights():
    reserve = TRTLLM_KV_MEMORY_RULE.reserve_bytes + 8 * TRTLLM_KV_MEMORY_RULE.reserve_bytes_per_instance_gpu
    capacity = trtllm_kv_memory_rule(0.75).capacity_bytes(180 * GIB, 80 * GIB, 8)
    assert capacity == pytest.approx(80 * GIB + 0.75 * (180 * GIB - reserve - 80 * GIB))


def test_a_recipe_rows_memory_rule_is_its_scripts():
    assert _setup().kv_memory_rule == KvMemoryRule("fraction_of_total", 0.8)


def test_the_recipe_reading_names_the_memory_fraction_used():
    assert "--mem-fraction-static 0.8 applied" in _setup().recipe_reading


def test_a_row_without_a_recipe_keeps_the_profiles_rule():
    assert _setup(notes="image x").kv_memory_rule is None


def _sglang_preset():
    return load_profile("sglang").preset_named("mi325x")


def _estimate(cells: dict[str, str]):
    profile = load_profile("sglang")
    (row,) = validate([cells], profile_of=lambda framework: profile)
    return row.estimate


def test_the_estimate_holds_the_batch_the_scripts_fraction_allows():
    s = _setup()
    at_script = largest_fitting_batch(
        s, replace(_sglang_preset(), kv_memory_rule=KvMemoryRule("fraction_of_total", 0.8))
    )
    assert _estimate(_cells()).largest_fitting_batch == at_script


def test_the_scripts_fraction_holds_fewer_sequences_than_the_profiles_default():
    s = _setup()
    at_script = replace(_sglang_preset(), kv_memory_rule=s.kv_memory_rule)
    assert largest_fitting_batch(s, at_script) < largest_fitting_batch(
        replace(s, kv_memory_rule=None), _sglang_preset()
    )


def test_a_batch_fitting_the_profiles_default_overflows_the_scripts_fraction():
    s = _setup()
    one_more = largest_fitting_batch(s, replace(_sglang_preset(), kv_memory_rule=s.kv_memory_rule)) + 1
    assert one_more <= largest_fitting_batch(replace(s, kv_memory_rule=None), _sglang_preset())
    assert _estimate(_cells(one_more)).fits_in_memory is False


def test_the_bound_ignores_the_scripts_fraction():
    s = _setup().for_bound()
    bound = validate([_cells()])[0].prediction
    assert bound.largest_fitting_batch == largest_fitting_batch(replace(s, kv_memory_rule=None), DEFAULT.at_peak())
