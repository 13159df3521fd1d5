"""The MIP equals enumeration at the edges: targets exactly at a setup's figure, prices over 300 decades, absurd but
valid card values, and ties (the cheapest answer is the fastest of the equally cheap setups)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hardening import SMALL_QUERY, assert_one_line, run
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_properties import FLAT_COST_PLATEAU, questions

from roofline_opt import api, catalog
from roofline_opt.cli import EXIT_BAD_INPUT, EXIT_OK
from roofline_opt.optimize.enumerate import enumerate_best, feasible_points
from roofline_opt.optimize.queries import cheapest, fastest
from roofline_opt.optimize.space import TARGET_RTOL, Question, within_budget
from roofline_opt.optimize.testing import EXACT_RTOL, assert_same_optimum

EDGES = settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
SMALL_SPACE = dict(tp_degrees=(1, 2, 4, 8), pp_degrees=(1, 2), max_batch=128, context=1000)
QUERIES = {"fastest": fastest, "cheapest": cheapest}


def edge_target(q: Question, kind: str, point: int, edge: str) -> float:
    """A feasible point's own figure (its cost for fastest, its speed for cheapest), computed by the evaluator:
    exactly it, exactly at the edge of the target tolerance, or one ulp on the accepting side."""
    pts = feasible_points(q)
    assume(len(pts.batch) > 0)
    i = point % len(pts.batch)
    figure = float(pts.usd_per_mtok[i] if kind == "fastest" else 1.0 / pts.time_per_token_s[i])
    if edge == "tolerance":
        return figure / (1 + TARGET_RTOL) if kind == "fastest" else figure / (1 - TARGET_RTOL)
    if edge == "ulp":
        return float(np.nextafter(figure, -np.inf if kind == "fastest" else np.inf))
    return figure


def assert_methods_agree(q: Question, kind: str, target: float | None) -> None:
    oracle = enumerate_best(q, kind, target)
    assert oracle is not None  # every target here is some setup's own figure (or none)
    assert_same_optimum(kind, QUERIES[kind](q, target), oracle, target, rtol=EXACT_RTOL)


@pytest.mark.parametrize(
    ("kind", "target", "space"),
    [
        (
            "cheapest",
            158.39369713454386,
            dict(
                model="qwen2.5-72b",
                gpu="mi355x",
                weight_bits=[8],
                tp_degrees=[4, 8, 16],
                pp_degrees=[1],
                tp_modes=["2d"],
                max_batch=16,
                max_gpus=16,
                context=4000,
            ),
        ),
        (
            "fastest",
            0.3283103018607268,
            dict(
                model="mistral-7b",
                gpu=("a100-80gb", "b200"),
                weight_bits=[16, 8, 4],
                tp_degrees=[1, 8],
                pp_degrees=[1],
                tp_modes=["1d"],
                max_batch=64,
                context=8000,
            ),
        ),
    ],
    ids=["cheapest-qwen-mi355x", "fastest-mistral-a100-b200"],
)
def test_the_issues_targets_at_the_tolerance_edge_get_the_oracles_answer(kind, target, space):
    ask = api.cheapest if kind == "cheapest" else api.fastest
    goal = {api.TARGETS[kind]: target}
    mip, oracle = ask(method="mip", **goal, **space), ask(method="enumerate", **goal, **space)

    assert mip["usd_per_mtok"] == oracle["usd_per_mtok"]
    assert mip["tok_s_per_request"] == oracle["tok_s_per_request"]


@EDGES
@given(
    q=questions(allow_cluster=False),
    kind=st.sampled_from(("fastest", "cheapest")),
    point=st.integers(0, 1 << 30),
    edge=st.sampled_from(("exact", "tolerance", "ulp")),
)
def test_a_target_exactly_at_a_setups_figure_equals_enumeration(q, kind, point, edge):
    assert_methods_agree(q, kind, edge_target(q, kind, point, edge))


def priced(q: Question, exponents: list[float]) -> Question:
    """The question with each accelerator at $10^exponent per GPU-hour."""
    gpus = tuple(dataclasses.replace(g, usd_per_hour=10.0**e) for g, e in zip(q.gpus, exponents, strict=False))
    return dataclasses.replace(q, gpus=gpus)


@EDGES
@given(
    q=questions(allow_cluster=False, allow_demand=False),
    exponents=st.lists(st.floats(-14.0, 300.0), min_size=2, max_size=2),
    kind=st.sampled_from(("fastest", "cheapest")),
    point=st.integers(0, 1 << 30),
    edge=st.sampled_from(("none", "exact", "tolerance")),
)
def test_prices_over_three_hundred_decades_equal_enumeration(q, exponents, kind, point, edge):
    q = priced(q, exponents)
    assume(len(feasible_points(q).batch) > 0)
    target = None if edge == "none" else edge_target(q, kind, point, edge)

    assert_methods_agree(q, kind, target)


@pytest.mark.parametrize("price", [2.5e-12, 4e-14, 2.5e13, 1e300])
@pytest.mark.parametrize("kind", ["fastest", "cheapest"])
@pytest.mark.parametrize("model", ["llama-3-8b", "mixtral-8x7b"])
def test_the_issues_prices_equal_enumeration(model, kind, price):
    h100 = dataclasses.replace(catalog.load_gpu("h100-sxm"), usd_per_hour=price)
    q = api.question(model, h100, **SMALL_SPACE)

    assert_methods_agree(q, kind, None)


@pytest.mark.parametrize(
    "card",
    [dict(hbm_bytes=1e25), dict(hbm_bytes=1e300), dict(intra_hop_latency_s=1e30), dict(inter_hop_latency_s=1e30)],
    ids=["hbm-1e25", "hbm-1e300", "intra-hop-1e30-s", "inter-hop-1e30-s"],
)
@pytest.mark.parametrize("kind", ["fastest", "cheapest"])
def test_absurd_but_valid_card_values_equal_enumeration(card, kind):
    q = api.question("llama-3-8b", dataclasses.replace(catalog.load_gpu("h100-sxm"), **card), **SMALL_SPACE)

    assert_methods_agree(q, kind, None)


def answer_fields(out: str) -> dict:
    """The JSON answer's setup and figures (not how it was found: method, solver status, gap, bounds, time)."""
    how = ("solve_seconds", "method", "mip_gap", "solver_status")
    return {k: v for k, v in json.loads(out).items() if k not in how and not k.startswith("bound_")}


@pytest.mark.parametrize("price", ["2.5e-12", "2.5e13", "1e300"])
@pytest.mark.parametrize("command", ["fastest", "cheapest"])
def test_a_price_override_far_from_the_catalog_is_answered_like_enumeration(capsys, command, price):
    flags = [command, *SMALL_QUERY, "--usd-per-gpu-hour", f"h100-sxm={price}", "--json"]
    code, mip, err = run(capsys, *flags)
    _, oracle, _ = run(capsys, *flags, "--method", "enumerate")

    assert (code, err) == (EXIT_OK, "")
    assert answer_fields(mip) == answer_fields(oracle)


def test_a_price_override_above_the_card_cap_is_refused_naming_it(capsys):
    code, _, err = run(capsys, "fastest", *SMALL_QUERY, "--usd-per-gpu-hour", "h100-sxm=1e301")

    assert_one_line(err, code, EXIT_BAD_INPUT, "--usd-per-gpu-hour: h100-sxm", "<= 1e+300")


def test_the_cheapest_answer_is_the_fastest_of_the_equally_cheap_setups():
    """On a compute-bound plateau many batches cost the least; both methods answer the fastest of them."""
    pts = feasible_points(FLAT_COST_PLATEAU)
    equally_cheap = within_budget(pts.usd_per_mtok, float(pts.usd_per_mtok.min()))
    fastest_of_them = float((1.0 / pts.time_per_token_s[equally_cheap]).max())

    mip, oracle = cheapest(FLAT_COST_PLATEAU), enumerate_best(FLAT_COST_PLATEAU, "cheapest", None)

    assert int(equally_cheap.sum()) > 1
    assert oracle.tok_s_per_request == pytest.approx(fastest_of_them, rel=1e-12)
    assert mip.setup == oracle.setup


DISAGG_TIE = dict(
    model="llama-3-8b",
    gpu=("h100-sxm", "h200"),
    weight_bits=[16],
    tp_degrees=[1, 2],
    pp_degrees=[1],
    tp_modes=["1d"],
    max_batch=32,
    isl=1000,
    osl=50,
    serving="disagg",
    max_instances=3,
)
"""Disaggregated units of different speeds cost the same (the unit's prefill side limits them): before ties went to
the faster setup, the MIP's frontier started at a slower one."""


def test_a_disaggregated_frontier_starts_at_the_fastest_of_the_cheapest_setups():
    q = api.question(**DISAGG_TIE)
    pts = feasible_points(q)
    equally_cheap = within_budget(pts.usd_per_mtok, float(pts.usd_per_mtok.min()))

    mip, oracle = api.frontier_frame(q, points=5), api.frontier_frame(q, points=5, method="enumerate")

    assert mip["tok_s_per_request"].iloc[0] == pytest.approx(float((1.0 / pts.time_per_token_s[equally_cheap]).max()))
    for column in ("usd_per_mtok", "tok_s_per_request"):
        assert mip[column].to_numpy() == pytest.approx(oracle[column].to_numpy(), rel=EXACT_RTOL)
