"""``roofline-opt plan FLEET.yaml``: several models with real demands on one cluster, planned by one MIP."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from roofline_opt.errors import InvalidInput

if TYPE_CHECKING:
    import pandas as pd

    from roofline_opt.optimize.fleet import FleetPlan

ROW_COLUMNS = (
    "model",
    "role",
    "gpu",
    "weight_bits",
    "tp",
    "pp",
    "batch",
    "replicas",
    "total_gpus",
    "kv_bits",
    "chunk_tokens",
    "tpot_ms",
    "ttft_ms",
    "tok_s_per_request",
    "utilisation",
    "served_tok_s",
    "usd_per_gpu_hour",
    "usd_per_hour",
    "effective_usd_per_mtok",
)
"""Row columns of the text answer, named as in --json and --csv."""
MODEL_COLUMNS = (
    "model",
    "model_spec",
    "demand_tok_s",
    "served_tok_s",
    "tpot_limit_ms",
    "serving",
    "prefill_instances",
    "decode_instances",
    "ttft_ms",
    "ttft_limit_ms",
    "ttft_percentile",
    "tpot_percentile",
    "gpus",
    "usd_per_hour",
    "effective_usd_per_mtok",
)
FLEET_FILE_HELP = """\
the fleet file (YAML; instances/fleets/*.yaml ship with the package and open from any folder):
  cluster: FILE or catalog name   a cluster graph (placement on its scale-up domains), or instead
  gpus: {h100-sxm: 64, h200: unlimited}   GPU counts per accelerator type
  objective: cost | served        least $/hour meeting every demand (default) | most weighted demand in a budget
  max_utilisation: 0.9            headroom: no instance planned above this fraction of its throughput
  models:                         one entry per model served
    - name: chat                  the row label
      model: llama-3-70b          catalog name, alias, card or config.json
      demand_req_s: 12            or demand_tok_s, or demand_profile: {tok_s: [...]} per period
      tpot_ms: 40                 or min_tok_s; isl/osl (whole requests), ttft_ms, weight_bits, kv_bits, ... as
                                  the query flags, with underscores
      serving: disagg             prefill and decode pools (xPyD; prefill_gpu/decode_gpu as the query flags)
      percentile: 90              ttft_ms and tpot_ms hold at this percentile (50, 90, 99) under Poisson
                                  arrivals, or burstiness: c_a^2 of the gaps (aggregated or pooled models)
examples:
  roofline-opt plan instances/fleets/chat-and-code.yaml
  roofline-opt plan instances/fleets/day-profile.yaml --json
  roofline-opt plan instances/fleets/chat-and-code.yaml --compare --html plan.html
"""

FLAG_FIELDS = ("time_limit_s", "mip_gap", "method")
"""Errors about these API parameters are reported under their flag."""
OPTIONAL = (
    "kv_bits",
    "chunk_tokens",
    "ttft_ms",
    "role",
    "serving",
    "prefill_instances",
    "decode_instances",
    "ttft_limit_ms",
    "ttft_percentile",
    "tpot_percentile",
)
"""Columns shown only when some row has a value (whole requests; disaggregated pools; limits at a percentile)."""
PLACEMENT_LINES = 40
"""Placement lines printed in the text answer (all are in --json)."""


def _frame(records: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> pd.DataFrame:
    """The columns present in the records (TTFT, KV bits and chunk only for fleets with whole requests)."""
    import pandas as pd

    shown = [k for k in columns if any(r.get(k) not in (None, 0) for r in records) or k not in OPTIONAL]
    return pd.DataFrame([{key: r.get(key) for key in shown} for r in records])


def compact_ids(ids: Sequence[str]) -> str:
    """GPU ids with runs shortened: n0.gpu0..n0.gpu7 -> n0.gpu0-7."""
    parts: list[str] = []
    run: list[tuple[str, int]] = []

    def flush() -> None:
        if run:
            prefix, first = run[0]
            parts.append(f"{prefix}{first}" if len(run) == 1 else f"{prefix}{first}-{run[-1][1]}")
            run.clear()

    for gid in ids:
        m = re.fullmatch(r"(.*?)(\d+)", gid)
        if m is None:
            flush()
            parts.append(gid)
            continue
        prefix, number = m.group(1), int(m.group(2))
        if run and (run[-1][0] != prefix or run[-1][1] + 1 != number):
            flush()
        run.append((prefix, number))
    flush()
    return ",".join(parts)


def plan_text(plan: FleetPlan, source: str) -> str:
    from roofline_opt import report

    c = plan.cluster
    have = ", ".join(f"{'unlimited' if n is None else n} x {g}" for g, n in c["gpus_available"].items())
    used = ", ".join(f"{n} x {g}" for g, n in c["gpus_used"].items())
    lines = [f"fleet plan for {source} on {c['name'] or 'GPU counts'} ({have})"]
    lines += [report.frame_to_table(_with_period(plan, _frame(plan.rows, ROW_COLUMNS))), ""]
    lines += [report.frame_to_table(_frame(plan.models, MODEL_COLUMNS)), ""]
    spend = report.format_number(c["usd_per_hour"])
    peak = " (peak period)" if c["periods"] > 1 else ""
    average = "on average " if c["periods"] > 1 else ""
    lines.append(f"cluster: {used} GPUs used{peak}, {average}${spend}/hour")
    if "reserved_gpus" in c:
        lines.append(
            "  a row's usd_per_hour is its GPUs at usd_per_gpu_hour: the day's cost of that GPU type (reserved GPUs "
            "all day, idle hours included, plus on-demand hours) over the GPU-hours its instances used, not the "
            "list price"
        )
        total = report.format_number(c["usd_total"])
        for g, r in c["reserved_gpus"].items():
            lines.append(f"  {g}: {r} reserved, on demand per period {c['on_demand_gpus'][g]}")
        lines.append(f"  cost over the {c['periods']} periods: ${total}")
    if c.get("domains_by_gpus_used"):
        domains = ", ".join(f"{n} with {used}" for used, n in c["domains_by_gpus_used"].items())
        first = " in period 0" if c["periods"] > 1 else ""
        lines.append(f"  scale-up domains by GPUs used{first}: {domains}")
    if plan.placement and plan.placement[0] and c["periods"] == 1:
        lines.append("placement (instance: TP group per pipeline stage):")
        for inst in plan.placement[0][:PLACEMENT_LINES]:
            stages = " | ".join(compact_ids(s) for s in inst["stages"])
            lines.append(f"  {inst['instance']} (tp {inst['tp']} x pp {inst['pp']}): {stages}")
        if len(plan.placement[0]) > PLACEMENT_LINES:
            lines.append(f"  ... {len(plan.placement[0]) - PLACEMENT_LINES} more (see --json)")
    lines += _queueing_lines(plan)
    lines.append(_solver_line(plan.solve))
    if plan.baseline is not None:
        lines.append(_baseline_line(plan))
    return "\n".join(lines)


def _queueing_lines(plan: FleetPlan) -> list[str]:
    """``report.validity.queueing_line`` per aggregated model whose TTFT limit holds at a percentile, named."""
    from roofline_opt.report.validity import queueing_line

    out = []
    for m in plan.models:
        if m.get("ttft_percentile") is None:
            continue
        rows = [
            {"serving": "agg", "ttft_percentile": m["ttft_percentile"], "prefill_utilisation": r["prefill_utilisation"]}
            for r in plan.rows
            if r["model"] == m["model"] and r.get("prefill_utilisation") is not None and r.get("role", "agg") == "agg"
        ]
        line = queueing_line(rows, m.get("mean_osl_tokens"))
        if line is not None:
            out.append(f"{m['model']}: {line}")
    return out


def _with_period(plan: FleetPlan, frame: pd.DataFrame) -> pd.DataFrame:
    if plan.cluster["periods"] > 1:
        frame.insert(0, "period", [r["period"] for r in plan.rows])
    return frame


def _solver_line(solve: Mapping[str, Any]) -> str:
    from roofline_opt import report

    raw_gap = solve.get("mip_gap")
    gap = report.format_number(0 if raw_gap is not None and abs(raw_gap) < 1e-12 else raw_gap)
    units = {
        "bound_usd_per_hour": "${}/hour",
        "bound_usd": "${} over the profile",
        "bound_value": "{} (weighted demand served)",
    }
    bound = "".join(
        f", bound {units[k].format(report.format_number(v))}" for k, v in solve.items() if k in units and v is not None
    )
    text = f"solver: {solve['method']}, {solve['status']}{bound}, gap {gap}, {solve['candidates']} candidates"
    if "cost_phase" in solve:
        phase = solve["cost_phase"]
        text += f"; cost phase {phase['status']}, gap {report.format_number(phase['mip_gap'])}"
    return text


def _baseline_line(plan: FleetPlan) -> str:
    from roofline_opt import report

    base = plan.baseline
    assert base is not None  # asked for plans that have one
    cost = base["usd_per_hour"]
    fits = "" if base["packs_onto_pool"] else ", and its instances do not fit the pool"
    saved = cost - plan.usd_per_hour
    saved = 0.0 if abs(saved) < 1e-9 * max(cost, 1.0) else saved
    share = report.format_number(100 * saved / cost) if cost else "0"
    return (
        f"per-model planning (each model's cheapest $/Mtok layout, ceil(demand / throughput) replicas): "
        f"${report.format_number(cost)}/hour{fits}; the plan saves ${report.format_number(saved)}/hour "
        f"({share}%)"
    )


def plot_plan(plan: FleetPlan, cluster: Any, domains: Sequence[Any], path: str) -> None:
    """The cluster's GPUs grouped by scale-up domain (one box each, graph order), coloured by the model they serve
    (grey: idle); on small clusters each GPU is labelled with its instance."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    from roofline_opt import files, report

    owner = {g: inst for inst in plan.placement[0] for s in inst["stages"] for g in s}
    colour = {m["model"]: f"C{i % 10}" for i, m in enumerate(plan.models)}
    cols = min(len(domains), max(4, math.ceil(math.sqrt(2 * len(domains)))))
    side = int(math.ceil(math.sqrt(max(d.size for d in domains))))
    fig = Figure(
        figsize=(min(16, 2 + 1.3 * cols), min(12, 1.5 + 1.3 * math.ceil(len(domains) / cols))), layout="constrained"
    )
    ax = fig.add_subplot()
    label = sum(d.size for d in domains) <= 64
    for n, dom in enumerate(domains):
        x0, y0 = (n % cols) * (side + 1), -(n // cols) * (side + 1)
        ax.add_patch(Rectangle((x0 - 0.6, y0 - side + 0.4), side + 0.2, side + 0.2, fill=False, ec="0.6", lw=0.8))
        for j, g in enumerate(dom.gpu_ids):
            x, y = x0 + j % side, y0 - j // side
            inst = owner.get(g)
            ax.scatter(
                [x],
                [y],
                s=180 if label else 30,
                c=colour[inst["model"]] if inst else "0.85",
                edgecolors="0.4",
                linewidths=0.5,
                zorder=3,
            )
            if label and inst:
                ax.annotate(inst["instance"].rsplit("#", 1)[-1], (x, y), ha="center", va="center", fontsize=6, zorder=4)
    for name, c in colour.items():
        gpus = sum(1 for inst in owner.values() if inst["model"] == name)
        ax.scatter([], [], c=c, label=f"{name} ({gpus} GPUs)")
    ax.scatter([], [], c="0.85", edgecolors="0.4", label="idle GPU")
    spend = report.format_number(plan.usd_per_hour)
    name = cluster.graph.get("name") or plan.cluster["name"]
    legend = "boxes: scale-up domains; numbers: instances" if label else "boxes: scale-up domains"
    ax.set_title(f"{name}: ${spend}/hour\n({legend})", fontsize="medium")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small", framealpha=0.85)
    ax.set_aspect("equal")
    ax.set_axis_off()
    ax.autoscale_view()
    files.save_figure_atomic(fig, path, "--plot")


def _question_factory(args: argparse.Namespace):
    """api.question, under the profile of --engine / --profile when given (every model of the fleet)."""
    import functools

    from roofline_opt import api
    from roofline_opt.cli.engine_flag import physics_engine
    from roofline_opt.optimize.profile_offers import resolve_profile

    engine = physics_engine(args)
    if engine is None and args.profile is None:
        return api.question
    return functools.partial(api.question, engine=engine, profile=resolve_profile(engine, args.profile))


def run_plan(args: argparse.Namespace) -> int:
    import pandas as pd

    from roofline_opt import api, catalog, files, report

    if args.csv:
        files.check_destination(args.csv, "--csv", inputs=(args.fleet,))
    if args.plot:
        files.check_destination(args.plot, "--plot", files.plot_formats(), inputs=(args.fleet,))
    if args.html:
        from roofline_opt.report.html import check_html_destination

        check_html_destination(args.html, inputs=(args.fleet,))
    from roofline_opt.cli import launch_cmd
    from roofline_opt.optimize import fleet as fl

    launch_cmd.check_emit(args)

    spec = fl.load_fleet_file(catalog.data_file(args.fleet), _question_factory(args))
    if args.plot and not spec.pool.has_graph:
        raise InvalidInput("--plot", "needs a fleet on a cluster graph (cluster:), not GPU counts")
    from roofline_opt.cli.names import flag_names

    with flag_names(FLAG_FIELDS):
        options = api.solver_options(args.time_limit, args.mip_gap)
        plan = fl.plan_fleet(spec, args.method, options)
    if args.compare and not spec.has_profile:
        from roofline_opt.optimize.fleet.baseline import per_model_baseline

        plan = plan.with_baseline(per_model_baseline(spec, options))
    if args.csv:
        files.write_csv(args.csv, pd.DataFrame(plan.rows), field="--csv")
    if args.plot:
        plot_plan(plan, spec.pool.cluster, spec.pool.domains, args.plot)
    if args.html:
        from roofline_opt.report import html

        html.write_html(pd.DataFrame(plan.rows), args.html, html.plan_chart(), f"fleet plan for {args.fleet}")
    profile = next((m.question.profile for m in spec.models if m.question.profile is not None), None)
    record = plan.to_record() | ({} if profile is None else {"profile": profile.name})
    label = args.fleet if profile is None else f"{args.fleet} ({profile.name} profile)"
    print(report.to_json_object(record) if args.json else plan_text(plan, label))
    launch_cmd.emit_plan(args, spec, plan)
    return 0


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    """Register ``plan``."""
    from roofline_opt.cli import command_help

    p = subparsers.add_parser(
        "plan",
        help=command_help("plan"),
        description="Replica counts per layout for every model, each instance's batch within its TPOT limit, and "
        "their placement on the cluster graph, at the least provisioned $/hour (or the most weighted demand served "
        "within a budget).",
        epilog=FLEET_FILE_HELP,
    )
    from roofline_opt.cli import helpfmt
    from roofline_opt.optimize import space

    p.add_argument("fleet", metavar="FLEET.yaml", help="fleet file (YAML)")
    p.add_argument(
        "--method",
        default=space.DEFAULT_METHOD,
        metavar="{mip,enumerate}",
        help="HiGHS MIP or brute force (small fleets only: <= 3 models, <= 64 GPUs, one period)",
    )
    p.add_argument("--time-limit", dest="time_limit", metavar="SECONDS", help=helpfmt.TIME_LIMIT_HELP)
    gap = space.DEFAULT_FLEET_MIP_GAP
    p.add_argument("--mip-gap", dest="mip_gap", default=gap, help=f"{helpfmt.MIP_GAP_HELP} (default {gap:g})")
    p.add_argument(
        "--compare",
        action="store_true",
        help="also plan each model alone (cheapest $/Mtok layout, ceil replicas) and report the saving",
    )
    p.add_argument("--json", action="store_true", help="print every field of the plan as one JSON object")
    p.add_argument("--csv", metavar="OUT", help="also write one row per (period, model, layout) to a CSV file")
    p.add_argument("--plot", metavar="FILE.png", help="draw the cluster graph with GPUs coloured by model")
    from roofline_opt.cli import launch_cmd

    launch_cmd.add_emit_flags(p)

    from roofline_opt.cli.helpfmt import HTML_HELP

    p.add_argument("--html", metavar="FILE.html", help=HTML_HELP)
    p.set_defaults(func=run_plan)
