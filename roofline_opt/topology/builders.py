"""Cluster graphs built from server types: one server, rail-optimised pods, tori, and the compact YAML form."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import networkx as nx

from roofline_opt import checks
from roofline_opt.errors import InvalidInput
from roofline_opt.topology.schema import (
    FABRICS,
    GPUS_PER_PCIE_SWITCH,
    LATENCY,
    LINK_KINDS,
    MAX_CLUSTER_GPUS,
    MAX_NIC_GB_S,
    NIC_KINDS,
    NODE_TYPES,
    NodeGroup,
    NodeType,
)


def _link(graph: nx.Graph, u: str, v: str, kind: str, bandwidth_gb_s: float, latency_us: float = 0.0) -> None:
    graph.add_edge(u, v, kind=kind, bandwidth_gb_s=float(bandwidth_gb_s), latency_us=float(latency_us))


def add_server(graph: nx.Graph, node_type: NodeType, prefix: str, gpu: str | None = None) -> list[str]:
    """Add one server's GPUs, switches and hosts (ids ``<prefix>.gpu<i>`` ...) to ``graph``; returns its GPU ids."""
    gpu_ids = [f"{prefix}.gpu{i}" for i in range(node_type.gpus)]
    hosts = [f"{prefix}.cpu{i}" for i in range(node_type.hosts)]
    graph.add_nodes_from(gpu_ids, kind="gpu", gpu=gpu or node_type.gpu)
    graph.add_nodes_from(hosts, kind="host")
    if node_type.scaleup == "pcie":
        switches = [f"{prefix}.pcie{j}" for j in range(math.ceil(node_type.gpus / GPUS_PER_PCIE_SWITCH))]
        graph.add_nodes_from(switches, kind="switch")
        for i, g in enumerate(gpu_ids):
            _link(graph, g, switches[i // GPUS_PER_PCIE_SWITCH], node_type.link_kind, node_type.link_gb_s)
        for j, s in enumerate(switches):
            _link(graph, s, hosts[j % len(hosts)], "pcie", node_type.host_link_gb_s)
        return gpu_ids
    if node_type.scaleup == "nvswitch":
        switch = f"{prefix}.nvswitch"
        graph.add_node(switch, kind="switch")
        for g in gpu_ids:
            _link(graph, g, switch, node_type.link_kind, node_type.link_gb_s)
    else:
        for a, b in itertools.combinations(gpu_ids, 2):
            _link(graph, a, b, node_type.link_kind, node_type.link_gb_s)
    for i, g in enumerate(gpu_ids):
        _link(graph, g, hosts[i * len(hosts) // len(gpu_ids)], node_type.host_link_kind, node_type.host_link_gb_s)
    return gpu_ids


def single_node(node_type: str = "hgx-h100", gpu: str | None = None) -> nx.Graph:
    """One server (HGX H100/H200/B200, GB200 NVL72 rack, PCIe box, ...) without a scale-out fabric."""
    return pod([NodeGroup(node_type, 1, gpu)], fabric="none", name=node_type)


def pod(
    groups: Sequence[NodeGroup],
    fabric: str | None = None,
    spines: int = 2,
    nic_kind: str = "infiniband",
    name: str = "",
) -> nx.Graph:
    """Servers of one or several types joined by a scale-out fabric (rail-optimised leaf/spine by default)."""
    graph: nx.Graph = nx.Graph()
    nics: list[tuple[int, str, float]] = []  # (GPU's index in its server, GPU id, NIC GB/s per direction)
    server = 0
    for group in groups:
        node_type = NODE_TYPES[group.node_type]
        nic_gb_s = node_type.nic_gb_s if group.nic_gb_s is None else group.nic_gb_s
        for _ in range(group.nodes):
            gpus = add_server(graph, node_type, f"n{server}", group.gpu)
            nics += [(rank, g, nic_gb_s) for rank, g in enumerate(gpus)]
            server += 1
    fabric = fabric or ("rail-optimised" if server > 1 else "none")
    if fabric == "single-switch":
        graph.add_node("switch0", kind="switch")
        for _, g, nic_gb_s in nics:
            _link(graph, g, "switch0", nic_kind, nic_gb_s)
    elif fabric == "rail-optimised":
        rail_gb_s: dict[int, float] = {}
        for rank, g, nic_gb_s in nics:
            graph.add_node(f"rail{rank}", kind="switch")
            _link(graph, g, f"rail{rank}", nic_kind, nic_gb_s)
            rail_gb_s[rank] = rail_gb_s.get(rank, 0.0) + nic_gb_s
        for s in range(spines if len(rail_gb_s) > 1 else 0):
            graph.add_node(f"spine{s}", kind="switch")
            for r in sorted(rail_gb_s):
                _link(graph, f"rail{r}", f"spine{s}", nic_kind, rail_gb_s[r] / spines)
    graph.graph["name"] = name or "+".join(f"{g.nodes}x-{g.node_type}" for g in groups)
    return graph


def torus(
    dims: Sequence[int],
    gpu: str = "h100-sxm",
    link_gb_s: float = 100.0,
    link_kind: str = "nvlink",
    latency_us: float = 0.0,
    name: str = "",
) -> nx.Graph:
    """GPUs on an n-D torus (wrap-around grid), each joined to its neighbours by a direct link."""
    graph: nx.Graph = nx.Graph()
    coords = list(itertools.product(*(range(d) for d in dims)))
    ids = {c: "t" + "".join(f".{i}" for i in c) for c in coords}
    graph.add_nodes_from(ids.values(), kind="gpu", gpu=gpu)
    for c in coords:
        for axis, size in enumerate(dims):
            if size > 1:
                neighbour = c[:axis] + ((c[axis] + 1) % size,) + c[axis + 1 :]
                _link(graph, ids[c], ids[neighbour], link_kind, link_gb_s, latency_us)
    graph.graph["name"] = name or "torus-" + "x".join(str(d) for d in dims)
    return graph


MAX_SPINES = 64
"""Most spine switches of a rail-optimised fabric in the compact form."""


def _check_size(field: str, gpus: int) -> None:
    """Refuse a compact form describing more than MAX_CLUSTER_GPUS GPUs before building its graph."""
    if gpus > MAX_CLUSTER_GPUS:
        raise InvalidInput(field, f"describes {gpus:,} GPUs: at most {MAX_CLUSTER_GPUS:,} are allowed")


_SERVER_KEYS = ("nodes", "node_type", "gpu", "nic_gb_s")


_FABRIC_KEYS = ("groups", "fabric", "spines", "nic_kind")


_TORUS_KEYS = ("torus", "gpu", "link_gb_s", "link_kind")


SPEC_KEYS = tuple(dict.fromkeys(("name", *_SERVER_KEYS, *_FABRIC_KEYS, *_TORUS_KEYS, "latency_us")))


def _mapping(field: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        msg = f"must be a mapping of keys to values. Got {type(value).__name__} instead."
        raise InvalidInput(field, msg)
    return value


def _group(where: str, spec: Mapping[str, Any]) -> NodeGroup:
    """One NodeGroup from its compact-YAML keys."""
    unknown = [k for k in spec if k not in _SERVER_KEYS]
    if unknown:
        raise InvalidInput(f"{where}{unknown[0]}", f"is not a key of a server group; use {', '.join(_SERVER_KEYS)}")
    if "node_type" not in spec:
        raise InvalidInput(f"{where}node_type", f"is required: one of {', '.join(NODE_TYPES)}")
    gpu = spec.get("gpu")
    if gpu is not None and (not isinstance(gpu, str) or not gpu.strip()):
        raise InvalidInput(f"{where}gpu", f"must be a GPU name. Got {checks.shown(gpu)} instead.")
    nic = spec.get("nic_gb_s")
    return NodeGroup(
        node_type=checks.choice(f"{where}node_type", spec["node_type"], NODE_TYPES),
        nodes=checks.positive_int(f"{where}nodes", spec.get("nodes", 1), maximum=MAX_CLUSTER_GPUS),
        gpu=gpu,
        nic_gb_s=None if nic is None else checks.bandwidth_gb_s(f"{where}nic_gb_s", nic, MAX_NIC_GB_S),
    )


def from_spec(spec: Any, source: str = "spec") -> nx.Graph:
    """Build a cluster from the compact YAML form (a mapping; see the module docstring). Errors name ``source``."""
    spec = _mapping(source, spec)
    unknown = [k for k in spec if k not in SPEC_KEYS]
    if unknown:
        raise InvalidInput(f"{source}: {unknown[0]}", f"is not a cluster key; use {', '.join(SPEC_KEYS)}")
    name = str(spec.get("name", ""))
    if "torus" in spec:
        clash = [k for k in spec if k not in (*_TORUS_KEYS, "name", "latency_us")]
        if clash:
            raise InvalidInput(f"{source}: {clash[0]}", "cannot be combined with torus")
        dims = spec["torus"]
        if not isinstance(dims, list) or not dims:
            msg = f"must be a list of sizes like [4, 4]. Got {checks.shown(dims)} instead."
            raise InvalidInput(f"{source}: torus", msg)
        sizes = [checks.positive_int(f"{source}: torus", d, maximum=MAX_CLUSTER_GPUS) for d in dims]
        _check_size(f"{source}: torus", math.prod(sizes))
        graph = torus(
            sizes,
            gpu=str(spec.get("gpu", "h100-sxm")),
            link_gb_s=checks.bandwidth_gb_s(f"{source}: link_gb_s", spec.get("link_gb_s", 100.0)),
            link_kind=checks.choice(f"{source}: link_kind", spec.get("link_kind", "nvlink"), LINK_KINDS),
            name=name,
        )
    else:
        if "groups" in spec:
            clash = [k for k in spec if k in _SERVER_KEYS]
            if clash:
                raise InvalidInput(f"{source}: {clash[0]}", "goes inside each entry of groups, not beside it")
            entries = spec["groups"]
            if not isinstance(entries, list) or not entries:
                raise InvalidInput(f"{source}: groups", "must be a non-empty list of server groups")
            groups = [
                _group(f"{source}: groups[{i}].", _mapping(f"{source}: groups[{i}]", g)) for i, g in enumerate(entries)
            ]
        else:
            groups = [_group(f"{source}: ", {k: spec[k] for k in _SERVER_KEYS if k in spec})]
        _check_size(source, sum(g.nodes * NODE_TYPES[g.node_type].gpus for g in groups))
        fabric = spec.get("fabric")
        graph = pod(
            groups,
            fabric=None if fabric is None else checks.choice(f"{source}: fabric", fabric, FABRICS),
            spines=checks.positive_int(f"{source}: spines", spec.get("spines", 2), maximum=MAX_SPINES),
            nic_kind=checks.choice(f"{source}: nic_kind", spec.get("nic_kind", "infiniband"), NIC_KINDS),
            name=name,
        )
    latencies = _mapping(f"{source}: latency_us", spec.get("latency_us", {}))
    for kind, value in latencies.items():
        checks.choice(f"{source}: latency_us", kind, LINK_KINDS)
        latency_us = checks.positive_float(f"{source}: latency_us.{kind}", value, allow_zero=True)
        for _, _, attrs in graph.edges(data=True):
            if attrs["kind"] == kind:
                attrs[LATENCY] = latency_us
    return graph
