"""``roofline-opt launch ANSWER.json``, and ``--emit DIR`` of fastest, cheapest, frontier and plan: launch recipes.

A recipe folder holds, per engine, the serve commands (a flag per decision), the Kubernetes manifests, the benchmark
client and the figures the model predicts for it (``roofline_opt.deploy``). An engine that cannot express the answer
is named with the reason on stderr (and in recipe.json); with no engine left the run exits 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from roofline_opt import checks
from roofline_opt.errors import Infeasible, InvalidInput

MAX_ANSWER_BYTES = 64 << 20
"""Largest answer file launch reads (a 1,000-point frontier is about 2 MB)."""
ENGINE_HELP = (
    "engines to write recipes for: vllm, sglang, trtllm (comma-separated; default all three, and dynamo "
    "too for a disaggregated answer)"
)
NOT_AN_ANSWER = (
    "is not a roofline-opt answer (the JSON of fastest / cheapest / frontier --json, a --save-dir "
    "answer.json, or plan --json)"
)


def add_emit_flags(p: argparse.ArgumentParser, points: bool = False) -> None:
    """--emit DIR and --engine (and --emit-point K for a frontier) on a query or plan command."""
    from roofline_opt.cli.engine_flag import ENGINE_HELP as PHYSICS_AND_RECIPE_HELP
    from roofline_opt.cli.engine_flag import add_profile_flag

    p.add_argument("--emit", metavar="DIR", help="write launch recipes for the answer into this folder (see --engine)")
    p.add_argument("--engine", metavar="ENGINES", help=PHYSICS_AND_RECIPE_HELP)
    add_profile_flag(p)
    if points:
        p.add_argument(
            "--emit-point",
            dest="emit_point",
            metavar="K",
            help="with --emit: the frontier row K (1 = the cheapest) instead of the preferred point",
        )


def check_emit(args: argparse.Namespace, field: str = "--emit") -> None:
    """Refuse an --emit folder that cannot be written (a file, or no write access) before anything is solved."""
    from roofline_opt import deploy, files

    folder = getattr(args, "emit" if field == "--emit" else "out", None)
    if folder is None:
        if getattr(args, "emit_point", None):
            raise InvalidInput("--emit-point", "needs --emit DIR")
        if args.engine is not None:
            from roofline_opt.cli.engine_flag import physics_engine

            physics_engine(args)  # one engine: its profile; a list without --emit: an error naming --engine
        return
    deploy.parse_engines(args.engine, disaggregated=True)
    out = files.check_folder(folder, field)
    existing = next(p for p in (out, *out.resolve().parents) if p.exists())
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InvalidInput(field, f"cannot be written: {str(existing)!r} is not writable")


def _lengths(question: Any) -> tuple[int | None, int | None]:
    w = getattr(question, "workload", None)
    return (None, None) if w is None else _mean_lengths(w)


def _mean_lengths(w: Any) -> tuple[int, int]:
    """A workload's mean input and output tokens per request, rounded."""
    weights = [float(x) for x in w.weight] if hasattr(w, "weight") else [1.0] * len(w.isl)
    total = sum(weights)
    isl = round(sum(i * x for i, x in zip(w.isl, weights, strict=True)) / total)
    osl = round(sum(o * x for o, x in zip(w.osl, weights, strict=True)) / total)
    return isl, osl


def _pick(records: Sequence[Mapping[str, Any]], point: Any) -> Mapping[str, Any]:
    if point is not None:
        k = checks.positive_int("--emit-point", point, maximum=len(records))
        return records[k - 1]
    return next((r for r in records if r.get("preferred")), records[0])


def _finish(recipes: Any, folder: str, field: str) -> None:
    from roofline_opt.deploy import recipe

    for line in recipes.unsupported:
        print(f"roofline-opt: note: {line}", file=sys.stderr)
    written = [n for n in recipes.files if n != "recipe.json"]
    if not written:
        raise Infeasible("no engine asked for can express this answer (each reason above)", "engine")
    recipe.write(folder, recipes, field)
    print(f"roofline-opt: recipes written to {folder} ({len(recipes.files)} files)", file=sys.stderr)


def emit_answer(args: argparse.Namespace, question: Any, records: Sequence[Mapping[str, Any]]) -> None:
    """--emit of fastest / cheapest / frontier: the recipe of the chosen record (the preferred frontier point, or
    --emit-point K; the best of --top-n)."""
    if not getattr(args, "emit", None):
        return
    from roofline_opt import deploy
    from roofline_opt.deploy import answer, recipe

    record = _pick(records, getattr(args, "emit_point", None))
    isl, osl = _lengths(question)
    draft = question.draft.name if getattr(question, "draft", None) is not None else None
    dep = answer.from_record(record, isl, osl, draft)
    chosen = deploy.parse_engines(args.engine, dep.disaggregated)
    _finish(recipe.build([dep], chosen, f"roofline-opt {args.command}"), args.emit, "--emit")


def emit_plan(args: argparse.Namespace, spec: Any, plan: Any) -> None:
    """--emit of plan: one recipe per (model, layout) of the first period, copies pinned to their placement; an xPyD
    recipe (prefill and decode workers, the router) per model served by disaggregated pools."""
    if not getattr(args, "emit", None):
        return
    from roofline_opt import deploy
    from roofline_opt.deploy import answer, recipe

    lengths = {m.name: _mean_lengths(m.question.workload) for m in spec.models if m.question.workload is not None}
    deps = answer.from_plan(plan.to_record(), lengths, {m.name: m.question.context for m in spec.models})
    chosen = deploy.parse_engines(args.engine, any(d.disaggregated for d in deps))
    _finish(recipe.build(deps, chosen, f"roofline-opt plan {args.fleet}"), args.emit, "--emit")


def _question_file(path: Path) -> dict[str, Any]:
    """isl, osl and draft of the question.yaml a --save-dir folder holds beside answer.json (empty if none)."""
    from roofline_opt.catalog.parse import read_yaml

    sibling = path.parent / "question.yaml"
    if not sibling.is_file():
        return {}
    data = read_yaml(sibling, "a question file")
    return {k: data.get(k) for k in ("isl", "osl", "draft") if isinstance(data, Mapping) and data.get(k) is not None}


def read_answer(path: str, point: Any, isl: Any, osl: Any) -> list[Any]:
    """The deployments of a saved answer file (untrusted: any shape problem is one line naming the file)."""
    from roofline_opt import files
    from roofline_opt.deploy import answer

    data = files.load_json(files.read_text(path, "ANSWER.json", MAX_ANSWER_BYTES, "an answer"), path)
    saved = _question_file(Path(path))
    isl = checks.positive_int("--isl", isl) if isl is not None else saved.get("isl")
    osl = checks.positive_int("--osl", osl) if osl is not None else saved.get("osl")
    try:
        if isinstance(data, Mapping) and "rows" in data:
            plan_lengths = (
                None
                if isl is None or osl is None
                else {str(r.get("model")): (int(isl), int(osl)) for r in data["rows"]}
            )
            return answer.from_plan(data, plan_lengths)
        if isinstance(data, list) and data and all(isinstance(r, Mapping) for r in data):
            data = _pick(data, point)
        if not isinstance(data, Mapping):
            raise InvalidInput(path, NOT_AN_ANSWER)
        draft = saved.get("draft")
        return [
            answer.from_record(
                data,
                None if isl is None else int(isl),
                None if osl is None else int(osl),
                None if draft is None else str(draft),
            )
        ]
    except InvalidInput as exc:
        if exc.field.startswith("answer"):
            raise InvalidInput(path, f"{NOT_AN_ANSWER}: {exc.message}") from exc
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InvalidInput(path, f"{NOT_AN_ANSWER}: a field has the wrong type or is missing ({exc})") from exc


def run_launch(args: argparse.Namespace) -> int:
    from roofline_opt import deploy
    from roofline_opt.deploy import recipe

    check_emit(args, "--out")
    deps = read_answer(args.answer, args.emit_point, args.isl, args.osl)
    chosen = deploy.parse_engines(args.engine, any(d.disaggregated for d in deps))
    _finish(recipe.build(deps, chosen, f"roofline-opt launch {args.answer}"), args.out, "--out")
    return 0


def add_bench_flags(p: argparse.ArgumentParser) -> None:
    """validate's --bench RESULT.json and --recipe DIR (instead of --measured)."""
    p.add_argument(
        "--bench",
        metavar="RESULT.json",
        help="instead of --measured: a benchmark client's result file from a recipe's bench script (vllm bench "
        "serve, sglang.bench_serving, GenAI-Perf, AIPerf), compared with the figures that recipe predicted",
    )
    p.add_argument("--recipe", metavar="DIR", help="with --bench: the recipe folder (default: the result's folder)")


def run_bench_validate(args: argparse.Namespace) -> int:
    """validate --bench: the benchmark's medians and throughputs against its recipe's prediction."""
    from roofline_opt import report
    from roofline_opt.deploy import measure

    if args.bench is None:
        raise InvalidInput(
            "--measured", "is required: give measured-points CSVs or benchmark result files (or --bench RESULT.json)"
        )
    if args.measured is not None or getattr(args, "files", None):
        raise InvalidInput("--bench", "excludes --measured and FILE...: give one of them")
    compared = measure.compare_files(args.bench, args.recipe)
    if args.json:
        print(report.to_json_object(compared[0]) if len(compared) == 1 else report.to_json(compared))
        return 0
    for out in compared:
        print(
            f"{out['source']} ({out['client']}), benchmark of recipe {out['recipe_id']} ({out['engine']}, "
            f"{out['model']}): {out['completed']} requests completed, {out['failed']} failed"
        )
        print(report.records_table(out["rows"]) if out["rows"] else "no figure in common with the prediction")
        for line in out["workload_differs"]:
            print(f"note: the run's workload differs from the recipe's ({line})")
    return 0


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    """Register ``launch``."""
    from roofline_opt.cli import command_help

    p = subparsers.add_parser(
        "launch",
        help=command_help("launch"),
        description="Launch recipes for a saved answer: per engine the serve command (a flag per decision), the "
        "Kubernetes manifests, the benchmark client for the same workload and the figures the model predicts.\n"
        "Request lengths and the draft come from the question.yaml beside a --save-dir answer.json, or --isl/--osl.",
        epilog="example:\n  roofline-opt fastest --model llama-3-70b --gpu h100-sxm --max-usd-per-mtok 2 "
        "--save-dir run1\n  roofline-opt launch run1/answer.json --engine vllm --out run1/recipes",
    )
    p.add_argument(
        "answer", metavar="ANSWER.json", help="a saved answer: --json output, --save-dir answer.json or plan --json"
    )
    p.add_argument("--engine", metavar="ENGINES", help=ENGINE_HELP)
    p.add_argument("--out", default="recipes", metavar="DIR", help="folder to write the recipes into")
    p.add_argument(
        "--emit-point",
        dest="emit_point",
        metavar="K",
        help="for a list of answers (frontier, --top-n): row K (1 = the first) instead of the preferred",
    )
    p.add_argument("--isl", help="input tokens per request for the benchmark (default: the saved question's)")
    p.add_argument("--osl", help="output tokens per request for the benchmark (default: the saved question's)")
    p.set_defaults(func=run_launch)
