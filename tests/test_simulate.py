"""Serving at load: the queueing model of the prefill path against the discrete-event simulator, and the simulator's
own contract (conserves requests, deterministic with a seed, the evaluator's figures at no load)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from roofline_opt import catalog
from roofline_opt.cli import main
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics import queueing as qm
from roofline_opt.physics import requests as rq
from roofline_opt.physics.specs import DEFAULT
from roofline_opt.simulate import arrivals, engine, summary

H100 = catalog.load_gpu("h100-sxm")
LLAMA8 = catalog.resolve_model("llama-3-8b", "model")[0]
PHYSICS = engine.Physics(LLAMA8, DEFAULT, 16)
UTILISATIONS = (0.3, 0.5, 0.7, 0.9)
TOLERANCE = 0.10


def _layout(context: float) -> ev.Layout:
    return ev.Layout.of(1, False, 1, context, 1, 1, 16)


PREFILL = _layout(0.0)


def _disagg(reqs: arrivals.Requests, x: int, decode_slots: int = 64) -> engine.Served:
    return engine.disaggregated(PHYSICS, (H100, PREFILL, 1, x), (H100, _layout(2005.0), decode_slots, x), reqs)


def _percentiles(served: engine.Served) -> np.ndarray:
    return np.percentile(served.ttft_s, [90.0, 99.0])


# ----------------------------------------------------------------------------------------------- queueing formulas


def test_erlang_c_is_the_utilisation_with_one_server_and_one_third_for_two_servers_at_offered_load_one():
    assert qm.erlang_c(1, 0.7) == pytest.approx(0.7)
    assert qm.erlang_c(2, 1.0) == pytest.approx(1.0 / 3.0)


@pytest.mark.parametrize("servers", [1, 3])
def test_tail_decay_is_exact_for_exponential_service_and_poisson_arrivals(servers):
    """M/M/c: P(W > t) = C exp(-(c mu - lambda) t); Lundberg's root must be c mu - lambda."""
    rng = np.random.default_rng(1)
    service = rng.exponential(0.2, 20_000)
    weights = np.ones_like(service)
    rate = 0.6 * servers / 0.2
    decay = qm.tail_decay_per_s(servers, weights, service, qm.Arrivals(rate))
    assert decay == pytest.approx(servers / 0.2 - rate, rel=0.05)


def test_mm1_percentile_is_the_closed_form():
    """M/M/1 wait: P(W > t) = rho exp(-(mu - lambda) t), so its p99 is ln(rho / 0.01) / (mu - lambda)."""
    p99 = qm.response_percentiles([1.0], [0.0], 0.8, 0.5, (99.0,))[0]
    assert p99 == pytest.approx(math.log(0.8 / 0.01) / 0.5, rel=1e-9)


def test_gamma_gaps_have_the_asked_mean_and_squared_coefficient_of_variation():
    gaps = qm.Arrivals(5.0, 3.0).gaps_s(np.random.default_rng(0), 400_000)
    assert gaps.mean() == pytest.approx(0.2, rel=0.01)
    assert gaps.var() / gaps.mean() ** 2 == pytest.approx(3.0, rel=0.03)


def test_evenly_spaced_arrivals_below_one_service_time_apart_never_wait():
    """D/D/1 at utilisation 0.8: nobody waits, in the simulator and in the model."""
    service = float(rq.prefill_step(LLAMA8, H100, DEFAULT, 16, PREFILL, 1.0, 2000).step_time_s)
    process = qm.Arrivals(0.8 / service, 0.0)
    reqs = arrivals.draw(process, rq.Workload.single(2000, 2), 200, 0)
    served = _disagg(reqs, 1)
    no_load = _disagg(arrivals.Requests(np.arange(3) * 60.0, np.full(3, 2000), np.full(3, 2)), 1).ttft_s[0]
    assert served.ttft_s == pytest.approx(no_load, rel=1e-9)
    model = qm.disaggregated_ttft(
        LLAMA8, DEFAULT, 16, rq.Workload.single(2000, 2), (H100, PREFILL, 1), (H100, _layout(2001.0)), process
    )
    assert model["ttft_s"] == pytest.approx(no_load, rel=1e-6)


def test_an_unstable_prefill_queue_has_no_finite_percentile():
    service = float(rq.prefill_step(LLAMA8, H100, DEFAULT, 16, PREFILL, 1.0, 2000).step_time_s)
    out = qm.disaggregated_ttft(
        LLAMA8,
        DEFAULT,
        16,
        rq.Workload.single(2000, 10),
        (H100, PREFILL, 1),
        (H100, _layout(2005.0)),
        qm.Arrivals(1.01 / service),
    )
    assert np.all(np.isinf(out["ttft_s"]))


# ----------------------------------------------------------------------------------------------- model vs simulator


@pytest.mark.parametrize("x", [1, 2])
@pytest.mark.parametrize("utilisation", UTILISATIONS)
def test_disaggregated_queueing_model_is_within_10_percent_of_the_simulator_p90_p99(x, utilisation):
    """x prefill instances at batch 1, Poisson arrivals, 2,000-token prompts: p90 and p99 TTFT, 4 seeds x 10,000."""
    workload = rq.Workload.single(2000, 2)
    service = float(rq.prefill_step(LLAMA8, H100, DEFAULT, 16, PREFILL, 1.0, 2000).step_time_s)
    process = qm.Arrivals(utilisation * x / service)
    model = qm.disaggregated_ttft(LLAMA8, DEFAULT, 16, workload, (H100, PREFILL, x), (H100, _layout(2001.0)), process)
    sim = np.mean([_percentiles(_disagg(arrivals.draw(process, workload, 10_000, s), x)) for s in range(4)], axis=0)
    assert model["utilisation"] == pytest.approx(utilisation)
    assert np.abs(model["ttft_s"][1:] / sim - 1.0).max() < TOLERANCE


@pytest.mark.parametrize("x", [1, 2])
@pytest.mark.parametrize("utilisation", UTILISATIONS)
def test_disaggregated_queueing_model_is_within_10_percent_of_the_simulator_under_bursty_arrivals(x, utilisation):
    """As above with gamma gaps of c_a^2 = 4 (the wait from Lindley's recursion on a lattice), 4 seeds x 20,000 (the
    grid of benchmarks/queueing.py): before, the model was 12-40% low at rho 0.3-0.5."""
    workload = rq.Workload.single(2000, 2)
    service = float(rq.prefill_step(LLAMA8, H100, DEFAULT, 16, PREFILL, 1.0, 2000).step_time_s)
    process = qm.Arrivals(utilisation * x / service, 4.0)
    model = qm.disaggregated_ttft(LLAMA8, DEFAULT, 16, workload, (H100, PREFILL, x), (H100, _layout(2001.0)), process)
    sim = np.mean([_percentiles(_disagg(arrivals.draw(process, workload, 20_000, s), x)) for s in range(4)], axis=0)
    assert np.abs(model["ttft_s"][1:] / sim - 1.0).max() < TOLERANCE


def _aggregated_rate(layout, workload, chunk, utilisation) -> float:
    """The arrival rate at which the queueing model's chunk budget is ``utilisation`` busy (bisection)."""
    lo, hi = 1e-3, 1e3
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        u = qm.aggregated_ttft(LLAMA8, H100, DEFAULT, 16, layout, workload, chunk, qm.Arrivals(mid))["utilisation"]
        lo, hi = (mid, hi) if u < utilisation else (lo, mid)
    return lo


def _known_miss(reason: str):
    return pytest.mark.xfail(strict=True, reason=f"{reason} (docs/physics/queueing.md)")


AGG_CASES = [
    *(pytest.param(3000, 50, 1024, u, id=f"3000-over-chunk-1024-u{u}") for u in (0.3, 0.5, 0.7, 0.8)),
    *(pytest.param(1500, 50, 2048, u, id=f"1500-in-chunk-2048-u{u}") for u in (0.5, 0.7, 0.8)),
    pytest.param(
        1500,
        50,
        2048,
        0.3,
        id="1500-in-chunk-2048-u0.3",
        marks=_known_miss("p90 14% low: the exponential tail puts the wait near 0, one prompt's residual is flatter"),
    ),
    pytest.param(
        2000,
        200,
        2048,
        0.8,
        id="2000-200-in-chunk-2048-u0.8",
        marks=_known_miss("p90/p99 40-60% low: long congested spells at the busy period's batch, not modelled"),
    ),
]
"""Measured with 4 seeds x 20,000 requests (the grid of benchmarks/queueing.py, docs/physics/queueing.md, measured
there with 8 x 100,000): with 2 x 5,000 the rho 0.7 cases came out within 10% by luck of the sample (p99 of 50
requests per run). Utilisation 0.9 is left out: the simulated percentiles of 4 x 20,000 requests move by 15-30%
between samples there."""


@pytest.mark.parametrize(("isl", "osl", "chunk", "utilisation"), AGG_CASES)
def test_aggregated_queueing_model_is_within_10_percent_of_the_simulator_p90_p99(isl, osl, chunk, utilisation):
    """One aggregated instance (256 slots), chunked prefill, Poisson arrivals: 4 seeds x 20,000."""
    workload = rq.Workload.single(isl, osl)
    layout = _layout(isl + osl / 2)
    process = qm.Arrivals(_aggregated_rate(layout, workload, chunk, utilisation))
    model = qm.aggregated_ttft(LLAMA8, H100, DEFAULT, 16, layout, workload, chunk, process)
    runs = [
        engine.aggregated(PHYSICS, H100, layout, 256, chunk, arrivals.draw(process, workload, 20_000, s))
        for s in range(4)
    ]
    sim = np.mean([_percentiles(r) for r in runs], axis=0)
    assert np.abs(model["ttft_s"][1:] / sim - 1.0).max() < TOLERANCE


# ----------------------------------------------------------------------------------------------- simulator contract


def _agg_run(seed: int, rate: float = 20.0) -> engine.Served:
    workload = rq.Workload((500, 3000), (40, 120), (3.0, 1.0))
    reqs = arrivals.draw(qm.Arrivals(rate, 2.0), workload, 600, seed)
    return engine.aggregated(PHYSICS, H100, _layout(2000.0), 16, 1024, reqs)


@pytest.mark.parametrize("serving", ["agg", "disagg"])
def test_every_request_gets_its_first_token_then_all_its_output_tokens(serving):
    reqs = arrivals.draw(qm.Arrivals(20.0, 2.0), rq.Workload((500, 3000), (40, 120), (3.0, 1.0)), 600, 3)
    served = _agg_run(3) if serving == "agg" else _disagg(reqs, 2, decode_slots=16)
    assert np.all(served.first_token_s > served.arrival_s)
    assert np.all(served.finish_s > served.first_token_s)
    figures = summary.figures(served)
    assert figures["requests"] == len(reqs)
    assert figures["throughput_tok_s"] * figures["span_s"] == pytest.approx(reqs.osl.sum())


def test_the_aggregated_instance_never_holds_more_sequences_than_its_slots():
    served = _agg_run(4, rate=200.0)
    assert summary.figures(served)["decode_utilisation"] <= 1.0
    events = sorted([(t, 1) for t in served.first_token_s] + [(t, -1) for t in served.finish_s])
    assert max(np.cumsum([e[1] for e in events])) <= 16


def test_a_seed_gives_the_same_run_and_another_seed_another():
    a, b, c = _agg_run(7), _agg_run(7), _agg_run(8)
    assert np.array_equal(a.finish_s, b.finish_s) and np.array_equal(a.first_token_s, b.first_token_s)
    assert not np.array_equal(a.finish_s, c.finish_s)


def _lone_requests(isl: int, osl: int) -> arrivals.Requests:
    """Requests a minute apart: each is served alone."""
    return arrivals.Requests(np.arange(5) * 60.0, np.full(5, isl), np.full(5, osl))


@pytest.mark.parametrize("isl", [700, 4096])
def test_at_low_load_aggregated_reproduces_the_evaluators_ttft_and_decode_step_at_batch_one(isl):
    """A prompt of whole chunks (or within one): the evaluator's chunk schedule is the simulator's step for step."""
    layout = _layout(isl + 50.0)
    served = engine.aggregated(PHYSICS, H100, layout, 8, 2048, _lone_requests(isl, 100))
    ttft = rq.ttft_aggregated_s(LLAMA8, H100, DEFAULT, 16, layout, 1.0, rq.Workload.single(isl, 100), 2048)
    tpot = rq.tpot_step(LLAMA8, H100, DEFAULT, 16, layout, 1.0, None, 0.0, 0.0).step_time_s
    assert served.ttft_s == pytest.approx(float(ttft), rel=1e-9)
    assert served.tpot_s == pytest.approx(float(tpot), rel=1e-9)


def test_a_last_partial_chunk_costs_less_than_the_full_chunk_the_evaluator_prices():
    layout = _layout(5050.0)
    served = engine.aggregated(PHYSICS, H100, layout, 8, 2048, _lone_requests(5000, 100))
    ttft = rq.ttft_aggregated_s(LLAMA8, H100, DEFAULT, 16, layout, 1.0, rq.Workload.single(5000, 100), 2048)
    pieces = [(2048, 0), (2048, 2048), (904, 4096)]
    steps = [
        qm.mixed_step(LLAMA8, H100, DEFAULT, 16, layout, 1.0, q, q * s + q * (q - 1) / 2, q + s) for q, s in pieces
    ]
    assert served.ttft_s == pytest.approx(sum(float(st.step_time_s) for st in steps), rel=1e-9)
    assert np.all(served.ttft_s < float(ttft))


@pytest.mark.parametrize(("decode", "tokens", "start"), [(1, 2048, 0), (5, 1000, 3000), (200, 300, 700)])
def test_every_simulated_step_is_the_evaluators_mixed_step(decode, tokens, start):
    """The simulator prices a step from cached rows plus per-unit attention and KV seconds: the result must be the
    evaluator's step for those pieces, kernel classes included (a new physics term must not fall out of it)."""
    layout = _layout(3050.0)
    attention, kv = tokens * start + tokens * (tokens - 1) / 2.0, float(tokens + start)
    want = qm.mixed_step(LLAMA8, H100, DEFAULT, 16, layout, float(decode), float(tokens), attention, kv).step_time_s
    got = engine._MixedSteps(PHYSICS, H100, layout, 256).time_s(decode, tokens, attention, kv)
    assert got == pytest.approx(float(want), rel=1e-9)


def test_at_low_load_disaggregated_reproduces_the_evaluators_ttft_and_tpot_at_batch_one():
    reqs = _lone_requests(2000, 100)
    served = engine.disaggregated(PHYSICS, (H100, PREFILL, 1, 1), (H100, _layout(2050.0), 8, 1), reqs)
    fig = rq.disaggregated_figures(
        LLAMA8, DEFAULT, 16, rq.Workload.single(2000, 100), (H100, PREFILL, 1.0, 1), (H100, _layout(2050.0), 1.0, 1)
    )
    assert served.ttft_s == pytest.approx(float(fig["ttft_s"]), rel=1e-9)
    assert served.tpot_s == pytest.approx(float(fig["tpot_s"]), rel=1e-9)


# ----------------------------------------------------------------------------------------------- command

SETUP = ["simulate", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--tp", "1", "--pp", "1", "--batch", "32"]


def test_simulate_prints_percentiles_of_drawn_arrivals(capsys):
    code = main([*SETUP, "--isl", "1000", "--osl", "20", "--rate-req-s", "5", "--requests", "200", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    assert '"ttft_p99_s"' in out and '"queueing_ttft_p99_s"' in out and '"tpot_p50_s"' in out


def test_simulate_serves_a_trace(tmp_path, capsys):
    trace = tmp_path / "trace.csv"
    trace.write_text("arrival_s,isl,osl\n0.0,800,10\n0.3,1200,20\n0.1,400,5\n", encoding="utf-8")
    assert main([*SETUP, "--serving", "disagg", "--trace", str(trace), "--json"]) == 0
    assert '"requests": 3' in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        (["--isl", "1000", "--osl", "20"], "--rate-req-s"),
        (["--isl", "1000", "--osl", "20", "--rate-req-s", "5", "--burstiness", "-1"], "--burstiness"),
        (["--isl", "1000", "--osl", "20", "--rate-req-s", "5", "--requests", "1"], "--requests"),
        (["--trace", "missing.csv"], "--trace"),
    ],
)
def test_simulate_bad_input_is_one_line_and_exit_2(extra, field, capsys):
    assert main([*SETUP, *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and field in err


def test_simulate_help_shows_an_example(capsys):
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    assert "example: roofline-opt simulate" in capsys.readouterr().out
