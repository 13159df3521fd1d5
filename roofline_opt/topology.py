"""Cluster topologies as networkx graphs: files, builders, scale-up domains, collective figures and placements.

Schema. A cluster is an undirected ``networkx.Graph`` whose node ids are strings.

- Node attribute ``kind``: ``gpu``, ``switch`` (NVSwitch, PCIe switch, InfiniBand/Ethernet leaf or spine) or ``host``
  (a CPU). GPU nodes also carry ``gpu``, an accelerator name of the catalog (``h100-sxm``, ``h200``, ``a100-80gb``,
  ``v100``, ``b200``, ``gb200``, ``mi300x``, ``mi325x``, ...).
- Edge attributes: ``bandwidth_gb_s`` (> 0, GB/s in each direction: a full-duplex link moves that much each way at
  once), ``latency_us`` (>= 0, microseconds a message pays on this hop *on top of* NCCL's tuning constants, which
  already charge the ordinary NVLink and NIC hops: 0 for standard fabrics) and ``kind`` (``nvlink``, ``nvswitch``,
  ``xgmi`` = AMD Infinity Fabric, ``c2c`` = NVLink-C2C to a Grace CPU, ``pcie``, ``infiniband``, ``ethernet``).
- A bundle of parallel links (18 NVLinks of an H100, the planes of an NVSwitch tray) is one edge carrying their summed
  bandwidth to one logical switch; parallel edges between two nodes are rejected.
- Graph attribute ``name`` (optional). Files: GraphML (``.graphml``), networkx node-link JSON (``.json``, edges under
  ``"edges"`` or the older ``"links"``) and the compact YAML below (``.yaml``/``.yml``, read only).

Compact YAML: servers of a known type (``NODE_TYPES``) on a scale-out fabric, or a torus of GPUs::

    name: pod-4x-hgx-h100
    nodes: 4                 # servers (racks for gb200-nvl72) of one type ...
    node_type: hgx-h100
    gpu: h100-sxm            # optional: override the type's GPU name
    nic_gb_s: 50             # optional: per-GPU NIC bandwidth per direction (the type's default otherwise)
    # ... or several kinds of server: groups: [{node_type: hgx-h100, nodes: 2}, {node_type: hgx-a100, nodes: 2}]
    fabric: rail-optimised   # rail-optimised (default for > 1 server) | single-switch | none (default for 1 server)
    spines: 2                # rail-optimised: spine switches joining the rail leaves (non-blocking uplinks)
    nic_kind: infiniband     # or ethernet
    latency_us: {infiniband: 1.0}   # optional: per-hop latency by edge kind (0 everywhere otherwise)

    torus: [4, 4]            # a 2-D (or n-D) torus of GPUs with direct links; excludes the keys above but name
    gpu: h100-sxm            # and latency_us
    link_gb_s: 100
    link_kind: nvlink

Rail-optimised: GPU i of every server has its own NIC link to leaf ``rail<i>``; each leaf has one uplink to every spine
carrying (sum of its NIC bandwidth) / spines, so the fabric is non-blocking. Within a server, NVSwitch types join
every GPU to one logical switch, mesh types (4-GPU HGX, AMD platforms) join every GPU pair directly, and the PCIe type
puts four GPUs behind each PCIe switch under one host CPU; NVLink servers also link each GPU to a host by PCIe (C2C on
GB200).

Derivation (what ``effective_gpu`` and ``collective_figures`` compute):

- A *scale-up domain* is a connected group of GPUs in the subgraph of scale-up links (edge kind nvlink, nvswitch or
  xgmi, whatever their bandwidth) through GPU and switch nodes only (never a host). PCIe and NICs never make a domain,
  so a PCIe-only server is eight domains of one GPU. For one GPU type a domain is the GPUs of that type in such a
  component.
- Bandwidth is a minimum cut, in GB/s per direction: with a single path it is the narrowest link on it, with parallel
  paths (a mesh, a torus) it counts them all. Intra-domain: the smallest cut between two GPUs of the same domain within
  the scale-up subgraph (H100 HGX: 450; MI300X mesh: 7 x 64 = 448). Inter-domain: for each domain, the max flow from its
  GPUs to the group's GPUs in other domains divided by its GPU count, then the smallest over domains (4 x HGX H100 with
  400G NICs: 8 x 50 / 8 = 50). Contention between different domains on shared uplinks is not modelled.
- Latency: the least-latency path between two GPUs (in the scale-up subgraph for a pair in one domain, in the whole
  graph across domains); the worst pair's sum of ``latency_us`` and its hop count are reported.
- With no domain of two or more GPUs the intra figures equal the inter ones (collectives among one-GPU domains use the
  same links). A figure the graph cannot give (no pair of GPUs across domains: a single server) is None, and
  ``effective_gpu`` keeps the base GpuSpec's value.
- ``effective_gpu`` maps the figures onto the GpuSpec fields the evaluator already uses: scaleup_gpus = largest domain
  of that type, intra/inter_bytes_per_s = half the per-direction bandwidth (450 GB/s -> 9e11/4, 50 GB/s -> 5e10/2, the
  notebook's rule), intra/inter_hop_latency_s = the worst path's latency. With several domain sizes of one type the
  size is the largest, the bandwidth the smallest and the latency the largest over domains; ``max_instances`` and
  ``place`` keep per-domain sizes.

Placement (``max_instances``, ``place``): an instance is ``pp`` tensor-parallel groups of ``tp`` GPUs of one type. If
``tp`` fits in the largest domain, each TP group lies inside one domain (domains too small for it stay unused, as the
evaluator prices such a group at intra-domain bandwidth); otherwise a TP group takes whole domains, largest first, until
it has ``tp`` GPUs, and the rest of its last domain stays idle. Pipeline stages are any TP groups (they may sit in
different domains; the evaluator prices stage-to-stage sends at inter-domain bandwidth). Packing is greedy: domains by
size (largest first, then graph order), GPUs in graph order, consecutive groups forming one replica's stages.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
import xml.etree.ElementTree as ET
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import yaml

from roofline_opt import checks
from roofline_opt.errors import Infeasible, InvalidInput
from roofline_opt.physics.specs import GpuSpec
from roofline_opt.report import write_text_atomic

NODE_KINDS = ("gpu", "switch", "host")
SCALEUP_LINK_KINDS = ("nvlink", "nvswitch", "xgmi")
"""Edge kinds that join GPUs into a scale-up domain (memory-semantic GPU fabrics)."""
LINK_KINDS = (*SCALEUP_LINK_KINDS, "c2c", "pcie", "infiniband", "ethernet")
BUILTIN_GPU_NAMES = frozenset({"h100-sxm", "h200", "h800", "a100-80gb", "v100", "b200", "gb200", "mi300x", "mi325x"})
"""GPU names accepted when no catalog names are given."""
FABRICS = ("rail-optimised", "single-switch", "none")
NIC_KINDS = ("infiniband", "ethernet")
BANDWIDTH = "bandwidth_gb_s"
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


@dataclass(frozen=True)
class CollectiveFigures:
    """What the paths between a group of GPUs allow a collective among them (see the module docstring).

    Bandwidths are per GPU per direction in bytes/s (GpuSpec takes half); latencies are the worst pair's path in
    seconds, hops its edge count. None: the graph has no such pair (e.g. inter-domain figures of one server).
    """

    n_gpus: int
    domain_sizes: tuple[int, ...]
    intra_link_bytes_per_s: float | None
    inter_link_bytes_per_s: float | None
    intra_latency_s: float | None
    inter_latency_s: float | None
    intra_hops: int | None
    inter_hops: int | None

    @property
    def scaleup_gpus(self) -> int:
        return self.domain_sizes[0]


@dataclass(frozen=True)
class Placement:
    """GPU node ids of placed instances: ``replicas[r][s]`` is the TP group of pipeline stage ``s`` of replica ``r``."""

    gpu_type: str
    tp: int
    pp: int
    replicas: tuple[tuple[tuple[str, ...], ...], ...]

    def to_dict(self) -> dict[str, Any]:
        """Plain lists and numbers, ready for ``json.dumps`` and a launcher."""
        return {
            "gpu_type": self.gpu_type,
            "tp": self.tp,
            "pp": self.pp,
            "replicas": [[list(group) for group in stages] for stages in self.replicas],
        }


# ----------------------------------------------------------------------------------------------- builders


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
    graph = nx.Graph()
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
        rails = sorted({rank for rank, _, _ in nics})
        for rank, g, nic_gb_s in nics:
            graph.add_node(f"rail{rank}", kind="switch")
            _link(graph, g, f"rail{rank}", nic_kind, nic_gb_s)
        for s in range(spines if len(rails) > 1 else 0):
            graph.add_node(f"spine{s}", kind="switch")
            for r in rails:
                uplink_gb_s = sum(bw for rank, _, bw in nics if rank == r) / spines
                _link(graph, f"rail{r}", f"spine{s}", nic_kind, uplink_gb_s)
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
    graph = nx.Graph()
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
        raise InvalidInput(f"{where}gpu", f"must be a GPU name. Got {gpu!r} instead.")
    nic = spec.get("nic_gb_s")
    return NodeGroup(
        node_type=checks.choice(f"{where}node_type", spec["node_type"], NODE_TYPES),
        nodes=checks.positive_int(f"{where}nodes", spec.get("nodes", 1)),
        gpu=gpu,
        nic_gb_s=None if nic is None else checks.positive_float(f"{where}nic_gb_s", nic),
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
            raise InvalidInput(f"{source}: torus", f"must be a list of sizes like [4, 4]. Got {dims!r} instead.")
        graph = torus(
            [checks.positive_int(f"{source}: torus", d) for d in dims],
            gpu=str(spec.get("gpu", "h100-sxm")),
            link_gb_s=checks.positive_float(f"{source}: link_gb_s", spec.get("link_gb_s", 100.0)),
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
        fabric = spec.get("fabric")
        graph = pod(
            groups,
            fabric=None if fabric is None else checks.choice(f"{source}: fabric", fabric, FABRICS),
            spines=checks.positive_int(f"{source}: spines", spec.get("spines", 2)),
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


# ----------------------------------------------------------------------------------------------- files


def _read_graphml(text: str, source: str) -> nx.Graph:
    try:
        return nx.parse_graphml(text)
    except (ET.ParseError, nx.NetworkXError, ValueError, KeyError, TypeError) as exc:
        raise InvalidInput(source, f"is not valid GraphML: {_one_line(exc)}") from exc


def _read_node_link(text: str, source: str) -> nx.Graph:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(source, f"is not valid JSON: {_one_line(exc)}") from exc
    if not isinstance(data, dict) or "nodes" not in data:
        raise InvalidInput(source, "must be networkx node-link JSON: an object with 'nodes' and 'edges'")
    edges = "links" if "links" in data and "edges" not in data else "edges"
    try:
        return nx.node_link_graph(data, directed=False, multigraph=False, edges=edges)
    except (nx.NetworkXError, ValueError, KeyError, TypeError) as exc:
        raise InvalidInput(source, f"is not valid node-link JSON: {_one_line(exc)}") from exc


def _read_spec(text: str, source: str) -> nx.Graph:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidInput(source, f"is not valid YAML: {_one_line(exc)}") from exc
    return from_spec(data, source)


_READERS: dict[str, Callable[[str, str], nx.Graph]] = {
    ".graphml": _read_graphml,
    ".json": _read_node_link,
    ".yaml": _read_spec,
    ".yml": _read_spec,
}


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def load_cluster(path: str | os.PathLike[str], known_gpus: Collection[str] | None = None) -> nx.Graph:
    """Read and validate a cluster file (.graphml, .json node-link, .yaml/.yml compact form)."""
    path = Path(path)
    source = str(path)
    reader = _READERS.get(path.suffix.lower())
    if reader is None:
        msg = f"must end in {', '.join(_READERS)}. Got {path.suffix or 'no extension'!r} instead."
        raise InvalidInput(source, msg)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(source, f"cannot be read: {_one_line(exc)}") from exc
    if not text.strip():
        raise InvalidInput(source, "is empty")
    return validate_cluster(reader(text, source), known_gpus, source)


def _graphml_text(cluster: nx.Graph) -> str:
    return "<?xml version='1.0' encoding='utf-8'?>\n" + "\n".join(nx.generate_graphml(cluster)) + "\n"


def _node_link_text(cluster: nx.Graph) -> str:
    return json.dumps(nx.node_link_data(cluster, edges="edges"), indent=1) + "\n"


_WRITERS: dict[str, Callable[[nx.Graph], str]] = {".graphml": _graphml_text, ".json": _node_link_text}


def save_cluster(cluster: nx.Graph, path: str | os.PathLike[str], field: str = "output") -> None:
    """Write the cluster to ``path`` as GraphML (.graphml) or node-link JSON (.json), atomically."""
    writer = _WRITERS.get(Path(path).suffix.lower())
    if writer is None:
        msg = f"must end in .graphml or .json (YAML is a hand-written input form). Got {str(path)!r} instead."
        raise InvalidInput(field, msg)
    write_text_atomic(path, writer(cluster), field)


def validate_cluster(graph: nx.Graph, known_gpus: Collection[str] | None = None, source: str = "cluster") -> nx.Graph:
    """Check the schema and return a normalised copy (undirected, string ids, float attributes).

    Raises InvalidInput naming ``source`` and the offending node, edge or attribute. ``known_gpus`` defaults to
    BUILTIN_GPU_NAMES.
    """
    known = BUILTIN_GPU_NAMES if known_gpus is None else frozenset(known_gpus)
    if graph.is_multigraph():
        for u, v in graph.edges():
            if graph.number_of_edges(u, v) > 1:
                msg = f"has parallel edges {u!r}-{v!r}: merge them into one edge carrying their summed {BANDWIDTH}"
                raise InvalidInput(source, msg)
    cluster = nx.Graph(graph)
    cluster.graph = {k: v for k, v in graph.graph.items() if k not in _GRAPHML_DEFAULTS}
    cluster = nx.relabel_nodes(cluster, {n: str(n) for n in cluster}, copy=True)
    if cluster.number_of_nodes() != graph.number_of_nodes():
        raise InvalidInput(source, "has node ids that coincide once written as text (like 1 and '1')")
    if cluster.number_of_nodes() == 0:
        raise InvalidInput(source, "has no nodes")
    for node, attrs in cluster.nodes(data=True):
        where = f"{source}: node {node!r}"
        if "kind" not in attrs:
            raise InvalidInput(f"{where} kind", f"is missing: give one of {', '.join(NODE_KINDS)}")
        attrs["kind"] = checks.choice(f"{where} kind", attrs["kind"], NODE_KINDS)
        if attrs["kind"] == "gpu":
            if "gpu" not in attrs:
                raise InvalidInput(f"{where} gpu", "is missing: a gpu node names its accelerator, like h100-sxm")
            attrs["gpu"] = checks.choice(f"{where} gpu", attrs["gpu"], sorted(known))
    if not any(kind == "gpu" for _, kind in cluster.nodes(data="kind")):
        raise InvalidInput(source, "has no GPUs: no node has kind 'gpu'")
    for u, v, attrs in cluster.edges(data=True):
        where = f"{source}: edge {u!r}-{v!r}"
        if u == v:
            raise InvalidInput(where, "joins a node to itself")
        for key in ("kind", BANDWIDTH, LATENCY):
            if key not in attrs:
                raise InvalidInput(f"{where} {key}", "is missing")
        attrs["kind"] = checks.choice(f"{where} kind", attrs["kind"], LINK_KINDS)
        attrs[BANDWIDTH] = checks.positive_float(f"{where} {BANDWIDTH}", attrs[BANDWIDTH])
        attrs[LATENCY] = checks.positive_float(f"{where} {LATENCY}", attrs[LATENCY], allow_zero=True)
    if not nx.is_connected(cluster):
        parts = list(nx.connected_components(cluster))
        apart = f"{next(iter(parts[1]))!r} cannot reach {next(iter(parts[0]))!r}"
        msg = f"is disconnected: {len(parts)} parts, e.g. {apart}"
        raise InvalidInput(source, msg)
    return cluster


# ----------------------------------------------------------------------------------------------- derivation


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


def _scaleup_view(cluster: nx.Graph) -> nx.Graph:
    """The scale-up fabric: GPU and switch nodes joined by nvlink/nvswitch/xgmi edges."""
    return nx.subgraph_view(
        cluster,
        filter_node=lambda n: cluster.nodes[n]["kind"] != "host",
        filter_edge=lambda u, v: cluster.edges[u, v]["kind"] in SCALEUP_LINK_KINDS,
    )


def _domains_of(view: nx.Graph, members: Sequence[str]) -> list[tuple[frozenset[str], list[str]]]:
    """(scale-up component, its members in given order) for each component holding members, largest first."""
    component_of = {n: comp for comp in map(frozenset, nx.connected_components(view)) for n in comp}
    grouped: dict[frozenset[str], list[str]] = {}
    for m in members:
        grouped.setdefault(component_of[m], []).append(m)
    return sorted(grouped.items(), key=lambda item: -len(item[1]))


def scaleup_domains(cluster: nx.Graph, gpu_type: str | None = None) -> tuple[tuple[str, ...], ...]:
    """Scale-up domains (of ``gpu_type``'s GPUs if given) as GPU id tuples, largest first, then in graph order."""
    return tuple(tuple(m) for _, m in _domains_of(_scaleup_view(cluster), gpu_ids(cluster, gpu_type)))


def _min_pair_cut_gb_s(component: nx.Graph, members: Sequence[str]) -> float:
    """Smallest min-cut (GB/s per direction) between two of ``members`` in ``component`` (Gomory-Hu tree)."""
    tree = nx.gomory_hu_tree(nx.Graph(component), capacity=BANDWIDTH)
    wanted = set(members)
    best = math.inf
    for a, b, weight in list(tree.edges(data="weight")):
        tree.remove_edge(a, b)
        on_a_side = len(wanted & nx.node_connected_component(tree, a))
        tree.add_edge(a, b, weight=weight)
        if 0 < on_a_side < len(wanted):
            best = min(best, weight)
    return best


def _inter_domain_shares_gb_s(cluster: nx.Graph, domains: Sequence[Sequence[str]]) -> list[float]:
    """Per domain: max flow (GB/s per direction) from its GPUs to the GPUs of the other domains, over its GPU count."""
    flow = nx.Graph(cluster)
    source, sink = ("source",), ("sink",)
    shares = []
    for i, members in enumerate(domains):
        flow.remove_nodes_from((source, sink))
        flow.add_edges_from((source, m) for m in members)
        flow.add_edges_from((m, sink) for j, others in enumerate(domains) if j != i for m in others)
        shares.append(nx.maximum_flow_value(flow, source, sink, capacity=BANDWIDTH) / len(members))
    return shares


def _worst_path(graph: nx.Graph, members: Sequence[str], label: Mapping[str, int], same: bool) -> tuple[float, int]:
    """Largest path latency (us) and hop count over member pairs in the same (or different) domains.

    Each pair takes its least-latency path for the latency and its fewest-hop path for the count; (0, 0) without pairs.
    """
    timed = any(latency > 0 for *_, latency in graph.edges(data=LATENCY))
    worst_us, worst_hops = 0.0, 0
    for i, u in enumerate(members):
        targets = [v for v in members[i + 1 :] if (label[v] == label[u]) == same]
        if targets:
            hops = nx.single_source_shortest_path_length(graph, u)
            latency = nx.single_source_dijkstra_path_length(graph, u, weight=LATENCY) if timed else {}
            worst_us = max(worst_us, *(latency.get(v, 0.0) for v in targets))
            worst_hops = max(worst_hops, *(hops[v] for v in targets))
    return worst_us, worst_hops


def collective_figures(cluster: nx.Graph, gpus: Iterable[str]) -> CollectiveFigures:
    """Domains, bandwidth and path latency a collective among ``gpus`` gets from the graph (module docstring rules)."""
    members = list(dict.fromkeys(gpus))
    bad = [g for g in members if g not in cluster or cluster.nodes[g]["kind"] != "gpu"]
    if not members or bad:
        raise InvalidInput("gpus", f"must be GPU node ids of the cluster. Got {bad[:3] or members!r} instead.")
    scaleup = nx.Graph(_scaleup_view(cluster))
    domains = _domains_of(scaleup, members)
    label = {m: i for i, (_, ms) in enumerate(domains) for m in ms}
    intra_cuts = [_min_pair_cut_gb_s(scaleup.subgraph(comp), ms) for comp, ms in domains if len(ms) > 1]
    intra_paths = _worst_path(scaleup, members, label, same=True)
    inter_bw: float | None
    inter_bw = inter_lat = inter_hops = None
    if len(domains) > 1:
        inter_bw = min(_inter_domain_shares_gb_s(cluster, [ms for _, ms in domains])) * 1e9
        inter_us, inter_hops = _worst_path(cluster, members, label, same=False)
        inter_lat = inter_us * 1e-6
    single = not intra_cuts  # every domain has one GPU: "intra" collectives run over the inter-domain paths
    return CollectiveFigures(
        n_gpus=len(members),
        domain_sizes=tuple(len(ms) for _, ms in domains),
        intra_link_bytes_per_s=inter_bw if single else min(intra_cuts) * 1e9,
        inter_link_bytes_per_s=inter_bw,
        intra_latency_s=inter_lat if single else intra_paths[0] * 1e-6,
        inter_latency_s=inter_lat,
        intra_hops=inter_hops if single else intra_paths[1],
        inter_hops=inter_hops,
    )


def _require_type(cluster: nx.Graph, gpu_type: str) -> tuple[str, ...]:
    ids = gpu_ids(cluster, gpu_type)
    if not ids:
        have = ", ".join(f"{n} x {name}" for name, n in gpu_counts(cluster).items())
        raise Infeasible(f"the cluster has no {gpu_type} GPUs (it has {have})", reason="topology")
    return ids


def effective_gpu(cluster: nx.Graph, gpu_type: str, base: GpuSpec) -> GpuSpec:
    """``base`` with scale-up size, all-reduce bandwidths and hop latencies of ``gpu_type``'s GPUs in ``cluster``.

    all-reduce B/s = half the per-direction bandwidth; figures the graph cannot give keep ``base``'s values.
    Raises Infeasible (reason "topology") if the cluster has no GPU of that type.
    """
    f = collective_figures(cluster, _require_type(cluster, gpu_type))

    def pick(value: float | None, scale: float, fallback: float) -> float:
        return fallback if value is None else value * scale

    return dataclasses.replace(
        base,
        scaleup_gpus=f.scaleup_gpus,
        intra_bytes_per_s=pick(f.intra_link_bytes_per_s, 0.5, base.intra_bytes_per_s),
        inter_bytes_per_s=pick(f.inter_link_bytes_per_s, 0.5, base.inter_bytes_per_s),
        intra_hop_latency_s=pick(f.intra_latency_s, 1.0, base.intra_hop_latency_s),
        inter_hop_latency_s=pick(f.inter_latency_s, 1.0, base.inter_hop_latency_s),
    )


def effective_gpus(cluster: nx.Graph, resolve: Callable[[str], GpuSpec]) -> dict[str, GpuSpec]:
    """``effective_gpu`` for every GPU type of the cluster, bases looked up by name (e.g. catalog.load_gpu)."""
    return {name: effective_gpu(cluster, name, resolve(name)) for name in gpu_counts(cluster)}


# ----------------------------------------------------------------------------------------------- placement


def _tp_groups(cluster: nx.Graph, gpu_type: str, tp: int) -> list[tuple[str, ...]]:
    """Disjoint TP groups of ``tp`` GPUs, packed greedily as the module docstring describes."""
    domains = scaleup_domains(cluster, gpu_type)
    if not domains:
        return []
    if tp <= len(domains[0]):
        return [d[i : i + tp] for d in domains for i in range(0, len(d) - tp + 1, tp)]
    groups: list[tuple[str, ...]] = []
    pending: list[str] = []
    for d in domains:
        pending += d
        if len(pending) >= tp:
            groups.append(tuple(pending[:tp]))
            pending = []
    return groups


def max_instances(cluster: nx.Graph, gpu_type: str, tp: int, pp: int) -> int:
    """How many disjoint instances of ``tp`` x ``pp`` GPUs of ``gpu_type`` the cluster holds at once (0 if none)."""
    tp = checks.positive_int("tp", tp)
    pp = checks.positive_int("pp", pp)
    return len(_tp_groups(cluster, gpu_type, tp)) // pp


def place(cluster: nx.Graph, gpu_type: str, tp: int, pp: int, replicas: int) -> Placement:
    """Concrete GPU ids for ``replicas`` instances; Infeasible (reason "topology") if the cluster cannot hold them."""
    tp = checks.positive_int("tp", tp)
    pp = checks.positive_int("pp", pp)
    replicas = checks.positive_int("replicas", replicas)
    _require_type(cluster, gpu_type)
    groups = _tp_groups(cluster, gpu_type, tp)
    available = len(groups) // pp
    if replicas > available:
        sizes = ", ".join(str(len(d)) for d in scaleup_domains(cluster, gpu_type))
        msg = (
            f"{replicas} instance(s) of TP={tp} x PP={pp} on {gpu_type} do not fit: the cluster holds {available} "
            f"(scale-up domains of {sizes} GPUs)"
        )
        raise Infeasible(msg, reason="topology")
    stages = tuple(tuple(groups[r * pp : (r + 1) * pp]) for r in range(replicas))
    return Placement(gpu_type, tp, pp, stages)
