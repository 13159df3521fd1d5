"""The cluster schema: node and link kinds, server types, and validation of any networkx graph against them."""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass

import networkx as nx

from roofline_opt import checks
from roofline_opt.errors import InvalidInput

MAX_CLUSTER_GPUS = 16384
"""Most GPUs a cluster may have (compact form, GraphML or JSON alike): with symmetry classes and the lazy max flow,
deriving a 10,000-GPU pod or torus takes about a second (README, Speed and scale); 16,384 = a 128 x 128 torus or a
2,048-server pod, about a 10 MB GraphML file."""
MAX_CLUSTER_NODES = 4 * MAX_CLUSTER_GPUS
"""Most nodes (GPUs, switches, hosts) a cluster may have."""
MAX_CLUSTER_EDGES = 16 * MAX_CLUSTER_GPUS
"""Most links a cluster may have."""
NODE_KINDS = ("gpu", "switch", "host")


SCALEUP_LINK_KINDS = ("nvlink", "nvswitch", "xgmi")


"""Edge kinds that join GPUs into a scale-up domain (memory-semantic GPU fabrics)."""


LINK_KINDS = (*SCALEUP_LINK_KINDS, "c2c", "pcie", "infiniband", "ethernet")
_NODE_KIND_SET, _LINK_KIND_SET = frozenset(NODE_KINDS), frozenset(LINK_KINDS)


BUILTIN_GPU_NAMES = frozenset({"h100-sxm", "h200", "h800", "a100-80gb", "v100", "b200", "gb200", "mi300x", "mi325x"})


"""GPU names accepted when no catalog names are given."""


FABRICS = ("rail-optimised", "single-switch", "none")


NIC_KINDS = ("infiniband", "ethernet")


BANDWIDTH = "bandwidth_gb_s"
NIC_LINK_KINDS = ("infiniband", "ethernet")
MAX_NIC_GB_S = 200.0
"""A GPU's NIC link above this many GB/s per direction (1.6 Tb/s, twice the fastest NIC shipping) is taken for a
Gb/s figure written where GB/s is meant, and refused with the fix."""


LATENCY = "latency_us"


GPUS_PER_PCIE_SWITCH = 4


_GRAPHML_DEFAULTS = ("node_default", "edge_default")


"""Graph attributes networkx's GraphML reader adds; dropped so that files round-trip."""


@dataclass(frozen=True)
class NodeType:
    """A server (or rack) model: its GPUs, how they are joined inside it, and each GPU's NIC bandwidth.

    scaleup: "nvswitch" (every GPU to one logical switch with ``link_gb_s``), "mesh" (a direct link of ``link_gb_s``
    between every GPU pair) or "pcie" (GPUs behind PCIe switches, ``link_gb_s`` each, no scale-up link).
    Bandwidths are GB/s per direction.
    """

    gpu: str
    gpus: int
    scaleup: str
    link_kind: str
    link_gb_s: float
    nic_gb_s: float
    hosts: int
    host_link_kind: str = "pcie"
    host_link_gb_s: float = 64.0


NODE_TYPES = {
    "hgx-h100": NodeType("h100-sxm", 8, "nvswitch", "nvswitch", 450.0, 50.0, 2),
    "hgx-h200": NodeType("h200", 8, "nvswitch", "nvswitch", 450.0, 50.0, 2),
    "hgx-h800": NodeType("h800", 8, "nvswitch", "nvswitch", 200.0, 50.0, 2),
    "hgx-b200": NodeType("b200", 8, "nvswitch", "nvswitch", 900.0, 50.0, 2),
    "hgx-a100": NodeType("a100-80gb", 8, "nvswitch", "nvswitch", 300.0, 25.0, 2, host_link_gb_s=32.0),
    "hgx-v100": NodeType("v100", 8, "nvswitch", "nvswitch", 150.0, 12.5, 2, host_link_gb_s=16.0),
    "hgx-h100-4gpu": NodeType("h100-sxm", 4, "mesh", "nvlink", 150.0, 50.0, 2),
    "mi300x-8": NodeType("mi300x", 8, "mesh", "xgmi", 64.0, 50.0, 2),
    "mi325x-8": NodeType("mi325x", 8, "mesh", "xgmi", 64.0, 50.0, 2),
    "gb200-nvl72": NodeType("gb200", 72, "nvswitch", "nvswitch", 900.0, 50.0, 36, "c2c", 450.0),
    "pcie-8gpu": NodeType("a100-80gb", 8, "pcie", "pcie", 32.0, 50.0, 1, host_link_gb_s=32.0),
}


"""Server types of the compact YAML: NVLink/NVSwitch figures from hardware_specs.csv, PCIe Gen4 x16 = 32 GB/s."""


@dataclass(frozen=True)
class NodeGroup:
    """``nodes`` servers of type ``node_type``, optionally with another GPU name or NIC bandwidth (GB/s/dir)."""

    node_type: str
    nodes: int = 1
    gpu: str | None = None
    nic_gb_s: float | None = None


@dataclass(frozen=True)
class LinkTier:
    """Edges sharing kind, bandwidth (GB/s per direction) and latency, with how many there are."""

    kind: str
    bandwidth_gb_s: float
    latency_us: float
    count: int


def check_size(graph: nx.Graph, source: str) -> None:
    """Refuse a graph beyond MAX_CLUSTER_NODES nodes, MAX_CLUSTER_EDGES links or MAX_CLUSTER_GPUS GPUs."""
    gpus = sum(1 for _, kind in graph.nodes(data="kind") if kind == "gpu")
    for count, cap, what in (
        (graph.number_of_nodes(), MAX_CLUSTER_NODES, "nodes"),
        (graph.number_of_edges(), MAX_CLUSTER_EDGES, "links"),
        (gpus, MAX_CLUSTER_GPUS, "GPUs"),
    ):
        if count > cap:
            raise InvalidInput(source, f"has {count:,} {what}: at most {cap:,} are allowed")


def validate_cluster(graph: nx.Graph, known_gpus: Collection[str] | None = None, source: str = "cluster") -> nx.Graph:
    """Check the schema and return a normalised copy (undirected, string ids, float attributes).

    Raises InvalidInput naming ``source`` and the offending node, edge or attribute. ``known_gpus`` defaults to
    BUILTIN_GPU_NAMES.
    """
    known = BUILTIN_GPU_NAMES if known_gpus is None else frozenset(known_gpus)
    check_size(graph, source)
    if graph.is_multigraph():
        for u, v in graph.edges():
            if graph.number_of_edges(u, v) > 1:
                msg = f"has parallel edges {u!r}-{v!r}: merge them into one edge carrying their summed {BANDWIDTH}"
                raise InvalidInput(source, msg)
    cluster: nx.Graph = nx.Graph(graph)
    cluster.graph = {k: v for k, v in graph.graph.items() if k not in _GRAPHML_DEFAULTS}
    if not all(isinstance(n, str) for n in cluster):
        cluster = nx.relabel_nodes(cluster, {n: str(n) for n in cluster}, copy=True)
    if cluster.number_of_nodes() != graph.number_of_nodes():
        raise InvalidInput(source, "has node ids that coincide once written as text (like 1 and '1')")
    if cluster.number_of_nodes() == 0:
        raise InvalidInput(source, "has no nodes")
    gpu_names = sorted(known)
    for node, attrs in cluster.nodes(data=True):
        if not _normal_node(attrs, known):
            _normalise_node(source, node, attrs, gpu_names)
    if not any(kind == "gpu" for _, kind in cluster.nodes(data="kind")):
        raise InvalidInput(source, "has no GPUs: no node has kind 'gpu'")
    for u, v, attrs in cluster.edges(data=True):
        nic = attrs.get("kind") in NIC_LINK_KINDS and "gpu" in (cluster.nodes[u]["kind"], cluster.nodes[v]["kind"])
        if u == v or not _normal_edge(attrs) or (nic and attrs[BANDWIDTH] > MAX_NIC_GB_S):
            _normalise_edge(source, u, v, attrs, nic)
    if not nx.is_connected(cluster):
        parts = list(nx.connected_components(cluster))
        apart = f"{next(iter(parts[1]))!r} cannot reach {next(iter(parts[0]))!r}"
        msg = f"is disconnected: {len(parts)} parts, e.g. {apart}"
        raise InvalidInput(source, msg)
    return cluster


def _normal_node(attrs: dict, known: Collection[str]) -> bool:
    """Whether a node's attributes are already in normal form (the fast path of validation)."""
    kind = attrs.get("kind")
    return kind in _NODE_KIND_SET and (kind != "gpu" or attrs.get("gpu") in known)


def _normalise_node(source: str, node: str, attrs: dict, gpu_names: list[str]) -> None:
    """Normalise a node's attributes in place or raise InvalidInput naming the field."""
    where = f"{source}: node {node!r}"
    if "kind" not in attrs:
        raise InvalidInput(f"{where} kind", f"is missing: give one of {', '.join(NODE_KINDS)}")
    attrs["kind"] = checks.choice(f"{where} kind", attrs["kind"], NODE_KINDS)
    if attrs["kind"] == "gpu":
        if "gpu" not in attrs:
            raise InvalidInput(f"{where} gpu", "is missing: a gpu node names its accelerator, like h100-sxm")
        attrs["gpu"] = checks.choice(f"{where} gpu", attrs["gpu"], gpu_names)


def _normal_edge(attrs: dict) -> bool:
    """Whether an edge's attributes are already in normal form: a known kind and finite float figures."""
    bandwidth, latency = attrs.get(BANDWIDTH), attrs.get(LATENCY)
    return (
        attrs.get("kind") in _LINK_KIND_SET
        and type(bandwidth) is float
        and type(latency) is float
        and 0 < bandwidth < math.inf
        and 0 <= latency < math.inf
    )


def _normalise_edge(source: str, u: str, v: str, attrs: dict, nic: bool) -> None:
    """Normalise an edge's attributes in place or raise InvalidInput naming the edge and field; a GPU's NIC link
    (``nic``) above MAX_NIC_GB_S per direction is refused as a Gb/s slip."""
    where = f"{source}: edge {u!r}-{v!r}"
    if u == v:
        raise InvalidInput(where, "joins a node to itself")
    for key in ("kind", BANDWIDTH, LATENCY):
        if key not in attrs:
            raise InvalidInput(f"{where} {key}", "is missing")
    attrs["kind"] = checks.choice(f"{where} kind", attrs["kind"], LINK_KINDS)
    attrs[BANDWIDTH] = checks.bandwidth_gb_s(f"{where} {BANDWIDTH}", attrs[BANDWIDTH], MAX_NIC_GB_S if nic else None)
    attrs[LATENCY] = checks.positive_float(f"{where} {LATENCY}", attrs[LATENCY], allow_zero=True)


def gpu_ids(cluster: nx.Graph, gpu_type: str | None = None) -> tuple[str, ...]:
    """GPU node ids (of ``gpu_type`` if given) in graph order."""
    return tuple(n for n, a in cluster.nodes(data=True) if a["kind"] == "gpu" and gpu_type in (None, a["gpu"]))


def gpu_counts(cluster: nx.Graph) -> dict[str, int]:
    """GPUs per type, types in order of first appearance."""
    counts: dict[str, int] = {}
    for g in gpu_ids(cluster):
        name = cluster.nodes[g]["gpu"]
        counts[name] = counts.get(name, 0) + 1
    return counts


def link_tiers(cluster: nx.Graph) -> list[LinkTier]:
    """Edges grouped by (kind, bandwidth, latency), fastest first."""
    counts: dict[tuple[str, float, float], int] = {}
    for _, _, a in cluster.edges(data=True):
        key = (a["kind"], a[BANDWIDTH], a[LATENCY])
        counts[key] = counts.get(key, 0) + 1
    ordered = sorted(counts.items(), key=lambda item: (-item[0][1], item[0][0], item[0][2]))
    return [LinkTier(kind, bw, lat, n) for (kind, bw, lat), n in ordered]
