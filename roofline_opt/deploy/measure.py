"""The loop closed: a benchmark client's result file against the figures its recipe predicted.

Any result file ``deploy.results`` reads (vLLM, SGLang, GenAI-Perf, AIPerf, GuideLLM) is matched to its recipe by
the recipe id it carries (vLLM's ``--metadata roofline_recipe=ID``; the ``--artifact-dir`` GenAI-Perf's and AIPerf's
exports record) or, failing that, the id in its file or folder name (SGLang's output file, AIPerf's CSV in its
artifact folder). The recipe folder's ``*.predicted.json`` with that id holds the predicted figures under vLLM's
result names; ``compare`` pairs them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from roofline_opt.deploy import results
from roofline_opt.deploy.results import RECIPE_ID_RE, RECIPE_KEY, BenchRun
from roofline_opt.errors import InvalidInput

METRICS = {
    "median_tpot_ms": "median_tpot_ms",
    "median_ttft_ms": "median_ttft_ms",
    "output_throughput": "output_tok_s",
    "request_throughput": "requests_per_s",
}
"""Predicted figure (vLLM's result names: ms, ms, output tok/s and requests/s of the whole deployment) -> the
``BenchRun`` field measured."""
LENGTH_TOLERANCE = 0.05
"""Relative difference of a run's mean prompt or output tokens from the recipe's beyond which it is noted."""
FOLDERS_UP = 3
"""Folders above a result file searched for its recipe (GenAI-Perf writes two levels below its --artifact-dir)."""
MAX_PREDICTION_BYTES = 1 << 20


def recipe_id(run: BenchRun, path: Path) -> str | None:
    """The recipe id a run carries, else the one in its file or folder names."""
    if run.recipe_id:
        return run.recipe_id
    match = RECIPE_ID_RE.search(str(path).lower())
    return match.group(1) if match else None


def _folders(path: Path, recipe_dir: Path | None) -> list[Path]:
    if recipe_dir is not None:
        return [recipe_dir]
    return list(path.resolve().parents)[:FOLDERS_UP]


def find_prediction(run: BenchRun, path: Path, recipe_dir: Path | None = None, field: str = "--bench") -> dict:
    """The predicted-figures file of the run's recipe, in ``recipe_dir`` or a folder above the result file."""
    from roofline_opt import files

    rid = recipe_id(run, path)
    if not rid:
        raise InvalidInput(
            field,
            f"{run.source} carries no recipe id ({RECIPE_KEY} metadata, or one in its --artifact-dir or name): run "
            "the recipe's bench script, which passes it",
        )
    folders = _folders(path, recipe_dir)
    for folder in folders:
        for candidate in sorted(folder.glob("*.predicted.json")):
            data = files.load_json(files.read_text(candidate, str(candidate), MAX_PREDICTION_BYTES), str(candidate))
            if isinstance(data, Mapping) and data.get("recipe_id") == rid:
                return dict(data)
    where = ", ".join(repr(str(f)) for f in folders)
    raise InvalidInput(field, f"{run.source} carries recipe id {rid!r}, which no *.predicted.json in {where} has")


def _differs(run: BenchRun, workload: Mapping[str, Any]) -> list[str]:
    out = []
    for key, count in (("num_prompts", run.num_prompts), ("max_concurrency", run.concurrency)):
        expected = workload.get(key)
        if expected is not None and count is not None and count != expected:
            out.append(f"{key}: run {count!r}, recipe {expected!r}")
    for key, mean in (("isl", run.mean_input_tokens), ("osl", run.mean_output_tokens)):
        expected = workload.get(key)
        if expected and mean is not None and abs(mean / expected - 1) > LENGTH_TOLERANCE:
            out.append(f"{key}: run {mean:.0f} tokens on average, recipe {expected!r}")
    if run.concurrency is None and workload.get("max_concurrency") is not None:
        out.append(f"max_concurrency: the run states none, recipe {workload['max_concurrency']!r}")
    return out


def compare(run: BenchRun, prediction: Mapping[str, Any]) -> dict[str, Any]:
    """Predicted and measured figures side by side (measured / predicted), and the workload differences."""
    rows = []
    for metric, attribute in METRICS.items():
        predicted, measured = prediction.get("predicted", {}).get(metric), getattr(run, attribute)
        if not isinstance(predicted, int | float) or measured is None:
            continue
        rows.append(
            {
                "metric": metric,
                "predicted": float(predicted),
                "measured": measured,
                "measured_over_predicted": measured / float(predicted) if predicted else None,
            }
        )
    return {
        "source": run.source,
        "client": run.client,
        "recipe_id": prediction.get("recipe_id"),
        "engine": prediction.get("engine"),
        "model": prediction.get("model"),
        "completed": run.completed,
        "failed": run.failed,
        "rows": rows,
        "workload_differs": _differs(run, prediction.get("workload", {})),
    }


def compare_files(result_path: str, recipe_dir: str | None) -> list[dict[str, Any]]:
    """``compare`` of every run of a result file with the prediction of its recipe (found in ``recipe_dir``, default
    the result file's folder or one above it)."""
    folder = Path(recipe_dir) if recipe_dir else None
    if folder is not None and not folder.is_dir():
        raise InvalidInput("--recipe", f"must be a recipe folder. Got {str(folder)!r} instead.")
    path = Path(result_path)
    return [compare(run, find_prediction(run, path, folder)) for run in results.read(path)]
