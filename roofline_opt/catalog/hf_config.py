"""HuggingFace config.json files (Llama, Mistral, Mixtral, Qwen2, DeepSeek-V3 styles) read into model specs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from roofline_opt import checks
from roofline_opt.catalog.parse import read_json, spec_from_mapping
from roofline_opt.errors import InvalidInput
from roofline_opt.physics.specs import ModelSpec

_GATED_GELU_MODEL_TYPES = frozenset({"gemma", "gemma2", "gemma3", "gemma3_text"})
"""HF model types whose GELU feed-forward is gated (GeGLU, two input matrices) despite a ``gelu*`` activation."""


_GELU_BY_DEFAULT_MODEL_TYPES = frozenset({"falcon", "RefinedWeb", "RefinedWebModel"})
"""HF model types whose config.json may omit the activation although the model uses a plain GELU MLP."""


_MISSING = object()


_NON_ATTENTION_MODEL_TYPES = frozenset(
    {
        "mamba",
        "mamba2",
        "falcon_mamba",
        "jamba",
        "zamba",
        "zamba2",
        "recurrent_gemma",
        "rwkv",
        "rwkv5",
        "rwkv6",
        "nemotron_h",
        "bamba",
        "granitemoehybrid",
        "lfm2",
        "minimax",
        "qwen3_next",
        "falcon_h1",
    }
)
"""HF model types with state-space, recurrent or linear-attention layers: the roofline's per-layer KV cache and
attention traffic would be wrong for them."""


_LAYER_PATTERN_KEYS = ("layer_types", "layers_block_type", "hybrid_override_pattern", "attn_type_list", "block_types")
"""Config keys listing per-layer kinds (sliding vs full attention, mamba vs attention layers)."""


def refuse_unmodelled(cfg: dict[str, Any], where: str) -> None:
    """Refuse, by name, configs whose layers the model would misread: sliding-window attention (the KV cache would be
    overstated), per-layer attention patterns, and state-space / recurrent layers."""
    model_type = cfg.get("model_type")
    if model_type in _NON_ATTENTION_MODEL_TYPES:
        msg = f"is {model_type!r}, with non-attention (state-space or recurrent) layers: not modelled (full attention "
        raise InvalidInput(f"{where}: model_type", msg + "on every layer is assumed); write a YAML card if it fits")
    for key in _LAYER_PATTERN_KEYS:
        kinds = cfg.get(key)
        if isinstance(kinds, list | str) and len(set(kinds if isinstance(kinds, list) else kinds.replace("-", ""))) > 1:
            shown = sorted({str(k) for k in (kinds if isinstance(kinds, list) else kinds)})[:4]
            msg = f"mixes layer kinds ({', '.join(shown)}): only full attention on every layer is modelled"
            raise InvalidInput(f"{where}: {key}", msg)
    window = cfg.get("sliding_window")
    longest = cfg.get("max_position_embeddings")
    in_use = cfg.get("use_sliding_window", True) is not False
    if window and in_use and not (isinstance(longest, int) and window >= longest):
        msg = (
            f"is {window}: attention over a window of {window} tokens keeps fewer keys and values than the full "
            "context this model assumes, so its KV cache would be overstated; not modelled"
        )
        raise InvalidInput(f"{where}: sliding_window", msg)


def _hf_get(cfg: dict[str, Any], where: str, keys: tuple[str, ...], default: Any = _MISSING) -> tuple[str, Any]:
    """(key, value) of the first of ``keys`` set in ``cfg``; ``default`` under the first key, or an error."""
    for key in keys:
        if cfg.get(key) is not None:
            return key, cfg[key]
    if default is _MISSING:
        raise InvalidInput(f"{where}: {keys[0]}", "is missing from the config")
    return keys[0], default


def _hf_int(cfg: dict[str, Any], where: str, keys: tuple[str, ...], default: Any = _MISSING, minimum: int = 1) -> int:
    key, value = _hf_get(cfg, where, keys, default)
    if isinstance(value, str):  # config.json gives numbers as JSON numbers: "4096" is text
        msg = f"must be a JSON number, not text. Got {checks.shown(value)} instead (write it without quotes)."
        raise InvalidInput(f"{where}: {key}", msg)
    return checks.positive_int(f"{where}: {key}", value, minimum=minimum)


def _hf_name(path: Path, cfg: dict[str, Any]) -> str:
    """The model's name: the config's ``_name_or_path``, else its folder (for ``config.json``), else its stem."""
    declared = cfg.get("_name_or_path")
    if isinstance(declared, str) and declared.strip():
        return declared.rstrip("/").split("/")[-1]
    return path.resolve().parent.name if path.name == "config.json" else path.stem


def _hf_attention(cfg: dict[str, Any], where: str, d_model: int, n_q: int) -> dict[str, int]:
    """Head layout: MLA (DeepSeek) latent sizes, or grouped-query heads."""
    if cfg.get("kv_lora_rank") is not None:
        d_head = _hf_int(cfg, where, ("qk_nope_head_dim",))
        return {
            "group_size": 1,
            "d_head": d_head,
            "kv_lora_rank": _hf_int(cfg, where, ("kv_lora_rank",)),
            "qk_rope_head_dim": _hf_int(cfg, where, ("qk_rope_head_dim",)),
            "q_lora_rank": _hf_int(cfg, where, ("q_lora_rank",), default=0, minimum=0),
            "v_head_dim": _hf_int(cfg, where, ("v_head_dim",), default=d_head),
        }
    kv_keys = ("num_key_value_heads", "num_kv_heads", "n_head_kv")
    n_kv = _hf_int(cfg, where, kv_keys, default=1 if cfg.get("multi_query") else n_q)
    if n_q % n_kv:
        msg = f"must divide the number of attention heads ({n_q}). Got {n_kv} instead."
        raise InvalidInput(f"{where}: {kv_keys[0]}", msg)
    return {"group_size": n_q // n_kv, "d_head": _hf_int(cfg, where, ("head_dim",), default=d_model // n_q)}


def _hf_feed_forward(cfg: dict[str, Any], where: str, d_model: int) -> dict[str, int]:
    """Feed-forward widths, experts and the SwiGLU (2, 1) or GELU (1, 1) matrix counts."""
    dense_d_ff = _hf_int(cfg, where, ("intermediate_size", "n_inner", "ffn_hidden_size"), default=4 * d_model)
    n_experts = _hf_int(cfg, where, ("num_local_experts", "n_routed_experts", "num_experts"), default=1)
    default_act = "gelu" if cfg.get("model_type") in _GELU_BY_DEFAULT_MODEL_TYPES else "silu"
    _, act = _hf_get(cfg, where, ("hidden_act", "hidden_activation", "activation_function", "activation"), default_act)
    gated = not str(act).startswith(("gelu", "relu")) or cfg.get("model_type") in _GATED_GELU_MODEL_TYPES
    ff = {"m_in": 2 if gated else 1, "m_out": 1, "d_ff": dense_d_ff, "n_experts": n_experts}
    if n_experts > 1:
        n_dense = _hf_int(cfg, where, ("first_k_dense_replace",), default=0, minimum=0)
        ff |= {
            "d_ff": _hf_int(cfg, where, ("moe_intermediate_size",), default=dense_d_ff),
            "n_active_experts": _hf_int(cfg, where, ("num_experts_per_tok",)),
            "n_shared_experts": _hf_int(cfg, where, ("n_shared_experts",), default=0, minimum=0),
            "n_dense_layers": n_dense,
            "dense_layer_d_ff": dense_d_ff if n_dense else 0,
        }
    return ff


def model_from_hf_config(path: Path) -> ModelSpec:
    """A ModelSpec from a HuggingFace config.json (Llama, Mistral, Mixtral, Qwen2, DeepSeek-V3, GPT-J styles)."""
    cfg = read_json(path)
    if isinstance(cfg.get("text_config"), dict) and "hidden_size" not in cfg:
        cfg = cfg["text_config"]
    where = str(path)
    refuse_unmodelled(cfg, where)
    d_model = _hf_int(cfg, where, ("hidden_size", "n_embd", "d_model"))
    n_q = _hf_int(cfg, where, ("num_attention_heads", "n_head"))
    values = {
        "name": _hf_name(path, cfg),
        "d_model": d_model,
        "n_layers": _hf_int(cfg, where, ("num_hidden_layers", "n_layer", "num_layers")),
        "n_q_heads": n_q,
        "vocab": _hf_int(cfg, where, ("vocab_size",)),
        "parallel_attention": bool(cfg.get("parallel_attn") or cfg.get("model_type") == "gptj"),
        "tie_embeddings": bool(cfg.get("tie_word_embeddings", False)),
        "source": f"HuggingFace config {path}",
        **_hf_attention(cfg, where, d_model, n_q),
        **_hf_feed_forward(cfg, where, d_model),
    }
    return spec_from_mapping(ModelSpec, values, where)
