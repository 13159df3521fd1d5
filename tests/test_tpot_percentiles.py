"""TPOT percentiles at load (physics/tpot_percentiles.py): the inverse Gaussian window, its mean equal to the
evaluator's steady-state TPOT, and the model against the simulator on the grid of docs/physics/queueing.md."""

from __future__ import annotations

import math

import numpy as np
import pytest

from roofline_opt import catalog
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics import queueing as qm
from roofline_opt.physics import requests as rq
from roofline_opt.physics import tpot_percentiles as tq
from roofline_opt.physics.specs import DEFAULT
from roofline_opt.simulate import arrivals, engine

H100 = catalog.load_gpu("h100-sxm")
MODEL = catalog.resolve_model("llama-3-8b", "model")[0]


def _layout(context: float) -> ev.Layout:
    return ev.Layout.of(1, False, 1, context, 1, 1, 16)


def _ig_cdf_by_quadrature(t: float, mean: float, shape: float) -> float:
    """The inverse Gaussian density integrated by the trapezoid rule on a fine grid (the closed form's check)."""
    x = np.linspace(1e-9, t, 400_001)
    pdf = np.sqrt(shape / (2 * np.pi * x**3)) * np.exp(-shape * (x - mean) ** 2 / (2 * mean**2 * x))
    return float(np.sum((pdf[1:] + pdf[:-1]) / 2 * np.diff(x)))


def test_inverse_gaussian_cdf_at_its_mean_with_unit_shape():
    """mean 1, shape 1, t 1: Phi(0) + e^2 Phi(-2) = 0.5 + 7.389056 x 0.0227501 = 0.668102."""
    assert float(tq.inverse_gaussian_cdf(1.0, 1.0, 1.0)) == pytest.approx(0.5 + math.exp(2) * 0.0227501319, rel=1e-6)


@pytest.mark.parametrize(("t", "mean", "shape"), [(0.5, 1.0, 3.0), (2.0, 1.0, 0.5), (1.3, 1.0, 400.0)])
def test_inverse_gaussian_cdf_matches_its_density_integrated(t, mean, shape):
    assert float(tq.inverse_gaussian_cdf(t, mean, shape)) == pytest.approx(
        _ig_cdf_by_quadrature(t, mean, shape), abs=2e-6
    )


def test_inverse_gaussian_cdf_does_not_overflow_at_a_large_shape_over_mean():
    """exp(2 k / mu) alone would overflow at k / mu = 1e4; the CDF is then a step at the mean."""
    values = tq.inverse_gaussian_cdf(np.array([0.9, 1.1]), 1.0, 1e4)
    assert np.all(np.isfinite(values))
    assert values[0] < 1e-6 and values[1] > 1 - 1e-6


def test_window_percentile_matches_busy_periods_drawn_at_random():
    """Busy periods started by the work x, Poisson arrivals each bringing W (M/D/1): the p90 and p99 of T / O from
    10,000 drawn periods against the model's, with about 100 arrivals per period (the diffusion regime)."""
    x, work, rate, osl = 2.0, 0.05, 10.0, 200
    rng = np.random.default_rng(5)
    ends = np.empty(10_000)
    for k in range(len(ends)):
        horizon, t = x, rng.exponential(1 / rate)
        while t < horizon:  # each arrival before the period ends extends it by W
            horizon += work
            t += rng.exponential(1 / rate)
        ends[k] = horizon
    drawn = np.percentile(ends / osl, [90.0, 99.0])
    model = [float(tq.window_percentile_tpot_s(q, [1.0], [osl], x / osl, [work], rate)) for q in (90.0, 99.0)]
    np.testing.assert_allclose(model, drawn, rtol=0.03)


def test_window_tpot_is_infinite_without_a_steady_state():
    assert math.isinf(float(tq.window_percentile_tpot_s(90.0, [1.0], [100], 0.01, [0.2], 5.0)))
    assert math.isinf(float(tq.window_percentile_tpot_s(90.0, [1.0], [100], 0.0, [0.01], 5.0)))


def test_window_tpot_mean_is_the_steady_state_step():
    """The inverse Gaussian's mean O a / (1 - rho) over O is a / (1 - lambda O c) = s(B) for s(b) = a + c b at the
    batch of Little's law B = lambda O s(B): the 50.000...th percentile is not the mean, so the mean is taken from
    the distribution numerically (percentiles 0.5..99.5)."""
    a, c, osl, batch = 0.006, 0.0003, 200, 40.0
    step = a + c * batch
    rate = batch / (osl * step)
    qs = np.linspace(0.05, 99.95, 1000)
    values = [float(tq.window_percentile_tpot_s(q, [1.0], [osl], a, [c * osl], rate)) for q in qs]
    assert float(np.mean(values)) == pytest.approx(step, rel=0.01)


@pytest.mark.parametrize("aggregated", [True, False])
def test_percentile_tpot_rises_with_the_batch(aggregated):
    """The tables cap a batch range by bisection on this function: it must rise with the load."""
    workload, layout = rq.Workload.single(2000, 200), _layout(2100.0)
    batch = np.arange(1.0, 200.0)
    args = (90.0, MODEL, H100, DEFAULT, 16, layout, batch, workload)
    tpot = tq.aggregated_percentile_tpot_s(*args, 2048) if aggregated else tq.decode_percentile_tpot_s(*args)
    finite = tpot[np.isfinite(tpot)]
    assert len(finite) > 10 and np.all(np.diff(finite) >= 0.0)
    assert np.all(np.isinf(tpot[len(finite) :]))


def test_percentile_tpot_is_above_the_mean_step_at_p90_and_below_it_at_p50():
    workload, layout = rq.Workload.single(2000, 200), _layout(2100.0)
    batch = 30.0
    mean = float(rq.tpot_step(MODEL, H100, DEFAULT, 16, layout, batch, workload, 2048, 1.0).step_time_s)
    p50, p90 = (
        float(tq.aggregated_percentile_tpot_s(q, MODEL, H100, DEFAULT, 16, layout, batch, workload, 2048))
        for q in (50.0, 90.0)
    )
    assert p50 < mean < p90


def test_a_mix_is_priced_per_class_window():
    """Two classes: a request's window is O_j steps, so the short-output class spreads wider; the mix's p90 lies
    between the classes' own."""
    layout = _layout(1500.0)
    mix = rq.Workload((1000, 1000), (100, 900), (0.5, 0.5))
    args = (MODEL, H100, DEFAULT, 16, layout, 20.0)
    p90 = float(tq.aggregated_percentile_tpot_s(90.0, *args, mix, 2048))
    mean = float(rq.tpot_step(*args, mix, 2048, 1.0).step_time_s)
    assert mean < p90 < 3 * mean


# ------------------------------------------------------------------------------ against the simulator

GRID = [
    # (isl, osl, chunk, rate req/s): Llama-3-8B on one H100, 256 slots; rho of the chunk budget in the comments
    (2000, 200, 2048, 6.0),
    (2000, 200, 2048, 9.0),
    (2000, 200, 2048, 12.7),  # 0.8: the chunk budget bounds p99
    (3000, 50, 1024, 3.0),
    (3000, 50, 1024, 5.0),
    (3000, 50, 1024, 11.0),  # 0.9: every window at the full-chunk step
    (1500, 2048, 2048, 0.5),
]


def _simulated(isl, osl, chunk, rate, aggregated=True):
    workload, layout = rq.Workload.single(isl, osl), _layout(isl + osl / 2)
    physics = engine.Physics(MODEL, DEFAULT, 16)
    drawn = []
    for seed in range(2):
        reqs = arrivals.draw(qm.Arrivals(rate), workload, 10_000, seed)
        if aggregated:
            served = engine.aggregated(physics, H100, layout, 256, chunk, reqs)
        else:
            served = engine.disaggregated(physics, (H100, _layout(0.0), 1, 4), (H100, layout, 256, 1), reqs)
        drawn.append(np.percentile(served.tpot_s[1_000:], [90.0, 99.0]))
    return np.mean(drawn, axis=0)


@pytest.mark.parametrize("case", GRID)
def test_aggregated_tpot_percentiles_within_ten_percent_of_the_simulator(case):
    isl, osl, chunk, rate = case
    workload, layout = rq.Workload.single(isl, osl), _layout(isl + osl / 2)
    model = tq.tpot_at_rate_s(MODEL, H100, DEFAULT, 16, layout, workload, chunk, qm.Arrivals(rate), True, (90.0, 99.0))
    np.testing.assert_allclose(model, _simulated(*case), rtol=0.10)


@pytest.mark.xfail(strict=True, reason="rho 0.7 of the chunk budget: the model's p99 is 18-25% high")
def test_aggregated_tpot_p99_at_rho_07_within_ten_percent_of_the_simulator():
    workload, layout = rq.Workload.single(2000, 200), _layout(2100.0)
    model = tq.tpot_at_rate_s(MODEL, H100, DEFAULT, 16, layout, workload, 2048, qm.Arrivals(12.0), True, (99.0,))
    assert float(model[0]) == pytest.approx(_simulated(2000, 200, 2048, 12.0)[1], rel=0.10)


def test_aggregated_tpot_never_exceeds_the_full_chunk_step_at_the_busy_batch():
    """2000 / 200 / 2048: B_busy = 200 x 2048 / 2000 = 204.8; below it the bound is that batch's full-chunk step."""
    workload, layout = rq.Workload.single(2000, 200), _layout(2100.0)
    batch = np.array([20.0, 80.0, 150.0, 204.0])
    p99 = tq.aggregated_percentile_tpot_s(99.0, MODEL, H100, DEFAULT, 16, layout, batch, workload, 2048)
    chunk = 2048.0
    full = qm.mixed_step(MODEL, H100, DEFAULT, 16, layout, 204.8, chunk, chunk * (chunk - 1) / 2, chunk)
    assert np.all(p99 <= float(full.step_time_s) * (1 + 1e-12))
    assert float(p99[-1]) == pytest.approx(float(full.step_time_s), rel=1e-12)


def test_decode_instance_tpot_percentiles_within_ten_percent_of_the_simulator():
    """Disaggregated: four prefill instances keep the prefill queue short; one decode instance at about 60
    sequences decoding."""
    workload, layout = rq.Workload.single(2000, 200), _layout(2100.0)
    model = tq.tpot_at_rate_s(MODEL, H100, DEFAULT, 16, layout, workload, 0, qm.Arrivals(20.0), False, (90.0, 99.0))
    np.testing.assert_allclose(model, _simulated(2000, 200, 0, 20.0, aggregated=False), rtol=0.10)


@pytest.mark.parametrize("aggregated", [True, False])
def test_the_cdf_test_at_the_limit_agrees_with_the_percentile(aggregated):
    """The tables test a limit by the windows' CDF at it, answers report the percentile found by bisection: both
    say the same at every batch and limit of a grid (including batches where the chunk budget's bound decides)."""
    workload, layout = rq.Workload.single(2000, 200), _layout(2100.0)
    batch = np.arange(1.0, 205.0)
    args = (MODEL, H100, DEFAULT, 16, layout, batch, workload)
    for limit in (0.010, 0.020, 0.040, 0.070):
        if aggregated:
            tpot = tq.aggregated_percentile_tpot_s(90.0, *args, 2048)
            within = tq.aggregated_tpot_within(90.0, limit, *args, 2048)
        else:
            tpot = tq.decode_percentile_tpot_s(90.0, *args)
            within = tq.decode_tpot_within(90.0, limit, *args)
        np.testing.assert_array_equal(within, tpot <= limit)
