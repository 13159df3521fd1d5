"""Data-parallel attention with wide expert parallelism (physics.md 10.5), the DeepSeek-V3 style of MoE serving.

A group of G GPUs (``Layout.tp``; ``ep`` = G, ``pp`` = 1) keeps every weight but the routed experts on every GPU:
attention, shared experts, dense layers and embeddings are replicated, and each GPU serves ``batch / G`` sequences
with their KV cache (MLA latents included). The routed experts are spread E / G per GPU. Per MoE layer each GPU
sends each of its tokens' k expert activations (d_model x activation bytes each) to the GPUs holding those experts
and gets the results back: dispatch and combine, two all-to-all exchanges of which (G - 1) / G leaves the GPU, over
the scale-up links when G fits in one scale-up domain and over the scale-out links otherwise. The busiest GPU sets
the step time; ``Preset.expert_load_imbalance`` (>= 1, default 1) scales its share of expert tokens. A prefill
step places whole prompts on ranks (``Preset.dp_attention_whole_prompts``): the busiest of G ranks carries
ceil(B / G) of the B prompts through attention and the replicated layers (one prompt on a DEP8 prefill instance is
computed by one GPU), while the routed experts still see the step's B prompts spread over the G ranks; the memory
check, the dispatch volume and decode steps keep the even B / G share (a decode step's time then stays concave in the
batch, as the optimiser's chords need). With two-batch
overlap (``Layout.a2a_overlap``: SGLang's TBO, DeepSeek's dual micro-batch overlap) one half-batch's dispatch and
combine run while the other computes, so the exchange counts only where it outlasts compute and memory; the ideal
case is modelled (the second half-batch's weight reads and kernel launches are not charged), as fits a bound.

Every function returns figures of the busiest GPU; the evaluator's hooks scale them to its whole-instance terms.
"""

from __future__ import annotations

import numpy as np

from roofline_opt.physics import evaluator as ev
from roofline_opt.physics.specs import GpuSpec, ModelSpec, Preset


def _per_gpu(layout: ev.Layout, batch) -> tuple[np.ndarray, np.ndarray]:
    """(group size G, tokens each GPU's own sequences bring to a step: an even share B / G of the sequences)."""
    group = np.maximum(layout.tp, 1.0)
    return group, np.asarray(batch, dtype=float) * layout.tokens_per_step / group


def _busiest(
    preset: Preset, layout: ev.Layout, batch, whole_prompts: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(group size G, tokens the busiest GPU's own sequences bring to a step, tokens of all the group's sequences).

    The busiest GPU's own prompts are ceil(B / G) whole ones in a prefill step (``whole_prompts``) under
    ``Preset.dp_attention_whole_prompts``: a request is sent whole to one data-parallel rank (SGLang's
    DataParallelController, sgl-project/sglang python/sglang/srt/managers/data_parallel_controller.py @fdd9edee:
    ``round_robin_scheduler`` sends each request to one worker, each DP-attention rank its own scheduler process);
    else the even share B / G."""
    group, even = _per_gpu(layout, batch)
    all_tokens = even * group
    if not (whole_prompts and preset.dp_attention_whole_prompts):
        return group, even, all_tokens
    # the small tolerance keeps a batch that is a whole multiple of G up to rounding at B / G sequences
    whole = np.ceil(np.asarray(batch, dtype=float) / group - 1e-9)
    return group, whole * layout.tokens_per_step, all_tokens


def _replicated_layout(layout: ev.Layout) -> ev.Layout:
    """One GPU running the whole model on its own sequences (no tensor, pipeline or expert parallelism)."""
    one = np.ones_like(layout.tp)
    return ev.Layout.of(one, False, one, layout.context, layout.tokens_per_step, one, kv_bits=layout.kv_bits)


def busiest_gpu_traffic_bytes(
    model: ModelSpec,
    gpu: GpuSpec,
    preset: Preset,
    weight_bits: int,
    layout: ev.Layout,
    batch,
    whole_prompts: bool = False,
):
    """HBM bytes the busiest GPU reads in one step: replicated weights, its KV cache, its experts and their tokens
    (``whole_prompts``: a prefill step, its prompts whole on their ranks: ``_busiest``)."""
    group, own_tokens, all_tokens = _busiest(preset, layout, batch, whole_prompts)
    own_seqs = own_tokens / layout.tokens_per_step
    replicated = ev.hbm_traffic_bytes(model, gpu, preset, weight_bits, _replicated_layout(layout), own_seqs)
    sz = ev.model_sizes(model)
    if not (model.is_moe and sz.n_moe_layers):
        return replicated
    as_if_alone = ev.routed_expert_bytes(model, gpu, preset, weight_bits, own_tokens, 1.0, 1.0)
    w_expert, act_per_token = ev.expert_bytes(model, gpu, preset, weight_bits, 1.0, 1.0)
    touched = ev.expert_touched_fraction(model, all_tokens) * model.n_experts / group
    tokens_per_expert = all_tokens * model.n_active_experts / model.n_experts * preset.expert_load_imbalance
    spread = touched * (w_expert + act_per_token * tokens_per_expert)
    return replicated + sz.n_moe_layers * (spread - as_if_alone)


def busiest_gpu_attention_flop(
    model: ModelSpec, preset: Preset, layout: ev.Layout, batch, whole_prompts: bool = False
) -> np.ndarray:
    """Attention FLOP of the busiest GPU in one step: its own sequences' attention over their context
    (``whole_prompts``: as in ``busiest_gpu_traffic_bytes``)."""
    _, own_tokens, _ = _busiest(preset, layout, batch, whole_prompts)
    c_mean = layout.context + (layout.tokens_per_step - 1.0) / 2.0
    return ev.model_sizes(model).attn_flop_per_ctx_token_per_layer * model.n_layers * c_mean * own_tokens


def busiest_gpu_gemm_tokens(
    model: ModelSpec, preset: Preset, layout: ev.Layout, batch, whole_prompts: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """(tokens through the busiest GPU's replicated weights, tokens its routed experts compute): its own sequences'
    tokens, and the group's expert tokens spread over the group, scaled by ``expert_load_imbalance`` (a dense model:
    its own tokens both)."""
    group, own_tokens, all_tokens = _busiest(preset, layout, batch, whole_prompts)
    if not model.is_moe:
        return own_tokens, own_tokens
    # the routed experts' work is spread over the group whichever rank holds the sequences
    return own_tokens, all_tokens / group * preset.expert_load_imbalance


def busiest_gpu_flop(
    model: ModelSpec, preset: Preset, layout: ev.Layout, batch, whole_prompts: bool = False
) -> np.ndarray:
    """FLOP of the busiest GPU in one step: its sequences through the replicated part, its share of expert tokens
    (``whole_prompts``: as in ``busiest_gpu_traffic_bytes``)."""
    group, own_tokens, all_tokens = _busiest(preset, layout, batch, whole_prompts)
    sz = ev.model_sizes(model)
    attention = busiest_gpu_attention_flop(model, preset, layout, batch, whole_prompts)
    routed_params = sz.n_moe_layers * model.n_active_experts * sz.ff_params_per_expert if model.is_moe else 0.0
    replicated = 2.0 * (sz.active_params - routed_params) * own_tokens
    # the routed experts' work is spread over the group whichever rank holds the sequences
    experts = 2.0 * routed_params * all_tokens / group
    return replicated + attention + experts * preset.expert_load_imbalance


def dispatch_combine(
    model: ModelSpec, gpu: GpuSpec, preset: Preset, layout: ev.Layout, overlapped: bool
) -> ev.Collective:
    """Two all-to-all exchanges per MoE layer, affine in the batch per NCCL protocol: those of the layouts run with
    (``overlapped``) or without two-batch overlap; zero elsewhere and outside DP attention."""
    group = np.maximum(layout.tp, 1.0)
    sz = ev.model_sizes(model)
    active = layout.dp_attention & (group > 1.0) & model.is_moe & (layout.a2a_overlap == overlapped)
    one_domain = group <= gpu.scaleup_gpus
    nodes = np.where(one_domain, 1.0, np.ceil(group / gpu.scaleup_gpus))
    link_bytes_per_s = ev.POINT_TO_POINT_LINK_FACTOR * np.where(
        one_domain, gpu.intra_bytes_per_s * ev.scaleup_link_share(gpu, preset, group), gpu.inter_bytes_per_s
    )
    leaving = (group - 1.0) / group
    bytes_per_seq = (
        model.n_active_experts * model.d_model * preset.activation_bytes * layout.tokens_per_step / group
    ) * preset.expert_load_imbalance
    latency, slope = [], []
    for p in preset.protocols:
        lat = (group / nodes - 1.0) * p.per_rank_s + p.per_log2_node_s * np.log2(nodes) + p.base_s
        lat = lat + np.where(one_domain, gpu.intra_hop_latency_s, gpu.inter_hop_latency_s)
        latency.append(np.where(active, lat * preset.network_latency_factor, 0.0))
        per_seq = leaving * bytes_per_seq / (link_bytes_per_s * p.bandwidth_factor) * preset.allreduce_time_factor
        slope.append(np.where(active, per_seq, 0.0))
    count = np.where(active, 2.0 * sz.n_moe_layers, 0.0)
    return ev.Collective(count=count, latency_s=np.stack(latency, axis=-1), s_per_seq=np.stack(slope, axis=-1))


def per_gpu_memory_bytes(model: ModelSpec, gpu: GpuSpec, preset: Preset, weight_bits: int, layout: ev.Layout, batch):
    """(weights, KV cache, activations) bytes on each GPU of the group."""
    group, own_tokens = _per_gpu(layout, batch)
    sz = ev.model_sizes(model)
    precision = ev.weight_precision(model, gpu, preset, weight_bits)
    weights = ev.weight_bytes(model, precision, 1.0 / group) if model.is_moe else ev.weight_bytes(model, precision)
    a = preset.activation_bytes
    own_seqs = own_tokens / layout.tokens_per_step
    kv = ev.kv_bytes_per_token(model, layout.kv_bytes_per_value) * (layout.context + layout.tokens_per_step) * own_seqs
    widest = max(sz.qkv_out_width, model.m_in * max(model.d_ff, model.dense_layer_d_ff), model.d_model)
    received = own_tokens * model.n_active_experts * preset.expert_load_imbalance if model.is_moe else 0.0
    act = a * own_tokens * (2.0 * model.d_model + widest) + a * received * (model.d_model + model.m_in * model.d_ff)
    return weights + 0.0 * kv, kv, act
