"""validate evaluates each distinct setup once: rows differing only in batch, cap, copies or check share one batch
sweep, and what they read from it equals evaluating each row on its own (issue 27: 10,000 rows within 60 s)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from roofline_opt.fidelity.measured import map_row, read_measured
from roofline_opt.fidelity.validate import CURVE_POINTS, Predictor, _evaluate, validate
from roofline_opt.physics.specs import DEFAULT

MEASURED = Path(__file__).resolve().parents[1] / "examples" / "measured_points.csv"


def _setups() -> list:
    return [r for r in map(map_row, read_measured(MEASURED)) if r.setup is not None]


def test_each_row_validated_with_the_others_equals_the_row_validated_alone(tmp_path: Path) -> None:
    together = validate(MEASURED)
    with open(MEASURED, newline="", encoding="utf-8") as f:
        header, *lines = list(csv.reader(f))
    for i in range(0, len(lines), 7):  # every 7th row alone keeps the test short
        alone = tmp_path / f"row{i}.csv"
        with open(alone, "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows([header, lines[i]])
        (row,) = validate(alone)
        expected = together[i].to_record()
        assert {k: v for k, v in row.to_record().items() if k != "line"} == {
            k: v for k, v in expected.items() if k != "line"
        }


@pytest.mark.parametrize("preset", [DEFAULT, DEFAULT.at_peak()], ids=["estimate", "bound"])
def test_a_point_read_from_the_shared_sweep_equals_evaluating_that_batch(preset) -> None:
    predictor = Predictor(preset)
    points = [r.setup for r in _setups() if r.setup.check == "point"]
    assert points
    for s in points:
        p = predictor.predict(s, None)
        share = s.clients / s.instances if s.clients else float(s.batch)
        f = _evaluate(s, preset, [share])
        assert p.tok_s_per_request == float(f["tok_s_per_request"][0])
        assert p.tok_s_per_gpu == float(f["throughput_tok_s"][0] * s.instances / s.gpus_in_all)
        assert p.fits_in_memory == bool(f["fits_in_memory"][0])


def test_rows_differing_only_in_batch_share_one_sweep() -> None:
    predictor = Predictor(DEFAULT)
    (s,) = [r.setup for r in _setups()][:1]
    for batch in (1, 2, 3):
        predictor.predict(s.__class__(**{**s.__dict__, "batch": batch}), None)
    assert len(predictor._sweeps) == 1 and len(predictor._tops) == 1


def test_the_kept_curve_spans_the_sweep_in_at_most_curve_points() -> None:
    predictor = Predictor(DEFAULT)
    s = _setups()[0].setup
    p = predictor.predict(s, None)
    batches, sweep = predictor.sweep(s, p.largest_fitting_batch)
    assert 1 < len(p.curve_tok_s_per_request) <= CURVE_POINTS < len(batches)
    assert p.curve_tok_s_per_request[0] == sweep["tok_s_per_request"][0]
    assert p.curve_tok_s_per_request[-1] == sweep["tok_s_per_request"][-1]
    assert np.all(np.isin(p.curve_tok_s_per_request, sweep["tok_s_per_request"]))
