"""Figures a cluster graph implies: scale-up domains, min-cut bandwidths, path latencies, effective accelerators."""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import networkx as nx

from roofline_opt.errors import Infeasible, InvalidInput
from roofline_opt.physics.specs import GpuSpec
from roofline_opt.topology import maxflow, symmetry
from roofline_opt.topology.schema import BANDWIDTH, LATENCY, SCALEUP_LINK_KINDS, gpu_counts, gpu_ids

MAX_PATH_WORK = 10_000_000
"""Most (GPU classes x graph size) a derivation visits: each class of GPUs not joined by a verified automorphism
costs one path search and cut over the graph. A symmetric pod of 1,024 GPUs has a handful of classes; an irregular
tree of 4,000 GPUs (benchmarks/irregular_tree.py) has one class per GPU and ran past 180 s, so it is refused."""


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


Adjacency = dict[str, dict[str, dict]]


def _scaleup_adjacency(cluster: nx.Graph) -> Adjacency:
    """The scale-up fabric as plain dicts: GPU and switch nodes joined by nvlink/nvswitch/xgmi edges."""
    kind = dict(cluster.nodes(data="kind"))
    return {
        u: {v: a for v, a in nbrs.items() if a["kind"] in SCALEUP_LINK_KINDS and kind[v] != "host"}
        for u, nbrs in cluster.adjacency()
        if kind[u] != "host"
    }


def _component(adj: Adjacency, start: str) -> frozenset[str]:
    seen = {start}
    stack = [start]
    while stack:
        for v in adj[stack.pop()]:
            if v not in seen:
                seen.add(v)
                stack.append(v)
    return frozenset(seen)


def _domains_of(adj: Adjacency, members: Sequence[str]) -> list[tuple[frozenset[str], list[str]]]:
    """(scale-up component, its members in given order) for each component holding members, largest first."""
    component_of: dict[str, frozenset[str]] = {}
    grouped: dict[frozenset[str], list[str]] = {}
    for m in members:
        if m not in component_of:
            comp = _component(adj, m)
            component_of.update(dict.fromkeys(comp, comp))
        grouped.setdefault(component_of[m], []).append(m)
    return sorted(grouped.items(), key=lambda item: -len(item[1]))


def scaleup_domains(cluster: nx.Graph, gpu_type: str | None = None) -> tuple[tuple[str, ...], ...]:
    """Scale-up domains (of ``gpu_type``'s GPUs if given) as GPU id tuples, largest first, then in graph order."""
    return tuple(tuple(m) for _, m in _domains_of(_scaleup_adjacency(cluster), gpu_ids(cluster, gpu_type)))


def _capacities(adj: Adjacency, nodes: Iterable[str] | None = None) -> dict[str, dict[str, float]]:
    """Edge bandwidths (GB/s per direction) as plain dicts, for ``maxflow`` (of ``nodes`` only if given)."""
    keep = None if nodes is None else set(nodes)
    return {
        u: {v: a[BANDWIDTH] for v, a in adj[u].items() if keep is None or v in keep}
        for u in (adj if keep is None else keep)
    }


def _min_pair_cut_gb_s(adj: Adjacency, component: frozenset[str], members: Sequence[str], transitive: bool) -> float:
    """Smallest min-cut (GB/s per direction) between two of ``members`` in ``component`` of the scale-up fabric.

    Any cut separating two members separates the first member from one of the others, so the first member's max
    flows to each other member suffice. If the automorphisms act transitively on a component made only of members
    and its links all have one bandwidth, the answer is its degree times that bandwidth (Mader 1971: a connected
    vertex-transitive graph's edge connectivity equals its degree), with no flow at all.
    """
    capacity = _capacities(adj, component)
    bandwidths = {bw for nbrs in capacity.values() for bw in nbrs.values()}
    if transitive and len(bandwidths) == 1 and len(component) == len(members):
        return len(capacity[members[0]]) * bandwidths.pop()
    return min(maxflow.max_flow_value(capacity, [members[0]], [t]) for t in members[1:])


def _worst_path(adj: Adjacency, sources: Iterable[str], targets: Callable[[str], Iterable[str]]) -> tuple[float, int]:
    """Largest path latency (us) and hop count from ``sources`` to each source's ``targets``.

    Each pair takes its least-latency path for the latency and its fewest-hop path for the count; (0, 0) without pairs.
    """
    timed = any(a[LATENCY] > 0 for nbrs in adj.values() for a in nbrs.values())
    worst_us, worst_hops = 0.0, 0
    for u in sources:
        wanted = list(targets(u))
        if wanted:
            hops = _hops(adj, u)
            latency = _latencies_us(adj, u) if timed else {}
            worst_us = max(worst_us, *(latency.get(v, 0.0) for v in wanted))
            worst_hops = max(worst_hops, *(hops[v] for v in wanted))
    return worst_us, worst_hops


def _hops(adj: Adjacency, source: str) -> dict[str, int]:
    """Breadth-first hop counts from ``source``."""
    dist = {source: 0}
    frontier = [source]
    level = 0
    while frontier:
        level += 1
        nxt = []
        for u in frontier:
            for v in adj[u]:
                if v not in dist:
                    dist[v] = level
                    nxt.append(v)
        frontier = nxt
    return dist


def _latencies_us(adj: Adjacency, source: str) -> dict[str, float]:
    """Least path latency (Dijkstra over ``latency_us``) from ``source``."""
    dist = {source: 0.0}
    heap = [(0.0, source)]
    done: set[str] = set()
    while heap:
        d, u = heapq.heappop(heap)
        if u in done:
            continue
        done.add(u)
        for v, a in adj[u].items():
            nd = d + a[LATENCY]
            if nd < dist.get(v, math.inf):
                dist[v] = nd
                heapq.heappush(heap, (nd, v))
    return dist


def collective_figures(cluster: nx.Graph, gpus: Iterable[str], *, use_symmetry: bool = True) -> CollectiveFigures:
    """Domains, bandwidth and path latency a collective among ``gpus`` gets from the graph (module docstring rules).

    With ``use_symmetry`` (the default) each figure is computed once per orbit of verified automorphisms (domains of
    one server type, the GPUs of a torus) instead of once per domain or GPU; the result is the same
    (``topology.symmetry``), and ``use_symmetry=False`` is the plain per-domain computation.
    """
    members = list(dict.fromkeys(gpus))
    bad = [g for g in members if g not in cluster or cluster.nodes[g]["kind"] != "gpu"]
    if not members or bad:
        raise InvalidInput("gpus", f"must be GPU node ids of the cluster. Got {bad[:3] or members!r} instead.")
    whole: Adjacency = dict(cluster.adjacency())
    scaleup = _scaleup_adjacency(cluster)
    domains = _domains_of(scaleup, members)
    found = (
        symmetry.orbits(cluster, set(members), [comp for comp, _ in domains])
        if use_symmetry
        else symmetry.Orbits(cluster)
    )
    label = {m: i for i, (_, ms) in enumerate(domains) for m in ms}
    classes = _first_per_key(range(len(domains)), lambda i: min(found.find(m) for m in domains[i][1]))
    sources = _first_per_key(members, found.find)
    size = cluster.number_of_nodes() + cluster.number_of_edges()
    if (len(sources) + len(classes)) * size > MAX_PATH_WORK:
        raise InvalidInput(
            "cluster",
            f"has {len(sources):,} classes of GPUs that no verified symmetry joins (of {len(members):,}) on "
            f"{size:,} nodes and links: their paths and cuts would visit about "
            f"{(len(sources) + len(classes)) * size:,} nodes and links, more than the {MAX_PATH_WORK:,} allowed "
            "(give a cluster whose servers and links repeat, or fewer GPUs)",
        )
    intra_cuts = [
        _min_pair_cut_gb_s(scaleup, domains[i][0], domains[i][1], found.count(domains[i][0]) == 1)
        for i in classes
        if len(domains[i][1]) > 1
    ]
    intra_paths = _worst_path(scaleup, sources, lambda u: (v for v in domains[label[u]][1] if v != u))
    inter_bw: float | None
    inter_bw = inter_lat = inter_hops = None
    if len(domains) > 1:
        capacity = _capacities(whole)
        shares = [
            maxflow.max_flow_value(capacity, domains[i][1], [m for m in members if label[m] != i]) / len(domains[i][1])
            for i in classes
        ]
        inter_bw = min(shares) * 1e9
        inter_us, inter_hops = _worst_path(whole, sources, lambda u: (v for v in members if label[v] != label[u]))
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


def _first_per_key(items: Iterable, key: Callable) -> list:
    """The first item of each distinct key, in order."""
    return list({key(item): item for item in reversed(list(items))}.values())[::-1]


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
