"""Multi-token prediction (MTP) as speculative decoding: the model's own MTP module drafts, on the target's layout.

DeepSeek-V3/R1 checkpoints carry one MTP module: one more transformer block of the same architecture (MLA attention
and a MoE layer with the same experts' shapes) that shares the embedding and output head with the model. As a draft
it runs on the target's GPUs and layout (expert parallelism and data-parallel attention included), at the target's
weight precision, one drafted token per step; the target verifies the draft as in physics.md section 5. The
module's 2 d_model x d_model input projection (0.1 B parameters, under 1% of the module) is not counted.
"""

from __future__ import annotations

from dataclasses import replace

from roofline_opt.physics.specs import ModelSpec

MTP_MODELS = frozenset({"deepseek-v3"})
"""Cards whose checkpoints carry a multi-token-prediction module (DeepSeek-V3/R1: one module, config
``num_nextn_predict_layers: 1``)."""

MTP_DRAFT = "mtp"
"""The draft name that asks for the model's own MTP module (``--draft mtp``)."""

MTP_SUFFIX = "-mtp"
"""The suffix of the MTP module's model name (``mtp_module``)."""


def is_mtp_draft(name: str) -> bool:
    """Whether a draft name is the model's own MTP module: ``mtp`` as asked, or the module's name."""
    return name == MTP_DRAFT or name.endswith(MTP_SUFFIX)


def mtp_module(model: ModelSpec) -> ModelSpec:
    """The draft model of ``model``'s MTP module: one layer of its (MoE) architecture and one output head."""
    return replace(
        model,
        name=f"{model.name}{MTP_SUFFIX}",
        n_layers=1,
        n_dense_layers=0,
        tie_embeddings=True,
        source=f"one MTP block of {model.name} (shares its embedding and output head)",
    )
