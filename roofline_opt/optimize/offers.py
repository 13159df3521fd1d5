"""What a question offers: its discrete choices checked, and the defaults that fill those not given.

Today's serving defaults (``modern_defaults``): a model card's native weight precision (FP8 for DeepSeek-V3/R1),
and for a MoE model expert parallelism (``MOE_EP_DEGREES`` dividing its experts) with data-parallel attention; under
the paper preset the defaults stay the reference notebook's (16-bit weights, EP 1, no DP attention).
"""

from __future__ import annotations

from roofline_opt import checks
from roofline_opt.errors import InvalidInput
from roofline_opt.optimize.space import MAX_CHOICES, MAX_DEGREE, MOE_EP_DEGREES
from roofline_opt.physics.specs import WEIGHT_BITS, ModelSpec


def modern_defaults(preset: str) -> bool:
    """Whether a question gets today's serving defaults (the card's native precision, EP and DP attention for MoE):
    every preset but the paper's, whose defaults stay the reference notebook's (16-bit weights, no EP)."""
    return preset != "paper"


def default_ep_degrees(model: ModelSpec, preset: str) -> tuple[int, ...]:
    """EP degrees offered when none are given: 1, and for a MoE model each of MOE_EP_DEGREES dividing its experts."""
    if not (model.is_moe and modern_defaults(preset)):
        return (1,)
    return (1, *(ep for ep in MOE_EP_DEGREES if model.n_experts % ep == 0))


def default_dp_attention(model: ModelSpec, ep_degrees: tuple[int, ...], preset: str) -> bool:
    """Data-parallel attention is offered unasked to a MoE model offered an EP degree > 1 dividing its experts."""
    groups = [ep for ep in ep_degrees if ep > 1 and model.n_experts % ep == 0]
    return bool(model.is_moe and groups and modern_defaults(preset))


def weight_bits_offered(
    weight_bits, suffix_bits: int | None, native_bits: int | None = None, field: str = "weight_bits"
) -> tuple[int, ...]:
    """Checked weight precisions; not given: the name's suffix, else the card's native precision, else 16."""
    if weight_bits is None:
        return (suffix_bits or native_bits or 16,)
    values = checks.items(field, weight_bits)
    bits = checks.once_each(field, tuple(checks.choice(field, b, WEIGHT_BITS) for b in values))
    if suffix_bits is not None and bits != (suffix_bits,):
        got = ", ".join(map(str, values))
        msg = f"must agree with the model name's {suffix_bits}-bit suffix (or drop the suffix). Got {got} instead."
        raise InvalidInput(field, msg)
    return bits


def ep_degrees_offered(model: ModelSpec, ep_degrees) -> tuple[int, ...]:
    """Checked EP degrees: 1 only for a dense model."""
    offered = degrees("ep_degrees", ep_degrees)
    if not model.is_moe and offered != (1,):
        msg = f"must be 1 for the dense model {model.name} (expert parallelism needs experts). Got {offered} instead."
        raise InvalidInput("ep_degrees", msg)
    return offered


def dp_attention_offered(model: ModelSpec, dp_attention: bool | None, ep_degrees: tuple[int, ...], preset: str) -> bool:
    """Data-parallel attention needs a MoE model and an EP degree > 1 dividing its experts (None: offered if so)."""
    if dp_attention is None:
        return default_dp_attention(model, ep_degrees, preset)
    if not dp_attention:
        return False
    if not model.is_moe:
        msg = f"needs a MoE model (experts to spread over the GPUs); {model.name} is dense. Got on instead."
        raise InvalidInput("dp_attention", msg)
    if not [ep for ep in ep_degrees if ep > 1 and model.n_experts % ep == 0]:
        msg = f"needs `ep_degrees` with a degree > 1 dividing {model.n_experts} experts (e.g. 8,16,32). Got none."
        raise InvalidInput("dp_attention", msg)
    return True


def degrees(field: str, values) -> tuple[int, ...]:
    """Checked degrees (one or a list, each given once), sorted."""
    given = tuple(checks.positive_int(field, v, maximum=MAX_DEGREE) for v in checks.items(field, values))
    out = tuple(sorted(checks.once_each(field, given)))
    if not out:
        raise InvalidInput(field, "must list at least one degree. Got none instead.")
    if len(out) > MAX_CHOICES:
        raise InvalidInput(field, f"must list at most {MAX_CHOICES} degrees. Got {len(out):,} instead.")
    return out
