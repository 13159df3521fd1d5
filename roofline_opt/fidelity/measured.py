"""Measured-points CSV rows mapped to setups (model, precision, accelerator, layout, batch, lengths) or to a reason.

A mapped row also says which check its figures allow (``CHECKS``): a stated batch is checked point by point; a row at
maximum load without a batch as a throughput ceiling; a row with a per-user speed and a throughput but no batch
against the frontier at that speed. Replicas (``TP2 x 4 instances``, ``DP4``) and disaggregated deployments (the
decode side: ``prefill 4 GPU TP4 + decode 32 GPU EP32``) are predicted per instance and totalled over the instances.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from roofline_opt import catalog, checks, files
from roofline_opt.errors import InvalidInput
from roofline_opt.fidelity import kv_precision, recipes
from roofline_opt.fidelity import layouts as parse
from roofline_opt.fidelity.names import gpu_card_name, model_candidates, unmodelled_reason
from roofline_opt.optimize.space import MAX_CONTEXT
from roofline_opt.physics.mtp import MTP_MODELS
from roofline_opt.physics.specs import GpuSpec, KvMemoryRule, ModelSpec

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
"""Columns a measured-points CSV must have (``n_gpus``, ``tpot_ms``, ``framework`` and ``notes`` are read when
present)."""

CHECKS = {
    "point": "at the stated batch: predicted tok/s per request and per GPU >= measured",
    "throughput ceiling": "no batch: measured tok/s per GPU <= the best any batch fitting in memory reaches",
    "frontier": "no batch: at the measured tok/s per user, measured tok/s per GPU <= our frontier's",
    "speed ceiling": "no batch nor throughput: measured tok/s per user <= the fastest batch's",
}
"""The kinds of check a row's figures allow, and what each compares."""

DEFAULT_MTP_DEPTH = 3
"""The bound's MTP depth when a row states none: the best of 0..3 drafted tokens per step (TensorRT-LLM's usual MTP3,
so a row that ran MTP1 or MTP2 is still bounded)."""

DEFAULT_MTP_ACCEPTANCE = 0.9
"""The bound's acceptance of each drafted token when the row states none: the top of the 85-90% DeepSeek-V3's
technical report gives for its second-token prediction (the generous end, since a bound must not rest on a guess that
slows us). The estimate uses ``ENGINE_MTP_ACCEPTANCE_LENGTH`` instead."""

ENGINE_MTP_ACCEPTANCE_LENGTH = {1: 1.875, 2: 2.18, 3: 2.44}
"""The estimate's mean tokens per draft-and-verify round of DeepSeek-V3/R1's MTP module as engines run it, by drafted
tokens per round (chain drafting, top-1), when a row states none:

- 1 drafted: 1 + 0.875, the middle of the DeepSeek-V3 technical report's 85-90% second-token acceptance (arXiv
  2412.19437, section 5.4.3); SGLang's MTP pull request reports ~1.9 for the same setting (sgl-project/sglang#3582);
- 2 and 3 drafted: SGLang's measured average acceptance lengths 2.18 (3-token window) and 2.44 (4-token window),
  DeepSeek-V3 on 16 x H200 (lm-sys/lm-sys.github.io blog/2025-07-17-mtp.md, Case Study 1).

TensorRT-LLM publishes its DeepSeek-R1 MTP acceptance only as a figure (tech blog 2, figure 7), not as numbers."""

ENGINE_MTP_DEPTH = {"sglang": 2, "tensorrt-llm": 3, "trt-llm": 3}
"""Drafted tokens per round the estimate runs when a row says MTP without a depth, by engine named in its framework
text: SGLang 2 (``--speculative-num-steps 2 --speculative-num-draft-tokens 3``) and TensorRT-LLM 3
(``num_nextn_predict_layers: 3``), 1 with attention data parallelism (``ENGINE_MTP_DEPTH_DP_ATTENTION``), as
InferenceX runs them (SemiAnalysisAI/InferenceX benchmarks/dsr1_fp8_b200_mtp.sh @574bcd35,
benchmarks/dsr1_fp8_h200_trt_mtp.sh @1fc5d73c). Another engine: ``DEFAULT_MTP_DEPTH``. An aggregated InferenceX
row takes the depth its launch script sets instead (``recipes``; InferenceX's AMD SGLang scripts run 3), a
disaggregated one the depth its matrix entry sets where one is listed (``recipes.DISAGGREGATED_RUNS``)."""

ENGINE_MTP_DEPTH_DP_ATTENTION = {"tensorrt-llm": 1, "trt-llm": 1}
"""TensorRT-LLM's MTP depth with attention data parallelism in InferenceX's recipe (``MTP=1`` when
``DP_ATTENTION=true``, benchmarks/dsr1_fp8_h200_trt_mtp.sh @1fc5d73c)."""


NVFP4_MTP_DRAFT_BITS = 16
"""Weight bits of the MTP block the estimate runs for an NVFP4 row: NVIDIA's NVFP4 DeepSeek-R1 checkpoints leave the
whole MTP layer unquantized (``"model.layers.61*"`` in ``exclude_modules`` of nvidia/DeepSeek-R1-FP4's
hf_quant_config.json, as vllm-project/vllm#25987 quotes; "It's not quantized", sgl-project/sglang#7376). The bound
keeps the draft at the target's bits (the lighter reading)."""


def acceptance_for_length(length: float, depth: int) -> float:
    """The per-token acceptance alpha whose chain of ``depth`` drafted tokens yields ``length`` tokens per round,
    (1 - alpha^(depth+1)) / (1 - alpha) = length (bisection; the expression rises with alpha)."""
    if not 1.0 <= length <= depth + 1:
        raise ValueError(f"acceptance length {length} outside [1, {depth + 1}] for {depth} drafted tokens")
    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        if sum(mid**k for k in range(depth + 1)) < length:
            low = mid
        else:
            high = mid
    return (low + high) / 2


PRECISION_BITS = {
    "nvfp4": 4,
    "mxfp4": 4,
    "fp4": 4,
    "int4": 4,
    "w4a16": 4,
    "w4a8": 4,
    "awq": 4,
    "gptq": 4,
    "fp8": 8,
    "int8": 8,
    "w8a8": 8,
    "bf16": 16,
    "fp16": 16,
    "bfloat16": 16,
    "float16": 16,
}
"""Weight precision of a measured row: the first of these words its precision text names."""

_PRECISION_RE = re.compile("|".join(PRECISION_BITS))
_KV_FORMATS = {"fp8": 8, "int8": 8, "bf16": 16, "fp16": 16}
_KV_RE = re.compile(
    r"(fp8|int8|bf16|fp16)[\s_-]*(?:kv|\(weights\s*\+\s*kv\))"
    r"|kv[\s_-]*(?:cache)?[\s_-]*(?:dtype)?[\s=:_-]*(fp8|int8|bf16|fp16)"
)
_FP8_KV_FOR_RE = re.compile(r"fp8 kv for ([\w.-]+)")
_SPECULATIVE_RE = re.compile(r"\bspeculative\b|\bmtp(-?\d+)?\s+(on|enabled|included)", re.IGNORECASE)
_MTP_DEPTH_RE = re.compile(r"\bmtp-?(\d+)\s+(?:on|enabled|included)", re.IGNORECASE)
_MTP_WINDOW_RE = re.compile(r"\b(\d+)-token (?:MTP )?window", re.IGNORECASE)
"""SGLang's draft-token window (``--speculative-num-draft-tokens``): the accepted-so-far token plus the drafted ones."""
_ACCEPTANCE_LENGTH_RE = re.compile(r"acceptance length(?: of)?\s*(?:=|:)?\s*(\d+(?:\.\d+)?)", re.IGNORECASE)
_ACCEPTANCE_RE = re.compile(r"acceptance(?: rate)?\s*(?:=|of)?\s*(0?\.\d+|\d+(?:\.\d+)?\s*%)", re.IGNORECASE)
_NUMBER_RE = re.compile(r"^~?\s*(\d+(?:\.\d+)?)\s*(k\b)?", re.IGNORECASE)
_KV_LEN_RE = re.compile(r"^kv\s*(\d+)$")
_TTFT_NOTE_RE = re.compile(r"median TTFT (\d+(?:\.\d+)?) ?ms", re.IGNORECASE)
"""A median time to first token a row's notes state (InferenceX rows: ``median TTFT 872 ms``)."""
_DECODE_ONLY_RE = re.compile(r"decode[- ]only (?:figures|measurement|speeds?)", re.IGNORECASE)
"""Notes saying the figures are of decoding alone (no prompt processed): the lengths only set the context."""
_WHOLE_REQUEST_SPEED_RE = re.compile(
    r"per[_ -](?:request|user)[^.;]*?incl(?:\.|udes?|uding)?[^.;]*?(?:prefill|context|ttft)"
    r"|per_request\s*=\s*(?:(?:total|throughput|thr)\s*/\s*(?:bs|\d+)|\d+\s*/\s*latency)",
    re.IGNORECASE,
)
"""A row whose tok/s per request is output tokens over the whole request's time (prefill included), as its notes
say (``per_request=total/BS``, ``per-user tps includes context``); otherwise it is 1 / TPOT."""
_FULL_NUMBER_RE = re.compile(r"~?\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?)", re.ASCII | re.IGNORECASE)
_NON_ASCII_DIGIT_RE = re.compile(r"(?![0-9])\d")
"""A Unicode digit other than 0-9 (Arabic-Indic, full-width, ...): never read as a number."""
MAX_MEASURED_SPEED = 1e9
"""Largest measured tok/s a row may state."""


@dataclass(frozen=True)
class MeasuredSetup:
    """What a measured row describes, in catalog terms: ``instances`` instances of ``tp * pp`` GPUs each (``tp`` is
    the group size with data-parallel attention), ``total_gpus`` GPUs in all (prefill GPUs of a disaggregated
    deployment included), ``batch`` sequences per instance (None: no batch; ``batch_cap``: at most that many),
    decoding at ``context``. ``input_len``/``output_len`` are set when the row states both (whole requests);
    ``speed_basis`` says whether its tok/s per request is 1 / TPOT (``tpot``) or output tokens over the whole
    request's time, prefill included (``request``); ``static_batch``: all prompts prefilled, then all decoded.
    MTP: ``mtp_depth`` drafted tokens every round at ``acceptance`` per token (the estimate's, the engine's figures),
    or with ``mtp_best_depth`` the best depth in 0..``mtp_depth`` (the bound's reading, ``for_bound``); the MTP block
    at ``draft_weight_bits`` (0: the target's). ``prefill``: the prefill side of a disaggregated row, where it states
    one; ``clients``: the sequences (a benchmark's concurrency) the row states over all its instances, where it states
    them so (``batch`` is their share per instance, rounded). ``chunk_tokens``: the prompt tokens one step carries at
    most, as the run's launch script sets them (``recipes.Recipe.step_prompt_tokens``; None: the whole-request
    estimate's default, ``physics.requests.DEFAULT_CHUNK_TOKENS``). ``kv_memory_rule``: how the run's engine sized
    its KV cache, as the launch script's memory flag sets it (``recipes.Recipe.kv_memory_rule``; None: the estimate's
    preset or engine profile decides); the estimate's memory check takes it, the bound's does not. ``assumptions``:
    what the row leaves unstated and the reading guesses (lengths, layouts, MTP figures), in words;
    ``recipe_reading``: what the run's launch script set (``recipes.Recipe.describe``), a fact of the run rather
    than a guess."""

    model_card: str
    weight_bits: int
    kv_bits: int
    gpu_card: str
    tp: int
    pp: int
    ep: int
    instances: int
    batch: int | None
    context: int
    dp_attention: bool = False
    a2a_overlap: bool = False
    kv_stated: bool = True
    total_gpus: int = 0
    check: str = "point"
    serving: str = "aggregated"
    mtp_depth: int = 0
    acceptance: float = DEFAULT_MTP_ACCEPTANCE
    bound_mtp_depth: int = 0
    bound_acceptance: float = DEFAULT_MTP_ACCEPTANCE
    mtp_best_depth: bool = False
    draft_weight_bits: int = 0
    assumptions: tuple[str, ...] = ()
    recipe_reading: str = ""
    batch_cap: int | None = None
    input_len: int | None = None
    output_len: int | None = None
    speed_basis: str = "tpot"
    static_batch: bool = False
    framework: str = ""
    prefill: parse.ParsedLayout | None = None
    clients: int | None = None
    chunk_tokens: int | None = None
    kv_memory_rule: KvMemoryRule | None = None

    @property
    def n_gpus(self) -> int:
        return self.tp * self.pp

    def for_bound(self) -> MeasuredSetup:
        """Unstated settings read as favourably to the measurement as they plausibly were: an unstated KV cache at the
        lowest precision the row's engine runs on its accelerator (``kv_precision``), MTP at the best depth in
        0..``bound_mtp_depth`` and ``bound_acceptance`` (a bound must hold whatever the row left out)."""
        changes: dict[str, Any] = {}
        if not self.kv_stated:
            lowest = kv_precision.lowest_kv_bits(self.framework, self.gpu_card)
            if lowest < self.kv_bits:
                changes["kv_bits"] = lowest
        if self.mtp_depth:
            changes |= {
                "mtp_depth": self.bound_mtp_depth,
                "acceptance": self.bound_acceptance,
                "mtp_best_depth": True,
                "draft_weight_bits": 0,
            }
        return replace(self, **changes) if changes else self

    @property
    def notes(self) -> tuple[str, ...]:
        """The recipe's reading, then the assumptions: the row's assumptions column."""
        return ((self.recipe_reading,) if self.recipe_reading else ()) + self.assumptions

    @property
    def bound_assumptions(self) -> tuple[str, ...]:
        """The KV precisions an unstated KV cache is read as by the estimate and the bound, in words."""
        return () if self.kv_stated else (kv_precision.describe(self.framework, self.gpu_card),)

    @property
    def gpus_in_all(self) -> int:
        return self.total_gpus or self.n_gpus * self.instances

    @property
    def label(self) -> str:
        if self.dp_attention:
            shape = f"dp-attention{self.tp} ep{self.ep}"
        else:
            shape = f"tp{self.tp} pp{self.pp}" + (f" ep{self.ep}" if self.ep > 1 else "")
        copies = f" x{self.instances}" if self.instances > 1 else ""
        mtp = f" mtp{self.mtp_depth}" if self.mtp_depth else ""
        side = " (decode side)" if self.serving == "disaggregated" else ""
        overlap = " tbo" if self.a2a_overlap else ""
        return f"{shape}{overlap}{copies}{mtp}{side}"


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
    framework: str = ""
    measured_ttft_s: float | None = None
    """The row's median time to first token: its ``ttft_ms`` cell (a client's result file), else a ``median TTFT N
    ms`` its notes state (None: neither)."""


def _number(text: str) -> float | None:
    """``"10,907"`` -> 10907, ``"1e3"``, ``"-2"``, ``"~290 mean"`` -> 290, ``"8k"`` -> 8000; None without a number."""
    text = re.sub(r"(?<=\d)[,_](?=\d{3})", "", text.strip())
    full = _FULL_NUMBER_RE.fullmatch(text)
    if full:
        return float(full.group(1))
    match = _NUMBER_RE.match(text)
    if match is None:
        return None
    return float(match.group(1)) * (1000.0 if match.group(2) else 1.0)


def _positive(text: str) -> float | None:
    """A measured figure: a number > 0, else None (not measured)."""
    value = _number(text)
    return value if value is not None and value > 0 else None


def _check_cells(cells: Mapping[str, str]) -> None:
    """Refuse Unicode digits anywhere and impossible measured speeds (zero, negative, absurd), naming the cell."""
    line = cells.get("line", "?")
    for column, text in cells.items():
        if isinstance(text, str) and _NON_ASCII_DIGIT_RE.search(text):
            msg = f"must write numbers with the digits 0-9. Got {checks.shown(text)} instead."
            raise InvalidInput(f"line {line}: {column}", msg)
    for column in ("tok_s_per_request", "tok_s_per_gpu"):
        text = str(cells.get(column, "")).strip()
        value = _number(text)
        if value is not None and not 0 < value <= MAX_MEASURED_SPEED:
            msg = f"must be a measured speed > 0 and <= {MAX_MEASURED_SPEED:g} tok/s. Got {checks.shown(text)} instead."
            raise InvalidInput(f"line {line}: {column}", msg)
    for column in ("input_len", "output_len"):
        value = _number(str(cells.get(column, "")))
        if value is not None and not 0 <= value <= MAX_CONTEXT:
            msg = f"must be a number of tokens in 0..{MAX_CONTEXT:,}. Got {checks.shown(cells[column])} instead."
            raise InvalidInput(f"line {line}: {column}", msg)


@cache
def model_card(card: str) -> ModelSpec | None:
    try:
        return catalog.load_model(card)
    except InvalidInput:
        return None


@cache
def gpu_card(card: str) -> GpuSpec:
    return catalog.load_gpu(card)


def read_measured(path: str | Path | list[dict[str, str]], field: str = "--measured") -> list[dict[str, str]]:
    """The rows of a measured-points CSV as text cells with their line numbers; bad files are InvalidInput. Rows
    already read (``measurements.read_any``: any mix of CSVs and benchmark result files) are returned as they are."""
    if isinstance(path, list):
        return [dict(row) for row in path]
    frame = files.read_csv_cells(path, field, MEASURED_COLUMNS, "measurement")
    return [row | {"line": str(line)} for line, row in enumerate(frame.to_dict("records"), start=2)]


def _map_model(text: str, reasons: list[str]) -> ModelSpec | None:
    model = next((m for m in map(model_card, model_candidates(text)) if m is not None), None)
    if model is None:
        why = unmodelled_reason(text)
        tail = f": it {why}, which the roofline's KV model (every layer reads the whole context) does not describe"
        reasons.append(f"model {text!r} has no catalog card" + (tail if why else ""))
    return model


def _map_precision(text: str, notes: str, model: ModelSpec | None, reasons: list[str]) -> tuple[int, int, bool] | None:
    """(weight bits, KV-cache bits, whether the KV precision is stated) from a precision text such as ``"FP8
    (weights+KV)"``, and a note ``"FP8 KV for X"`` (8-bit when the row's model is X, else 16-bit by exclusion).
    Unstated, the KV cache is read at the engines' default (16-bit); the bound reads it lower (``kv_stated``)."""
    low = text.lower()
    match = _PRECISION_RE.search(low)
    if match is None:
        reasons.append(f"precision {text!r} names no weight format")
        return None
    noted = _FP8_KV_FOR_RE.search(notes.lower())
    kv = _KV_RE.search(low)
    weight_bits = PRECISION_BITS[match.group(0)]
    if kv:
        return weight_bits, _KV_FORMATS[kv.group(1) or kv.group(2)], True
    if noted is not None:
        return weight_bits, 8 if model is not None and noted.group(1) in model.name else 16, True
    return weight_bits, kv_precision.ENGINE_DEFAULT_KV_BITS, False


def _map_gpu(text: str, reasons: list[str]) -> str | None:
    card = gpu_card_name(text)
    if card is None:
        reasons.append(f"gpu {text!r} has no catalog card")
    return card


def _map_lengths(input_len: str, output_len: str, reasons: list[str], notes: list[str]) -> int | None:
    """Mean context during decode: input + output / 2; a missing length is taken at its least (an upper bound)."""
    kv = _KV_LEN_RE.match(input_len.strip().lower())
    if kv and not _number(output_len):
        notes.append(f"context = the stated KV length {kv.group(1)} (decode only)")
        return int(kv.group(1))
    prompt, output = _number(input_len), _number(output_len)
    if prompt is not None and output is not None:
        return round(prompt + output / 2)
    if prompt is None and output is not None:
        notes.append(f"input length {input_len!r} not a number: context = output / 2 (prompts taken as empty)")
        return round(output / 2)
    if prompt is not None:
        notes.append(f"output length {output_len!r} not a number: context = input (the first decode step)")
        return round(prompt)
    reasons.append(f"input_len {input_len!r} and output_len {output_len!r} state no number of tokens")
    return None


@dataclass(frozen=True)
class Speculation:
    """A row's MTP settings: the estimate's (``depth`` drafted tokens every round, ``acceptance`` per token, the
    engine's figures) and the bound's (the best depth in 0..``bound_depth`` at ``bound_acceptance``, read
    favourably). Depth 0: no speculative decoding."""

    depth: int = 0
    acceptance: float = DEFAULT_MTP_ACCEPTANCE
    bound_depth: int = 0
    bound_acceptance: float = DEFAULT_MTP_ACCEPTANCE


def _engine_depth(framework: str, dp_attention: bool) -> int | None:
    name = framework.lower()
    for table in (ENGINE_MTP_DEPTH_DP_ATTENTION, ENGINE_MTP_DEPTH) if dp_attention else (ENGINE_MTP_DEPTH,):
        # TensorRT-LLM first: "Dynamo + TensorRT-LLM" names both Dynamo and the engine that runs the step
        for engine in sorted(table, key=lambda e: "sglang" in e):
            if engine in name:
                return table[engine]
    return None


def _speculation(
    model: ModelSpec | None,
    text: str,
    framework: str,
    dp_attention: bool,
    reasons: list[str],
    notes: list[str],
    recipe_depth: int | None = None,
) -> Speculation:
    """The MTP settings of a row measured with speculative decoding (none without). ``recipe_depth``: the drafted
    tokens the launch script the row ran sets (``recipes``), which fixes an unstated depth for the estimate and the
    bound alike (the run used it)."""
    if not _SPECULATIVE_RE.search(text):
        return Speculation()
    if model is None or model.name not in MTP_MODELS:
        reasons.append("measured with speculative decoding but the model has no MTP module and no draft is named")
        return Speculation()
    depth_match, window_match = _MTP_DEPTH_RE.search(text), _MTP_WINDOW_RE.search(text)
    stated = int(depth_match.group(1)) if depth_match else int(window_match.group(1)) - 1 if window_match else None
    engine = _engine_depth(framework, dp_attention)
    if stated is not None and stated >= 1:
        depth = bound_depth = stated
    elif recipe_depth:
        depth = bound_depth = recipe_depth
        notes.append(f"MTP depth not stated: {depth} drafted (the run's recipe) for the estimate and the bound")
    else:
        depth, bound_depth = engine or DEFAULT_MTP_DEPTH, DEFAULT_MTP_DEPTH
        runs = "the engine's recipe" if engine else "no engine recipe known"
        notes.append(f"MTP depth not stated: estimate {depth} drafted ({runs}), bound the best of 0..{bound_depth}")
    rate, length = _ACCEPTANCE_RE.search(text), _ACCEPTANCE_LENGTH_RE.search(text)
    if rate:
        value = rate.group(1).replace(" ", "")
        acceptance = bound_acceptance = float(value[:-1]) / 100 if value.endswith("%") else float(value)
    elif length and 1.0 <= float(length.group(1)) <= depth + 1:
        acceptance = acceptance_for_length(float(length.group(1)), depth)
        bound_acceptance = max(acceptance, DEFAULT_MTP_ACCEPTANCE) if stated is None else acceptance
        notes.append(f"MTP acceptance length {length.group(1)} stated: {acceptance:.3f} per drafted token")
    else:
        known = min(depth, max(ENGINE_MTP_ACCEPTANCE_LENGTH))
        acceptance = acceptance_for_length(ENGINE_MTP_ACCEPTANCE_LENGTH[known], known)
        bound_acceptance = DEFAULT_MTP_ACCEPTANCE
        notes.append(
            f"MTP acceptance not stated: estimate {acceptance:.3f} per drafted token (engines' published acceptance "
            f"length {ENGINE_MTP_ACCEPTANCE_LENGTH[known]} at {known} drafted), bound {DEFAULT_MTP_ACCEPTANCE}"
        )
    return Speculation(depth, acceptance, bound_depth, bound_acceptance)


def _check(batch: int | None, per_request: float | None, per_gpu: float | None, reasons: list[str]) -> str:
    if per_request is None and per_gpu is None:
        reasons.append("no measured tok/s per request or per GPU (nor a TPOT)")
        return "point"
    if batch is not None:
        return "point"
    if per_request is not None:
        return "frontier" if per_gpu is not None else "speed ceiling"
    return "throughput ceiling"


def _recipe_settings(
    recipe: recipes.Recipe | None,
    layout: parse.ParsedLayout | None,
    prompt: float | None,
    output: float | None,
    batch: int | None,
) -> tuple[int | None, KvMemoryRule | None, float | None]:
    """What the row's recipe sets for its run (tensor parallelism, attention DP, lengths, concurrency per instance):
    the prompt tokens a step carries at most (None: no lengths, or no prefill setting), the KV-memory rule and the
    memory fraction it rests on (None, None: no memory fraction for the run); all None without a recipe."""
    if recipe is None or layout is None:
        return None, None, None
    isl, osl = (None if v is None else round(v) for v in (prompt, output))
    run = recipes.Run(layout.tp, layout.dp_attention, isl, osl, batch)
    return recipe.step_prompt_tokens(run), recipe.kv_memory_rule(run), recipe.memory.fraction_for(run)


def _disaggregated_entry(
    text: Mapping[str, str],
    gpu_name: str,
    weight_bits: int,
    layout: parse.ParsedLayout,
    clients: int | None,
    mtp: bool,
) -> recipes.DisaggregatedRun | None:
    """The InferenceX matrix entry a disaggregated DeepSeek-R1 row ran (``recipes.DISAGGREGATED_RUNS``; None:
    aggregated, another model, no stated prefill side or lengths, or not listed)."""
    prompt, output = _number(text["input_len"]), _number(text["output_len"])
    if layout.prefill is None or prompt is None or output is None or "deepseek-r1" not in text["model"].lower():
        return None
    gpus = (layout.prefill.total_gpus, layout.total_gpus - layout.prefill.total_gpus)
    lengths = (round(prompt), round(output))
    return recipes.disaggregated_run_for(text["notes"], gpu_name, weight_bits, lengths, clients, mtp, gpus)


def map_row(cells: Mapping[str, str]) -> MeasuredRow:
    """A measured row in catalog terms; every problem found is listed in ``reasons``."""
    _check_cells(cells)
    keys = (*MEASURED_COLUMNS, "n_gpus", "tpot_ms", "ttft_ms", "framework", "notes", "line")
    text = {k: str(cells.get(k, "") if cells.get(k) is not None else "").strip() for k in keys}
    text = {k: "" if v.lower() == "nan" else v for k, v in text.items()}
    reasons: list[str] = []
    notes: list[str] = []
    model = _map_model(text["model"], reasons)
    bits = _map_precision(text["precision"], text["notes"], model, reasons)
    gpu_name = _map_gpu(text["gpu"], reasons)
    if bits is not None and gpu_name is not None and not gpu_card(gpu_name).supports(bits[0]):
        reasons.append(f"gpu {gpu_name} has no FLOP rate for {bits[0]}-bit weights")
    where = f"line {text['line'] or '?'}"
    remarks = f"{text['framework']} {text['notes']}"
    layout = parse.map_layout(text["layout"], text["n_gpus"], model, reasons, notes, f"{where}: layout", remarks)
    batch, cap, clients = (
        parse.map_batch(text["batch_or_concurrency"], layout, reasons, notes, f"{where}: batch_or_concurrency")
        if layout
        else (None, None, None)
    )
    context = _map_lengths(text["input_len"], text["output_len"], reasons, notes)
    per_request, per_gpu = (_positive(text[k]) for k in ("tok_s_per_request", "tok_s_per_gpu"))
    tpot = _positive(text["tpot_ms"])
    ttft_note = _TTFT_NOTE_RE.search(text["notes"])
    ttft_ms = _positive(text["ttft_ms"]) or (float(ttft_note.group(1)) if ttft_note else None)
    if per_request is None and tpot:
        per_request = 1000.0 / tpot
    check = _check(batch, per_request, per_gpu, reasons)
    extra = " ".join((text["layout"], text["framework"], text["notes"]))
    dp_attention = bool(layout and layout.dp_attention)
    recipe, entry = None, None
    if bits is not None and gpu_name is not None and layout is not None:
        mtp = bool(_SPECULATIVE_RE.search(extra))
        recipe = recipes.recipe_for(
            text["model"], text["framework"], text["notes"], gpu_name, bits[0], layout.serving, mtp
        )
        entry = _disaggregated_entry(text, gpu_name, bits[0], layout, clients, mtp)
    prompt, output = _number(text["input_len"]), _number(text["output_len"])
    decode_only = bool(_DECODE_ONLY_RE.search(text["notes"]))
    whole = prompt is not None and output is not None and not _KV_LEN_RE.match(text["input_len"].lower())
    whole = whole and not decode_only
    chunk, memory_rule, fraction = _recipe_settings(
        recipe, layout, prompt if whole else None, output if whole else None, batch
    )
    reading = recipe.describe(chunk, fraction) if recipe is not None and bits is not None else ""
    if recipe is not None and bits is not None:
        if not bits[2] and recipe.kv_bits is not None:
            # a KV precision the run's script sets is a fact of the run: the bound rests on it too
            bits = (bits[0], recipe.kv_bits, True)
    if entry is not None and bits is not None:
        reading = entry.describe()
        if not bits[2] and entry.kv_bits is not None:
            bits = (bits[0], entry.kv_bits, True)  # both sides ran the KV cache the entry's scripts set
    depth = recipe.depth(dp_attention) if recipe is not None else entry.mtp_depth if entry is not None else None
    speculation = _speculation(model, extra, text["framework"], dp_attention, reasons, notes, depth)
    draft_bits = 0
    if speculation.depth and "nvfp4" in text["precision"].lower():
        draft_bits = NVFP4_MTP_DRAFT_BITS
        notes.append(f"NVFP4 checkpoint: the estimate's MTP block at {draft_bits}-bit weights (left unquantized)")
    basis = "request" if _WHOLE_REQUEST_SPEED_RE.search(f"{text['notes']} {text['tok_s_per_request']}") else "tpot"
    setup = None
    if (
        model is not None
        and bits is not None
        and gpu_name is not None
        and layout is not None
        and context is not None
        and not reasons
    ):
        setup = MeasuredSetup(
            model.name,
            bits[0],
            bits[1],
            gpu_name,
            layout.tp,
            layout.pp,
            layout.ep,
            layout.instances,
            batch,
            context,
            dp_attention=layout.dp_attention,
            a2a_overlap=layout.a2a_overlap,
            kv_stated=bits[2],
            total_gpus=layout.total_gpus,
            check=check,
            serving=layout.serving,
            mtp_depth=speculation.depth,
            acceptance=speculation.acceptance,
            bound_mtp_depth=speculation.bound_depth,
            bound_acceptance=speculation.bound_acceptance,
            draft_weight_bits=draft_bits,
            assumptions=tuple(notes),
            recipe_reading=reading,
            batch_cap=cap,
            input_len=round(prompt) if whole and prompt is not None else None,
            output_len=round(output) if whole and output is not None else None,
            speed_basis=basis,
            static_batch="static" in text["batch_or_concurrency"].lower(),
            framework=text["framework"],
            prefill=layout.prefill,
            clients=clients,
            chunk_tokens=chunk,
            kv_memory_rule=memory_rule,
        )
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
        framework=text["framework"],
        measured_ttft_s=None if ttft_ms is None else ttft_ms / 1e3,
    )
