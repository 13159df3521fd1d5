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
TIER_COLORS = ("tab:red", "navy", "tab:orange", "darkcyan", "black")
"""Colours of a link kind's second, third, ... bandwidth tier (two InfiniBand tiers must not look alike)."""
MAX_DRAWN_SERVERS = 16
"""Clusters with more servers are drawn aggregated: each server one box-node, its links to the fabric bundled."""
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

    kinds = Counter(attrs.get("kind") for _, attrs in cluster.nodes(data=True))
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


def _cluster_file(text: str) -> str:
    """A cluster file path, or a catalog cluster name or catalog-relative path."""
    from roofline_opt import catalog

    return catalog.cluster_file(text, "FILE")


def run_show(args: argparse.Namespace) -> int:
    from roofline_opt import report, topology

    args.file = _cluster_file(args.file)
    cluster = topology.load_cluster(args.file, known_gpu_names())
    summary = cluster_summary(cluster, args.file)
    print(report.to_json_object(summary) if args.json else _summary_text(summary))
    return 0


def _columns(points: list[tuple[float, float]]) -> tuple[list[float], list[float]]:
    """The x and y columns of (x, y) points, for ``scatter``."""
    return [x for x, _ in points], [y for _, y in points]


def _group_of(node: str) -> str:
    """The server (or rack) a node belongs to: the id's part before the first dot; fabric switches have none."""
    return node.split(".", 1)[0] if "." in node else ""


def _grid_columns(n_gpus: int, has_switch: bool) -> int:
    """Eight GPUs per row behind a switch (HGX-like servers, NVL racks); a square grid for direct-linked GPUs."""
    return min(n_gpus, 8) if has_switch else math.ceil(math.sqrt(n_gpus))


def _layout(cluster: nx.Graph) -> tuple[dict[str, tuple[float, float]], list[tuple[str, float, float, float, float]]]:
    """Node positions grouping GPUs by server (a grid per server; each host beside the GPUs it serves, switches
    beneath; servers side by side) with fabric switches in tiers above, and each server's box (name, x0, y0, x1, y1).
    """
    groups: dict[str, list[str]] = {}
    for node in cluster.nodes:
        groups.setdefault(_group_of(node), []).append(node)
    pos: dict[str, tuple[float, float]] = {}
    boxes = []
    x0 = 0.0
    for name, nodes in groups.items():
        if not name:
            continue
        kinds = {n: cluster.nodes[n]["kind"] for n in nodes}
        gpus = [n for n in nodes if kinds[n] == "gpu"]
        switches = [n for n in nodes if kinds[n] == "switch"]
        cols = _grid_columns(len(gpus), bool(switches)) if gpus else max(1, len(switches))
        rows = math.ceil(len(gpus) / cols) if gpus else 0
        for i, node in enumerate(gpus):
            pos[node] = (x0 + i % cols, -1.2 * (i // cols))
        for node in (n for n in nodes if kinds[n] == "host"):
            near = [pos[g] for g in cluster.neighbors(node) if g in pos] or [(x0, 0.0)]
            pos[node] = (sum(x for x, _ in near) / len(near), min(y for _, y in near) - 0.5)
        bottom = -1.2 * (rows - 1) - (1.4 if switches else 0.8)
        for i, node in enumerate(switches):
            pos[node] = (x0 + (i + 0.5) * (cols - 1) / len(switches), bottom + 0.3)
        boxes.append((name, x0 - 0.5, bottom, x0 + cols - 0.5, 0.5))
        x0 += cols + 1.5
    width = max(x0 - 1.5, 1.0)
    tiers: dict[str, list[str]] = {}
    for node in groups.get("", []):
        tiers.setdefault(node.rstrip("0123456789"), []).append(node)
    for level, nodes in enumerate(tiers.values(), start=1):
        for i, node in enumerate(nodes):
            pos[node] = ((i + 0.5) * width / len(nodes) - 0.5, 1.2 + 1.3 * level)
    return pos, boxes


def _link_style(kind: str, tier: int) -> tuple[str, str]:
    """Colour and line style of a link kind's ``tier``-th bandwidth (0: the fastest)."""
    if tier == 0:
        return EDGE_COLORS[kind], "solid"
    return TIER_COLORS[(tier - 1) % len(TIER_COLORS)], "dashed"


def _aggregated_figure(cluster: nx.Graph) -> Any:
    """A large cluster drawn aggregated: each server one marker (coloured by its GPU type), fabric switches in tiers
    above, the links between a server and a switch bundled into one line whose width grows with their count."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.collections import LineCollection
    from matplotlib.figure import Figure

    from roofline_opt import topology

    servers: dict[str, Counter[str]] = {}
    for node, attrs in cluster.nodes(data=True):
        if _group_of(node):
            servers.setdefault(_group_of(node), Counter())
            if attrs["kind"] == "gpu":
                servers[_group_of(node)][attrs["gpu"]] += 1
    per_row = math.ceil(math.sqrt(len(servers) * 4))
    pos: dict[str, tuple[float, float]] = {name: (i % per_row, -1.0 * (i // per_row)) for i, name in enumerate(servers)}
    tiers: dict[str, list[str]] = {}
    for node in cluster.nodes:
        if not _group_of(node):
            tiers.setdefault(node.rstrip("0123456789"), []).append(node)
    for level, nodes in enumerate(tiers.values(), start=1):
        for i, node in enumerate(nodes):
            pos[node] = ((i + 0.5) * per_row / len(nodes) - 0.5, 1.5 + 2.0 * level)
    # every server's links to one switch join one bundle from the servers' block: one line per switch and tier
    block = "servers"
    pos[block] = ((per_row - 1) / 2, 0.7)
    bundles: Counter[tuple[str, str, str, float]] = Counter()
    for u, v, attrs in cluster.edges(data=True):
        a, b = (block if _group_of(x) else x for x in (u, v))
        if not (a == b == block) and (_group_of(u) != _group_of(v) or not _group_of(u)):
            bundles[(min(a, b), max(a, b), attrs["kind"], attrs[topology.BANDWIDTH])] += 1
    fig = Figure(figsize=(16, 9), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    by_link: dict[tuple[str, float], list[tuple[Any, int]]] = {}
    for (a, b, kind, bandwidth), n in bundles.items():
        by_link.setdefault((kind, bandwidth), []).append(((pos[a], pos[b]), n))
    tiers_seen: Counter[str] = Counter()
    for (kind, bandwidth), items in sorted(by_link.items(), key=lambda kv: -kv[0][1]):
        colour, style = _link_style(kind, tiers_seen[kind])
        tiers_seen[kind] += 1
        links = sum(n for _, n in items)
        label = f"{kind}: {bandwidth:g} GB/s per link ({links} links in {len(items)} bundles)"
        widths = [0.5 + 0.5 * math.log2(1 + n) for _, n in items]
        ax.add_collection(
            LineCollection(
                [seg for seg, _ in items], colors=colour, linewidths=widths, alpha=0.6, linestyles=style, label=label
            )
        )
    types = list(topology.gpu_counts(cluster))
    for i, name in enumerate(types):
        xy = [pos[s] for s, c in servers.items() if c and c.most_common(1)[0][0] == name]
        if xy:
            ax.scatter(
                *_columns(xy), s=90, c=f"C{i % 10}", marker="s", zorder=3, label=f"server of {name} GPUs ({len(xy)})"
            )
    fabric = [pos[n] for nodes in tiers.values() for n in nodes]
    if fabric:
        ax.scatter(*_columns(fabric), s=50, c=NODE_STYLES["switch"][1], marker="D", zorder=3, label="fabric switch")
    counts = ", ".join(f"{n} x {g}" for g, n in topology.gpu_counts(cluster).items())
    name = cluster.graph.get("name", "") or "cluster"
    ax.set_title(
        f"{name}: {len(servers)} servers ({counts}) drawn aggregated:\neach server one square, the links "
        "of all servers to a switch one bundle (width grows with the count)"
    )
    fig.legend(loc="outside right upper", fontsize="small", framealpha=0.8)
    ax.set_axis_off()
    ax.autoscale_view()
    ax.margins(0.03, 0.08)
    return fig


def _figure(cluster: nx.Graph) -> Any:
    """A matplotlib Figure (Agg canvas, no pyplot state): GPUs grouped by server, colored by type; links colored by
    kind with their bandwidth in the legend. More than MAX_DRAWN_SERVERS servers are drawn aggregated."""
    if len({_group_of(n) for n in cluster.nodes} - {""}) > MAX_DRAWN_SERVERS:
        return _aggregated_figure(cluster)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.collections import LineCollection
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    from roofline_opt import topology

    pos, boxes = _layout(cluster)
    xs = [x for x, _ in pos.values()]
    ys = [y for _, y in pos.values()]
    size = (min(22, 6 + 0.55 * (max(xs) - min(xs))), min(12, 3.0 + 0.6 * (max(ys) - min(ys))))
    fig = Figure(figsize=size, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    by_link: dict[tuple[str, float], list[Any]] = {}
    for u, v, attrs in cluster.edges(data=True):
        by_link.setdefault((attrs["kind"], attrs[topology.BANDWIDTH]), []).append((pos[u], pos[v]))
    tiers_seen: Counter[str] = Counter()
    for (kind, bandwidth), segments in sorted(by_link.items(), key=lambda kv: -kv[0][1]):
        width = 0.6 + 0.5 * math.log2(1.0 + bandwidth / 25.0)
        label = f"{kind}: {bandwidth:g} GB/s per link ({len(segments)} links)"
        colour, style = _link_style(kind, tiers_seen[kind])
        tiers_seen[kind] += 1
        ax.add_collection(
            LineCollection(segments, colors=colour, linewidths=width, alpha=0.7, label=label, linestyles=style)
        )
    for name, bx0, by0, bx1, by1 in boxes:
        ax.add_patch(Rectangle((bx0, by0), bx1 - bx0, by1 - by0, fill=False, ls="--", lw=0.8, ec="0.4"))
        counts = Counter(cluster.nodes[n].get("gpu") for n in cluster.nodes if _group_of(n) == name)
        counts.pop(None, None)
        text = ", ".join(f"{c} x {g}" for g, c in counts.items())
        ax.text(bx0, by1 + 0.05, f"{name}: {text}", fontsize=8, va="bottom")
    for i, name in enumerate(topology.gpu_counts(cluster)):
        xy = [pos[g] for g in topology.gpu_ids(cluster, name)]
        ax.scatter(*_columns(xy), s=60, c=f"C{i % 10}", marker="o", zorder=3, label=f"GPU {name}")
    for kind, (marker, color) in NODE_STYLES.items():
        xy = [pos[n] for n, k in cluster.nodes(data="kind") if k == kind]
        if xy:
            ax.scatter(*_columns(xy), s=50, c=color, marker=marker, zorder=2, label=kind)
    ax.set_title((cluster.graph.get("name", "") or "cluster") + ": GPUs grouped by server, fabric switches above")
    fig.legend(loc="outside right upper", fontsize="small", framealpha=0.8)
    ax.set_axis_off()
    ax.autoscale_view()
    ax.margins(0.04, 0.1)
    return fig


def run_draw(args: argparse.Namespace) -> int:
    from roofline_opt import files, topology

    cluster = topology.load_cluster(_cluster_file(args.file), known_gpu_names())
    files.check_destination(args.out, "--out", files.plot_formats())
    files.save_figure_atomic(_figure(cluster), args.out, field="--out")
    counts = ", ".join(f"{n} x {name}" for name, n in topology.gpu_counts(cluster).items())
    print(f"wrote {args.out}: {cluster.graph.get('name') or args.file}, {counts}, {cluster.number_of_edges()} links")
    return 0


def run_build(args: argparse.Namespace) -> int:
    from roofline_opt import files, topology

    spec = args.spec
    inline = topology.is_inline_spec(spec)
    if not inline:
        from roofline_opt import catalog

        spec = catalog.data_file(spec)
    files.check_destination(args.out, "--out", inputs=() if inline else (spec,))
    if inline:
        cluster = topology.load_inline_spec(spec, "SPEC", known_gpu_names())
    elif Path(spec).is_file():
        cluster = topology.load_cluster(spec, known_gpu_names())
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
    from roofline_opt.cli import command_help, helpfmt

    cluster = subparsers.add_parser(
        "cluster",
        help=command_help("cluster"),
        description="Cluster topologies: GraphML, node-link JSON or compact YAML (README section Clusters).",
        epilog=helpfmt.examples("cluster"),
    )
    sub = cluster.add_subparsers(
        dest="cluster_command", metavar="{show,draw,build}", required=True, parser_class=OneLineParser
    )
    show = sub.add_parser(
        "show",
        help="domains, GPU counts, link tiers and derived collective figures per GPU type",
        epilog=helpfmt.examples("cluster show"),
    )
    show.add_argument("file", help="cluster file (.graphml, node-link .json, compact .yaml) or catalog cluster name")
    show.add_argument("--json", action="store_true", help="print the summary as JSON")
    show.set_defaults(func=run_show)
    draw = sub.add_parser(
        "draw",
        help="draw the graph: GPUs grouped by server, links by kind and bandwidth",
        epilog=helpfmt.examples("cluster draw"),
    )
    draw.add_argument("file", help="cluster file (.graphml, node-link .json, compact .yaml) or catalog cluster name")
    draw.add_argument("--out", required=True, help="image to write (.png, .svg, .pdf)")
    draw.set_defaults(func=run_draw)
    build = sub.add_parser(
        "build",
        help="expand a compact YAML spec (file or inline) into GraphML or node-link JSON",
        epilog=helpfmt.examples("cluster build"),
    )
    build.add_argument(
        "spec", metavar="SPEC", help="a cluster file, or inline YAML like '{nodes: 4, node_type: hgx-h100}'"
    )
    build.add_argument("--out", required=True, help="file to write: .graphml or .json")
    build.set_defaults(func=run_build)
