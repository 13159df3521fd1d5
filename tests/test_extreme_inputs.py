"""Extreme but valid inputs still give the enumeration optimum: prices, links, depth and width far from the catalog.

Every case is a small space (TP 1, 2, 4, 8 in both modes, PP 1, 2, batches up to 512) solved under both presets; the
MIP's fastest setup within 1x, 2x and 10x the oracle's cheapest cost, and its cheapest setup at 0.5x and 1x the
oracle's fastest speed, must match the oracle's within the solver's gap (1e-6).
"""

from __future__ import annotations

import dataclasses
import functools

import pytest

from roofline_opt import api, catalog
from roofline_opt.optimize.enumerate import Points, best_point, enumerate_best, feasible_points
from roofline_opt.optimize.queries import cheapest, fastest
from roofline_opt.optimize.space import Question
from roofline_opt.optimize.testing import EXACT_RTOL, assert_same_optimum
from roofline_opt.physics.specs import GpuSpec, ModelSpec

SMALL_SPACE = dict(tp_degrees=(1, 2, 4, 8), pp_degrees=(1, 2), max_batch=512)
BUDGET_FACTORS = (1.0, 2.0, 10.0)
SPEED_FACTORS = (0.5, 1.0)


def h100(**changes) -> GpuSpec:
    return dataclasses.replace(catalog.load_gpu("h100-sxm"), **changes)


def dense(name: str, d_model: int, n_layers: int, n_q_heads: int, group_size: int, d_ff: int, vocab: int) -> ModelSpec:
    """A synthetic Llama-style decoder (gated feed-forward, GQA) with d_head = d_model / heads."""
    return ModelSpec(name, d_model, d_ff, n_layers, n_q_heads, group_size, d_model // n_q_heads, vocab)


ONE_LAYER = dense("one-layer", 4096, 1, 32, 4, 14336, 128256)
TWO_HUNDRED_LAYERS = dense("two-hundred-layers", 4096, 200, 32, 4, 14336, 128256)
TINY = dense("tiny", 256, 4, 4, 1, 1024, 1000)
HUGE = dense("huge", 16384, 120, 128, 8, 65536, 128000)
"""About 520 B parameters (1 TB at 16 bits): fits on 16 H100s, i.e. only at TP 8 x PP 2 in this space."""

MINUSCULE = dense("minuscule", 16, 1, 1, 1, 64, 256)
"""d_model 16, one layer: a step of nanoseconds."""

CASES = {
    "price-0.001-usd-per-hour": ("llama-3-70b", h100(usd_per_hour=0.001), {}),
    "price-1000-usd-per-hour": ("llama-3-70b", h100(usd_per_hour=1000.0), {}),
    "links-1e15-bytes-per-s": ("llama-3-70b", h100(intra_bytes_per_s=1e15, inter_bytes_per_s=1e15), {}),
    "one-layer-model": (ONE_LAYER, h100(), {}),
    "two-hundred-layer-model": (TWO_HUNDRED_LAYERS, h100(), {}),
    "tiny-d-model-256": (TINY, h100(), {}),
    "huge-model-only-at-tp-8": (HUGE, h100(), {}),
    "no-kernel-launch-empty-context": ("llama-3-8b", h100(kernel_launch_s=0.0), {"context": 0}),
    "minuscule-model-no-kernel-launch": (MINUSCULE, h100(kernel_launch_s=0.0), {}),
}
"""name -> (model, accelerator, other question fields)."""
PRESETS = ("default", "paper")


def params(kind: str, factors: tuple[float, ...]) -> list:
    return [pytest.param(case, preset, factor) for case in CASES for preset in PRESETS for factor in factors]


@functools.cache
def setting(case: str, preset: str) -> tuple[Question, Points, float, float]:
    """The question, its feasible points, the oracle's cheapest $/Mtok and fastest tok/s per request."""
    model, gpu, fields = CASES[case]
    q = api.question(model, gpu, preset=preset, **SMALL_SPACE, **fields)
    pts = feasible_points(q)
    cheapest_usd = float(pts.usd_per_mtok[best_point(pts, "cheapest", None)])
    fastest_tok_s = float(1.0 / pts.time_per_token_s[best_point(pts, "fastest", None)])
    return q, pts, cheapest_usd, fastest_tok_s


@pytest.mark.parametrize(("case", "preset", "factor"), params("fastest", BUDGET_FACTORS))
def test_fastest_within_budget_equals_enumeration(case, preset, factor):
    q, pts, cheapest_usd, _ = setting(case, preset)
    budget = cheapest_usd * factor

    mip, oracle = fastest(q, budget), enumerate_best(q, "fastest", budget, pts)

    assert_same_optimum("fastest", mip, oracle, budget, rtol=EXACT_RTOL)


@pytest.mark.parametrize(("case", "preset", "factor"), params("cheapest", SPEED_FACTORS))
def test_cheapest_at_speed_equals_enumeration(case, preset, factor):
    q, pts, _, fastest_tok_s = setting(case, preset)
    speed = fastest_tok_s * factor

    mip, oracle = cheapest(q, speed), enumerate_best(q, "cheapest", speed, pts)

    assert_same_optimum("cheapest", mip, oracle, speed, rtol=EXACT_RTOL)


@pytest.mark.parametrize("preset", PRESETS)
def test_the_huge_model_fits_only_at_tp_8(preset):
    q, pts, _, _ = setting("huge-model-only-at-tp-8", preset)

    assert len(pts.batch) > 0
    assert set(pts.layouts.tp[pts.layout_index]) == {8}


@pytest.mark.parametrize("preset", PRESETS)
def test_a_million_times_the_price_buys_the_same_speed_at_a_million_times_the_cost(preset):
    cheap_q, _, cheap_usd, _ = setting("price-0.001-usd-per-hour", preset)
    dear_q, _, dear_usd, _ = setting("price-1000-usd-per-hour", preset)

    cheap_answer, dear_answer = fastest(cheap_q, 2 * cheap_usd), fastest(dear_q, 2 * dear_usd)

    assert dear_usd == pytest.approx(1e6 * cheap_usd, rel=1e-9)
    assert dear_answer.tok_s_per_request == pytest.approx(cheap_answer.tok_s_per_request, rel=1e-9)
    assert dear_answer.usd_per_mtok == pytest.approx(1e6 * cheap_answer.usd_per_mtok, rel=1e-9)
