"""Start-up: a command imports what it needs when it needs it (behaviour, not timing: see benchmarks/startup.py)."""

from __future__ import annotations

import math
import subprocess
import sys

import pandas as pd
import pytest

from roofline_opt import report
from roofline_opt.cli import COMMANDS, build_parser

HEAVY = ("pyomo", "pandas", "networkx", "highspy", "matplotlib")
SMALL_QUERY = ["--model", "llama-3-8b", "--gpu", "h100-sxm", "--tp-degrees", "1", "--pp-degrees", "1"]


def modules_after(argv: list[str]) -> set[str]:
    """Modules imported by running the CLI with ``argv`` in a fresh interpreter (dotted names and top-level names)."""
    code = (
        "import sys\n"
        "from roofline_opt.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "names = {m.split('.')[0] for m in sys.modules} | set(sys.modules)\n"
        "print(' '.join(sorted(names)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(out.split("\n")[-2].split())


@pytest.mark.parametrize("argv", [["--help"], ["fastest", "--help"], ["cluster", "show", "--help"]])
def test_help_imports_no_solver_dataframe_or_graph_library(argv):
    assert modules_after(argv).isdisjoint(HEAVY)


def test_the_command_list_imports_no_command_module_numpy_or_yaml():
    loaded = modules_after(["--help"])

    assert loaded.isdisjoint({"numpy", "yaml"})
    assert not {m for m in loaded if m.startswith("roofline_opt.cli.") and m != "roofline_opt.cli.helpfmt"}


@pytest.mark.parametrize("command", ["models", "gpus"])
def test_the_catalog_listings_import_no_numpy_dataframe_or_solver(command):
    assert modules_after([command]).isdisjoint({"numpy", *HEAVY})


def test_a_query_still_imports_the_solver_when_it_solves():
    assert {"pyomo", "highspy"} <= modules_after(["fastest", *SMALL_QUERY])


def test_a_query_imports_pyomo_core_not_pyomo_environ_with_every_plugin():
    loaded = modules_after(["fastest", *SMALL_QUERY])

    assert "pyomo.core" in loaded
    assert "pyomo.environ" not in loaded


def test_an_answer_is_printed_without_pandas_graphs_or_plots():
    loaded = modules_after(["cheapest", *SMALL_QUERY, "--min-tok-s", "50"])

    assert loaded.isdisjoint({"pandas", "networkx", "matplotlib"})


def test_only_the_command_run_has_its_module_imported():
    loaded = modules_after(["gpus"])

    assert "roofline_opt.cli.catalog_cmds" in loaded
    assert not loaded & {f"roofline_opt.cli.{module}" for module, _ in COMMANDS.values() if module != "catalog_cmds"}


def test_the_command_registry_lists_every_command_the_modules_register_in_help_order():
    assert list(_subparser_action(build_parser()).choices) == list(COMMANDS)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_command_built_alone_has_the_same_help_as_in_the_whole_parser(command):
    alone, whole = build_parser([command]), build_parser()

    assert alone.format_help() == whole.format_help()
    assert _subparser(alone, command).format_help() == _subparser(whole, command).format_help()


def _subparser_action(parser):
    return next(a for a in parser._actions if a.dest == "command")


def _subparser(parser, name: str):
    return _subparser_action(parser).choices[name]


def test_records_print_as_the_same_table_as_their_data_frame():
    records = [
        {"name": "a", "count": 3, "share": 0.125, "gap": None, "note": None, "ok": True, "mixed": 1, "nan": math.nan},
        {"name": "bb", "count": 12, "share": math.nan, "gap": 2.5, "note": None, "ok": False, "mixed": "x", "nan": 1},
    ]

    assert report.records_table(records) == report.frame_to_table(pd.DataFrame(records))
