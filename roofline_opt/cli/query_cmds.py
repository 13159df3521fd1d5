"""``roofline-opt fastest``, ``cheapest`` and ``frontier``: proven-optimal serving setups for a budget or a speed.

Flags map 1:1 onto ``api.question`` and the query functions, which validate them; this module only formats.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofline_opt import checks
from roofline_opt.errors import InvalidInput

if TYPE_CHECKING:
    import pandas as pd

    from roofline_opt.optimize.space import Question

SPACE_FIELDS = (
    "weight_bits", "tp_degrees", "pp_degrees", "tp_modes", "ep_degrees", "dp_attention", "max_batch", "context",
    "draft", "acceptance", "gamma_max", "preset", "max_gpus", "demand_tok_s", "cluster", "kv_bits", "isl", "osl",
    "workload", "serving", "chunk_tokens", "ttft_ms", "tpot_ms", "prefill_gpu", "decode_gpu", "max_instances",
    "demand_req_s", "max_utilisation",
)  # fmt: skip
"""Flags passed unchanged to api.question as keyword arguments of the same name."""
OBSERVED_COLUMNS = ("tok_s_per_request", "usd_per_mtok")
"""Required columns of --observed FILE (``label`` is optional)."""
MAX_OBSERVED_POINTS = 1000
"""Most points --observed may overlay on a plot."""
MAX_LABEL_CHARS = 60
"""Characters of an observed point's label drawn on the plot."""
"""The frontier re-solves one persistent MIP; enumeration is offered by fastest and cheapest only."""


# ----------------------------------------------------------------------------------------------- flags


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


@contextmanager
def _flag_names(fields: tuple[str, ...]) -> Iterator[None]:
    """Re-raise InvalidInput about an API parameter under the name of the flag that gave it."""
    try:
        yield
    except InvalidInput as exc:
        if exc.field not in fields:
            raise
        raise InvalidInput(_flag(exc.field), exc.message) from exc


API_FIELDS = (
    "model", "gpu", *SPACE_FIELDS, "time_limit", "mip_gap", "max_usd_per_mtok", "min_tok_s", "points",
    "utility_exponent", "method",
)  # fmt: skip
"""API parameter names whose errors are reported under their flag (``time_limit`` is ``--time-limit``)."""


def _question(args: argparse.Namespace) -> Question:
    from roofline_opt import api

    return api.question(args.model, args.gpu, **{name: getattr(args, name) for name in SPACE_FIELDS})


# ----------------------------------------------------------------------------------------------- formatting


def _tp(record: Mapping[str, Any]) -> str:
    if record.get("dp_attention"):
        return f"dp{record['tp']}"
    return f"{record['tp']} (2d)" if record["tp_2d"] else str(record["tp"])


def _requests_frame(records: list[Mapping[str, Any]]) -> pd.DataFrame:
    """Headline columns of answers about whole requests: serving mode, prefill side, TTFT, TPOT and prices."""
    import pandas as pd

    return pd.DataFrame(
        {
            "serving": [r["serving"] for r in records],
            "decode (y x layout)": [
                f"{r['decode_instances']} x {r['gpu']} {r['decode_layout']}"
                if r["serving"] == "disagg"
                else f"{r['gpu']} {r['decode_layout']}"
                for r in records
            ],
            "prefill (x x layout, batch)": [
                f"{int(r['prefill_instances'])} x {r['prefill_gpu']} {r['prefill_layout']}, {int(r['prefill_batch'])}"
                if r["serving"] == "disagg"
                else f"chunk {r['chunk_tokens']}"
                for r in records
            ],
            "batch": [r["batch"] for r in records],
            "weight_bits": [r["weight_bits"] for r in records],
            "kv_bits": [r["kv_bits"] for r in records],
            "replicas": [r["replicas"] for r in records],
            "TTFT ms": [r["ttft_s"] * 1e3 for r in records],
            "TPOT ms": [r["tpot_s"] * 1e3 for r in records],
            "tok/s per request": [r["tok_s_per_request"] for r in records],
            "req/s": [r["requests_per_s"] for r in records],
            "$/request": [r["usd_per_request"] for r in records],
            "$/Mtok": [r["usd_per_mtok"] for r in records],
            "$/Mtok blended": [r["usd_per_mtok_blended"] for r in records],
            "tok/s per GPU": [r["tok_s_per_gpu"] for r in records],
            "bottleneck": [r["bottleneck"] for r in records],
        }
    )


def summary_frame(records: list[Mapping[str, Any]]) -> pd.DataFrame:
    """The headline columns of answer records, in the units people read: ms/token, MFU in percent."""
    import pandas as pd

    if records and "serving" in records[0]:
        return _requests_frame(records)
    return pd.DataFrame(
        {
            "gpu": [r["gpu"] for r in records],
            "n_gpus": [r["n_gpus"] for r in records],
            "tp": [_tp(r) for r in records],
            "pp": [r["pp"] for r in records],
            "ep": [r["ep"] for r in records],
            "replicas": [r["replicas"] for r in records],
            "batch": [r["batch"] for r in records],
            "gamma": [r["gamma"] for r in records],
            "weight_bits": [r["weight_bits"] for r in records],
            "tok/s per request": [r["tok_s_per_request"] for r in records],
            "$/Mtok": [r["usd_per_mtok"] for r in records],
            "ms/token": [r["time_per_token_s"] * 1e3 for r in records],
            "throughput tok/s": [r["throughput_tok_s"] for r in records],
            "MFU %": [r["mfu"] * 100 for r in records],
            "bottleneck": [r["bottleneck"] for r in records],
        }
    )


def _solver_line(records: list[Mapping[str, Any]]) -> str:
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

    setup = f"{record['n_gpus']} x {record['gpu']}, tp {_tp(record)} x pp {record['pp']}, batch {record['batch']}"
    if record.get("serving") == "disagg":
        setup = (
            f"{int(record['prefill_instances'])}P ({record['prefill_gpu']} {record['prefill_layout']}) "
            f"{record['decode_instances']}D ({record['gpu']} {record['decode_layout']}), batch {record['batch']}"
        )
    speed = report.format_number(record["tok_s_per_request"])
    return f"{setup}{sep}{speed} tok/s per request at ${report.format_number(record['usd_per_mtok'])}/Mtok"


def _emit(args: argparse.Namespace, records: list[dict[str, Any]], text: str, as_list: bool) -> None:
    """Write --csv (atomically) and print JSON (--json) or the human text."""
    import pandas as pd

    from roofline_opt import files, report

    if args.csv:
        files.write_csv(args.csv, pd.DataFrame(records), field="--csv")
    if args.json:
        print(report.to_json(records) if as_list else report.to_json_object(records[0]))
    else:
        print(text)


def _answer_text(headline: str, record: Mapping[str, Any]) -> str:
    from roofline_opt import report

    return "\n".join([headline, report.frame_to_table(summary_frame([record])), _solver_line([record])])


# ----------------------------------------------------------------------------------------------- commands


def run_fastest(args: argparse.Namespace) -> int:
    from roofline_opt import api

    with _flag_names(API_FIELDS):
        question = _question(args)
        _check_outputs(args)
        answer = api.fastest_answer(question, args.max_usd_per_mtok, args.method, args.time_limit, args.mip_gap)
    limit = "at any price" if args.max_usd_per_mtok is None else f"within ${args.max_usd_per_mtok}/Mtok"
    record = answer.to_record()
    headline = f"fastest setup of {question.model.name} {limit}{_request_text(question)}"
    _emit(args, [record], _answer_text(headline, record), as_list=False)
    return 0


def run_cheapest(args: argparse.Namespace) -> int:
    from roofline_opt import api

    with _flag_names(API_FIELDS):
        question = _question(args)
        _check_outputs(args)
        answer = api.cheapest_answer(question, args.min_tok_s, args.method, args.time_limit, args.mip_gap)
    limit = "at any speed" if args.min_tok_s is None else f"at {args.min_tok_s} tok/s per request or faster"
    if args.min_tok_s is None and question.max_tpot_s is not None:
        limit = "at that TPOT or less"
    record = answer.to_record()
    headline = f"cheapest setup of {question.model.name} {limit}{_request_text(question)}"
    _emit(args, [record], _answer_text(headline, record), as_list=False)
    return 0


def run_frontier(args: argparse.Namespace) -> int:
    from roofline_opt import api, report

    with _flag_names(API_FIELDS):
        question = _question(args)
        observed = read_observed(Path(args.observed)) if args.observed else None
        _check_outputs(args)
        with report.ProgressBar() as progress:
            frame = api.frontier_frame(
                question, args.points, args.utility_exponent, args.time_limit, args.mip_gap, progress, args.method
            )
    records = frame.to_dict("records")
    if args.plot:
        label = "preferred: " + describe(next(r for r in records if r["preferred"]), sep="\n")
        report.plot_frontier(frame, args.plot, title=_plot_title(question), preferred_label=label, observed=observed)
    _emit(args, records, _frontier_text(question, frame, args.utility_exponent), as_list=True)
    return 0


def _request_text(question: Question) -> str:
    """The whole-request part of a headline: lengths, limits and serving modes offered ("" for decode-only)."""
    w = question.workload
    if w is None:
        return ""
    lengths = f"{w.isl[0]} in / {w.osl[0]} out" if len(w.isl) == 1 else f"a {len(w.isl)}-class mix"
    limits = [f"{name} <= {value * 1e3:.4g} ms" for name, value in (("TTFT", question.max_ttft_s),
              ("TPOT", question.max_tpot_s)) if value is not None]  # fmt: skip
    serving = "/".join(question.serving)
    return f" for requests of {lengths} tokens ({', '.join([serving, *limits])})"


def _check_outputs(args: argparse.Namespace) -> None:
    """Refuse unwritable --csv / --plot destinations before solving, so a failed run leaves no file behind."""
    from roofline_opt import files

    inputs = (args.model, getattr(args, "draft", None), args.cluster, getattr(args, "observed", None))
    if args.csv:
        files.check_destination(args.csv, "--csv", inputs=inputs)
    if getattr(args, "plot", None):
        files.check_destination(args.plot, "--plot", files.plot_formats(), inputs=inputs)


def _plot_title(question: Question) -> str:
    gpus = ", ".join(g.name for g in question.gpus)
    return f"{question.model.name} on {gpus} ({question.preset.name} preset, context {question.context} tokens)"


def _frontier_text(question: Question, frame: pd.DataFrame, exponent: Any) -> str:
    from roofline_opt import report

    table = summary_frame(frame.to_dict("records"))
    table.insert(0, "pref", ["*" if p else "" for p in frame["preferred"]])
    monotone = "monotone" if frame.attrs.get("monotone") else "NOT monotone"
    return "\n".join(
        [
            f"frontier of {question.model.name}: {len(frame)} optimal setups from the cheapest to the fastest "
            f"({monotone}); * = preferred (max speed^{report.format_number(float(exponent))} / price)",
            report.frame_to_table(table),
            _solver_line(frame.to_dict("records")),
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

    labels = frame["label"].str.strip().str.slice(0, MAX_LABEL_CHARS) if "label" in frame.columns else None
    out = pd.DataFrame({"label": labels}) if labels is not None else pd.DataFrame()
    for column in OBSERVED_COLUMNS:
        out[column] = [
            checks.positive_float(f"{path} line {line}: {column}", value)
            for line, value in enumerate(frame[column], start=2)
        ]
    return out


# ----------------------------------------------------------------------------------------------- parsers


SHARED_HELP = {
    "--model": "catalog name (a -int8/-int4 suffix sets the weight bits), YAML card or config.json",
    "--gpu": "accelerator(s): one name, or several comma-separated for the solver to choose among "
    "(h100-sxm,h200,a100-80gb)",
    "--cluster": "cluster file (GraphML, node-link JSON or YAML): accelerators and placement come from its graph",
    "--tp-degrees": "tensor-parallel degrees offered (default 1,2,4,8,16,32,64)",
    "--pp-degrees": "pipeline degrees offered (default 1,2,4,8)",
    "--tp-modes": "tensor-parallel modes offered: 1d, 2d or 1d,2d (default 1d,2d)",
    "--ep-degrees": "expert-parallel degrees offered, each dividing tp and the expert count (default 1); with "
    "--dp-attention also as data-parallel-attention groups of that many GPUs (EP beyond TP)",
    "--dp-attention": "also offer MoE models data-parallel attention with wide expert parallelism: every GPU holds the "
    "attention and its own sequences, experts spread over the group (tp column shows dpG)",
    "--max-batch": "largest batch, sequences per instance (default 4096)",
    "--weight-bits": "weight precision(s) offered: 16, 8, 4 or a list like 16,8 (default: the model name's "
    "-int8/-int4 suffix, else 16)",
    "--context": "tokens already in each sequence's KV cache: the assumed mid-generation context (default 8000; "
    "with --isl/--osl: isl + osl / 2)",
    "--draft": "draft model for speculative decoding on the same GPUs (with --gamma-max)",
    "--acceptance": "draft token acceptance probability in (0, 1) (default 0.8)",
    "--gamma-max": "longest draft the solver may choose, 0..G (default 0: no speculative decoding)",
    "--preset": "physics of the reference notebook or the realistic one (default default)",
    "--max-gpus": "GPUs available in all, over every replica (default unlimited)",
    "--demand-tok-s": "total tokens/s to serve: replicas meet it and an instance may not out-serve it",
    "--kv-bits": "KV-cache precision(s) offered: 16, 8, 4 or a list like 16,8 (default 16)",
    "--isl": "input tokens per request (with --osl): prices whole requests, prefill included",
    "--osl": "output tokens per request (with --isl); the decode context becomes isl + osl / 2 unless --context",
    "--workload": "CSV of request classes (columns isl, osl, weight) served by one deployment, instead of --isl/--osl",
    "--serving": "serving modes offered: agg (chunked prefill in the decode steps), disagg (separate prefill and "
    "decode instances) or agg,disagg (default agg)",
    "--chunk-tokens": "prefill tokens per step of aggregated serving, one or a list (default 2048)",
    "--ttft-ms": "time-to-first-token limit in ms (needs --isl/--osl or --workload)",
    "--tpot-ms": "time-per-output-token limit in ms (the same limit as --min-tok-s 1000/T)",
    "--prefill-gpu": "accelerator(s) offered for prefill instances of disaggregated serving (default: --gpu)",
    "--decode-gpu": "accelerator(s) offered for decode instances of disaggregated serving (default: --gpu)",
    "--max-instances": "largest number of prefill or decode instances in one disaggregated unit (default 4)",
    "--demand-req-s": "total requests/s to serve (instead of --demand-tok-s)",
    "--max-utilisation": "fraction of each instance's throughput used, in (0, 1] (default 1.0: busy instances, as "
    "the paper prices them; e.g. 0.8 leaves headroom for bursts and prices the idle 20%%)",
    "--time-limit": "HiGHS time limit per solve, in seconds (default none)",
    "--mip-gap": "HiGHS relative MIP gap (default 1e-6)",
    "--method": "HiGHS MIP or brute-force enumeration (default mip)",
    "--json": "print JSON (an object; a list for frontier) with every field instead of the summary",
    "--csv": "also write every field to this CSV file (atomically)",
}
SHARED_DEFAULTS = {
    "--tp-degrees": "1,2,4,8,16,32,64",
    "--pp-degrees": "1,2,4,8",
    "--tp-modes": "1d,2d",
    "--ep-degrees": "1",
    "--max-batch": 4096,
    "--acceptance": 0.8,
    "--gamma-max": 0,
    "--preset": "default",
    "--mip-gap": 1e-6,
    "--method": "mip",
    "--serving": "agg",
    "--max-instances": 4,
    "--max-utilisation": 1.0,
}
METAVARS = {"--time-limit": "SECONDS", "--csv": "OUT", "--cluster": "FILE", "--preset": "{paper,default}",
            "--method": "{mip,enumerate}", "--workload": "FILE.csv", "--serving": "MODES"}  # fmt: skip


def _add_shared(p: argparse.ArgumentParser) -> None:
    for flag, text in SHARED_HELP.items():
        if flag in ("--json", "--dp-attention"):
            p.add_argument(flag, dest=flag[2:].replace("-", "_"), action="store_true", help=text)
            continue
        kwargs: dict[str, Any] = {"help": text, "default": SHARED_DEFAULTS.get(flag), "metavar": METAVARS.get(flag)}
        p.add_argument(flag, dest=flag[2:].replace("-", "_"), required=flag == "--model", **kwargs)


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    """Register ``fastest``, ``cheapest`` and ``frontier``."""
    p = subparsers.add_parser(
        "fastest",
        help="the most tok/s per request within a budget in $/Mtok",
        description="The fastest setup (tokens/s per request) whose cost is at most --max-usd-per-mtok, "
        "proven optimal over the layouts offered. Costs assume a decode context of --context tokens (8000).",
    )
    p.add_argument("--max-usd-per-mtok", dest="max_usd_per_mtok", metavar="X",
                   help="budget in $ per million output tokens (default: the fastest setup at any price)")  # fmt: skip
    _add_shared(p)
    p.set_defaults(func=run_fastest)

    p = subparsers.add_parser(
        "cheapest",
        help="the least $/Mtok at a speed in tok/s per request",
        description="The cheapest setup ($ per million tokens) that serves each request at --min-tok-s tokens/s or "
        "faster, proven optimal over the layouts offered. Assumes a decode context of --context tokens (8000).",
    )
    p.add_argument("--min-tok-s", dest="min_tok_s", metavar="Y",
                   help="speed target in tokens/s per request (default: the cheapest setup at any speed)")  # fmt: skip
    _add_shared(p)
    p.set_defaults(func=run_cheapest)

    p = subparsers.add_parser(
        "frontier",
        help="the speed-vs-cost frontier from the cheapest to the fastest setup",
        description="Optimal setups for budgets spaced geometrically from the cheapest setup's cost to the fastest "
        "setup's, one row per distinct setup, and the preferred point (max speed^a / price). A progress bar is drawn "
        "on stderr when it is a terminal. Assumes a decode context of --context tokens (8000).",
    )
    p.add_argument("--points", default=50, help="budgets swept (default 50; repeated setups are kept once)")
    p.add_argument("--utility-exponent", dest="utility_exponent", default=4.0, metavar="A",
                   help="the preferred point maximises speed^A / price (default 4, as in the paper)")  # fmt: skip
    p.add_argument("--plot", metavar="FILE.png", help="draw the frontier (x tok/s per request, y $/Mtok, log) here")
    observed_help = "overlay points from a CSV with columns tok_s_per_request, usd_per_mtok and optional label"
    p.add_argument("--observed", metavar="FILE.csv", help=observed_help)
    _add_shared(p)
    p.set_defaults(func=run_frontier)
