"""Costs beyond the float range: a price near the card cap with step times of seconds is refused by both methods
alike, in one line naming the price and the largest one that can be answered, and that price is answered exactly."""

from __future__ import annotations

import dataclasses
import re
import warnings

import pytest
from hardening import assert_one_line, run

from roofline_opt import api, catalog
from roofline_opt.cli import EXIT_BAD_INPUT
from roofline_opt.errors import InvalidInput
from roofline_opt.optimize.cost_range import MAX_USD_PER_MTOK
from roofline_opt.optimize.enumerate import enumerate_best
from roofline_opt.optimize.queries import cheapest, fastest
from roofline_opt.optimize.testing import EXACT_RTOL, assert_same_optimum

SPACE = dict(tp_degrees=(1, 2), pp_degrees=(1, 2), max_batch=32, context=1000)
SLOW_DEAR = dict(usd_per_hour=1e300, intra_hop_latency_s=1e30, inter_hop_latency_s=1e30)
"""A card at the price cap whose collectives take 1e30 s: multi-GPU layouts cost ~1e335 $/Mtok."""


def card(**fields) -> object:
    return dataclasses.replace(catalog.load_gpu("h100-sxm"), name="slow-dear", **fields)


def slow_dear_card_file(folder) -> object:
    """The h100-sxm card with SLOW_DEAR's fields, as a YAML file."""
    path = folder / "slow-dear.yaml"
    text = (catalog.packaged_root() / "instances" / "gpus" / "h100-sxm.yaml").read_text()
    for key, value in SLOW_DEAR.items():
        text = re.sub(rf"(?m)^{key}: .*$", f"{key}: {value:g}", text)
    path.write_text(text)
    return path


def refusal(call) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warning on the way to the refusal
        with pytest.raises(InvalidInput) as info:
            call()
    assert info.value.field == "usd_per_gpu_hour"
    return str(info.value)


@pytest.mark.parametrize("kind", ["fastest", "cheapest"])
def test_both_methods_refuse_a_question_whose_costs_exceed_the_float_range_alike(kind):
    q = api.question("llama-3-70b", card(**SLOW_DEAR), **SPACE)
    query = {"fastest": fastest, "cheapest": cheapest}[kind]

    by_mip = refusal(lambda: query(q, None))
    by_enumeration = refusal(lambda: enumerate_best(q, kind, None))

    assert by_mip == by_enumeration
    assert "slow-dear at $1e+300 per GPU-hour" in by_mip


def test_the_refusal_names_a_price_that_is_answered_exactly_by_both_methods():
    message = refusal(lambda: fastest(api.question("llama-3-70b", card(**SLOW_DEAR), **SPACE), None))
    limit = float(re.search(r"at most \$([0-9.e+-]+) per GPU-hour", message).group(1))
    q = api.question("llama-3-70b", card(**{**SLOW_DEAR, "usd_per_hour": limit}), **SPACE)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        answer, oracle = fastest(q, None), enumerate_best(q, "fastest", None)

    assert_same_optimum("fastest", answer, oracle, None, rtol=EXACT_RTOL)
    assert answer.figures["usd_per_mtok"] <= MAX_USD_PER_MTOK * (1 + 1e-9)


def test_a_price_at_the_card_cap_with_ordinary_step_times_is_still_answered():
    q = api.question("llama-3-70b", card(usd_per_hour=1e300), **SPACE)

    answer = cheapest(q, None)

    assert_same_optimum("cheapest", answer, enumerate_best(q, "cheapest", None), None, rtol=EXACT_RTOL)
    assert 1e299 < answer.figures["usd_per_mtok"] < MAX_USD_PER_MTOK


def test_evaluate_refuses_a_setup_whose_cost_exceeds_the_float_range():
    message = refusal(lambda: api.evaluate("llama-3-70b", card(**SLOW_DEAR), tp=1, pp=2, batch=2))

    assert "a price of at most" in message


def test_the_cli_refuses_it_in_one_line_naming_the_price_option(capsys, tmp_path):
    path = slow_dear_card_file(tmp_path)

    code, out, err = run(capsys, "cheapest", "--model", "llama-3-70b", "--gpu", str(path), "--max-batch", "32")

    assert out == ""
    assert_one_line(err, code, EXIT_BAD_INPUT, "--usd-per-gpu-hour:", "a price of at most $")


def test_the_evaluate_command_refuses_such_a_setup_in_one_line(capsys, tmp_path):
    path = slow_dear_card_file(tmp_path)

    flags = ["--model", "llama-3-70b", "--gpu", str(path), "--tp", "1", "--pp", "2", "--batch", "2"]
    code, out, err = run(capsys, "evaluate", *flags)

    assert out == ""
    assert_one_line(err, code, EXIT_BAD_INPUT, "--usd-per-gpu-hour:", "a price of at most $")
