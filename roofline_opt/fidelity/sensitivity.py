"""A frontier re-solved with each contested assumption of the model moved both ways."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from roofline_opt import api, files
from roofline_opt.fidelity.reproduce import UTILITY_EXPONENT, preferred_row, setup_text


@dataclass(frozen=True)
class Variant:
    """One moved assumption: how it changes the question, and the utility exponent choosing the preferred point."""

    group: str
    label: str
    change: Callable[[api.Question], api.Question]
    utility_exponent: float = UTILITY_EXPONENT


def _preset_change(**fields: Any) -> Callable[[api.Question], api.Question]:
    return lambda q: replace(q, preset=replace(q.preset, **fields))


def _acceptance(acceptance: float) -> Callable[[api.Question], api.Question]:
    return lambda q: replace(q, acceptance=acceptance)


def _same(q: api.Question) -> api.Question:
    return q


CAPS = (0.5, 0.7, 1.0)
"""Efficiency caps tried for FLOP/s and HBM bandwidth."""


def variants(with_draft: bool) -> list[Variant]:
    """The contested assumptions of physics.md sections 4-7, each moved both ways."""
    out = [
        Variant("baseline", "as given", _same),
        Variant("all-reduce", "2-D TP only", lambda q: replace(q, tp_modes=(True,))),
        Variant("all-reduce", "1-D TP only", lambda q: replace(q, tp_modes=(False,))),
        Variant("all-reduce", "all-reduce time x0.5", _preset_change(allreduce_time_factor=0.5)),
        Variant("all-reduce", "all-reduce time x2", _preset_change(allreduce_time_factor=2.0)),
        *(Variant("FLOP efficiency", f"flop_efficiency {v:g}", _preset_change(flop_efficiency=v)) for v in CAPS),
        *(Variant("HBM efficiency", f"hbm_efficiency {v:g}", _preset_change(hbm_efficiency=v)) for v in CAPS),
        Variant("NCCL latency", "latency x0.5", _preset_change(network_latency_factor=0.5)),
        Variant("NCCL latency", "latency x2", _preset_change(network_latency_factor=2.0)),
        Variant("kernel launch", "launch x0.5", _preset_change(kernel_launch_factor=0.5)),
        Variant("kernel launch", "launch x2", _preset_change(kernel_launch_factor=2.0)),
    ]
    if with_draft:
        out += [Variant("acceptance", f"acceptance {a:g}", _acceptance(a)) for a in (0.6, 0.7, 0.9)]
    out += [Variant("utility exponent", f"exponent {a:g}", _same, a) for a in (2.0, 3.0, 4.0, 5.0)]
    return out


CHANGE_COLUMNS = {
    "max_rel_change": "max_tok_s_per_request",
    "cheapest_rel_change": "cheapest_usd_per_mtok",
    "preferred_rel_change": "preferred_tok_s_per_request",
}
"""Changes against the baseline (variant / baseline - 1) the sensitivity table adds."""


@dataclass(frozen=True)
class Sensitivity:
    """One row per variant and each variant's frontier (variants with the same question share one)."""

    table: pd.DataFrame
    frontiers: dict[str, pd.DataFrame]


def sensitivity(
    q: api.Question,
    points: int = 20,
    chosen: Sequence[Variant] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Sensitivity:
    """How the fastest, cheapest and preferred setups move when each contested assumption moves."""
    chosen = list(chosen) if chosen is not None else variants(q.draft is not None)
    solved: dict[tuple[Any, ...], pd.DataFrame] = {}
    rows, frontiers = [], {}
    for done, v in enumerate(chosen, start=1):
        varied = v.change(q)
        key = (varied.preset, varied.tp_modes, varied.acceptance, v.utility_exponent)
        if key not in solved:
            solved[key] = api.frontier_frame(varied, points=points, utility_exponent=v.utility_exponent)
        frame = solved[key]
        if progress is not None:
            progress(done, len(chosen))
        frontiers[v.label] = frame
        top = frame.iloc[int(np.argmax(frame["tok_s_per_request"].to_numpy()))]
        best = preferred_row(frame, v.utility_exponent)
        rows.append(
            {
                "group": v.group,
                "variant": v.label,
                "max_tok_s_per_request": float(top["tok_s_per_request"]),
                "usd_per_mtok_at_max": float(top["usd_per_mtok"]),
                "setup_at_max": setup_text(top),
                "cheapest_usd_per_mtok": float(frame["usd_per_mtok"].min()),
                "preferred_tok_s_per_request": float(best["tok_s_per_request"]),
                "preferred_usd_per_mtok": float(best["usd_per_mtok"]),
                "preferred_setup": setup_text(best),
            }
        )
    table = pd.DataFrame(rows)
    base = table.iloc[0]
    for name, column in CHANGE_COLUMNS.items():
        table[name] = table[column] / base[column] - 1.0
    table["preferred_moved"] = table["preferred_setup"] != base["preferred_setup"]
    return Sensitivity(table, frontiers)


def plot_sensitivity(result: Sensitivity, path: str | Path, title: str) -> None:
    """One panel per group of assumptions: baseline (black) and variant frontiers, preferred points starred."""
    from matplotlib.figure import Figure

    groups = [g for g in dict.fromkeys(result.table["group"]) if g != "baseline"]
    columns = 3
    rows = math.ceil(len(groups) / columns)
    figure = Figure(figsize=(5 * columns, 3.8 * rows), layout="constrained")
    figure.suptitle(title)
    base = result.frontiers[result.table.iloc[0]["variant"]]
    for n, group in enumerate(groups):
        ax = figure.add_subplot(rows, columns, n + 1)
        _panel(ax, base, result.table.iloc[0], result.table[result.table["group"] == group].to_dict("records"), result)
        ax.set_title(group)
    files.save_figure_atomic(figure, path, field="--out")


VARIANT_MARKERS = ("o", "s", "^", "D", "v")


def _points(frame: pd.DataFrame, preferred_only: bool = False) -> set[tuple[float, float]]:
    rows = frame[frame["preferred"]] if preferred_only else frame
    return set(zip(rows["tok_s_per_request"].round(9), rows["usd_per_mtok"].round(9), strict=True))


def _same_frontier(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """The same setups at the same figures, but for the preferred point each may have added."""
    return _points(a) ^ _points(b) <= _points(a, True) | _points(b, True)


def _panel(ax: Any, base: pd.DataFrame, start: Any, variants: list[dict], result: Sensitivity) -> None:
    """Baseline as a black step line; each variant as its own marker shape, hollow and larger when its frontier
    coincides with the baseline (so no variant hides another); preferred points starred in the variant's color."""
    from roofline_opt.report.plots import dollar_axis

    ax.step(base["tok_s_per_request"], base["usd_per_mtok"], where="pre", color="k", lw=1.2, label="baseline")
    ax.scatter(
        [start["preferred_tok_s_per_request"]],
        [start["preferred_usd_per_mtok"]],
        marker="*",
        s=160,
        color="k",
        zorder=4,
        label="preferred, baseline",
    )
    for i, v in enumerate(variants):
        frame, color = result.frontiers[v["variant"]], f"C{i}"
        same = _same_frontier(frame, base)
        marker = VARIANT_MARKERS[i % len(VARIANT_MARKERS)]
        label = v["variant"] + (" (= baseline frontier)" if same else "")
        if not same:
            ax.step(frame["tok_s_per_request"], frame["usd_per_mtok"], where="pre", color=color, lw=0.9, ls="--")
        ax.scatter(
            frame["tok_s_per_request"],
            frame["usd_per_mtok"],
            marker=marker,
            s=18 + 14 * i,
            facecolors="none",
            edgecolors=color,
            linewidths=1.0,
            zorder=3,
            label=label,
        )
        ax.scatter(
            [v["preferred_tok_s_per_request"]],
            [v["preferred_usd_per_mtok"]],
            marker="*",
            s=110,
            color=color,
            edgecolors="k",
            linewidths=0.4,
            zorder=5,
        )
    ax.set_yscale("log")
    dollar_axis(ax.yaxis)
    ax.set_xlabel("tokens per second per request")
    ax.set_ylabel("$ per million output tokens")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
