"""Hostile input files are refused on one line naming the file (and the key): nesting tens of thousands deep, alias
bombs, duplicate keys and node ids, node-link JSON of the wrong shape, oversized files and CSVs of too many rows."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from hardening import EVALUATE, SMALL_QUERY, assert_one_line, run

from roofline_opt import documents, files
from roofline_opt.catalog import REPO_ROOT
from roofline_opt.cli import EXIT_BAD_INPUT
from roofline_opt.errors import MAX_MESSAGE_CHARS

DEEP = 30_000
"""Nesting depth of the hostile files: far beyond Python's recursion limit."""
LLAMA_CARD = (REPO_ROOT / "models" / "llama-3-8b.yaml").read_text()
H100_CARD = (REPO_ROOT / "instances" / "gpus" / "h100-sxm.yaml").read_text()
LLAMA_CONFIG = Path(__file__).parent / "data" / "hf_configs" / "Meta-Llama-3-8B" / "config.json"


def evaluate_model(capsys, path: Path) -> tuple[int, str, str]:
    argv = list(EVALUATE)
    argv[argv.index("--model") + 1] = str(path)
    return run(capsys, *argv)


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """The billion-laughs document: each level a list of ``width`` aliases of the level below."""
    lines = ["l0: &l0 [" + ", ".join(['"lol"'] * width) + "]"]
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]" for i in range(1, levels)]
    return "\n".join(lines) + f"\nname: *l{levels - 1}\n"


# ----------------------------------------------------------------------------------------------- cards and configs


def test_a_card_nested_tens_of_thousands_deep_is_refused(tmp_path, capsys):
    card = tmp_path / "deep.yaml"
    card.write_text("name: " + "[" * DEEP + "]" * DEEP + "\n")

    code, _, err = evaluate_model(capsys, card)

    assert_one_line(err, code, EXIT_BAD_INPUT, "deep.yaml", f"deeper than {files.MAX_NESTING}")


def test_a_config_json_nested_tens_of_thousands_deep_is_refused(tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text('{"a": ' * DEEP + "1" + "}" * DEEP)

    code, _, err = evaluate_model(capsys, config)

    assert_one_line(err, code, EXIT_BAD_INPUT, "config.json", f"deeper than {files.MAX_NESTING}")


def test_brackets_inside_json_strings_do_not_count_as_nesting():
    text = json.dumps({"note": "[" * 1000, "x": {"y": 1}})

    assert files.load_json(text, "f.json") == {"note": "[" * 1000, "x": {"y": 1}}


def test_a_yaml_alias_bomb_in_a_card_field_is_refused_without_printing_it(tmp_path, capsys):
    card = tmp_path / "bomb.yaml"
    card.write_text(alias_bomb())

    code, _, err = evaluate_model(capsys, card)

    assert_one_line(err, code, EXIT_BAD_INPUT, "bomb.yaml", "aliases")
    assert len(err) < MAX_MESSAGE_CHARS + 50


def test_a_narrow_deep_alias_bomb_is_refused_by_its_expanded_size():
    with pytest.raises(
        files.InvalidInput, match=f"more than {files.MAX_YAML_VALUES:,}|more than {files.MAX_YAML_VALUES}"
    ):
        files.load_yaml(alias_bomb(levels=40, width=2), "narrow.yaml")


def test_a_few_ordinary_aliases_are_still_read():
    assert files.load_yaml("a: &x 8\nb: *x\n", "ok.yaml") == {"a": 8, "b": 8}


def test_a_duplicate_key_in_a_yaml_card_is_refused_naming_the_key(tmp_path, capsys):
    card = tmp_path / "dup.yaml"
    card.write_text(LLAMA_CARD + "\nn_layers: 2\n")

    code, _, err = evaluate_model(capsys, card)

    assert_one_line(err, code, EXIT_BAD_INPUT, "dup.yaml: n_layers", "twice")


def test_a_duplicate_key_in_a_gpu_card_is_refused_naming_the_key(tmp_path, capsys):
    card = tmp_path / "gpu.yaml"
    card.write_text(H100_CARD + "\nusd_per_hour: 0.01\n")
    argv = list(EVALUATE)
    argv[argv.index("--gpu") + 1] = str(card)

    code, _, err = run(capsys, *argv)

    assert_one_line(err, code, EXIT_BAD_INPUT, "gpu.yaml: usd_per_hour", "twice")


def test_a_duplicate_key_in_a_config_json_is_refused_naming_the_key(tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text(LLAMA_CONFIG.read_text().rstrip().rstrip("}") + ', "num_hidden_layers": 2}')

    code, _, err = evaluate_model(capsys, config)

    assert_one_line(err, code, EXIT_BAD_INPUT, "config.json: num_hidden_layers", "twice")


def test_a_card_above_the_size_cap_is_refused_before_parsing(tmp_path, capsys):
    card = tmp_path / "big.yaml"
    card.write_text(LLAMA_CARD + "#" * files.MAX_CARD_BYTES)

    code, _, err = evaluate_model(capsys, card)

    assert_one_line(err, code, EXIT_BAD_INPUT, "big.yaml", "larger than 1 MiB")


def test_an_integer_of_thousands_of_digits_in_a_card_is_one_line(tmp_path, capsys):
    card = tmp_path / "digits.yaml"
    card.write_text(LLAMA_CARD.replace("n_layers: 32", "n_layers: " + "9" * 5000))

    code, _, err = evaluate_model(capsys, card)

    assert_one_line(err, code, EXIT_BAD_INPUT, "digits.yaml")
    assert len(err) < MAX_MESSAGE_CHARS + 50


def test_a_huge_value_in_an_error_message_is_cut_short(tmp_path, capsys):
    card = tmp_path / "long.yaml"
    card.write_text(LLAMA_CARD.replace("n_layers: 32", "n_layers: " + "x" * 100_000))

    code, _, err = evaluate_model(capsys, card)

    assert_one_line(err, code, EXIT_BAD_INPUT, "long.yaml: n_layers", "...")
    assert len(err) < MAX_MESSAGE_CHARS + 50


@pytest.fixture
def without_libyaml(monkeypatch):
    """PyYAML as installed without libyaml: every document is parsed by its pure-Python parser."""
    import yaml

    documents._yaml_loader.cache_clear()
    monkeypatch.setattr(yaml, "__with_libyaml__", False)
    yield
    documents._yaml_loader.cache_clear()


def _outcome(text: str) -> object:
    try:
        return files.load_yaml(text, "doc.yaml")
    except files.InvalidInput as exc:
        return str(exc)


HOSTILE_YAML = {
    "deep": "name: " + "[" * DEEP + "]" * DEEP + "\n",
    "bomb": alias_bomb(),
    "narrow bomb": alias_bomb(levels=40, width=2),
    "duplicate key": LLAMA_CARD + "\nn_layers: 2\n",
    "unclosed": "name: [unclosed\n",
    "tab indent": "a:\n\tb: 1\n",
    "aliases": "a: &x [1, {b: 2}]\nc: *x\n",
}


def test_libyaml_and_pure_python_parsing_agree_on_every_catalog_card_and_hostile_document(request):
    cards = sorted((REPO_ROOT / "models").glob("*.yaml")) + sorted((REPO_ROOT / "instances").rglob("*.yaml"))
    texts = [p.read_text() for p in cards] + list(HOSTILE_YAML.values())
    with_c = [_outcome(t) for t in texts]
    assert documents._yaml_loader().__name__ == "CBoundedLoader"  # libyaml did run (PyYAML's wheels carry it)
    request.getfixturevalue("without_libyaml")
    assert [_outcome(t) for t in texts] == with_c
    assert documents._yaml_loader().__name__ == "BoundedLoader"  # the pure-Python parser did run


# ----------------------------------------------------------------------------------------------- cluster files


def cluster_show(capsys, path: Path) -> tuple[int, str, str]:
    return run(capsys, "cluster", "show", str(path))


def node_link(nodes, edges) -> str:
    return json.dumps({"directed": False, "multigraph": False, "graph": {}, "nodes": nodes, "edges": edges})


GPU_NODES = [{"id": "a", "kind": "gpu", "gpu": "h100-sxm"}, {"id": "b", "kind": "gpu", "gpu": "h100-sxm"}]
LINK = {"source": "a", "target": "b", "kind": "nvlink", "bandwidth_gb_s": 450, "latency_us": 0}


def test_node_link_json_whose_nodes_is_a_string_is_refused_naming_nodes(tmp_path, capsys):
    path = tmp_path / "c.json"
    path.write_text(node_link("abc", []))

    code, _, err = cluster_show(capsys, path)

    assert_one_line(err, code, EXIT_BAD_INPUT, "c.json: nodes", "list of objects")


@pytest.mark.parametrize("edges", ["ab", [1, 2], [{"source": "a"}]], ids=["string", "numbers", "no-target"])
def test_node_link_json_with_malformed_edges_is_refused_naming_edges(tmp_path, capsys, edges):
    path = tmp_path / "c.json"
    path.write_text(node_link(GPU_NODES, edges))

    code, _, err = cluster_show(capsys, path)

    assert_one_line(err, code, EXIT_BAD_INPUT, "c.json: edges")


def test_node_link_json_declaring_a_node_twice_is_refused_naming_it(tmp_path, capsys):
    path = tmp_path / "c.json"
    twice = [*GPU_NODES, {"id": "b", "kind": "gpu", "gpu": "a100-80gb"}]
    path.write_text(node_link(twice, [LINK]))

    code, _, err = cluster_show(capsys, path)

    assert_one_line(err, code, EXIT_BAD_INPUT, "node 'b'", "twice")


def test_node_link_json_with_an_edge_given_twice_is_refused(tmp_path, capsys):
    path = tmp_path / "c.json"
    path.write_text(node_link(GPU_NODES, [LINK, dict(LINK, bandwidth_gb_s=1)]))

    code, _, err = cluster_show(capsys, path)

    assert_one_line(err, code, EXIT_BAD_INPUT, "edge 'a'-'b'", "twice")


def test_graphml_declaring_a_node_twice_is_refused_naming_it(tmp_path, capsys):
    path = tmp_path / "c.graphml"
    path.write_text(
        '<?xml version="1.0"?><graphml xmlns="http://graphml.graphdrawing.org/xmlns">'
        '<key id="k" for="node" attr.name="kind" attr.type="string"/>'
        '<key id="g" for="node" attr.name="gpu" attr.type="string"/><graph edgedefault="undirected">'
        '<node id="a"><data key="k">gpu</data><data key="g">h100-sxm</data></node>'
        '<node id="a"><data key="k">gpu</data><data key="g">a100-80gb</data></node></graph></graphml>'
    )

    code, _, err = cluster_show(capsys, path)

    assert_one_line(err, code, EXIT_BAD_INPUT, "node 'a'", "twice")


def test_node_link_json_nested_tens_of_thousands_deep_is_refused(tmp_path, capsys):
    path = tmp_path / "c.json"
    path.write_text('{"nodes": ' + "[" * DEEP + "]" * DEEP + "}")

    code, _, err = cluster_show(capsys, path)

    assert_one_line(err, code, EXIT_BAD_INPUT, "c.json", "deeper than")


def test_a_cluster_yaml_with_a_duplicate_key_is_refused_naming_it(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text("node_type: hgx-h100\nnodes: 2\nnodes: 4\n")

    code, _, err = cluster_show(capsys, path)

    assert_one_line(err, code, EXIT_BAD_INPUT, "c.yaml: nodes", "twice")


@pytest.mark.parametrize("text", ["torus: [100000, 100000]\n", "node_type: hgx-h100\nnodes: 1000000\n"])
def test_a_cluster_yaml_describing_too_many_gpus_is_refused_before_building(tmp_path, capsys, text):
    path = tmp_path / "c.yaml"
    path.write_text(text)

    code, _, err = cluster_show(capsys, path)

    assert_one_line(err, code, EXIT_BAD_INPUT, "c.yaml")


# ----------------------------------------------------------------------------------------------- CSV row caps


def test_evaluate_from_a_csv_above_the_row_cap_is_refused(tmp_path, capsys):
    rows = tmp_path / "rows.csv"
    rows.write_text("model,gpu,tp,pp,batch\n" + "llama-3-8b,h100-sxm,1,1,1\n" * (files.MAX_CSV_ROWS + 1))

    code, _, err = run(capsys, "evaluate", "--from-csv", str(rows))

    assert_one_line(err, code, EXIT_BAD_INPUT, "--from-csv", f"more than {files.MAX_CSV_ROWS:,} rows")


def test_validate_a_csv_above_the_row_cap_is_refused(tmp_path, capsys):
    header = "model,precision,gpu,layout,batch_or_concurrency,input_len,output_len,tok_s_per_request,tok_s_per_gpu"
    rows = tmp_path / "measured.csv"
    rows.write_text(header + "\n" + "x,BF16,H100,TP1,batch 1,1,1,1,1\n" * (files.MAX_CSV_ROWS + 1))

    code, _, err = run(capsys, "validate", "--measured", str(rows))

    assert_one_line(err, code, EXIT_BAD_INPUT, "--measured", "rows")


def test_observed_points_above_their_cap_are_refused_before_solving(tmp_path, capsys):
    from roofline_opt.cli.query_cmds import MAX_OBSERVED_POINTS

    observed = tmp_path / "observed.csv"
    observed.write_text("tok_s_per_request,usd_per_mtok,label\n" + "10,1,x\n" * (MAX_OBSERVED_POINTS + 1))

    code, _, err = run(capsys, "frontier", *SMALL_QUERY, "--observed", str(observed))

    assert_one_line(err, code, EXIT_BAD_INPUT, "--observed", f"more than {MAX_OBSERVED_POINTS:,} rows")


def test_a_fifo_nobody_writes_to_is_refused_instead_of_waiting(tmp_path, capsys):
    fifo = tmp_path / "measured.csv"
    os.mkfifo(fifo)

    code, _, err = run(capsys, "validate", "--measured", str(fifo))

    assert_one_line(err, code, EXIT_BAD_INPUT, "--measured", "FIFO with no writer")


def test_an_endless_device_as_input_is_read_only_up_to_the_cap(tmp_path, capsys):
    zeros = tmp_path / "zeros.csv"
    os.mknod(zeros, 0o666 | stat.S_IFCHR, os.makedev(1, 5))  # like /dev/zero

    code, _, err = run(capsys, "validate", "--measured", str(zeros))

    assert_one_line(err, code, EXIT_BAD_INPUT, "--measured", "larger than 64 MiB")


def test_a_cluster_file_with_more_gpus_than_the_cap_is_refused_before_analysis(tmp_path, capsys):
    from roofline_opt.topology.schema import MAX_CLUSTER_GPUS

    n = MAX_CLUSTER_GPUS + 1
    nodes = [{"id": f"g{i}", "kind": "gpu", "gpu": "h100-sxm"} for i in range(n)]
    edges = [dict(LINK, source=f"g{i}", target=f"g{i + 1}") for i in range(n - 1)]
    path = tmp_path / "c.json"
    path.write_text(node_link(nodes, edges))

    code, _, err = cluster_show(capsys, path)

    assert_one_line(err, code, EXIT_BAD_INPUT, "c.json", f"at most {MAX_CLUSTER_GPUS:,}")


def test_an_inline_cluster_spec_is_parsed_with_the_same_bounds(tmp_path, capsys):
    code, _, err = run(
        capsys, "cluster", "build", "{nodes: 2, nodes: 3, node_type: hgx-h100}", "--out", str(tmp_path / "c.json")
    )

    assert_one_line(err, code, EXIT_BAD_INPUT, "SPEC: nodes", "twice")
    assert list(tmp_path.iterdir()) == []


def test_a_csv_row_with_more_fields_than_the_header_is_refused_not_shifted(tmp_path, capsys):
    rows = tmp_path / "rows.csv"
    rows.write_text("model,gpu,tp,pp,batch\nllama-3-8b,h100-sxm,1,1,1,8\n")

    code, _, err = run(capsys, "evaluate", "--from-csv", str(rows))

    assert_one_line(err, code, EXIT_BAD_INPUT, "line 2 has 6 fields")


def test_a_csv_line_of_too_many_fields_is_refused_before_parsing(tmp_path, capsys):
    rows = tmp_path / "rows.csv"
    rows.write_text(",".join(f"c{i}" for i in range(100_000)) + "\n")

    code, _, err = run(capsys, "evaluate", "--from-csv", str(rows))

    assert_one_line(err, code, EXIT_BAD_INPUT, f"more than {files.MAX_CSV_COLUMNS} fields")


def test_a_csv_with_a_byte_order_mark_is_read(tmp_path, capsys):
    rows = tmp_path / "rows.csv"
    rows.write_bytes("\ufeffmodel,gpu,tp,pp,batch\nllama-3-8b,h100-sxm,1,1,1\n".encode())

    code, out, err = run(capsys, "evaluate", "--from-csv", str(rows))

    assert (code, err) == (0, "")
    assert "llama-3-8b" in out


def test_a_control_character_in_a_card_is_one_line(tmp_path, capsys):
    card = tmp_path / "nul.yaml"
    card.write_text("\x00" + LLAMA_CARD)

    code, _, err = evaluate_model(capsys, card)

    assert_one_line(err, code, EXIT_BAD_INPUT, "nul.yaml", "not valid YAML")


@pytest.mark.parametrize(
    ("text", "words"),
    [(alias_bomb(), ("fleet.yaml: ", "aliases")), ("gpus: 8\ngpus: 16\n", ("fleet.yaml: gpus", "twice"))],
    ids=["alias-bomb", "duplicate-key"],
)
def test_a_hostile_fleet_file_is_refused_on_one_line(tmp_path, capsys, text, words):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(text)

    code, _, err = run(capsys, "plan", str(fleet))

    assert_one_line(err, code, EXIT_BAD_INPUT, *words)
