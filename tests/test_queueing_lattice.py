"""The GI/G/1 wait of bursty arrivals (physics/queueing.py ``_lindley``: Lindley's fixed point on a lattice, by the
Wiener-Hopf factorisation) against queues with known exact waiting-time distributions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from roofline_opt.physics import queueing as qm

CLASSES = 400
"""Exponential service as this many equally likely classes at the quantiles (i + 1/2) / CLASSES (its tail ends at
6.7 means: Lundberg's decay of the mix is within 2% of the exponential's)."""

LATTICE = 0.035
"""Relative error allowed for the lattice (8 points per mean service: the atom at 0 is within 1-3%)."""


def _exponential_service(mean_s: float) -> tuple[np.ndarray, np.ndarray]:
    """(shares, service times) of equally likely classes at the quantiles of an exponential of ``mean_s``, and the
    mix's own mean is what the exact formulas below are given."""
    q = (np.arange(CLASSES) + 0.5) / CLASSES
    return np.ones(CLASSES) / CLASSES, -mean_s * np.log1p(-q)


def _wait(shares, service, rate: float, scv: float) -> tuple[float, float, float, float]:
    """(P(wait), tail constant C, mean wait, decay eta) of one GI/G/1 queue."""
    s, r = np.asarray(service, dtype=float)[None, :], np.array([rate])
    eta = qm._decay_per_s(np.asarray(shares), s, r, scv)
    p, constant, mean = qm._lindley(np.asarray(shares), s, r, scv, eta)
    return float(p[0]), float(constant[0]), float(mean[0]), float(eta[0])


@pytest.mark.parametrize("utilisation", [0.3, 0.6, 0.9])
def test_md1_waits_with_probability_rho_and_its_mean_is_pollaczek_khinchine(utilisation):
    p, _, mean, _ = _wait([1.0], [1.0], utilisation, 1.0)
    assert p == pytest.approx(utilisation, rel=LATTICE)
    assert mean == pytest.approx(utilisation / (2.0 * (1.0 - utilisation)), rel=0.01)


@pytest.mark.parametrize("utilisation", [0.3, 0.6, 0.9])
def test_md1_tail_is_erlangs_exact_distribution(utilisation):
    """Erlang (1909) / Crommelin (1932): P(W <= t) = (1 - rho) sum_{k <= t} (lambda (k - t))^k / k! e^{-lambda (k - t)}
    for unit service; the lattice's tail C exp(-eta t) against it a few services out."""
    _, constant, _, eta = _wait([1.0], [1.0], utilisation, 1.0)
    t = 4.0 / eta
    cdf = (1.0 - utilisation) * sum(
        (utilisation * (k - t)) ** k / math.factorial(k) * math.exp(-utilisation * (k - t)) for k in range(int(t) + 1)
    )
    assert constant * math.exp(-eta * t) == pytest.approx(1.0 - cdf, rel=LATTICE)


@pytest.mark.parametrize("utilisation", [0.3, 0.8])
def test_mm1_waits_with_probability_rho_and_a_mean_of_rho_over_mu_minus_lambda(utilisation):
    """(The tail constant of the class mix is not the exponential's far out at low load: its longest class is 6.7
    means; the GI/M/1 test below checks the constant where the tail is made of many services.)"""
    shares, service = _exponential_service(1.0)
    mu = 1.0 / float(service @ shares)
    p, _, mean, _ = _wait(shares, service, utilisation * mu, 1.0)
    assert p == pytest.approx(utilisation, rel=LATTICE)
    assert mean == pytest.approx(utilisation / (mu - utilisation * mu), rel=LATTICE)


def _gim1_sigma(utilisation: float, scv: float) -> float:
    """Root in (0, 1) of sigma = E[exp(-mu (1 - sigma) A)] for gamma gaps (unit mu): (1 + (1 - sigma) theta)^-shape."""
    shape, theta = 1.0 / scv, scv / utilisation
    lo, hi = 0.0, 1.0 - 1e-12
    for _ in range(200):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if (1.0 + (1.0 - mid) * theta) ** -shape > mid else (lo, mid)
    return lo


@pytest.mark.parametrize("utilisation", [0.3, 0.5, 0.8])
def test_gim1_with_gamma_gaps_waits_with_probability_sigma_then_exponentially(utilisation):
    """GI/M/1: P(W > t) = sigma exp(-mu (1 - sigma) t), sigma the root of sigma = A*(mu (1 - sigma)); c_a^2 = 4."""
    shares, service = _exponential_service(1.0)
    mu = 1.0 / float(service @ shares)
    sigma = _gim1_sigma(utilisation, 4.0)
    p, constant, mean, eta = _wait(shares, service / mu, utilisation, 4.0)
    assert p == pytest.approx(sigma, rel=LATTICE)
    assert constant == pytest.approx(sigma, rel=LATTICE)
    assert eta == pytest.approx(1.0 - sigma, rel=0.02)
    assert mean == pytest.approx(sigma / (1.0 - sigma), rel=LATTICE)


def test_bursty_gim1_percentile_is_the_exponential_sojourn_time():
    """GI/M/1 FCFS: wait + service is exponential of rate mu (1 - sigma), so p99 = ln(100) / (mu (1 - sigma))."""
    shares, service = _exponential_service(1.0)
    service = service / float(service @ shares)
    sigma = _gim1_sigma(0.5, 4.0)
    p99 = float(qm.percentile_ttft_s(99.0, shares, service, service, 0.5, 1, 4.0))
    assert p99 == pytest.approx(math.log(100.0) / (1.0 - sigma), rel=0.03)


def test_the_lattice_wait_of_a_queue_does_not_depend_on_the_queues_beside_it():
    service = np.array([[1.0, 2.0], [1.0, 2.0]])
    together = qm._lindley(np.array([0.5, 0.5]), service, np.array([0.2, 0.6]), 4.0, np.array([0.3, 0.05]))
    alone = qm._lindley(np.array([0.5, 0.5]), service[:1], np.array([0.2]), 4.0, np.array([0.3]))
    np.testing.assert_allclose([v[0] for v in together], [v[0] for v in alone], rtol=1e-12)


def test_gamma_distribution_function_matches_closed_forms():
    x = np.array([0.0, 1e-6, 0.3, 1.2, 1.6, 5.0, 30.0, 100.0])
    np.testing.assert_allclose(qm._gamma_cdf(1.0, x), 1.0 - np.exp(-x), atol=1e-14)
    np.testing.assert_allclose(qm._gamma_cdf(0.5, x), [math.erf(math.sqrt(v)) for v in x], atol=1e-14)
