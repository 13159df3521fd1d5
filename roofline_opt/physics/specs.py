"""Frozen input types: model architectures, accelerators and physics presets, with unit-named fields.

Naming conventions used across the package: T = tensor-parallel degree, P = pipeline degree, E = expert-parallel
degree (``ep``), B = batch (sequences decoded together by one instance), S = tokens per sequence per step,
C = context length already in the KV cache, gamma = speculative draft length. Bytes are bytes, times seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

WEIGHT_BITS = (16, 8, 4)
"""Weight precisions the tool knows; an accelerator lists a FLOP rate for those it runs."""
SCALEUP_TOPOLOGIES = ("switch", "mesh")
"""How a scale-up domain joins its GPUs (``GpuSpec.scaleup_topology``)."""


@dataclass(frozen=True)
class BlockScale:
    """A block-scaled 4-bit format: one ``scale_bits`` scale shared by every ``block_values`` consecutive weights."""

    block_values: int
    scale_bits: int
    source: str

    @property
    def bits_per_value(self) -> float:
        """Scale bits each weight carries on top of its own 4 bits."""
        return self.scale_bits / self.block_values


FP4_FORMATS = {
    "nvfp4": BlockScale(
        16,
        8,
        "NVIDIA, 'Introducing NVFP4 for Efficient and Accurate Low-Precision Inference' (developer.nvidia.com blog, "
        "2025-06): an FP8 (E4M3) scale per 16-value micro-block plus one FP32 scale per tensor, '3.5x' smaller than "
        "FP16 (16 / 4.5 bits)",
    ),
    "mxfp4": BlockScale(
        32,
        8,
        "OCP Microscaling Formats (MX) Specification v1.0 (2023-09), section 5: MXFP4 = 32 FP4 (E2M1) elements "
        "sharing one 8-bit E8M0 scale",
    ),
}
"""The block-scaled FP4 formats an accelerator's 4-bit weights may use (``GpuSpec.fp4_format``)."""


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

    def tp_splits_heads(self, tp: int) -> bool:
        """Whether ``tp`` tensor-parallel ranks each take a whole number of the attention's query heads, as engines
        require (``Preset.tp_divides_attention_heads``)."""
        return self.n_q_heads % tp == 0


WEIGHT_GROUPS = ("qkv", "out", "embedding", "routed_ffn", "shared_expert", "dense_layer_ffn")
"""Parameter groups a checkpoint may store at different precisions (``MixedPrecision``): the attention's input
projections (MLA's q/kv down and up projections, GQA's QKV) and its output projection, the embedding and output head,
the routed experts' feed-forward blocks (a dense model's feed-forward block, counted as its one expert), the shared
experts and the dense feed-forward layers of a MoE model (DeepSeek's first layers)."""

MIXED_PRECISION_FAMILIES = ("mla_moe", "all")
"""Architecture families a ``MixedPrecision`` may apply to."""


@dataclass(frozen=True)
class MixedPrecision:
    """Bits per parameter of each weight group (``WEIGHT_GROUPS``) of a quantized checkpoint family.

    Applies to models of architecture ``family`` (``MIXED_PRECISION_FAMILIES``: "mla_moe", multi-head latent
    attention with routed experts, the DeepSeek-V3 family; "all", every model) served at ``weight_bits``; a group's
    bits of 0 are ``weight_bits``. A group kept wider is stored at its own bits (memory, bytes read per step) and its
    GEMMs run at the tensor-core rate of those bits, its activations not being quantized either. ``source`` says which
    checkpoints it describes. ``fp4_scale_bits_per_value``: the block scales' bits each 4-bit weight carries besides
    its own (``BlockScale.bits_per_value``; set per accelerator by ``evaluator.weight_precision``).
    """

    weight_bits: int
    family: str
    qkv_bits: int = 0
    out_bits: int = 0
    embedding_bits: int = 0
    routed_ffn_bits: int = 0
    shared_expert_bits: int = 0
    dense_layer_ffn_bits: int = 0
    source: str = ""
    fp4_scale_bits_per_value: float = 0.0

    def __post_init__(self) -> None:
        if self.family not in MIXED_PRECISION_FAMILIES:
            raise ValueError(f"family must be one of {', '.join(MIXED_PRECISION_FAMILIES)}, not {self.family!r}")

    def bits(self, group: str) -> int:
        """Bits per parameter of ``group`` (one of ``WEIGHT_GROUPS``)."""
        return getattr(self, f"{group}_bits") or self.weight_bits

    def bytes_per_param(self, group: str) -> float:
        """Bytes each parameter of ``group`` occupies in HBM and is read at: its bits, plus a 4-bit group's block
        scales."""
        bits = self.bits(group)
        return (bits + (self.fp4_scale_bits_per_value if bits == 4 else 0.0)) / 8.0

    def applies(self, model: ModelSpec, weight_bits: int) -> bool:
        """Whether a checkpoint of ``model`` at ``weight_bits`` is of this family."""
        in_family = self.family == "all" or (model.is_mla and model.is_moe)
        return weight_bits == self.weight_bits and in_family

    @property
    def uniform(self) -> bool:
        """Every group at ``weight_bits``."""
        return all(self.bits(g) == self.weight_bits for g in WEIGHT_GROUPS)


NVFP4_MLA_MOE = MixedPrecision(
    4,
    "mla_moe",
    qkv_bits=16,
    embedding_bits=16,
    source=(
        "NVIDIA's NVFP4 DeepSeek-R1 checkpoints quantize the experts' and dense layers' GEMMs and keep the rest in "
        "BF16: exclude_modules of nvidia/DeepSeek-R1-FP4's hf_quant_config.json lists lm_head and every layer's "
        "self_attn* (NVIDIA/TensorRT-LLM#5766 prints it; NVIDIA/TensorRT-Model-Optimizer#150: the attention "
        "projections are stored in BF16) and the MTP layer (model.layers.61*); the embedding is no Linear and stays "
        "BF16. nvidia/DeepSeek-R1-0528-FP4-v2, the checkpoint InferenceX runs (SemiAnalysisAI/InferenceX "
        "configs/nvidia-master.yaml @843c6254f), 'additionally quantizes the wo module in attention layers' "
        "(https://huggingface.co/nvidia/DeepSeek-R1-0528-FP4-v2): o_proj at 4 bits, the q/kv projections BF16. AMD's "
        "Quark MXFP4 checkpoints of DeepSeek-architecture models are 'block-scaled FP4 for MoE expert weights and BF16 "
        "for attention' (sgl-project/sglang#21529); amd/DeepSeek-R1-0528-MXFP4-Preview's own config was not read, "
        "and its shared experts (BF16 in the Quark models of #21529) are taken at 4 bits."
    ),
)
"""The 4-bit checkpoints of DeepSeek-V3/R1 as published (``MixedPrecision.source``)."""


@dataclass(frozen=True)
class GpuSpec:
    """One accelerator: dense FLOP/s per weight precision, HBM, scale-up domain and network, rental price.

    intra/inter_bytes_per_s are the all-reduce bandwidths the NCCL model uses inside and across scale-up domains
    (the notebook's 9e11/4 and 5e10/2 for H100: half the per-direction link bandwidth). The hop latencies are
    extra seconds a collective pays per call for the path its ranks take (0 in the catalog; set from a cluster graph).
    hbm_bytes is the memory the device exposes (nvidia-smi / rocm-smi total). The ``notebook_*`` fields hold the
    reference notebook's figures where they differ from the vendor's (0 or empty: the same); presets with
    ``notebook_hardware`` (``paper``) use them (``in_notebook``).

    What the card measures beyond the vendor's sheet (docs/physics/accelerators.md; each used only under its Preset
    setting): ``scaleup_topology`` is how the scale-up domain joins its GPUs, ``"switch"`` (NVSwitch: every GPU's whole
    link bandwidth reaches any peer) or ``"mesh"`` (AMD Infinity Fabric: a direct link to each of the other
    ``scaleup_gpus - 1`` GPUs, so a collective among r of them uses r - 1 of those links);
    ``scaleup_link_efficiency`` the share of the scale-up links' bandwidth an all-reduce achieves (measured bus
    bandwidth over the links' per-direction peak); ``achievable_hbm_fraction`` / ``achievable_flop_fraction`` the
    share of the nominal HBM bandwidth / dense matrix FLOP rate the best measured kernels reach (1.0: no sourced
    measurement, the nominal figure). ``fp4_format`` is the block-scaled format (``FP4_FORMATS``) of the 4-bit
    checkpoints the accelerator runs, whose scales add to every 4-bit weight's bytes ("": none stated, 4 bits flat).
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
    notebook_hbm_bytes: float = 0.0
    notebook_hbm_bytes_per_s: float = 0.0
    notebook_flop_per_s_by_bits: dict[int, float] = field(default_factory=dict, hash=False)
    scaleup_topology: str = "switch"
    scaleup_link_efficiency: float = 1.0
    achievable_hbm_fraction: float = 1.0
    achievable_flop_fraction: float = 1.0
    fp4_format: str = ""

    def in_notebook(self) -> GpuSpec:
        """This accelerator with the reference notebook's figures wherever the card gives them (itself if none)."""
        if not (self.notebook_hbm_bytes or self.notebook_hbm_bytes_per_s or self.notebook_flop_per_s_by_bits):
            return self
        return replace(
            self,
            hbm_bytes=self.notebook_hbm_bytes or self.hbm_bytes,
            hbm_bytes_per_s=self.notebook_hbm_bytes_per_s or self.hbm_bytes_per_s,
            flop_per_s_by_bits=dict(self.notebook_flop_per_s_by_bits or self.flop_per_s_by_bits),
            notebook_hbm_bytes=0.0,
            notebook_hbm_bytes_per_s=0.0,
            notebook_flop_per_s_by_bits={},
        )

    def with_figures(self, flop_per_s_by_bits: dict[int, float], **fields) -> GpuSpec:
        """This accelerator with figures replaced (a hypothetical part), in its notebook figures alike where it has
        them, so a preset with ``notebook_hardware`` sees the replaced figures too."""
        notebook: dict = {}
        for name in ("hbm_bytes", "hbm_bytes_per_s"):
            if name in fields and getattr(self, f"notebook_{name}"):
                notebook[f"notebook_{name}"] = fields[name]
        if self.notebook_flop_per_s_by_bits:
            notebook["notebook_flop_per_s_by_bits"] = {**self.notebook_flop_per_s_by_bits, **flop_per_s_by_bits}
        flops = {**self.flop_per_s_by_bits, **flop_per_s_by_bits}
        return replace(self, flop_per_s_by_bits=flops, **fields, **notebook)

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


@dataclass(frozen=True)
class KernelCounts:
    """Serial GPU kernels per layer of one step, by architecture family (collectives are timed by the network term).

    A layer runs its attention block's kernels then its feed-forward block's, each kernel costing the accelerator's
    ``kernel_launch_s``. The counts are those of the most fused public engine, so that they stay a lower bound:
    TensorRT-LLM's DeepSeek-R1 decode layer (TensorRT-LLM docs/source/blogs/tech_blog/blog1_Pushing_Latency_Boundaries
    _Optimizing_DeepSeek-R1_Performance_on_NVIDIA_B200_GPUs.md, "Everything in One Diagram"): Fuse_A GEMM, grouped q/kv
    RMSNorm, UQ_QR GEMM, UK batched GEMM, KV concat + RoPE, MLA generation kernel, UV batched GEMM, WO GEMM = 8 for MLA;
    router GEMM, top-k, two grouped expert GEMMs = 4 for a routed MoE block (the shared expert runs on a side stream;
    the two all-reduce + RMSNorm kernels are collectives). A GQA block is QKV GEMM, generation attention (RoPE and KV
    append inside it, as TensorRT-LLM's masked-MHA generation kernel does) and output GEMM = 3 (an engine with a
    separate RoPE/KV-append kernel, as in TensorRT-LLM's context path, runs 4); a dense feed-forward block is its two
    GEMMs (gate-up with the activation in its epilogue, down) = 2, the paper's count. SGLang's unfused
    DeepseekV2AttentionMLA.forward_absorb (python/sglang/srt/models/deepseek_v2.py) runs about 20 kernels for the MLA
    block alone (separate FP8 activation quantisation per GEMM, copies into q/k buffers, two-stage Triton decode).
    """

    gqa_attention: int = 3
    mla_attention: int = 8
    dense_ffn: int = 2
    moe_ffn: int = 4


NCCL_PROTOCOLS = (
    NcclProtocol("LL", 0.5, 0.6e-6, 5e-6, 6.8e-6),
    NcclProtocol("LL128", 0.95, 1.25e-6, 8.5e-6, 14e-6),
    NcclProtocol("Simple", 1.0, 28e-6, 28e-6, 0.0),
)


KV_MEMORY_RULE_KINDS = ("fraction_of_total", "fraction_of_free_after_weights")
"""How an engine sizes its KV cache (``KvMemoryRule.kind``)."""


@dataclass(frozen=True)
class KvMemoryRule:
    """How a serving engine sizes its KV cache on each device, as the bytes weights, KV cache and activations may
    take there (the per-device memory check's capacity; affine in nothing but the layout, so memory stays affine in
    the batch).

    ``kind``:
    - ``"fraction_of_total"``: weights, activations and the KV cache share ``fraction`` of the device's memory, less
      ``reserve``: capacity = fraction x HBM - reserve (vLLM's ``gpu_memory_utilization``; SGLang's
      ``mem_fraction_static`` = (HBM - its reserved memory) / HBM, i.e. fraction 1 and SGLang's reserve);
    - ``"fraction_of_free_after_weights"``: the KV cache gets ``fraction`` of the memory still free once weights,
      activations and the reserve are in place: KV <= fraction x (HBM - reserve - weights - activations), i.e.
      capacity = weights + fraction x (HBM - reserve - weights) (TensorRT-LLM's ``free_gpu_memory_fraction``). The
      activations are counted whole against that capacity, not at ``fraction``: a decode step's activations are
      ~1e-4 of the KV cache per sequence, so the check is conservative by (1 - fraction) x activations.

    reserve = ``reserve_bytes`` + ``reserve_bytes_per_instance_gpu`` x the instance's GPUs, plus
    ``large_device_reserve_bytes`` on devices of at least ``large_device_hbm_bytes`` (0 and 0: one reserve for every
    device; SGLang's defaults grow with the device's memory). The device itself still
    bounds the result: the check's capacity is the smaller of this and HBM x ``usable_hbm_fraction`` less the
    preset's reserve. Each engine's values and their sources: ``VLLM_KV_MEMORY_RULE``, ``SGLANG_KV_MEMORY_RULE``,
    ``TRTLLM_KV_MEMORY_RULE``.
    """

    kind: str
    fraction: float
    reserve_bytes: float = 0.0
    reserve_bytes_per_instance_gpu: float = 0.0
    large_device_hbm_bytes: float = 0.0
    large_device_reserve_bytes: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in KV_MEMORY_RULE_KINDS:
            raise ValueError(f"kind must be one of {', '.join(KV_MEMORY_RULE_KINDS)}, not {self.kind!r}")

    def capacity_bytes(self, hbm_bytes: float, weights_bytes, n_gpus):
        """Bytes per device weights, KV cache and activations may take under this rule.

        Parameters
        ----------
        hbm_bytes : float
            The device's memory (also what ``large_device_hbm_bytes`` is compared with).
        weights_bytes : float or numpy.ndarray
            Weight bytes on the device (used by ``fraction_of_free_after_weights`` only).
        n_gpus : int or numpy.ndarray
            GPUs of the instance (the per-GPU share of the reserve).

        Returns
        -------
        float or numpy.ndarray
            The capacity, broadcast over ``n_gpus`` (and ``weights_bytes`` where the rule reads it).
        """
        reserve = self.reserve_bytes + self.reserve_bytes_per_instance_gpu * n_gpus
        if hbm_bytes >= self.large_device_hbm_bytes:
            reserve = reserve + self.large_device_reserve_bytes
        if self.kind == "fraction_of_total":
            return self.fraction * hbm_bytes - reserve
        return weights_bytes + self.fraction * (hbm_bytes - reserve - weights_bytes)


@dataclass(frozen=True)
class Preset:
    """Physics settings. ``paper`` reproduces the reference notebook; ``default`` is the realistic one.

    flop_efficiency / hbm_efficiency: fraction of peak sustained. memory_check: "aggregate" (the notebook's
    N x HBM >= weights + KV) or "per_device" (each device's shard of weights, KV cache and activations within
    ``usable_hbm_fraction`` of its HBM less a fixed reserve: ``memory_reserve_bytes`` per device plus
    ``memory_reserve_bytes_per_instance_gpu`` for each GPU of the instance; their sources: ``DEFAULT_MEMORY_*``).
    kv_memory_rule: how the engine sizes its KV cache (``KvMemoryRule``), which lowers the per-device check's
    capacity to what the engine gives weights, KV cache and activations (the aggregate check ignores it); None = the
    device's memory less the reserve (above).
    paper_qkv_quirk: omit the activation-byte factor on the QKV output term as the notebook does.
    integer_tp_2d: 2-D TP factors T = t1 x t2 into integers instead of sqrt(T) x sqrt(T).
    kv_split_by_kv_heads: per-device KV cache is split across at most kv_heads TP ranks (replicated beyond).
    network_latency_factor / allreduce_time_factor: sensitivity knobs on collective latency and bandwidth time.
    merge_parallel_attention_allreduce: models with parallel attention (PaLM, Falcon, GPT-J) reduce attention and
    feed-forward outputs in one 1-D all-reduce per layer instead of two (the notebook does not model this).
    expert_load_imbalance: with data-parallel attention, the busiest GPU's expert tokens over the mean (>= 1).
    kernel_counts: serial kernels per layer by architecture family (``KernelCounts``); None = the notebook's 4 per
    layer for every architecture. per_kernel_class: a step runs its GEMMs, decode attention and prefill attention as
    separate kernels, each class at its own max(memory, compute) (docs/physics/step-structure.md); off = the notebook's
    one max over the whole step. prefill_cycle: aggregated serving runs decode-only steps and, at the rate arrivals
    need, steps carrying one prefill chunk; TPOT is the cycle's mean step and the chunk step the worst inter-token gap
    (off = the notebook-era smearing of B * I / O prompt tokens into every step).
    notebook_hardware: accelerators at the reference notebook's figures (``GpuSpec.in_notebook``), not the vendor's.
    card_scaleup_topology: collectives inside a scale-up domain see the card's ``scaleup_topology``: on a mesh, one
    among r GPUs per domain gets (r - 1) / (scaleup_gpus - 1) of a GPU's link bandwidth (off: every card a switch).
    card_scaleup_link_efficiency: all-reduces inside a domain run at the card's ``scaleup_link_efficiency`` of the
    link bandwidth. card_fp4_block_scales: 4-bit weights carry the block scales of the card's ``fp4_format``
    (``FP4_FORMATS``: NVFP4 0.5, MXFP4 0.25 bits per weight) in memory and in every step's reads (off: 4 bits flat).
    card_achievable_fractions: sustained HBM bandwidth and FLOP/s are the card's achievable fractions
    of its nominal figures times ``hbm_efficiency`` / ``flop_efficiency``, which then read as shares of what the card
    can achieve (docs/physics/accelerators.md says how they compose). ``at_peak`` drops the last two: they are
    measurements of today's kernels and libraries, which an engine may beat; the bound keeps only the nominal peak.
    moe_output_reduced_once: 1-D TP of a MoE layer all-reduces the experts' combined output once, d_model values
    per token, as engines do (the routed experts' weighted sum, plus the shared experts', is formed on each rank
    before one all-reduce: vLLM's FusedMoE ``reduce_results``, vllm/model_executor/layers/fused_moe/
    shared_fused_moe.py); off = the notebook's k * m_out * d_model values, one reduction per active expert.
    speculative_round_host_s: host seconds every draft-and-verify round adds to the GPU's steps, for an engine whose
    speculative loop the GPU waits on (sampling, acceptance, the next round's inputs between the graphs): SGLang's
    EAGLE/MTP worker without the overlap scheduler ("spec v1") pays about 1.96e-3 s per round on DeepSeek-R1, TP8
    Hopper (sgl-project/sglang pull request #12128: 3.644 s -> 3.206 s for 512 tokens at acceptance length 2.296 once
    the round overlaps the host, (3.644 - 3.206) / (512 / 2.296), batch 1, FA3 attention); with the overlap scheduler
    ("spec v2", ``SGLANG_ENABLE_SPEC_V2=1``; SGLang's default from 0.5.13, off before) it is hidden. 0 = none (the
    notebook's and the default's: ``evaluator.speculative_round_host_s``).
    decode_attention_at_kv_precision: decode attention (the tokens a step decodes or verifies, gamma + 1 per sequence
    with a draft, attending over the cached context) runs at the tensor-core rate of the KV cache's precision
    (``evaluator.decode_attention_flop_rate``), not the weights': the kernel multiplies the query by the cached keys
    and values, so its operands are the cache's type, whatever the GEMMs' weights are. DeepSeek's FlashMLA dense
    decoding kernel reads a BF16 cache only and, reading an FP8 cache, "dequantizes the cache to bfloat16 and performs
    attention computation in bfloat16" (deepseek-ai/FlashMLA README.md @066b5ba6, support matrix and "FP8 KV
    Cache"); an 8-bit cache is given the 8-bit rate, the fastest it allows. Prompt (prefill) attention keeps the
    weights' rate: engines prefill MLA in its non-absorbed form, fewer FLOPs than the absorbed form charged here
    (docs/physics/step-structure.md, item 7), and the rate alone would overstate it. Off = the notebook's: decode
    attention at the weights' rate (an FP8 or FP4 model's at the FP8 or FP4 rate).
    tp_ep_moe_all_reduce: expert parallelism inside a 1-D tensor-parallel group (``Layout.ep`` > 1, attention
    tensor-parallel, no data-parallel attention) moves no tokens: after the attention output's all-reduce every rank
    holds all the step's tokens, runs its E / ep experts (each sliced over tp / ep ranks) on the tokens routed to
    them, and the layer's output (routed experts plus shared experts) is all-reduced once over the whole TP group,
    as under plain TP. SGLang without an all-to-all backend (``--moe-a2a-backend none``, the default):
    ``StandardDispatcher.dispatch`` only maps the top-k ids to local experts and ``combine`` returns its input
    (sgl-project/sglang python/sglang/srt/layers/moe/token_dispatcher/standard.py @ 73dce5a0), and
    ``DeepseekV2MoE.forward_normal`` ends with ``tensor_model_parallel_all_reduce`` of the routed plus shared output
    (python/sglang/srt/models/deepseek_v2.py @ 3e4a39ee); TensorRT-LLM without attention DP: "no MoE communication
    is needed" (``CommunicationFactory.create_strategy`` returns None, tensorrt_llm/_torch/modules/fused_moe/
    communication/communication_factory.py @ 03c36d62) and ``Deepseekv3MoE.forward`` all-reduces shared + routed
    output over the TP group (tensorrt_llm/_torch/models/modeling_deepseekv3.py @ a43cf9e3); vLLM uses its
    all-to-all kernels only with data parallelism (``FusedMoEParallelConfig.use_all2all_kernels``: ``dp_size > 1 and
    use_ep``, vllm/model_executor/layers/fused_moe/config.py @ 00c1c6a2). Not modelled: an engine
    run with an all-to-all backend and TP attention (SGLang ``--moe-a2a-backend deepep``/``mori`` without DP
    attention, whose MoE layer reduce-scatters, dispatches, combines and all-gathers). Off = the notebook's: the
    expert output reduced over tp / ep ranks (none at EP = TP) and a dispatch and a combine of k d_model values per
    token over the ep ranks. 2-D TP keeps the notebook's terms either way.
    dp_attention_whole_prompts: a prefill step on a data-parallel-attention group places whole prompts on its ranks,
    so the busiest of G ranks carries ceil(B / G) of its B prompts through attention and the replicated layers
    (``dp_attention``: a request goes whole to one DP rank); off = the even share B / G (one prompt split over the
    group). Decode steps keep the even share either way.
    mixed_precisions: quantized checkpoint families whose weight groups are not all at the weights' bits
    (``MixedPrecision``; ``evaluator.weight_precision`` picks the first that applies to a model and weight bits): the
    groups they keep wider are stored, read and multiplied at their own bits. Empty = every weight at the weight bits
    (the notebook's).
    tp_divides_attention_heads: offer and accept only tensor-parallel degrees that divide the model's query heads
    (``ModelSpec.tp_splits_heads``; data-parallel attention, whose attention runs unsharded on each rank, is exempt):
    engines shard whole heads over the TP ranks and refuse other degrees. vLLM's
    ``ModelConfig.verify_with_parallel_config`` raises "Total number of attention heads (...) must be divisible by
    tensor parallel size" (vllm/config.py, vllm-project/vllm v0.10); LMDeploy's TurboMind asserts ``head_num %
    tensor_para_size == 0`` (lmdeploy/turbomind/deploy/target_model/base.py). Off = the notebook's: any degree, a
    fractional number of heads per rank.
    """

    name: str
    flop_efficiency: float = 1.0
    hbm_efficiency: float = 1.0
    memory_check: str = "aggregate"
    usable_hbm_fraction: float = 1.0
    memory_reserve_bytes: float = 0.0
    memory_reserve_bytes_per_instance_gpu: float = 0.0
    kv_memory_rule: KvMemoryRule | None = None
    paper_qkv_quirk: bool = True
    integer_tp_2d: bool = False
    kv_split_by_kv_heads: bool = False
    network_latency_factor: float = 1.0
    allreduce_time_factor: float = 1.0
    kernel_launch_factor: float = 1.0
    merge_parallel_attention_allreduce: bool = False
    activation_bytes: float = 2.0
    expert_load_imbalance: float = 1.0
    kernel_counts: KernelCounts | None = None
    per_kernel_class: bool = False
    prefill_cycle: bool = False
    notebook_hardware: bool = False
    moe_output_reduced_once: bool = False
    speculative_round_host_s: float = 0.0
    card_scaleup_topology: bool = False
    card_scaleup_link_efficiency: bool = False
    card_achievable_fractions: bool = False
    card_fp4_block_scales: bool = False
    decode_attention_at_kv_precision: bool = False
    dp_attention_whole_prompts: bool = False
    mixed_precisions: tuple[MixedPrecision, ...] = ()
    tp_ep_moe_all_reduce: bool = False
    tp_divides_attention_heads: bool = False
    protocols: tuple[NcclProtocol, ...] = field(default=NCCL_PROTOCOLS)

    def at_peak(self) -> Preset:
        """These settings at 100% of peak FLOP/s, HBM and link bandwidth: the roofline as an upper bound (the
        cards' measured achievable fractions and link efficiencies left out; their topology kept)."""
        measured = self.card_achievable_fractions or self.card_scaleup_link_efficiency
        if self.flop_efficiency == 1.0 and self.hbm_efficiency == 1.0 and not measured:
            return self
        return replace(
            self,
            name=f"{self.name} at peak",
            flop_efficiency=1.0,
            hbm_efficiency=1.0,
            card_achievable_fractions=False,
            card_scaleup_link_efficiency=False,
        )


MIB = 2.0**20
DEFAULT_MEMORY_RESERVE_BYTES = 1536 * MIB
"""Per device, outside weights, KV cache and the computed activations: 512 MiB of constant metadata (CUDA context,
attention-backend workspaces) plus 1 GiB of CUDA-graph buffers (2 MiB per captured batch size up to 512), the terms
of SGLang's own estimate (python/sglang/srt/server_args.py ``_handle_gpu_memory_settings``: reserved_mem = 512 +
1.5 x chunked_prefill_size + 2 x cuda_graph_max_bs + tp x pp / 8 x 1024 MiB, whose prefill-activation term is left
out here because the memory check computes activations). The engines then hand the rest to weights and KV: SGLang's
``mem_fraction_static`` = (weights + KV pool) / capacity = 1 - reserve / capacity; TensorRT-LLM gives
``kv_cache_free_gpu_memory_fraction`` (0.9) of the memory left after weights and activations to the KV cache;
vLLM's ``gpu_memory_utilization`` (0.9) caps the whole of the engine's use at a fraction of the device."""
DEFAULT_MEMORY_RESERVE_BYTES_PER_INSTANCE_GPU = 128 * MIB
"""Communication buffers growing with the instance: SGLang's ``tp_size * pp_size / 8 * 1024`` MiB per device."""

VLLM_KV_MEMORY_RULE = KvMemoryRule("fraction_of_total", 0.9)
"""vLLM: ``gpu_memory_utilization`` (CacheConfig, default 0.9) of the device's total memory holds weights, the
profiled peak activations, the non-torch memory allocated while profiling and the KV cache (vllm-project/vllm
vllm/v1/worker/gpu_worker.py @ 35d5cda123ec28581759b6d34cde8052314fb1e6: ``init_device`` sets requested_memory =
init_snapshot.total_memory x gpu_memory_utilization, the snapshot taken after NCCL is initialised;
``determine_available_memory`` gives the KV cache requested_memory - (weights + torch peak increase + non-torch
increase)). The CUDA context and NCCL buffers (allocated before the snapshot) and the CUDA graphs (captured after the
KV cache, ``compile_or_warm_up_model``) sit in the remaining 10%, so the rule's own reserve is 0; the non-torch
memory the profiling run adds (cuBLAS workspaces and the like) is not modelled (no public figure)."""
SGLANG_LARGE_DEVICE_HBM_BYTES = 160 * 1024 * MIB
"""SGLang's largest memory tier: devices of at least 160 GiB (B200, GB200, MI300X and later) default to
chunked_prefill_size 16384 and cuda_graph_max_bs 512 (server_args.py ``_handle_gpu_memory_settings``: the
``gpu_mem < 160 * 1024`` branch is the H20/H200 tier, ``else`` "B200, MI300"; the same in the PyPI wheels sglang-0.5.6
and sglang-0.5.9)."""
SGLANG_KV_MEMORY_RULE = KvMemoryRule(
    "fraction_of_total",
    1.0,
    reserve_bytes=DEFAULT_MEMORY_RESERVE_BYTES + 1.5 * MIB * 8192,
    reserve_bytes_per_instance_gpu=DEFAULT_MEMORY_RESERVE_BYTES_PER_INSTANCE_GPU,
    large_device_hbm_bytes=SGLANG_LARGE_DEVICE_HBM_BYTES,
    large_device_reserve_bytes=1.5 * MIB * (16384 - 8192),
)
"""SGLang: the KV pool is mem_fraction_static x the memory free after distributed init, less the weights
(rest_memory = available_gpu_memory - total_gpu_memory x (1 - mem_fraction_static), in ModelRunner
``profile_max_num_token``, later ``profile_available_bytes``: read in several stored versions, no one commit), and
the default mem_fraction_static = (device memory - reserved_mem) / device memory
(sgl-project/sglang python/sglang/srt/server_args.py @ 5d2c83e6bb27e91c893e5fc11f6c268790a2a538,
``_handle_gpu_memory_settings``): reserved_mem = 512 MiB (constant metadata) + 1.5 MiB x max(chunked_prefill_size,
2048) (activations of a prefill chunk) + tp x pp / 8 x 1024 MiB + ``reserve_for_graph_mb`` (2 MiB x the decode
graphs' max batch size), at least 10 GiB on devices above 60 GiB. So the weights and KV pool get the device's memory
less that reserve: fraction 1, the default preset's 512 MiB + 1 GiB of CUDA graphs (max batch size 512: SGLang's
default above 160 GiB, and at TP >= 4 from 60 GiB; 256, 0.5 GiB less, below TP 4 on 60-160 GiB) and 128 MiB per GPU
(``DEFAULT_MEMORY_RESERVE_*``), plus 1.5 MiB x 8192 (chunked_prefill_size 8192 on devices of 60-160 GiB) and on
devices of at least 160 GiB a further 1.5 MiB x 8192 = 12 GiB (chunked_prefill_size 16384 there:
``SGLANG_LARGE_DEVICE_HBM_BYTES``). The 10 GiB floor never binds (512 + 1.5 x 8192 MiB alone is 12.5 GiB). Not
modelled: the speculative-decoding, DP-attention, DeepEP and prefill-graph terms, and the post-capture sizing path
(SGLANG_ENABLE_POST_CAPTURE_KV_SIZING) that keeps only 512 MiB + tp x pp / 8 GiB. The activations SGLang keeps
outside the pool are counted against it as well (conservative by a decode step's activations, ~1e-4 of the pool)."""
TRTLLM_KV_MEMORY_RULE = KvMemoryRule(
    "fraction_of_free_after_weights",
    0.9,
    reserve_bytes=DEFAULT_MEMORY_RESERVE_BYTES,
    reserve_bytes_per_instance_gpu=DEFAULT_MEMORY_RESERVE_BYTES_PER_INSTANCE_GPU,
)
"""TensorRT-LLM (PyTorch backend): the KV cache gets free_gpu_memory_fraction (KvCacheConfig, 0.9 when unset) of
the device's total memory less the peak measured in a profiling run of max_num_tokens: weights, activations and the
memory outside torch (NCCL, CUDA graphs) (NVIDIA/TensorRT-LLM tensorrt_llm/_torch/pyexecutor/_util.py @
d8ae02caed59708512e5aa578a09bb09f365bfed: ``KvCacheCreator._get_free_gpu_memory_fraction``, ``estimate_max_tokens``,
``_cal_max_tokens``: available_kv_mem = (total_gpu_memory - peak_memory) x fraction). The memory outside torch is the
default preset's reserve (``DEFAULT_MEMORY_RESERVE_*``: context, CUDA graphs, communication buffers)."""


def sglang_kv_memory_rule(mem_fraction_static: float) -> KvMemoryRule:
    """SGLang's rule when ``--mem-fraction-static`` is given: the weights and the KV pool share that fraction of the
    device's memory, no reserve of SGLang's own (``SGLANG_KV_MEMORY_RULE`` derives its default fraction from that
    reserve). SGLang 0.5.9 (the PyPI wheel sglang-0.5.9) sizes the pool as rest_memory = available_gpu_memory -
    total_gpu_memory x (1 - mem_fraction_static) (sglang/srt/model_executor/model_runner_kv_cache_mixin.py
    ``profile_max_num_token``), total_gpu_memory the memory free once distributed init ends (model_runner.py
    ``init_torch_distributed``, ``init_memory_pool(min_per_gpu_memory)``) and available_gpu_memory what is free once
    the weights are loaded: weights + pool = mem_fraction_static x the memory free after init. That memory is taken as
    the device's whole memory: the CUDA context and NCCL buffers allocated before it are not subtracted (no public
    figure). CUDA graphs and activations live in the remaining 1 - mem_fraction_static."""
    return KvMemoryRule("fraction_of_total", mem_fraction_static)


def trtllm_kv_memory_rule(free_gpu_memory_fraction: float) -> KvMemoryRule:
    """TensorRT-LLM's rule when ``kv_cache_config.free_gpu_memory_fraction`` is given: ``TRTLLM_KV_MEMORY_RULE``
    (the KV cache gets that fraction of the memory free after the profiled peak) at that fraction."""
    return replace(TRTLLM_KV_MEMORY_RULE, fraction=free_gpu_memory_fraction)


PAPER = Preset(name="paper", notebook_hardware=True)
DEFAULT = Preset(
    name="default",
    flop_efficiency=0.70,
    hbm_efficiency=0.75,
    memory_check="per_device",
    memory_reserve_bytes=DEFAULT_MEMORY_RESERVE_BYTES,
    memory_reserve_bytes_per_instance_gpu=DEFAULT_MEMORY_RESERVE_BYTES_PER_INSTANCE_GPU,
    paper_qkv_quirk=False,
    integer_tp_2d=True,
    kv_split_by_kv_heads=True,
    merge_parallel_attention_allreduce=True,
    kernel_counts=KernelCounts(),
    per_kernel_class=True,
    prefill_cycle=True,
    moe_output_reduced_once=True,
    card_scaleup_topology=True,
    card_scaleup_link_efficiency=True,
    card_achievable_fractions=True,
    card_fp4_block_scales=True,
    decode_attention_at_kv_precision=True,
    dp_attention_whole_prompts=True,
    mixed_precisions=(NVFP4_MLA_MOE,),
    tp_ep_moe_all_reduce=True,
    tp_divides_attention_heads=True,
)
PRESETS = {p.name: p for p in (PAPER, DEFAULT)}
