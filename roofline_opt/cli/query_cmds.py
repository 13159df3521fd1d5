"""``roofline-opt fastest``, ``cheapest`` and ``frontier``: proven-optimal serving setups for a budget or a speed.

Flags map 1:1 onto ``api.question`` and the query functions, which validate them; this module only formats.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from roofline_opt import checks
from roofline_opt.cli import helpfmt, launch_cmd, run_files
from roofline_opt.cli.helpfmt import HTML_HELP
from roofline_opt.cli.names import flag_names
from roofline_opt.cli.simulate_cmd import BURSTINESS_HELP, PREFIX_HIT_RATE_HELP, PREFIX_TOKENS_HELP
from roofline_opt.errors import Infeasible, InvalidInput
from roofline_opt.optimize import space
from roofline_opt.optimize.space import DEFAULT_CONTEXT, DEFAULT_DRAFT_GAMMA_MAX, MOE_EP_DEGREES
from roofline_opt.physics.evaluator import DEFAULT_KV_BITS
from roofline_opt.physics.requests import AGG, DEFAULT_CHUNK_TOKENS

if TYPE_CHECKING:
    import pandas as pd

    from roofline_opt.optimize.space import Question

SPACE_FIELDS = (
    "weight_bits",
    "tp_degrees",
    "pp_degrees",
    "tp_modes",
    "ep_degrees",
    "dp_attention",
    "max_batch",
    "context",
    "draft",
    "acceptance",
    "gamma_max",
    "preset",
    "max_gpus",
    "demand_tok_s",
    "cluster",
    "kv_bits",
    "isl",
    "osl",
    "workload",
    "serving",
    "chunk_tokens",
    "ttft_ms",
    "tpot_ms",
    "prefill_gpu",
    "decode_gpu",
    "max_instances",
    "demand_req_s",
    "max_utilisation",
    "usd_per_gpu_hour",
    "percentile",
    "burstiness",
    "arrival_trace",
    "prefix_tokens",
    "prefix_hit_rate",
)
"""Flags passed to api.question as keyword arguments of the same name (list flags split by api.split_lists)."""
OBSERVED_COLUMNS = ("tok_s_per_request", "usd_per_mtok")
"""Required columns of --observed FILE (``label`` is optional)."""
MAX_OBSERVED_POINTS = 1000
"""Most points --observed may overlay on a plot."""
MAX_LABEL_CHARS = 60
"""Characters of an observed point's label drawn on the plot."""
"""The frontier re-solves one persistent MIP; enumeration is offered by fastest and cheapest only."""


# ----------------------------------------------------------------------------------------------- flags


API_FIELDS = (
    "model",
    "gpu",
    *SPACE_FIELDS,
    "time_limit_s",
    "mip_gap",
    "max_usd_per_mtok",
    "min_tok_s",
    "points",
    "utility_exponent",
    "method",
    "top_n",
    "engine",
    "profile",
)
"""API parameter names whose errors are reported under their flag (``time_limit_s`` is ``--time-limit``)."""


def _question(args: argparse.Namespace) -> Question:
    from roofline_opt import api

    if args.model is None:
        raise InvalidInput("--model", "is required (on the command line or in the --question file)")
    from roofline_opt.cli.engine_flag import physics_engine

    space = api.split_lists({"gpu": args.gpu} | {name: getattr(args, name) for name in SPACE_FIELDS})
    return api.question(args.model, engine=physics_engine(args), profile=args.profile, **space)


# ----------------------------------------------------------------------------------------------- formatting


def _request_rows(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Headline columns of answers about whole requests: serving mode, prefill side, TTFT, TPOT and prices."""
    return [
        {
            "serving": r["serving"],
            "decode (y x layout)": f"{r['decode_instances']} x {r['gpu']} {r['decode_layout']}"
            if r["serving"] == "disagg"
            else f"{r['gpu']} {r['decode_layout']}",
            "prefill (x x layout, batch)": f"{int(r['prefill_instances'])} x {r['prefill_gpu']} {r['prefill_layout']}, "
            f"{int(r['prefill_batch'])}"
            if r["serving"] == "disagg"
            else f"chunk {r['chunk_tokens']}",
            "batch": r["batch"],
            "weight_bits": r["weight_bits"],
            "kv_bits": r["kv_bits"],
            "replicas": r["replicas"],
            "total_gpus": r["total_gpus"],
            "ttft_ms": r["ttft_ms"],
            "tpot_ms": r["tpot_ms"],
            "tok_s_per_request": r["tok_s_per_request"],
            "requests_per_s": r["requests_per_s"],
            "usd_per_request": r["usd_per_request"],
            "usd_per_mtok_whole_request": r["usd_per_mtok_whole_request"],
            "usd_per_mtok_blended": r["usd_per_mtok_blended"],
            "tok_s_per_gpu": r["tok_s_per_gpu"],
            "usd_per_hour": r["usd_per_hour"],
            "bottleneck": r["bottleneck"],
        }
        for r in records
    ]


SUMMARY_COLUMNS = (
    "gpu",
    "weight_bits",
    "layout",
    "total_gpus",
    "replicas",
    "batch",
    "tok_s_per_request",
    "tok_s_per_gpu",
    "time_per_token_ms",
    "usd_per_mtok_decode_only",
    "usd_per_hour",
    "mfu_fraction",
    "bottleneck",
)
"""Columns of the terminal table of decode-only answers, named as in JSON and CSV."""
PLACEMENT_COLUMN = "placement (GPU ids per replica: [stage] ...)"


def summary_rows(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The headline fields of answer records, under the same unit-named names as JSON and CSV (one dict a row, for
    ``report.records_table``)."""
    from roofline_opt import report

    if records and "serving" in records[0]:
        return _request_rows(records)
    rows = [{c: r[c] for c in SUMMARY_COLUMNS} for r in records]
    if any(r.get("placement") for r in records):
        for row, r in zip(rows, records, strict=True):
            row[PLACEMENT_COLUMN] = report.placement_text(r.get("placement"))
    return rows


def _solver_line(records: Sequence[Mapping[str, Any]]) -> str:
    """Solver status and the largest relative MIP gap over the records."""
    from roofline_opt import report

    statuses = sorted({str(r["solver_status"]) for r in records})
    gaps = [r["mip_gap"] for r in records if r["mip_gap"] is not None]
    gap = report.format_number(max(gaps)) if gaps else report.MISSING_CELL
    where = "" if len(records) == 1 else " (every point)" if len(statuses) == 1 else " (by point)"
    return f"solver: {records[0]['method']}, {'/'.join(statuses)}{where}, gap {gap}"


def describe(record: Mapping[str, Any], sep: str = ": ") -> str:
    """A setup and its two headline figures, joined by ``sep``."""
    from roofline_opt import report

    setup = f"{record['n_gpus']} x {record['gpu']} {record['layout']}, batch {record['batch']}"
    if record.get("serving") == "disagg":
        setup = (
            f"{int(record['prefill_instances'])}P ({record['prefill_gpu']} {record['prefill_layout']}) "
            f"{record['decode_instances']}D ({record['gpu']} {record['decode_layout']}), batch {record['batch']}"
        )
    speed = report.format_number(record["tok_s_per_request"])
    return f"{setup}{sep}{speed} tok/s per request at ${report.format_number(record['usd_per_mtok'])}/Mtok"


def _emit(
    args: argparse.Namespace, question: Question, records: list[dict[str, Any]], text: str, as_list: bool, plot=None
) -> None:
    """Write --plot, --csv and the --save-dir folder (each atomically; the plot first, as the slowest and the one an
    interruption is likeliest to hit) and print JSON (--json) or the human text."""
    from roofline_opt import files, report

    json_text = report.to_json(records) if as_list else report.to_json_object(records[0])
    if getattr(args, "plot", None) and plot is not None:
        plot(args.plot, "--plot")
    if args.csv or args.save_dir:
        import pandas as pd  # for the CSV only: printing an answer needs none

        frame = pd.DataFrame(records)
    if args.csv:
        files.write_csv(args.csv, frame, field="--csv")
    if args.save_dir:
        prices = {g.name: g.usd_per_hour for g in question.gpus}
        if args.context is None and question.workload is None:
            args.context = question.context  # with whole requests it stays derived from the lengths
        run_files.write_run(Path(args.save_dir), args, files.csv_text(frame), json_text, prices)
        if plot is not None:
            plot(str(Path(args.save_dir) / "plot.png"), "--save-dir")
    print(json_text if args.json else text)
    launch_cmd.emit_answer(args, question, records)


def _answers_text(headline: str, records: Sequence[Mapping[str, Any]], question: Question) -> str:
    from roofline_opt import report
    from roofline_opt.report.intervals import interval_line
    from roofline_opt.report.validity import queueing_line

    rows = summary_rows(records)
    if len(records) > 1:
        rows = [{"rank": rank} | row for rank, row in enumerate(rows, start=1)]
    mean_osl = None if question.workload is None else question.workload.mean_osl
    lines = [headline, report.records_table(rows), interval_line(records), queueing_line(records, mean_osl)]
    return "\n".join(line for line in [*lines, _solver_line(records)] if line is not None)


def _headline(kind: str, question: Question, limit: str, n: int) -> str:
    from roofline_opt import report

    what = f"{kind} setup" if n == 1 else f"{n} {kind} distinct layouts (each the best of those not listed above it)"
    return (
        f"{what} of {question.model.name} {limit}{_request_text(question)}; decode context "
        f"{report.format_number(question.context)} tokens, {_physics_text(question)}"
    )


def _physics_text(question: Question) -> str:
    """``default preset``, and the engine profile when the question has one (``default preset, vllm profile``)."""
    profile = question.profile
    return f"{question.preset.name} preset" + ("" if profile is None else f", {profile.name} profile")


# ----------------------------------------------------------------------------------------------- commands


def _run_query(args: argparse.Namespace, kind: str, target: Any, limit: str) -> int:
    from roofline_opt import api, report

    with flag_names(API_FIELDS):
        question = _question(args)
        _check_outputs(args)
        n = checks.positive_int("top_n", args.top_n)
        query = api.fastest_answers if kind == "fastest" else api.cheapest_answers
        try:
            options = {"method": args.method, "time_limit_s": args.time_limit, "mip_gap": args.mip_gap, "top_n": n}
            answers = query(question, **{api.TARGETS[kind]: target}, **options)
        except Infeasible as exc:
            from roofline_opt.optimize.hints import with_hints

            value = None if target is None else checks.positive_float(api.TARGETS[kind], target)
            raise with_hints(exc, question, kind, value, api.solver_options(args.time_limit, args.mip_gap)) from exc
    if kind == "cheapest" and target is None and question.max_tpot_s is not None:
        limit = "at that TPOT or less"
    records = [a.to_record() for a in answers]
    title = _plot_title(question)

    def plot(path: str, field: str) -> None:
        import pandas as pd

        report.plot_answers(pd.DataFrame(records), path, title=f"{kind} setups: {title}", field=field)

    text = _answers_text(_headline(kind, question, limit, len(records)), records, question)
    _emit(args, question, records, text, as_list=n > 1, plot=plot)
    return 0


def run_fastest(args: argparse.Namespace) -> int:
    limit = "at any price" if args.max_usd_per_mtok is None else f"within ${args.max_usd_per_mtok}/Mtok"
    return _run_query(args, "fastest", args.max_usd_per_mtok, limit)


def run_cheapest(args: argparse.Namespace) -> int:
    limit = "at any speed" if args.min_tok_s is None else f"at {args.min_tok_s} tok/s per request or faster"
    return _run_query(args, "cheapest", args.min_tok_s, limit)


def run_frontier(args: argparse.Namespace) -> int:
    from roofline_opt import api, catalog, report

    with flag_names(API_FIELDS):
        question = _question(args)
        observed = read_observed(Path(catalog.data_file(args.observed))) if args.observed else None
        _check_outputs(args)
        axes = checks.choice("--plot-axes", args.plot_axes, report.PLOT_AXES)
        with report.ProgressBar() as progress:
            frame = api.frontier_frame(
                question,
                points=args.points,
                utility_exponent=args.utility_exponent,
                time_limit_s=args.time_limit,
                mip_gap=args.mip_gap,
                progress=progress,
                method=args.method,
            )
    records = cast("list[dict[str, Any]]", frame.to_dict("records"))  # its columns are field names
    label = describe(next(r for r in records if r["preferred"]), sep="\n")

    def plot(path: str, field: str) -> None:
        report.plot_frontier(
            frame, path, title=_plot_title(question), preferred_label=label, observed=observed, axes=axes, field=field
        )

    _emit(args, question, records, _frontier_text(question, frame, args.utility_exponent), as_list=True, plot=plot)
    if args.html:
        from roofline_opt.report import html

        html.write_html(frame, args.html, html.frontier_chart(frame), f"frontier: {_plot_title(question)}")
    return 0


def _request_text(question: Question) -> str:
    """The whole-request part of a headline: lengths, serving modes offered and every latency limit in force, a
    missing one said as such; for a decode-only question, that its price leaves prefill out."""
    from roofline_opt import report

    w = question.workload
    if w is None:
        return (
            " (decode only: usd_per_mtok_decode_only prices the decode steps, prefill excluded; give --isl/--osl "
            "to price whole requests)"
        )
    pairs = sorted(set(zip(w.isl, w.osl, strict=True)))
    lengths = f"{pairs[0][0]} in / {pairs[0][1]} out" if len(pairs) == 1 else f"a {len(pairs)}-class mix"
    lengths += " tokens"
    if w.prefix:
        hit = sum(x for x, p in zip(w._w(), w.cached, strict=True) if p > 0)
        share = "" if hit == 1.0 else f" for {report.format_number(100 * hit)}% of requests"
        lengths += f", a {max(w.cached)}-token prefix cached{share}"
    at = "" if question.slo_percentile is None else f" p{report.format_number(question.slo_percentile)}"
    given = (("TTFT", question.max_ttft_s, "--ttft-ms"), ("TPOT", question.max_tpot_s, "--tpot-ms"))
    limits = [
        f"{name}{at} <= {report.format_number(value * 1e3)} ms" if value is not None else f"{name} not limited: {flag}"
        for name, value, flag in given
    ]
    if question.queued_tpot and question.max_ttft_s is None:
        limits[0] += f" (aggregated rows report its{at} at load)"
    serving = "/".join(question.serving)
    if question.slo_percentile is not None:
        scv = question.arrival_scv
        arrivals = "Poisson arrivals" if scv == 1.0 else f"arrivals of c_a^2 {report.format_number(scv)}"
        limits.append(arrivals)
    return f" for whole requests of {lengths} ({', '.join([serving, *limits])})"


def _check_outputs(args: argparse.Namespace) -> None:
    """Refuse unwritable --csv / --plot / --save-dir destinations before solving, so a failed run leaves no file."""
    from roofline_opt import files

    inputs = (args.model, getattr(args, "draft", None), args.cluster, getattr(args, "observed", None))
    if args.csv:
        files.check_destination(args.csv, "--csv", inputs=inputs)
    if getattr(args, "plot", None):
        files.check_destination(args.plot, "--plot", files.plot_formats(), inputs=inputs)
    run_files.check_save_dir(args)
    launch_cmd.check_emit(args)
    if getattr(args, "html", None):
        from roofline_opt.report.html import check_html_destination

        check_html_destination(args.html, inputs=inputs)


def _plot_title(question: Question) -> str:
    from roofline_opt import report

    gpus = ", ".join(g.name for g in question.gpus)
    context = report.format_number(question.context)
    return f"{question.model.name} on {gpus} ({_physics_text(question)}, context {context} tokens)"


def _frontier_text(question: Question, frame: pd.DataFrame, exponent: Any) -> str:
    from roofline_opt import report
    from roofline_opt.report.intervals import interval_line
    from roofline_opt.report.validity import queueing_line

    records = cast("list[dict[str, Any]]", frame.to_dict("records"))  # its columns are field names
    mean_osl = None if question.workload is None else question.workload.mean_osl
    rows = [
        {"pref": "*" if r["preferred"] else ""} | row for r, row in zip(records, summary_rows(records), strict=True)
    ]
    monotone = "monotone" if frame.attrs.get("monotone") else "NOT monotone"
    return "\n".join(
        [
            f"frontier of {question.model.name}{_request_text(question)}; decode context "
            f"{report.format_number(question.context)} tokens, "
            f"{_physics_text(question)}: {len(frame)} optimal setups from the cheapest to the fastest ({monotone}); "
            "* = preferred: "
            f"max speed^{report.format_number(float(exponent))} / price over the whole frontier",
            report.records_table(rows),
            *([line] if (line := interval_line(records)) else []),
            *([line] if (line := queueing_line(records, mean_osl)) else []),
            _solver_line(records),
        ]
    )


# ----------------------------------------------------------------------------------------------- observed points


def read_observed(path: Path) -> pd.DataFrame:
    """Observed (speed, price) points from a CSV: columns tok_s_per_request, usd_per_mtok (> 0), optional label."""
    from roofline_opt import files

    frame = files.read_csv_cells(path, "--observed", OBSERVED_COLUMNS, "point", max_rows=MAX_OBSERVED_POINTS)
    return _observed_values(path, frame)


def _observed_values(path: Path, frame: pd.DataFrame) -> pd.DataFrame:
    """The numeric columns checked cell by cell (finite and > 0: the price axis is logarithmic)."""
    import pandas as pd

    from roofline_opt import files

    labels = frame["label"].str.strip().str.slice(0, MAX_LABEL_CHARS) if "label" in frame.columns else None
    out = pd.DataFrame({"label": labels}) if labels is not None else pd.DataFrame()
    for column in OBSERVED_COLUMNS:
        out[column] = [
            checks.positive_float(f"{files.located('--observed', path)} line {line}: {column}", value)
            for line, value in enumerate(frame[column], start=2)
        ]
    return out


# ----------------------------------------------------------------------------------------------- parsers


SHARED_HELP = {
    "--model": f"{helpfmt.MODEL_HELP} (required, here or in --question)",
    "--gpu": "accelerator(s): one name, or several comma-separated for the solver to choose among "
    "(h100-sxm,h200,a100-80gb); required unless --cluster",
    "--cluster": "cluster file (GraphML, node-link JSON or YAML) or catalog cluster name (hgx-h100): accelerators "
    "and placement come from its graph",
    "--tp-degrees": "tensor-parallel degrees offered",
    "--pp-degrees": "pipeline degrees offered",
    "--tp-modes": "tensor-parallel modes offered: 1d, 2d or 1d,2d (2d on request only: no mainstream engine ships "
    "2-D tensor parallelism, so its answers cannot be launched)",
    "--ep-degrees": "expert-parallel degrees offered, each dividing tp and the expert count; with "
    "--dp-attention also as data-parallel-attention groups of that many GPUs (EP beyond TP) (default: 1 for a dense "
    f"model; for a MoE model 1 and each of {','.join(map(str, MOE_EP_DEGREES))} dividing its experts, except under "
    "--preset paper)",
    "--dp-attention": "offer MoE models data-parallel attention with wide expert parallelism: every GPU holds the "
    "attention and its own sequences, experts spread over the group (layout dpGepG) (default: on for a MoE model "
    "offered an EP degree > 1, except under --preset paper; --no-dp-attention turns it off)",
    "--max-batch": "largest batch, sequences per instance",
    "--weight-bits": "weight precision(s) offered: 16, 8, 4 or a list like 16,8 (default: the model name's "
    "-int8/-int4 suffix, else the precision the model is released in (8 for DeepSeek-V3/R1; `roofline-opt models` "
    "lists it), else 16; 16 under --preset paper)",
    "--context": f"tokens already in each sequence's KV cache: every figure assumes decoding at this context "
    f"(default {DEFAULT_CONTEXT}; with --isl/--osl or --workload: isl + osl / 2)",
    "--draft": "draft model for speculative decoding on the same GPUs (draft lengths 0..--gamma-max offered); mtp: "
    "the model's own multi-token-prediction module (deepseek-v3)",
    "--acceptance": "draft token acceptance probability in (0, 1)",
    "--gamma-max": "longest draft the solver may choose, 0..G (0: no speculative decoding; default: "
    f"{DEFAULT_DRAFT_GAMMA_MAX} with --draft, else 0)",
    "--preset": helpfmt.PRESET_HELP,
    "--max-gpus": "GPUs available in all, over every replica (default: unlimited)",
    "--demand-tok-s": "total tokens/s to serve: replicas meet it and an instance may not out-serve it",
    "--kv-bits": "KV-cache precision(s) offered: 16, 8, 4 or a list like 16,8 (default "
    f"{DEFAULT_KV_BITS}, whatever the weight precision)",
    "--isl": "input tokens per request (with --osl): prices whole requests, prefill included",
    "--osl": "output tokens per request (with --isl); the decode context becomes isl + osl / 2 unless --context",
    "--workload": "CSV of request classes (columns isl, osl, weight) served by one deployment, instead of --isl/--osl",
    "--serving": "serving modes offered: agg (chunked prefill in the decode steps), disagg (separate prefill and "
    "decode instances) or agg,disagg",
    "--chunk-tokens": f"prefill tokens per step of aggregated serving, one or a list (default {DEFAULT_CHUNK_TOKENS})",
    "--ttft-ms": "time-to-first-token limit in ms (needs --isl/--osl or --workload)",
    "--tpot-ms": "time-per-output-token limit in ms (without --percentile the steady-state TPOT, the same limit as "
    "--min-tok-s 1000/T)",
    "--percentile": "50, 90 or 99: --ttft-ms and --tpot-ms hold for that percentile of requests at the answer's own "
    "load: TTFT with queueing for prefill, TPOT over each request's decode window (docs/physics/queueing.md); how "
    "busy an instance may be follows from them (default: TTFT at no load, TPOT the steady-state mean)",
    "--burstiness": "with --percentile: " + BURSTINESS_HELP,
    "--prefix-tokens": PREFIX_TOKENS_HELP,
    "--prefix-hit-rate": PREFIX_HIT_RATE_HELP,
    "--arrival-trace": "with --percentile: a CSV of arrival_s, isl, osl per request whose gaps give the burstiness "
    "(the lengths still come from --isl/--osl or --workload)",
    "--prefill-gpu": "accelerator(s) offered for prefill instances of disaggregated serving (default: --gpu)",
    "--decode-gpu": "accelerator(s) offered for decode instances of disaggregated serving (default: --gpu)",
    "--max-instances": "largest number of prefill or decode instances in one disaggregated unit",
    "--demand-req-s": "total requests/s to serve (instead of --demand-tok-s)",
    "--max-utilisation": "fraction of each instance's throughput used, in (0, 1] (default "
    f"{space.DEFAULT_MAX_UTILISATION}: busy instances, as the paper prices them; e.g. 0.8 leaves headroom for bursts "
    "and prices the idle 20%%)",
    "--usd-per-gpu-hour": helpfmt.PRICES_HELP,
    "--time-limit": helpfmt.TIME_LIMIT_HELP,
    "--mip-gap": helpfmt.MIP_GAP_HELP,
    "--method": "HiGHS MIP or brute-force enumeration over the same space",
    "--question": helpfmt.QUESTION_HELP,
    "--save-dir": "write question.yaml (every flag resolved: repeat the run with --question DIR/question.yaml), "
    "answer.csv, answer.json and plot.png into this folder",
    "--json": "print JSON with every field instead of the summary",
    "--csv": "also write every field to this CSV file (atomically)",
}
SHARED_DEFAULTS = {
    "--tp-degrees": ",".join(map(str, space.DEFAULT_TP_DEGREES)),
    "--pp-degrees": ",".join(map(str, space.DEFAULT_PP_DEGREES)),
    "--tp-modes": ",".join(space.DEFAULT_TP_MODES),
    "--max-batch": space.DEFAULT_MAX_BATCH,
    "--acceptance": space.DEFAULT_ACCEPTANCE,
    "--preset": space.DEFAULT_PRESET,
    "--mip-gap": space.DEFAULT_MIP_GAP,
    "--method": space.DEFAULT_METHOD,
    "--serving": AGG,
    "--max-instances": space.DEFAULT_MAX_INSTANCES,
    "--max-utilisation": space.DEFAULT_MAX_UTILISATION,
}
"""The API's defaults (``api.question`` and the query functions), shown by --help and written by --save-dir."""
METAVARS = {
    "--time-limit": "SECONDS",
    "--csv": "OUT",
    "--cluster": "FILE",
    "--preset": "{paper,default}",
    "--method": "{mip,enumerate}",
    "--question": "FILE.yaml",
    "--save-dir": "DIR",
    "--usd-per-gpu-hour": "NAME=PRICE,...",
    "--workload": "FILE.csv",
    "--serving": "MODES",
    "--percentile": "{50,90,99}",
    "--arrival-trace": "FILE.csv",
}


FLAG_GROUPS = {
    "model and accelerators": ("--model", "--gpu", "--cluster", "--preset", "--usd-per-gpu-hour"),
    "layouts offered": (
        "--tp-degrees",
        "--pp-degrees",
        "--tp-modes",
        "--ep-degrees",
        "--dp-attention",
        "--max-batch",
        "--weight-bits",
        "--kv-bits",
        "--context",
    ),
    "speculative decoding": ("--draft", "--acceptance", "--gamma-max"),
    "whole requests and latency limits": (
        "--isl",
        "--osl",
        "--workload",
        "--serving",
        "--chunk-tokens",
        "--ttft-ms",
        "--tpot-ms",
        "--percentile",
        "--burstiness",
        "--arrival-trace",
        "--prefix-tokens",
        "--prefix-hit-rate",
        "--prefill-gpu",
        "--decode-gpu",
        "--max-instances",
    ),
    "demand": ("--max-gpus", "--demand-tok-s", "--demand-req-s", "--max-utilisation"),
    "solver": ("--time-limit", "--mip-gap", "--method"),
    "input and output": ("--question", "--save-dir", "--json", "--csv"),
}
"""The shared flags by what a user changes them for, each group a section of --help."""


def _add_shared(p: argparse.ArgumentParser) -> None:
    group_of = {flag: title for title, flags in FLAG_GROUPS.items() for flag in flags}
    groups = {title: p.add_argument_group(title) for title in FLAG_GROUPS}
    for flag, text in SHARED_HELP.items():
        g = groups[group_of[flag]]
        if flag == "--json":
            g.add_argument(flag, dest="json", action="store_true", help=text)
            continue
        if flag == "--dp-attention":
            g.add_argument(flag, dest="dp_attention", action=argparse.BooleanOptionalAction, help=text)
            continue
        kwargs: dict[str, Any] = {"help": text, "default": SHARED_DEFAULTS.get(flag), "metavar": METAVARS.get(flag)}
        g.add_argument(flag, dest=flag[2:].replace("-", "_"), **kwargs)
    p.set_defaults(parser=p)


def _add_top_n(p: argparse.ArgumentParser) -> None:
    text = "list the K best distinct layouts: each is proven best once those above it are excluded"
    p.add_argument("--top-n", dest="top_n", default=1, metavar="K", help=text)


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    """Register ``fastest``, ``cheapest`` and ``frontier``."""
    from roofline_opt import report
    from roofline_opt.cli import command_help
    from roofline_opt.optimize.space import DEFAULT_CONTEXT

    p = subparsers.add_parser(
        "fastest",
        help=command_help("fastest"),
        description="The fastest setup (tokens/s per request) whose cost is at most --max-usd-per-mtok, "
        f"proven optimal over the layouts offered.\nCosts assume a decode context of --context tokens "
        f"({DEFAULT_CONTEXT}).",
        epilog="example:\n  roofline-opt fastest --model llama-3-70b --gpu h100-sxm,h200 --max-usd-per-mtok 2 "
        "--top-n 3",
    )
    text = "budget in $ per million output tokens (default: none, the fastest setup at any price)"
    p.add_argument("--max-usd-per-mtok", dest="max_usd_per_mtok", metavar="X", help=text)
    _add_top_n(p)
    _add_shared(p)
    launch_cmd.add_emit_flags(p)
    p.set_defaults(func=run_fastest)

    p = subparsers.add_parser(
        "cheapest",
        help=command_help("cheapest"),
        description="The cheapest setup ($ per million tokens) that serves each request at --min-tok-s tokens/s or "
        f"faster, proven optimal over the layouts offered.\nAssumes a decode context of --context tokens "
        f"({DEFAULT_CONTEXT}).",
        epilog="example:\n  roofline-opt cheapest --model meta-llama/Llama-3.1-70B-Instruct --gpu h100-sxm "
        "--min-tok-s 50",
    )
    text = "speed target in tokens/s per request (default: none, the cheapest setup at any speed)"
    p.add_argument("--min-tok-s", dest="min_tok_s", metavar="Y", help=text)
    _add_top_n(p)
    _add_shared(p)
    launch_cmd.add_emit_flags(p)
    p.set_defaults(func=run_cheapest)

    p = subparsers.add_parser(
        "frontier",
        help=command_help("frontier"),
        description="Optimal setups for budgets spaced geometrically from the cheapest setup's cost to the fastest "
        "setup's, one row per distinct setup, and the preferred point (max speed^a / price over the whole frontier,\n"
        "whatever --points). A progress bar is drawn on stderr when it is a terminal. Assumes a decode context of "
        f"--context tokens ({DEFAULT_CONTEXT}).",
        epilog="example:\n  roofline-opt frontier --model llama-3-70b --gpu h100-sxm --points 12 --plot frontier.png "
        "--observed examples/observed.csv",
    )
    p.add_argument("--points", default=space.DEFAULT_POINTS, help="budgets swept (repeated setups are kept once)")
    p.add_argument(
        "--utility-exponent",
        dest="utility_exponent",
        default=space.DEFAULT_UTILITY_EXPONENT,
        metavar="A",
        help=f"the preferred point maximises speed^A / price (default {space.DEFAULT_UTILITY_EXPONENT:g}, as in the "
        "paper)",
    )
    p.add_argument("--plot", metavar="FILE.png", help="draw the frontier here (axes: --plot-axes)")
    p.add_argument(
        "--plot-axes",
        dest="plot_axes",
        default="cost",
        choices=report.PLOT_AXES,
        help="cost: tok/s per request vs $/Mtok (log), as in the paper; gpu: tok/s per request (per user) "
        "vs tok/s per GPU, the serving benchmarks' view",
    )
    observed_help = "overlay points from a CSV with columns tok_s_per_request, usd_per_mtok and optional label"
    p.add_argument("--observed", metavar="FILE.csv", help=observed_help)
    p.add_argument("--html", metavar="FILE.html", help=HTML_HELP)
    _add_shared(p)
    launch_cmd.add_emit_flags(p, points=True)
    p.set_defaults(func=run_frontier)
