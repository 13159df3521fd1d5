"""Report: answers turned into what a person reads: terminal tables, JSON, progress bars and plots.

May import: the base modules (errors, checks, files), numpy, pandas and matplotlib. Nothing here solves or computes
physics; every figure it shows was computed by the evaluator upstream.
"""

from roofline_opt.report.facets import frame_to_markdown, plot_facets
from roofline_opt.report.plots import plot_frontier
from roofline_opt.report.progress import ProgressBar
from roofline_opt.report.tables import MISSING_CELL, format_number, frame_to_table, to_json, to_json_object
from roofline_opt.report.validation_plot import PlottedRow, plot_validation

__all__ = [
    "MISSING_CELL",
    "PlottedRow",
    "ProgressBar",
    "format_number",
    "frame_to_markdown",
    "frame_to_table",
    "plot_facets",
    "plot_frontier",
    "plot_validation",
    "to_json",
    "to_json_object",
]
