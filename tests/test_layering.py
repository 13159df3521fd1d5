"""The package reads as a pipeline from data to answer: each layer imports only the layers below it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "roofline_opt"

LAYERS = {
    "base": 0,
    "physics": 1,
    "catalog": 2,
    "topology": 2,
    "optimize": 3,
    "report": 4,
    "deploy": 4,
    "api": 5,
    "fidelity": 6,
    "study": 6,
    "simulate": 3,
    "cli": 7,
}
"""Rank of each unit: a module may import its own unit and units of a lower rank, never a peer or a higher rank."""

BASE_MODULES = {"errors", "checks", "documents", "files"}
FOREIGN_TO_PHYSICS = ("pyomo", "highspy", "pandas", "networkx", "matplotlib", "yaml", "dask")


def _unit(module: str) -> str | None:
    """The layer unit of a dotted module name inside roofline_opt (None for the package facade itself)."""
    parts = module.split(".")
    if parts[0] != "roofline_opt" or len(parts) == 1:
        return None
    head = parts[1]
    return "base" if head in BASE_MODULES else head


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[str]:
    """Every module this file imports, at module level or inside functions (lazy imports count too)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
            if node.module == "roofline_opt":
                found += [f"roofline_opt.{alias.name}" for alias in node.names]
    return found


SOURCES = sorted(p for p in PACKAGE.rglob("*.py") if _unit(_module_name(p)) not in (None, "__main__"))


def test_every_module_belongs_to_a_known_layer() -> None:
    unknown = {_module_name(p) for p in SOURCES if _unit(_module_name(p)) not in LAYERS}
    assert not unknown, f"add these to LAYERS in tests/test_layering.py: {sorted(unknown)}"


def _violations(module: str, imported: list[str]) -> list[str]:
    """Imports of ``module`` that reach a peer unit or a higher layer."""
    unit = _unit(module)
    bad = []
    for name in imported:
        other = _unit(name)
        if other is not None and other != unit and LAYERS[other] >= LAYERS[unit]:
            bad.append(f"{module} ({unit}, layer {LAYERS[unit]}) imports {name} ({other}, layer {LAYERS[other]})")
    return bad


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: _module_name(p))
def test_module_imports_only_lower_layers(path: Path) -> None:
    assert _violations(_module_name(path), _imports(path)) == []


def test_the_layer_rule_refuses_upward_and_peer_imports_and_allows_downward_ones() -> None:
    assert _violations("roofline_opt.physics.evaluator", ["roofline_opt.optimize.queries"])
    assert _violations("roofline_opt.catalog.cards", ["roofline_opt.topology"])
    assert _violations("roofline_opt.optimize.queries", ["roofline_opt.cli"])
    assert _violations("roofline_opt.cli.query_cmds", ["roofline_opt.physics.evaluator", "roofline_opt.errors"]) == []


@pytest.mark.parametrize("path", sorted((PACKAGE / "physics").rglob("*.py")), ids=lambda p: p.name)
def test_physics_imports_no_solver_table_or_graph_library(path: Path) -> None:
    foreign = [m for m in _imports(path) if m.split(".")[0] in FOREIGN_TO_PHYSICS]
    assert not foreign, f"{path.name} imports {foreign}"


def test_importing_the_evaluator_loads_no_solver_pandas_or_networkx() -> None:
    code = (
        "import sys, roofline_opt.physics.evaluator; "
        f"print(sorted(m for m in {FOREIGN_TO_PHYSICS!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


THIRD_PARTY_ALLOWED = {
    "base": {"yaml", "pandas", "matplotlib"},  # files.py: YAML, CSV frames and figures, each imported on use
    "physics": {"numpy"},
    "catalog": {"yaml"},
    "topology": {"networkx", "numpy", "yaml"},
    "optimize": {"numpy", "pandas", "pyomo", "highspy", "networkx"},
    "report": {"numpy", "pandas", "matplotlib", "plotly"},  # plotly: the optional html extra, imported on use
    "deploy": {"yaml"},
    "api": {"numpy", "pandas"},
    "fidelity": {"numpy", "pandas", "matplotlib", "yaml"},
    "study": {"numpy", "pandas", "pyarrow", "dask", "distributed"},
    "simulate": {"numpy"},
}
"""The third-party packages each layer may import (the CLI may import any), checked against the imports in the code
(ast), not against what the docstrings say."""


def _third_party(imported: list[str]) -> set[str]:
    return {m.split(".")[0] for m in imported} - set(sys.stdlib_module_names) - {"roofline_opt", "__future__"}


@pytest.mark.parametrize("path", [p for p in SOURCES if _unit(_module_name(p)) != "cli"], ids=lambda p: _module_name(p))
def test_module_imports_only_the_third_party_packages_of_its_layer(path: Path) -> None:
    unit = _unit(_module_name(path))
    assert _third_party(_imports(path)) - THIRD_PARTY_ALLOWED[unit] == set()


def test_the_import_scan_sees_lazy_and_from_imports_in_the_code(tmp_path: Path) -> None:
    source = tmp_path / "module.py"
    source.write_text(
        '"""May import: numpy only (a docstring says so, the code does otherwise)."""\n'
        "import numpy as np\n"
        "def later():\n"
        "    import pandas\n"
        "    from roofline_opt import api\n"
        "    from roofline_opt.optimize.queries import prepare\n"
    )

    imported = _imports(source)

    assert _third_party(imported) == {"numpy", "pandas"}
    assert _violations("roofline_opt.physics.module", imported) == [
        "roofline_opt.physics.module (physics, layer 1) imports roofline_opt.api (api, layer 5)",
        "roofline_opt.physics.module (physics, layer 1) imports roofline_opt.optimize.queries (optimize, layer 3)",
    ]
