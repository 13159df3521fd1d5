"""Large clusters: figures derived once per orbit of verified symmetries equal the per-domain computation."""

from __future__ import annotations

import itertools
import random

import networkx as nx
import pytest

from roofline_opt import topology
from roofline_opt.cli import main
from roofline_opt.errors import InvalidInput
from roofline_opt.topology import maxflow, symmetry
from roofline_opt.topology.schema import BANDWIDTH, LATENCY, MAX_CLUSTER_GPUS, SCALEUP_LINK_KINDS


def pod(*groups: tuple[str, int], **spec) -> nx.Graph:
    node_groups = [topology.NodeGroup(node_type, n) for node_type, n in groups]
    return topology.validate_cluster(topology.pod(node_groups, **spec))


def with_latency(graph: nx.Graph, seed: int, share: float = 0.2) -> nx.Graph:
    """Some edges get a random extra latency (breaks symmetry irregularly)."""
    rng = random.Random(seed)
    for _, _, attrs in graph.edges(data=True):
        if rng.random() < share:
            attrs[LATENCY] = rng.choice([0.5, 1.0, 2.0])
    return graph


def irregular_pod() -> nx.Graph:
    graph = pod(("hgx-h100", 6))
    graph.remove_edge("n2.gpu3", "rail3")  # a missing NIC
    graph.remove_edge("n4.gpu5", "n4.nvswitch")  # a GPU off its NVSwitch
    graph.edges["n1.gpu0", "rail0"][BANDWIDTH] = 25.0  # a slower NIC
    return graph


def irregular_torus() -> nx.Graph:
    graph = topology.validate_cluster(topology.torus([6, 6]))
    graph.edges["t.0.0", "t.0.1"][BANDWIDTH] = 40.0
    return graph


def all_gpu_graph(graph: nx.Graph, bandwidth: dict | None = None) -> nx.Graph:
    """Every node a GPU, every edge an NVLink of 100 GB/s (or ``bandwidth[(u, v)]``)."""
    out = nx.Graph()
    out.add_nodes_from((str(n), {"kind": "gpu", "gpu": "h100-sxm"}) for n in graph)
    for u, v in graph.edges():
        bw = (bandwidth or {}).get((u, v), 100.0)
        out.add_edge(str(u), str(v), kind="nvlink", bandwidth_gb_s=bw, latency_us=0.0)
    return topology.validate_cluster(out)


def ring_of_cliques() -> nx.Graph:
    """Vertex-transitive but with two bandwidths: cliques of 4 (fast) joined in a ring by slow links."""
    graph = nx.Graph()
    bandwidth = {}
    for c in range(5):
        members = [f"{c}.{i}" for i in range(4)]
        for u, v in itertools.combinations(members, 2):
            graph.add_edge(u, v)
            bandwidth[(u, v)] = 100.0
        for i in (0, 1):
            u, v = f"{c}.{2 + i}", f"{(c + 1) % 5}.{i}"
            graph.add_edge(u, v)
            bandwidth[(u, v)] = 5.0
    return all_gpu_graph(graph, bandwidth)


IRREGULAR = {
    "irregular-pod": irregular_pod,
    "mixed-pod-with-latencies": lambda: with_latency(pod(("hgx-h100", 3), ("hgx-a100", 3), ("mi300x-8", 2)), 1),
    "pod-with-latencies": lambda: with_latency(pod(("hgx-h100", 5)), 2, share=0.05),
    "irregular-torus": irregular_torus,
    "torus-5x6": lambda: topology.validate_cluster(topology.torus([5, 6])),
    "torus-of-nics": lambda: topology.validate_cluster(topology.torus([4, 5], link_kind="infiniband")),
    "random-4-regular": lambda: all_gpu_graph(nx.random_regular_graph(4, 30, seed=3)),
    "ring-of-cliques": ring_of_cliques,
    "pcie-pod": lambda: pod(("pcie-8gpu", 3)),
    "nvl72-pair": lambda: pod(("gb200-nvl72", 2)),
}


@pytest.mark.parametrize("make", IRREGULAR.values(), ids=IRREGULAR.keys())
def test_symmetric_derivation_equals_the_per_domain_computation(make):
    graph = make()
    for name in topology.gpu_counts(graph):
        ids = topology.gpu_ids(graph, name)
        for members in (ids, ids[: max(2, len(ids) // 3)]):
            fast = topology.collective_figures(graph, members)
            assert fast == topology.collective_figures(graph, members, use_symmetry=False)


def brute_force(graph: nx.Graph, members: list[str]) -> tuple[float, float, int]:
    """Smallest pairwise min cut inside domains, largest intra- and cross-domain hop counts, from first principles."""
    scaleup = nx.Graph(
        (u, v, a)
        for u, v, a in graph.edges(data=True)
        if a["kind"] in SCALEUP_LINK_KINDS and "host" not in (graph.nodes[u]["kind"], graph.nodes[v]["kind"])
    )
    scaleup.add_nodes_from(n for n in graph if graph.nodes[n]["kind"] != "host")
    cut, intra_hops, inter_hops = float("inf"), 0, 0
    for a, b in itertools.combinations(members, 2):
        if nx.has_path(scaleup, a, b):
            cut = min(cut, nx.minimum_cut_value(scaleup, a, b, capacity=BANDWIDTH))
            intra_hops = max(intra_hops, nx.shortest_path_length(scaleup, a, b))
        else:
            inter_hops = max(inter_hops, nx.shortest_path_length(graph, a, b))
    return cut * 1e9, intra_hops, inter_hops


@pytest.mark.parametrize("name", ["irregular-pod", "irregular-torus", "random-4-regular", "ring-of-cliques"])
def test_derivation_matches_pairwise_min_cuts_and_shortest_paths(name):
    graph = IRREGULAR[name]()
    members = list(topology.gpu_ids(graph))
    figures = topology.collective_figures(graph, members)
    cut, intra_hops, inter_hops = brute_force(graph, members)
    assert (figures.intra_link_bytes_per_s, figures.intra_hops) == (cut, intra_hops)
    assert figures.inter_hops in (None, inter_hops)


def test_vertex_transitive_uniform_torus_takes_its_degree_without_a_flow(monkeypatch):
    calls = []
    monkeypatch.setattr(maxflow, "max_flow_value", lambda *a: calls.append(a) or 0.0)
    graph = topology.validate_cluster(topology.torus([12, 12]))
    figures = topology.collective_figures(graph, topology.gpu_ids(graph))
    assert (figures.intra_link_bytes_per_s, figures.intra_hops, calls) == (400e9, 12, [])


def test_a_pod_needs_one_inter_domain_flow_for_all_its_servers(monkeypatch):
    graph = pod(("hgx-h100", 32))
    sources = []
    real = maxflow.max_flow_value
    monkeypatch.setattr(maxflow, "max_flow_value", lambda c, s, t: sources.append(len(s)) or real(c, s, t))
    figures = topology.collective_figures(graph, topology.gpu_ids(graph))
    assert figures.inter_link_bytes_per_s == 50e9
    assert sources.count(8) == 1  # one flow from a server's 8 GPUs; the rest are 7 flows inside one server


def test_orbits_join_only_nodes_an_automorphism_exchanges():
    graph = pod(("hgx-h100", 4), ("hgx-a100", 2))
    members = set(topology.gpu_ids(graph, "h100-sxm"))
    nvswitch = graph.edge_subgraph((u, v) for u, v, kind in graph.edges(data="kind") if kind == "nvswitch")
    domains = [frozenset(c) for c in nx.connected_components(nvswitch)]
    found = symmetry.orbits(graph, members, domains)
    assert found.find("n0.gpu3") == found.find("n3.gpu3")
    assert found.find("n0.gpu3") != found.find("n0.gpu4")  # different rails
    assert found.find("n0.gpu3") != found.find("n4.gpu3")  # an A100 server


def test_torus_search_finds_one_orbit_and_a_broken_torus_keeps_the_odd_nodes_apart():
    regular = topology.validate_cluster(topology.torus([10, 10]))
    ids = set(topology.gpu_ids(regular))
    assert symmetry.orbits(regular, ids, [frozenset(regular)]).count(ids) == 1
    broken = irregular_torus()
    found = symmetry.orbits(broken, set(topology.gpu_ids(broken)), [frozenset(broken)])
    assert found.find("t.0.0") != found.find("t.3.3")


@pytest.mark.parametrize("seed", range(5))
def test_max_flow_equals_networkx(seed):
    rng = random.Random(seed)
    graph = nx.gnm_random_graph(40, 120, seed=seed)
    for u, v in graph.edges():
        graph.edges[u, v][BANDWIDTH] = rng.choice([12.5, 25.0, 50.0, 100.0, 450.0])
    sources, sinks = rng.sample(range(0, 20), 3), rng.sample(range(20, 40), 5)
    capacity = {u: {v: a[BANDWIDTH] for v, a in graph[u].items()} for u in graph}
    flow = nx.Graph(graph)
    flow.add_edges_from(("s", s) for s in sources)
    flow.add_edges_from((t, "t") for t in sinks)
    assert maxflow.max_flow_value(capacity, sources, sinks) == pytest.approx(
        nx.maximum_flow_value(flow, "s", "t", capacity=BANDWIDTH), rel=1e-12
    )


def test_instance_limit_equals_max_instances():
    graph = pod(("hgx-h100", 3), ("hgx-h100-4gpu", 2))
    limit = topology.instance_limit(graph, "h100-sxm")
    for tp, pp in itertools.product((1, 2, 4, 8, 12, 16), (1, 2, 4)):
        assert limit(tp, pp) == topology.max_instances(graph, "h100-sxm", tp, pp)


def test_spec_beyond_the_cap_is_refused_before_building():
    servers = MAX_CLUSTER_GPUS // 8 + 1
    with pytest.raises(InvalidInput, match=f"describes {8 * servers:,} GPUs: at most {MAX_CLUSTER_GPUS:,}"):
        topology.from_spec({"nodes": servers, "node_type": "hgx-h100"})
    with pytest.raises(InvalidInput, match="torus: describes 1,000,000 GPUs"):
        topology.from_spec({"torus": [1000, 1000]})


def test_cli_build_beyond_the_cap_exits_2_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "huge.graphml"
    servers = MAX_CLUSTER_GPUS // 8 + 1
    assert main(["cluster", "build", f"{{nodes: {servers}, node_type: hgx-h100}}", "--out", str(out)]) == 2
    assert f"at most {MAX_CLUSTER_GPUS:,}" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
