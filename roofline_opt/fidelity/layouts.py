"""Layout and batch texts of measured rows: tensor/pipeline/expert degrees, replicas, data-parallel attention and
the decode side of disaggregated deployments.

``TP2 x 4 instances`` and ``TP1 DP8`` are replicas of one instance; ``DEP8``, ``TP8 EP8 with attention DP`` and
``EP72 + DP attention`` are one data-parallel-attention group of 8 or 72 GPUs; wide EP named without a TP degree
(``decode 32 GPU EP32``) is read as data-parallel attention, the convention of wide-EP deployments. In a
disaggregated layout (``prefill 4 GPU TP4 + decode 32 GPU EP32``) the decode side is the row's layout: it produces
every output token, so its prediction bounds the deployment's output speed and throughput. The prefill side, parsed
the same way where it states its GPUs and shape, is kept as ``ParsedLayout.prefill``: a closed-loop benchmark's
throughput also depends on how fast it prefills (``whole_requests``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from roofline_opt import checks
from roofline_opt.errors import InvalidInput
from roofline_opt.optimize.space import MAX_BATCH_LIMIT, MAX_DEGREE
from roofline_opt.physics.specs import ModelSpec

_NUMBER_RE = re.compile(r"^~?\s*(\d+(?:\.\d+)?)")
_DISAGG_RE = re.compile(r"prefill|disagg|\bpd\b")
_DP_ATTENTION_RE = re.compile(
    r"(?:dp|data[\s-]*parallel)[\s_-]*(?:attention|attn)|(?:attention|attn)[\s_-]*(?:dp|data[\s-]*parallel)"
)
_REPLICAS_RE = re.compile(
    r"[x×]\s*(\d+)\s*(?:instances?|replicas?|copies)|(\d+)\s*(?:instances|replicas|copies)|(?<![a-z])dp\s*[=:]?\s*(\d+)"
    r"|tp\s*\d+\s*[x×]\s*(\d+)\b(?!\s*gpu)|(\d+)\s*[x×]\s*tp\s*\d"
)
_OVERLAP_RE = re.compile(r"(?:two|dual|2)[\s-]*(?:micro[\s-]*)?batch(?:es)?[\s-]*overlap|\btbo\b")
_UNSIZED_EP_RE = re.compile(r"\bep\b(?!\s*\d)")
_PER_GPU_BATCH_RE = re.compile(r"(\d+)\s*(?:seqs?|sequences|requests)?\s*(?:/|per)\s*(?:gpu|device|rank)")
_LITTLE_RE = re.compile(r"~?\s*(\d+)\s+in flight")
_CAP_RE = re.compile(r"max(?:imum)?[\s_-]*(?:batch(?:[\s_-]*size)?|bs)\s*[=:]?\s*(\d+)")
_BATCH_RE = re.compile(
    r"(?:static batch|batch[\s_-]*size|batch|bs|max[\s_-]*concurrency|concurrency|conc)\s*[=:]?\s*(\d+)"
    r"|(\d+)\s*(?:concurrent|parallel)"
)


@dataclass(frozen=True)
class ParsedLayout:
    """One instance's shape, how many instances, and the GPUs the row's per-GPU figure is spread over."""

    tp: int
    pp: int
    ep: int
    instances: int
    dp_attention: bool
    serving: str
    total_gpus: int
    a2a_overlap: bool = False
    prefill: ParsedLayout | None = None
    """The prefill side's instances of a disaggregated layout (None: aggregated, or the row does not state it)."""


def _number(text: str) -> int | None:
    match = _NUMBER_RE.match(text.strip())
    return int(float(match.group(1))) if match else None


def _whole(where: str, text: str, what: str, maximum: int) -> int:
    """A whole number from a row's text, in 1..maximum, else InvalidInput naming the row and column."""
    value = int(text)
    if not 1 <= value <= maximum:
        raise InvalidInput(where, f"{what} must be in 1..{maximum:,}. Got {checks.shown(text)} instead.")
    return value


def _degree(text: str, key: str, where: str = "layout") -> int | None:
    """``TP8``, ``tp=8``, ``TP 8`` and ``TP8EP8``; ``ep`` inside ``dep8`` is not an EP degree."""
    match = re.search(rf"(?<![a-z]){key}(?:[\s_-]*size)?\s*[=:]?\s*(\d+)", text, re.ASCII)
    return _whole(where, match.group(1), key.upper(), MAX_DEGREE) if match else None


def _decode_side(low: str, stated: int | None, reasons: list[str]) -> tuple[str, int] | None:
    """The decode part of a disaggregated layout (all of it when it names no side) and its GPU count."""
    part = low[low.index("decode") :].split(";")[0] if "decode" in low else low
    gpus = re.search(r"(\d+)\s*gpus?\b", part)
    count = int(gpus.group(1)) if gpus else stated
    if count is None:
        reasons.append(f"layout {low!r}: the number of decode GPUs is not stated")
        return None
    return part, count


def _prefill_side(low: str, model: ModelSpec | None, where: str, decode_gpus: int | None, stated: int | None):
    """The prefill part of a disaggregated layout (``prefill 4 GPU (1 x TP4)``), None where it states no prefill GPU
    count or shape, or one its degrees or the row's GPU count (prefill + decode) contradict: its problems are not the
    row's (the decode side still bounds it)."""
    if "prefill" not in low or "decode" not in low or low.index("prefill") > low.index("decode"):
        return None
    part = low[low.index("prefill") + len("prefill") : low.index("decode")].strip(" +;,")
    gpus = re.search(r"(\d+)\s*gpus?\b", part)
    if gpus is None or decode_gpus is None or stated is None or int(gpus.group(1)) + decode_gpus != stated:
        return None
    try:
        found = map_layout(part, gpus.group(1), model, [], [], f"{where} (prefill side)")
    except InvalidInput:
        return None
    return None if found is None or found.serving != "aggregated" else found


def map_layout(
    text: str,
    n_gpus: str,
    model: ModelSpec | None,
    reasons: list[str],
    notes: list[str],
    where: str = "layout",
    remarks: str = "",
) -> ParsedLayout | None:
    """The layout of a measured row, or None with the reason; impossible degrees are InvalidInput naming ``where``.
    ``remarks`` (the row's framework and notes) may state data-parallel attention for a MoE model
    (``enable_attention_dp``): its TP degree is then the attention group."""
    low = text.lower()
    stated = _number(n_gpus)
    overlap = bool(_OVERLAP_RE.search(low))
    disaggregated = bool(_DISAGG_RE.search(low)) or low.startswith("decode")
    pool = stated
    if disaggregated:
        side = _decode_side(low, stated, reasons)
        if side is None:
            return None
        low, pool = side
    tp, pp, ep, dep = (_degree(low, key, where) for key in ("tp", "pp", "ep", "dep"))
    if pool == 0:
        reasons.append(f"layout {text!r} names a GPU count of 0")
        return None
    dp_attention = dep is not None or bool(_DP_ATTENTION_RE.search(low))
    if not dp_attention and model is not None and model.is_moe and _DP_ATTENTION_RE.search(remarks.lower()):
        dp_attention = True
        notes.append("data-parallel attention stated in the notes: the TP degree is the attention group")
    dp_degree = _degree(low, "dp", where)
    wide_ep = (ep is not None or _UNSIZED_EP_RE.search(low)) and tp is None
    if not dp_attention and wide_ep:
        dp_attention = True
        notes.append("attention layout not stated with wide EP: data-parallel attention (the wide-EP convention)")
    serving = "disaggregated" if disaggregated else "aggregated"
    prefill = _prefill_side(text.lower(), model, where, pool, stated) if disaggregated else None
    if dp_attention and pp is not None and pp > 1:
        reasons.append(f"layout {text!r}: data-parallel attention with pipeline parallelism PP{pp} is not modelled")
        return None
    if dp_attention:
        group = dep or ep or dp_degree or tp or pool
        parsed = _dp_attention(text, group, pool, stated, model, serving, reasons, notes)
        if parsed is None or not overlap:
            return parsed if parsed is None else replace(parsed, prefill=prefill)
        notes.append("two-batch overlap: the expert all-to-all runs alongside compute and memory")
        return replace(parsed, a2a_overlap=True, prefill=prefill)
    if overlap:
        notes.append("two-batch overlap stated without data-parallel attention: not modelled")
    if tp is None:
        reasons.append(f"layout {text!r} gives no tensor-parallel degree TPn")
        return None
    pp, ep = pp or 1, ep or 1
    copies = _REPLICAS_RE.search(low)
    instances = next((_whole(where, g, "instances", checks.MAX_INT) for g in copies.groups() if g), 1) if copies else 1
    if not copies and pool is not None and pool > tp * pp and pool % (tp * pp) == 0:
        instances = pool // (tp * pp)
        if not disaggregated:
            notes.append(f"{pool} GPUs with {tp * pp} per instance: {instances} replicas assumed")
    used = tp * pp * instances
    if pool is not None and pool != used:
        reasons.append(f"layout {text!r} uses {used} GPUs but n_gpus is {n_gpus}")
        return None
    if ep > 1 and model is not None and (not model.is_moe or model.n_experts % ep or tp % ep):
        reasons.append(f"layout {text!r}: EP{ep} must divide TP{tp} and the experts of a MoE model")
        return None
    return ParsedLayout(tp, pp, ep, instances, False, serving, stated or used, prefill=prefill)


def _dp_attention(
    text: str,
    group: int | None,
    pool: int | None,
    stated: int | None,
    model: ModelSpec | None,
    serving: str,
    reasons: list[str],
    notes: list[str],
) -> ParsedLayout | None:
    """A data-parallel-attention layout: ``group`` GPUs per instance, ``pool`` GPUs of such instances."""
    if group is None:
        reasons.append(f"layout {text!r}: data-parallel attention over an unstated number of GPUs")
        return None
    if model is not None and not model.is_moe:
        reasons.append(f"layout {text!r}: data-parallel attention with expert parallelism needs a MoE model")
        return None
    pool = pool or group
    if pool % group:
        reasons.append(f"layout {text!r}: {pool} GPUs are not whole groups of {group}")
        return None
    if model is not None and model.n_experts % group:
        notes.append(f"EP{group} does not divide {model.n_experts} experts: E/G on average per GPU")
    return ParsedLayout(group, 1, group, pool // group, True, serving, stated or pool)


def map_batch(
    text: str, layout: ParsedLayout, reasons: list[str], notes: list[str], where: str = "batch_or_concurrency"
) -> tuple[int | None, int | None, int | None]:
    """(sequences per instance, the most sequences per instance the row allows, the sequences stated over all
    instances); a batch of None means the row states none (its check then needs none), a cap of None no cap (``max
    batch 256`` is a cap, not a batch), a total of None a batch stated per GPU or none."""
    low = text.lower()
    cap_match = _CAP_RE.search(low)
    cap = _whole(where, cap_match.group(1), "the batch", MAX_BATCH_LIMIT) if cap_match else None
    if cap_match:
        low = low[: cap_match.start()] + low[cap_match.end() :]
    if _LITTLE_RE.search(low):
        notes.append("in-flight requests computed by Little's law are not a batch: no batch taken")
        return None, cap, None
    match = _BATCH_RE.search(low)
    per_gpu = _PER_GPU_BATCH_RE.search(low)
    stated = None
    if match is not None:
        stated = _whole(where, match.group(1) or match.group(2), "the batch", MAX_BATCH_LIMIT)
        batch = max(round(stated / layout.instances), 1)
    elif per_gpu is not None:
        batch = _whole(where, per_gpu.group(1), "the batch", MAX_BATCH_LIMIT) * layout.tp * layout.pp
    else:
        return None, cap, None
    if batch < layout.pp:
        reasons.append(f"batch {batch} per instance is smaller than the pipeline degree {layout.pp}")
        return None, cap, None
    return batch, cap, stated
