"""The vectorised step components give the evaluator's tok/s per request at any parameter point (to 1e-9)."""

from __future__ import annotations

import importlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from roofline_opt.fidelity.calibration import components
from roofline_opt.fidelity.calibration.calibrate import fitted_rows
from roofline_opt.fidelity.calibration.fit import BOUNDS
from roofline_opt.fidelity.measured import MeasuredSetup, map_row, read_measured
from roofline_opt.physics.specs import DEFAULT

validate_module = importlib.import_module("roofline_opt.fidelity.validate")
DATA = Path(__file__).parent / "data"
FILES = (DATA / "measured_points.csv", DATA / "measured_public_2026.csv", DATA / "measured_public_extra.csv")


def _setups() -> list[MeasuredSetup]:
    rows = [map_row(c) for path in FILES for c in read_measured(path)]
    setups = list(dict.fromkeys(s for _, s in fitted_rows(rows)))
    dense = next(s for s in setups if s.model_card == "llama-2-70b" and s.tp == 4)
    base = replace(dense, input_len=None, output_len=None, static_batch=False, speed_basis="tpot")
    moe = next(s for s in setups if s.dp_attention)
    extra = [
        replace(base, batch=64),
        replace(base, serving="disaggregated", batch=64),
        replace(base, input_len=1000, output_len=200, speed_basis="request", batch=48),
        replace(base, input_len=1000, output_len=200, speed_basis="tpot", batch=300),
        replace(base, input_len=8000, output_len=200, speed_basis="request", batch=48, chunk_tokens=16384),
        replace(base, input_len=4000, output_len=100, static_batch=True, speed_basis="request", batch=8),
        replace(base, input_len=4000, output_len=100, static_batch=True, speed_basis="tpot", batch=8),
        replace(base, pp=2, batch=16),
        replace(moe, a2a_overlap=True),
        replace(moe, serving="disaggregated", input_len=None, output_len=None, batch=256),
    ]
    return setups + extra


SETUPS = _setups()
PRESETS = {
    "default": DEFAULT,
    "no per_kernel_class, no prefill_cycle": replace(DEFAULT, per_kernel_class=False, prefill_cycle=False),
}


def test_the_setups_cover_every_kind_of_prediction() -> None:
    kinds = {(components.kind_of(s).kind, components.kind_of(s).per_request) for s in SETUPS}
    assert kinds >= {
        ("decode", False),
        ("static", True),
        ("static", False),
        ("continuous", True),
        ("continuous", False),
    }
    assert any(s.serving == "disaggregated" for s in SETUPS)
    assert any(s.dp_attention for s in SETUPS) and any(s.ep > 1 for s in SETUPS)
    assert any(s.model_card.startswith("deepseek") for s in SETUPS)  # MoE (MLA)


@pytest.mark.parametrize("preset_name", PRESETS)
def test_vectorised_tok_s_equals_the_evaluator_at_random_points(preset_name: str) -> None:
    preset = PRESETS[preset_name]
    built, index = components.build(SETUPS, preset, BOUNDS["network_latency_factor"])
    rng = np.random.default_rng(7)
    points = np.column_stack([rng.uniform(*BOUNDS[p], 4) for p in components.PARAMETERS])
    vectorised = built.tok_s_per_request(points)[:, index]
    for point, row in zip(points, vectorised, strict=True):
        at = replace(preset, **dict(zip(components.PARAMETERS, map(float, point), strict=True)))
        for s, value in zip(SETUPS, row, strict=True):
            expected = float(np.ravel(validate_module._evaluate(s, at, [float(s.batch)])["tok_s_per_request"])[0])
            assert value == pytest.approx(expected, rel=1e-9)


def test_a_collective_changing_protocol_within_the_latency_range_is_kept_exact() -> None:
    built, _ = components.build(SETUPS, DEFAULT, BOUNDS["network_latency_factor"])
    assert len(built.network.step) > 0  # some collective's fastest protocol changes inside the bounds
