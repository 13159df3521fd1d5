"""Speculative decoding at load: the simulator's rounds are the evaluator's, and the queueing model priced with the
rounds (TTFT and TPOT percentiles) against the simulator (docs/physics/queueing.md, "Speculative decoding")."""

from __future__ import annotations

import math

import numpy as np
import pytest

from roofline_opt import catalog
from roofline_opt.cli import main
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics import queueing as qm
from roofline_opt.physics import requests as rq
from roofline_opt.physics import tpot_percentiles as tq
from roofline_opt.physics.specs import DEFAULT
from roofline_opt.simulate import arrivals, engine

H100 = catalog.load_gpu("h100-sxm")
TARGET = catalog.resolve_model("llama-3-70b", "model")[0]
DRAFT = catalog.resolve_model("llama-3-8b", "model")[0]
PHYSICS = engine.Physics(TARGET, DEFAULT, 16)
TOLERANCE = 0.10


def _layout(context: float) -> ev.Layout:
    return ev.Layout.of(4, False, 1, context, 1, 1, 16)


def _lone_requests(isl: int, osl: int) -> arrivals.Requests:
    """Requests a minute apart: each is served alone."""
    return arrivals.Requests(np.arange(4) * 60.0, np.full(4, isl), np.full(4, osl))


def test_accepted_tokens_per_round_have_the_evaluators_mean_and_variance():
    spec = rq.Speculation(DRAFT, 3.0, 0.7)
    gains = np.array(engine._Acceptance(spec, 0).gains(400_000))
    assert gains.min() == 1 and gains.max() == 4
    assert gains.mean() == pytest.approx(float(spec.tokens_per_round), rel=0.005)
    assert gains.var() == pytest.approx(float(spec.tokens_per_round_variance), rel=0.02)


def test_a_lone_aggregated_request_gets_the_evaluators_rounds_when_every_draft_is_accepted():
    """Acceptance 1: each round yields gamma + 1 tokens, so 25 rounds decode 100 tokens; the prompt's chunk rides on
    a round whose draft reads it too."""
    spec, layout = rq.Speculation(DRAFT, 3.0, 1.0), _layout(1050.0)
    served = engine.aggregated(PHYSICS, H100, layout, 8, 2048, _lone_requests(1000, 100), spec)
    ttft = rq.ttft_aggregated_s(TARGET, H100, DEFAULT, 16, layout, 1.0, rq.Workload.single(1000, 100), 2048, spec)
    tpot = rq.tpot_step(TARGET, H100, DEFAULT, 16, layout, 1.0, None, 0.0, 0.0, spec).step_time_s
    assert served.ttft_s == pytest.approx(float(ttft), rel=1e-9)
    assert served.tpot_s == pytest.approx(float(tpot), rel=1e-9)


def test_a_lone_disaggregated_request_prefills_the_draft_and_decodes_the_evaluators_rounds():
    spec, prefill, decode = rq.Speculation(DRAFT, 3.0, 1.0), _layout(0.0), _layout(2050.0)
    served = engine.disaggregated(PHYSICS, (H100, prefill, 1, 1), (H100, decode, 8, 1), _lone_requests(2000, 100), spec)
    fig = rq.disaggregated_figures(
        TARGET, DEFAULT, 16, rq.Workload.single(2000, 100), (H100, prefill, 1.0, 1), (H100, decode, 1.0, 1), spec=spec
    )
    plain = rq.disaggregated_figures(
        TARGET, DEFAULT, 16, rq.Workload.single(2000, 100), (H100, prefill, 1.0, 1), (H100, decode, 1.0, 1)
    )
    assert served.ttft_s == pytest.approx(float(fig["ttft_s"]), rel=1e-9)
    assert served.tpot_s == pytest.approx(float(fig["tpot_s"]), rel=1e-9)
    assert float(fig["ttft_s"]) > float(plain["ttft_s"])


def test_a_draft_of_gamma_zero_leaves_every_percentile_as_without_one():
    workload, layout, chunk = rq.Workload.single(1000, 200), _layout(1100.0), 2048
    none, zero = qm.Arrivals(5.0), rq.Speculation(DRAFT, 0.0, 0.7)
    args = (TARGET, H100, DEFAULT, 16, layout, workload, chunk, none)
    assert qm.aggregated_ttft(*args, spec=zero)["ttft_s"] == pytest.approx(qm.aggregated_ttft(*args)["ttft_s"], 1e-12)
    with_zero = tq.tpot_at_rate_s(*args, True, spec=zero)
    assert with_zero == pytest.approx(tq.tpot_at_rate_s(*args, True), rel=1e-12)


def _rate(layout, workload, chunk, spec, utilisation) -> float:
    """The arrival rate at which the queueing model's chunk budget is ``utilisation`` busy (bisection)."""
    setup = (TARGET, H100, DEFAULT, 16, layout)
    lo, hi = 1e-3, 1e3
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        batch = qm.mean_decode_batch(*setup, workload, chunk, mid, 1.0, spec)
        busy = math.isfinite(batch) and qm.aggregated_utilisation(*setup, batch, workload, chunk, spec) < utilisation
        lo, hi = (mid, hi) if busy else (lo, mid)
    return lo


def _simulated(isl, osl, chunk, gamma, utilisation):
    """(model TTFT p90/p99, simulated, model TPOT p90/p99, simulated): 512 slots, Poisson, 4 seeds x 20,000."""
    workload, layout, spec = rq.Workload.single(isl, osl), _layout(isl + osl / 2), rq.Speculation(DRAFT, gamma, 0.7)
    process = qm.Arrivals(_rate(layout, workload, chunk, spec, utilisation))
    args = (TARGET, H100, DEFAULT, 16, layout, workload, chunk, process)
    ttft = qm.aggregated_ttft(*args, spec=spec)["ttft_s"][1:]
    tpot = tq.tpot_at_rate_s(*args, True, spec=spec)[1:]
    runs = [
        engine.aggregated(PHYSICS, H100, layout, 512, chunk, arrivals.draw(process, workload, 20_000, s), spec, 10 + s)
        for s in range(4)
    ]
    sim_ttft = np.mean([np.percentile(r.ttft_s, [90.0, 99.0]) for r in runs], axis=0)
    sim_tpot = np.mean([np.percentile(r.tpot_s, [90.0, 99.0]) for r in runs], axis=0)
    return ttft, sim_ttft, tpot, sim_tpot


@pytest.mark.parametrize("utilisation", [0.5, 0.8])
def test_drafted_ttft_percentiles_are_within_10_percent_of_the_simulator(utilisation):
    """3000-token prompts over chunks of 1024, 50 output tokens, gamma 2 (measured at rho 0.3-0.8: -8..+1%)."""
    ttft, sim, _, _ = _simulated(3000, 50, 1024, 2.0, utilisation)
    assert np.abs(ttft / sim - 1.0).max() < TOLERANCE


@pytest.mark.parametrize("utilisation", [0.3, 0.5])
def test_drafted_tpot_percentiles_are_within_10_percent_of_the_simulator(utilisation):
    """1000 in / 200 out within a chunk of 2048, gamma 3 (measured: within 2%; at rho 0.7 -2% / +8%)."""
    _, _, tpot, sim = _simulated(1000, 200, 2048, 3.0, utilisation)
    assert np.abs(tpot / sim - 1.0).max() < TOLERANCE


@pytest.mark.xfail(
    strict=True,
    reason="p90 16% low: short outputs after long prompts; without a draft the TPOT model is 10% low here too, and "
    "with one the simulated mean batch is 20% above Little's law at the evaluator's rounds (docs/physics/queueing.md)",
)
def test_drafted_tpot_after_long_prompts_with_short_outputs_is_within_10_percent():
    _, _, tpot, sim = _simulated(3000, 50, 1024, 2.0, 0.5)
    assert np.abs(tpot / sim - 1.0).max() < TOLERANCE


SETUP = ["simulate", "--model", "llama-3-70b", "--gpu", "h100-sxm", "--tp", "4", "--pp", "1", "--batch", "64"]


def test_simulate_takes_a_draft_and_prints_the_queueing_models_figures_beside_its_own(capsys):
    flags = ["--isl", "1000", "--osl", "200", "--rate-req-s", "4", "--requests", "500", "--json"]
    code = main([*SETUP, *flags, "--draft", "llama-3-8b", "--gamma-max", "3"])
    out = capsys.readouterr().out
    assert code == 0 and '"queueing_tpot_p99_s"' in out and '"tpot_p99_s"' in out


def test_simulate_with_gamma_but_no_draft_is_one_line_naming_the_flag(capsys):
    flags = ["--isl", "1000", "--osl", "200", "--rate-req-s", "4", "--gamma-max", "3"]
    code = main([*SETUP, *flags])
    err = capsys.readouterr().err
    assert code == 2 and "--gamma-max" in err and err.count("\n") == 1, err
