"""Plots of answers: frontiers as the achievable setups (markers joined by steps), the preferred point, observed
points, dollar tick labels on logarithmic axes whatever their range."""

from __future__ import annotations

import os
from typing import Any

import pandas as pd

from roofline_opt.files import save_figure_atomic

"""cost: tok/s per request vs $/Mtok (log), as in the paper; gpu: tok/s per request vs tok/s per GPU."""

_AXES = {
    "cost": ("usd_per_mtok", "$ per million output tokens (log scale)"),
    "gpu": ("tok_s_per_gpu", "output tokens per second per GPU (log scale)"),
}


def dollars(value: float, digits: int = 2) -> str:
    """A tick label in dollars with ``digits`` significant digits at least: $0.005, $0.25, $3, $1.5k."""
    if value <= 0:
        return ""
    if value >= 1000:
        return f"${value / 1000:.{digits}g}k"
    return f"${value:.{max(digits, 1)}g}" if value < 1 else f"${value:.{max(digits, 3)}g}"


def plain(value: float, digits: int = 2) -> str:
    """A tick label as a plain number: 0.5, 20, 300, 4000."""
    return f"{value:.{max(digits, 4)}g}" if value > 0 else ""


def log_axis_labels(axis: Any, text: Any = None) -> None:
    """Labels on a log axis in ``text`` form (dollars by default): on decades, and on the 2x/5x minor ticks
    whenever the range spans few decades, so that a narrow range is never left without a labelled tick."""
    from matplotlib.ticker import LogFormatter

    text = dollars if text is None else text

    class Labels(LogFormatter):
        """LogFormatter's choice of which ticks to label, with as many digits as tell neighbouring ticks apart."""

        digits = 2

        def set_locs(self, locs: Any = None) -> None:
            super().set_locs(locs)
            shown = [x for x in (locs if locs is not None else []) if x > 0]
            self.digits = next((d for d in range(2, 9) if len({text(x, d) for x in shown}) == len(shown)), 9)

        def __call__(self, x: float, pos: int | None = None) -> str:
            return text(x, self.digits) if super().__call__(x, pos) else ""

    axis.set_major_formatter(Labels(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
    axis.set_minor_formatter(Labels(labelOnlyBase=False, minor_thresholds=(2, 0.5)))


def dollar_axis(axis: Any) -> None:
    """Dollar labels on a log axis over any range."""
    log_axis_labels(axis, dollars)


def plot_frontier(
    frame: pd.DataFrame,
    path: str | os.PathLike[str],
    *,
    title: str,
    preferred_label: str | None = None,
    observed: pd.DataFrame | None = None,
    notebook: pd.DataFrame | None = None,
    axes: str = "cost",
    field: str = "--plot",
) -> None:
    """The frontier's setups as markers; on the cost axes a step line gives the least $/Mtok at each speed or faster
    (only the marked setups are achievable, nothing between them); the preferred point starred and annotated;
    observed points (columns tok_s_per_request, usd_per_mtok, optional label) overlaid as crosses, and the paper
    notebook's points (same columns) as diamonds."""
    from matplotlib.figure import Figure

    y_field, y_label = _AXES[axes]
    figure = Figure(figsize=(9, 5.5), layout="constrained")
    ax = figure.add_subplot()
    x, y = frame["tok_s_per_request"], frame[y_field]
    if axes == "cost":
        ax.step(x, y, where="pre", lw=1.0, color="0.55", label="least $/Mtok at that speed or faster")
    _interval_band(ax, frame, y_field)
    _setup_markers(ax, frame, y_field)
    _mark_preferred(ax, frame, y_field, preferred_label)
    if observed is not None and len(observed) and axes == "cost":
        _overlay(ax, observed, "x", "k", "observed (serving provider)")
    if notebook is not None and len(notebook) and axes == "cost":
        _overlay(ax, notebook, "D", "C2", "the paper's notebook")
    ax.set_yscale("log")
    log_axis_labels(ax.yaxis, dollars if axes == "cost" else plain)
    ax.set_xlabel("output tokens per second per request (per user)")
    ax.set_ylabel(y_label)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left" if axes == "cost" else "lower left", fontsize=8)
    save_figure_atomic(figure, path, field)


LOG_RANGE = 3.0
"""Answers whose costs span less than this factor are drawn on a linear cost axis from $0."""
SERIES_MARKERS = ("o", "D", "s", "^", "v", "P", "X", "*", "h", "p")
"""Marker per weight precision, so that series differ in shape as well as colour."""


BAND_LABEL = "10-90% of measured/estimate on the profile's validation rows (not a confidence interval)"


def _interval_ends(frame: pd.DataFrame, y_field: str) -> tuple[Any, Any, Any, Any] | None:
    """(x, y) at the low and at the high measured/estimate ratio of each row: speeds and per-GPU throughput move
    with the ratio, prices against it; None without interval columns (the paper preset)."""
    names = ("tok_s_per_request_low", "tok_s_per_request_high", f"{y_field}_low", f"{y_field}_high")
    if not all(n in frame for n in names) or frame[list(names)].isna().any().any():
        return None
    rising = y_field != "usd_per_mtok"
    y_low = frame[f"{y_field}_low"] if rising else frame[f"{y_field}_high"]
    y_high = frame[f"{y_field}_high"] if rising else frame[f"{y_field}_low"]
    return frame["tok_s_per_request_low"], y_low, frame["tok_s_per_request_high"], y_high


def _interval_band(ax: Any, frame: pd.DataFrame, y_field: str) -> None:
    """The rows' intervals as a shaded band: the frontier moved to the low and to the high ratio, joined."""
    ends = _interval_ends(frame, y_field)
    if ends is None:
        return
    x_low, y_low, x_high, y_high = (list(v) for v in ends)
    if len(frame) == 1:
        ax.plot(x_low + x_high, y_low + y_high, color="C0", alpha=0.35, lw=4, label=BAND_LABEL)
        return
    ax.fill(x_low + x_high[::-1], y_low + y_high[::-1], color="C0", alpha=0.12, lw=0, label=BAND_LABEL)


def _setup_markers(ax: Any, frame: pd.DataFrame, y_field: str) -> None:
    """The frontier's setups as markers, one colour per accelerator and one shape per weight precision, so that a
    mixed-GPU or mixed-precision frontier shows what each point runs on."""
    gpus = list(dict.fromkeys(frame["gpu"])) if "gpu" in frame else [None]
    bits = sorted(frame["weight_bits"].unique()) if "weight_bits" in frame else [None]
    for gi, gpu in enumerate(gpus):
        for bi, b in enumerate(bits):
            mask = pd.Series(True, index=frame.index)
            if gpu is not None:
                mask &= frame["gpu"] == gpu
            if b is not None:
                mask &= frame["weight_bits"] == b
            if not mask.any():
                continue
            label = " ".join(t for t in (gpu, None if b is None else f"{b}-bit") if t) or "optimal setups"
            ax.plot(
                frame.loc[mask, "tok_s_per_request"],
                frame.loc[mask, y_field],
                SERIES_MARKERS[bi % 10],
                ms=5,
                color=f"C{gi % 10}",
                label=f"{label} (achievable setups)",
                zorder=3,
                linestyle="none",
            )


def plot_answers(frame: pd.DataFrame, path: str | os.PathLike[str], *, title: str, field: str = "--plot") -> None:
    """The answers of a query (best first) on the cost axes, each labelled with its rank and layout."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 5), layout="constrained")
    ax = figure.add_subplot()
    ax.plot(frame["tok_s_per_request"], frame["usd_per_mtok"], "o", ms=6, color="C0")
    ends = _interval_ends(frame, "usd_per_mtok")
    if ends is not None:  # each answer's interval: a segment from its low to its high measured/estimate ratio
        for i, (xl, yl, xh, yh) in enumerate(zip(*ends, strict=True)):
            ax.plot([xl, xh], [yl, yh], color="C0", alpha=0.35, lw=3, label=BAND_LABEL if i == 0 else None)
        ax.legend(loc="upper right", fontsize=7)
    for rank, row in enumerate(frame.itertuples(), start=1):  # labels stacked by rank: close points stay legible
        text = f"#{rank} {row.gpu} {row.layout} batch {row.batch}"
        leader = {"arrowstyle": "-", "color": "0.6", "lw": 0.5}
        ax.annotate(
            text,
            (row.tok_s_per_request, row.usd_per_mtok),
            xytext=(6, 4 + 11 * (rank - 1)),
            textcoords="offset points",
            fontsize=8,
            arrowprops=leader,
        )
    costs = frame["usd_per_mtok"]
    if costs.max() / costs.min() >= LOG_RANGE:
        ax.set_yscale("log")
        dollar_axis(ax.yaxis)
        scale = "log scale"
    else:  # a narrow range on a log axis magnifies a 0.3% difference into the whole plot: linear, from $0
        from matplotlib.ticker import FuncFormatter

        ax.set_ylim(0, costs.max() * 1.3)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: dollars(v, 3) if v > 0 else "$0"))
        scale = r"linear, from \$0"
    speeds = frame["tok_s_per_request"]
    spread = max(speeds.max() - speeds.min(), 0.1 * speeds.max())  # never magnify a sub-percent spread of speeds
    ax.set_xlim(speeds.min() - 0.6 * spread, speeds.max() + 0.6 * spread)
    ax.set_xlabel("output tokens per second per request (per user)")
    ax.set_ylabel(f"$ per million output tokens ({scale})")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    save_figure_atomic(figure, path, field)


def _mark_preferred(ax: Any, frame: pd.DataFrame, y_field: str, label: str | None) -> None:
    """The preferred point starred; its setup and figures go in the legend, where no point can hide them."""
    if "preferred" not in frame or not frame["preferred"].any():
        return
    row = frame[frame["preferred"].astype(bool)].iloc[0]
    text = "preferred (max speed^a / price)" + (f"\n{label}" if label else "")
    ax.scatter([row["tok_s_per_request"]], [row[y_field]], marker="*", s=240, color="C3", zorder=4, label=text)


def _overlay(ax: Any, points: pd.DataFrame, marker: str, color: str, legend: str) -> None:
    ax.scatter(
        points["tok_s_per_request"],
        points["usd_per_mtok"],
        marker=marker,
        s=40,
        color=color,
        zorder=3,
        label=legend,
        facecolors="none" if marker == "D" else None,
    )
    if "label" not in points:
        return
    for x, y, text in zip(points["tok_s_per_request"], points["usd_per_mtok"], points["label"], strict=True):
        if isinstance(text, str) and text.strip():
            ax.annotate(text.strip(), (x, y), xytext=(-6, 6), textcoords="offset points", fontsize=7, ha="right")
