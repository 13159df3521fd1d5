"""The loop closed: a benchmark client's result file against the figures its recipe predicted.

``vllm bench serve --save-result`` writes one JSON object with the run's medians and throughputs and the
``--metadata`` pairs the recipe's bench script passes (``roofline_recipe=ID``). The recipe folder's
``ENGINE.predicted.json`` with that id holds the predicted figures under the same names; ``compare`` pairs them.
SGLang's ``bench_serving`` output (JSON lines) is not read yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from roofline_opt.deploy.bench import RECIPE_KEY
from roofline_opt.errors import InvalidInput

METRICS = ("median_tpot_ms", "median_ttft_ms", "output_throughput", "request_throughput")
"""Result fields compared with the prediction (ms, ms, output tok/s, requests/s of the whole deployment)."""
WORKLOAD_KEYS = ("num_prompts", "max_concurrency")
"""Run settings that must equal the recipe's for the comparison to be of the same workload."""
MAX_RESULT_BYTES = 256 << 20


def _load(path: Path, field: str) -> Any:
    from roofline_opt import files

    return files.load_json(files.read_text(path, field, MAX_RESULT_BYTES, "a benchmark result"), field)


def find_prediction(result: Mapping[str, Any], folder: Path, field: str = "--bench") -> dict[str, Any]:
    """The predicted-figures file of ``folder`` whose recipe id the result carries."""
    rid = result.get(RECIPE_KEY)
    if not rid:
        raise InvalidInput(
            field,
            f"has no {RECIPE_KEY} metadata: run the recipe's bench script, which passes --metadata {RECIPE_KEY}=ID",
        )
    for path in sorted(folder.glob("*.predicted.json")):
        data = _load(path, str(path))
        if isinstance(data, Mapping) and data.get("recipe_id") == rid:
            return dict(data)
    raise InvalidInput(field, f"carries recipe id {rid!r}, which no *.predicted.json in {str(folder)!r} has")


def compare(result: Mapping[str, Any], prediction: Mapping[str, Any]) -> dict[str, Any]:
    """Predicted and measured figures side by side (measured / predicted), and the workload differences."""
    if not isinstance(result, Mapping) or "completed" not in result:
        raise InvalidInput("--bench", "is not a vllm bench serve result (no 'completed' field)")
    rows = []
    for metric in METRICS:
        predicted, measured = prediction.get("predicted", {}).get(metric), result.get(metric)
        if predicted is None or not isinstance(measured, int | float):
            continue
        rows.append(
            {
                "metric": metric,
                "predicted": float(predicted),
                "measured": float(measured),
                "measured_over_predicted": float(measured) / float(predicted) if predicted else None,
            }
        )
    workload = prediction.get("workload", {})
    differs = [
        f"{k}: run {result.get(k)!r}, recipe {workload.get(k)!r}"
        for k in WORKLOAD_KEYS
        if workload.get(k) is not None and result.get(k) != workload.get(k)
    ]
    return {
        "recipe_id": prediction.get("recipe_id"),
        "engine": prediction.get("engine"),
        "model": prediction.get("model"),
        "completed": result.get("completed"),
        "failed": result.get("failed"),
        "rows": rows,
        "workload_differs": differs,
    }


def compare_files(result_path: str, recipe_dir: str | None) -> dict[str, Any]:
    """``compare`` of a result file and the prediction of its recipe (found in ``recipe_dir``, default the result
    file's folder)."""
    result = _load(Path(result_path), "--bench")
    if not isinstance(result, Mapping):
        raise InvalidInput("--bench", "is not a vllm bench serve result (not a JSON object)")
    folder = Path(recipe_dir) if recipe_dir else Path(result_path).parent
    if not folder.is_dir():
        raise InvalidInput("--recipe", f"must be a recipe folder. Got {str(folder)!r} instead.")
    return compare(result, find_prediction(result, folder))
