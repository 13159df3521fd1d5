"""Where an answer leaves the range its queueing figures were checked in: one line for the text answer.

Aggregated TTFT percentiles were measured against the simulator (docs/physics/queueing.md, "How far the aggregated
model holds"): within 10% at p90 and p99 for outputs of about 50 tokens up to 80% of the chunk budget busy, and for
100 tokens up to 70%; with 100 or more output tokens and the chunk budget 70% or more busy the model is low (p99 18%
low at 100 tokens and 80%, 62-88% low at 200-400 tokens and 80%): the decode batch's congested spells are not
modelled. The line says so where an answer sits there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

CHECKED_OUTPUT_TOKENS = 100
"""Mean output tokens from which the aggregated TTFT percentile is optimistic at high load (the measured table)."""
CHECKED_UTILISATION = 0.7
"""Chunk-budget utilisation from which it is optimistic for such outputs (the measured table)."""


def queueing_line(records: Sequence[Mapping[str, Any]], mean_osl: float | None) -> str | None:
    """A warning for aggregated answers whose TTFT limit holds at a percentile where the model is optimistic."""
    if mean_osl is None or mean_osl < CHECKED_OUTPUT_TOKENS:
        return None
    busy = [
        r["prefill_utilisation"]
        for r in records
        if r.get("serving") == "agg" and r.get("ttft_percentile") is not None and r.get("prefill_utilisation")
    ]
    if not busy or max(busy) < CHECKED_UTILISATION:
        return None
    return (
        f"queueing: the chunk budget is up to {max(busy):.0%} busy at the answer's load; with {mean_osl:g} output "
        f"tokens and {CHECKED_UTILISATION:.0%} or more busy the TTFT percentile is optimistic against the simulator "
        "(docs/physics/queueing.md, 'How far the aggregated model holds')"
    )
