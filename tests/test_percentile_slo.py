"""Percentile TTFT limits: the vectorised queueing functions the tables and fleets use, and queries with
``percentile`` (MIP equal to enumeration, the answer's figures at its load)."""

from __future__ import annotations

import dataclasses
import functools
import json
import math

import numpy as np
import pytest

from roofline_opt import api
from roofline_opt.cli import main
from roofline_opt.errors import InvalidInput
from roofline_opt.optimize.enumerate import best_point, enumerate_best, feasible_points
from roofline_opt.optimize.queries import cheapest, fastest
from roofline_opt.optimize.testing import assert_same_optimum
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics import queueing as qm
from roofline_opt.physics import requests as rq
from roofline_opt.physics import tpot_percentiles as tq


def test_percentile_ttft_of_an_mm1_queue_is_its_exponential_sojourn_time():
    """M/M/1 FCFS: wait + service is exponential of rate mu - lambda, so p99 = ln(100) / (mu - lambda); exponential
    service as 20,000 equally likely classes."""
    service = np.random.default_rng(3).exponential(0.2, 20_000)
    rate = 3.0
    p99 = float(qm.percentile_ttft_s(99.0, np.ones_like(service), service[None, :], service[None, :], rate)[0])
    assert p99 == pytest.approx(math.log(100.0) / (1.0 / 0.2 - rate), rel=0.03)


def test_percentile_ttft_is_elementwise_over_rates_and_servers():
    rates = np.array([0.5, 2.0, 4.0])
    servers = np.array([1, 2, 3])
    together = qm.percentile_ttft_s(90.0, [0.3, 0.7], [0.1, 0.3], [0.15, 0.35], rates, servers, 2.0)
    alone = [
        qm.percentile_ttft_s(90.0, [0.3, 0.7], [0.1, 0.3], [0.15, 0.35], r, c, 2.0)
        for r, c in zip(rates, servers, strict=True)
    ]
    np.testing.assert_allclose(together, np.array(alone), rtol=1e-12)


def test_percentile_ttft_rises_with_the_rate_and_is_infinite_when_unstable():
    rates = np.linspace(0.1, 4.9, 25)
    ttft = qm.percentile_ttft_s(90.0, [1.0], [0.2], [0.25], rates)
    assert np.all(np.diff(ttft) >= 0.0)
    assert ttft[0] == pytest.approx(0.25, rel=1e-9)
    assert math.isinf(float(qm.percentile_ttft_s(90.0, [1.0], [0.2], [0.25], 5.0)))


@pytest.mark.parametrize("percentile", [50.0, 90.0, 99.0])
def test_max_rate_meets_the_limit_and_a_little_more_does_not(percentile):
    limit = 0.6
    rate = float(qm.max_rate_per_s(percentile, limit, [1.0], [0.2], [0.25], 2, 4.0))
    assert 0.0 < rate < 10.0
    assert float(qm.percentile_ttft_s(percentile, [1.0], [0.2], [0.25], rate, 2, 4.0)) <= limit * (1 + 1e-12)
    assert float(qm.percentile_ttft_s(percentile, [1.0], [0.2], [0.25], rate * (1 + 1e-9), 2, 4.0)) > limit


def test_max_rate_is_zero_when_an_idle_queue_misses_the_limit():
    assert float(qm.max_rate_per_s(90.0, 0.2, [1.0], [0.2], [0.25])) == 0.0


def test_burstier_arrivals_lower_the_rate_an_slo_allows():
    poisson, bursty = (float(qm.max_rate_per_s(99.0, 1.0, [1.0], [0.2], [0.25], 1, c)) for c in (1.0, 4.0))
    assert bursty < poisson


# ----------------------------------------------------------------------------------------------- queries

SMALL = dict(tp_degrees=(1, 2, 4), pp_degrees=(1, 2), tp_modes=("1d",), max_batch=256, max_instances=3)
QUESTIONS = {
    "llama8b-agg-disagg-p90-poisson": dict(
        model="llama-3-8b",
        gpu="h100-sxm",
        isl=2000,
        osl=200,
        serving=["agg", "disagg"],
        ttft_ms=300,
        percentile=90,
    ),
    "llama8b-mix-chunks-p99-bursty": dict(
        model="llama-3-8b",
        gpu="h100-sxm",
        workload=((200, 800, 3.0), (3000, 300, 1.0)),
        serving=["agg", "disagg"],
        chunk_tokens=(512, 2048),
        ttft_ms=400,
        percentile=99,
        burstiness=4.0,
    ),
    "llama70b-two-gpus-disagg-p50-demand": dict(
        model="llama-3-70b",
        gpu=["h100-sxm", "h200"],
        isl=4000,
        osl=500,
        serving="disagg",
        ttft_ms=1500,
        percentile=50,
        demand_req_s=8,
        max_gpus=48,
    ),
    "llama8b-agg-disagg-p90-tpot-only": dict(
        model="llama-3-8b",
        gpu="h100-sxm",
        isl=2000,
        osl=200,
        serving=["agg", "disagg"],
        tpot_ms=30,
        percentile=90,
    ),
    "llama8b-agg-p99-tpot": dict(
        model="llama-3-8b",
        gpu="a100-80gb",
        isl=1000,
        osl=500,
        ttft_ms=250,
        tpot_ms=40,
        percentile=99,
        burstiness=2.0,
    ),
}


@functools.cache
def _setting(name: str):
    spec = {**SMALL, **QUESTIONS[name]}
    q = api.question(spec.pop("model"), spec.pop("gpu"), **spec)
    pts = feasible_points(q)
    cheapest_usd = float(pts.usd_per_mtok[best_point(pts, "cheapest", None)])
    fastest_tok_s = float(1.0 / pts.time_per_token_s[best_point(pts, "fastest", None)])
    return q, pts, cheapest_usd, fastest_tok_s


def _limits_met(q, answer) -> None:
    """The answer's TTFT and TPOT at the percentile, at its own load, meet the limits; so do memory, GPUs and
    demand."""
    assert answer.fits_in_memory
    if q.max_ttft_s is not None:
        assert answer.figures["ttft_percentile"] == q.slo_percentile
        assert answer.figures["ttft_s"] <= q.max_ttft_s * (1 + 1e-9)
        assert answer.figures["ttft_s"] >= answer.figures["ttft_no_load_s"] * (1 - 1e-9) or len(q.workload.isl) > 1
    if q.max_tpot_s is not None:
        assert answer.figures["tpot_percentile"] == q.slo_percentile
        assert answer.figures["tpot_s"] <= q.max_tpot_s * (1 + 1e-9)
        assert answer.figures["tpot_mean_s"] == pytest.approx(1.0 / answer.tok_s_per_request, rel=1e-12)
    if q.max_gpus is not None:
        assert answer.setup.unit_gpus * answer.setup.replicas <= q.max_gpus
    if q.demand_tok_s is not None:
        assert answer.figures["throughput_tok_s"] * answer.setup.replicas >= q.demand_tok_s * (1 - 1e-9)


@pytest.mark.parametrize("factor", (None, 1.0, 1.5, 4.0))
@pytest.mark.parametrize("name", QUESTIONS)
def test_fastest_at_a_percentile_equals_enumeration(name, factor):
    q, pts, cheapest_usd, _ = _setting(name)
    budget = None if factor is None else cheapest_usd * factor
    oracle = enumerate_best(q, "fastest", budget, pts)
    answer = fastest(q, budget)
    assert_same_optimum("fastest", answer, oracle, budget)
    assert_same_optimum("fastest", oracle, answer, budget)
    _limits_met(q, answer)


@pytest.mark.parametrize("factor", (None, 1.0, 0.7, 0.4))
@pytest.mark.parametrize("name", QUESTIONS)
def test_cheapest_at_a_percentile_equals_enumeration(name, factor):
    q, pts, _, fastest_tok_s = _setting(name)
    speed = None if factor is None else fastest_tok_s * factor
    oracle = enumerate_best(q, "cheapest", speed, pts)
    answer = cheapest(q, speed)
    assert_same_optimum("cheapest", answer, oracle, speed)
    assert_same_optimum("cheapest", oracle, answer, speed)
    _limits_met(q, answer)


def test_the_percentile_questions_choose_both_serving_modes():
    chosen = set()
    for name in QUESTIONS:
        q, _, cheapest_usd, fastest_tok_s = _setting(name)
        for answer in (fastest(q, cheapest_usd * 1.5), cheapest(q, fastest_tok_s * 0.7), cheapest(q, None)):
            chosen.add(answer.setup.serving)
    assert chosen == {"agg", "disagg"}


def test_an_aggregated_answers_ttft_is_the_queueing_models_at_its_own_request_rate():
    """The tables price an aggregated row at the rate whose mean decode batch is its batch (Little's law): the scalar
    model, given that rate, finds that batch again and the same percentile TTFT."""
    q, *_ = _setting("llama8b-agg-p99-tpot")
    answer = cheapest(q, None)
    s = answer.setup
    assert s.serving == "agg"
    layout = ev.Layout.of(s.tp, s.tp_2d, s.pp, q.context, 1, s.ep, s.kv_bits)
    gpu = q.gpus[0]
    arrivals = qm.Arrivals(answer.figures["requests_per_s"], q.arrival_scv)
    model = qm.aggregated_ttft(
        q.model, gpu, q.preset, s.weight_bits, layout, q.workload, s.chunk_tokens, arrivals, (99.0,)
    )
    assert model["decode_batch"] == pytest.approx(s.batch, rel=1e-6)
    assert float(model["ttft_s"][0]) == pytest.approx(answer.figures["ttft_s"], rel=1e-6)
    assert answer.figures["prefill_utilisation"] == pytest.approx(model["utilisation"], rel=1e-6)


def test_a_disaggregated_answers_prefill_queue_is_within_the_limit_at_its_rate():
    q, *_ = _setting("llama70b-two-gpus-disagg-p50-demand")
    answer = cheapest(q, None)
    s = answer.setup
    assert s.serving == "disagg" and s.prefill_batch == 1
    p_layout = ev.Layout.of(s.prefill_tp, s.prefill_tp_2d, s.prefill_pp, 0.0, 1, 1, s.kv_bits)
    d_layout = ev.Layout.of(s.tp, s.tp_2d, s.pp, q.context, 1, s.ep, s.kv_bits)
    p_gpu = next(g for g in q.gpus if g.name == s.prefill_gpu)
    d_gpu = next(g for g in q.gpus if g.name == s.gpu)
    arrivals = qm.Arrivals(answer.figures["requests_per_s"], q.arrival_scv)
    model = qm.disaggregated_ttft(
        q.model,
        q.preset,
        s.weight_bits,
        q.workload,
        (p_gpu, p_layout, s.prefill_instances),
        (d_gpu, d_layout),
        arrivals,
        (50.0,),
    )
    assert float(model["ttft_s"][0]) == pytest.approx(answer.figures["ttft_s"], rel=1e-6)
    assert float(model["ttft_s"][0]) <= q.max_ttft_s * (1 + 1e-9)
    assert answer.figures["prefill_utilisation"] == pytest.approx(model["utilisation"], rel=1e-9)


def test_a_percentile_limit_lowers_the_load_an_aggregated_instance_may_carry():
    """At no load the same limit admits a larger batch: queueing is what the percentile adds."""
    spec = {**SMALL, **QUESTIONS["llama8b-agg-p99-tpot"]}
    at_load = api.question(spec.pop("model"), spec.pop("gpu"), **spec)
    no_load = dataclasses.replace(at_load, slo_percentile=None)
    assert cheapest(at_load, None).setup.batch < cheapest(no_load, None).setup.batch


def test_a_tpot_percentile_lowers_the_load_below_the_steady_state_limits():
    """The same TPOT limit on the steady-state mean admits a larger batch: the percentile is what the window's
    spread adds (one layout, TP 1)."""
    q = dataclasses.replace(
        _setting("llama8b-agg-disagg-p90-tpot-only")[0], serving=("agg",), tp_degrees=(1,), pp_degrees=(1,)
    )
    at_load, mean_only = cheapest(q, None), cheapest(dataclasses.replace(q, slo_percentile=None), None)
    assert at_load.setup.batch < mean_only.setup.batch
    assert at_load.figures["tpot_mean_s"] < 1.0 / mean_only.tok_s_per_request <= q.max_tpot_s * (1 + 1e-9)


def test_an_answers_tpot_is_the_window_models_at_its_batch():
    q, *_ = _setting("llama8b-agg-disagg-p90-tpot-only")
    for answer in (cheapest(q, None), fastest(q, None)):
        s = answer.setup
        layout = ev.Layout.of(s.tp, s.tp_2d, s.pp, q.context, 1, s.ep, s.kv_bits)
        args = (90.0, q.model, q.gpus[0], q.preset, s.weight_bits, layout, float(s.batch), q.workload)
        if s.serving == "agg":
            expected = tq.aggregated_percentile_tpot_s(*args, s.chunk_tokens)
        else:
            expected = tq.decode_percentile_tpot_s(*args)
        assert answer.figures["tpot_s"] == pytest.approx(float(expected), rel=1e-12)


def test_an_aggregated_answer_limited_on_tpot_alone_reports_its_ttft_at_the_percentile_at_its_load():
    """No TTFT limit, a TPOT percentile: the TTFT reported is that percentile at the answer's load (not the idle
    chunk schedule), with the schedule beside it as ttft_no_load_s."""
    q = dataclasses.replace(_setting("llama8b-agg-disagg-p90-tpot-only")[0], serving=("agg",))
    answer = fastest(q, None)
    s = answer.setup
    layout = ev.Layout.of(s.tp, s.tp_2d, s.pp, q.context, 1, s.ep, s.kv_bits)
    args = (q.model, q.gpus[0], q.preset, s.weight_bits, layout, float(s.batch), q.workload, s.chunk_tokens)
    at_load = qm.aggregated_percentile_ttft_s(90.0, *args)
    assert answer.figures["ttft_s"] == pytest.approx(float(at_load), rel=1e-12)
    assert answer.figures["ttft_no_load_s"] == pytest.approx(float(rq.ttft_aggregated_s(*args)), rel=1e-12)
    assert answer.figures["ttft_s"] > answer.figures["ttft_no_load_s"]
    assert answer.figures["ttft_percentile"] == 90.0
    assert answer.figures["prefill_utilisation"] == pytest.approx(float(qm.aggregated_utilisation(*args)), 1e-12)


def test_cli_tpot_percentile_headline_and_json(capsys):
    args = ["cheapest", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--isl", "2000", "--osl", "200"]
    args += ["--tpot-ms", "40", "--percentile", "90", "--tp-degrees", "1", "--pp-degrees", "1", "--json"]
    assert main(args) == 0
    record = json.loads(capsys.readouterr().out)
    record = record[0] if isinstance(record, list) else record
    assert record["tpot_percentile"] == 90.0 and record["tpot_ms"] <= 40.0 * (1 + 1e-9)
    assert record["tpot_mean_ms"] == pytest.approx(1e3 / record["tok_s_per_request"], rel=1e-12)
    assert main(args[:-1]) == 0
    assert "TPOT p90 <= 40 ms" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        (dict(percentile=90, tpot_ms=30, max_utilisation=0.8), "max_utilisation"),
        (dict(percentile=95, ttft_ms=300), "percentile"),
        (dict(percentile=90), "percentile"),
        (dict(burstiness=2.0, ttft_ms=300), "burstiness"),
        (dict(percentile=90, ttft_ms=300, max_utilisation=0.8), "max_utilisation"),
        (dict(percentile=90, ttft_ms=300, burstiness=-1.0), "burstiness"),
    ],
)
def test_bad_percentile_questions_name_the_parameter(kwargs, field):
    with pytest.raises(InvalidInput) as err:
        api.question("llama-3-8b", "h100-sxm", isl=1000, osl=100, **kwargs)
    assert err.value.field == field


def test_an_arrival_trace_gives_the_burstiness(tmp_path):
    trace = tmp_path / "trace.csv"
    times = np.cumsum(np.random.default_rng(0).gamma(0.25, 4.0, 400))
    trace.write_text("arrival_s,isl,osl\n" + "".join(f"{t},1000,100\n" for t in times))
    q = api.question("llama-3-8b", "h100-sxm", isl=1000, osl=100, ttft_ms=300, percentile=90, arrival_trace=trace)
    assert q.arrival_scv == pytest.approx(qm.Arrivals.of_times(times).scv, rel=1e-12)
    assert q.arrival_scv > 2.0


def test_cli_percentile_headline_and_json(capsys):
    args = ["cheapest", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--isl", "2000", "--osl", "200"]
    args += ["--ttft-ms", "300", "--percentile", "90", "--burstiness", "2", "--tp-degrees", "1,2", "--pp-degrees", "1"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "TTFT p90 <= 300 ms" in out and "arrivals of c_a^2 2)" in out
    assert main([*args, "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    record = record[0] if isinstance(record, list) else record
    assert record["ttft_percentile"] == 90.0 and record["arrival_scv"] == 2.0
    assert record["ttft_ms"] <= 300.0 * (1 + 1e-9)


def test_cli_bad_percentile_is_one_line_exit_2(capsys):
    args = ["cheapest", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--isl", "2000", "--osl", "200"]
    assert main([*args, "--ttft-ms", "300", "--percentile", "95"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--percentile" in err[0]


QUEUEING_WARNING = "queueing: the chunk budget is up to"


@pytest.mark.parametrize(("osl", "warned"), [(200, True), (50, False)])
def test_an_aggregated_percentile_answer_says_where_its_ttft_is_optimistic(osl, warned, capsys):
    """docs/physics/queueing.md: 200 output tokens were checked to 50% of the chunk budget (this answer: 72%), fewer
    than 100 everywhere measured."""
    flags = ["--model", "llama-3-8b", "--gpu", "h100-sxm", "--isl", "2000", "--osl", str(osl), "--ttft-ms", "300"]
    assert main(["cheapest", *flags, "--percentile", "90", "--tp-degrees", "1", "--pp-degrees", "1"]) == 0
    text = capsys.readouterr().out
    assert (QUEUEING_WARNING in text) is warned
    if warned:
        assert f"with {osl} output tokens" in text


def test_the_checked_utilisation_falls_with_the_output_length():
    from roofline_opt.report.validity import checked_utilisation

    assert [checked_utilisation(o) for o in (50, 99, 100, 199, 200, 400)] == [None, None, 0.7, 0.7, 0.5, 0.5]
