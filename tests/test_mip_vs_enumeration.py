"""The MIP's answer equals brute-force enumeration of the same discrete space, for every query kind."""

from __future__ import annotations

import functools

import pytest

from roofline_opt import api
from roofline_opt.optimize.enumerate import best_point, enumerate_best, feasible_points
from roofline_opt.optimize.queries import cheapest, fastest
from roofline_opt.optimize.testing import assert_same_optimum

QUESTIONS = {
    "llama70b-h100-paper-8k": dict(model="llama-3-70b", gpu="h100-sxm", preset="paper", context=8000),
    "llama8b-a100-default-0": dict(model="llama-3-8b", gpu="a100-80gb", context=0),
    "llama70b-h100-default-100k": dict(model="llama-3-70b", gpu="h100-sxm", context=100_000),
    "mixtral8x22b-h100-paper-1k": dict(model="mixtral-8x22b", gpu="h100-sxm", preset="paper", context=1000),
    "mixtral8x7b-h200-default-ep": dict(model="mixtral-8x7b", gpu="h200", context=8000, ep_degrees=(1, 2, 4)),
    "llama70b-specdec-paper": dict(
        model="llama-3-70b", gpu="h100-sxm", preset="paper", context=1000, draft="llama-3-8b", gamma_max=6
    ),
    "mistral-large-precisions": dict(model="mistral-large-2", gpu="h100-sxm", weight_bits=(16, 8, 4), context=8000),
    "llama70b-three-gpus": dict(
        model="llama-3-70b", gpu=("h100-sxm", "h200", "a100-80gb"), preset="paper", context=8000
    ),
    "llama405b-int8-v100": dict(model="llama-3.1-405b-int8", gpu="v100", preset="paper", context=1000),
    "llama8b-demand-gpu-limit": dict(
        model="llama-3-8b", gpu="h100-sxm", preset="paper", context=1000, demand_tok_s=1e4, max_gpus=64
    ),
    "gpt4-moe-h100": dict(model="gpt-4-paper", gpu="h100-sxm", preset="paper", context=8000),
    "deepseek-v3-h200-fp8": dict(model="deepseek-v3", gpu="h200", weight_bits=8, context=8000, ep_degrees=(1, 8)),
    "deepseek-v3-dp-attention": dict(
        model="deepseek-v3",
        gpu=("h200", "h100-sxm"),
        weight_bits=8,
        context=2000,
        tp_degrees=(8, 16),
        pp_degrees=(1, 2),
        ep_degrees=(1, 8, 16, 32, 64),
        dp_attention=True,
    ),
}
BUDGET_FACTORS = (None, 1.0, 1.02, 1.5, 3.0, 10.0)
SPEED_FACTORS = (None, 1.0, 0.97, 0.7, 0.4)


@functools.cache
def _setting(name: str):
    spec = dict(QUESTIONS[name])
    q = api.question(spec.pop("model"), spec.pop("gpu"), **spec)
    pts = feasible_points(q)
    cheapest_usd = float(pts.usd_per_mtok[best_point(pts, "cheapest", None)])
    fastest_tok_s = float(1.0 / pts.time_per_token_s[best_point(pts, "fastest", None)])
    return q, pts, cheapest_usd, fastest_tok_s


@pytest.mark.parametrize("factor", BUDGET_FACTORS)
@pytest.mark.parametrize("name", QUESTIONS)
def test_fastest_within_budget_equals_enumeration(name, factor):
    q, pts, cheapest_usd, _ = _setting(name)
    budget = None if factor is None else cheapest_usd * factor
    oracle = enumerate_best(q, "fastest", budget, pts)
    assert_same_optimum("fastest", fastest(q, budget), oracle, budget)


@pytest.mark.parametrize("factor", SPEED_FACTORS)
@pytest.mark.parametrize("name", QUESTIONS)
def test_cheapest_at_speed_equals_enumeration(name, factor):
    q, pts, _, fastest_tok_s = _setting(name)
    speed = None if factor is None else fastest_tok_s * factor
    oracle = enumerate_best(q, "cheapest", speed, pts)
    assert_same_optimum("cheapest", cheapest(q, speed), oracle, speed)


def test_enumerate_method_answers_like_the_oracle():
    q, pts, cheapest_usd, _ = _setting("llama70b-h100-paper-8k")
    via_method = fastest(q, 2 * cheapest_usd, method="enumerate")
    assert via_method.setup == enumerate_best(q, "fastest", 2 * cheapest_usd, pts).setup
    assert via_method.method == "enumerate"
