"""Percentile TTFT limits: the vectorised queueing functions the tables and fleets use, and queries with
``percentile`` (MIP equal to enumeration, the answer's figures at its load)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from roofline_opt.physics import queueing as qm


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
