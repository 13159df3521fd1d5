"""KV-cache precision of a measured row that does not state it: the engine's default for the estimate, the lowest
precision the engine can run on that accelerator for the bound (a bound must hold whatever the row left out).

What the engines document (read 2026-12):

- vLLM ``--kv-cache-dtype``: ``auto`` (the default: the model's data type) or ``fp8`` / ``fp8_e4m3`` / ``fp8_e5m2``
  (docs.vllm.ai, features/quantization/quantized_kvcache; FP8 E5M2 storage on any CUDA GPU, E4M3 with native
  conversion on Hopper, Ada and later and on MI300).
- SGLang ``--kv-cache-dtype``: ``auto`` (the model's data type, BF16), FP8 (``fp8_e5m2``, ``fp8_e4m3``) or FP4
  (docs.sglang.io, advanced_features/quantized_kv_cache; FP4 on Blackwell).
- TensorRT-LLM ``KvCacheConfig(dtype=...)``: ``auto`` takes the checkpoint's setting (the model's data type unless the
  checkpoint was quantized with an FP8 KV cache); FP8 KV cache (Hopper, Ada, Blackwell), INT8 KV cache (Ampere), and
  NVFP4 KV cache on Blackwell (nvidia.github.io/TensorRT-LLM, features/quantization).
- LMDeploy ``quant_policy``: 0 (the default, 16-bit), 8 (INT8 KV) or 4 (INT4 KV).

Engines not listed (NIM, Dynamo and others wrapping the ones above, in-house stacks) take the lowest precision any
listed engine runs on the accelerator.

An InferenceX row whose launch script sets the KV cache is read at that precision instead (``recipes``).
"""

from __future__ import annotations

ENGINE_DEFAULT_KV_BITS = 16
"""Every engine above defaults to the model's own data type (16-bit) for the KV cache."""

ARCHITECTURE = {
    "v100": "volta",
    "a100-80gb": "ampere",
    "l40s": "ada",
    "h100-sxm": "hopper",
    "h200": "hopper",
    "h800": "hopper",
    "gh200": "hopper",
    "b200": "blackwell",
    "gb200": "blackwell",
    "mi300x": "cdna3",
    "mi325x": "cdna3",
    "mi355x": "cdna4",
}
"""Architecture of each catalog accelerator (what the engines' KV formats depend on)."""

LOWEST_KV_BITS = {
    "vLLM": {"ampere": 8, "ada": 8, "hopper": 8, "blackwell": 8, "cdna3": 8, "cdna4": 8},
    "SGLang": {"ampere": 8, "ada": 8, "hopper": 8, "blackwell": 4, "cdna3": 8, "cdna4": 8},
    "TensorRT-LLM": {"ampere": 8, "ada": 8, "hopper": 8, "blackwell": 4},
    "LMDeploy": {"volta": 4, "ampere": 4, "ada": 4, "hopper": 4, "blackwell": 4},
}
"""Lowest KV-cache bits each engine runs per architecture (an architecture it does not list: 16, its default)."""


def engine_of(framework: str) -> str | None:
    """The listed engine a row's framework text names (``"TensorRT-LLM v0.6.1"`` -> ``"TensorRT-LLM"``), else None."""
    low = framework.lower()
    return next((e for e in LOWEST_KV_BITS if e.lower() in low), None)


def lowest_kv_bits(framework: str, gpu_card: str) -> int:
    """The most favourable KV precision the row's engine runs on the accelerator (unknown ones: the lowest any runs)."""
    arch = ARCHITECTURE.get(gpu_card)
    engine = engine_of(framework)
    if engine is not None:
        return (
            LOWEST_KV_BITS[engine].get(arch, ENGINE_DEFAULT_KV_BITS) if arch else min(LOWEST_KV_BITS[engine].values())
        )
    options = [bits for table in LOWEST_KV_BITS.values() for a, bits in table.items() if arch is None or a == arch]
    return min(options, default=ENGINE_DEFAULT_KV_BITS)


def describe(framework: str, gpu_card: str) -> str:
    """Which precisions an unstated KV cache is read as, in words (the row's assumptions column)."""
    engine = engine_of(framework)
    who = f"{engine}'s" if engine else "any listed engine's"
    bound = lowest_kv_bits(framework, gpu_card)
    return (
        f"KV precision not stated: {ENGINE_DEFAULT_KV_BITS}-bit (the engines' default) for the estimate, "
        f"{bound}-bit ({who} lowest on {gpu_card}) for the bound"
    )
