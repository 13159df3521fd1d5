"""Cluster files: GraphML, node-link JSON and compact YAML read and validated; GraphML and JSON written."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import networkx as nx

from roofline_opt import checks, files
from roofline_opt.errors import InvalidInput
from roofline_opt.topology.builders import from_spec
from roofline_opt.topology.schema import validate_cluster


def _graphml_node_ids(text: str, source: str) -> None:
    """Refuse a GraphML file that declares one node id twice (networkx would merge them, changing a GPU's type)."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise InvalidInput(source, f"is not valid GraphML: {exc}") from exc
    seen: set[str | None] = set()  # a node without an id too: the GraphML reader refuses it after
    for element in root.iter():
        if isinstance(element.tag, str) and element.tag.rsplit("}", 1)[-1] == "node":
            node = element.get("id")
            if node in seen:
                raise InvalidInput(f"{source}: node {node!r}", "is declared twice: give each node id once")
            seen.add(node)


def _read_graphml(text: str, source: str) -> nx.Graph:
    _graphml_node_ids(text, source)
    try:
        return nx.parse_graphml(text)
    except (ET.ParseError, nx.NetworkXError, ValueError, KeyError, TypeError) as exc:
        raise InvalidInput(source, f"is not valid GraphML: {exc}") from exc


def _node_link_shape(data: Any, source: str) -> str:
    """Check the node-link shape networkx assumes (lists of objects, unique node ids); returns the edges key."""
    if not isinstance(data, dict) or "nodes" not in data:
        raise InvalidInput(source, "must be networkx node-link JSON: an object with 'nodes' and 'edges'")
    edges = "links" if "links" in data and "edges" not in data else "edges"
    if not isinstance(data.get("graph", {}), dict):
        msg = f"must be an object of graph attributes. Got {checks.shown(data['graph'])} instead."
        raise InvalidInput(f"{source}: graph", msg)
    seen: set[Any] = set()
    nodes = data["nodes"]
    if not isinstance(nodes, list) or not all(isinstance(n, dict) and "id" in n for n in nodes):
        msg = f"must be a list of objects each with an 'id'. Got {checks.shown(nodes)} instead."
        raise InvalidInput(f"{source}: nodes", msg)
    for node in nodes:
        key = json.dumps(node["id"], sort_keys=True)
        if key in seen:
            raise InvalidInput(
                f"{source}: node {checks.shown(node['id'])}", "is declared twice: give each node id once"
            )
        seen.add(key)
    links = data.get(edges, [])
    if not isinstance(links, list) or not all(isinstance(e, dict) and {"source", "target"} <= e.keys() for e in links):
        msg = f"must be a list of objects each with 'source' and 'target'. Got {checks.shown(links)} instead."
        raise InvalidInput(f"{source}: {edges}", msg)
    pairs: set[frozenset[str]] = set()
    for link in links:
        pair = frozenset(json.dumps(link[end], sort_keys=True) for end in ("source", "target"))
        if pair in pairs and not data.get("multigraph"):
            where = f"{source}: edge {checks.shown(link['source'])}-{checks.shown(link['target'])}"
            raise InvalidInput(where, "is given twice: merge the two into one edge (summed bandwidth_gb_s)")
        pairs.add(pair)
    return edges


def _read_node_link(text: str, source: str) -> nx.Graph:
    data = files.load_json(text, source)
    edges = _node_link_shape(data, source)
    try:
        return nx.node_link_graph(data, directed=False, multigraph=True, edges=edges)
    except (nx.NetworkXError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InvalidInput(source, f"is not valid node-link JSON: {exc}") from exc


def _read_spec(text: str, source: str) -> nx.Graph:
    return from_spec(files.load_yaml(text, source), source)


_READERS: dict[str, Callable[[str, str], nx.Graph]] = {
    ".graphml": _read_graphml,
    ".json": _read_node_link,
    ".yaml": _read_spec,
    ".yml": _read_spec,
}


def is_inline_spec(text: str | os.PathLike[str]) -> bool:
    """Whether a cluster argument is an inline compact mapping (``{nodes: 2, node_type: hgx-h100}``) rather than a
    file name: it starts with ``{`` and names no existing file. Never asks the file system about a name longer than a
    file name may be (a 300-character spec is still a spec)."""
    return isinstance(text, str) and text.lstrip().startswith("{") and not os.path.isfile(text)


def load_inline_spec(text: str, field: str, known_gpus: Collection[str] | None = None) -> nx.Graph:
    """The cluster an inline compact mapping describes, validated (errors name ``field``)."""
    if len(text) > files.MAX_CARD_BYTES:
        raise InvalidInput(field, f"is longer than {files.MAX_CARD_BYTES:,} characters, the limit for an inline spec")
    return validate_cluster(from_spec(files.load_yaml(text, field), field), known_gpus, field)


def load_cluster(path: str | os.PathLike[str], known_gpus: Collection[str] | None = None) -> nx.Graph:
    """Read and validate a cluster file (.graphml, .json node-link, .yaml/.yml compact form) or an inline compact
    mapping (see is_inline_spec)."""
    if is_inline_spec(path):
        return load_inline_spec(str(path), "cluster", known_gpus)
    path = Path(path)
    source = str(path)
    reader = _READERS.get(path.suffix.lower())
    if reader is None:
        msg = f"must end in {', '.join(_READERS)}. Got {path.suffix or 'no extension'!r} instead."
        raise InvalidInput(source, msg)
    text = files.read_text(path, source, files.MAX_CLUSTER_BYTES, "a cluster file")
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
    files.write_text_atomic(path, writer(cluster), field)
