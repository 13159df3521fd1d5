"""A model's static sizes (physics.md section 2): parameter counts, KV-cache width, attention FLOP per token.

Scalar arithmetic on a ModelSpec, without numpy, so listing the catalog (``roofline-opt models``) need not import it;
the evaluator builds every step's figures on these (``evaluator.model_sizes`` is this function).
"""

from __future__ import annotations

from dataclasses import dataclass

from roofline_opt.physics.specs import ModelSpec


@dataclass(frozen=True)
class ModelSizes:
    """Parameter and per-token sizes derived from a ModelSpec (physics.md section 2)."""

    attn_params_per_layer: float
    qkv_params_per_layer: float
    out_params_per_layer: float
    qkv_out_width: float
    attn_out_in_width: float
    ff_params_per_expert: float
    dense_ff_params: float
    n_dense_layers: int
    n_moe_layers: int
    embedding_params: float
    total_params: float
    active_params: float
    kv_values_per_token_per_layer: float
    kv_heads: float
    attn_flop_per_ctx_token_per_layer: float


def model_sizes(model: ModelSpec) -> ModelSizes:
    """Parameter counts, KV-cache width and attention FLOP of ``model``."""
    d, nq, dh = model.d_model, model.n_q_heads, model.d_head
    if model.is_mla:
        rope, v_dim = model.qk_rope_head_dim, model.v_head_dim or dh
        if model.q_lora_rank:
            q_params = d * model.q_lora_rank + model.q_lora_rank * nq * (dh + rope)
        else:
            q_params = d * nq * (dh + rope)
        qkv_params: float = q_params + d * (model.kv_lora_rank + rope) + model.kv_lora_rank * nq * (dh + v_dim)
        out_params = nq * v_dim * d
        qkv_out_width: float = nq * (dh + rope) + model.kv_lora_rank + rope
        out_in_width = nq * v_dim
        kv_heads = 0.0
        kv_values: float = model.kv_lora_rank + rope
        attn_flop = 2.0 * nq * (model.kv_lora_rank + rope) + 2.0 * nq * model.kv_lora_rank
    else:
        kv_heads = 2.0 * nq / model.group_size
        qkv_out_width = (nq + kv_heads) * dh
        qkv_params = qkv_out_width * d
        out_params = nq * dh * d
        out_in_width = nq * dh
        kv_values = kv_heads * dh
        attn_flop = 4.0 * dh * nq
    ff_expert = (model.m_in + model.m_out) * d * model.d_ff
    n_dense = model.n_dense_layers if model.is_moe else 0
    n_moe = model.n_layers - n_dense
    dense_ff = (model.m_in + model.m_out) * d * (model.dense_layer_d_ff or model.d_ff)
    embedding = (1 if model.tie_embeddings else 2) * model.vocab * d
    attn = qkv_params + out_params
    experts_held = model.n_experts + model.n_shared_experts
    experts_used = model.n_active_experts + model.n_shared_experts
    total = model.n_layers * attn + n_moe * experts_held * ff_expert + n_dense * dense_ff + embedding
    active = model.n_layers * attn + n_moe * experts_used * ff_expert + n_dense * dense_ff + embedding
    return ModelSizes(
        attn_params_per_layer=attn,
        qkv_params_per_layer=qkv_params,
        out_params_per_layer=out_params,
        qkv_out_width=qkv_out_width,
        attn_out_in_width=out_in_width,
        ff_params_per_expert=ff_expert,
        dense_ff_params=dense_ff,
        n_dense_layers=n_dense,
        n_moe_layers=n_moe,
        embedding_params=embedding,
        total_params=total,
        active_params=active,
        kv_values_per_token_per_layer=kv_values,
        kv_heads=kv_heads,
        attn_flop_per_ctx_token_per_layer=attn_flop,
    )


def kv_bytes_per_token(model: ModelSpec, kv_bytes_per_value=2.0):
    """KV-cache bytes one context token occupies across all layers (``kv_bytes_per_value`` = kv_bits / 8)."""
    return model_sizes(model).kv_values_per_token_per_layer * model.n_layers * kv_bytes_per_value
