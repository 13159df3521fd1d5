"""benchmarks/fidelity_targets.py: which rows count as modern, and which row pairs its layout-ordering figures use."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "fidelity_targets.py"
_spec = importlib.util.spec_from_file_location("fidelity_targets", SCRIPT)
assert _spec is not None and _spec.loader is not None
targets = importlib.util.module_from_spec(_spec)
sys.modules["fidelity_targets"] = targets  # its dataclass looks its module up
_spec.loader.exec_module(targets)

HEADER = (
    "model,precision,gpu,n_gpus,layout,batch_or_concurrency,input_len,output_len,tpot_ms,tok_s_per_request,"
    "total_tok_s,tok_s_per_gpu,framework,source_url_or_repo_path,notes"
).split(",")


def _judged(cells: dict[str, str]):
    return targets.Judged(result=None, cells=cells)


def test_a_stated_date_decides_whether_a_row_is_modern() -> None:
    assert targets.is_modern(_judged({"notes": "run 123 (2026-05-20)"}), 2025)
    assert not targets.is_modern(_judged({"notes": "measured 2024-11-02", "framework": "SGLang v0.5.9"}), 2025)


def test_without_a_date_the_software_era_decides() -> None:
    assert targets.is_modern(_judged({"framework": "TensorRT-LLM trtllm-bench (PyTorch backend)"}), 2025)
    assert not targets.is_modern(_judged({"framework": "TensorRT-LLM v0.6.1"}), 2025)
    assert not targets.is_modern(_judged({"framework": "SGLang v0.5.12"}), 2026)


def _rows(tmp_path: Path, rows: list[dict[str, str]]):
    path = tmp_path / "rows.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, HEADER)
        writer.writeheader()
        for r in rows:
            writer.writerow({k: "" for k in HEADER} | r)
    return targets.load(path)


def _row(layout: str, n_gpus: int, concurrency: int, per_user: float, per_gpu: float) -> dict[str, str]:
    return {
        "model": "Llama-3.3-70B",
        "precision": "FP8",
        "gpu": "H200 SXM 141GB",
        "n_gpus": str(n_gpus),
        "layout": layout,
        "batch_or_concurrency": f"concurrency {concurrency}",
        "input_len": "1024",
        "output_len": "1024",
        "tok_s_per_request": str(per_user),
        "tok_s_per_gpu": str(per_gpu),
        "framework": "vLLM 0.11",
        "source_url_or_repo_path": "test",
    }


def test_rows_of_one_workload_in_two_layouts_make_one_same_workload_pair(tmp_path: Path) -> None:
    rows = _rows(tmp_path, [_row("TP2", 2, 8, 30.0, 100.0), _row("TP4", 4, 8, 40.0, 70.0)])
    per_gpu, per_user, _ = targets.layout_pairs(rows)
    assert len(per_gpu) == 1 and len(per_user) == 1


def test_the_same_layout_or_another_concurrency_makes_no_same_workload_pair(tmp_path: Path) -> None:
    rows = _rows(tmp_path, [_row("TP2", 2, 8, 30.0, 100.0), _row("TP2", 2, 8, 31.0, 101.0), _row("TP4", 4, 16, 20, 60)])
    assert targets.layout_pairs(rows)[0] == []


def test_a_dominance_pair_needs_one_row_ahead_on_both_figures(tmp_path: Path) -> None:
    ahead = _rows(tmp_path, [_row("TP2", 2, 8, 30.0, 100.0), _row("TP4", 4, 16, 20.0, 60.0)])
    assert len(targets.dominance_pairs(ahead)) == 1
    crossed = _rows(tmp_path, [_row("TP2", 2, 8, 30.0, 100.0), _row("TP4", 4, 16, 40.0, 60.0)])
    assert targets.dominance_pairs(crossed) == []
