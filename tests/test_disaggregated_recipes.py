"""InferenceX disaggregated matrix entries (roofline_opt.fidelity.recipes.DISAGGREGATED_RUNS): what a disaggregated
row of tests/data/measured_public_2026.csv is read with when one matrix entry names its run's settings, and that
the rows no entry matches are read as before."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import pytest

from roofline_opt.fidelity import measured, recipes

PUBLIC = Path(__file__).parent / "data" / "measured_public_2026.csv"


def _cells(run: str, isl: str, osl: str, concurrency: int) -> dict[str, str]:
    """The one disaggregated row of the public CSV from InferenceX run ``run`` at these lengths and clients."""
    with PUBLIC.open(newline="") as f:
        rows = [
            {**r, "line": str(i)}
            for i, r in enumerate(csv.DictReader(f), start=2)
            if f"actions/runs/{run}/" in r["notes"]
            and (r["input_len"], r["output_len"]) == (isl, osl)
            and r["batch_or_concurrency"] == f"concurrency {concurrency}"
        ]
    assert len(rows) == 1
    return rows[0]


def _setup(cells: dict[str, str]) -> measured.MeasuredSetup:
    row = measured.map_row(cells)
    assert row.setup is not None, row.reasons
    return row.setup


H100_TRT_DEP16_MTP3 = ("21790074782", "1024", "1024", 231)
"""H100 Dynamo + TensorRT-LLM, decode 3 x DEP16: ``ctx1_gen3_dep16_batch4_eplb0_mtp3.yaml`` (nvidia-master.yaml
@04b564b3)."""

MI355X_FP4_DEP8 = ("26491418772", "8192", "1024", 4096)
"""MI355X MXFP4 SGLang over MoRI, 2 x DEP8 prefill + 1 x DEP8 decode, no MTP (amd-master.yaml @bb000558; models.yaml
@ec02dba5 DeepSeek-R1-0528-MXFP4-v2: ``--kv-cache-dtype fp8_e4m3``)."""

H100_SGLANG_MTP = ("21973157671", "1024", "1024", 128)
"""H100 Dynamo + SGLang with MTP: its recipe name carries no MTP depth, so no entry."""


def test_trtllm_row_reads_the_depth_its_recipe_name_states():
    s = _setup(_cells(*H100_TRT_DEP16_MTP3))
    assert s.mtp_depth == 3  # TensorRT-LLM's default with attention DP would be 1


def test_recipe_depth_is_the_bounds_depth_too():
    assert _setup(_cells(*H100_TRT_DEP16_MTP3)).for_bound().mtp_depth == 3


def test_mori_row_reads_the_fp8_cache_its_models_yaml_sets():
    s = _setup(_cells(*MI355X_FP4_DEP8))
    assert (s.kv_bits, s.kv_stated, s.mtp_depth) == (8, True, 0)


def test_matched_row_names_its_matrix_entry_in_its_recipe_reading():
    notes = _setup(_cells(*MI355X_FP4_DEP8)).notes
    assert any("amd-master.yaml @bb000558" in n and "8-bit KV cache on both sides" in n for n in notes)


def test_unmatched_row_is_read_as_without_the_table(monkeypatch: pytest.MonkeyPatch):
    cells = _cells(*H100_SGLANG_MTP)
    with_table = _setup(cells)
    monkeypatch.setattr(recipes, "DISAGGREGATED_RUNS", ())
    assert with_table == _setup(cells)


def test_an_entry_needs_its_rows_concurrency():
    cells = _cells(*H100_TRT_DEP16_MTP3)
    other = _setup({**cells, "batch_or_concurrency": "concurrency 232"})
    assert other.mtp_depth == 1  # the engine's default with attention DP, not the entry's 3


def test_every_entry_matches_exactly_one_public_row():
    with PUBLIC.open(newline="") as f:
        rows = [{**r, "line": str(i)} for i, r in enumerate(csv.DictReader(f), start=2) if "prefill" in r["layout"]]
    matched = [e for r in rows if (e := _entry_of(r)) is not None]
    assert sorted(matched, key=repr) == sorted(recipes.DISAGGREGATED_RUNS, key=repr)


def _entry_of(cells: dict[str, str]) -> recipes.DisaggregatedRun | None:
    setup = _setup(cells)
    return next(
        (e for e in recipes.DISAGGREGATED_RUNS if e.source in setup.recipe_reading and _same(e, cells)),
        None,
    )


def _same(entry: recipes.DisaggregatedRun, cells: dict[str, str]) -> bool:
    key = (entry.run, str(entry.isl), str(entry.osl), f"concurrency {entry.concurrency}")
    row = (cells["input_len"], cells["output_len"], cells["batch_or_concurrency"])
    return key == (recipes.run_id(cells["notes"]), *row)


def test_entry_text_says_the_cache_was_not_read_when_it_was_not():
    entry = replace(recipes.DISAGGREGATED_RUNS[0], kv_bits=None, mtp_depth=2)
    assert entry.describe().endswith("KV cache not read, MTP at 2 drafted tokens on the decode side")
