"""Frontier plots: achievable setups, the preferred point and observed points."""

from __future__ import annotations

import os
from typing import Any

import pandas as pd

from roofline_opt.files import save_figure_atomic


def plot_frontier(
    frame: pd.DataFrame,
    path: str | os.PathLike[str],
    *,
    title: str,
    preferred_label: str | None = None,
    observed: pd.DataFrame | None = None,
    field: str = "--plot",
) -> None:
    """The frontier as in the paper: x tok/s per request, y $/Mtok (log), the preferred point starred and annotated,
    observed points (columns tok_s_per_request, usd_per_mtok, optional label) overlaid as crosses."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 5), layout="constrained")
    ax = figure.add_subplot()
    ax.plot(frame["tok_s_per_request"], frame["usd_per_mtok"], "o-", ms=3.5, lw=1.5, label="optimal setups")
    _mark_preferred(ax, frame, preferred_label)
    if observed is not None and len(observed):
        _overlay_observed(ax, observed)
    ax.set_yscale("log")
    ax.set_xlabel("tokens per second per request")
    ax.set_ylabel("$ per million output tokens (log scale)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left")
    save_figure_atomic(figure, path, field)


def _mark_preferred(ax: Any, frame: pd.DataFrame, label: str | None) -> None:
    if "preferred" not in frame or not frame["preferred"].any():
        return
    row = frame[frame["preferred"].astype(bool)].iloc[0]
    x, y = row["tok_s_per_request"], row["usd_per_mtok"]
    ax.scatter([x], [y], marker="*", s=220, color="C3", zorder=4, label="preferred")
    if label:
        # the lower right corner is empty on any frontier: fast and cheap is what no setup reaches
        ax.annotate(label, (x, y), xytext=(0.97, 0.05), textcoords="axes fraction", ha="right", va="bottom",
                    fontsize=8, arrowprops={"arrowstyle": "->", "color": "C3", "lw": 0.8})  # fmt: skip


def _overlay_observed(ax: Any, observed: pd.DataFrame) -> None:
    ax.scatter(observed["tok_s_per_request"], observed["usd_per_mtok"], marker="x", s=40, color="k", zorder=3,
               label="observed")  # fmt: skip
    if "label" not in observed:
        return
    for x, y, text in zip(observed["tok_s_per_request"], observed["usd_per_mtok"], observed["label"], strict=True):
        if isinstance(text, str) and text.strip():
            ax.annotate(text.strip(), (x, y), xytext=(4, -10), textcoords="offset points", fontsize=7)
