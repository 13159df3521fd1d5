"""Measured-points CSV rows mapped to setups (model, precision, accelerator, layout, batch, lengths) or to a reason."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from roofline_opt import catalog, files
from roofline_opt.errors import InvalidInput
from roofline_opt.physics.specs import GpuSpec, ModelSpec

MEASURED_COLUMNS = (
    "model",
    "precision",
    "gpu",
    "layout",
    "batch_or_concurrency",
    "input_len",
    "output_len",
    "tok_s_per_request",
    "tok_s_per_gpu",
)
"""Columns a measured-points CSV must have (``n_gpus``, ``framework`` and ``notes`` are read when present)."""


MODEL_ALIASES = {
    "llama-2-70b-chat": "llama-2-70b",
    "llama-3.3-70b-instruct": "llama-3.3-70b",
    "llama-3.1-405b-instruct": "llama-3.1-405b",
    "deepseek-r1": "deepseek-v3",
    "deepseek-r1-0528": "deepseek-v3",
    "deepseek-v3/r1": "deepseek-v3",
}
"""Normalised measured model names -> catalog cards where they differ (other names are looked up as they are)."""


GPU_PATTERNS = (
    ("gb200", "gb200"),
    ("b200", "b200"),
    ("h100", "h100-sxm"),
    ("h200", "h200"),
    ("h800", "h800"),
    ("a100", "a100-80gb"),
    ("mi325x", "mi325x"),
    ("mi300x", "mi300x"),
    ("v100", "v100"),
)
"""Substring of a lower-cased measured GPU name -> catalog card, first match wins (GB200 before B200)."""


PRECISION_BITS = {"nvfp4": 4, "mxfp4": 4, "fp4": 4, "int4": 4, "fp8": 8, "int8": 8, "bf16": 16, "fp16": 16}
"""Weight precision of a measured row: the first of these words its precision text names."""


_PRECISION_RE = re.compile("|".join(PRECISION_BITS))


_FP8_KV_RE = re.compile(r"fp8\s*kv|fp8 \(weights\+kv\)")


_SPECULATIVE_RE = re.compile(r"\bspeculative\b|\bmtp(-?\d+)?\s+(on|enabled|included)", re.IGNORECASE)


_BATCH_RE = re.compile(r"(?:static batch|batch|concurrency)\s+(\d+)|^~?(\d+)\s+in flight")


_NUMBER_RE = re.compile(r"^~?\s*(\d+(?:\.\d+)?)")


@dataclass(frozen=True)
class MeasuredSetup:
    """What a measured row describes, in catalog terms: one instance of ``tp * pp`` GPUs, ``instances`` of them."""

    model_card: str
    weight_bits: int
    kv_bits: int
    gpu_card: str
    tp: int
    pp: int
    ep: int
    instances: int
    batch: int
    context: int
    input_len: int | None = None
    output_len: int | None = None
    speed_basis: str = "tpot"
    """Input and output tokens of the measured requests, and whether tok/s per request is 1 / TPOT (``tpot``) or
    output tokens over the whole request's time, prefill included (``request``: static batches)."""

    @property
    def n_gpus(self) -> int:
        return self.tp * self.pp

    @property
    def label(self) -> str:
        extra = f" ep{self.ep}" if self.ep > 1 else ""
        copies = f" x{self.instances}" if self.instances > 1 else ""
        return f"tp{self.tp} pp{self.pp}{extra}{copies}"


@dataclass(frozen=True)
class MeasuredRow:
    """One CSV row: its line, names as written, the measured speeds, and the setup (None with the reasons why)."""

    line: int
    model: str
    precision: str
    gpu: str
    layout: str
    measured_tok_s_per_request: float | None
    measured_tok_s_per_gpu: float | None
    setup: MeasuredSetup | None
    reasons: tuple[str, ...]


def _number(text: str) -> float | None:
    match = _NUMBER_RE.match(text.strip())
    return float(match.group(1)) if match else None


def _normalise(name: str) -> str:
    """``"DeepSeek-R1 (671B MoE)"`` -> ``"deepseek-r1"``: lower case, remarks dropped, blanks as dashes."""
    return re.sub(r"[\s_]+", "-", re.sub(r"\(.*?\)", "", name).strip().lower())


@cache
def model_card(card: str) -> ModelSpec | None:
    try:
        return catalog.load_model(card)
    except InvalidInput:
        return None


@cache
def gpu_card(card: str) -> GpuSpec:
    return catalog.load_gpu(card)


def read_measured(path: str | Path, field: str = "--measured") -> list[dict[str, str]]:
    """The rows of a measured-points CSV as text cells with their line numbers; bad files are InvalidInput."""
    frame = files.read_csv_cells(path, field, MEASURED_COLUMNS, "measurement")
    return [row | {"line": str(line)} for line, row in enumerate(frame.to_dict("records"), start=2)]


def _map_model(text: str, reasons: list[str]) -> ModelSpec | None:
    name = _normalise(text)
    model = model_card(MODEL_ALIASES.get(name, name)) if name else None
    if model is None:
        reasons.append(f"model {text!r} has no catalog card")
    return model


def _map_precision(text: str, reasons: list[str]) -> tuple[int, int] | None:
    """(weight bits, KV-cache bits) from a precision text such as ``"FP8 (weights+KV)"``."""
    low = text.lower()
    match = _PRECISION_RE.search(low)
    if match is None:
        reasons.append(f"precision {text!r} names no weight format")
        return None
    return PRECISION_BITS[match.group(0)], 8 if _FP8_KV_RE.search(low) else 16


def _map_gpu(text: str, reasons: list[str]) -> str | None:
    low = text.lower()
    card = next((card for pattern, card in GPU_PATTERNS if pattern in low), None)
    if card is None:
        reasons.append(f"gpu {text!r} has no catalog card")
    return card


def _map_layout(text: str, n_gpus: str, model: ModelSpec | None, reasons: list[str]) -> tuple[int, ...] | None:
    """(tp, pp, ep, instances) from a layout such as ``"TP2 x 4 instances"`` or ``"TP8, MoE EP4"``."""
    low = text.lower()
    if re.search(r"prefill|disagg", low):
        reasons.append(f"layout {text!r} is disaggregated prefill/decode: one instance does not model it")
        return None
    found = {key: re.search(rf"\b{key}\s*(\d+)", low) for key in ("tp", "pp", "ep")}
    if found["tp"] is None:
        reasons.append(f"layout {text!r} gives no tensor-parallel degree TPn")
        return None
    tp, pp, ep = (int(m.group(1)) if m else 1 for m in found.values())
    copies = re.search(r"x\s*(\d+)\s*instances?", low)
    instances = int(copies.group(1)) if copies else 1
    stated = _number(n_gpus)
    if stated is not None and stated != tp * pp * instances:
        reasons.append(f"layout {text!r} uses {tp * pp * instances} GPUs but n_gpus is {n_gpus}")
        return None
    if ep > 1 and model is not None and (not model.is_moe or model.n_experts % ep or tp % ep):
        reasons.append(f"layout {text!r}: EP{ep} must divide TP{tp} and the experts of a MoE model")
        return None
    return tp, pp, ep, instances


def _map_batch(text: str, instances: int, pp: int, reasons: list[str]) -> int | None:
    match = _BATCH_RE.search(text.lower())
    if match is None:
        reasons.append(f"batch {text!r} states no batch or concurrency")
        return None
    batch = max(round(int(match.group(1) or match.group(2)) / instances), 1)
    if batch < pp:
        reasons.append(f"batch {batch} per instance is smaller than the pipeline degree {pp}")
        return None
    return batch


def _map_lengths(input_len: str, output_len: str, reasons: list[str]) -> int | None:
    """Mean context during decode: input + output / 2."""
    lengths = _number(input_len), _number(output_len)
    for name, text, value in zip(("input_len", "output_len"), (input_len, output_len), lengths, strict=True):
        if value is None:
            reasons.append(f"{name} {text!r} is not a number of tokens")
    if None in lengths:
        return None
    return round(lengths[0] + lengths[1] / 2)


def map_row(cells: Mapping[str, str]) -> MeasuredRow:
    """A measured row in catalog terms; every problem found is listed in ``reasons``."""
    text = {k: str(cells.get(k, "")).strip() for k in (*MEASURED_COLUMNS, "n_gpus", "framework", "notes", "line")}
    reasons: list[str] = []
    model = _map_model(text["model"], reasons)
    bits = _map_precision(text["precision"], reasons)
    gpu_name = _map_gpu(text["gpu"], reasons)
    if bits is not None and gpu_name is not None and not gpu_card(gpu_name).supports(bits[0]):
        reasons.append(f"gpu {gpu_name} has no FLOP rate for {bits[0]}-bit weights")
    layout = _map_layout(text["layout"], text["n_gpus"], model, reasons)
    batch = _map_batch(text["batch_or_concurrency"], layout[3], layout[1], reasons) if layout else None
    context = _map_lengths(text["input_len"], text["output_len"], reasons)
    per_request, per_gpu = _number(text["tok_s_per_request"]), _number(text["tok_s_per_gpu"])
    if per_request is None and per_gpu is None:
        reasons.append("no measured tok/s per request or per GPU")
    setup = None
    if None not in (model, bits, gpu_name, layout, batch, context) and not reasons:
        tp, pp, ep, instances = layout
        isl, osl = round(_number(text["input_len"])), round(_number(text["output_len"]))
        basis = "request" if "static" in text["batch_or_concurrency"].lower() else "tpot"
        setup = MeasuredSetup(
            model.name, bits[0], bits[1], gpu_name, tp, pp, ep, instances, batch, context, isl, osl, basis
        )
        extra = " ".join((text["layout"], text["framework"], text["notes"]))
        if _SPECULATIVE_RE.search(extra):
            reasons.append("measured with speculative decoding (MTP): a one-token-per-step roofline does not bound it")
    return MeasuredRow(
        line=int(text["line"] or 0),
        model=text["model"],
        precision=text["precision"],
        gpu=text["gpu"],
        layout=text["layout"],
        measured_tok_s_per_request=per_request,
        measured_tok_s_per_gpu=per_gpu,
        setup=setup,
        reasons=tuple(reasons),
    )
