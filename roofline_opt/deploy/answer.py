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
    "ttft_no_load_s",
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
    kind: str = ""
    """A name for this server kind where a role has several (a fleet pool's mixed decode layouts), else empty."""

    @property
    def n_gpus(self) -> int:
        return self.tp * self.pp

    @property
    def label(self) -> str:
        """The server kind's name in host names, file names and manifests: ``kind``, else the role."""
        return self.kind or self.role


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


def _copies(placement: Sequence[Mapping[str, Any]], row: Mapping[str, Any]) -> tuple[tuple[tuple[str, ...], ...], ...]:
    """The GPU ids per copy and stage of a plan row's instances (empty unless the placement has one per replica)."""
    role = row.get("role", "agg")
    copies = [
        p
        for p in placement
        if p["model"] == row["model"]
        and p.get("role", "agg") == role
        and p["tp"] == row["tp"]
        and p["pp"] == row["pp"]
        and p["gpu"] == row["gpu"]
    ]
    if len(copies) != int(row["replicas"]):
        return ()
    return tuple(tuple(tuple(s) for s in c["stages"]) for c in copies)


def _decode_kind(row: Mapping[str, Any]) -> str:
    dp = "-dp" if row.get("dp_attention") else ""
    return f"decode-tp{row['tp']}pp{row['pp']}ep{row['ep']}{dp}-b{row['batch']}"


def _pooled(
    name: str,
    rows: Sequence[Mapping[str, Any]],
    placement: Sequence[Mapping[str, Any]],
    isl: int | None,
    osl: int | None,
    context: float,
) -> Deployment:
    """The xPyD deployment of a fleet model served by a prefill pool and decode instances (``serving: disagg``):
    one prefill kind, one or several decode kinds (named apart when several), the figures of the whole pool."""
    prefill = [r for r in rows if r.get("role") == "prefill"]
    decode = [r for r in rows if r.get("role") == "decode"]
    if len(prefill) != 1 or not decode:
        raise InvalidInput(
            "answer",
            f"model {name!r} is pooled but its rows hold {len(prefill)} prefill and {len(decode)} decode kinds",
        )
    (p,) = prefill
    isl_, osl_, stated = _lengths({"context": context}, isl, osl)
    several = len(decode) > 1
    instances = [
        Instance(
            "prefill",
            str(p["gpu"]),
            int(p["tp"]),
            int(p["pp"]),
            int(p["ep"]),
            int(p["batch"]),
            int(p["replicas"]),
            tp_2d=bool(p["tp_2d"]),
            prefill_batch=int(p["batch"]),
            placement=_copies(placement, p),
        )
    ]
    for d in decode:
        instances.append(
            Instance(
                "decode",
                str(d["gpu"]),
                int(d["tp"]),
                int(d["pp"]),
                int(d["ep"]),
                int(d["batch"]),
                int(d["replicas"]),
                tp_2d=bool(d["tp_2d"]),
                dp_attention=bool(d.get("dp_attention", False)),
                placement=_copies(placement, d),
                kind=_decode_kind(d) if several else "",
            )
        )
    # The pool at full decode batches (the benchmark's concurrency): tok/s adds up over the decode instances, the
    # per-request figures are their means weighted by the requests each kind serves in the plan.
    served = [float(d.get("served_req_s") or 0) for d in decode]
    weights = served if sum(served) > 0 else [float(d["replicas"]) for d in decode]
    total = sum(weights)
    predicted = {"throughput_tok_s": sum(float(d["capacity_tok_s"]) for d in decode)}
    if all(d.get("tok_s_per_request") is not None for d in decode):
        # the steady state: a row's tpot_ms is its percentile where its limit holds at one
        speeds = [float(d["tok_s_per_request"]) for d in decode]
        predicted["time_per_token_s"] = sum(w / v for v, w in zip(speeds, weights, strict=True)) / total
        predicted["tok_s_per_request"] = sum(v * w for v, w in zip(speeds, weights, strict=True)) / total
    return Deployment(
        name=name,
        model=str(p["model_spec"]),
        weight_bits=int(p["weight_bits"]),
        kv_bits=int(p.get("kv_bits", 16)),
        instances=tuple(instances),
        isl=isl_,
        osl=osl_,
        context=context,
        gamma=int(p["gamma"]),
        predicted=predicted,
        units=1,
        lengths_stated=stated,
    )


def from_plan(
    plan: Mapping[str, Any],
    lengths: Mapping[str, tuple[int, int]] | None = None,
    contexts: Mapping[str, float] | None = None,
) -> list[Deployment]:
    """One deployment per (model, layout) row of a fleet plan's first period, with the placement of its copies; a
    model served by disaggregated pools (rows with role prefill / decode) is one xPyD deployment of all its rows.

    ``lengths`` maps a fleet model's name to its (isl, osl); without them the benchmark lengths are derived from
    the context a decode-only model was planned at (``contexts``, by name; the default context when not given).
    """
    missing = [k for k in PLAN_FIELDS if k not in plan]
    if missing or not isinstance(plan["rows"], Sequence):
        raise InvalidInput("answer", f"is not a roofline-opt plan: it lacks {', '.join(missing) or 'rows'}")
    placement = plan["placement"][0] if plan["placement"] else []
    rows = [r for r in plan["rows"] if r.get("period", 0) == 0]
    out = []
    done: set[str] = set()
    for row in rows:
        name = str(row["model"])
        isl, osl = (lengths or {}).get(name, (None, None))
        context = float((contexts or {}).get(name, DEFAULT_CONTEXT))
        if row.get("role", "agg") != "agg":
            if name not in done:
                done.add(name)
                out.append(_pooled(name, [r for r in rows if str(r["model"]) == name], placement, isl, osl, context))
            continue
        record = {
            **row,
            "model": row["model_spec"],
            "context": context,
            "time_per_token_s": row["tpot_ms"] / 1e3,
            "throughput_tok_s": row["throughput_tok_s_per_instance"],
        }
        dep = from_record(record, isl, osl)
        inst = replace(dep.instances[0], placement=_copies(placement, row))
        out.append(replace(dep, name=name, instances=(inst,)))
    return _apart(out)


def _apart(deps: list[Deployment]) -> list[Deployment]:
    """Deployments with distinct names (a model on several layouts: ``code-1``, ``code-2``; their files would
    otherwise share one prefix)."""
    names = [d.name for d in deps]
    seen: dict[str, int] = {}
    out = []
    for d in deps:
        if names.count(d.name) > 1:
            seen[d.name] = seen.get(d.name, 0) + 1
            d = replace(d, name=f"{d.name}-{seen[d.name]}")
        out.append(d)
    return out
