"""``roofline-opt evaluate``: every figure of fully specified setups, given by flags or as rows of a CSV file.

Flags and columns map 1:1 onto the fields of ``api.evaluate_setups``, which checks them and holds their defaults;
this module only reads, names errors after the flag or CSV line, and formats.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofline_opt.cli import names
from roofline_opt.cli.engine_flag import add_engine_flags
from roofline_opt.errors import InvalidInput
from roofline_opt.optimize import setups

if TYPE_CHECKING:
    import pandas as pd

TABLE_COLUMNS = (
    "model",
    "weight_bits",
    "gpu",
    "layout",
    "batch",
    "context",
    "draft",
    "n_gpus",
    "step_time_s",
    "time_per_token_s",
    "tok_s_per_request",
    "tok_s_per_gpu",
    "usd_per_mtok",
    "usd_per_hour",
    "mfu_fraction",
    "fits_in_memory",
    "bottleneck",
    "best_gamma",
)
"""Columns of the terminal table for several setups (one setup shows every field; --json and --csv carry all)."""
REQUEST_TABLE_COLUMNS = (
    "model",
    "gpu",
    "tp",
    "pp",
    "batch",
    "kv_bits",
    "isl",
    "osl",
    "serving",
    "prefill_gpu",
    "prefill_tp",
    "prefill_pp",
    "prefill_batch",
    "n_gpus",
    "ttft_s",
    "tpot_s",
    "requests_per_s",
    "usd_per_request",
    "usd_per_mtok",
    "usd_per_hour",
    "tok_s_per_gpu",
    "fits_in_memory",
)
"""Columns of the terminal table when some setups price whole requests."""


# ----------------------------------------------------------------------------------------------- flags and rows


FIELDS = (*setups.REQUIRED, *setups.DEFAULTS)
"""The fields of a setup: each a flag of the same name and a column of --from-csv FILE."""
_API_FIELD = re.compile(r"setups\[(\d+)\]\.(\w+)(.*)", re.DOTALL)


@contextmanager
def flag_names(rows_from: Path | None = None) -> Iterator[None]:
    """Re-raise InvalidInput about ``setups[i].FIELD`` under its flag, or its line and column of the CSV file."""
    try:
        with names.flag_names(("usd_per_gpu_hour",)):
            yield
    except InvalidInput as exc:
        match = _API_FIELD.fullmatch(exc.field)
        if match is None:
            raise
        index, field, rest = match.groups()
        if rows_from is not None:  # the file's columns are named as the API's fields
            from roofline_opt import files

            where = files.located("--from-csv", rows_from)
            raise InvalidInput(f"{where} line {int(index) + 2}: {field}{rest}", exc.message) from exc
        raise InvalidInput(names.flag(field) + rest, names.flag_message(exc.message)) from exc


def _flag_values(args: argparse.Namespace) -> dict[str, Any]:
    """The setup flags given (absent ones are left to the API's defaults)."""
    return {field: getattr(args, field) for field in setups.DEFAULTS if getattr(args, field) is not None}


def setup_from_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The single setup the flags describe."""
    for field in setups.REQUIRED:
        if getattr(args, field) is None:
            raise InvalidInput(names.flag(field), "is required (or give --from-csv FILE)")
    return {field: getattr(args, field) for field in setups.REQUIRED} | _flag_values(args)


def setups_from_csv(args: argparse.Namespace, path: Path) -> list[dict[str, Any]]:
    """One setup per CSV row; blank or absent optional cells take the flags' values."""
    from roofline_opt import files

    given = [names.flag(c) for c in setups.REQUIRED if getattr(args, c) is not None]
    if given:
        raise InvalidInput("--from-csv", f"takes {', '.join(setups.REQUIRED)} from the file: drop {', '.join(given)}")
    frame = files.read_csv_cells(path, "--from-csv", setups.REQUIRED, "setup")
    flags = _flag_values(args)
    rows = []
    for row in frame.to_dict("records"):
        cells = {k: v.strip() for k, v in row.items() if k in FIELDS}
        rows.append(flags | {k: v for k, v in cells.items() if v or k in setups.REQUIRED})
    return rows


# ----------------------------------------------------------------------------------------------- command


def _table(frame: pd.DataFrame) -> str:
    """Every field of a single setup as a two-column table; the headline columns of several setups."""
    import pandas as pd

    from roofline_opt import report

    if len(frame) == 1:
        record = frame.iloc[0]
        fields = pd.DataFrame({"field": frame.columns, "value": [report.format_number(v) for v in record]})
        return report.frame_to_table(fields)
    columns = REQUEST_TABLE_COLUMNS if "ttft_s" in frame.columns else TABLE_COLUMNS
    return report.frame_to_table(frame[[c for c in columns if c in frame.columns]])


def run(args: argparse.Namespace) -> int:
    from roofline_opt import api, catalog, files, report

    if args.csv:
        files.check_destination(args.csv, "--csv", inputs=(args.from_csv, args.model, args.gpu, args.draft))
    path = Path(catalog.data_file(args.from_csv)) if args.from_csv else None
    rows = setups_from_csv(args, path) if path is not None else [setup_from_flags(args)]
    with flag_names(path):
        frame = api.evaluate_setups(
            rows, usd_per_gpu_hour=args.usd_per_gpu_hour, engine=args.engine, profile=args.profile
        )
    if args.csv:
        files.write_csv(args.csv, frame, field="--csv")
    print(report.to_json(frame.to_dict("records")) if args.json else _table(frame))
    return 0


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    """Register ``evaluate``."""
    from roofline_opt.cli import command_help, helpfmt
    from roofline_opt.optimize.space import DEFAULT_CONTEXT

    p = subparsers.add_parser(
        "evaluate",
        help=command_help("evaluate"),
        description="Every figure of one setup given by flags, or of each row of --from-csv FILE (columns "
        f"{', '.join(setups.REQUIRED)} required; {', '.join(setups.DEFAULTS)} optional, named as the flags: a blank "
        "or absent cell takes the flag's value).",
        epilog=helpfmt.examples("evaluate"),
    )
    need = "(required unless --from-csv)"
    d = setups.DEFAULTS
    p.add_argument(
        "--model",
        help=f"{helpfmt.MODEL_HELP} {need}",
    )
    p.add_argument(
        "--weight-bits",
        dest="weight_bits",
        help="16, 8 or 4 (default: the name's suffix, else the precision the model is released in, else 16; 16 "
        "under --preset paper)",
    )
    p.add_argument("--gpu", help=f"catalog name or YAML card of the accelerator {need}")
    p.add_argument("--tp", help=f"tensor-parallel degree T {need}")
    p.add_argument("--tp-2d", dest="tp_2d", action="store_true", default=None, help="2-D tensor parallelism (1-D)")
    p.add_argument(
        "--dp-attention",
        dest="dp_attention",
        action="store_true",
        default=None,
        help="data-parallel attention with wide expert parallelism (MoE): --tp GPUs each hold the attention and "
        "batch/tp sequences, experts spread over all of them (pp 1)",
    )
    p.add_argument(
        "--two-batch-overlap",
        dest="two_batch_overlap",
        action="store_true",
        default=None,
        help="with --dp-attention: two half-batches overlap the expert all-to-all with compute (SGLang TBO), the "
        "ideal case: step = launch + other network + max(memory, compute, all-to-all)",
    )
    p.add_argument("--pp", help=f"pipeline degree P {need}")
    p.add_argument("--ep", help=f"expert-parallel degree inside TP (default {d['ep']})")
    p.add_argument("--batch", help=f"sequences decoded together by one instance, B {need}")
    p.add_argument(
        "--context",
        help=f"tokens already in the KV cache (default {DEFAULT_CONTEXT}, as every query "
        "command; with --isl/--osl: isl + osl / 2)",
    )
    p.add_argument(
        "--tokens-per-step",
        dest="tokens_per_step",
        help=f"tokens per sequence per step, S (default {d['tokens_per_step']})",
    )
    p.add_argument(
        "--draft",
        help="draft model for speculative decoding (runs at 16-bit unless its name says); mtp: the model's own "
        "multi-token-prediction module (deepseek-v3)",
    )
    p.add_argument("--acceptance", help=f"draft acceptance in (0, 1) (default {d['acceptance']})")
    p.add_argument(
        "--gamma-max",
        dest="gamma_max",
        help="longest draft tried; the best of 0..gamma-max is reported (with --isl/--osl the draft proposes "
        f"exactly gamma-max tokens per round) (default {d['gamma_max']})",
    )
    p.add_argument("--preset", help=f"{helpfmt.PRESET_HELP} (default {d['preset']})")
    p.add_argument(
        "--usd-per-gpu-hour",
        dest="usd_per_gpu_hour",
        metavar="NAME=PRICE,...",
        help=helpfmt.PRICES_HELP,
    )
    p.add_argument("--question", metavar="FILE.yaml", help=helpfmt.QUESTION_HELP)
    p.add_argument("--kv-bits", dest="kv_bits", help=f"KV-cache precision: 16, 8 or 4 (default {d['kv_bits']})")
    p.add_argument("--isl", help="input tokens per request: price whole requests (with --osl)")
    p.add_argument("--osl", help="output tokens per request (with --isl)")
    p.add_argument("--serving", help=f"agg (chunked prefill in the decode steps) or disagg (default {d['serving']})")
    p.add_argument(
        "--chunk-tokens",
        dest="chunk_tokens",
        help=f"prefill tokens per step of aggregated serving (default {d['chunk_tokens']})",
    )
    p.add_argument("--prefill-gpu", dest="prefill_gpu", help="disagg: accelerator of the prefill instances (--gpu)")
    p.add_argument(
        "--prefill-tp", dest="prefill_tp", help=f"disagg: prefill tensor-parallel degree ({d['prefill_tp']})"
    )
    p.add_argument(
        "--prefill-tp-2d", dest="prefill_tp_2d", action="store_true", default=None, help="disagg: 2-D prefill TP"
    )
    p.add_argument("--prefill-pp", dest="prefill_pp", help=f"disagg: prefill pipeline degree ({d['prefill_pp']})")
    p.add_argument(
        "--prefill-batch", dest="prefill_batch", help=f"disagg: prompts per prefill step ({d['prefill_batch']})"
    )
    p.add_argument(
        "--prefill-instances",
        dest="prefill_instances",
        help=f"disagg: prefill instances x of the xPyD unit ({d['prefill_instances']})",
    )
    p.add_argument(
        "--decode-instances",
        dest="decode_instances",
        help=f"disagg: decode instances y of the xPyD unit ({d['decode_instances']})",
    )
    p.add_argument("--from-csv", dest="from_csv", metavar="FILE", help="evaluate every row of this CSV")
    add_engine_flags(p)
    p.add_argument("--json", action="store_true", help="print a JSON list of row objects instead of a table")
    p.add_argument("--csv", metavar="OUT", help="also write every field of every row to this CSV file")
    p.set_defaults(func=run, parser=p)
