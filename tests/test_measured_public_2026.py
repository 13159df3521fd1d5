"""The 2025-2026 public rows of tests/data/measured_public_2026.csv (InferenceX API snapshot, TensorRT-LLM's
performance overview): every row maps to a setup, and the bound holds on at least issue 22's 97%."""

from __future__ import annotations

import csv
from pathlib import Path

from roofline_opt import fidelity

ROWS_2026 = Path(__file__).parent / "data" / "measured_public_2026.csv"


def test_every_2026_row_names_its_source_and_a_framework() -> None:
    with ROWS_2026.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) >= 30
    assert all(r["source_url_or_repo_path"].startswith("github:") and r["framework"] for r in rows)


def test_every_2026_row_gets_a_verdict_and_the_bound_holds_on_97_percent() -> None:
    summary = fidelity.summarise(fidelity.validate(ROWS_2026))
    assert summary.compared == summary.rows == summary.well_stated
    assert summary.bounded / summary.compared >= 0.97
