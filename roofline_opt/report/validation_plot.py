"""The validation plot: per accelerator, measured points against the bound's frontier (tok/s per GPU vs per user)."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from roofline_opt.files import save_figure_atomic

COLOURS = {True: "tab:green", False: "tab:red"}
MARKERS = {"point": "o", "frontier": "D", "throughput ceiling": "v", "speed ceiling": ">"}


@dataclass(frozen=True)
class PlottedRow:
    """One verdict: the row's frontier (its layout over every batch that fits) and the measured point.

    ``tok_s_per_user`` / ``tok_s_per_gpu`` place the point; a ceiling check without a measured speed is placed at
    the speed of the batch its verdict rests on."""

    label: str
    check: str
    bound_holds: bool
    tok_s_per_user: float
    tok_s_per_gpu: float
    curve_tok_s_per_user: np.ndarray
    curve_tok_s_per_gpu: np.ndarray


def plot_validation(panels: dict[str, Sequence[PlottedRow]], path: str | os.PathLike[str], field: str) -> None:
    """One panel per accelerator; each row's frontier as a thin line, its measured point coloured by the verdict
    (green: the bound holds, red: it does not), marker by the kind of check, labelled with its CSV line."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    cols = min(4, max(len(panels), 1))
    rows = max(math.ceil(len(panels) / cols), 1)
    figure = Figure(figsize=(4.2 * cols, 3.8 * rows + 0.6), layout="constrained")
    axes = figure.subplots(rows, cols, squeeze=False)
    for ax, (gpu, plotted) in zip(axes.flat, panels.items(), strict=False):
        for r in plotted:
            colour = COLOURS[r.bound_holds]
            ax.plot(r.curve_tok_s_per_user, r.curve_tok_s_per_gpu, "-", lw=0.8, color=colour, alpha=0.35)
            ax.scatter(
                [r.tok_s_per_user],
                [r.tok_s_per_gpu],
                marker=MARKERS[r.check],
                s=36,
                color=colour,
                edgecolors="k",
                linewidths=0.4,
                zorder=3,
            )
            ax.annotate(
                r.label, (r.tok_s_per_user, r.tok_s_per_gpu), xytext=(3, 3), textcoords="offset points", fontsize=6
            )
            _tie(ax, r, colour)
        ax.set_xscale("log")
        ax.set_yscale("log")
        plain = FuncFormatter(lambda value, _: f"{value:g}")
        for axis, limits in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            axis.set_major_formatter(plain)
            axis.set_minor_locator(LogLocator(base=10, subs=(2.0, 5.0)))
            few_decades = math.log10(max(limits) / min(limits)) < 1.5
            axis.set_minor_formatter(plain if few_decades else NullFormatter())
        ax.set_title(gpu, fontsize=10)
        ax.set_xlabel("tok/s per user", fontsize=8)
        ax.set_ylabel("output tok/s per GPU", fontsize=8)
        ax.tick_params(which="both", labelsize=7)
        ax.grid(True, which="both", alpha=0.25)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    handles = [Line2D([], [], color=c, lw=3, label=f"bound {'holds' if k else 'fails'}") for k, c in COLOURS.items()]
    handles += [Line2D([], [], ls="", marker=m, color="gray", label=k) for k, m in MARKERS.items()]
    bound_line = "the bound on the row's layout (peak FLOP/s and HBM)"
    handles.append(Line2D([], [], color="gray", lw=0.8, label=bound_line))
    handles.append(Line2D([], [], color="gray", lw=0.6, ls=":", label="a point to its own bound at its speed"))
    # as many legend columns as the figure's width holds (two panels are too narrow for one row of eight)
    figure.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 2 * cols), fontsize=8)
    figure.suptitle("measured points (labelled by CSV line) against the roofline; below the line = bounded")
    save_figure_atomic(figure, path, field)


def _tie(ax, r: PlottedRow, colour: str) -> None:
    """Tie a point to its own curve: a dotted line to the bound at the point's speed, and the point's CSV line
    number at the curve's fast end, so that among many curves each point's is found."""
    x, y = np.asarray(r.curve_tok_s_per_user, float), np.asarray(r.curve_tok_s_per_gpu, float)
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if keep.sum() < 2:
        return
    x, y = x[keep], y[keep]
    order = np.argsort(x)
    x, y = x[order], y[order]
    if x[0] <= r.tok_s_per_user <= x[-1]:
        bound = float(np.exp(np.interp(np.log(r.tok_s_per_user), np.log(x), np.log(y))))
        ax.plot([r.tok_s_per_user] * 2, [r.tok_s_per_gpu, bound], ":", lw=0.6, color=colour, alpha=0.8)
    ax.annotate(
        r.label, (x[-1], y[-1]), xytext=(2, -2), textcoords="offset points", fontsize=5, color=colour, alpha=0.8
    )
