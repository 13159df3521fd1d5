"""Interactive reports: one self-contained HTML file per answer, a plotly chart above the table of its rows.

The file embeds plotly.js inline (about 4.6 MB), so it opens from disk or an e-mail attachment with no server and no
network: a report is read later and elsewhere, often offline, and a CDN link would make it depend on a third party
being up and unchanged. Hovering a point shows its setup and figures; clicking a legend entry hides or shows one
accelerator / precision (double-click isolates it); the table below lists every row with the same unit-named columns
as JSON and CSV. plotly is the optional extra ``html`` (``pip install 'roofline-opt[html]'``).
"""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from roofline_opt import files
from roofline_opt.errors import InvalidInput
from roofline_opt.report.tables import format_number

HTML_FORMATS = ("html", "htm")
"""Suffixes --html accepts."""
INSTALL_HINT = "needs plotly, the optional extra html: pip install 'roofline-opt[html]'"
TABLE_ID, CHART_ID = "rows", "chart"
"""Element ids of the table and the chart (a browser test looks them up)."""
SYMBOLS = ("circle", "diamond", "square", "triangle-up", "cross", "x", "star", "hexagon", "pentagon", "triangle-down")
"""Marker shapes, one per precision, so that a series differs in shape as well as colour."""


@dataclass(frozen=True)
class Chart:
    """What the chart of a report shows: axes (column, label, log scale), the columns whose values split the points
    into toggled series, and the columns shown on hover and in the table (all columns when empty)."""

    x: str
    y: str
    x_label: str
    y_label: str
    log_x: bool = False
    log_y: bool = True
    series: tuple[str, ...] = ("gpu", "weight_bits")
    hover: tuple[str, ...] = ()
    table: tuple[str, ...] = ()
    lines: bool = False
    """Join each series' points in x order (a frontier) instead of scattering them."""
    notes: Sequence[str] = field(default_factory=tuple)


def check_html_destination(path: str | os.PathLike[str] | None, field_name: str = "--html", inputs=()) -> None:
    """Refuse an unwritable --html destination, or a missing plotly, before any work is done."""
    if not path:
        return
    try:
        import plotly  # noqa: F401 - presence check only
    except ImportError as exc:
        raise InvalidInput(field_name, INSTALL_HINT) from exc
    files.check_destination(path, field_name, HTML_FORMATS, inputs=inputs)


def _series_name(row: pd.Series, columns: Sequence[str]) -> str:
    parts = []
    for c in columns:
        value = row[c]
        parts.append(f"{format_number(value)}-bit" if c.endswith("_bits") else format_number(value))
    return " ".join(parts) or "all"


def _palette() -> list[str]:
    """Distinct colours for up to 34 series before one repeats (and then with another shape, by precision)."""
    from plotly.colors import qualitative

    return [*qualitative.Plotly, *qualitative.Dark24]


def _hover_template(columns: Sequence[str]) -> str:
    lines = [f"{c}: %{{customdata[{i}]}}" for i, c in enumerate(columns)]
    return "<br>".join(lines) + "<extra>%{fullData.name}</extra>"


def figure(frame: pd.DataFrame, chart: Chart, title: str) -> Any:
    """The plotly figure: one trace per series (legend entries toggle them), marker shapes by precision."""
    import plotly.graph_objects as go

    series = [c for c in chart.series if c in frame.columns]
    hover = [c for c in (chart.hover or frame.columns) if c in frame.columns]
    fig = go.Figure()
    if chart.lines:  # the frontier as a whole: only its marked setups are achievable, whatever series they are in
        ordered = frame.sort_values(chart.x)
        fig.add_trace(
            go.Scatter(
                x=ordered[chart.x],
                y=ordered[chart.y],
                mode="lines",
                line={"shape": "vh", "color": "#bbb"},
                name="frontier (least cost at that speed or faster)",
                hoverinfo="skip",
            )
        )
    frame = frame[frame[chart.x].notna() & frame[chart.y].notna()]  # rows without figures are in the table only
    keys = pd.Series([_series_name(row, series) for _, row in frame.iterrows()], index=frame.index, dtype=object)
    palette = _palette()
    bits = sorted(frame["weight_bits"].unique()) if "weight_bits" in frame else []
    shape_of = {b: SYMBOLS[i % len(SYMBOLS)] for i, b in enumerate(bits)}
    for i, key in enumerate(dict.fromkeys(keys)):
        part = frame[keys == key].sort_values(chart.x)
        first = part.iloc[0]
        fig.add_trace(
            go.Scatter(
                x=part[chart.x],
                y=part[chart.y],
                mode="markers",
                name=_series_name(first, series),
                marker={
                    "symbol": shape_of.get(first.get("weight_bits"), "circle"),
                    "size": 10,
                    "color": palette[i % len(palette)],
                },
                customdata=[[_cell(v) for v in row] for row in part[hover].itertuples(index=False)],
                hovertemplate=_hover_template(hover),
            )
        )
    fig.update_layout(
        xaxis_title=chart.x_label,
        yaxis_title=chart.y_label,
        legend_title_text=" / ".join(series) + " (click to hide, double-click to isolate)",
        template="plotly_white",
        showlegend=True,
        height=560,
        margin={"l": 70, "r": 30, "t": 60, "b": 60},
    )
    if chart.log_x:
        fig.update_xaxes(type="log")
    if chart.log_y:
        fig.update_yaxes(type="log")
    if chart.y.startswith("usd_"):
        fig.update_yaxes(tickprefix="$")
    return fig


def _table(frame: pd.DataFrame, columns: Sequence[str]) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
    body = "\n".join(
        "<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in row) + "</tr>"
        for row in frame[list(columns)].itertuples(index=False)
    )
    return f'<table id="{TABLE_ID}"><thead><tr>{head}</tr></thead><tbody>\n{body}\n</tbody></table>'


def _cell(value: Any) -> str:
    if isinstance(value, dict | list):
        return str(value)
    return format_number(value)


STYLE = """body{font-family:system-ui,sans-serif;margin:24px;color:#222}
h1{font-size:18px}p.note{color:#555;font-size:13px;margin:4px 0}
table{border-collapse:collapse;font-size:12px;margin-top:16px}
th,td{border:1px solid #ddd;padding:3px 6px;text-align:left;white-space:nowrap}
th{background:#f3f3f3;position:sticky;top:0}tr:nth-child(even){background:#fafafa}
div.wrap{overflow-x:auto}"""


def report_html(frame: pd.DataFrame, chart: Chart, title: str) -> str:
    """The whole document: title, notes, chart (plotly.js inline) and the table of rows."""
    fig = figure(frame, chart, title)
    div = fig.to_html(include_plotlyjs=True, full_html=False, div_id=CHART_ID, config={"displaylogo": False})
    wanted = chart.table or (*chart.hover, *frame.columns)  # the headline fields first, then every other
    columns = [c for c in dict.fromkeys(wanted) if c in frame.columns]
    notes = "".join(f'<p class="note">{html.escape(n)}</p>' for n in chart.notes)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>{notes}{div}"
        f'<p class="note">{len(frame)} rows, the same fields as --json and --csv:</p>'
        f'<div class="wrap">{_table(frame, columns)}</div></body></html>\n'
    )


def write_html(
    frame: pd.DataFrame, path: str | os.PathLike[str], chart: Chart, title: str, field_name: str = "--html"
) -> None:
    """Write the report atomically (a failed run leaves no half-written file)."""
    if frame.empty:
        raise InvalidInput(field_name, "has no rows to report (no answer was found)")
    files.write_text_atomic(str(path), report_html(frame, chart, title), field=field_name)


FRONTIER_HOVER = (
    "gpu",
    "weight_bits",
    "kv_bits",
    "layout",
    "batch",
    "replicas",
    "total_gpus",
    "serving",
    "tok_s_per_request",
    "usd_per_mtok",
    "cost_scope",
    "tok_s_per_gpu",
    "ttft_ms",
    "tpot_ms",
    "time_per_token_ms",
    "usd_per_hour",
    "bottleneck",
    "preferred",
)
"""What hovering a frontier (or study) point shows: its setup, then its figures."""


def frontier_chart(frame: pd.DataFrame) -> Chart:
    """A frontier: speed against cost (log), one step line per accelerator and precision, the table in full."""
    scope = str(frame["cost_scope"].iloc[0]) if "cost_scope" in frame else "decode_only"
    return Chart(
        x="tok_s_per_request",
        y="usd_per_mtok",
        x_label="output tokens per second per request (per user)",
        y_label=f"$ per million output tokens, {scope.replace('_', ' ')} (log scale)",
        hover=FRONTIER_HOVER,
        table=(),
        lines=True,
        notes=(
            "Only the marked setups are achievable; each accelerator / precision is a series of its own.",
            f"cost_scope {scope}: "
            + ("decode steps only, prefill excluded." if scope == "decode_only" else "whole requests, prefill too."),
        ),
    )


PLAN_HOVER = (
    "period",
    "model",
    "model_spec",
    "gpu",
    "weight_bits",
    "kv_bits",
    "tp",
    "pp",
    "batch",
    "replicas",
    "total_gpus",
    "tok_s_per_request",
    "tpot_ms",
    "ttft_ms",
    "utilisation",
    "served_tok_s",
    "usd_per_gpu_hour",
    "usd_per_hour",
    "effective_usd_per_mtok",
)
"""What hovering a fleet plan's row shows."""


def plan_chart() -> Chart:
    """A fleet plan: each row's speed against its effective cost (log), one series per model, accelerator and
    precision."""
    return Chart(
        x="tok_s_per_request",
        y="effective_usd_per_mtok",
        x_label="output tokens per second per request (at the planned batch: the worst a request sees)",
        y_label="effective $ per million output tokens served (log scale)",
        series=("model", "gpu", "weight_bits"),
        hover=PLAN_HOVER,
        notes=("One point per (period, model, layout) row of the plan.",),
    )


STUDY_TARGETS = ("in_min_tok_s", "in_max_usd_per_mtok")
"""Study inputs that move a point along its curve rather than start a series of their own."""


def study_chart(frame: pd.DataFrame) -> Chart:
    """A study: every answered question's speed against its cost (log), one series per combination of the axes
    that vary (the target aside), accelerator and precision; unanswered questions are rows of the table only."""
    inputs = [c for c in frame.columns if c.startswith("in_")]
    varying = [c for c in inputs if c not in STUDY_TARGETS and frame[c].astype(str).nunique() > 1]
    return Chart(
        x="tok_s_per_request",
        y="usd_per_mtok",
        x_label="output tokens per second per request (per user)",
        y_label="$ per million output tokens (log scale)",
        series=tuple(dict.fromkeys([*varying, "gpu", "weight_bits"])),
        hover=(*inputs, "status", *FRONTIER_HOVER),
        notes=("One point per answered question; infeasible and failed questions are in the table with their reason.",),
    )


VALIDATE_HOVER = (
    "line",
    "model",
    "framework",
    "gpu_card",
    "weight_bits",
    "mapped_layout",
    "check",
    "context",
    "measured_tok_s_per_request",
    "predicted_tok_s_per_request",
    "measured_tok_s_per_gpu",
    "predicted_tok_s_per_gpu",
    "ratio",
    "estimate_ratio",
    "bottleneck",
    "bound_holds",
    "why_not_bounded",
    "reason",
)
"""What hovering a validated row shows."""


def validate_chart() -> Chart:
    """Measured rows: the bound over the measurement (ratio, log: >= 1 where the bound holds) against the measured
    tok/s per GPU, one series per accelerator and precision; rows without a verdict are in the table only."""
    return Chart(
        x="measured_tok_s_per_gpu",
        y="ratio",
        x_label="measured output tokens per second per GPU",
        y_label="roofline bound / measured (log scale; >= 1: the bound holds)",
        log_x=True,
        series=("gpu_card", "weight_bits"),
        hover=VALIDATE_HOVER,
        notes=("One point per measured row with a verdict; ratio < 1 is a row the bound does not hold on.",),
    )
