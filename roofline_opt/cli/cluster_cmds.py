"""``roofline-opt cluster show|draw|build``: what a cluster graph gives each GPU type, a picture of it, and files."""

from __future__ import annotations

import argparse
import importlib.util
import math
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofline_opt.cli import OneLineParser
from roofline_opt.errors import InvalidInput

if TYPE_CHECKING:
    import networkx as nx

SPRING_LAYOUT_MAX_NODES = 400
"""Larger graphs are drawn on concentric shells by node kind (networkx's spring layout needs scipy beyond ~500)."""
EDGE_COLORS = {
    "nvswitch": "tab:green",
    "nvlink": "tab:olive",
    "xgmi": "tab:cyan",
    "c2c": "tab:pink",
    "pcie": "tab:brown",
    "infiniband": "tab:blue",
    "ethernet": "tab:purple",
}
NODE_STYLES = {"switch": ("s", "0.55"), "host": ("D", "burlywood")}
"""Marker and color of non-GPU nodes; GPUs are circles colored by type."""


def known_gpu_names() -> frozenset[str]:
    """The catalog's accelerator names if the catalog module is present, else topology's built-in list."""
    from roofline_opt import topology

    if importlib.util.find_spec("roofline_opt.catalog") is None:
        return topology.BUILTIN_GPU_NAMES
    from roofline_opt import catalog

    return frozenset(gpu.name for gpu in catalog.list_gpus())


def _half(value: float | None) -> float | None:
    return None if value is None else value / 2.0


def cluster_summary(cluster: nx.Graph, source: str) -> dict[str, Any]:
    """Node and link counts, link tiers, and per GPU type its domains and derived collective figures.

    all-reduce B/s are the GpuSpec values (half the per-direction bandwidth); None where the graph cannot tell
    (inter-domain figures of a single domain: the catalog's value applies).
    """
    from roofline_opt import topology

    kinds = Counter(kind for _, kind in cluster.nodes(data="kind"))
    per_type = []
    for name, count in topology.gpu_counts(cluster).items():
        f = topology.collective_figures(cluster, topology.gpu_ids(cluster, name))
        per_type.append(
            {
                "gpu": name,
                "gpus": count,
                "domain_sizes": list(f.domain_sizes),
                "scaleup_gpus": f.scaleup_gpus,
                "intra_bytes_per_s": _half(f.intra_link_bytes_per_s),
                "inter_bytes_per_s": _half(f.inter_link_bytes_per_s),
                "intra_hop_latency_s": f.intra_latency_s,
                "inter_hop_latency_s": f.inter_latency_s,
                "intra_hops": f.intra_hops,
                "inter_hops": f.inter_hops,
            }
        )
    return {
        "name": cluster.graph.get("name", ""),
        "source": source,
        "nodes": {kind: kinds.get(kind, 0) for kind in topology.NODE_KINDS},
        "links": cluster.number_of_edges(),
        "link_tiers": [asdict(tier) for tier in topology.link_tiers(cluster)],
        "gpu_types": per_type,
    }


def _domains_text(sizes: list[int]) -> str:
    return ", ".join(f"{n} x {size}" for size, n in Counter(sizes).items())


def _scientific(value: float | None) -> str:
    from roofline_opt import report

    return report.MISSING_CELL if value is None else f"{value:.4g}"


def _summary_text(summary: dict[str, Any]) -> str:
    import pandas as pd

    from roofline_opt import report

    nodes = ", ".join(f"{n} {kind}" for kind, n in summary["nodes"].items())
    lines = [
        f"cluster {summary['name'] or '(unnamed)'} from {summary['source']}: {nodes}; {summary['links']} links",
        "",
    ]
    lines += ["link tiers (bandwidth per direction):", report.frame_to_table(pd.DataFrame(summary["link_tiers"])), ""]
    rows = [
        {
            "gpu": t["gpu"],
            "gpus": t["gpus"],
            "domains": _domains_text(t["domain_sizes"]),
            "scaleup_gpus": t["scaleup_gpus"],
            "intra_allreduce_B_s": _scientific(t["intra_bytes_per_s"]),
            "inter_allreduce_B_s": _scientific(t["inter_bytes_per_s"]),
            "intra_hop_latency_us": None if t["intra_hop_latency_s"] is None else t["intra_hop_latency_s"] * 1e6,
            "inter_hop_latency_us": None if t["inter_hop_latency_s"] is None else t["inter_hop_latency_s"] * 1e6,
            "intra_hops": t["intra_hops"],
            "inter_hops": t["inter_hops"],
        }
        for t in summary["gpu_types"]
    ]
    lines += ["per GPU type (what effective_gpu sets; '-' = one domain: the catalog's value applies):"]
    lines.append(report.frame_to_table(pd.DataFrame(rows)))
    return "\n".join(lines)


def run_show(args: argparse.Namespace) -> int:
    from roofline_opt import report, topology

    cluster = topology.load_cluster(args.file, known_gpu_names())
    summary = cluster_summary(cluster, args.file)
    print(report.to_json_object(summary) if args.json else _summary_text(summary))
    return 0


def _layout(cluster: nx.Graph) -> dict[str, tuple[float, float]]:
    """Node positions: a seeded spring layout, or shells by node kind for large graphs."""
    import networkx as nx

    if cluster.number_of_nodes() <= SPRING_LAYOUT_MAX_NODES:
        return nx.spring_layout(cluster, seed=0)
    shells = [[n for n, k in cluster.nodes(data="kind") if k == kind] for kind in ("switch", "gpu", "host")]
    return nx.shell_layout(cluster, [s for s in shells if s])


def _figure(cluster: nx.Graph) -> Any:
    """A matplotlib Figure (Agg canvas, no pyplot state) with GPUs colored by type and edges by kind."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.collections import LineCollection
    from matplotlib.figure import Figure

    from roofline_opt import topology

    pos = _layout(cluster)
    fig = Figure(figsize=(10, 8))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    by_kind: dict[str, list[tuple[Any, float]]] = {}
    for u, v, attrs in cluster.edges(data=True):
        by_kind.setdefault(attrs["kind"], []).append(((pos[u], pos[v]), attrs[topology.BANDWIDTH]))
    for kind, edges in by_kind.items():
        widths = [0.5 + 0.4 * math.log2(1.0 + bw / 10.0) for _, bw in edges]
        label = f"{kind} link"
        ax.add_collection(
            LineCollection([seg for seg, _ in edges], colors=EDGE_COLORS[kind], linewidths=widths, label=label)
        )
    for i, name in enumerate(topology.gpu_counts(cluster)):
        xy = [pos[g] for g in topology.gpu_ids(cluster, name)]
        ax.scatter(*zip(*xy, strict=True), s=60, c=f"C{i % 10}", marker="o", zorder=3, label=f"GPU {name}")
    for kind, (marker, color) in NODE_STYLES.items():
        xy = [pos[n] for n, k in cluster.nodes(data="kind") if k == kind]
        if xy:
            ax.scatter(*zip(*xy, strict=True), s=50, c=color, marker=marker, zorder=2, label=kind)
    ax.set_title(cluster.graph.get("name", "") or "cluster")
    ax.legend(loc="upper left", fontsize="small", framealpha=0.8)
    ax.set_axis_off()
    ax.autoscale_view()
    return fig


def run_draw(args: argparse.Namespace) -> int:
    from roofline_opt import files, topology

    cluster = topology.load_cluster(args.file, known_gpu_names())
    files.check_destination(args.out, "--out", files.plot_formats())
    files.save_figure_atomic(_figure(cluster), args.out, field="--out")
    return 0


def run_build(args: argparse.Namespace) -> int:

    from roofline_opt import files, topology

    spec = args.spec
    files.check_destination(args.out, "--out", inputs=(spec,))
    if Path(spec).is_file():
        cluster = topology.load_cluster(spec, known_gpu_names())
    elif spec.lstrip().startswith("{"):
        data = files.load_yaml(spec, "SPEC")
        cluster = topology.validate_cluster(topology.from_spec(data, "SPEC"), known_gpu_names(), "SPEC")
    else:
        msg = (
            f"must be a cluster file or an inline YAML mapping like '{{nodes: 2, node_type: hgx-h100}}'. Got {spec!r}."
        )
        raise InvalidInput("SPEC", msg)
    topology.save_cluster(cluster, args.out, field="--out")
    counts = ", ".join(f"{n} x {name}" for name, n in topology.gpu_counts(cluster).items())
    print(f"wrote {args.out}: {cluster.number_of_nodes()} nodes ({counts}), {cluster.number_of_edges()} links")
    return 0


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    """Register ``cluster`` with its sub-commands ``show``, ``draw`` and ``build``."""
    cluster = subparsers.add_parser(
        "cluster",
        help="inspect, draw and build cluster topology graphs",
        description="Cluster topologies: GraphML, node-link JSON or compact YAML (README section Clusters).",
    )
    sub = cluster.add_subparsers(
        dest="cluster_command", metavar="{show,draw,build}", required=True, parser_class=OneLineParser
    )
    show = sub.add_parser("show", help="domains, GPU counts, link tiers and derived collective figures per GPU type")
    show.add_argument("file", help="cluster file: .graphml, .json (node-link) or .yaml/.yml (compact form)")
    show.add_argument("--json", action="store_true", help="print the summary as JSON")
    show.set_defaults(func=run_show)
    draw = sub.add_parser("draw", help="draw the graph: GPUs colored by type, links by kind")
    draw.add_argument("file", help="cluster file: .graphml, .json (node-link) or .yaml/.yml (compact form)")
    draw.add_argument("--out", required=True, help="image to write (.png, .svg, .pdf)")
    draw.set_defaults(func=run_draw)
    build = sub.add_parser("build", help="expand a compact YAML spec (file or inline) into GraphML or node-link JSON")
    build.add_argument(
        "spec", metavar="SPEC", help="a cluster file, or inline YAML like '{nodes: 4, node_type: hgx-h100}'"
    )
    build.add_argument("--out", required=True, help="file to write: .graphml or .json")
    build.set_defaults(func=run_build)
