"""validate, calibrate, reproduce and sensitivity: measured rows mapped or listed with a reason, known efficiencies
recovered, the reproduction's files written, assumptions moving the answer the expected way, bad input exit code 2."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from roofline_opt import api, catalog, fidelity
from roofline_opt.cli import EXIT_BAD_INPUT, main
from roofline_opt.fidelity import MeasuredSetup
from roofline_opt.physics import evaluator, requests
from roofline_opt.physics.specs import DEFAULT

DATA = Path(__file__).parent / "data"
MEASURED = DATA / "measured_points.csv"
"""A copy of shared/reference/measured_points.csv."""
SYNTHETIC = DATA / "measured_synthetic.csv"
"""Rows computed by the evaluator (default preset) with these efficiencies on h100-sxm, see its notes column."""
TRUE_FIT = {"flop_efficiency": 0.55, "hbm_efficiency": 0.60, "network_latency_factor": 2.0}
HEADER = "model,precision,gpu,n_gpus,layout,batch_or_concurrency,input_len,output_len,tok_s_per_request,tok_s_per_gpu"
GOOD_ROW = "Llama-2-7B,FP16,A100 SXM 80GB,1,TP1,static batch 1,128,2048,98.92,98.92"


def _run(argv: list[str]) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of one CLI call."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


# ----------------------------------------------------------------------------------------------- validate


def test_validate_gives_every_shared_row_a_verdict_or_a_reason() -> None:
    code, out, err = _run(["validate", "--measured", str(MEASURED), "--json"])
    records = json.loads(out)
    assert code == 0
    assert len(records) == len(pd.read_csv(MEASURED))
    for record in records:
        assert isinstance(record["bound_holds"], bool) or (record["bound_holds"] is None and record["reason"])
    assert sum(isinstance(r["bound_holds"], bool) for r in records) == 49
    assert err.startswith("validate: 49 of 59 rows mapped")


def test_validate_maps_a_row_and_predicts_with_the_evaluator() -> None:
    row = next(r for r in fidelity.validate(MEASURED) if r.row.line == 17)  # Llama-2-7B A100 batch 1, 128 in 2048 out
    model, gpu = catalog.load_model("llama-2-7b"), catalog.load_gpu("a100-80gb")
    layout = evaluator.Layout.of(1, False, 1, 1152)
    peak = DEFAULT.at_peak()
    prefill = requests.prefill_step(model, gpu, peak, 16, layout, 1.0, 128).step_time_s
    decode = evaluator.step(model, gpu, peak, 16, layout, 1.0).step_time_s
    expected = 2048 / float(prefill + 2048 * decode)  # a static batch's whole request: its per_request spans it
    assert row.row.setup == MeasuredSetup(
        "llama-2-7b",
        16,
        16,
        "a100-80gb",
        1,
        1,
        1,
        1,
        1,
        1152,
        total_gpus=1,
        input_len=128,
        output_len=2048,
        speed_basis="request",
        static_batch=True,
        framework="LMDeploy v0.1.0a1 (TurboMind)",
        clients=1,
    )
    assert row.predicted_tok_s_per_request == pytest.approx(expected)
    assert row.ratio_tok_s_per_request == pytest.approx(expected / 98.92)
    assert row.bound_holds is True


def test_validate_splits_instances_and_reads_an_fp8_kv_cache() -> None:
    row = fidelity.map_row(
        {
            "model": "Llama-2-70B",
            "precision": "FP8 (weights+KV)",
            "gpu": "H100 SXM 80GB",
            "n_gpus": "8",
            "layout": "TP2 x 4 instances",
            "batch_or_concurrency": "concurrency 400",
            "input_len": "1000",
            "output_len": "200",
            "tok_s_per_request": "10",
            "tok_s_per_gpu": "500",
        }
    )
    assert row.setup == MeasuredSetup(
        "llama-2-70b",
        8,
        8,
        "h100-sxm",
        2,
        1,
        1,
        4,
        100,
        1100,
        total_gpus=8,
        input_len=1000,
        output_len=200,
        clients=400,
    )
    assert row.reasons == ()


def test_unmappable_rows_are_listed_with_their_reason(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    api_row = "Llama-2-70B-chat,not disclosed,not disclosed,,not disclosed,client concurrency 5,550,150,65.0,"
    path.write_text(f"{HEADER}\nFoo-13B,FP16,H100 SXM 80GB,1,TP1,batch 1,10,10,50,50\n{api_row}\n{GOOD_ROW}\n")
    code, out, _ = _run(["validate", "--measured", str(path)])
    assert code == 0
    assert "line 2 (Foo-13B, H100 SXM 80GB): model 'Foo-13B' has no catalog card" in out
    assert "layout 'not disclosed' gives no tensor-parallel degree TPn" in out
    assert "validate: 1 of 3 rows mapped (2 listed with a reason; 1 of 2 well-stated rows have a verdict)" in out


def test_a_failed_point_whose_batch_does_not_fit_says_so(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    path.write_text(f"{HEADER}\nLlama-2-70B,FP16,A100 SXM 80GB,2,TP2,batch 4096,2000,2000,1000,100000\n")
    code, out, _ = _run(["validate", "--measured", str(path)])
    assert code == 0
    assert "(the stated batch does not fit in memory here: at most " in out


def test_speculative_measurement_of_a_model_without_mtp_module_gets_no_verdict(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    path.write_text(f"{HEADER},notes\n{GOOD_ROW},MTP-3 enabled\n")
    (row,) = fidelity.validate(path)
    assert row.predicted_tok_s_per_request is None
    assert row.bound_holds is None
    assert "speculative decoding but the model has no MTP module" in row.to_record()["reason"]


def test_the_bound_and_the_estimate_both_exceed_measurements_made_at_lower_efficiencies() -> None:
    rows = fidelity.validate(SYNTHETIC)  # measured at 55% FLOP/s, 60% HBM: below the default's 70% / 75%
    summary = fidelity.summarise(rows)
    assert (summary.compared, summary.bounded) == (11, 11)
    assert all(r.ratio > r.estimate_ratio > 1.0 for r in rows)
    assert summary.median_estimate_ratio == pytest.approx(0.75 / 0.60, rel=0.05)
    assert f"bound holds on 11/11 = 100%; median bound/measured {summary.median_ratio:.4g}" in summary.line()


# ----------------------------------------------------------------------------------------------- calibrate


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    """The CLI's fit of the synthetic file (JSON) and the profile it wrote."""
    cards = tmp_path_factory.mktemp("cards")
    profile = cards / "h100-fit.yaml"
    # the synthetic rows were generated on the H100 card's earlier figures, the notebook's: calibrate against those
    generated_on = cards / "h100-sxm.yaml"
    generated_on.write_text(fidelity.card_yaml(catalog.load_gpu("h100-sxm").in_notebook()))
    argv = ["calibrate", "--measured", str(SYNTHETIC), "--gpu", str(generated_on), "--out", str(profile), "--json"]
    code, out, _ = _run(argv)
    assert code == 0
    return json.loads(out), profile


def test_calibrate_moves_towards_the_efficiencies_the_rows_were_made_with(calibrated: tuple[dict, Path]) -> None:
    # made with an earlier physics (its notes), so the fit comes close rather than exact
    (fit,) = calibrated[0]["fits"]
    assert fit["fitted_median_abs_error"] < 0.05 < 0.2 < fit["prior_median_abs_error"]
    assert fit["leave_one_out_median_abs_error"] < 0.05
    for name in ("flop_efficiency", "hbm_efficiency"):
        assert abs(np.log(fit["values"][name] / TRUE_FIT[name])) < abs(np.log(fit["prior"][name] / TRUE_FIT[name]))


def test_calibrated_profile_sets_the_fitted_efficiencies_on_its_accelerator(calibrated: tuple[dict, Path]) -> None:
    (fit,), path = calibrated[0]["fits"], calibrated[1]
    profile = catalog.profiles.load_profile(str(path))
    preset = profile.preset_for(catalog.load_gpu("h100-sxm"))
    for name in fidelity.FIT_PARAMETERS:
        assert getattr(preset, name) == pytest.approx(fit["values"][name])


# ----------------------------------------------------------------------------------------------- reproduce


def test_reproduce_writes_frontier_files_and_the_comparison(tmp_path: Path) -> None:
    argv = ["reproduce", "--out", str(tmp_path), "--only", "llama-3-8b", "--context", "0", "--points", "6"]
    code, out, _ = _run(argv)
    comparison = pd.read_csv(tmp_path / "comparison.csv")
    assert code == 0
    assert (tmp_path / "llama-3-8b.png").read_bytes()[:4] == b"\x89PNG"
    assert len(pd.read_csv(tmp_path / "llama-3-8b.csv")) >= 2
    assert comparison.loc[0, "max_tok_s_per_request"] == pytest.approx(483.6, rel=0.01)
    assert comparison.loc[0, "cheapest_usd_per_mtok"] == pytest.approx(0.0094, rel=0.01)
    assert "| Llama 3 8B | 485.8 (483.6) | +0.5% |" in (tmp_path / "reproduce.md").read_text()
    assert "Llama 3 8B" in out


def test_reproduce_context_choice_matches_the_notebooks_cheapest() -> None:
    context, table = fidelity.choose_context()
    assert context == 0
    assert list(table["context"]) == list(fidelity.CONTEXT_CANDIDATES)
    assert table.loc[0, "cheapest_rel_diff"] == pytest.approx(0.0, abs=0.01)


# ----------------------------------------------------------------------------------------------- sensitivity


def _sensitivity(*labels: str) -> fidelity.Sensitivity:
    """Baseline and the named variants on a small Llama 3 8B question."""
    q = api.question("llama-3-8b", "h100-sxm", tp_degrees=(1, 2, 4, 8), pp_degrees=(1, 2), max_batch=256, context=2000)
    chosen = [v for v in fidelity.variants(False) if v.group == "baseline" or v.label in labels]
    return fidelity.sensitivity(q, points=6, chosen=chosen)


def test_lower_hbm_efficiency_lowers_max_speed() -> None:
    table = _sensitivity("hbm_efficiency 0.5").table.set_index("variant")
    assert (
        table.loc["hbm_efficiency 0.5", "max_tok_s_per_request"] < 0.95 * table.loc["as given", "max_tok_s_per_request"]
    )
    assert table.loc["hbm_efficiency 0.5", "max_rel_change"] < -0.05


def test_one_d_only_all_reduce_is_never_faster_nor_cheaper() -> None:
    table = _sensitivity("1-D TP only").table.set_index("variant")
    one_d, both = table.loc["1-D TP only"], table.loc["as given"]
    assert one_d["max_tok_s_per_request"] <= both["max_tok_s_per_request"] * (1 + 1e-9)
    assert one_d["cheapest_usd_per_mtok"] >= both["cheapest_usd_per_mtok"] * (1 - 1e-9)


def test_sensitivity_plot_is_written(tmp_path: Path) -> None:
    result = _sensitivity("latency x2", "exponent 2")
    fidelity.plot_sensitivity(result, tmp_path / "s.png", "test")
    assert result.table.set_index("variant").loc["exponent 2", "preferred_rel_change"] < 0
    assert (tmp_path / "s.png").read_bytes()[:4] == b"\x89PNG"


# ----------------------------------------------------------------------------------------------- bad input


BAD = {
    "missing measured file": (["validate", "--measured", "{missing}"], "--measured", "no such file"),
    "CSV missing a column": (["validate", "--measured", "{bad_csv}"], "m.csv: layout", "column is missing"),
    "unknown preset": (["validate", "--measured", str(MEASURED), "--preset", "papr"], "--preset", "'paper'"),
    "calibrate unknown gpu": (["calibrate", "--measured", str(SYNTHETIC), "--gpu", "h100-sx"], "--gpu", "'h100-sxm'"),
    "calibrate gpu without rows": (["calibrate", "--measured", str(SYNTHETIC), "--gpu", "b200"], "--gpu", "h100-sxm"),
    "sensitivity unknown gpu": (["sensitivity", "--model", "llama-3-8b", "--gpu", "h1OO"], "--gpu", "must be one of"),
    "reproduce unknown case": (["reproduce", "--only", "llama-3-9b", "--out", "{out}"], "--only", "'llama-3-8b'"),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_input_exits_2_with_one_line(case: str, tmp_path: Path) -> None:
    argv, field, fragment = BAD[case]
    (tmp_path / "m.csv").write_text(f"{HEADER.replace('layout,', '')}\n{GOOD_ROW}\n")
    paths = {"missing": tmp_path / "nope.csv", "bad_csv": tmp_path / "m.csv", "out": tmp_path / "out"}
    code, out, err = _run([arg.format(**paths) for arg in argv])
    assert code == EXIT_BAD_INPUT
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("roofline-opt: error: ")
    assert field in err and fragment in err
