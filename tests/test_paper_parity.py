"""The `paper` preset reproduces the reference notebook: every row of paper_configs.csv and paper_specdec.csv."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pandas as pd
import pytest

from roofline_opt import catalog
from roofline_opt.cli import main
from roofline_opt.physics import evaluator
from roofline_opt.physics.specs import PAPER, GpuSpec, ModelSpec

REFERENCE_DIR = Path(__file__).resolve().parents[2] / "shared" / "reference"
DATA_DIR = Path(__file__).resolve().parent / "data"
REL = 1e-3
STEP_FIELDS = ("step_time_s", "network_s", "memory_s", "compute_s")


def reference_csv(name: str) -> Path:
    """The shared reference file when ../shared is checked out next to the project, else the copy in tests/data."""
    shared = REFERENCE_DIR / name
    return shared if shared.is_file() else DATA_DIR / name


CONFIGS = pd.read_csv(reference_csv("paper_configs.csv"))
SPECDEC = pd.read_csv(reference_csv("paper_specdec.csv"))


@functools.cache
def model_and_bits(name: str) -> tuple[ModelSpec, int]:
    model, bits = catalog.resolve_model(name)
    return model, bits or 16


@functools.cache
def gpu(name: str) -> GpuSpec:
    return catalog.load_gpu(name)


def row_id(row: dict) -> str:
    mode = "2d" if row["tp_2d"] else "1d"
    return f"{row['model']}-{row['gpu']}-tp{row['tp']}{mode}-pp{row['pp']}-b{row['batch']}-c{row['context']}"


def evaluate_row(row: dict, **kwargs) -> dict:
    model, bits = model_and_bits(row["model"])
    layout = evaluator.Layout.of(row["tp"], row["tp_2d"], row["pp"], row["context"], row.get("tokens_per_step", 1))
    return evaluator.evaluate(model, gpu(row["gpu"]), PAPER, bits, layout, row["batch"], **kwargs)


@pytest.mark.parametrize("row", CONFIGS.to_dict("records"), ids=row_id)
def test_paper_config_row_matches_reference(row: dict) -> None:
    out = evaluate_row(row)
    assert {f: float(out[f]) for f in STEP_FIELDS} == {f: pytest.approx(row[f], rel=REL) for f in STEP_FIELDS}
    assert bool(out["fits_in_memory"]) == bool(row["fits_in_memory"])


@pytest.mark.parametrize("row", SPECDEC.to_dict("records"), ids=row_id)
def test_paper_specdec_row_matches_reference(row: dict) -> None:
    draft, _ = model_and_bits(row["draft"])
    out = evaluate_row(row, draft=draft, acceptance=row["acceptance"], gamma_max=row["gamma_max"])
    assert float(out["time_per_token_s"]) == pytest.approx(row["per_token_latency_s"], rel=REL)
    assert int(out["best_gamma"]) == row["best_gamma"]


def test_evaluate_from_csv_reproduces_reference_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = CONFIGS.iloc[:6]
    setups = tmp_path / "setups.csv"
    rows.drop(columns=["n_gpus", *STEP_FIELDS, "fits_in_memory"]).to_csv(setups, index=False)

    assert main(["evaluate", "--from-csv", str(setups), "--preset", "paper", "--json"]) == 0

    out = pd.DataFrame(json.loads(capsys.readouterr().out))
    for field in (*STEP_FIELDS, "n_gpus"):
        assert out[field].tolist() == pytest.approx(rows[field].tolist(), rel=REL)
    assert out["fits_in_memory"].tolist() == rows["fits_in_memory"].tolist()


def test_evaluate_from_csv_runs_speculative_decoding_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = SPECDEC.iloc[:5]
    setups = tmp_path / "specdec.csv"
    rows[["model", "draft", "gpu", "tp", "pp", "tp_2d", "batch", "context", "acceptance", "gamma_max"]].to_csv(
        setups, index=False
    )

    assert main(["evaluate", "--from-csv", str(setups), "--preset", "paper", "--json"]) == 0

    out = pd.DataFrame(json.loads(capsys.readouterr().out))
    assert out["time_per_token_s"].tolist() == pytest.approx(rows["per_token_latency_s"].tolist(), rel=REL)
    assert out["best_gamma"].tolist() == rows["best_gamma"].tolist()
    assert out["draft_weight_bits"].tolist() == [16] * len(rows)


def test_evaluate_flags_take_weight_bits_from_the_name_suffix(capsys: pytest.CaptureFixture[str]) -> None:
    argv = "evaluate --model llama-3-70b-int4 --gpu h100-sxm --tp 2 --pp 8 --batch 16 --context 8000 --preset paper"

    assert main([*argv.split(), "--json"]) == 0

    (out,) = json.loads(capsys.readouterr().out)
    assert (out["model"], out["weight_bits"], out["n_gpus"]) == ("llama-3-70b", 4, 16)
    assert out["step_time_s"] == pytest.approx(0.008739470348282829, rel=REL)
    assert out["draft_step_time_s"] is None


def test_evaluate_csv_output_holds_inputs_and_every_figure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_csv = tmp_path / "figures.csv"
    argv = ["evaluate", "--model", "mixtral-8x22b", "--gpu", "h100-sxm", "--tp", "8", "--pp", "1", "--batch", "4"]

    assert main([*argv, "--csv", str(out_csv)]) == 0

    written = pd.read_csv(out_csv)
    assert len(written) == 1
    assert {
        "model",
        "gpu",
        "tp",
        "batch",
        "preset",
        "usd_per_mtok",
        "mfu_fraction",
        "fits_in_memory",
        "bottleneck",
    } <= set(written.columns)
    assert written.loc[0, "preset"] == "default"
    assert "usd_per_mtok" in capsys.readouterr().out
