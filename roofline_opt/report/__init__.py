"""Report: answers turned into what a person reads: terminal tables, JSON, progress bars and plots.

May import: the base modules (errors, checks, files), numpy, pandas and matplotlib. Nothing here solves or computes
physics; every figure it shows was computed by the evaluator upstream. Names load lazily (from the module that holds
them) so that building the command line, which reads ``PLOT_AXES``, does not import pandas or matplotlib.
"""

from __future__ import annotations

import importlib
from typing import Any

PLOT_AXES = ("cost", "gpu")
"""Frontier plot axes: ``cost`` ($/Mtok against tok/s per request) or ``gpu`` (tok/s per GPU against per user)."""

_HOMES = {
    "frame_to_markdown": "facets",
    "plot_facets": "facets",
    "dollar_axis": "plots",
    "plot_answers": "plots",
    "plot_frontier": "plots",
    "ProgressBar": "progress",
    "MISSING_CELL": "tables",
    "format_number": "tables",
    "frame_to_table": "tables",
    "records_table": "tables",
    "placement_text": "tables",
    "to_json": "tables",
    "to_json_object": "tables",
    "PlottedRow": "validation_plot",
    "plot_validation": "validation_plot",
}

__all__ = ["PLOT_AXES", *_HOMES]


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(f"roofline_opt.report.{_HOMES[name]}"), name)
    msg = f"module 'roofline_opt.report' has no attribute {name!r}"
    raise AttributeError(msg)
