"""The layout decisions of one deployment, defined once: the record that answers (``results.Setup``), fleet
candidates (``fleet.candidates.Candidate``) and checked setups (``setups.SetupRow``) extend, and its label.

Every layout field and its default lives here; the three records add only what is theirs (the batch, replicas,
the draft, the figures of a candidate). They print in their own column orders (``SETUP_ORDER`` and the like, beside
each record), which inheritance does not change.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import Any

from roofline_opt.physics import evaluator as ev
from roofline_opt.physics import requests as rq


@dataclass(frozen=True, kw_only=True)
class LayoutChoice:
    """How one instance lays a model over accelerators: the decode layout of a setup or a fleet candidate.

    With ``dp_attention`` the instance is a data-parallel-attention group of ``tp`` GPUs (experts over ``ep`` = tp);
    ``chunk_tokens`` is the prefill chunk of aggregated serving of whole requests (tokens per step)."""

    gpu: str
    weight_bits: int
    tp: int
    tp_2d: bool = False
    pp: int = 1
    ep: int = 1
    dp_attention: bool = False
    kv_bits: int = ev.DEFAULT_KV_BITS
    chunk_tokens: int = rq.DEFAULT_CHUNK_TOKENS

    @property
    def n_gpus(self) -> int:
        """GPUs of one instance (tp x pp)."""
        return self.tp * self.pp


@dataclass(frozen=True, kw_only=True)
class ServingChoice(LayoutChoice):
    """A layout with its serving mode: aggregated (one instance), or disaggregated into ``prefill_instances`` (x)
    prefill instances of prefill_tp x prefill_pp GPUs batching prefill_batch prompts and ``decode_instances`` (y)
    decode instances of the main layout. The prefill fields mean nothing under aggregated serving."""

    serving: str = rq.AGG
    prefill_gpu: str = ""
    prefill_tp: int = 1
    prefill_tp_2d: bool = False
    prefill_pp: int = 1
    prefill_batch: int = 1
    prefill_instances: int = 1
    decode_instances: int = 1

    @property
    def disaggregated(self) -> bool:
        return self.serving == rq.DISAGG


LAYOUT_DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(ServingChoice) if f.default is not MISSING}
"""Each optional layout field's default, read from the record (the defaults of evaluate's inputs, ``setups``)."""


def layout_label(
    tp: int, tp_2d: bool, pp: int, ep: int | None = None, gamma: int = 0, dp_attention: bool = False
) -> str:
    """Compact layout: ``tp8pp2ep1``; ``(2d)`` after the TP degree for 2-D tensor parallelism; ``g<gamma>`` with a
    draft; without ``ep`` for a prefill instance (``tp8pp1``); ``dp8ep8`` for data-parallel attention over 8 GPUs."""
    if dp_attention:
        label = f"dp{tp}ep{ep or tp}"
    else:
        label = f"tp{tp}{'(2d)' if tp_2d else ''}pp{pp}" + ("" if ep is None else f"ep{ep}")
    return label + (f"g{gamma}" if gamma else "")


def ordered_fields(choice: Any, order: tuple[str, ...]) -> dict[str, Any]:
    """``choice``'s fields as a dict in the printed ``order`` (not the inherited field order)."""
    return {name: getattr(choice, name) for name in order}
