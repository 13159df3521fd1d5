"""Study summaries: a faceted line plot (one panel per facet, one line per setting) and markdown tables."""

from __future__ import annotations

import math
import os

import pandas as pd

from roofline_opt.files import save_figure_atomic
from roofline_opt.report.tables import MISSING_CELL

MAX_PANEL_COLUMNS = 3


def plot_facets(
    frame: pd.DataFrame,
    path: str | os.PathLike[str],
    *,
    x: str,
    y: str,
    facet: str,
    line: str,
    x_label: str,
    title: str,
    log_y: bool = False,
    field: str = "--plot",
) -> None:
    """Panels of ``y`` against ``x`` per value of ``facet``, one marked line per value of ``line``; shared axes."""
    from matplotlib.figure import Figure

    facets = list(dict.fromkeys(frame[facet])) or [title]
    cols = min(MAX_PANEL_COLUMNS, len(facets))
    rows = math.ceil(len(facets) / cols)
    figure = Figure(figsize=(4.2 * cols + 1.5, 3.2 * rows + 0.8), layout="constrained")
    axes = figure.subplots(rows, cols, squeeze=False, sharex=True, sharey=True)
    style = series_styles(list(dict.fromkeys(frame[line])))
    for ax, name in zip(axes.flat, facets, strict=False):
        panel = frame[frame[facet] == name]
        for label, points in panel.groupby(line, sort=False):
            points = points.sort_values(x)
            colour, marker = style[label]
            ax.plot(points[x], points[y], "-", marker=marker, ms=4, lw=1.3, color=colour, label=str(label))
        ax.set_title(str(name), fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        if log_y:
            ax.set_yscale("log")
    for ax in axes.flat[len(facets) :]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel(x_label)
    for ax in axes[:, 0]:
        ax.set_ylabel(y)
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=c, marker=m, ms=4, lw=1.3, label=str(k)) for k, (c, m) in style.items()]
    if handles:  # every series, whichever panels it appears in, with the same colour and marker everywhere
        figure.legend(
            handles=handles, loc="outside lower center", fontsize=8, ncols=min(max(3, cols * 2), len(handles))
        )
    figure.suptitle(title)
    save_figure_atomic(figure, path, field)


SERIES_MARKERS = ("o", "s", "D", "^", "v", "P", "X")
"""Markers cycled beside the 20 colours of tab20: 7 and 20 are coprime, so 140 series differ in colour or marker."""


def series_styles(labels: list) -> dict:
    """A (colour, marker) per series label, distinct for up to 140 series."""
    from matplotlib import colormaps

    tab20 = colormaps["tab20"]
    colours = [tab20(i) for i in range(tab20.N)]  # its 20 listed colours, as RGBA
    return {label: (colours[i % 20], SERIES_MARKERS[i % len(SERIES_MARKERS)]) for i, label in enumerate(labels)}


def frame_to_markdown(frame: pd.DataFrame) -> str:
    """A GitHub markdown table of ``frame`` (cells as given; blank cells as the missing-cell mark)."""

    def cell(value: object) -> str:
        blank = value is None or (isinstance(value, float) and math.isnan(value))
        return MISSING_CELL if blank else str(value).replace("|", "\\|")

    header = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *body])
