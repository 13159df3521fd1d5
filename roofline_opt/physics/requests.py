"""Whole requests (physics.md 10.1-10.4): prefill, aggregated serving with chunked prefill, disaggregated serving.

Every function is vectorised like ``evaluator.step`` and builds on it, so a request's figures come from the same
physics as a decoding step. Vocabulary: a *workload* is one or more request classes (I input and O output tokens, a
weight = share of requests); B is the number of sequences decoding together in an instance; the decode context is
C = I + O / 2 (weighted by output tokens over a mix) unless the caller fixes it in the layout.

- ``tpot_step``: the steady state of an instance: B decode tokens at context C and, when aggregated, the
  B * I / O prompt tokens per step prefilled in chunks (10.3), smeared into every step (paper) or carried by chunk
  steps among decode-only steps (``CycleFigures``, docs/physics/step-structure.md). With I = 0 it is
  ``evaluator.step`` exactly (every added term is 0.0).
- ``ttft_aggregated_s``: ceil(I / chunk) steps of B decode tokens plus one chunk, the longest class.
- ``prefill_step``: one prefill step of b prompts of I tokens at C = 0, KV cache written (10.2).
- ``prefill_figures``: a prefill instance's requests/s and the time to first token with the KV transfer (10.4).
- ``aggregated_figures`` / ``disaggregated_figures``: every figure of a whole setup, with prices.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from roofline_opt.physics import evaluator as ev
from roofline_opt.physics.specs import GpuSpec, ModelSpec, Preset

DEFAULT_CHUNK_TOKENS = 2048
"""Prefill tokens per step in aggregated serving (vLLM, SGLang and TensorRT-LLM default budgets)."""
AGG, DISAGG = "agg", "disagg"
SERVING_MODES = (AGG, DISAGG)


@dataclass(frozen=True)
class Workload:
    """Request classes served by one deployment: input tokens, output tokens and weights (shares of requests).

    ``prefix``: per class, the first prompt tokens whose KV cache is already held (a prefix-cache hit; empty: none).
    They are read, not computed: prefill computes the I - P new tokens, each attending over the cached prefix too, and
    a disaggregated prefill instance sends only the new tokens' KV cache (the decode side holds the prefix). The
    decode context and the prices per input token still count all I tokens."""

    isl: tuple[int, ...]
    osl: tuple[int, ...]
    weight: tuple[float, ...]
    prefix: tuple[int, ...] = ()

    @property
    def cached(self) -> tuple[int, ...]:
        """Cached prefix tokens of each class (0 where none)."""
        return self.prefix if self.prefix else (0,) * len(self.isl)

    @property
    def classes(self) -> tuple[tuple[int, int], ...]:
        """(isl, cached prefix) of each class."""
        return tuple(zip(self.isl, self.cached, strict=True))

    def with_prefix(self, tokens: int, hit_rate: float = 1.0) -> Workload:
        """This mix with a cached prefix of ``tokens`` (at most isl - 1 of each class) found by a share ``hit_rate`` of
        requests: each class splits into a hit and a miss class (a rate of 1 or 0 keeps one)."""
        isl, osl, weight, prefix = [], [], [], []
        for i, o, w in zip(self.isl, self.osl, self.weight, strict=True):
            for p, share in ((min(tokens, max(i - 1, 0)), hit_rate), (0, 1.0 - hit_rate)):
                if share > 0.0:
                    isl.append(i)
                    osl.append(o)
                    weight.append(w * share)
                    prefix.append(p)
        return Workload(tuple(isl), tuple(osl), tuple(weight), tuple(prefix))

    @property
    def mean_computed_isl(self) -> float:
        """Prompt tokens prefilled per request (I minus its cached prefix), averaged over the mix."""
        return float(self._w() @ (np.asarray(self.isl, dtype=float) - np.asarray(self.cached, dtype=float)))

    @classmethod
    def single(cls, isl: int, osl: int) -> Workload:
        return cls((int(isl),), (int(osl),), (1.0,))

    def _w(self) -> np.ndarray:
        w = np.asarray(self.weight, dtype=float)
        return w / w.sum()

    @property
    def mean_isl(self) -> float:
        """Input tokens per request, averaged over the mix."""
        return float(self._w() @ np.asarray(self.isl, dtype=float))

    @property
    def mean_osl(self) -> float:
        """Output tokens per request, averaged over the mix."""
        return float(self._w() @ np.asarray(self.osl, dtype=float))

    @property
    def max_isl(self) -> int:
        return max(self.isl)

    @property
    def decode_context(self) -> float:
        """Mean context of a decoding sequence: I + O / 2, each class weighted by the output tokens it decodes."""
        w, i, o = self._w(), np.asarray(self.isl, dtype=float), np.asarray(self.osl, dtype=float)
        return float((w * o) @ (i + o / 2.0) / (w @ o))

    @property
    def prompt_tokens_per_output(self) -> float:
        """I / O over the mix: prompt tokens prefilled per output token decoded (a cached prefix is not prefilled)."""
        return self.mean_computed_isl / self.mean_osl

    @property
    def prompt_attention_per_output(self) -> float:
        """Attention context summed over a prompt's prefilled tokens, per output token: N (N - 1) / 2 (causal) plus
        N P for N = I - P new tokens over a cached prefix of P."""
        p = np.asarray(self.cached, dtype=float)
        n = np.asarray(self.isl, dtype=float) - p
        return float(self._w() @ (n * (n - 1.0) / 2.0 + n * p) / self.mean_osl)

    def prefix_reads_per_output(self, chunk_tokens) -> np.ndarray:
        """KV tokens re-read by the chunks of a prompt, per output: chunk n reads the n earlier chunks, and every
        chunk reads the cached prefix (chunk 0: the whole prompt in one step, the prefix read once)."""
        chunk = np.asarray(chunk_tokens, dtype=float)
        safe = np.where(chunk > 0, chunk, 1.0)
        total = np.zeros_like(chunk)
        for w, (i, p) in zip(self._w(), self.classes, strict=True):
            n = np.ceil((i - p) / safe)
            total = total + w * np.where(chunk > 0, safe * n * (n - 1.0) / 2.0 + n * p, p)
        return total / self.mean_osl


def _loaded_step(
    model: ModelSpec,
    gpu: GpuSpec,
    preset: Preset,
    weight_bits: int,
    layout: ev.Layout,
    batch,
    prompt_tokens,
    prompt_attention,
    prompt_kv_tokens,
) -> ev.StepFigures:
    """A step of ``batch`` decode tokens (one per sequence, at layout.context) plus prompt tokens prefilled with it.

    prompt_tokens: prompt tokens in the step; prompt_attention: their attention context summed over them;
    prompt_kv_tokens: KV-cache tokens they write or re-read. Weights, activations, collectives and expert routing see
    B + prompt tokens (section 3 with S = 1 + prompt / B); attention FLOP and KV traffic are then set to their true
    values. Every correction is exactly 0.0 without prompt tokens.
    """
    gpu = ev.hardware(gpu, preset)
    batch = np.asarray(batch, dtype=float)
    extra = np.asarray(prompt_tokens, dtype=float) / batch
    s = layout.tokens_per_step + extra
    base = ev.step(model, gpu, preset, weight_bits, replace(layout, tokens_per_step=s), batch)
    sz = ev.model_sizes(model)
    counted = batch * s * (layout.context + (s - 1.0) / 2.0)
    tps = layout.tokens_per_step
    wanted = batch * tps * (layout.context + (tps - 1.0) / 2.0) + np.asarray(prompt_attention, dtype=float)
    attn_flop = sz.attn_flop_per_ctx_token_per_layer * model.n_layers * (wanted - counted)
    n = layout.n_gpus
    flop_s = n * ev.sustained_flop_per_s(gpu, preset, weight_bits)
    decode_flop_s = n * ev.sustained_decode_attention_flop_per_s(gpu, preset, weight_bits, layout)
    compute_s = base.compute_s + attn_flop / flop_s
    if preset.decode_attention_at_kv_precision:
        # ``base`` timed the attention it counted at the decode-attention rate; only the prompt's stays at flop_s
        prompt_part = sz.attn_flop_per_ctx_token_per_layer * model.n_layers * np.asarray(prompt_attention, dtype=float)
        compute_s = base.compute_s + (attn_flop - prompt_part) / decode_flop_s + prompt_part / flop_s
    copies = ev.kv_copies(model, preset, layout)
    kv_bytes = ev.kv_bytes_per_token(model, layout.kv_bytes_per_value) * np.asarray(prompt_kv_tokens, dtype=float)
    kv_bytes = kv_bytes * copies
    hbm_s = n * ev.sustained_hbm_bytes_per_s(gpu, preset)
    memory_s = base.memory_s + kv_bytes / hbm_s
    if not base.per_kernel_class:
        return replace(base, memory_s=memory_s, compute_s=compute_s)
    # the decode tokens' attention at layout.context; the prompt tokens' attention is the prefill class
    per_ctx = sz.attn_flop_per_ctx_token_per_layer * model.n_layers
    decode_flop = per_ctx * batch * tps * (layout.context + (tps - 1.0) / 2.0)
    prompt_flop = per_ctx * np.asarray(prompt_attention, dtype=float)
    return replace(
        base,
        memory_s=memory_s,
        compute_s=compute_s,
        decode_attention_compute_s=decode_flop / decode_flop_s,
        prefill_attention_memory_s=kv_bytes / hbm_s,
        prefill_attention_compute_s=prompt_flop / flop_s,
    )


def prompt_share(workload: Workload | None, aggregated) -> np.ndarray:
    """Prompt tokens per decode sequence per step: I / O when aggregated, 0 for a pure decode instance."""
    ratio = 0.0 if workload is None else workload.prompt_tokens_per_output
    return np.asarray(aggregated, dtype=float) * ratio


@dataclass(frozen=True)
class Speculation:
    """Speculative decoding with whole requests: a ``draft`` proposing ``gamma`` tokens per round (per layout, 0 = none)
    accepted with probability ``acceptance``. The draft runs on the target's GPUs (``Layout.for_draft``), prefills every
    prompt too (its own KV cache) and holds its weights and KV cache beside the target's."""

    draft: ModelSpec
    gamma: np.ndarray | float
    acceptance: float
    weight_bits: int = ev.DRAFT_WEIGHT_BITS

    @property
    def tokens_per_round(self) -> np.ndarray:
        """Expected tokens a sequence gains per round (1 where gamma is 0)."""
        return ev.expected_tokens_per_round(self.acceptance, self.gamma)

    @property
    def tokens_per_round_variance(self) -> np.ndarray:
        """Variance of the tokens a sequence gains in one round (0 where gamma is 0)."""
        return ev.tokens_per_round_variance(self.acceptance, self.gamma)

    @property
    def drafting(self) -> np.ndarray:
        """1 where the layout drafts (gamma > 0), else 0: the weight of the step in which the draft reads a chunk."""
        return np.minimum(np.asarray(self.gamma, dtype=float), 1.0)


@dataclass(frozen=True)
class Round:
    """A speculative round per expected token: the target's verification step (gamma + 1 tokens per sequence) and the
    draft's gamma steps, each weighted and the whole divided by the expected tokens per round, so ``step_time_s`` is the
    time per output token like a plain step's. ``terms``: (weight, step) pairs, a step object listed once even where it
    recurs (the MIP's pieces pick one GEMM class per distinct step). ``host_s``: the round's host seconds outside its
    steps (``evaluator.speculative_round_host_s``), in its time but in none of the steps' parts."""

    terms: tuple[tuple[np.ndarray, ev.StepFigures], ...]
    tokens: np.ndarray
    host_s: np.ndarray | float = 0.0

    def _sum(self, value) -> np.ndarray:
        return sum(w * value(s) for w, s in self.terms) / self.tokens

    @property
    def step_time_s(self) -> np.ndarray:
        return self._sum(lambda s: s.step_time_s) + self.host_s / self.tokens

    @property
    def round_time_s(self) -> np.ndarray:
        """One round's seconds (the gap between two token bursts of a sequence)."""
        return self.step_time_s * self.tokens

    @property
    def kernel_launch_s(self) -> np.ndarray:
        return self._sum(lambda s: s.kernel_launch_s)

    @property
    def network_s(self) -> np.ndarray:
        return self._sum(lambda s: s.network_s)

    @property
    def memory_s(self) -> np.ndarray:
        return self._sum(lambda s: s.memory_s)

    @property
    def compute_s(self) -> np.ndarray:
        return self._sum(lambda s: s.compute_s)

    @property
    def gemm_memory_s(self) -> np.ndarray:
        return self._sum(lambda s: s.gemm_memory_s)


def tokens_per_round(spec: Speculation | None):
    """Tokens a sequence gains per step: 1, or speculating the expected tokens per round E (per layout)."""
    return 1.0 if spec is None else spec.tokens_per_round


def host_per_token_s(fig) -> np.ndarray:
    """Seconds per token of a TPOT figure outside its steps: speculative rounds' host time over their tokens (0 for a
    plain step), so ``step_terms``' weighted step times plus this are its time per token."""
    if isinstance(fig, CycleFigures):
        f = fig.chunk_share
        return (1.0 - f) * host_per_token_s(fig.decode) + f * host_per_token_s(fig.chunk)
    if isinstance(fig, Round):
        return fig.host_s / fig.tokens
    return np.zeros_like(fig.step_time_s)


def step_terms(fig) -> list[tuple[np.ndarray, ev.StepFigures]]:
    """A TPOT figure as (weight, distinct step) pairs whose weighted step times, plus ``host_per_token_s``, sum to its
    time per token: a step (weight 1), a speculative round, or a prefill cycle of them (weights (1 - f) and f)."""
    if isinstance(fig, CycleFigures):
        f = fig.chunk_share
        pairs = [((1.0 - f) * w, s) for w, s in step_terms(fig.decode)] + [(f * w, s) for w, s in step_terms(fig.chunk)]
    elif isinstance(fig, Round):
        pairs = [(w / fig.tokens, s) for w, s in fig.terms]
    else:
        return [(np.ones_like(fig.step_time_s), fig)]
    merged: list[tuple[np.ndarray, ev.StepFigures]] = []
    for w, s in pairs:
        at = next((k for k, (_, t) in enumerate(merged) if t is s), None)
        if at is None:
            merged.append((w, s))
        else:
            merged[at] = (merged[at][0] + w, s)
    return merged


@dataclass(frozen=True)
class CycleFigures:
    """Aggregated serving as engines schedule it (``Preset.prefill_cycle``): decode-only steps and, a share
    ``chunk_share`` of all steps, steps that also carry one prefill chunk, at the rate the arrivals need
    (chunk_share = (B * I / O) / chunk). TPOT is the cycle's mean step; the chunk step is the worst inter-token gap.

    The time fields are the cycle's means, so it reads like an ``evaluator.StepFigures`` where one step's figures are
    asked for. With chunk_share 0 (a pure decode instance, I = 0) it is the decode step exactly.
    """

    decode: ev.StepFigures | Round
    chunk: ev.StepFigures | Round
    chunk_share: np.ndarray

    def _mean(self, value) -> np.ndarray:
        f = self.chunk_share
        return (1.0 - f) * value(self.decode) + f * value(self.chunk)

    @property
    def step_time_s(self) -> np.ndarray:
        return self._mean(lambda s: s.step_time_s)

    @property
    def max_itl_s(self) -> np.ndarray:
        """The longest gap between two output tokens of a sequence: the chunk step (the decode step without chunks)."""
        return np.where(self.chunk_share > 0, _gap_s(self.chunk), _gap_s(self.decode))

    @property
    def kernel_launch_s(self) -> np.ndarray:
        return self._mean(lambda s: s.kernel_launch_s)

    @property
    def network_s(self) -> np.ndarray:
        return self._mean(lambda s: s.network_s)

    @property
    def memory_s(self) -> np.ndarray:
        return self._mean(lambda s: s.memory_s)

    @property
    def compute_s(self) -> np.ndarray:
        return self._mean(lambda s: s.compute_s)

    @property
    def gemm_memory_s(self) -> np.ndarray:
        return self._mean(lambda s: s.gemm_memory_s)


def _gap_s(fig: ev.StepFigures | Round) -> np.ndarray:
    """Seconds between two outputs of a sequence: a step, or a whole speculative round."""
    return fig.round_time_s if isinstance(fig, Round) else fig.step_time_s


def loaded_gap_s(
    model: ModelSpec,
    gpu: GpuSpec,
    preset: Preset,
    weight_bits: int,
    layout: ev.Layout,
    batch,
    prompt_tokens,
    prompt_attention,
    prompt_kv_tokens,
    spec: Speculation | None = None,
) -> np.ndarray:
    """Seconds between two outputs of ``batch`` sequences decoding in a step carrying prompt pieces (their tokens,
    attention context summed over them, KV tokens written or re-read): the step or, speculating, the whole round whose
    verification step carries them and whose draft reads them."""
    carry = _round(model, gpu, preset, weight_bits, layout, batch, spec)
    return _gap_s(carry(prompt_tokens, prompt_attention, prompt_kv_tokens))


def chunk_carried_tokens(workload: Workload, chunk_tokens, prompt_tokens_per_step) -> np.ndarray:
    """Prompt tokens a chunk-carrying step holds: the chunk budget (a whole mean prompt where chunking is off, chunk
    0), or every step's share where the budget is exceeded (then every step carries prompt tokens)."""
    chunk = np.asarray(chunk_tokens, dtype=float)
    return np.maximum(np.where(chunk > 0, chunk, workload.mean_computed_isl), prompt_tokens_per_step)


def _round(
    model: ModelSpec,
    gpu: GpuSpec,
    preset: Preset,
    weight_bits: int,
    layout: ev.Layout,
    batch,
    spec: Speculation | None,
    plain_draft: ev.StepFigures | None = None,
):
    """A function of one round's prompt tokens (tokens, attention, KV tokens) giving its step: the loaded step or,
    speculating, the verification step carrying them, the draft's step reading them (its prefill) and gamma - 1 plain
    draft steps (``plain_draft``: that step when the caller shares it between rounds)."""
    if spec is None:
        return lambda *prompt: _loaded_step(model, gpu, preset, weight_bits, layout, batch, *prompt)
    gamma = np.asarray(spec.gamma, dtype=float)
    draft_layout = layout.for_draft(spec.draft)
    zero = np.zeros_like(np.asarray(batch, dtype=float))
    plain = plain_draft or _loaded_step(
        spec.draft, gpu, preset, spec.weight_bits, draft_layout, batch, zero, zero, zero
    )
    tokens = spec.tokens_per_round
    host = ev.speculative_round_host_s(preset, gamma)

    def one(prompt, attention, kv) -> Round:
        target = _loaded_step(model, gpu, preset, weight_bits, layout.verifying(gamma), batch, prompt, attention, kv)
        if not np.any(np.asarray(prompt) > 0):
            return Round(((np.ones_like(gamma), target), (gamma, plain)), tokens, host)
        reading = _loaded_step(spec.draft, gpu, preset, spec.weight_bits, draft_layout, batch, prompt, attention, kv)
        terms = ((np.ones_like(gamma), target), (spec.drafting, reading), (gamma - spec.drafting, plain))
        return Round(terms, tokens, host)

    return one


def tpot_step(
    model: ModelSpec,
    gpu: GpuSpec,
    preset: Preset,
    weight_bits: int,
    layout: ev.Layout,
    batch,
    workload: Workload | None,
    chunk_tokens,
    aggregated,
    spec: Speculation | None = None,
) -> ev.StepFigures | Round | CycleFigures:
    """The steady state whose mean step time is the TPOT: B decode tokens plus, aggregated, B * I / O prompt tokens
    per step on average, smeared into every step or (``Preset.prefill_cycle``) carried by chunk steps.

    ``spec``: speculative decoding; each round yields E = ``Speculation.tokens_per_round`` tokens per sequence, so it
    carries E times a step's prompt tokens, and its time over E is the TPOT (gamma 0 is the plain step exactly)."""
    batch = np.asarray(batch, dtype=float)
    agg = np.asarray(aggregated, dtype=float)
    zero = np.zeros(np.broadcast_shapes(batch.shape, agg.shape))
    if workload is None:
        return _round(model, gpu, preset, weight_bits, layout, batch, spec)(zero, zero, zero)
    per_output = batch * agg / workload.mean_osl * tokens_per_round(spec)
    prompt = per_output * workload.mean_computed_isl
    attention = per_output * workload.mean_osl * workload.prompt_attention_per_output
    kv = prompt + per_output * workload.mean_osl * workload.prefix_reads_per_output(chunk_tokens)
    if not preset.prefill_cycle:
        return _round(model, gpu, preset, weight_bits, layout, batch, spec)(prompt, attention, kv)
    carried = chunk_carried_tokens(workload, chunk_tokens, prompt)
    share = np.where(carried > 0, prompt / np.where(carried > 0, carried, 1.0), 0.0)
    # a chunk step carries 1 / share of the mean step's prompt work (attention and KV bytes are linear in it)
    scale = np.where(share > 0, 1.0 / np.where(share > 0, share, 1.0), 0.0)
    zero = np.zeros_like(prompt)
    decode = _round(model, gpu, preset, weight_bits, layout, batch, spec)(zero, zero, zero)
    # the draft's plain step is the same step in both rounds (one GEMM-class pick for it in the MIP's pieces)
    shared = decode.terms[1][1] if isinstance(decode, Round) else None
    chunk = _round(model, gpu, preset, weight_bits, layout, batch, spec, shared)(
        prompt * scale, attention * scale, kv * scale
    )
    return CycleFigures(decode, chunk, share)


def stable_batch_limit(workload: Workload, chunk_tokens, spec: Speculation | None = None) -> np.ndarray:
    """Largest B whose prefill load B * I / O fits the per-step chunk budget (else prompts queue without bound);
    speculating, B * E * I / O per round."""
    ratio = workload.prompt_tokens_per_output * tokens_per_round(spec)
    chunk = np.asarray(chunk_tokens, dtype=float)
    if workload.prompt_tokens_per_output <= 0:
        return np.full(np.broadcast_shapes(chunk.shape, np.shape(ratio)), np.inf)
    return np.floor(chunk / ratio * (1 + 1e-12))


def ttft_aggregated_s(
    model: ModelSpec,
    gpu: GpuSpec,
    preset: Preset,
    weight_bits: int,
    layout: ev.Layout,
    batch,
    workload: Workload,
    chunk_tokens,
    spec: Speculation | None = None,
) -> np.ndarray:
    """Time to first token, aggregated: ceil(N / chunk) steps of B decode tokens plus one chunk of the N = I - P
    prompt tokens not cached, the longest class; each chunk attends over and reads the cached prefix P too.
    Speculating, each of those steps is a round whose draft prefills the chunk too."""
    given = np.asarray(chunk_tokens, dtype=float)
    carry = _round(model, gpu, preset, weight_bits, layout, batch, spec)
    worst = None
    for i, p in sorted(set(workload.classes)):
        new = i - p
        chunk = np.where(given > 0, given, float(max(new, 1)))
        n = np.ceil(new / chunk)
        piece = np.minimum(chunk, float(new))
        kv = piece + chunk * (n - 1.0) / 2.0 + p
        attention = piece * ((new - 1.0) / 2.0 + p)
        t = n * _gap_s(carry(piece, attention, kv))
        worst = t if worst is None else np.maximum(worst, t)
    assert worst is not None
    return worst


def prefill_step(
    model: ModelSpec,
    gpu: GpuSpec,
    preset: Preset,
    weight_bits: int,
    layout: ev.Layout,
    batch,
    isl: int,
    prefix: int = 0,
) -> ev.StepFigures:
    """One prefill step: ``batch`` prompts of ``isl`` tokens at C = 0 (causal mean (I - 1) / 2), KV cache written.

    With a cached ``prefix`` of P tokens the step computes the I - P others at context P (their attention reads the
    prefix's KV cache) and writes their KV cache only."""
    gpu = ev.hardware(gpu, preset)
    batch = np.asarray(batch, dtype=float)
    prompt = replace(
        layout,
        context=np.full_like(layout.context, float(prefix)),
        tokens_per_step=np.full_like(layout.context, isl - prefix),
    )
    # a prompt's attention is prefill attention: the decode-attention rate does not apply to it
    prefill_preset = replace(preset, decode_attention_at_kv_precision=False)
    base = ev.step(model, gpu, prefill_preset, weight_bits, prompt, batch, whole_prompts=True)
    # every GPU holding a copy of the cache (kv_copies) writes it
    written = (
        ev.kv_bytes_per_token(model, layout.kv_bytes_per_value)
        * (isl - prefix)
        * batch
        * ev.kv_copies(model, preset, prompt)
    )
    written_s = written / (layout.n_gpus * ev.sustained_hbm_bytes_per_s(gpu, preset))
    memory_s = base.memory_s + written_s
    if not base.per_kernel_class:
        return replace(base, memory_s=memory_s)
    # the step's attention is all prompt attention: one prefill class with the KV cache it reads and writes
    return replace(
        base,
        memory_s=memory_s,
        decode_attention_memory_s=0.0,
        decode_attention_compute_s=0.0,
        prefill_attention_memory_s=base.decode_attention_memory_s + written_s,
        prefill_attention_compute_s=base.decode_attention_compute_s,
    )


def kv_link_bytes_per_s(prefill_gpu: GpuSpec, decode_gpu: GpuSpec, same_domain: bool) -> float:
    """Per-GPU bandwidth the KV cache moves at, point to point (one direction of the link): scale-up inside one
    domain, else the slower scale-out side."""
    if same_domain:
        return ev.POINT_TO_POINT_LINK_FACTOR * prefill_gpu.intra_bytes_per_s
    return ev.POINT_TO_POINT_LINK_FACTOR * min(prefill_gpu.inter_bytes_per_s, decode_gpu.inter_bytes_per_s)


def shares_domain(prefill_gpu: GpuSpec, decode_gpu: GpuSpec, prefill_gpus, decode_gpus) -> np.ndarray:
    """A prefill and a decode instance sit in one scale-up domain: same accelerator type and N_p + N_d fit in it."""
    same = prefill_gpu.name == decode_gpu.name
    total = np.asarray(prefill_gpus, dtype=float) + np.asarray(decode_gpus, dtype=float)
    return np.asarray(same & (total <= prefill_gpu.scaleup_gpus))


def kv_transfer_s(model: ModelSpec, layout: ev.Layout, isl: int, link_bytes_per_s, hop_latency_s: float = 0.0):
    """Seconds to move one request's KV cache (I tokens) from the prefill instance's N_p GPUs, each over its link."""
    kv = ev.kv_bytes_per_token(model, layout.kv_bytes_per_value) * isl
    return hop_latency_s + kv / (layout.n_gpus * np.asarray(link_bytes_per_s, dtype=float))


def prefill_memory(
    model: ModelSpec,
    gpu: GpuSpec,
    preset: Preset,
    weight_bits: int,
    layout: ev.Layout,
    batch,
    workload: Workload,
    draft: ModelSpec | None = None,
) -> ev.DeviceMemory:
    """Memory of a prefill instance holding ``batch`` prompts of the longest class (and the ``draft`` it prefills)."""
    longest = replace(
        layout, context=np.zeros_like(layout.context), tokens_per_step=np.full_like(layout.context, workload.max_isl)
    )
    return ev.memory(model, gpu, preset, weight_bits, longest, batch, draft)


def prefill_figures(
    model: ModelSpec,
    gpu: GpuSpec,
    preset: Preset,
    weight_bits: int,
    layout: ev.Layout,
    batch,
    workload: Workload,
    link_bytes_per_s,
    hop_latency_s: float = 0.0,
    draft: ModelSpec | None = None,
    draft_weight_bits: int = ev.DRAFT_WEIGHT_BITS,
) -> dict[str, np.ndarray]:
    """A prefill instance batching ``batch`` prompts of one class per step: requests/s over the mix and TTFT.

    requests/s = b / sum_k w_k T_pre(b, I_k); TTFT = max_k T_pre(b, I_k) + KV transfer of I_k tokens (I_k - P_k
    with a cached prefix). ``draft``: the instance prefills the draft model too (its step after the target's, at
    ``draft_weight_bits`` on ``Layout.for_draft``) and sends its KV cache with the target's.
    """
    batch = np.asarray(batch, dtype=float)
    w = workload._w()
    busy = 0.0
    ttft = None
    compute = None
    for wk, (i, p) in zip(w, workload.classes, strict=True):
        step_s = prefill_step(model, gpu, preset, weight_bits, layout, batch, i, p).step_time_s
        # the decode side holds the cached prefix: only the new tokens' KV cache moves
        t = step_s + kv_transfer_s(model, layout, i - p, link_bytes_per_s, hop_latency_s)
        if draft is not None:
            d_layout = layout.for_draft(draft)
            step_s = step_s + prefill_step(draft, gpu, preset, draft_weight_bits, d_layout, batch, i, p).step_time_s
            t = step_s + kv_transfer_s(model, layout, i - p, link_bytes_per_s, hop_latency_s)
            t = t + kv_transfer_s(draft, layout, i - p, link_bytes_per_s)
        busy = busy + wk * step_s
        ttft = t if ttft is None else np.maximum(ttft, t)
        compute = step_s if compute is None else np.maximum(compute, step_s)
    mem = prefill_memory(model, gpu, preset, weight_bits, layout, batch, workload, draft)
    return {
        "requests_per_s": batch / busy,
        "ttft_s": ttft,
        "prefill_step_s": compute,
        "fits_in_memory": np.asarray(mem.fits),
    }


def aggregated_memory(
    model: ModelSpec,
    gpu: GpuSpec,
    preset: Preset,
    weight_bits: int,
    layout: ev.Layout,
    batch,
    workload: Workload | None,
    aggregated=1.0,
    spec: Speculation | None = None,
) -> ev.DeviceMemory:
    """Memory of a decoding instance at layout.context, with the steady-state prompt tokens in flight if aggregated;
    speculating (gamma > 0), the draft's weights and KV cache too and gamma + 1 tokens per sequence per step."""
    extra = prompt_share(workload, aggregated)
    if spec is None:
        return ev.memory(
            model, gpu, preset, weight_bits, replace(layout, tokens_per_step=layout.tokens_per_step + extra), batch
        )
    gamma = np.asarray(spec.gamma, dtype=float)
    verifying = layout.verifying(gamma)
    held = replace(verifying, tokens_per_step=verifying.tokens_per_step + extra * spec.tokens_per_round)
    plain = ev.memory(model, gpu, preset, weight_bits, held, batch)
    both = ev.memory(model, gpu, preset, weight_bits, held, batch, spec.draft)
    return ev.DeviceMemory(*(np.where(gamma > 0, b, p) for b, p in zip(_fields(both), _fields(plain), strict=True)))


def _fields(mem: ev.DeviceMemory) -> tuple[np.ndarray, ...]:
    return (mem.weights_bytes, mem.kv_cache_bytes, mem.activations_bytes, mem.capacity_bytes, mem.fits)


def usd_per_mtok(n_gpus, usd_per_s, time_per_token_s, batch, utilisation: float = 1.0):
    """Dollars per million output tokens of a busy instance (the paper's formula), over the utilisation cap."""
    return 1e6 * n_gpus * usd_per_s * time_per_token_s / batch / utilisation


def aggregated_figures(
    model: ModelSpec,
    gpu: GpuSpec,
    preset: Preset,
    weight_bits: int,
    layout: ev.Layout,
    batch,
    workload: Workload,
    chunk_tokens,
    utilisation: float = 1.0,
    spec: Speculation | None = None,
) -> dict[str, np.ndarray]:
    """Every figure of an aggregated instance (chunked prefill in the decode steps), prices included."""
    batch = np.asarray(batch, dtype=float)
    step = tpot_step(model, gpu, preset, weight_bits, layout, batch, workload, chunk_tokens, 1.0, spec)
    tpot = step.step_time_s
    ttft = ttft_aggregated_s(model, gpu, preset, weight_bits, layout, batch, workload, chunk_tokens, spec)
    n = layout.n_gpus
    mem = aggregated_memory(model, gpu, preset, weight_bits, layout, batch, workload, 1.0, spec)
    out = _request_prices(n * gpu.usd_per_s, batch / tpot * utilisation, workload, n)
    out.update(_step_fields(step, mem))
    out.update(
        tpot_s=tpot,
        max_itl_s=step.max_itl_s if isinstance(step, CycleFigures) else _gap_s(step),
        ttft_s=ttft,
        usd_per_mtok=usd_per_mtok(n, gpu.usd_per_s, tpot, batch, utilisation),
        prefill_within_chunk_budget=batch <= stable_batch_limit(workload, chunk_tokens, spec),
    )
    return out


def disaggregated_figures(
    model: ModelSpec,
    preset: Preset,
    weight_bits: int,
    workload: Workload,
    prefill: tuple[GpuSpec, ev.Layout, float | np.ndarray, int],
    decode: tuple[GpuSpec, ev.Layout, float | np.ndarray, int],
    utilisation: float = 1.0,
    prefill_preset: Preset | None = None,
    spec: Speculation | None = None,
) -> dict[str, np.ndarray]:
    """Every figure of x prefill and y decode instances: prefill = (gpu, layout, batch, x), decode = (gpu, layout,
    batch, y); they serve min(x r_p, y r_d) requests/s for x N_p price_p + y N_d price_d dollars per second.
    ``prefill_preset``: the prefill side's physics where it differs from the decode side's (an engine profile's
    efficiencies on another accelerator; None: ``preset``). ``spec`` (one gamma): the decode side speculates and,
    where gamma > 0, the prefill side prefills the draft too."""
    drafting = spec is not None and float(np.max(spec.gamma)) > 0
    p_gpu, p_layout, p_batch, x = prefill
    d_gpu, d_layout, d_batch, y = decode
    same = bool(shares_domain(p_gpu, d_gpu, p_layout.n_gpus, d_layout.n_gpus))
    link = kv_link_bytes_per_s(p_gpu, d_gpu, same)
    hop = p_gpu.intra_hop_latency_s if same else max(p_gpu.inter_hop_latency_s, d_gpu.inter_hop_latency_s)
    p_draft = spec.draft if spec is not None and drafting else None
    p_preset = prefill_preset or preset
    d_bits = ev.DRAFT_WEIGHT_BITS if spec is None else spec.weight_bits
    pre = prefill_figures(model, p_gpu, p_preset, weight_bits, p_layout, p_batch, workload, link, hop, p_draft, d_bits)
    step = tpot_step(model, d_gpu, preset, weight_bits, d_layout, d_batch, workload, 0.0, 0.0, spec)
    tpot = step.step_time_s
    decode_rate = d_batch / (workload.mean_osl * tpot)
    served = np.minimum(x * pre["requests_per_s"], y * decode_rate) * utilisation
    usd_per_s = x * p_layout.n_gpus * p_gpu.usd_per_s + y * d_layout.n_gpus * d_gpu.usd_per_s
    gpus = x * p_layout.n_gpus + y * d_layout.n_gpus
    mem = aggregated_memory(model, d_gpu, preset, weight_bits, d_layout, d_batch, workload, 0.0, spec)
    out = _request_prices(usd_per_s, served * workload.mean_osl, workload, gpus)
    out.update(_step_fields(step, mem))
    out["fits_in_memory"] = out["fits_in_memory"] & pre["fits_in_memory"]
    out.update(
        tpot_s=tpot,
        max_itl_s=_gap_s(step) if isinstance(step, Round) else tpot,
        ttft_s=pre["ttft_s"],
        prefill_step_s=pre["prefill_step_s"],
        prefill_requests_per_s=pre["requests_per_s"],
        decode_requests_per_s=decode_rate,
        kv_link_bytes_per_s=np.asarray(link),
    )
    return out


def _request_prices(usd_per_s, throughput_tok_s, workload: Workload, gpus) -> dict[str, np.ndarray]:
    """Prices of a deployment unit serving ``throughput_tok_s`` output tokens/s: per request, per output Mtok (prompt
    included), per Mtok of input and output together, and the unit's requests/s and output tok/s per GPU."""
    requests_per_s = throughput_tok_s / workload.mean_osl
    per_request = usd_per_s / requests_per_s
    return {
        "requests_per_s": requests_per_s,
        "usd_per_request": per_request,
        "usd_per_mtok": 1e6 * per_request / workload.mean_osl,
        "usd_per_mtok_blended": 1e6 * per_request / (workload.mean_isl + workload.mean_osl),
        "throughput_tok_s": throughput_tok_s,
        "tok_s_per_gpu": throughput_tok_s / gpus,
    }


def _step_fields(step: ev.StepFigures | Round | CycleFigures, mem: ev.DeviceMemory) -> dict[str, np.ndarray]:
    return {
        "step_time_s": step.step_time_s,
        "kernel_launch_s": step.kernel_launch_s,
        "network_s": step.network_s,
        "memory_s": step.memory_s,
        "compute_s": step.compute_s,
        "weights_bytes_per_device": mem.weights_bytes,
        "kv_cache_bytes_per_device": mem.kv_cache_bytes,
        "activations_bytes_per_device": mem.activations_bytes,
        "memory_capacity_bytes": mem.capacity_bytes,
        "fits_in_memory": mem.fits,
    }


def coprime_ratios(max_instances: int) -> tuple[tuple[int, int], ...]:
    """(x, y) prefill/decode instance counts up to ``max_instances`` in lowest terms (a multiple of a ratio is the
    same deployment replicated: it never costs less per request nor needs fewer GPUs for a demand)."""
    return tuple(
        (x, y) for x in range(1, max_instances + 1) for y in range(1, max_instances + 1) if math.gcd(x, y) == 1
    )
