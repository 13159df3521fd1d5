"""The exact roofline evaluator: the only place the physics of docs/concepts/physics.md is written (vectorised numpy).

Every figure roofline_opt prints comes from here. ``step`` evaluates one decoding step for arrays of layouts,
``evaluate`` adds speculative decoding, cost and memory, and ``collectives`` exposes the network term as a list
of affine-in-batch pieces per NCCL protocol so the MIP tables can be derived from the same code. A model's static
sizes (parameters, KV-cache bytes per token) are ``physics.sizes``, re-exported here: the catalog listing reads them
without importing numpy.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from roofline_opt.errors import InvalidInput
from roofline_opt.physics import dp_attention
from roofline_opt.physics.sizes import kv_bytes_per_token, model_sizes
from roofline_opt.physics.specs import FP4_FORMATS, WEIGHT_GROUPS, GpuSpec, MixedPrecision, ModelSpec, Preset
from roofline_opt.physics.step_figures import StepFigures, kernels_per_step

DRAFT_WEIGHT_BITS = 16
"""Draft models run at 16-bit weights (this reproduces the notebook's speculative-decoding figures)."""
DEFAULT_KV_BITS = 16
"""KV-cache precision unless a layout says otherwise (the paper's 2-byte KV cache)."""
KV_BITS = (16, 8, 4)
DEFAULT_ACCEPTANCE = 0.8
"""Probability that the target model accepts a drafted token, unless a question says otherwise (the notebook's)."""
ALLREDUCE = "allreduce"
POINT_TO_POINT = "p2p"
POINT_TO_POINT_LINK_FACTOR = 2.0
"""One direction of a link over the all-reduce bandwidth a card states (``intra/inter_bytes_per_s`` are the
notebook's all-reduce figures, half of one direction): point-to-point sends, all-to-all exchanges and KV transfers
get the whole direction."""


def hardware(gpu: GpuSpec, preset: Preset) -> GpuSpec:
    """The accelerator as ``preset`` sees it: the reference notebook's figures under ``notebook_hardware`` (paper),
    else the card's vendor figures. Every public function here applies it, so callers pass the card as loaded."""
    return gpu.in_notebook() if preset.notebook_hardware else gpu


def sustained_hbm_bytes_per_s(gpu: GpuSpec, preset: Preset) -> float:
    """HBM bytes per second one device sustains: the nominal bandwidth times ``hbm_efficiency``, and under
    ``card_achievable_fractions`` times the card's ``achievable_hbm_fraction`` (docs/physics/accelerators.md)."""
    achievable = gpu.achievable_hbm_fraction if preset.card_achievable_fractions else 1.0
    return gpu.hbm_bytes_per_s * achievable * preset.hbm_efficiency


def sustained_flop_per_s(gpu: GpuSpec, preset: Preset, weight_bits: int) -> float:
    """Dense FLOP/s one device sustains at ``weight_bits``: the nominal rate times ``flop_efficiency``, and under
    ``card_achievable_fractions`` times the card's ``achievable_flop_fraction``."""
    achievable = gpu.achievable_flop_fraction if preset.card_achievable_fractions else 1.0
    return flop_rate(gpu, weight_bits) * achievable * preset.flop_efficiency


def sustained_decode_attention_flop_per_s(gpu: GpuSpec, preset: Preset, weight_bits: int, layout: Layout) -> np.ndarray:
    """FLOP/s one device's decode attention kernels sustain (``decode_attention_flop_rate``), with the same
    efficiency and achievable fraction as ``sustained_flop_per_s``."""
    achievable = gpu.achievable_flop_fraction if preset.card_achievable_fractions else 1.0
    return decode_attention_flop_rate(gpu, preset, weight_bits, layout) * achievable * preset.flop_efficiency


def scaleup_link_share(gpu: GpuSpec, preset: Preset, ranks_per_domain) -> np.ndarray:
    """Share of a GPU's scale-up link bandwidth a collective among ``ranks_per_domain`` GPUs of each domain drives.

    Behind a switch, all of it. On a mesh (``scaleup_topology`` "mesh" under ``Preset.card_scaleup_topology``) a GPU
    has one direct link to each of the other scale-up_gpus - 1 GPUs and a collective among r of them uses r - 1:
    (r - 1) / (scaleup_gpus - 1), all of it at r = scaleup_gpus. Ranks beyond the first cost nothing here (the callers'
    byte terms are zero there), so the share is floored at one link rather than zero.
    """
    ranks = np.asarray(ranks_per_domain, dtype=float)
    if not (preset.card_scaleup_topology and gpu.scaleup_topology == "mesh") or gpu.scaleup_gpus < 2:
        return np.ones_like(ranks)
    links = gpu.scaleup_gpus - 1.0
    return np.clip((ranks - 1.0) / links, 1.0 / links, 1.0)


def weight_precision(model: ModelSpec, gpu: GpuSpec, preset: Preset, weight_bits: int) -> MixedPrecision:
    """Bits of each weight group of ``model`` served at ``weight_bits`` on ``gpu``: the first of
    ``Preset.mixed_precisions`` that applies to it, else every group at ``weight_bits``; under
    ``card_fp4_block_scales`` its 4-bit groups carry the block scales of the card's ``fp4_format``
    (docs/physics/memory-and-kv.md, "Block-scaled FP4")."""
    chosen = (p for p in preset.mixed_precisions if p.applies(model, weight_bits))
    precision = next(chosen, MixedPrecision(weight_bits, "all"))
    if preset.card_fp4_block_scales and gpu.fp4_format:
        return replace(precision, fp4_scale_bits_per_value=FP4_FORMATS[gpu.fp4_format].bits_per_value)
    return precision


def weight_bytes(model: ModelSpec, precision: MixedPrecision, routed_share=None):
    """Bytes of ``model``'s weights at ``precision``, with ``routed_share`` of its routed experts (the share a GPU
    of a data-parallel-attention group holds; None: all of them)."""
    sz = model_sizes(model)
    routed = sz.n_moe_layers * model.n_experts * sz.ff_params_per_expert
    if precision.uniform:
        w = precision.bytes_per_param("qkv")
        return w * sz.total_params if routed_share is None else w * (sz.total_params - routed + routed * routed_share)
    if routed_share is None:
        routed_share = 1.0
    params = {
        "qkv": model.n_layers * sz.qkv_params_per_layer,
        "out": model.n_layers * sz.out_params_per_layer,
        "embedding": sz.embedding_params,
        "routed_ffn": routed * routed_share,
        "shared_expert": sz.n_moe_layers * model.n_shared_experts * sz.ff_params_per_expert,
        "dense_layer_ffn": sz.n_dense_layers * sz.dense_ff_params,
    }
    return sum(precision.bytes_per_param(g) * params[g] for g in WEIGHT_GROUPS)


def gemm_flop_by_group(model: ModelSpec, tokens, routed_tokens) -> dict[str, np.ndarray]:
    """Linear FLOP of one step by weight group (``WEIGHT_GROUPS``): ``tokens`` through every group but the routed
    experts, which see ``routed_tokens`` (the same but on a data-parallel-attention GPU); they sum to 2 x active
    parameters x tokens."""
    sz = model_sizes(model)
    tokens = np.asarray(tokens, dtype=float)
    per_token = {
        "qkv": model.n_layers * sz.qkv_params_per_layer,
        "out": model.n_layers * sz.out_params_per_layer,
        "embedding": sz.embedding_params,
        "shared_expert": sz.n_moe_layers * model.n_shared_experts * sz.ff_params_per_expert,
        "dense_layer_ffn": sz.n_dense_layers * sz.dense_ff_params,
    }
    flop = {g: 2.0 * params * tokens for g, params in per_token.items()}
    flop["routed_ffn"] = 2.0 * sz.n_moe_layers * model.n_active_experts * sz.ff_params_per_expert * routed_tokens
    return flop


def mixed_precision_gemm_s(
    model: ModelSpec, gpu: GpuSpec, preset: Preset, weight_bits: int, layout: Layout, batch, whole_prompts: bool
) -> np.ndarray:
    """Seconds one step's GEMMs of the groups kept at other bits than ``weight_bits`` (``weight_precision``) add
    over running at the weights' rate: each such group's FLOPs move from the weights' rate to its own bits' rate
    (on a data-parallel-attention layout, the busiest GPU's FLOPs)."""
    precision = weight_precision(model, gpu, preset, weight_bits)
    batch = np.asarray(batch, dtype=float)
    if precision.uniform:
        return np.zeros(np.broadcast_shapes(layout.tp.shape, batch.shape))
    n = layout.n_gpus
    tokens = batch * layout.tokens_per_step
    per_gpu = {g: f / n for g, f in gemm_flop_by_group(model, tokens, tokens).items()}
    if layout.any_dp_attention:
        own, routed = dp_attention.busiest_gpu_gemm_tokens(model, preset, layout, batch, whole_prompts)
        busiest = gemm_flop_by_group(model, own, routed)
        per_gpu = {g: np.where(layout.dp_attention, busiest[g], f) for g, f in per_gpu.items()}
    at_weights = sustained_flop_per_s(gpu, preset, weight_bits)
    extra = np.zeros(np.broadcast_shapes(layout.tp.shape, batch.shape))
    for g in WEIGHT_GROUPS:
        bits = precision.bits(g)
        if bits != weight_bits:
            extra = extra + per_gpu[g] * (1.0 / sustained_flop_per_s(gpu, preset, bits) - 1.0 / at_weights)
    return extra


@dataclass(frozen=True)
class Collective:
    """One kind of collective in a step: ``count`` calls, each over ``ranks`` ranks on ``nodes`` nodes.

    Its bytes are ``bytes_per_seq * batch``; latency_s[p] and s_per_seq[p] give, per NCCL protocol p, the time of
    one call as latency_s[p] + s_per_seq[p] * batch. Arrays are shaped like the evaluated layouts.
    """

    count: np.ndarray
    latency_s: np.ndarray
    s_per_seq: np.ndarray

    def time_s(self, batch: np.ndarray) -> np.ndarray:
        batch = np.asarray(batch, dtype=float)
        if not np.any(self.count):
            return np.zeros(np.broadcast_shapes(np.shape(self.count), batch.shape))
        per_protocol = self.latency_s + self.s_per_seq * batch[..., None]
        return self.count * np.min(per_protocol, axis=-1)


def _collective(
    preset: Preset,
    gpu: GpuSpec,
    count: np.ndarray,
    ranks: np.ndarray,
    nodes: np.ndarray,
    bytes_per_seq: np.ndarray,
    kind: str,
) -> Collective:
    """NCCL tuning model (physics.md section 4), affine in the batch for each protocol (the last axis)."""
    ranks = np.asarray(ranks, dtype=float)
    nodes = np.maximum(np.asarray(nodes, dtype=float), 1.0)
    active = ranks > 1.0
    m = 2.0 if kind == ALLREDUCE else 1.0
    bw_scale = 1.0 if kind == ALLREDUCE else 0.5
    per_node_ranks = ranks / nodes
    safe_ranks = np.where(active, ranks, 1.0)
    per_rank_s, per_log2_node_s, base_s, bandwidth_factor = (
        np.array([getattr(p, name) for p in preset.protocols])
        for name in ("per_rank_s", "per_log2_node_s", "base_s", "bandwidth_factor")
    )
    per_node_ranks, nodes, safe_ranks, on = (x[..., None] for x in (per_node_ranks, nodes, safe_ranks, active))
    latency = m * ((per_node_ranks - 1.0) * per_rank_s + per_log2_node_s * np.log2(nodes)) + base_s
    latency = latency + m * np.where(nodes > 1.0, gpu.inter_hop_latency_s, gpu.intra_hop_latency_s)
    intra_bytes_per_s = gpu.intra_bytes_per_s * scaleup_link_share(gpu, preset, per_node_ranks)
    if kind == ALLREDUCE and preset.card_scaleup_link_efficiency:
        intra_bytes_per_s = intra_bytes_per_s * gpu.scaleup_link_efficiency
    per_byte = (
        nodes * np.maximum(0.0, per_node_ranks - 1.0) / (safe_ranks * intra_bytes_per_s * bandwidth_factor)
        + (nodes - 1.0) / (safe_ranks * gpu.inter_bytes_per_s * bandwidth_factor)
    ) * bw_scale
    seq_bytes = np.asarray(bytes_per_seq, dtype=float)[..., None]
    return Collective(
        count=np.where(active, count, 0.0),
        latency_s=np.where(on, latency * preset.network_latency_factor, 0.0),
        s_per_seq=np.where(on, per_byte * seq_bytes * preset.allreduce_time_factor, 0.0),
    )


@dataclass(frozen=True)
class Layout:
    """Arrays (broadcast together) describing how an instance is split and what one step does.

    ``dp_attention`` marks data-parallel attention with wide expert parallelism (physics.md 10.5): the instance is
    a group of ``tp`` GPUs, each holding all attention weights and ``batch / tp`` sequences, experts spread over
    ``ep`` = ``tp`` GPUs, ``pp`` = 1 (physics in ``dp_attention.py``). ``a2a_overlap`` marks data-parallel
    attention run with two-batch overlap: its dispatch/combine hides behind the step's compute and memory time.
    """

    tp: np.ndarray
    tp_2d: np.ndarray
    pp: np.ndarray
    ep: np.ndarray
    context: np.ndarray
    tokens_per_step: np.ndarray
    kv_bits: np.ndarray
    dp_attention: np.ndarray
    a2a_overlap: np.ndarray

    @classmethod
    def of(
        cls, tp, tp_2d, pp, context, tokens_per_step=1, ep=1, kv_bits=DEFAULT_KV_BITS, dp_attention=False, a2a_overlap=0
    ) -> Layout:
        arrays = np.broadcast_arrays(
            np.asarray(tp, dtype=float),
            np.asarray(tp_2d, dtype=bool),
            np.asarray(pp, dtype=float),
            np.asarray(ep, dtype=float),
            np.asarray(context, dtype=float),
            np.asarray(tokens_per_step, dtype=float),
            np.asarray(kv_bits, dtype=float),
            np.asarray(dp_attention, dtype=bool),
            np.asarray(a2a_overlap, dtype=bool) & np.asarray(dp_attention, dtype=bool),
        )
        return cls(*arrays)

    @property
    def kv_bytes_per_value(self) -> np.ndarray:
        """Bytes of one KV-cache element: kv_bits / 8 (physics.md 10.1; activations keep their own bytes)."""
        return self.kv_bits / 8.0

    @property
    def any_dp_attention(self) -> bool:
        return bool(np.any(self.dp_attention))

    @property
    def n_gpus(self) -> np.ndarray:
        return self.tp * self.pp

    def verifying(self, gamma) -> Layout:
        """The target's step that verifies a draft of ``gamma`` tokens (gamma + 1 tokens per sequence)."""
        return replace(self, tokens_per_step=self.tokens_per_step * (np.asarray(gamma, dtype=float) + 1.0))

    def for_draft(self, draft: ModelSpec | None = None) -> Layout:
        """The draft model's step on the same GPUs and layout: a dense draft drops expert parallelism, a MoE draft
        whose experts the degree divides (a multi-token-prediction module) keeps it."""
        if draft is not None and draft.is_moe and np.all(draft.n_experts % np.maximum(self.ep, 1.0) == 0):
            return self
        return replace(self, ep=np.ones_like(self.ep))


def _largest_divisor_up_to_sqrt(degree: float) -> float:
    """t1 of the most square integer factoring degree = t1 * t2 with t1 <= t2."""
    whole = int(degree)
    if whole != degree or whole < 1:
        return 1.0
    return float(max(f for f in range(1, int(np.sqrt(whole)) + 1) if whole % f == 0))


def _tp_factors(preset: Preset, tp: np.ndarray, tp_2d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Slicing factors (t1, t2): 1-D is (T, 1); 2-D is sqrt(T) twice (paper) or an integer factoring."""
    if preset.integer_tp_2d:
        degrees, where = np.unique(tp, return_inverse=True)
        t1 = np.array([_largest_divisor_up_to_sqrt(d) for d in degrees])[where].reshape(tp.shape)
        t2d = (t1, tp / t1)
    else:
        t2d = (np.sqrt(tp), np.sqrt(tp))
    return np.where(tp_2d, t2d[0], tp), np.where(tp_2d, t2d[1], 1.0)


def collectives(model: ModelSpec, gpu: GpuSpec, preset: Preset, weight_bits: int, layout: Layout) -> list[Collective]:
    """The network work of one step as collectives whose time is affine in the batch per protocol."""
    gpu = hardware(gpu, preset)
    sz = model_sizes(model)
    a = preset.activation_bytes
    tp, pp, ep, s_tok = layout.tp, layout.pp, layout.ep, layout.tokens_per_step
    node = float(gpu.scaleup_gpus)
    nodes_all = np.ceil(tp / node)
    seq_bytes = s_tok / pp * a
    k_used = model.n_active_experts + model.n_shared_experts
    ff_width = model.d_ff
    layer_kinds = [(sz.n_moe_layers, k_used, ff_width, ep)]
    if sz.n_dense_layers:
        layer_kinds.append((sz.n_dense_layers, 1, model.dense_layer_d_ff or model.d_ff, np.ones_like(ep)))
    out: list[Collective] = []
    t1, t2 = _tp_factors(preset, tp, layout.tp_2d)
    for n_layers, k, dff, e in layer_kinds:
        if n_layers == 0:
            continue
        ff_tp = tp / e
        ff_out_words = model.d_model if preset.moe_output_reduced_once else k * model.m_out * model.d_model
        if preset.integer_tp_2d:
            groups = [
                (sz.qkv_out_width, t1, np.minimum(t1, nodes_all), tp),
                (model.d_model, t2, np.ceil(t2 / node), tp),
                (k * model.m_in * dff, t1, np.minimum(t1, nodes_all), ff_tp),
                (ff_out_words, t2, np.ceil(t2 / node), ff_tp),
            ]
        else:
            r_attn = np.sqrt(tp)
            m_attn = np.sqrt(nodes_all)
            r_ff = np.sqrt(ff_tp)
            m_ff = np.sqrt(np.ceil(ff_tp / node))
            groups = [
                (sz.qkv_out_width, r_attn, m_attn, tp),
                (model.d_model, r_attn, m_attn, tp),
                (k * model.m_in * dff, r_ff, m_ff, ff_tp),
                (ff_out_words, r_ff, m_ff, ff_tp),
            ]
        for words, ranks, nodes, group_tp in groups:
            words_2d = words / (group_tp / ranks)
            out.append(
                _collective(
                    preset, gpu, np.where(layout.tp_2d, n_layers, 0.0), ranks, nodes, words_2d * seq_bytes, ALLREDUCE
                )
            )
        merged = model.parallel_attention and preset.merge_parallel_attention_allreduce
        attn_out_per_layer = 0.0 if merged else 1.0
        # under 1-D TP with tp_ep_moe_all_reduce the experts' output is reduced over the whole TP group, not tp / ep
        ff_out_ranks = np.where(layout.tp_2d, ff_tp, tp) if preset.tp_ep_moe_all_reduce else ff_tp
        one_d = [
            (model.d_model, tp, nodes_all, attn_out_per_layer),
            (ff_out_words, ff_out_ranks, np.ceil(ff_out_ranks / node), 1.0),
        ]
        for words, ranks, nodes, per_layer in one_d:
            count = np.where(layout.tp_2d, 0.0, n_layers * per_layer)
            out.append(_collective(preset, gpu, count, ranks, nodes, words * seq_bytes, ALLREDUCE))
        if model.is_moe and n_layers == sz.n_moe_layers:
            dispatch_bytes = model.n_active_experts * model.d_model * seq_bytes
            e_nodes = np.ceil(e / node)
            exchanges = 2.0 * n_layers * (e > 1)
            if preset.tp_ep_moe_all_reduce:
                # every rank of a 1-D TP group holds all tokens: its experts need no token sent to them
                exchanges = np.where(layout.tp_2d, exchanges, 0.0)
            out.append(_collective(preset, gpu, exchanges, e, e_nodes, dispatch_bytes, POINT_TO_POINT))
    send_bytes = model.d_model * seq_bytes / tp
    two = np.full_like(tp, 2.0)
    out.append(_collective(preset, gpu, pp - 1.0, np.where(pp > 1, two, 1.0), two, send_bytes, POINT_TO_POINT))
    if layout.any_dp_attention:
        out = [replace(c, count=np.where(layout.dp_attention, 0.0, c.count)) for c in out]
        out.append(dp_attention.dispatch_combine(model, gpu, preset, layout, overlapped=False))
    return out


def flop_rate(gpu: GpuSpec, weight_bits: int) -> float:
    rate = gpu.flop_per_s_by_bits.get(weight_bits)
    if rate is None:
        valid = ", ".join(str(b) for b, r in sorted(gpu.flop_per_s_by_bits.items()) if r is not None)
        msg = f"must be a precision {gpu.name} has a FLOP rate for ({valid}). Got {weight_bits} instead."
        raise InvalidInput("weight_bits", msg)
    return rate


def decode_attention_flop_rate(gpu: GpuSpec, preset: Preset, weight_bits: int, layout: Layout) -> np.ndarray:
    """FLOP/s of one GPU's decode attention kernels (the tokens a step decodes or verifies, attending over the cached
    context), shaped like the layouts: the weights' rate (the notebook's), or with
    ``Preset.decode_attention_at_kv_precision`` the rate of the KV cache's precision (where the card has no rate at
    that precision, the narrowest wider one it has: an 8-bit cache on a card without FP8 runs at 16 bits)."""
    if not preset.decode_attention_at_kv_precision:
        return np.full_like(layout.kv_bits, flop_rate(gpu, weight_bits))
    rates = {b: r for b, r in gpu.flop_per_s_by_bits.items() if r is not None}
    bits, where = np.unique(layout.kv_bits, return_inverse=True)
    chosen = [min((b for b in rates if b >= kv), default=max(rates)) for kv in bits]
    return np.array([rates[b] for b in chosen])[where].reshape(layout.kv_bits.shape)


def expert_touched_fraction(model: ModelSpec, tokens) -> np.ndarray:
    """u = 1 - (1 - k/E)^tokens: the fraction of routed experts a microbatch of ``tokens`` tokens reads (1 if dense)."""
    tokens = np.asarray(tokens, dtype=float)
    if not model.is_moe:
        return np.ones_like(tokens)
    return 1.0 - (1.0 - model.n_active_experts / model.n_experts) ** tokens


def kv_copies(model: ModelSpec, preset: Preset, layout: Layout) -> np.ndarray:
    """Copies of each KV-cache element an instance holds, as its memory check places them.

    The notebook's aggregate check (``paper``) counts one copy spread over all GPUs. Per device, TP ranks split the
    cache by KV heads over at most n_kv_heads ranks and replicate it beyond (``Preset.kv_split_by_kv_heads``; else
    every rank holds it all): T / min(T, n_kv_heads) copies; MLA's latent is one head, on every rank: T copies.
    With data-parallel attention each GPU keeps only its own sequences' cache: one copy. Pipeline stages split the
    layers and add no copies.
    """
    if preset.memory_check == "aggregate":
        return np.ones_like(layout.tp)
    split = preset.kv_split_by_kv_heads and not model.is_mla
    kv_ways = np.maximum(np.minimum(layout.tp, model_sizes(model).kv_heads / 2.0), 1.0) if split else 1.0
    return np.where(layout.dp_attention, 1.0, layout.tp / kv_ways)


def kv_read_bytes(model: ModelSpec, preset: Preset, layout: Layout, batch) -> np.ndarray:
    """KV-cache bytes read from HBM in one step, summed over the instance's devices (physics.md section 3).

    Every sequence's cache over its ``context`` tokens is read once per step by every GPU holding a copy of it
    (``kv_copies``): a GPU reads the copy it holds, so a cache replicated over TP ranks is read once per replica.
    With data-parallel attention each GPU reads its own sequences' cache, which sums to one copy.
    """
    batch = np.asarray(batch, dtype=float)
    one_copy = kv_bytes_per_token(model, layout.kv_bytes_per_value) * layout.context * batch
    return one_copy * kv_copies(model, preset, layout)


def hbm_traffic_bytes(
    model: ModelSpec,
    gpu: GpuSpec,
    preset: Preset,
    weight_bits: int,
    layout: Layout,
    batch,
    whole_prompts: bool = False,
) -> np.ndarray:
    """Bytes read from HBM in one step, summed over the instance's devices (physics.md section 3):
    ``kv_read_bytes`` plus weights and activations. ``whole_prompts``: a prefill step, whose prompts a data-parallel
    attention group places whole on its ranks (``dp_attention``)."""
    sz = model_sizes(model)
    a = preset.activation_bytes
    precision = weight_precision(model, gpu, preset, weight_bits)
    w = {g: precision.bytes_per_param(g) for g in WEIGHT_GROUPS}
    batch = np.asarray(batch, dtype=float)
    tp, pp, ep, s_tok = layout.tp, layout.pp, layout.ep, layout.tokens_per_step
    tok = batch * s_tok / pp
    t1, t2 = _tp_factors(preset, tp, layout.tp_2d)
    qkv_act = sz.qkv_out_width * tok * (1.0 if preset.paper_qkv_quirk else a)
    qkv = w["qkv"] * sz.qkv_params_per_layer + t2 * a * model.d_model * tok + t1 * qkv_act
    proj = w["out"] * sz.out_params_per_layer + a * (t2 * model.d_model * tok + t1 * sz.attn_out_in_width * tok)
    ff_moe = 0.0
    if sz.n_moe_layers:
        ff_t1, ff_t2 = _tp_factors(preset, tp / ep, layout.tp_2d) if model.is_moe else (t1, t2)
        _, per_expert_act = expert_bytes(model, gpu, preset, weight_bits, ff_t1, ff_t2)
        routed = routed_expert_bytes(model, gpu, preset, weight_bits, tok, ff_t1, ff_t2)
        shared_w = w["shared_expert"] * sz.ff_params_per_expert
        shared = model.n_shared_experts * (shared_w + per_expert_act * tok)
        ff_moe = sz.n_moe_layers * (routed + shared)
    ff_dense = 0.0
    if sz.n_dense_layers:
        dff = model.dense_layer_d_ff or model.d_ff
        ff_dense = sz.n_dense_layers * (
            w["dense_layer_ffn"] * sz.dense_ff_params
            + (model.m_in + model.m_out) * a * tok * (t2 * model.d_model + t1 * dff)
        )
    head = w["embedding"] * model.vocab * model.d_model
    per_micro = model.n_layers * (qkv + proj) + ff_moe + ff_dense + head
    plain = kv_read_bytes(model, preset, layout, batch) + pp * per_micro
    if not layout.any_dp_attention:
        return plain
    busiest = dp_attention.busiest_gpu_traffic_bytes(model, gpu, preset, weight_bits, layout, batch, whole_prompts)
    return np.where(layout.dp_attention, busiest * layout.n_gpus, plain)


def expert_bytes(
    model: ModelSpec, gpu: GpuSpec, preset: Preset, weight_bits: int, ff_t1, ff_t2
) -> tuple[float, np.ndarray]:
    """Weight bytes of one routed expert (at its group's bits, ``weight_precision``) and activation bytes per token
    through it (slicing factors ff_t1, ff_t2)."""
    precision = weight_precision(model, gpu, preset, weight_bits)
    per_expert_w = precision.bytes_per_param("routed_ffn") * model_sizes(model).ff_params_per_expert
    per_expert_act = (model.m_in + model.m_out) * preset.activation_bytes * (ff_t2 * model.d_model + ff_t1 * model.d_ff)
    return per_expert_w, per_expert_act


def routed_expert_bytes(
    model: ModelSpec, gpu: GpuSpec, preset: Preset, weight_bits: int, tok, ff_t1, ff_t2
) -> np.ndarray:
    """HBM bytes of the routed experts of one MoE layer for ``tok`` tokens: experts touched, and their activations."""
    per_expert_w, per_expert_act = expert_bytes(model, gpu, preset, weight_bits, ff_t1, ff_t2)
    s = model.n_experts / model.n_active_experts
    return expert_touched_fraction(model, tok) * model.n_experts * (per_expert_w + per_expert_act * tok / s)


def memory_time_s(
    model: ModelSpec, gpu: GpuSpec, preset: Preset, weight_bits: int, layout: Layout, batch
) -> np.ndarray:
    """Seconds the instance's HBM needs for one step's traffic."""
    gpu = hardware(gpu, preset)
    traffic = hbm_traffic_bytes(model, gpu, preset, weight_bits, layout, batch)
    return traffic / (layout.n_gpus * sustained_hbm_bytes_per_s(gpu, preset))


def step(
    model: ModelSpec, gpu: GpuSpec, preset: Preset, weight_bits: int, layout: Layout, batch, whole_prompts: bool = False
) -> StepFigures:
    """One decoding step of ``batch`` sequences (physics.md section 3); ``whole_prompts``: a prefill step of
    ``batch`` prompts (``hbm_traffic_bytes``)."""
    gpu = hardware(gpu, preset)
    sz = model_sizes(model)
    batch = np.asarray(batch, dtype=float)
    n = layout.n_gpus
    s_tok = layout.tokens_per_step
    c_mean = layout.context + (s_tok - 1.0) / 2.0
    attn_flop = sz.attn_flop_per_ctx_token_per_layer * model.n_layers * c_mean * batch * s_tok
    flop = 2.0 * sz.active_params * batch * s_tok + attn_flop
    all_attn_flop = attn_flop
    if layout.any_dp_attention:
        busiest = dp_attention.busiest_gpu_flop(model, preset, layout, batch, whole_prompts)
        flop = np.where(layout.dp_attention, busiest * n, flop)
        busiest_attn = dp_attention.busiest_gpu_attention_flop(model, preset, layout, batch, whole_prompts)
        all_attn_flop = np.where(layout.dp_attention, busiest_attn * n, attn_flop)
    traffic = hbm_traffic_bytes(model, gpu, preset, weight_bits, layout, batch, whole_prompts)
    flop_per_s = n * sustained_flop_per_s(gpu, preset, weight_bits)
    attn_flop_per_s = n * sustained_decode_attention_flop_per_s(gpu, preset, weight_bits, layout)
    hbm_bytes_per_s = n * sustained_hbm_bytes_per_s(gpu, preset)
    # the GEMMs of groups a checkpoint keeps wider run at their own bits' rate
    kept_s = mixed_precision_gemm_s(model, gpu, preset, weight_bits, layout, batch, whole_prompts)
    compute_s = flop / flop_per_s + kept_s
    if preset.decode_attention_at_kv_precision:
        # the attention FLOPs above were timed at the weights' rate: move them to the attention kernels'
        compute_s = compute_s + all_attn_flop * (1.0 / attn_flop_per_s - 1.0 / flop_per_s)
    memory_s = traffic / hbm_bytes_per_s
    network_s = sum(c.time_s(batch) for c in collectives(model, gpu, preset, weight_bits, layout))
    launch_s = kernels_per_step(model, preset) * gpu.kernel_launch_s * preset.kernel_launch_factor
    launch = np.full_like(compute_s, launch_s)
    hidden: np.ndarray | float = 0.0
    if np.any(layout.a2a_overlap):
        hidden = dp_attention.dispatch_combine(model, gpu, preset, layout, overlapped=True).time_s(batch)
    network_s = network_s + np.zeros_like(compute_s)
    if not preset.per_kernel_class:
        return StepFigures(launch, network_s, memory_s, compute_s, hidden)
    # the busiest GPU's attention (whole prompts on their data-parallel ranks) sets the attention class, as in compute_s
    busiest_share = np.where(attn_flop > 0, all_attn_flop / np.where(attn_flop > 0, attn_flop, 1.0), 1.0)
    kv_s = kv_read_bytes(model, preset, layout, batch) / hbm_bytes_per_s * busiest_share
    attn_s = all_attn_flop / attn_flop_per_s
    return StepFigures(launch, network_s, memory_s, compute_s, hidden, kv_s, attn_s, per_kernel_class=True)


def memory_reserve_bytes(preset: Preset, layout: Layout) -> np.ndarray:
    """Bytes per device the engine keeps outside weights, KV cache and activations (context, workspaces, CUDA
    graphs, communication buffers): a fixed amount plus a share growing with the instance's GPUs."""
    return preset.memory_reserve_bytes + preset.memory_reserve_bytes_per_instance_gpu * layout.n_gpus


@dataclass(frozen=True)
class DeviceMemory:
    """Bytes per device (per_device check) or per instance (aggregate check) and whether they fit."""

    weights_bytes: np.ndarray
    kv_cache_bytes: np.ndarray
    activations_bytes: np.ndarray
    capacity_bytes: np.ndarray
    fits: np.ndarray


def memory(
    model: ModelSpec,
    gpu: GpuSpec,
    preset: Preset,
    weight_bits: int,
    layout: Layout,
    batch,
    draft: ModelSpec | None = None,
) -> DeviceMemory:
    """Memory check: the notebook's aggregate one (paper) or per device with KV heads split or replicated."""
    gpu = hardware(gpu, preset)
    a = preset.activation_bytes
    batch = np.asarray(batch, dtype=float)
    models = [model] if draft is None else [model, draft]
    n = layout.n_gpus
    held = sum(weight_bytes(m, weight_precision(m, gpu, preset, weight_bits)) for m in models)
    if preset.memory_check == "aggregate":
        weights = held + 0.0 * n
        kv = sum(kv_bytes_per_token(m, layout.kv_bytes_per_value) for m in models) * layout.context * batch
        act = np.zeros_like(kv)
        cap = n * gpu.hbm_bytes
        weights, kv, act = _dp_attention_memory(models, gpu, preset, weight_bits, layout, batch, (weights, kv, act), n)
        return DeviceMemory(weights, kv, act, cap, weights + kv + act <= cap)
    weights = held / n
    kv = np.zeros_like(n * batch)
    act = np.zeros_like(kv)
    for m in models:
        sz = model_sizes(m)
        held = kv_bytes_per_token(m, layout.kv_bytes_per_value) * (layout.context + layout.tokens_per_step) * batch
        kv = kv + held * kv_copies(m, preset, layout) / n
        widest = max(sz.qkv_out_width, m.m_in * max(m.d_ff, m.dense_layer_d_ff), m.d_model)
        act = act + a * batch * layout.tokens_per_step * (2.0 * m.d_model + widest / layout.tp)
    weights, kv, act = _dp_attention_memory(
        models, gpu, preset, weight_bits, layout, batch, (weights + 0.0 * kv, kv, act)
    )
    cap = np.full_like(kv, gpu.hbm_bytes * preset.usable_hbm_fraction) - memory_reserve_bytes(preset, layout)
    if preset.kv_memory_rule is not None:
        cap = np.minimum(cap, preset.kv_memory_rule.capacity_bytes(gpu.hbm_bytes, weights, layout.n_gpus))
    return DeviceMemory(weights, kv, act, cap, weights + kv + act <= cap)


def _dp_attention_memory(models, gpu, preset, weight_bits, layout, batch, plain, scale=1.0):
    """(weights, KV, activations) with data-parallel-attention layouts' per-GPU bytes (x ``scale``: the aggregate
    check counts the whole instance, every GPU holding the same)."""
    if not layout.any_dp_attention:
        return plain
    dp = [dp_attention.per_gpu_memory_bytes(m, gpu, preset, weight_bits, layout, batch) for m in models]
    return tuple(np.where(layout.dp_attention, sum(d[i] for d in dp) * scale, x) for i, x in enumerate(plain))


def expected_tokens_per_round(acceptance: float, gamma) -> np.ndarray:
    """(1 - alpha^(gamma+1)) / (1 - alpha): expected tokens one draft-and-verify round yields."""
    gamma = np.asarray(gamma, dtype=float)
    if acceptance >= 1.0:
        return gamma + 1.0
    return (1.0 - acceptance ** (gamma + 1.0)) / (1.0 - acceptance)


def tokens_per_round_variance(acceptance: float, gamma) -> np.ndarray:
    """Variance of the tokens one round yields, X = 1 + the drafted tokens accepted before the first rejection (at most
    gamma): P(X >= k + 1) = alpha^k for k <= gamma, so E[X^2] = sum over k <= gamma of (2k + 1) alpha^k."""
    gamma = np.asarray(gamma, dtype=float)
    top = int(np.max(gamma, initial=0.0))
    second = np.zeros_like(gamma)
    for k in range(top + 1):
        second = second + np.where(k <= gamma, (2.0 * k + 1.0) * acceptance**k, 0.0)
    return second - expected_tokens_per_round(acceptance, gamma) ** 2


def speculative_round_host_s(preset: Preset, gamma) -> np.ndarray:
    """Host seconds a round of ``gamma`` drafted tokens adds to its GPU steps (``Preset.speculative_round_host_s``;
    0 where gamma is 0: no round, no speculative loop)."""
    return np.where(np.asarray(gamma, dtype=float) > 0, preset.speculative_round_host_s, 0.0)


def round_time_per_token_s(preset: Preset, target_s, draft_s, gamma, acceptance: float) -> np.ndarray:
    """Seconds per generated token of a draft-and-verify round: (verification + gamma draft steps + the round's host
    time) / expected tokens per round; gamma 0: the target's step. ``target_s``/``draft_s``: the steps' times (or
    the MIP's pieces of them)."""
    gamma = np.asarray(gamma, dtype=float)
    host = speculative_round_host_s(preset, gamma)
    rounds = (target_s + gamma * draft_s + host) / expected_tokens_per_round(acceptance, gamma)
    return np.where(gamma > 0, rounds, target_s)


def time_per_token_with_gamma(
    model: ModelSpec,
    gpu: GpuSpec,
    preset: Preset,
    weight_bits: int,
    layout: Layout,
    batch,
    gamma,
    draft: ModelSpec | None,
    acceptance: float,
    draft_weight_bits: int = DRAFT_WEIGHT_BITS,
    draft_step_s=None,
) -> np.ndarray:
    """Seconds per generated token at a fixed draft length gamma (0 = no speculative decoding); ``draft_step_s``:
    the draft's step time when the caller has it already (it does not depend on gamma)."""
    gamma = np.asarray(gamma, dtype=float)
    target = step(model, gpu, preset, weight_bits, layout.verifying(gamma), batch).step_time_s
    if draft is None:
        return target / layout.tokens_per_step
    if draft_step_s is None:
        draft_step_s = step(draft, gpu, preset, draft_weight_bits, layout.for_draft(draft), batch).step_time_s
    return round_time_per_token_s(preset, target, draft_step_s, gamma, acceptance)


def evaluate(
    model: ModelSpec,
    gpu: GpuSpec,
    preset: Preset,
    weight_bits: int,
    layout: Layout,
    batch,
    draft: ModelSpec | None = None,
    acceptance: float = DEFAULT_ACCEPTANCE,
    gamma_max: int = 0,
    gamma=None,
    draft_weight_bits: int = DRAFT_WEIGHT_BITS,
) -> dict[str, np.ndarray]:
    """All figures of fully specified setups; best gamma in 0..gamma_max unless ``gamma`` fixes it."""
    gpu = hardware(gpu, preset)
    batch = np.asarray(batch, dtype=float)
    base = step(model, gpu, preset, weight_bits, layout, batch)
    shape = np.broadcast_shapes(base.step_time_s.shape, batch.shape)
    no_spec = np.broadcast_to(base.step_time_s / layout.tokens_per_step, shape)
    per_token = no_spec
    best_gamma = np.zeros(shape)
    draft_step_s = np.full(shape, np.nan)
    if not (gamma_max > 0 or (gamma is not None and np.any(np.asarray(gamma) > 0))):
        draft = None  # a draft that never proposes a token takes no part, nor any memory
    if draft is not None:
        draft_s = step(draft, gpu, preset, draft_weight_bits, layout.for_draft(draft), batch).step_time_s
        draft_step_s = np.broadcast_to(draft_s, shape)
        setup = (model, gpu, preset, weight_bits, layout, batch)
        gammas = np.arange(1, gamma_max + 1) if gamma is None else None
        if gammas is not None:
            best = no_spec
            for g in gammas:
                t = time_per_token_with_gamma(*setup, g, draft, acceptance, draft_weight_bits, draft_s)
                better = t < best
                best_gamma = np.where(better, g, best_gamma)
                best = np.minimum(best, t)
            per_token = best
        else:
            best_gamma = np.broadcast_to(np.asarray(gamma, dtype=float), shape)
            per_token = time_per_token_with_gamma(*setup, best_gamma, draft, acceptance, draft_weight_bits, draft_s)
    mem = memory(model, gpu, preset, weight_bits, layout, batch, draft)
    n = np.broadcast_to(layout.n_gpus, shape)
    throughput = batch / per_token
    usd_per_mtok = 1e6 * n * gpu.usd_per_s * per_token / batch
    useful_flop = 2.0 * model_sizes(model).active_params * batch
    peak = flop_rate(gpu, weight_bits)
    mfu = useful_flop / (per_token * n * peak)
    busy = np.maximum(base.memory_s, base.compute_s)
    binding = np.select(
        [np.maximum(base.network_s, base.overlapped_network_s) >= busy, base.memory_s >= base.compute_s],
        ["network", "memory"],
        "compute",
    )
    return {
        "n_gpus": n.astype(float),
        "step_time_s": np.broadcast_to(base.step_time_s, shape),
        "kernel_launch_s": np.broadcast_to(base.kernel_launch_s, shape),
        "network_s": np.broadcast_to(base.network_s, shape),
        "overlapped_network_s": np.broadcast_to(base.overlapped_network_s, shape),
        "memory_s": np.broadcast_to(base.memory_s, shape),
        "compute_s": np.broadcast_to(base.compute_s, shape),
        "no_spec_time_per_token_s": no_spec,
        "draft_step_time_s": draft_step_s,
        "time_per_token_s": per_token,
        "tok_s_per_request": 1.0 / per_token,
        "usd_per_mtok": usd_per_mtok,
        "throughput_tok_s": throughput,
        "tok_s_per_gpu": throughput / n,
        "usd_per_hour": n * gpu.usd_per_hour,
        "mfu_fraction": mfu,
        "weights_bytes_per_device": np.broadcast_to(mem.weights_bytes, shape),
        "kv_cache_bytes_per_device": np.broadcast_to(mem.kv_cache_bytes, shape),
        "activations_bytes_per_device": np.broadcast_to(mem.activations_bytes, shape),
        "memory_capacity_bytes": np.broadcast_to(mem.capacity_bytes, shape),
        "fits_in_memory": np.broadcast_to(mem.fits, shape),
        "bottleneck": np.broadcast_to(binding, shape),
        "best_gamma": best_gamma,
    }
