"""Frozen input types: model architectures, accelerators and physics presets, with unit-named fields.

Naming conventions used across the package: T = tensor-parallel degree, P = pipeline degree, E = expert-parallel
degree (``ep``), B = batch (sequences decoded together by one instance), S = tokens per sequence per step,
C = context length already in the KV cache, gamma = speculative draft length. Bytes are bytes, times seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

WEIGHT_BITS = (16, 8, 4)
"""Weight precisions the tool knows; an accelerator lists a FLOP rate for those it runs."""


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer as the roofline model sees it (physics.md section 2).

    ``d_ff`` is the width of one expert's feed-forward block (of the whole block for dense models);
    ``dense_layer_d_ff`` is the width of the first ``n_dense_layers`` layers of a MoE model (DeepSeek style).
    ``kv_lora_rank > 0`` marks multi-head latent attention (MLA): the KV cache keeps ``kv_lora_rank +
    qk_rope_head_dim`` values per token per layer.
    """

    name: str
    d_model: int
    d_ff: int
    n_layers: int
    n_q_heads: int
    group_size: int
    d_head: int
    vocab: int
    n_experts: int = 1
    n_active_experts: int = 1
    m_in: int = 2
    m_out: int = 1
    parallel_attention: bool = False
    tie_embeddings: bool = False
    n_shared_experts: int = 0
    n_dense_layers: int = 0
    dense_layer_d_ff: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    q_lora_rank: int = 0
    v_head_dim: int = 0
    source: str = ""

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 1

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0


@dataclass(frozen=True)
class GpuSpec:
    """One accelerator: dense FLOP/s per weight precision, HBM, scale-up domain and network, rental price.

    intra/inter_bytes_per_s are the all-reduce bandwidths the NCCL model uses inside and across scale-up domains
    (the notebook's 9e11/4 and 5e10/2 for H100: half the per-direction link bandwidth). The hop latencies are
    extra seconds a collective pays per call for the path its ranks take (0 in the catalog; set from a cluster graph).
    """

    name: str
    flop_per_s_by_bits: dict[int, float] = field(hash=False)
    hbm_bytes: float
    hbm_bytes_per_s: float
    scaleup_gpus: int
    intra_bytes_per_s: float
    inter_bytes_per_s: float
    usd_per_hour: float
    kernel_launch_s: float = 4e-6
    intra_hop_latency_s: float = 0.0
    inter_hop_latency_s: float = 0.0
    display_name: str = ""
    source: str = ""
    price_basis: str = ""
    price_date: str = ""
    price_source: str = ""

    def supports(self, weight_bits: int) -> bool:
        return self.flop_per_s_by_bits.get(weight_bits) is not None

    @property
    def usd_per_s(self) -> float:
        return self.usd_per_hour / 3600.0


@dataclass(frozen=True)
class NcclProtocol:
    """NCCL tuning-model constants of one protocol (physics.md section 4)."""

    name: str
    bandwidth_factor: float
    per_rank_s: float
    per_log2_node_s: float
    base_s: float


NCCL_PROTOCOLS = (
    NcclProtocol("LL", 0.5, 0.6e-6, 5e-6, 6.8e-6),
    NcclProtocol("LL128", 0.95, 1.25e-6, 8.5e-6, 14e-6),
    NcclProtocol("Simple", 1.0, 28e-6, 28e-6, 0.0),
)


@dataclass(frozen=True)
class Preset:
    """Physics settings. ``paper`` reproduces the reference notebook; ``default`` is the realistic one.

    flop_efficiency / hbm_efficiency: fraction of peak sustained. memory_check: "aggregate" (the notebook's
    N x HBM >= weights + KV) or "per_device" (each device's shard of weights, KV cache and activations within
    ``usable_hbm_fraction`` of its HBM). paper_qkv_quirk: omit the activation-byte factor on the QKV output term as
    the notebook does. integer_tp_2d: 2-D TP factors T = t1 x t2 into integers instead of sqrt(T) x sqrt(T).
    kv_split_by_kv_heads: per-device KV cache is split across at most kv_heads TP ranks (replicated beyond).
    network_latency_factor / allreduce_time_factor: sensitivity knobs on collective latency and bandwidth time.
    merge_parallel_attention_allreduce: models with parallel attention (PaLM, Falcon, GPT-J) reduce attention and
    feed-forward outputs in one 1-D all-reduce per layer instead of two (the notebook does not model this).
    expert_load_imbalance: with data-parallel attention, the busiest GPU's expert tokens over the mean (>= 1).
    """

    name: str
    flop_efficiency: float = 1.0
    hbm_efficiency: float = 1.0
    memory_check: str = "aggregate"
    usable_hbm_fraction: float = 1.0
    paper_qkv_quirk: bool = True
    integer_tp_2d: bool = False
    kv_split_by_kv_heads: bool = False
    network_latency_factor: float = 1.0
    allreduce_time_factor: float = 1.0
    kernel_launch_factor: float = 1.0
    merge_parallel_attention_allreduce: bool = False
    activation_bytes: float = 2.0
    expert_load_imbalance: float = 1.0
    protocols: tuple[NcclProtocol, ...] = field(default=NCCL_PROTOCOLS)

    def at_peak(self) -> Preset:
        """These settings at 100% of peak FLOP/s and HBM bandwidth: the roofline as an upper bound."""
        if self.flop_efficiency == 1.0 and self.hbm_efficiency == 1.0:
            return self
        return replace(self, name=f"{self.name} at peak", flop_efficiency=1.0, hbm_efficiency=1.0)


PAPER = Preset(name="paper")
DEFAULT = Preset(
    name="default",
    flop_efficiency=0.70,
    hbm_efficiency=0.75,
    memory_check="per_device",
    usable_hbm_fraction=0.90,
    paper_qkv_quirk=False,
    integer_tp_2d=True,
    kv_split_by_kv_heads=True,
    merge_parallel_attention_allreduce=True,
)
PRESETS = {p.name: p for p in (PAPER, DEFAULT)}
