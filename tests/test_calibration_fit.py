"""calibrate: values inside their bounds, pulled towards the prior, fitted only where the rows identify them,
leave-one-out errors equal to refits without the row, and a profile file every loader reads back."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

from roofline_opt.catalog import load_gpu
from roofline_opt.catalog.profiles import load_profile
from roofline_opt.cli import EXIT_BAD_INPUT, main
from roofline_opt.fidelity.calibration import calibrate as cal
from roofline_opt.fidelity.calibration import fit
from roofline_opt.fidelity.measured import map_row, read_measured

DATA = Path(__file__).parent / "data"
MEASURED = DATA / "measured_points.csv"


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def h100():
    """The H100 rows of the reference file: predictor, measured tok/s per request and the prior's values."""
    pairs = [
        (r, s) for r, s in cal.fitted_rows([map_row(c) for c in read_measured(MEASURED)]) if s.gpu_card == "h100-sxm"
    ]
    preset = load_profile("neutral").preset_for(load_gpu("h100-sxm"))
    measured = np.array([r.measured_tok_s_per_request for r, _ in pairs])
    return cal.predictor([s for _, s in pairs], preset), measured, cal.prior_values(preset)


def test_rows_made_at_a_pure_speed_scale_give_that_scale_back(h100) -> None:
    predict, _, prior = h100
    truth = fit.values_at(prior, np.array([[np.log(0.8), 0, 0, 0, 0]]))
    measured = predict(truth)[0]
    coordinates, found = cal.fit_values(predict, measured, prior)
    assert "speed_scale" in found.fitted
    assert fit.values_at(prior, coordinates[None, :])[0] == pytest.approx(truth[0], rel=0.01)


def test_values_stay_inside_their_physical_bounds_when_rows_are_far_slower(h100) -> None:
    predict, measured, prior = h100
    coordinates, _ = cal.fit_values(predict, measured / 20.0, prior)
    values = fit.values_at(prior, coordinates[None, :])[0]
    for name, value in zip(fit.PARAMETERS, values, strict=True):
        low, high = fit.BOUNDS[name]
        assert low <= value <= high


def test_unidentified_coordinates_are_held_with_a_reason(h100) -> None:
    predict, measured, prior = h100
    found = fit.identify(predict, measured, prior)
    held = set(fit.COORDINATES) - set(found.fitted)
    assert held and set(found.held_because) == held
    coordinates = fit.fit(predict, measured, prior, found.fitted)[0]
    for name in held:
        assert coordinates[fit.COORDINATES.index(name)] == 0.0


@pytest.mark.parametrize("rows", [1, 2, 3])
def test_a_fit_has_at_least_one_row_more_than_coordinates(h100, rows: int) -> None:
    predict, measured, prior = h100
    found = fit.identify(lambda p: predict(p)[:, :rows], measured[:rows], prior)
    assert len(found.fitted) <= rows - 1


def test_leave_one_out_errors_equal_a_fit_without_the_row(h100) -> None:
    predict, measured, prior = h100
    found = fit.identify(predict, measured, prior)
    full = fit.fit(predict, measured, prior, found.fitted)[0]
    held_out = fit.leave_one_out(predict, measured, prior, found.fitted, full)
    for i in (0, 5):
        keep = np.arange(len(measured)) != i
        alone = fit.fit(
            lambda p, keep=keep: predict(p)[:, keep], measured[keep], prior, found.fitted, start=full[None, :]
        )[0]
        error = np.log(predict(fit.values_at(prior, alone[None, :]))[0, i] / measured[i])
        assert held_out[i] == pytest.approx(error, abs=1e-6)


def test_the_prior_pulls_the_fit_towards_its_values(h100) -> None:
    predict, measured, prior = h100
    found = fit.identify(predict, measured, prior)
    coordinates = fit.fit(predict, measured, prior, found.fitted)[0]
    saved = fit.WIDTHS.copy()
    try:
        fit.WIDTHS[:] = saved * 100  # an almost flat prior
        loose = fit.fit(predict, measured, prior, found.fitted)[0]
    finally:
        fit.WIDTHS[:] = saved
    assert np.sum((coordinates / saved) ** 2) < np.sum((loose / saved) ** 2)


def test_calibrate_writes_a_profile_every_loader_reads(tmp_path: Path) -> None:
    out = tmp_path / "mine.yaml"
    code, text, _ = _run(["calibrate", "--measured", str(MEASURED), "--out", str(out), "--json"])
    assert code == 0
    record = json.loads(text)
    profile = load_profile(str(out))
    assert profile.name == "mine" and record["profile"] == "mine"
    fitted = {e.accelerators[0]: e for e in profile.accelerators if e.rows}
    for f in record["fits"]:
        entry = fitted[f["gpu"]]
        assert entry.rows == f["rows"]
        assert entry.log_error_quantiles == pytest.approx(f["log_error_quantiles"])
        assert entry.flop_efficiency == pytest.approx(f["values"]["flop_efficiency"])
        assert f["leave_one_out_median_abs_error"] >= 0


def test_calibrate_prints_the_leave_one_out_error_beside_the_fit() -> None:
    code, text, _ = _run(["calibrate", "--measured", str(MEASURED), "--gpu", "h100-sxm"])
    assert code == 0
    assert "leave-one-out" in text and "h100-sxm: 11 rows" in text


@pytest.mark.parametrize("gpu_cell,card", [("GB200 NVL72", "gb200"), ("H800 SXM 80GB", "h800")])
def test_mapped_gb200_and_h800_rows_are_fitted(tmp_path: Path, gpu_cell: str, card: str) -> None:
    lines = MEASURED.read_text().splitlines()
    header, rows = lines[0], [line for line in lines[1:] if "H100 SXM" in line][:4]
    path = tmp_path / "rows.csv"
    path.write_text("\n".join([header] + [line.replace("H100 SXM 80GB", gpu_cell) for line in rows]) + "\n")
    code, text, err = _run(["calibrate", "--measured", str(path), "--gpu", card])
    assert code == 0, err
    assert f"{card}: " in text


def test_an_engine_without_rows_is_refused_naming_the_option() -> None:
    code, _, err = _run(["calibrate", "--measured", str(MEASURED), "--engine", "sglang", "--engine-version", "9.9"])
    assert code == EXIT_BAD_INPUT
    assert "--measured" in err and "sglang" in err


@pytest.mark.parametrize("version", ["", " ", "latest", "0"])
def test_an_engine_version_that_is_no_version_number_is_refused_naming_the_option(version: str) -> None:
    code, out, err = _run(["calibrate", "--measured", str(MEASURED), "--engine-version", version])

    assert code == EXIT_BAD_INPUT and out == "" and err.count("\n") == 1
    assert err.startswith("roofline-opt: error: --engine-version: must be a version number like 0.6.1")


def test_an_engine_version_with_a_leading_v_is_the_version_the_rows_state() -> None:
    assert cal.checked_version("v0.6.1") == cal.checked_version("0.6.1") == "0.6.1"


def test_a_version_without_rows_is_named_in_the_refusal_without_an_engine() -> None:
    code, _, err = _run(["calibrate", "--measured", str(MEASURED), "--engine-version", "9.9"])

    assert code == EXIT_BAD_INPUT and "--measured: has no rows of version 9.9 a fit can use" in err


def test_one_step_held_out_errors_are_close_to_refits(h100) -> None:
    predict, measured, prior = h100
    found = fit.identify(predict, measured, prior)
    full = fit.fit(predict, measured, prior, found.fitted)[0]
    exact = fit.leave_one_out(predict, measured, prior, found.fitted, full)
    one_step = fit._one_step_held_out(predict, measured, prior, found.fitted, full)
    assert np.median(np.abs(one_step - exact)) < 0.1 * np.median(np.abs(exact))
