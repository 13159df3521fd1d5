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
    """Request classes served by one deployment: input tokens, output tokens and weights (shares of requests)."""

    isl: tuple[int, ...]
    osl: tuple[int, ...]
    weight: tuple[float, ...]

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
        """I / O over the mix: prompt tokens prefilled per output token decoded."""
        return self.mean_isl / self.mean_osl

    @property
    def prompt_attention_per_output(self) -> float:
        """Attention context summed over a prompt's tokens (I (I - 1) / 2, causal), per output token."""
        i = np.asarray(self.isl, dtype=float)
        return float(self._w() @ (i * (i - 1.0) / 2.0) / self.mean_osl)

    def prefix_reads_per_output(self, chunk_tokens) -> np.ndarray:
        """KV tokens re-read by later chunks of a chunked prompt (chunk n reads the n earlier chunks), per output."""
        chunk = np.asarray(chunk_tokens, dtype=float)
        safe = np.where(chunk > 0, chunk, 1.0)
        total = np.zeros_like(chunk)
        for w, i in zip(self._w(), self.isl, strict=True):
            n = np.ceil(i / safe)
            total = total + w * safe * n * (n - 1.0) / 2.0
        return np.where(chunk > 0, total / self.mean_osl, 0.0)


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
    wanted = batch * layout.context + np.asarray(prompt_attention, dtype=float)
    attn_flop = sz.attn_flop_per_ctx_token_per_layer * model.n_layers * (wanted - counted)
    n = layout.n_gpus
    flop_s = n * ev.flop_rate(gpu, weight_bits) * preset.flop_efficiency
    compute_s = base.compute_s + attn_flop / flop_s
    copies = ev.kv_copies(model, preset, layout)
    kv_bytes = ev.kv_bytes_per_token(model, layout.kv_bytes_per_value) * np.asarray(prompt_kv_tokens, dtype=float)
    kv_bytes = kv_bytes * copies
    hbm_s = n * gpu.hbm_bytes_per_s * preset.hbm_efficiency
    memory_s = base.memory_s + kv_bytes / hbm_s
    if not base.per_kernel_class:
        return replace(base, memory_s=memory_s, compute_s=compute_s)
    # the decode tokens' attention at layout.context; the prompt tokens' attention is the prefill class
    tps = layout.tokens_per_step
    per_ctx = sz.attn_flop_per_ctx_token_per_layer * model.n_layers
    decode_flop = per_ctx * batch * tps * (layout.context + (tps - 1.0) / 2.0)
    prompt_flop = per_ctx * np.asarray(prompt_attention, dtype=float)
    return replace(
        base,
        memory_s=memory_s,
        compute_s=compute_s,
        decode_attention_compute_s=decode_flop / flop_s,
        prefill_attention_memory_s=kv_bytes / hbm_s,
        prefill_attention_compute_s=prompt_flop / flop_s,
    )


def prompt_share(workload: Workload | None, aggregated) -> np.ndarray:
    """Prompt tokens per decode sequence per step: I / O when aggregated, 0 for a pure decode instance."""
    ratio = 0.0 if workload is None else workload.prompt_tokens_per_output
    return np.asarray(aggregated, dtype=float) * ratio


@dataclass(frozen=True)
class CycleFigures:
    """Aggregated serving as engines schedule it (``Preset.prefill_cycle``): decode-only steps and, a share
    ``chunk_share`` of all steps, steps that also carry one prefill chunk, at the rate the arrivals need
    (chunk_share = (B * I / O) / chunk). TPOT is the cycle's mean step; the chunk step is the worst inter-token gap.

    The time fields are the cycle's means, so it reads like an ``evaluator.StepFigures`` where one step's figures are
    asked for. With chunk_share 0 (a pure decode instance, I = 0) it is the decode step exactly.
    """

    decode: ev.StepFigures
    chunk: ev.StepFigures
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
        return np.where(self.chunk_share > 0, self.chunk.step_time_s, self.decode.step_time_s)

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

    def piece_s(self, decode_pick: str, chunk_pick: str) -> np.ndarray:
        """The cycle's mean with the GEMM class of each step fixed to its memory or compute term (a MIP piece)."""
        f = self.chunk_share
        decode = self.decode.serial_s + getattr(self.decode, decode_pick)
        return (1.0 - f) * decode + f * (self.chunk.serial_s + getattr(self.chunk, chunk_pick))


def chunk_carried_tokens(workload: Workload, chunk_tokens, prompt_tokens_per_step) -> np.ndarray:
    """Prompt tokens a chunk-carrying step holds: the chunk budget (a whole mean prompt where chunking is off, chunk
    0), or every step's share where the budget is exceeded (then every step carries prompt tokens)."""
    chunk = np.asarray(chunk_tokens, dtype=float)
    return np.maximum(np.where(chunk > 0, chunk, workload.mean_isl), prompt_tokens_per_step)


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
) -> ev.StepFigures | CycleFigures:
    """The steady state whose mean step time is the TPOT: B decode tokens plus, aggregated, B * I / O prompt tokens
    per step on average, smeared into every step or (``Preset.prefill_cycle``) carried by chunk steps."""
    batch = np.asarray(batch, dtype=float)
    agg = np.asarray(aggregated, dtype=float)
    if workload is None:
        zero = np.zeros(np.broadcast_shapes(batch.shape, agg.shape))
        return _loaded_step(model, gpu, preset, weight_bits, layout, batch, zero, zero, zero)
    per_output = batch * agg / workload.mean_osl
    prompt = per_output * workload.mean_isl
    attention = per_output * workload.mean_osl * workload.prompt_attention_per_output
    kv = prompt + per_output * workload.mean_osl * workload.prefix_reads_per_output(chunk_tokens)
    if not preset.prefill_cycle:
        return _loaded_step(model, gpu, preset, weight_bits, layout, batch, prompt, attention, kv)
    carried = chunk_carried_tokens(workload, chunk_tokens, prompt)
    share = np.where(carried > 0, prompt / np.where(carried > 0, carried, 1.0), 0.0)
    # a chunk step carries 1 / share of the mean step's prompt work (attention and KV bytes are linear in it)
    scale = np.where(share > 0, 1.0 / np.where(share > 0, share, 1.0), 0.0)
    zero = np.zeros_like(prompt)
    decode = _loaded_step(model, gpu, preset, weight_bits, layout, batch, zero, zero, zero)
    chunk = _loaded_step(model, gpu, preset, weight_bits, layout, batch, prompt * scale, attention * scale, kv * scale)
    return CycleFigures(decode, chunk, share)


def stable_batch_limit(workload: Workload, chunk_tokens) -> np.ndarray:
    """Largest B whose prefill load B * I / O fits the per-step chunk budget (else prompts queue without bound)."""
    ratio = workload.prompt_tokens_per_output
    chunk = np.asarray(chunk_tokens, dtype=float)
    return np.floor(chunk / ratio * (1 + 1e-12)) if ratio > 0 else np.full_like(chunk, np.inf)


def ttft_aggregated_s(
    model: ModelSpec,
    gpu: GpuSpec,
    preset: Preset,
    weight_bits: int,
    layout: ev.Layout,
    batch,
    workload: Workload,
    chunk_tokens,
) -> np.ndarray:
    """Time to first token, aggregated: ceil(I / chunk) steps of B decode tokens plus one chunk, the longest class."""
    given = np.asarray(chunk_tokens, dtype=float)
    worst = None
    for i in sorted(set(workload.isl)):
        chunk = np.where(given > 0, given, float(max(i, 1)))
        n = np.ceil(i / chunk)
        piece = np.minimum(chunk, float(i))
        kv = piece + chunk * (n - 1.0) / 2.0
        s = _loaded_step(model, gpu, preset, weight_bits, layout, batch, piece, piece * (i - 1.0) / 2.0, kv)
        t = n * s.step_time_s
        worst = t if worst is None else np.maximum(worst, t)
    assert worst is not None
    return worst


def prefill_step(
    model: ModelSpec, gpu: GpuSpec, preset: Preset, weight_bits: int, layout: ev.Layout, batch, isl: int
) -> ev.StepFigures:
    """One prefill step: ``batch`` prompts of ``isl`` tokens at C = 0 (causal mean (I - 1) / 2), KV cache written."""
    gpu = ev.hardware(gpu, preset)
    batch = np.asarray(batch, dtype=float)
    prompt = replace(layout, context=np.zeros_like(layout.context), tokens_per_step=np.full_like(layout.context, isl))
    base = ev.step(model, gpu, preset, weight_bits, prompt, batch)
    # every GPU holding a copy of the cache (kv_copies) writes it
    written = (
        ev.kv_bytes_per_token(model, layout.kv_bytes_per_value) * isl * batch * ev.kv_copies(model, preset, prompt)
    )
    written_s = written / (layout.n_gpus * gpu.hbm_bytes_per_s * preset.hbm_efficiency)
    memory_s = base.memory_s + written_s
    if not base.per_kernel_class:
        return replace(base, memory_s=memory_s)
    # at C = 0 the step's attention is all prompt attention: one prefill class with the KV cache it writes
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
    model: ModelSpec, gpu: GpuSpec, preset: Preset, weight_bits: int, layout: ev.Layout, batch, workload: Workload
) -> ev.DeviceMemory:
    """Memory of a prefill instance holding ``batch`` prompts of the longest class."""
    longest = replace(
        layout, context=np.zeros_like(layout.context), tokens_per_step=np.full_like(layout.context, workload.max_isl)
    )
    return ev.memory(model, gpu, preset, weight_bits, longest, batch)


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
) -> dict[str, np.ndarray]:
    """A prefill instance batching ``batch`` prompts of one class per step: requests/s over the mix and TTFT.

    requests/s = b / sum_k w_k T_pre(b, I_k); TTFT = max_k T_pre(b, I_k) + KV transfer of I_k tokens.
    """
    batch = np.asarray(batch, dtype=float)
    w = workload._w()
    busy = 0.0
    ttft = None
    compute = None
    for wk, i in zip(w, workload.isl, strict=True):
        step = prefill_step(model, gpu, preset, weight_bits, layout, batch, i)
        busy = busy + wk * step.step_time_s
        t = step.step_time_s + kv_transfer_s(model, layout, i, link_bytes_per_s, hop_latency_s)
        ttft = t if ttft is None else np.maximum(ttft, t)
        compute = step.step_time_s if compute is None else np.maximum(compute, step.step_time_s)
    mem = prefill_memory(model, gpu, preset, weight_bits, layout, batch, workload)
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
) -> ev.DeviceMemory:
    """Memory of a decoding instance at layout.context, with the steady-state prompt tokens in flight if aggregated."""
    extra = prompt_share(workload, aggregated)
    return ev.memory(
        model, gpu, preset, weight_bits, replace(layout, tokens_per_step=layout.tokens_per_step + extra), batch
    )


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
) -> dict[str, np.ndarray]:
    """Every figure of an aggregated instance (chunked prefill in the decode steps), prices included."""
    batch = np.asarray(batch, dtype=float)
    step = tpot_step(model, gpu, preset, weight_bits, layout, batch, workload, chunk_tokens, 1.0)
    tpot = step.step_time_s
    ttft = ttft_aggregated_s(model, gpu, preset, weight_bits, layout, batch, workload, chunk_tokens)
    n = layout.n_gpus
    mem = aggregated_memory(model, gpu, preset, weight_bits, layout, batch, workload)
    out = _request_prices(n * gpu.usd_per_s, batch / tpot * utilisation, workload, n)
    out.update(_step_fields(step, mem))
    out.update(
        tpot_s=tpot,
        max_itl_s=step.max_itl_s if isinstance(step, CycleFigures) else tpot,
        ttft_s=ttft,
        usd_per_mtok=usd_per_mtok(n, gpu.usd_per_s, tpot, batch, utilisation),
        prefill_within_chunk_budget=batch <= stable_batch_limit(workload, chunk_tokens),
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
) -> dict[str, np.ndarray]:
    """Every figure of x prefill and y decode instances: prefill = (gpu, layout, batch, x), decode = (gpu, layout,
    batch, y); they serve min(x r_p, y r_d) requests/s for x N_p price_p + y N_d price_d dollars per second.
    ``prefill_preset``: the prefill side's physics where it differs from the decode side's (an engine profile's
    efficiencies on another accelerator; None: ``preset``)."""
    p_gpu, p_layout, p_batch, x = prefill
    d_gpu, d_layout, d_batch, y = decode
    same = bool(shares_domain(p_gpu, d_gpu, p_layout.n_gpus, d_layout.n_gpus))
    link = kv_link_bytes_per_s(p_gpu, d_gpu, same)
    hop = p_gpu.intra_hop_latency_s if same else max(p_gpu.inter_hop_latency_s, d_gpu.inter_hop_latency_s)
    pre = prefill_figures(model, p_gpu, prefill_preset or preset, weight_bits, p_layout, p_batch, workload, link, hop)
    step = tpot_step(model, d_gpu, preset, weight_bits, d_layout, d_batch, workload, 0.0, 0.0)
    tpot = step.step_time_s
    decode_rate = d_batch / (workload.mean_osl * tpot)
    served = np.minimum(x * pre["requests_per_s"], y * decode_rate) * utilisation
    usd_per_s = x * p_layout.n_gpus * p_gpu.usd_per_s + y * d_layout.n_gpus * d_gpu.usd_per_s
    gpus = x * p_layout.n_gpus + y * d_layout.n_gpus
    mem = aggregated_memory(model, d_gpu, preset, weight_bits, d_layout, d_batch, workload, 0.0)
    out = _request_prices(usd_per_s, served * workload.mean_osl, workload, gpus)
    out.update(_step_fields(step, mem))
    out["fits_in_memory"] = out["fits_in_memory"] & pre["fits_in_memory"]
    out.update(
        tpot_s=tpot,
        max_itl_s=tpot,
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


def _step_fields(step: ev.StepFigures | CycleFigures, mem: ev.DeviceMemory) -> dict[str, np.ndarray]:
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
