"""``validate``, ``calibrate``, ``reproduce`` and ``sensitivity``: how far the roofline's answers can be trusted."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from roofline_opt import checks
from roofline_opt.physics.specs import PRESETS

if TYPE_CHECKING:
    from roofline_opt.fidelity.measurements import Description, MeasuredRows

VALIDATE_TABLE = (
    "line",
    "model_card",
    "weight_bits",
    "kv_bits",
    "bound_kv_bits",
    "gpu_card",
    "mapped_layout",
    "check",
    "predicted_at_batch",
    "context",
    "measured_tok_s_per_request",
    "predicted_tok_s_per_request",
    "measured_tok_s_per_gpu",
    "predicted_tok_s_per_gpu",
    "ratio",
    "estimate_ratio",
    "bottleneck",
    "bound_holds",
)
"""Columns of the terminal table of compared rows, named as in --json and --csv (which carry every field)."""
REPRODUCE_TABLE = (
    "case",
    "max_tok_s_per_request",
    "nb_max_tok_s_per_request",
    "max_rel_diff",
    "usd_per_mtok_at_max",
    "nb_usd_per_mtok_at_max",
    "n_gpus_at_max",
    "batch_at_max",
    "cheapest_usd_per_mtok",
    "nb_cheapest_usd_per_mtok",
    "cheapest_rel_diff",
    "preferred_tok_s_per_request",
    "preferred_usd_per_mtok",
)
"""Columns of the reproduce terminal table (comparison.csv and reproduce.md carry the rest)."""
SENSITIVITY_TABLE = (
    "variant",
    "max_tok_s_per_request",
    "max_rel_change",
    "usd_per_mtok_at_max",
    "setup_at_max",
    "cheapest_usd_per_mtok",
    "cheapest_rel_change",
    "preferred_tok_s_per_request",
    "preferred_usd_per_mtok",
    "preferred_setup",
)


def _preset(value: str) -> str:
    return checks.choice("--preset", value, PRESETS)


def _points(value: str) -> int:
    from roofline_opt.optimize.space import MAX_POINTS

    return checks.positive_int("--points", value, minimum=2, maximum=MAX_POINTS)


DEPLOYMENT_FLAGS = (
    ("--model", "the model served (catalog name or HuggingFace id; default: the one the result file names)"),
    ("--gpu", "the accelerator (catalog name, or as measured rows write it: H100 SXM 80GB)"),
    ("--n-gpus", "GPUs of the whole deployment (default: those the layout uses)"),
    ("--tp", "tensor-parallel degree of each instance"),
    ("--pp", "pipeline-parallel degree of each instance"),
    ("--ep", "expert-parallel degree of each instance"),
    (
        "--layout",
        "the layout as measured rows write it (TP4 x 2 instances, DEP8, prefill 2 GPU TP2 + decode 4 GPU "
        "TP4), instead of --tp/--pp/--ep",
    ),
    ("--framework", "engine and version (vllm 0.11.0)"),
    ("--precision", "weight precision (bf16, fp8, int4)"),
    ("--kv-precision", "KV-cache precision (bf16, fp8; default: the engine's default, read favourably)"),
    ("--concurrency", "requests in flight when the result file does not say (AIPerf's CSV)"),
)
"""Flags describing the deployment a benchmark client's result file measured (``fidelity.measurements``)."""


def add_deployment_flags(p: argparse.ArgumentParser, skip: tuple[str, ...] = ()) -> None:
    """The DEPLOYMENT_FLAGS, as one group: they override a deployment.yaml beside the file and the recipe's."""
    group = p.add_argument_group(
        "the deployment a benchmark result file measured",
        "override deployment.yaml beside the file and the recipe the run came from (docs/measuring.md)",
    )
    for flag, text in DEPLOYMENT_FLAGS:
        if flag not in skip:
            group.add_argument(flag, dest=_deployment_dest(flag), metavar=flag[2:].replace("-", "_").upper(), help=text)


def deployment_of(args: argparse.Namespace, **given: str | None) -> Description | None:
    """The ``fidelity.Description`` the deployment flags state (None when they state nothing); ``given`` adds values
    another flag of the command states (calibrate's ``--gpu``)."""
    from roofline_opt.fidelity import measurements

    values = {flag[2:].replace("-", "_"): getattr(args, _deployment_dest(flag), None) for flag, _ in DEPLOYMENT_FLAGS}
    return measurements.from_flags(**(values | {k: v for k, v in given.items() if v is not None}))


def measurement_files(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """(paths, error field names) of the files a command reads: FILE... and --measured."""
    from roofline_opt import catalog

    given = [(path, path) for path in args.files] + ([(args.measured, "--measured")] if args.measured else [])
    return [catalog.data_file(path) for path, _ in given], [field for _, field in given]


def measured_rows(args: argparse.Namespace, **given: str | None) -> MeasuredRows:
    """The measured rows of the files a command reads (FILE... and --measured), the deployment of result files from
    the deployment flags (and ``given``: values another flag of the command states)."""
    from roofline_opt import fidelity
    from roofline_opt.errors import InvalidInput

    paths, fields = measurement_files(args)
    if not paths:
        raise InvalidInput("--measured", "is required: give measured-points CSVs or benchmark result files")
    rows = fidelity.read_any(paths, deployment_of(args, **given), fields)
    stated = [flag for flag, _ in DEPLOYMENT_FLAGS if getattr(args, _deployment_dest(flag), None) is not None]
    if stated and not any("client" in row for row in rows):  # measured-points rows state their own deployment
        msg = "describes a benchmark client's result file; the files given are measured-points CSVs: drop it"
        raise InvalidInput(stated[0], msg)
    return rows


def _deployment_dest(flag: str) -> str:
    """The attribute ``add_deployment_flags`` stores a deployment flag under."""
    return "deployment_" + flag[2:].replace("-", "_")


def _row_profiles(args: argparse.Namespace):
    """validate's engine profile per row: --profile or --engine for every row, else each row's own engine's packaged
    profile (the framework column: vLLM, SGLang, TensorRT-LLM, ATOM; other engines' rows stay neutral); None under
    --preset paper without either flag."""
    from roofline_opt.catalog.profiles import MEASURED_ENGINE_KEYS, engine_of_framework, load_profile
    from roofline_opt.optimize.profile_offers import resolve_profile

    if args.engine is not None or args.profile is not None:
        chosen = resolve_profile(args.engine, args.profile, args.preset)
        return lambda framework: chosen
    if args.preset != "default":
        return None
    profiles = {engine: load_profile(engine) for engine in MEASURED_ENGINE_KEYS}
    return lambda framework: profiles.get(engine_of_framework(framework) or "")


def _profile_name(profile_of, row, preset: str) -> str | None:
    if row.row.setup is None:
        return None
    profile = None if profile_of is None else profile_of(row.row.framework)
    return profile.name if profile is not None else ("neutral" if preset == "default" else None)


def run_validate(args: argparse.Namespace) -> int:
    import pandas as pd

    from roofline_opt import fidelity, files, report

    paths, fields = measurement_files(args)
    if args.bench or not paths:
        from roofline_opt.cli import launch_cmd

        return launch_cmd.run_bench_validate(args)
    for flag, path in (("--csv", args.csv), ("--plot", args.plot)):
        if path:
            formats = files.plot_formats() if flag == "--plot" else None
            files.check_destination(path, flag, formats, inputs=paths)
    if args.html:
        from roofline_opt.report.html import check_html_destination

        check_html_destination(args.html, inputs=paths)
    cells = measured_rows(args)
    profile_of = _row_profiles(args)
    rows = fidelity.validate(cells, PRESETS[_preset(args.preset)], profile_of)
    records = [r.to_record() | {"profile": _profile_name(profile_of, r, args.preset)} for r in rows]
    if len(paths) > 1 or any("client" in cell for cell in cells):  # rows renumbered: say where each came from
        sources = {cell["line"]: cell["source"] for cell in cells}
        records = [record | {"source": sources[str(record["line"])]} for record in records]
    frame = pd.DataFrame(records)
    summary = fidelity.summarise(rows)
    if args.csv:
        files.write_csv(args.csv, frame.convert_dtypes(), field="--csv")
    if args.plot:
        report.plot_validation(fidelity.plot_panels(rows), args.plot, "--plot")
    if args.html:
        from roofline_opt.report import html

        title = f"validate {' '.join(args.files + ([args.measured] if args.measured else []))} ({args.preset} preset)"
        html.write_html(frame, args.html, html.validate_chart(), title)
    if args.json:
        print(report.to_json(records))
        print(summary.line(), file=sys.stderr)
        return 0
    compared = frame[frame["check"].notna()]
    print(report.frame_to_table(compared[list(VALIDATE_TABLE)]))
    failed = frame[frame["bound_holds"].eq(False)]
    if len(failed):
        print("\nrows the bound does not hold on:")
        for record in failed.to_dict("records"):
            why = record["why_not_bounded"] or f"predicted/measured {report.format_number(record['ratio'])}"
            if record["check"] == "point" and record["fits_in_memory"] is False:
                why += f" (the stated batch does not fit in memory here: at most {record['largest_fitting_batch']})"
            print(f"  line {record['line']} ({record['model']}, {record['gpu']}, {record['check']}): {why}")
    listed = frame[frame["reason"].notna()]
    if len(listed):
        print("\nrows without a verdict:")
        for record in listed.to_dict("records"):
            print(f"  line {record['line']} ({record['model']}, {record['gpu'] or '-'}): {record['reason']}")
    print("\nper framework:")
    print(report.frame_to_table(pd.DataFrame(fidelity.by_framework(rows))))
    if "source" in frame:
        print("\nsources:")
        for record in frame.to_dict("records"):
            print(f"  line {record['line']}: {record['source']}")
    print(f"\n{summary.line()}")
    if args.plot:
        print(f"wrote {args.plot}")
    return 0


def run_calibrate(args: argparse.Namespace) -> int:
    import pandas as pd

    from roofline_opt import catalog, fidelity, files, report
    from roofline_opt.catalog.profiles import ENGINE_KEYS, NEUTRAL, load_profile, profile_yaml
    from roofline_opt.fidelity.calibration.fit import BOUNDS

    gpu = catalog.load_gpu(args.gpu, "--gpu") if args.gpu else None
    prior_name = args.profile or (args.engine if args.engine in ENGINE_KEYS else NEUTRAL)
    prior = load_profile(prior_name, "--profile")
    rows = measured_rows(args, gpu=args.gpu)
    if args.out:
        inputs = tuple(x for x in (*measurement_files(args)[0], args.gpu, args.profile) if x)
        files.check_destination(args.out, "--out", inputs=inputs)
    result = fidelity.calibrate(
        rows,  # type: ignore[arg-type]  # path-like rows, named by their files
        prior,
        gpu,
        engine=args.engine,
        version=args.engine_version,
        name=Path(args.out).stem if args.out else None,
    )
    if args.out:
        files.write_text_atomic(args.out, profile_yaml(result.profile), field="--out")
    if args.json:
        print(report.to_json_object(result.to_record() | {"out": args.out}))
        return 0
    n_rows = sum(f.rows for f in result.fits)
    gpus = f"{len(result.fits)} accelerator" + ("s" if len(result.fits) != 1 else "")
    print(f"calibrate: {n_rows} rows of {gpus} in {os.fspath(rows)}, prior profile {prior.name}")
    for f in result.fits:
        table = pd.DataFrame(
            {
                "parameter": fidelity.FIT_PARAMETERS,
                "prior": [f.prior[p] for p in fidelity.FIT_PARAMETERS],
                "calibrated": [f.values[p] for p in fidelity.FIT_PARAMETERS],
                "bounds": [f"{BOUNDS[p][0]:g}-{BOUNDS[p][1]:g}" for p in fidelity.FIT_PARAMETERS],
                "fitted": [_how_fitted(p, f.fitted) for p in fidelity.FIT_PARAMETERS],
            }
        )
        scaled = "speed_scale" in f.fitted
        print(
            f"\n{f.gpu}: {f.rows} rows"
            + ("; common speed scale fitted (every parameter moves with it)" if scaled else "")
        )
        print(report.frame_to_table(table))
        print(
            "median |estimate / measured - 1|: prior "
            f"{f.prior_median_abs_error:.1%}, fitted {f.fitted_median_abs_error:.1%}, "
            f"leave-one-out {f.leave_one_out_median_abs_error:.1%}"
            + (" (one row: no held-out fit)" if f.rows == 1 else "")
        )
        for name, why in f.held_because.items():
            print(f"  held {name}: {why}")
    if args.out:
        print(f"\nwrote {args.out} (profile {result.profile.name}): use it with --profile {args.out}")
    return 0


def _how_fitted(parameter: str, coordinates: tuple[str, ...]) -> str:
    """``own`` (its own deviation fitted, with the common scale if fitted), ``scale`` (moved by the common speed
    scale only) or ``held`` (at the prior's value)."""
    if parameter in coordinates:
        return "own"
    return "scale" if "speed_scale" in coordinates else "held"


def run_reproduce(args: argparse.Namespace) -> int:
    from roofline_opt import fidelity, report
    from roofline_opt.optimize.space import MAX_CONTEXT

    cases = fidelity.CASES
    if args.only:
        keys = {c.key: c for c in fidelity.CASES}
        cases = tuple(keys[checks.choice("--only", k, keys)] for k in checks.parse_name_list("--only", args.only))
    context = (
        None if args.context is None else checks.positive_int("--context", args.context, minimum=0, maximum=MAX_CONTEXT)
    )
    with report.ProgressBar() as progress:
        result = fidelity.reproduce(args.out, cases, context, _points(args.points), progress)
    shown = result.comparison[list(REPRODUCE_TABLE)]
    print(report.frame_to_table(shown))
    print(
        f"\ncontext {result.context}; wrote {len(cases)} frontiers (CSV, PNG), comparison.csv and reproduce.md to "
        f"{args.out} in {result.seconds:.1f} s"
    )
    return 0


def run_sensitivity(args: argparse.Namespace) -> int:
    from roofline_opt import api, fidelity, files, report
    from roofline_opt.cli.names import flag_names

    fields = ("model", "gpu", "context", "draft", "acceptance", "gamma_max", "preset")
    with flag_names(fields):  # the API checks the question, its errors said as flags
        q = api.question(**api.split_lists({field: getattr(args, field) for field in fields}))
    out = files.check_folder(args.out) if args.out else None
    if args.csv:
        files.check_destination(args.csv, "--csv", inputs=(args.model, args.draft, args.gpu))
    with report.ProgressBar() as progress:
        result = fidelity.sensitivity(q, _points(args.points), progress=progress)
    if args.csv:
        files.write_csv(args.csv, result.table, field="--csv")
    if out is not None:
        title = f"{q.model.name} on {', '.join(g.name for g in q.gpus)}: sensitivity ({q.preset.name} preset)"
        with files.output_folder(out) as staging:
            fidelity.plot_sensitivity(result, staging / "sensitivity.png", title)
            files.write_csv(staging / "sensitivity.csv", result.table, field="--out")
    if args.json:
        print(report.to_json(result.table.to_dict("records")))
        return 0
    for group, rows in result.table.groupby("group", sort=False):
        print(f"{group}:")
        print(report.frame_to_table(rows[list(SENSITIVITY_TABLE)]))
        print()
    if out is not None:
        print(f"wrote {out / 'sensitivity.png'} and {out / 'sensitivity.csv'}")
    return 0


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    """Register ``validate``, ``calibrate``, ``reproduce`` and ``sensitivity``."""
    from roofline_opt.cli import command_help

    p = subparsers.add_parser(
        "validate",
        help=command_help("validate"),
        description="Evaluate the roofline at the setup of each row of a measured-points CSV (the columns of "
        "examples/measured_points.csv, which ships with the package and opens from any folder; context = "
        "input_len + output_len / 2) and check that the prediction "
        "bounds the measurement: at the stated batch (point), at maximum load (throughput ceiling) or at the "
        "measured per-user speed (frontier). The bound is the preset's physics at 100% of peak FLOP/s and HBM "
        "bandwidth (predicted_*, ratio); estimate_ratio is the preset's realistic estimate over the measurement. "
        "Rows that cannot be mapped are listed with the reason.",
        epilog="examples:\n  roofline-opt validate --measured examples/measured_points.csv\n"
        "  roofline-opt validate --measured examples/measured_points.csv --plot validate.png --html validate.html\n"
        "  roofline-opt validate vllm-result.json --gpu h100-sxm --tp 8 --precision bf16",
    )
    p.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="measured-points CSVs and benchmark clients' result files (vllm bench serve --save-result, "
        "sglang.bench_serving --output-file, GenAI-Perf and AIPerf profile exports, GuideLLM benchmarks.json), in "
        "any mix, told apart by content",
    )
    p.add_argument(
        "--measured", metavar="FILE", help="measured-points CSV (examples/measured_points.csv ships with the package)"
    )
    from roofline_opt.cli import launch_cmd

    launch_cmd.add_bench_flags(p)
    p.add_argument(
        "--preset",
        default="default",
        help="physics: default (realistic, the default) or paper; the bound takes its settings at peak FLOP/s and HBM "
        "bandwidth, the estimate its efficiencies",
    )
    from roofline_opt.cli.engine_flag import add_profile_flag

    p.add_argument(
        "--engine",
        metavar="NAME",
        help="price every row's estimate with this engine's profile (vllm, sglang, trtllm; default: each row's own "
        "engine's profile from its framework column, neutral for other engines; --profile neutral: the default preset "
        "for every row)",
    )
    add_profile_flag(p)
    p.add_argument("--json", action="store_true", help="print a JSON list of row objects (summary on stderr)")
    p.add_argument("--csv", metavar="OUT", help="also write every field of every row to this CSV file")
    p.add_argument(
        "--plot",
        metavar="FILE.png",
        help="per accelerator, measured points against the bound's frontier (tok/s per GPU vs tok/s per user, at "
        "peak), coloured by whether the bound holds",
    )
    from roofline_opt.cli.helpfmt import HTML_HELP

    p.add_argument("--html", metavar="FILE.html", help=HTML_HELP)
    add_deployment_flags(p)
    p.set_defaults(func=run_validate)

    p = subparsers.add_parser(
        "calibrate",
        help=command_help("calibrate"),
        description="Fit an engine profile's efficiencies (FLOP and HBM efficiency, NCCL latency and kernel launch "
        "factors) to the measured rows of each accelerator, inside physical bounds and pulled towards a prior profile; "
        "a parameter is fitted only where the rows identify it (the others are held, with the reason). Prints the "
        "fit beside its leave-one-out error and writes a profile file that every command takes with --profile. "
        "docs/calibration.md describes the method.",
        epilog="example:\n  roofline-opt calibrate --measured examples/measured_points.csv --gpu h100-sxm "
        "--out h100-calibrated.yaml",
    )
    p.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="measured-points CSVs and benchmark clients' result files, in any mix (as validate reads them)",
    )
    p.add_argument(
        "--measured",
        metavar="FILE",
        help="measured-points CSV (examples/measured_points.csv ships with the package)",
    )
    p.add_argument("--gpu", help="catalog name or YAML card: fit only this accelerator's rows (default: every one)")
    p.add_argument(
        "--engine",
        help="fit only rows of this engine (vllm, sglang, trtllm, lmdeploy, ... as the rows' framework names it); "
        "its packaged profile is the prior unless --profile is given (default: every row, neutral prior)",
    )
    p.add_argument("--engine-version", metavar="VERSION", help="fit only rows whose framework states this version")
    p.add_argument(
        "--profile", metavar="NAME|FILE.yaml", help="prior profile: packaged name or profile file (default: neutral)"
    )
    add_deployment_flags(p, skip=("--gpu",))
    p.add_argument("--out", metavar="FILE.yaml", help="write the calibrated profile here")
    p.add_argument("--json", action="store_true", help="print the fits as a JSON object")
    p.set_defaults(func=run_calibrate)

    p = subparsers.add_parser(
        "reproduce",
        help=command_help("reproduce"),
        description="Frontiers (paper preset) of the notebook's headline settings (physics.md section 8), each as "
        "CSV and PNG, and reproduce.md comparing our max speed, cost, N, batch, cheapest and preferred point with the "
        "notebook's continuous numbers.",
        epilog="example:\n  roofline-opt reproduce --only llama-3-70b --out reproduce",
    )
    p.add_argument("--out", default="reproduce", metavar="DIR", help="output folder (default ./reproduce)")
    p.add_argument("--points", default="30", help="budget points per frontier (default 30)")
    p.add_argument("--context", help="context for every case without its own (default: chosen on Llama 3 70B)")
    p.add_argument("--only", help="comma-separated case keys (default: every case)")
    p.set_defaults(func=run_reproduce)

    p = subparsers.add_parser(
        "sensitivity",
        help=command_help("sensitivity"),
        description="Re-solve the frontier with all-reduce scaling, FLOP/HBM efficiency, NCCL latency, kernel launch, "
        "draft acceptance and the utility exponent moved; report max speed, cheapest cost and preferred point.",
        epilog="example:\n  roofline-opt sensitivity --model llama-3-70b --gpu h100-sxm --out sens",
    )
    p.add_argument("--model", required=True, help="catalog name (a -int8/-int4 suffix sets the weight bits) or card")
    p.add_argument("--gpu", required=True, help="catalog name or YAML card (comma-separated: the solver chooses)")
    from roofline_opt.optimize import space

    p.add_argument("--preset", default=space.DEFAULT_PRESET, help="baseline physics: default (the default) or paper")
    p.add_argument(
        "--context",
        default=space.DEFAULT_CONTEXT,
        help=f"tokens already in the KV cache (default {space.DEFAULT_CONTEXT})",
    )
    p.add_argument("--points", default="20", help="budget points per frontier (default 20)")
    p.add_argument("--draft", help="draft model for speculative decoding (adds the acceptance variants)")
    p.add_argument("--gamma-max", dest="gamma_max", default=0, help="longest draft tried (default 0)")
    p.add_argument(
        "--acceptance",
        default=space.DEFAULT_ACCEPTANCE,
        help=f"baseline draft acceptance in (0, 1) (default {space.DEFAULT_ACCEPTANCE})",
    )
    p.add_argument("--json", action="store_true", help="print the table as a JSON list")
    p.add_argument("--csv", metavar="OUT", help="also write the table to this CSV file")
    p.add_argument("--out", metavar="DIR", help="write sensitivity.png and sensitivity.csv to this folder")
    p.set_defaults(func=run_sensitivity)
