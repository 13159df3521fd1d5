"""Cluster graphs: domains, derived GpuSpec figures against the catalog and the evaluator, placement, files, CLI."""

from __future__ import annotations

import dataclasses
import json
from importlib.util import find_spec
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from roofline_opt import topology
from roofline_opt.errors import Infeasible, InvalidInput
from roofline_opt.physics import evaluator
from roofline_opt.physics.specs import DEFAULT, PAPER, GpuSpec, ModelSpec

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "instances" / "clusters"
DATA = Path(__file__).resolve().parent / "data" / "clusters"
H100 = GpuSpec("h100-sxm", {16: 1e15, 8: 2e15, 4: 2e15}, 8e10, 3.3e12, 8, 9e11 / 4, 5e10 / 2, 2.10)
LLAMA_3_70B = ModelSpec("llama-3-70b", 8192, 28672, 80, 64, 8, 128, 128256)
HAS_CATALOG = find_spec("roofline_opt.catalog") is not None
HAS_CLI = all(find_spec(f"roofline_opt.cli.{m}") is not None for m in ("evaluate_cmd", "catalog_cmds"))
needs_cli = pytest.mark.skipif(not HAS_CLI, reason="roofline_opt.cli.main needs evaluate_cmd and catalog_cmds")


def hgx_h100() -> nx.Graph:
    return topology.validate_cluster(topology.single_node("hgx-h100"))


def h100_pod(servers: int = 4) -> nx.Graph:
    return topology.validate_cluster(topology.pod([topology.NodeGroup("hgx-h100", servers)]))


def network_s(gpu: GpuSpec, tp: list[int], tp_2d: bool, pp: int, preset=PAPER) -> np.ndarray:
    layout = evaluator.Layout.of(tp=tp, tp_2d=tp_2d, pp=pp, context=4096)
    return evaluator.step(LLAMA_3_70B, gpu, preset, 16, layout, batch=16).network_s


# ----------------------------------------------------------------------------------------------- catalog figures


def test_hgx_h100_node_gives_the_catalog_h100_figures():
    gpu = topology.effective_gpu(hgx_h100(), "h100-sxm", H100)
    assert (gpu.scaleup_gpus, gpu.intra_bytes_per_s, gpu.inter_bytes_per_s) == (8, 9e11 / 4, 5e10 / 2)
    assert (gpu.intra_hop_latency_s, gpu.inter_hop_latency_s) == (0.0, 0.0)


def test_rail_pod_of_four_hgx_h100_gives_the_catalog_h100_figures():
    figures = topology.collective_figures(h100_pod(), topology.gpu_ids(h100_pod()))
    assert figures.inter_link_bytes_per_s == 50e9
    assert topology.effective_gpu(h100_pod(), "h100-sxm", H100) == H100


@pytest.mark.parametrize("preset", [PAPER, DEFAULT], ids=lambda p: p.name)
@pytest.mark.parametrize("cluster", [hgx_h100, h100_pod], ids=["hgx", "pod"])
def test_evaluator_network_time_is_unchanged_by_a_standard_cluster(cluster, preset):
    effective = topology.effective_gpu(cluster(), "h100-sxm", H100)
    for tp_2d in (False, True):
        for pp in (1, 2):
            tp = [1, 2, 4, 8, 16, 32]
            expected = network_s(H100, tp, tp_2d, pp, preset)
            np.testing.assert_array_equal(network_s(effective, tp, tp_2d, pp, preset), expected)
            assert np.all(expected[1:] > 0)


@pytest.mark.skipif(not HAS_CATALOG, reason="roofline_opt.catalog not present")
@pytest.mark.parametrize("node_type", [n for n in topology.NODE_TYPES if n not in ("hgx-h100-4gpu", "pcie-8gpu")])
def test_two_servers_of_each_standard_type_give_their_catalog_card(node_type):
    from roofline_opt import catalog

    name = topology.NODE_TYPES[node_type].gpu
    cluster = topology.validate_cluster(topology.pod([topology.NodeGroup(node_type, 2)]))
    assert topology.effective_gpu(cluster, name, catalog.load_gpu(name)) == catalog.load_gpu(name)


# ----------------------------------------------------------------------------------------------- domains


def test_pod_has_one_domain_per_server():
    domains = topology.scaleup_domains(h100_pod())
    assert [len(d) for d in domains] == [8, 8, 8, 8]
    assert [{g.split(".")[0] for g in d} for d in domains] == [{"n0"}, {"n1"}, {"n2"}, {"n3"}]


def test_nvl72_rack_is_one_72_gpu_domain_at_900_gb_s():
    cluster = topology.validate_cluster(topology.single_node("gb200-nvl72"))
    figures = topology.collective_figures(cluster, topology.gpu_ids(cluster))
    assert figures.domain_sizes == (72,)
    assert figures.intra_link_bytes_per_s == 900e9
    assert figures.inter_link_bytes_per_s is None


def test_pcie_box_has_one_gpu_domains_and_pcie_bandwidth():
    cluster = topology.validate_cluster(topology.single_node("pcie-8gpu", gpu="h100-sxm"))
    gpu = topology.effective_gpu(cluster, "h100-sxm", H100)
    assert topology.collective_figures(cluster, topology.gpu_ids(cluster)).domain_sizes == (1,) * 8
    assert (gpu.scaleup_gpus, gpu.intra_bytes_per_s, gpu.inter_bytes_per_s) == (1, 32e9 / 2, 32e9 / 2)


def test_pcie_box_is_never_better_than_an_nvlink_box():
    pcie = topology.effective_gpu(
        topology.validate_cluster(topology.single_node("pcie-8gpu", gpu="h100-sxm")), "h100-sxm", H100
    )
    nvlink = topology.effective_gpu(hgx_h100(), "h100-sxm", H100)
    assert pcie.scaleup_gpus <= nvlink.scaleup_gpus
    assert pcie.intra_bytes_per_s <= nvlink.intra_bytes_per_s
    assert pcie.inter_bytes_per_s <= nvlink.inter_bytes_per_s
    for tp_2d in (False, True):
        assert network_s(pcie, [8], tp_2d, 1)[0] > network_s(nvlink, [8], tp_2d, 1)[0]


def test_torus_is_one_domain_with_four_links_per_gpu_and_diameter_latency():
    cluster = topology.validate_cluster(topology.torus([4, 4], link_gb_s=100.0, latency_us=0.5))
    figures = topology.collective_figures(cluster, topology.gpu_ids(cluster))
    assert figures.domain_sizes == (16,)
    assert figures.intra_link_bytes_per_s == 400e9
    assert (figures.intra_hops, figures.intra_latency_s) == (4, 2e-6)
    assert topology.effective_gpu(cluster, "h100-sxm", H100).intra_hop_latency_s == 2e-6


def test_mi300x_mesh_counts_all_seven_peer_links():
    cluster = topology.validate_cluster(topology.single_node("mi300x-8"))
    assert topology.collective_figures(cluster, topology.gpu_ids(cluster)).intra_link_bytes_per_s == 448e9


def test_removing_an_nvswitch_link_shrinks_the_domain():
    cluster = hgx_h100()
    cluster.remove_edge("n0.gpu3", "n0.nvswitch")
    assert [len(d) for d in topology.scaleup_domains(cluster)] == [7, 1]
    assert topology.effective_gpu(cluster, "h100-sxm", H100).scaleup_gpus == 7


def test_removing_a_mesh_link_lowers_intra_bandwidth():
    cluster = topology.validate_cluster(topology.single_node("hgx-h100-4gpu"))
    before = topology.effective_gpu(cluster, "h100-sxm", H100).intra_bytes_per_s
    cluster.remove_edge("n0.gpu0", "n0.gpu1")
    after = topology.effective_gpu(cluster, "h100-sxm", H100)
    assert (before, after.intra_bytes_per_s, after.scaleup_gpus) == (450e9 / 2, 300e9 / 2, 4)


def test_removing_nics_lowers_inter_bandwidth():
    cluster = h100_pod(2)
    for rank in range(4):
        cluster.remove_edge(f"n0.gpu{rank}", f"rail{rank}")
    assert topology.effective_gpu(cluster, "h100-sxm", H100).inter_bytes_per_s == 4 * 50e9 / 8 / 2


def test_cross_domain_latency_sums_the_edge_latencies_of_the_path():
    cluster = topology.load_cluster(DATA / "external.graphml")
    figures = topology.collective_figures(cluster, topology.gpu_ids(cluster))
    assert figures.domain_sizes == (2, 2)
    assert (figures.inter_hops, figures.inter_latency_s, figures.inter_link_bytes_per_s) == (2, 4e-6, 25e9)


def test_heterogeneous_cluster_derives_each_type_from_its_own_servers():
    cluster = topology.load_cluster(EXAMPLES / "mixed-h100-a100.yaml")
    assert topology.gpu_counts(cluster) == {"h100-sxm": 16, "a100-80gb": 16}
    a100 = topology.effective_gpu(cluster, "a100-80gb", H100)
    assert (a100.scaleup_gpus, a100.intra_bytes_per_s, a100.inter_bytes_per_s) == (8, 300e9 / 2, 25e9 / 2)
    assert topology.effective_gpu(cluster, "h100-sxm", H100) == H100


def test_unequal_domains_summarise_as_the_largest_size():
    cluster = topology.load_cluster(DATA / "twelve-gpus.yaml")
    assert [len(d) for d in topology.scaleup_domains(cluster, "h100-sxm")] == [8, 4]
    assert topology.effective_gpu(cluster, "h100-sxm", H100).scaleup_gpus == 8


def test_group_inside_one_server_has_no_inter_domain_figures():
    cluster = h100_pod(2)
    inside = topology.collective_figures(cluster, [f"n0.gpu{i}" for i in range(4)])
    spanning = topology.collective_figures(cluster, [f"n{s}.gpu{i}" for s in range(2) for i in range(8)])
    assert (inside.domain_sizes, inside.inter_link_bytes_per_s) == ((4,), None)
    assert (spanning.domain_sizes, spanning.inter_link_bytes_per_s) == ((8, 8), 50e9)


def test_effective_gpus_resolves_a_base_for_every_type():
    cluster = topology.load_cluster(EXAMPLES / "mixed-h100-a100.yaml")
    gpus = topology.effective_gpus(cluster, lambda name: dataclasses.replace(H100, name=name))
    assert {name: gpu.inter_bytes_per_s for name, gpu in gpus.items()} == {"h100-sxm": 25e9, "a100-80gb": 12.5e9}


def test_effective_gpu_of_a_missing_type_is_infeasible():
    with pytest.raises(Infeasible) as info:
        topology.effective_gpu(hgx_h100(), "b200", H100)
    assert info.value.reason == "topology"


# ----------------------------------------------------------------------------------------------- placement


def test_twelve_gpu_cluster_holds_no_16_gpu_instance_and_three_of_4():
    cluster = topology.load_cluster(DATA / "twelve-gpus.yaml")
    assert topology.max_instances(cluster, "h100-sxm", tp=16, pp=1) == 0
    assert topology.max_instances(cluster, "h100-sxm", tp=4, pp=1) == 3
    assert topology.max_instances(cluster, "h100-sxm", tp=8, pp=1) == 1
    assert topology.max_instances(cluster, "h100-sxm", tp=4, pp=2) == 1


def test_tp_beyond_a_domain_takes_whole_domains():
    cluster = h100_pod(4)
    assert topology.max_instances(cluster, "h100-sxm", tp=16, pp=1) == 2
    assert topology.max_instances(cluster, "h100-sxm", tp=12, pp=1) == 2
    assert topology.max_instances(cluster, "h100-sxm", tp=16, pp=2) == 1
    assert topology.max_instances(cluster, "a100-80gb", tp=1, pp=1) == 0


def test_placement_uses_distinct_gpus_of_the_type_with_tp_groups_inside_domains():
    cluster = topology.load_cluster(EXAMPLES / "mixed-h100-a100.yaml")
    placement = topology.place(cluster, "a100-80gb", tp=4, pp=2, replicas=2)
    groups = [group for stages in placement.replicas for group in stages]
    ids = [g for group in groups for g in group]
    domain_of = {g: i for i, d in enumerate(topology.scaleup_domains(cluster)) for g in d}
    assert len(ids) == len(set(ids)) == 16
    assert {cluster.nodes[g]["gpu"] for g in ids} == {"a100-80gb"}
    assert [len(group) for group in groups] == [4, 4, 4, 4]
    assert all(len({domain_of[g] for g in group}) == 1 for group in groups)


def test_placement_to_dict_is_json_with_replica_stage_groups():
    placement = topology.place(h100_pod(2), "h100-sxm", tp=8, pp=1, replicas=2)
    data = json.loads(json.dumps(placement.to_dict()))
    assert data == {
        "gpu_type": "h100-sxm",
        "tp": 8,
        "pp": 1,
        "replicas": [[[f"n{s}.gpu{i}" for i in range(8)]] for s in range(2)],
    }


def test_placing_more_replicas_than_fit_is_infeasible_for_topology():
    with pytest.raises(Infeasible) as info:
        topology.place(topology.load_cluster(DATA / "twelve-gpus.yaml"), "h100-sxm", tp=4, pp=1, replicas=4)
    assert info.value.reason == "topology"
    assert "holds 3" in str(info.value)


def test_non_positive_degree_is_invalid_input():
    with pytest.raises(InvalidInput, match="tp"):
        topology.max_instances(hgx_h100(), "h100-sxm", tp=0, pp=1)


# ----------------------------------------------------------------------------------------------- files


@pytest.mark.parametrize("suffix", [".graphml", ".json"])
def test_cluster_files_round_trip(tmp_path, suffix):
    cluster = topology.load_cluster(EXAMPLES / "mixed-h100-a100.yaml")
    topology.save_cluster(cluster, tmp_path / f"c{suffix}")
    assert nx.utils.graphs_equal(topology.load_cluster(tmp_path / f"c{suffix}"), cluster)


@pytest.mark.parametrize("path", sorted(p for p in EXAMPLES.iterdir() if p.suffix in (".graphml", ".json")))
def test_example_files_match_their_yaml_source(path):
    assert nx.utils.graphs_equal(topology.load_cluster(path), topology.load_cluster(path.with_suffix(".yaml")))


def test_directed_graphml_from_another_tool_is_read_as_undirected():
    cluster = topology.load_cluster(DATA / "external.graphml")
    assert not cluster.is_directed()
    assert cluster.number_of_edges() == 6
    assert cluster.edges["a0", "tor"] == {"kind": "ethernet", "bandwidth_gb_s": 25.0, "latency_us": 2.0}


def test_node_link_json_with_links_key_and_integer_ids_loads_with_string_ids():
    cluster = topology.load_cluster(DATA / "legacy-links.json")
    assert list(cluster) == ["0", "1"]
    assert cluster.graph["name"] == "legacy-links"


def test_parallel_edges_are_rejected():
    graph = nx.MultiGraph()
    graph.add_node("a", kind="gpu", gpu="h100-sxm")
    graph.add_node("b", kind="gpu", gpu="h100-sxm")
    graph.add_edges_from([("a", "b"), ("a", "b")], kind="nvlink", bandwidth_gb_s=100, latency_us=0)
    with pytest.raises(InvalidInput, match="parallel edges"):
        topology.validate_cluster(graph)


def test_yaml_latency_by_kind_sets_every_edge_of_that_kind():
    cluster = topology.from_spec({"nodes": 2, "node_type": "hgx-h100", "latency_us": {"infiniband": 1.5}})
    latencies = {a["latency_us"] for _, _, a in cluster.edges(data=True) if a["kind"] == "infiniband"}
    assert latencies == {1.5}


# ----------------------------------------------------------------------------------------------- CLI


def _node_link(nodes: list[dict], edges: list[dict]) -> str:
    return json.dumps({"directed": False, "multigraph": False, "graph": {}, "nodes": nodes, "edges": edges})


GPU_A = {"id": "a", "kind": "gpu", "gpu": "h100-sxm"}
GPU_B = {"id": "b", "kind": "gpu", "gpu": "h100-sxm"}
LINK = {"source": "a", "target": "b", "kind": "nvlink", "bandwidth_gb_s": 450, "latency_us": 0}
BAD_FILES = {
    "disconnected": ("c.json", _node_link([GPU_A, GPU_B], []), "disconnected"),
    "no-gpus": ("c.json", _node_link([{"id": "s", "kind": "switch"}], []), "has no GPUs"),
    "unknown-node-kind": ("c.json", _node_link([GPU_A, {"id": "b", "kind": "router"}], [LINK]), "node 'b' kind"),
    "missing-node-kind": ("c.json", _node_link([GPU_A, {"id": "b"}], [LINK]), "node 'b' kind: is missing"),
    "gpu-without-name": ("c.json", _node_link([GPU_A, {"id": "b", "kind": "gpu"}], [LINK]), "node 'b' gpu"),
    "unknown-gpu": ("c.json", _node_link([GPU_A, {**GPU_B, "gpu": "h900"}], [LINK]), "h900"),
    "missing-bandwidth": (
        "c.json",
        _node_link([GPU_A, GPU_B], [{k: v for k, v in LINK.items() if k != "bandwidth_gb_s"}]),
        "bandwidth_gb_s: is missing",
    ),
    "zero-bandwidth": ("c.json", _node_link([GPU_A, GPU_B], [{**LINK, "bandwidth_gb_s": 0}]), "bandwidth_gb_s"),
    "negative-latency": ("c.json", _node_link([GPU_A, GPU_B], [{**LINK, "latency_us": -1}]), "latency_us"),
    "text-bandwidth": ("c.json", _node_link([GPU_A, GPU_B], [{**LINK, "bandwidth_gb_s": "fast"}]), "bandwidth_gb_s"),
    "unknown-edge-kind": ("c.json", _node_link([GPU_A, GPU_B], [{**LINK, "kind": "carrier-pigeon"}]), "kind"),
    "malformed-json": ("c.json", '{"nodes": [', "not valid JSON"),
    "not-node-link": ("c.json", "[1, 2]", "node-link"),
    "malformed-graphml": ("c.graphml", "<graphml><graph>", "not valid GraphML"),
    "malformed-yaml": ("c.yaml", "nodes: [1, 2", "not valid YAML"),
    "yaml-unknown-key": ("c.yaml", "nodes: 2\nnode_type: hgx-h100\ncolour: red\n", "colour"),
    "yaml-bad-node-type": ("c.yaml", "nodes: 2\nnode_type: hgx-h900\n", "node_type"),
    "yaml-zero-nodes": ("c.yaml", "nodes: 0\nnode_type: hgx-h100\n", "nodes"),
    "yaml-not-a-mapping": ("c.yaml", "- 1\n- 2\n", "mapping"),
    "empty": ("c.graphml", "  \n", "is empty"),
    "bad-extension": ("c.txt", "nodes: 1", "must end in"),
}


@needs_cli
@pytest.mark.parametrize("case", BAD_FILES, ids=str)
def test_bad_cluster_file_is_a_one_line_error_with_exit_code_2(tmp_path, capsys, case):
    from roofline_opt.cli import main

    name, text, expected = BAD_FILES[case]
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    assert main(["cluster", "show", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"roofline-opt: error: {path}")
    assert expected in err


@needs_cli
def test_missing_cluster_file_is_exit_code_2(tmp_path, capsys):
    from roofline_opt.cli import main

    assert main(["cluster", "show", str(tmp_path / "nope.graphml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("roofline-opt: error: FILE: must be a catalog cluster name or an existing file.")
    assert f"(no such file {tmp_path / 'nope.graphml'})" in err


@needs_cli
def test_cli_show_json_reports_domains_and_catalog_figures(capsys):
    from roofline_opt.cli import main

    assert main(["cluster", "show", str(EXAMPLES / "pod-4x-hgx-h100.yaml"), "--json"]) == 0
    (h100,) = json.loads(capsys.readouterr().out)["gpu_types"]
    assert (h100["gpu"], h100["gpus"], h100["domain_sizes"]) == ("h100-sxm", 32, [8, 8, 8, 8])
    assert (h100["intra_bytes_per_s"], h100["inter_bytes_per_s"]) == (9e11 / 4, 5e10 / 2)


@needs_cli
def test_cli_show_table_names_link_tiers_and_gpu_type(capsys):
    from roofline_opt.cli import main

    assert main(["cluster", "show", str(EXAMPLES / "torus-4x4.graphml")]) == 0
    out = capsys.readouterr().out
    assert "nvlink" in out and "h100-sxm" in out and "1 x 16" in out


@needs_cli
def test_cli_draw_writes_a_png_and_no_temporary_file(tmp_path):
    from roofline_opt.cli import main

    assert main(["cluster", "draw", str(EXAMPLES / "mixed-h100-a100.yaml"), "--out", str(tmp_path / "c.png")]) == 0
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["c.png"]


@needs_cli
def test_cli_draw_to_an_unknown_image_type_writes_nothing(tmp_path, capsys):
    from roofline_opt.cli import main

    assert main(["cluster", "draw", str(EXAMPLES / "hgx-h100.yaml"), "--out", str(tmp_path / "c.xyz")]) == 2
    assert "--out" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@needs_cli
def test_cli_build_expands_an_inline_spec(tmp_path):
    from roofline_opt.cli import main

    out = tmp_path / "pod.graphml"
    assert main(["cluster", "build", "{nodes: 2, node_type: hgx-b200}", "--out", str(out)]) == 0
    cluster = topology.load_cluster(out)
    assert topology.gpu_counts(cluster) == {"b200": 16}
    assert topology.effective_gpu(cluster, "b200", H100).intra_bytes_per_s == 900e9 / 2
