"""An answer (a record of fastest / cheapest / frontier, or a fleet plan) as the instances a recipe launches.

An ``Instance`` is one kind of server: its role (``agg``, ``prefill`` or ``decode``), accelerator, layout, batch and
how many copies run. A ``Deployment`` is the instances of one model with the workload they were sized for and the
figures the model predicts. Nothing here knows an engine's flags.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from roofline_opt.errors import InvalidInput
from roofline_opt.optimize.space import DEFAULT_CONTEXT

ANSWER_FIELDS = ("model", "gpu", "weight_bits", "tp", "tp_2d", "pp", "ep", "batch", "gamma", "replicas", "n_gpus")
"""Fields every single-model answer record carries (the README's answer fields)."""
PLAN_FIELDS = ("rows", "placement", "cluster")
"""Keys of a fleet plan's JSON (``plan --json``)."""
PREDICTED_FIELDS = (
    "tok_s_per_request",
    "time_per_token_s",
    "throughput_tok_s",
    "tok_s_per_gpu",
    "usd_per_mtok",
    "usd_per_hour",
    "ttft_s",
    "tpot_s",
    "requests_per_s",
    "usd_per_request",
)
"""Figures of an answer copied into a recipe's predicted-figures file when present."""
DEFAULT_BENCH_OSL = 256
"""Output tokens per benchmark request of a decode-only answer (it states a context, not lengths): the input is
then context - 256 / 2 tokens, so the mean decode context equals the answer's."""


@dataclass(frozen=True)
class Instance:
    """One kind of server in a deployment (all sizes per instance)."""

    role: str
    gpu: str
    tp: int
    pp: int
    ep: int
    batch: int
    count: int
    tp_2d: bool = False
    dp_attention: bool = False
    chunk_tokens: int = 0
    prefill_batch: int = 0
    placement: tuple[tuple[tuple[str, ...], ...], ...] = ()
    """GPU ids per copy and pipeline stage (a plan on a cluster graph), else empty."""

    @property
    def n_gpus(self) -> int:
        return self.tp * self.pp


@dataclass(frozen=True)
class Deployment:
    """The instances of one model, the workload they serve and the figures the model predicts."""

    name: str
    model: str
    weight_bits: int
    kv_bits: int
    instances: tuple[Instance, ...]
    isl: int
    osl: int
    context: float
    gamma: int = 0
    draft: str | None = None
    memory_capacity_bytes: float | None = None
    weights_bytes_per_device: float | None = None
    activations_bytes_per_device: float | None = None
    predicted: Mapping[str, float] = field(default_factory=dict)
    units: int = 1
    """Instances (aggregated) or xPyD units (disaggregated): the answer's ``replicas``."""
    lengths_stated: bool = True
    """False when the answer gave no request lengths (decode-only): the benchmark lengths are derived."""

    @property
    def disaggregated(self) -> bool:
        return any(i.role != "agg" for i in self.instances)

    @property
    def max_model_len(self) -> int:
        """Tokens one sequence may reach: prompt plus output (decode-only answers: the context plus the output)."""
        return int(self.isl + self.osl)


def _lengths(record: Mapping[str, Any], isl: int | None, osl: int | None) -> tuple[int, int, bool]:
    if isl is not None and osl is not None:
        return int(isl), int(osl), True
    context = float(record.get("context") or 0)
    return max(1, math.ceil(context - DEFAULT_BENCH_OSL / 2)), DEFAULT_BENCH_OSL, False


def _layout_numbers(text: str) -> tuple[int, int]:
    """(tp, pp) of a compact prefill layout such as ``tp2pp8`` or ``tp4(2d)pp1``."""
    import re

    m = re.fullmatch(r"tp(\d+)(\(2d\))?pp(\d+).*", text)
    if m is None:
        raise InvalidInput("answer: prefill_layout", f"is not a layout like tp2pp8. Got {text!r} instead.")
    return int(m.group(1)), int(m.group(3))


def from_record(
    record: Mapping[str, Any], isl: int | None = None, osl: int | None = None, draft: str | None = None
) -> Deployment:
    """The deployment of one answer record (the JSON object of fastest / cheapest, one row of frontier)."""
    missing = [f for f in ANSWER_FIELDS if f not in record]
    if missing:
        raise InvalidInput("answer", f"is not a roofline-opt answer: it lacks {', '.join(missing)}")
    isl_, osl_, stated = _lengths(record, isl, osl)
    serving = record.get("serving", "agg")
    batch, replicas = int(record["batch"]), int(record["replicas"])
    dp = bool(record.get("dp_attention", False))
    instances: tuple[Instance, ...]
    if serving == "disagg":
        p_tp, p_pp = int(record["prefill_tp"]), int(record["prefill_pp"])
        units = replicas
        instances = (
            Instance(
                "prefill",
                str(record["prefill_gpu"]),
                p_tp,
                p_pp,
                1,
                int(record["prefill_batch"]),
                int(record["prefill_instances"]) * units,
                tp_2d=bool(record.get("prefill_tp_2d", False)),
                prefill_batch=int(record["prefill_batch"]),
            ),
            Instance(
                "decode",
                str(record.get("decode_gpu") or record["gpu"]),
                int(record["tp"]),
                int(record["pp"]),
                int(record["ep"]),
                batch,
                int(record["decode_instances"]) * units,
                tp_2d=bool(record["tp_2d"]),
                dp_attention=dp,
            ),
        )
        _layout_numbers(str(record.get("prefill_layout", f"tp{p_tp}pp{p_pp}")))
    else:
        instances = (
            Instance(
                "agg",
                str(record["gpu"]),
                int(record["tp"]),
                int(record["pp"]),
                int(record["ep"]),
                batch,
                replicas,
                tp_2d=bool(record["tp_2d"]),
                dp_attention=dp,
                chunk_tokens=int(record.get("chunk_tokens") or 0),
            ),
        )
    return Deployment(
        name=str(record["model"]),
        model=str(record["model"]),
        weight_bits=int(record["weight_bits"]),
        kv_bits=int(record.get("kv_bits", 16)),
        instances=instances,
        isl=isl_,
        osl=osl_,
        context=float(record.get("context") or isl_ + osl_ / 2),
        gamma=int(record["gamma"]),
        draft=draft,
        memory_capacity_bytes=record.get("memory_capacity_bytes"),
        weights_bytes_per_device=record.get("weights_bytes_per_device"),
        activations_bytes_per_device=record.get("activations_bytes_per_device"),
        predicted={k: float(record[k]) for k in PREDICTED_FIELDS if record.get(k) is not None},
        units=replicas,
        lengths_stated=stated,
    )


def from_plan(
    plan: Mapping[str, Any],
    lengths: Mapping[str, tuple[int, int]] | None = None,
    contexts: Mapping[str, float] | None = None,
) -> list[Deployment]:
    """One deployment per (model, layout) row of a fleet plan's first period, with the placement of its copies.

    ``lengths`` maps a fleet model's name to its (isl, osl); without them the benchmark lengths are derived from
    the context a decode-only model was planned at (``contexts``, by name; the default context when not given).
    """
    missing = [k for k in PLAN_FIELDS if k not in plan]
    if missing or not isinstance(plan["rows"], Sequence):
        raise InvalidInput("answer", f"is not a roofline-opt plan: it lacks {', '.join(missing) or 'rows'}")
    placement = plan["placement"][0] if plan["placement"] else []
    out = []
    for row in plan["rows"]:
        if row.get("period", 0) != 0:
            continue
        copies = [
            p
            for p in placement
            if p["model"] == row["model"] and p["tp"] == row["tp"] and p["pp"] == row["pp"] and p["gpu"] == row["gpu"]
        ]
        if len(copies) != int(row["replicas"]):
            copies = []
        isl, osl = (lengths or {}).get(row["model"], (None, None))
        record = {
            **row,
            "model": row["model_spec"],
            "context": (contexts or {}).get(row["model"], DEFAULT_CONTEXT),
            "time_per_token_s": row["tpot_ms"] / 1e3,
            "throughput_tok_s": row["throughput_tok_s_per_instance"],
        }
        dep = from_record(record, isl, osl)
        inst = dep.instances[0]
        stages = tuple(tuple(tuple(s) for s in c["stages"]) for c in copies)
        dep = replace(dep, name=str(row["model"]), instances=(replace(inst, placement=stages),))
        out.append(dep)
    return out
