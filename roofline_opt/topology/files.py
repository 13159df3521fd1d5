"""Cluster files: GraphML, node-link JSON and compact YAML read and validated; GraphML and JSON written."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from collections.abc import Callable, Collection
from pathlib import Path

import networkx as nx
import yaml

from roofline_opt.errors import InvalidInput
from roofline_opt.files import write_text_atomic
from roofline_opt.topology.builders import from_spec
from roofline_opt.topology.schema import validate_cluster


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
