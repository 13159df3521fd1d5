"""The aggregated prompt queue's step structure: the step under way ends the work it holds, and a prompt that finds
only the one in service ahead carries no half step of rounding (docs/physics/queueing.md, "Aggregated with chunked
prefill")."""

from __future__ import annotations

import math

import numpy as np
import pytest

from roofline_opt.physics import queueing as qm

W = np.array([1.0])
T0 = np.array([0.05])


def test_the_wait_beyond_the_step_under_way_thins_the_exponential_tail() -> None:
    p, lag = qm._beyond(np.array(0.4), np.array(50.0), np.array(0.0), np.array(0.01))
    assert float(p) == pytest.approx(0.4 * math.exp(-0.5))
    assert float(lag) == 0.0


def test_a_lag_absorbs_the_overlap_before_the_tail_is_thinned() -> None:
    p, lag = qm._beyond(np.array(0.4), np.array(50.0), np.array(0.03), np.array(0.01))
    assert (float(p), float(lag)) == pytest.approx((0.4, 0.02))
    p, lag = qm._beyond(np.array(0.4), np.array(50.0), np.array(0.004), np.array(0.01))
    assert (float(p), float(lag)) == pytest.approx((0.4 * math.exp(-50.0 * 0.006), 0.0))


def test_no_wait_stays_no_wait() -> None:
    p, _ = qm._beyond(np.array(0.0), np.array(np.inf), np.array(0.0), np.array(0.01))
    assert float(p) == 0.0


def _tail(percentile: float, unshifted: float) -> float:
    """Percentile of 0.05 s + W + 0.02 s x [W > unshifted], W 0 with probability 0.6, else exponential of rate 50/s."""
    args = (np.array(0.4), np.array(50.0), np.array(0.02))
    return float(qm._percentile(percentile, W, T0, *args, 0.0, np.array(unshifted)))


def test_waits_below_the_threshold_carry_no_shift() -> None:
    # P(W > x) = 0.4 exp(-50 x) = 0.2 at x = ln 2 / 50 = 13.9 ms, below the 30 ms threshold: no shift
    assert _tail(80.0, 0.03) == pytest.approx(0.05 + math.log(2.0) / 50.0, rel=1e-9)


def test_waits_beyond_the_threshold_carry_the_whole_shift() -> None:
    # P(W > x) = 0.02 at x = ln 20 / 50 = 59.9 ms, beyond the threshold: the 20 ms shift is added
    assert _tail(98.0, 0.03) == pytest.approx(0.05 + math.log(20.0) / 50.0 + 0.02, rel=1e-9)


def test_no_request_lands_between_the_threshold_and_the_threshold_plus_the_shift() -> None:
    # P(W > 30 ms) = 0.4 exp(-1.5) = 0.0893: just below that percentile TTFT is t0 + u, just above it t0 + u + shift
    at = 100.0 * (1.0 - 0.4 * math.exp(-1.5))
    assert _tail(at - 0.01, 0.03) == pytest.approx(0.05 + 0.03, rel=1e-3)
    assert _tail(at + 0.01, 0.03) == pytest.approx(0.05 + 0.03 + 0.02, rel=1e-3)


def test_a_zero_threshold_is_the_shift_on_every_positive_wait() -> None:
    args = (np.array(0.4), np.array(50.0), np.array(0.02))
    plain = float(qm._percentile(95.0, W, T0, *args))
    assert _tail(95.0, 0.0) == pytest.approx(plain, rel=1e-12)
    assert plain == pytest.approx(0.05 + 0.02 + math.log(8.0) / 50.0, rel=1e-9)
