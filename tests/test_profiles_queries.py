"""Questions under engine profiles: per-accelerator physics, MIP equal to enumeration, defaults, deployable layouts,
intervals, and the --engine / --profile flags."""

from __future__ import annotations

import functools
import json
import math

import numpy as np
import pytest

from roofline_opt import api, catalog
from roofline_opt.catalog.profiles import load_profile
from roofline_opt.cli import main
from roofline_opt.errors import InvalidInput
from roofline_opt.optimize.enumerate import best_point, enumerate_best, feasible_points
from roofline_opt.optimize.queries import cheapest, fastest
from roofline_opt.optimize.results import Setup, reevaluate
from roofline_opt.optimize.testing import assert_same_optimum
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics.profiles import AcceleratorEfficiency, EngineProfile

SKEWED = EngineProfile(
    name="skewed",
    engine="sglang",
    engine_versions="test",
    settings=(("usable_hbm_fraction", 0.9),),
    accelerators=(
        AcceleratorEfficiency(("amd-cdna3",), 0.35, 0.4, log_error_quantiles=(-0.5, 0.1)),
        AcceleratorEfficiency(("nvidia-hopper",), 0.6, 0.8, kernel_launch_factor=1.5, log_error_quantiles=(-0.2, 0.1)),
    ),
    default_chunk_tokens=1024,
    default_kv_bits=8,
    deployable=("tp", "pp", "ep", "dp_attention", "disagg"),
)
"""A profile whose families differ a lot, so a setup priced with the wrong accelerator's physics would show."""

SMALL = dict(tp_degrees=(1, 2, 4, 8), pp_degrees=(1, 2), max_batch=256, max_instances=3)
QUESTIONS = {
    "decode-two-families": dict(model="llama-3-70b", gpu=["h100-sxm", "mi300x"], profile=SKEWED),
    "agg-disagg-prefill-h200-decode-mi300x": dict(
        model="llama-3-70b",
        gpu="mi300x",
        prefill_gpu="h200",
        decode_gpu="mi300x",
        isl=4000,
        osl=500,
        serving=["agg", "disagg"],
        profile=SKEWED,
        ttft_ms=3000,
    ),
    "moe-engine-sglang": dict(model="mixtral-8x7b", gpu=["h200", "mi300x"], isl=1000, osl=500, engine="sglang"),
    "agg-engine-trtllm": dict(
        model="llama-3-8b", gpu=["h100-sxm", "b200"], isl=2000, osl=500, engine="trtllm", ttft_ms=400
    ),
}


@functools.cache
def _setting(name: str):
    spec = {**SMALL, **QUESTIONS[name]}
    q = api.question(spec.pop("model"), spec.pop("gpu"), **spec)
    pts = feasible_points(q)
    return q, pts, float(pts.usd_per_mtok[best_point(pts, "cheapest", None)])


@pytest.mark.parametrize("factor", (None, 1.0, 2.0))
@pytest.mark.parametrize("name", QUESTIONS)
def test_fastest_under_a_profile_equals_enumeration(name, factor):
    q, pts, cheapest_usd = _setting(name)
    budget = None if factor is None else cheapest_usd * factor
    oracle, answer = enumerate_best(q, "fastest", budget, pts), fastest(q, budget)
    assert_same_optimum("fastest", answer, oracle, budget)
    assert_same_optimum("fastest", oracle, answer, budget)


@pytest.mark.parametrize("name", QUESTIONS)
def test_cheapest_under_a_profile_equals_enumeration(name):
    q, pts, _ = _setting(name)
    oracle, answer = enumerate_best(q, "cheapest", None, pts), cheapest(q, None)
    assert_same_optimum("cheapest", answer, oracle, None)
    assert_same_optimum("cheapest", oracle, answer, None)


def test_each_accelerator_of_a_question_is_priced_with_its_own_efficiencies():
    q = api.question("llama-3-70b", ["h100-sxm", "mi300x"], profile=SKEWED)
    model = q.model
    for name in ("h100-sxm", "mi300x"):
        gpu = catalog.load_gpu(name)
        setup = Setup(gpu=name, weight_bits=16, tp=8, tp_2d=False, pp=1, ep=1, batch=32, gamma=0)
        answer = reevaluate(q, setup, "test")
        layout = ev.Layout.of(8, False, 1, q.context, 1, 1, 16)
        direct = ev.evaluate(model, gpu, SKEWED.preset_for(gpu), 16, layout, 32)
        assert answer.figures["tok_s_per_request"] == pytest.approx(float(direct["tok_s_per_request"]), rel=1e-12)
        assert q.preset_on(gpu).flop_efficiency == SKEWED.efficiency_for(gpu).flop_efficiency


def test_without_a_profile_nothing_changes_and_the_neutral_profile_is_the_same_physics():
    plain = api.fastest_answer(api.question("llama-3-8b", "h100-sxm", isl=1000, osl=200))
    neutral = api.fastest_answer(api.question("llama-3-8b", "h100-sxm", isl=1000, osl=200, profile="neutral"))
    assert plain.setup == neutral.setup and plain.figures == neutral.figures
    assert plain.to_record()["profile"] == "neutral"
    assert api.question("llama-3-8b", "h100-sxm").profile is None


def test_the_profile_sets_the_defaults_a_question_leaves_open():
    q = api.question("llama-3-8b", "h100-sxm", isl=1000, osl=200, profile=SKEWED)
    assert (q.chunk_tokens, q.kv_bits) == ((1024,), (8,))
    q = api.question("llama-3-8b", "h100-sxm", isl=1000, osl=200, profile=SKEWED, chunk_tokens=512, kv_bits=16)
    assert (q.chunk_tokens, q.kv_bits) == ((512,), (16,))
    assert q.preset.usable_hbm_fraction == 0.9


def test_layouts_the_engine_does_not_deploy_are_not_offered_or_are_refused():
    no_pp = EngineProfile("no-pp", "vllm", "test", deployable=("tp", "ep"))
    assert api.question("llama-3-8b", "h100-sxm", profile=no_pp).pp_degrees == (1,)
    with pytest.raises(InvalidInput, match="disaggregated") as err:
        api.question("llama-3-8b", "h100-sxm", isl=100, osl=10, serving="disagg", profile=no_pp)
    assert err.value.field == "serving"
    with pytest.raises(InvalidInput, match="4-bit KV"):
        api.question("llama-3-8b", "h100-sxm", kv_bits=(16, 4), engine="vllm")


def test_the_interval_is_the_entry_quantiles_around_each_figure():
    q = api.question("llama-3-70b", "mi300x", profile=SKEWED)
    rec = api.fastest_answer(q).to_record()
    low, high = SKEWED.accelerators[0].log_error_quantiles
    assert rec["tok_s_per_gpu_low"] == pytest.approx(rec["tok_s_per_gpu"] * math.exp(low))
    assert rec["tok_s_per_request_high"] == pytest.approx(rec["tok_s_per_request"] * math.exp(high))
    assert rec["usd_per_mtok_low"] == pytest.approx(rec["usd_per_mtok"] * math.exp(-high))
    assert rec["usd_per_mtok_high"] == pytest.approx(rec["usd_per_mtok"] * math.exp(-low))
    assert rec["profile"] == "skewed"


def test_the_paper_preset_has_no_interval_and_refuses_an_engine():
    rec = api.fastest_answer(api.question("llama-3-70b", "h100-sxm", preset="paper")).to_record()
    assert "tok_s_per_gpu_low" not in rec and "profile" not in rec
    with pytest.raises(InvalidInput) as err:
        api.question("llama-3-70b", "h100-sxm", preset="paper", engine="vllm")
    assert err.value.field == "engine"


def test_a_profile_of_another_engine_than_the_one_named_is_refused():
    with pytest.raises(InvalidInput, match="describes sglang") as err:
        api.question("llama-3-8b", "h100-sxm", engine="vllm", profile="sglang")
    assert err.value.field == "profile"


def test_packaged_engine_profiles_price_amd_rows_below_neutral():
    """The derived profiles follow their rows: SGLang and vLLM rows on MI300X ran below the neutral estimate."""
    neutral = load_profile("neutral")
    for engine in ("sglang", "vllm"):
        entry = load_profile(engine).efficiency_for(catalog.load_gpu("mi300x"))
        assert (
            entry.rows > 0 and entry.hbm_efficiency < neutral.efficiency_for(catalog.load_gpu("mi300x")).hbm_efficiency
        )


def test_cli_engine_names_the_profile_and_a_list_needs_emit(capsys):
    assert main(["fastest", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--engine", "vllm"]) == 0
    out = capsys.readouterr().out
    assert "vllm profile" in out and "not a confidence interval" in out
    assert main(["fastest", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--engine", "vllm,sglang"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--engine" in err[0] and "--emit" in err[0]


def test_cli_profile_file_prices_the_answer(tmp_path, capsys):
    from roofline_opt.catalog.profiles import profile_yaml

    path = tmp_path / "mine.yaml"
    path.write_text(profile_yaml(SKEWED))
    assert main(["fastest", "--model", "llama-3-70b", "--gpu", "mi300x", "--profile", str(path), "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    expected = api.fastest_answer(api.question("llama-3-70b", "mi300x", profile=SKEWED)).to_record()
    assert rec["profile"] == "skewed"
    assert rec["tok_s_per_request"] == pytest.approx(expected["tok_s_per_request"])


def test_cli_one_engine_with_emit_writes_only_its_recipe(tmp_path, capsys):
    out = tmp_path / "recipes"
    args = ["cheapest", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--engine", "sglang", "--emit", str(out)]
    assert main(args) == 0
    written = {p.name for p in out.rglob("*") if p.is_file()}
    assert any("sglang" in n for n in written) and not any("vllm" in n or "trtllm" in n for n in written)


def test_validate_prices_each_row_with_its_engine_profile():
    from roofline_opt import fidelity
    from roofline_opt.catalog.profiles import MEASURED_ENGINE_KEYS, engine_of_framework

    path = "tests/data/measured_public_2026.csv"
    plain = fidelity.validate(path)
    profiles = {e: load_profile(e) for e in MEASURED_ENGINE_KEYS}
    own = fidelity.validate(path, profile_of=lambda f: profiles.get(engine_of_framework(f) or ""))
    changed = [
        (a, b)
        for a, b in zip(plain, own, strict=True)
        if a.estimate_ratio is not None and engine_of_framework(a.row.framework)
    ]
    assert changed and all(a.ratio == b.ratio for a, b in changed)  # the bound is the preset's
    assert np.median([b.estimate_ratio for _, b in changed]) < np.median([a.estimate_ratio for a, _ in changed])


ATOM_ROW = 244
"""A line of tests/data/measured_public_2026.csv: ATOM on 4 MI355X (TP4), DeepSeek-R1, no MTP."""


def _one_row_csv(tmp_path, line: int):
    lines = open("tests/data/measured_public_2026.csv").read().splitlines()
    path = tmp_path / "one.csv"
    path.write_text(lines[0] + "\n" + lines[line - 1] + "\n")
    return path


def _validated(capsys, path, *flags: str) -> dict:
    assert main(["validate", str(path), "--json", *flags]) == 0
    return json.loads(capsys.readouterr().out)[0]


def test_validate_prices_an_atom_row_with_the_atom_profile(tmp_path, capsys):
    path = _one_row_csv(tmp_path, ATOM_ROW)
    own, plain = _validated(capsys, path), _validated(capsys, path, "--profile", "neutral")
    assert "ATOM" in own["framework"] and (own["profile"], plain["profile"]) == ("atom", "neutral")
    assert own["estimate_ratio"] != plain["estimate_ratio"]


def test_atom_is_no_engine_choice_for_questions():
    assert main(["fastest", "--model", "llama-3-8b", "--gpu", "mi355x", "--engine", "atom"]) == 2


def test_a_study_axis_of_engines_answers_each_question_under_its_profile(tmp_path):
    import yaml

    from roofline_opt.study import load_study
    from roofline_opt.study.execute import answer_row

    path = tmp_path / "engines.yaml"
    axes = {"engine": [None, "sglang"], "model": ["llama-3-70b"], "gpu": ["mi300x"], "max_usd_per_mtok": [2]}
    path.write_text(yaml.safe_dump({"kind": "fastest", "axes": axes}))
    study = load_study(str(path))
    rows = {q.values["engine"]: answer_row(study.kind, q.id, q.values) for q in study.questions}
    assert len({q.id for q in study.questions}) == 2
    expected = api.fastest_answer(
        api.question("llama-3-70b", "mi300x", engine="sglang"), max_usd_per_mtok=2
    ).to_record()
    assert rows["sglang"]["profile"] == "sglang" and rows[None]["profile"] == "neutral"
    assert rows["sglang"]["tok_s_per_request"] == pytest.approx(expected["tok_s_per_request"])


def test_cli_mip_and_enumeration_agree_under_an_engine(capsys):
    base = [
        "fastest",
        "--model",
        "llama-3-8b",
        "--gpu",
        "h100-sxm,mi300x",
        "--engine",
        "vllm",
        "--max-batch",
        "64",
        "--tp-degrees",
        "1,2,4",
        "--pp-degrees",
        "1,2",
        "--max-usd-per-mtok",
        "1",
        "--json",
    ]
    records = []
    for method in ("mip", "enumerate"):
        assert main([*base, "--method", method]) == 0
        records.append(json.loads(capsys.readouterr().out))
    mip, oracle = records
    assert mip["profile"] == oracle["profile"] == "vllm"
    assert mip["tok_s_per_request"] == pytest.approx(oracle["tok_s_per_request"], rel=1e-5)
