"""Report: answers turned into what a person reads: terminal tables, JSON, progress bars and plots.

May import: the base modules (errors, checks, files), numpy, pandas and matplotlib. Nothing here solves or computes
physics; every figure it shows was computed by the evaluator upstream.
"""

from roofline_opt.report.plots import PLOT_AXES, dollar_axis, plot_answers, plot_frontier
from roofline_opt.report.progress import ProgressBar
from roofline_opt.report.tables import (
    MISSING_CELL,
    format_number,
    frame_to_table,
    placement_text,
    to_json,
    to_json_object,
)

__all__ = [
    "PLOT_AXES",
    "dollar_axis",
    "plot_answers",
    "MISSING_CELL",
    "ProgressBar",
    "format_number",
    "frame_to_table",
    "placement_text",
    "plot_frontier",
    "to_json",
    "to_json_object",
]
