"""Where an answer leaves the range its queueing figures were checked in: one line for the text answer.

Aggregated TTFT percentiles were measured against the simulator (docs/physics/queueing.md, "How far the aggregated
model holds"): within 10% at p90 and p99 for outputs of about 50 tokens up to 80% of the chunk budget busy, and for
100 tokens up to 70%; with 100 or more output tokens and the chunk budget 70% or more busy the model is low (p99 18%
low at 100 tokens and 80%, 62-88% low at 200-400 tokens and 80%): the decode batch's congested spells are not
modelled; at 50% busy it was within 10% (or above) for every output length measured. The line says so where an
answer sits beyond what was checked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

CHECKED_UP_TO = ((100, 0.7), (200, 0.5))
"""(mean output tokens from, chunk-budget utilisation up to which the aggregated TTFT percentile was within 10% of
the simulator or above it) from the measured table: 100-199 tokens to 70% busy, 200 or more to 50%; fewer than 100
tokens everywhere measured (to 90%, where it is high)."""


def checked_utilisation(mean_osl: float) -> float | None:
    """The utilisation up to which an aggregated TTFT percentile of ``mean_osl`` output tokens was checked (None:
    no limit)."""
    limits = [u for tokens, u in CHECKED_UP_TO if mean_osl >= tokens]
    return limits[-1] if limits else None


def queueing_line(records: Sequence[Mapping[str, Any]], mean_osl: float | None) -> str | None:
    """A warning for aggregated answers whose TTFT limit holds at a percentile where the model is optimistic."""
    checked = None if mean_osl is None else checked_utilisation(mean_osl)
    if checked is None:
        return None
    busy = [
        r["prefill_utilisation"]
        for r in records
        if r.get("serving") == "agg" and r.get("ttft_percentile") is not None and r.get("prefill_utilisation")
    ]
    if not busy or max(busy) <= checked:
        return None
    return (
        f"queueing: the chunk budget is up to {max(busy):.0%} busy at the answer's load; with {mean_osl:g} output "
        f"tokens the TTFT percentile was checked against the simulator up to {checked:.0%} busy, and beyond that "
        "the model runs low (docs/physics/queueing.md, 'How far the aggregated model holds')"
    )
