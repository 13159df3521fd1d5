"""``roofline-opt study STUDY.yaml``: every question of a study file answered on Dask, resumable, one Parquet file.

The study package (and with it dask.distributed and pyarrow), files and report (pandas) are imported when the
command runs, not when the parser is built, so other commands and ``--help`` do not pay for them.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from roofline_opt import checks

SHOWN_NEW = 10
"""New questions listed by name when a changed study file is re-run."""


def run_study(args: argparse.Namespace) -> int:
    from roofline_opt import files, report
    from roofline_opt.study import load_study
    from roofline_opt.study.runner import MAX_WORKERS
    from roofline_opt.study.runner import run_study as run
    from roofline_opt.study.spec import named_files
    from roofline_opt.study.store import parts_dir

    with report.ProgressBar(eta=True) as loading:
        study = load_study(args.study, loading)
    out = Path(args.out) if args.out else Path(f"{Path(args.study).stem}.parquet")
    inputs = (args.study, *named_files(study))
    files.check_destination(out, "--out", ("parquet",), inputs=inputs)
    for flag, path, formats in (("--csv", args.csv, None), ("--summary-md", args.summary_md, ("md",))):
        if path:
            files.check_destination(path, flag, formats, inputs=inputs)
    if args.summary_plot:
        files.check_destination(args.summary_plot, "--summary-plot", files.plot_formats(), inputs=inputs)
    if args.html:
        from roofline_opt.report.html import check_html_destination

        check_html_destination(args.html, inputs=inputs)
    workers = None if args.workers is None else checks.positive_int("--workers", args.workers, maximum=MAX_WORKERS)
    chunk_rows = checks.positive_int("--chunk-rows", args.chunk_rows)
    n = workers or os.cpu_count() or 1
    where = f"the Dask scheduler at {args.scheduler}" if args.scheduler else f"a local Dask cluster of {n} workers"
    print(f"study {study.name} ({study.kind}): {len(study.questions)} questions on {where}")
    with report.ProgressBar(eta=True) as progress:
        result = run(
            study,
            out,
            workers=workers,
            scheduler=args.scheduler,
            chunk_rows=chunk_rows,
            fresh=args.fresh,
            csv=Path(args.csv) if args.csv else None,
            progress=progress,
        )
    if result.unreadable_parts:
        skipped = len(result.unreadable_parts)
        print(f"skipped {skipped} unreadable part files in {parts_dir(out)}: their questions were answered again")
    if result.answered_before:
        colon = ":" if result.new else ""
        print(f"{result.answered_before} answered before (in {parts_dir(out)}), {result.new} new{colon}")
        for text in result.new_labels[:SHOWN_NEW]:
            print(f"  new: {text}")
        if result.new > SHOWN_NEW:
            print(f"  ... and {result.new - SHOWN_NEW} more")
    if result.dropped:
        print(f"{result.dropped} answered questions are no longer in the study file: left out of {out}")
    counts = result.status_counts
    statuses = ", ".join(f"{counts[s]} {s}" for s in sorted(counts))
    print(f"answered {result.answered_now} now; {result.assembled.rows} rows: {statuses}")
    print(f"wrote {out}" + (f" and {args.csv}" if args.csv else ""))
    if args.html or args.summary_plot or args.summary_md:
        _write_views(args, study, result.frame)
    return 0


def _write_views(args: argparse.Namespace, study: Any, frame: Any) -> None:
    """The HTML report and the summary of the output, which they read back whole."""
    from roofline_opt import files
    from roofline_opt.study import summary

    if args.summary_plot or args.summary_md:
        summary.layout(frame, study)  # its options checked against the output before any view is written
    if args.html:
        from roofline_opt.report import html

        html.write_html(frame, args.html, html.study_chart(frame), f"study {study.name} ({study.kind})")
        print(f"wrote {args.html}")
    if args.summary_plot or args.summary_md:
        text = summary.markdown(frame, study)
        md = args.summary_md or str(Path(args.summary_plot).with_suffix(".md"))
        files.write_text_atomic(md, text + "\n", field="--summary-md")
        if args.summary_plot:
            summary.plot(frame, study, args.summary_plot)
        print(text)
        print(f"wrote {md}" + (f" and {args.summary_plot}" if args.summary_plot else ""))


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    """Register ``study``."""
    from roofline_opt.cli import command_help, helpfmt

    p = subparsers.add_parser(
        "study",
        help=command_help("study"),
        description="Answers every question of STUDY.yaml (kind: fastest, cheapest, frontier or plan; axes whose "
        "product is the grid and/or a list of questions; any flag of the query and accelerator card fields) on an "
        "embedded Dask cluster or a running one. Rows are written in chunks as they arrive; re-running skips the "
        "questions already answered. Infeasible and failed questions are rows with their reason.",
        epilog=helpfmt.examples("study"),
    )
    p.add_argument("study", metavar="STUDY.yaml", help="the study file")
    p.add_argument(
        "--out",
        metavar="FILE.parquet",
        help="output file (default: the study file's name, .parquet, "
        "in the current folder); chunks are kept beside it in FILE.parquet.parts/ for resuming",
    )
    p.add_argument("--csv", metavar="OUT", help="also write the rows to this CSV file (atomically)")
    p.add_argument("--workers", metavar="N", help="worker processes of the embedded cluster (default: the cores)")
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="submit to the running Dask scheduler at ADDRESS (tcp://host:8786) instead",
    )
    p.add_argument(
        "--chunk-rows",
        dest="chunk_rows",
        default=200,
        metavar="N",
        help="rows per part file written as results arrive (default 200; also every 20 s)",
    )
    p.add_argument("--fresh", action="store_true", help="forget the results of earlier runs and answer everything")
    p.add_argument(
        "--summary-plot",
        dest="summary_plot",
        metavar="FILE.png",
        help="faceted summary plot; the markdown table goes to FILE.md beside it and to stdout",
    )
    p.add_argument("--summary-md", dest="summary_md", metavar="FILE.md", help="write the markdown summary table here")
    from roofline_opt.cli.helpfmt import HTML_HELP

    p.add_argument("--html", metavar="FILE.html", help=HTML_HELP)
    p.set_defaults(func=run_study)
