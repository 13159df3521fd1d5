"""A study's summary: its headline figure per facet, line and x value, as a faceted plot and a markdown table.

By default the figure is the query's objective (fastest: tok/s per request; cheapest: $/Mtok; frontier: the
preferred point's tok/s per request), x is the target axis when it varies (else the first varying numeric input),
facets are the models and lines every other varying input (accelerator, hypothetical card field, ...). A study
file's ``summary: {x: ..., y: ..., facet: ...}`` overrides any of them.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

import pandas as pd

from roofline_opt import api, report
from roofline_opt.errors import InvalidInput
from roofline_opt.study.spec import Study

OBJECTIVES = {
    "fastest": "tok_s_per_request",
    "cheapest": "usd_per_mtok",
    "frontier": "tok_s_per_request",
    "plan": "usd_per_hour",
}


@dataclass(frozen=True)
class Layout:
    """Which columns make the summary: y the figure, x the horizontal axis, facet and line the groupings."""

    y: str
    x: str | None
    facet: str | None
    lines: tuple[str, ...]


def _varying(frame: pd.DataFrame, study: Study) -> list[str]:
    return [f"in_{k}" for k in study.keys if frame[f"in_{k}"].astype(str).nunique() > 1]


def layout(frame: pd.DataFrame, study: Study) -> Layout:
    """The summary's columns from the study's varying inputs and its ``summary`` options."""
    options = dict(study.summary)
    y = options.get("y", OBJECTIVES.get(study.kind, "tok_s_per_request"))
    varying = _varying(frame, study)
    target = f"in_{api.TARGETS[study.kind]}" if study.kind in api.TARGETS else None
    numeric = [c for c in varying if pd.to_numeric(frame[c], errors="coerce").notna().all()]
    first_numeric = numeric[0] if numeric else None
    x = f"in_{options['x']}" if "x" in options else target if target in varying else first_numeric
    facet = f"in_{options['facet']}" if "facet" in options else "in_model" if "in_model" in varying else None
    if y not in frame:
        y = _unanswered_figure(frame, study, y, given="y" in options)
    lines = tuple(c for c in varying if c not in (x, facet))
    return Layout(y, x, facet, lines)


def _unanswered_figure(frame: pd.DataFrame, study: Study, y: str, given: bool) -> str:
    """``"status"`` for a figure no row carries because no question was answered; a ``y`` the file gives that names
    no column of answered rows is an error (which columns there are depends on the answers: whole-request figures,
    placements, ...; so it is checked here, before any summary or report is written, not when the file is read)."""
    if given and (frame["status"] == "ok").any():
        close = difflib.get_close_matches(y, [str(c) for c in frame.columns], n=3)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        default = OBJECTIVES.get(study.kind, "tok_s_per_request")
        msg = f"must name a column of the study's output, like {default}. Got {y!r} instead.{hint}"
        raise InvalidInput(f"{study.path}: summary: y", msg)
    return "status"


def _line_label(row: pd.Series, lines: tuple[str, ...]) -> str:
    return ", ".join(f"{c[3:]}={_text(row[c])}" for c in lines) or "all"


def _text(value: Any) -> str:
    """An input for a label: large numbers (bytes/s, FLOP/s) in short scientific notation."""
    if pd.isna(value):
        return "default"
    number = pd.to_numeric(value, errors="coerce")
    return f"{number:.4g}" if pd.notna(number) and abs(number) >= 1e6 else report.format_number(value)


def _label_number(label: Any) -> float:
    """A column label that spells a number, as the number (to order the x values)."""
    return float(label)


def summary_table(frame: pd.DataFrame, study: Study) -> pd.DataFrame:
    """Rows = facet and line, columns = x values, cells = the figure (or the status of an unanswered question)."""
    lay = layout(frame, study)
    data = frame.copy()
    data["_line"] = [_line_label(r, lay.lines) for _, r in data.iterrows()]
    data["_cell"] = [report.format_number(r[lay.y]) if r["status"] == "ok" else r["status"] for _, r in data.iterrows()]
    index = [c for c in (lay.facet, "_line") if c is not None]
    columns = lay.x if lay.x is not None else "_all"
    if lay.x is None:
        data["_all"] = lay.y
    table = data.pivot_table(index=index, columns=columns, values="_cell", aggfunc="first", sort=False)
    if lay.x is not None and pd.to_numeric(pd.Series(table.columns), errors="coerce").notna().all():
        table = table[sorted(table.columns, key=_label_number)]
    table = table.reset_index().rename(columns={"_line": "setting", lay.facet or "": (lay.facet or "")[3:]})
    xs = set(frame[lay.x]) if lay.x is not None else set()
    name = "" if lay.x is None else lay.x[3:]
    table.columns = [f"{name}={_text(c)}" if c in xs else c for c in table.columns]
    return table


def markdown(frame: pd.DataFrame, study: Study) -> str:
    """The summary table as GitHub markdown, headed by what the cells are."""
    lay = layout(frame, study)
    table = summary_table(frame, study)
    head = f"**{study.name}** ({study.kind}): {lay.y} by " + ", ".join(
        c[3:] for c in (lay.facet, *lay.lines, lay.x) if c
    )
    return head + "\n\n" + report.frame_to_markdown(table)


def plot(frame: pd.DataFrame, study: Study, path: str) -> None:
    """One panel per facet, one line per setting, x the study's x axis (a log y for costs)."""
    lay = layout(frame, study)
    ok = frame[frame["status"] == "ok"].copy()
    ok["_line"] = [_line_label(r, lay.lines) for _, r in ok.iterrows()]
    ok["_facet"] = ok[lay.facet].astype(str) if lay.facet else study.name
    ok["_x"] = pd.to_numeric(ok[lay.x], errors="coerce") if lay.x else 0.0
    report.plot_facets(
        ok,
        path,
        x="_x",
        y=lay.y,
        facet="_facet",
        line="_line",
        x_label=lay.x[3:] if lay.x else "",
        title=f"{study.name}: {lay.y} ({study.kind})",
        log_y=lay.y.startswith("usd"),
        field="--summary-plot",
    )
