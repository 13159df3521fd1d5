"""Serving at load: arrivals and a queueing model of the prefill path for TTFT percentiles (docs/physics/queueing.md).

The evaluator's figures are service times of an instance at steady state; this module adds the time a request waits
for the prefill path under random arrivals. Arrivals are a renewal process of a rate and a squared coefficient of
variation of the inter-arrival times, c_a^2 (1 = Poisson; > 1 bursty, gamma-distributed gaps). The prefill path is a
G/G/c queue: its wait has an exponential tail, P(W > t) = P(wait) exp(-eta t), eta the decay rate of Lundberg's
equation (exact for M/M/c), P(wait) such that the mean is Allen-Cunneen's mean wait (Kingman's for c = 1) for
c_a^2 <= 1. For bursty arrivals (c_a^2 > 1) the c servers are one c-times faster GI/G/1 server whose wait is computed
exactly up to a lattice (Lindley's fixed point by the Wiener-Hopf factorisation, ``_lindley``): P(W > t) =
min(P(wait), C exp(-eta t)), C the Cramer-Lundberg constant. TTFT = wait + service (+ KV transfer).

- disaggregated: c = x prefill instances at prefill batch 1, service time ``prefill_step`` of one prompt;
- aggregated with chunked prefill: one instance whose steps carry up to ``chunk`` prompt tokens beside the decoding
  sequences; a prompt's work is its share I / chunk of a step carrying a full chunk, its own time once it is at the
  head of the queue its chunk schedule (``ttft_aggregated_s``), both at the mean decode batch found by Little's law;
  an arrival waits for the step under way (M/G/1 with vacations: half a mean step), which ends the work it holds
  (the wait is the work beyond it, ``_beyond``), and a prompt that queued behind more than the one in service ends
  with the step holding its last piece (half a full step more). A percentile's wait, its work and schedule are
  priced at the decode batch of the busy period that percentile waits in, which climbs from that mean towards
  O chunk / I sequences (``_busy_period_batch``), a fixed point per percentile.

Pure numpy/math; every step time comes from ``requests`` (built on ``evaluator.step``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NotRequired, TypedDict

import numpy as np

from roofline_opt.physics import evaluator as ev
from roofline_opt.physics import requests as rq
from roofline_opt.physics.specs import GpuSpec, ModelSpec, Preset

PERCENTILES = (50.0, 90.0, 99.0)
"""TTFT/TPOT percentiles reported by default."""


@dataclass(frozen=True)
class Arrivals:
    """A renewal arrival process: ``rate_per_s`` requests/s, gaps with squared coefficient of variation ``scv``
    (1 = Poisson, exponential gaps; 0 = evenly spaced; otherwise gamma-distributed gaps of shape 1 / scv)."""

    rate_per_s: float
    scv: float = 1.0

    def gaps_s(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` inter-arrival times in seconds."""
        mean = 1.0 / self.rate_per_s
        if self.scv == 0.0:
            return np.full(n, mean)
        if self.scv == 1.0:
            return rng.exponential(mean, n)
        return rng.gamma(1.0 / self.scv, mean * self.scv, n)

    @classmethod
    def of_times(cls, arrival_s: np.ndarray) -> Arrivals:
        """The rate and c_a^2 of observed arrival times (a trace), at least two distinct times."""
        gaps = np.diff(np.sort(np.asarray(arrival_s, dtype=float)))
        mean = float(gaps.mean())
        return cls(1.0 / mean, float(gaps.var() / mean**2))


def erlang_c(servers: int, offered: float) -> float:
    """Probability that an arrival waits in an M/M/c queue with ``offered`` = lambda / mu < c (Erlang C)."""
    return float(_erlang_c(np.asarray(float(servers)), np.asarray(float(offered))))


def _erlang_c(servers: np.ndarray, offered: np.ndarray) -> np.ndarray:
    """Erlang C elementwise (offered < servers where it is used)."""
    term = np.ones_like(offered)
    total = np.ones_like(offered)
    for k in range(1, int(np.max(servers, initial=1))):
        more = k < servers
        term = np.where(more, term * offered / k, term)
        total = np.where(more, total + term, total)
    with np.errstate(divide="ignore", invalid="ignore"):
        last = term * offered / servers / (1.0 - offered / servers)
    return last / (total + last)


def gg_wait(servers: int, rate_per_s: float, service_s: float, scv_arrival: float, scv_service: float):
    """(probability of waiting, mean wait W_q in s) of a G/G/c queue, Allen-Cunneen (Kingman for c = 1).

    Unstable (utilisation >= 1) gives (1, inf)."""
    offered = rate_per_s * service_s
    if offered >= servers:
        return 1.0, math.inf
    p_wait = erlang_c(servers, offered)
    wait = p_wait / (servers / service_s - rate_per_s) * (scv_arrival + scv_service) / 2.0
    return p_wait, wait


def _bisect(lo: np.ndarray, hi: np.ndarray, above, rounds: int) -> tuple[np.ndarray, np.ndarray]:
    """Elementwise bisection of where ``above(t)`` (monotone: False, then True) turns True: the final (lo, hi)."""
    for _ in range(rounds):
        mid = (lo + hi) / 2.0
        up = above(mid)
        lo, hi = np.where(up, lo, mid), np.where(up, mid, hi)
    return lo, hi


def _decay_per_s(w: np.ndarray, s: np.ndarray, rate: np.ndarray, scv: float) -> np.ndarray:
    """Lundberg's root elementwise for class shares w (k,), per-server service times s (..., k) (service over c) and
    rates (...): the positive eta with E[exp(eta S / c)] E[exp(-eta A)] = 1; inf beyond 1e12 /s.

    g(eta) = log E[exp(eta S)] + log E[exp(-eta A)] is convex with g(0) = 0 and g'(0) = E S - E A < 0 when stable,
    so Newton's method started right of the root (where g > 0, found by doubling) falls to it monotonically."""
    gap = 1.0 / rate

    def g(eta):
        gaps = eta * gap if scv == 0.0 else np.log1p(eta * scv * gap) / scv
        return np.log(np.exp(np.minimum(eta[..., None] * s, 700.0)) @ w) - gaps

    def slope(eta):
        e = np.exp(np.minimum(eta[..., None] * s, 700.0))
        return ((e * s) @ w) / (e @ w) - gap / (1.0 + eta * scv * gap)

    eta = 1.0 / np.maximum(s.max(axis=-1), 1e-300)
    while True:
        low = (g(eta) <= 0.0) & (eta <= 1e12)
        if not low.any():
            break
        eta = np.where(low, eta * 2.0, eta)
    far = g(eta) <= 0.0
    for _ in range(200):
        value = g(eta)
        step = np.where(far | (value <= 0.0), 0.0, value / slope(eta))
        eta = eta - step
        if not np.any(step > 1e-15 * eta):
            break
    return np.where(far, np.inf, eta)


def tail_decay_per_s(servers: int, weights, service_s, arrivals: Arrivals) -> float:
    """Decay rate eta of the waiting-time tail, P(W > t) ~ exp(-eta t): the positive root of Lundberg's equation
    E[exp(eta S / c)] E[exp(-eta A)] = 1 for gaps A of ``arrivals`` and the c servers as one c-times faster server
    (exact for M/M/c: eta = c mu - lambda); inf without waiting, 0 when unstable."""
    w = np.asarray(weights, dtype=float) / np.sum(weights)
    s = np.asarray(service_s, dtype=float) / servers
    if float(w @ s) * arrivals.rate_per_s >= 1.0:
        return 0.0
    return float(_decay_per_s(w, s, np.asarray(arrivals.rate_per_s), arrivals.scv))


LATTICE_STEPS_PER_SERVICE = 8
"""Lattice steps per mean service time (at least) of the GI/G/1 wait (``_lindley``): each service is split between
two points."""

LATTICE_POINTS = (256, 2048)
"""Fewest and most lattice points over [0, longest service + 12 / eta] of the GI/G/1 wait (``_lindley``), a power
of 2 per queue (so a queue's figures do not depend on the others evaluated with it)."""


GAMMA_TERMS = 200
"""At most this many terms of the series or of the continued fraction in ``_gamma_cdf`` (each stops once its terms
are below a relative 1e-16, 1e-15 for the fraction)."""

GAMMA_UPPER_TAIL = 40.0
"""Beyond x = shape + this, P(shape, x) is taken as 1 (1 - P < x^shape e^-x / Gamma(shape) < 1e-15 for shape <= 1)."""


def _gamma_series(shape: float, x: np.ndarray) -> np.ndarray:
    """P(shape, x) for 0 < x < shape + 1: x^shape e^-x / Gamma(shape) times the sum over n of
    x^n / (shape (shape + 1) ... (shape + n))."""
    term = np.full_like(x, 1.0 / shape)
    total = term.copy()
    for n in range(1, GAMMA_TERMS):
        term = term * x / (shape + n)
        total = total + term
        if np.all(term <= 1e-16 * total):
            break
    return np.exp(shape * np.log(x) - x - math.lgamma(shape)) * total


def _gamma_fraction(shape: float, x: np.ndarray) -> np.ndarray:
    """1 - P(shape, x) for x >= shape + 1: its continued fraction by the modified Lentz method."""
    b = x + 1.0 - shape
    d, c = 1.0 / b, np.full_like(x, 1e300)
    fraction = d.copy()
    for i in range(1, GAMMA_TERMS):
        a = -i * (i - shape)
        b = b + 2.0
        d = a * d + b
        d = 1.0 / np.where(np.abs(d) < 1e-300, 1e-300, d)
        c = b + a / c
        c = np.where(np.abs(c) < 1e-300, 1e-300, c)
        fraction = fraction * d * c
        if np.all(np.abs(d * c - 1.0) <= 1e-15):
            break
    return np.exp(shape * np.log(x) - x - math.lgamma(shape)) * fraction


def _gamma_cdf(shape: float, x: np.ndarray) -> np.ndarray:
    """Regularised lower incomplete gamma function P(shape, x) elementwise: its power series below x = shape + 1,
    one minus the continued fraction of the upper function above (Numerical Recipes, 3rd ed., 6.2), each evaluated
    only where it applies."""
    out = np.where(x > 0.0, 1.0, 0.0)
    small = (x > 0.0) & (x < shape + 1.0)
    out[small] = _gamma_series(shape, x[small])
    large = (x >= shape + 1.0) & (x < shape + GAMMA_UPPER_TAIL)
    out[large] = 1.0 - _gamma_fraction(shape, x[large])
    return out


def _lattice(values: np.ndarray, cdf, first_moment) -> np.ndarray:
    """Masses (..., n) on the points 0, 1, ..., n - 1 of a distribution on [0, n - 1] whose distribution function and
    partial first moment E[V; V <= v] are given at ``values`` = 0, 1, ..., n - 1 (...,  n): each cell's mass is split
    between its two end points so that the mean is kept (linear interpolation of the distribution)."""
    mass = np.diff(cdf, axis=-1)
    moment = np.diff(first_moment, axis=-1)
    upper = np.clip(moment - values[..., :-1] * mass, 0.0, mass)
    out = np.zeros(values.shape)
    out[..., :-1] += mass - upper
    out[..., 1:] += upper
    return out


def _gap_lattice(h: np.ndarray, rate: np.ndarray, scv: float, n: int) -> np.ndarray:
    """Masses (..., n) of a gap between arrivals on the points 0, h, ..., (n - 1) h (mean kept, mass beyond the
    last point on it): gamma of shape 1 / scv and mean 1 / rate (exponential for scv = 1, a point for scv = 0)."""
    values = np.broadcast_to(np.arange(n, dtype=float), (*h.shape, n))
    if scv == 0.0:
        at = 1.0 / (rate * h)
        cdf = (values >= at[..., None]).astype(float)
        moment = cdf * at[..., None]
    else:
        shape, theta = 1.0 / scv, scv / rate
        x = values * (h / theta)[..., None]
        cdf = _gamma_cdf(shape, x)
        # E[A; A <= v] = shape theta P(shape + 1, v / theta), P(a + 1, x) = P(a, x) - x^a e^-x / Gamma(a + 1)
        with np.errstate(divide="ignore"):
            density = np.exp(shape * np.log(x) - x - math.lgamma(shape + 1.0))
        moment = shape * (cdf - density) * (theta / h)[..., None]
    out = _lattice(values, cdf, moment)
    out[..., -1] += 1.0 - cdf[..., -1]
    return out


def _lindley(w: np.ndarray, s: np.ndarray, rate: np.ndarray, scv: float, eta: np.ndarray):
    """(probability of waiting, tail constant C, mean wait s) of E GI/G/1 queues, service times s (E, k)
    with shares w (k,), gamma gaps, tail decay eta (E,): the fixed point of Lindley's recursion W' = max(0, W + S - A),
    i.e. the maximum M of the random walk with steps X = S - A, on a lattice of step h.

    S and A are put on the points 0, h, 2h, ... keeping their means (each value split between its two neighbours; A
    beyond the last point, where the wait is below C exp(-12), on it) and X's distribution p is their convolution.
    M then follows from the Wiener-Hopf factorisation 1 - p(z) = (1 - G+(z)) (1 - G-(z)), G+ the strict ascending
    and G- the weak descending ladder height (Spitzer's identity; Asmussen, Applied Probability and Queues, 2nd ed.
    2003, VIII.3): on the circle |z| = r = exp(eta h / 2), between the zeros of 1 - p at 1 and at exp(eta h), 1 - p has
    no zero and winding number 0, so the coefficients c_k of positive powers of log(1 - p(z)) (its cepstrum, by FFT,
    times r^-k) are those of log(1 - G+(z)), and E[z^M] = (1 - G+(1)) / (1 - G+(z)) = exp(sum c_k - sum c_k z^k):
    P(M = 0) = exp(sum c_k). No iteration: a few FFTs of 4 x the lattice per queue.
    C = P(M > t) exp(eta t) at t = max S + 6 / eta, where the tail is exponential (Cramer-Lundberg)."""
    fewest, most = LATTICE_POINTS
    wanted = (s.max(axis=-1) + 12.0 / eta) / (s @ w) * LATTICE_STEPS_PER_SERVICE
    points = np.clip(2 ** np.ceil(np.log2(np.maximum(wanted, 1.0))), fewest, most).astype(int)
    out = np.zeros((3, *eta.shape))
    for n in np.unique(points):
        some = points == n
        out[:, some] = _lattice_wait(int(n), w, s[some], rate[some], scv, eta[some])
    return out[0], out[1], out[2]


def _lattice_wait(n: int, w: np.ndarray, s: np.ndarray, rate: np.ndarray, scv: float, eta: np.ndarray):
    """(probability of waiting, tail constant C, mean wait s) of ``_lindley`` on a lattice of n points (E,)."""
    top = s.max(axis=-1)
    span = top + 12.0 / eta
    h = span / (n - 1)
    values = np.broadcast_to(np.arange(n, dtype=float), (*h.shape, n))
    service = np.zeros((*h.shape, n))
    for share, each in zip(w, np.moveaxis(s, -1, 0), strict=True):
        at = (each / h)[..., None]
        service += share * _lattice(values, (values >= at).astype(float), (values >= at) * at)
    gaps = _gap_lattice(h, rate, scv, n)
    size = 1 << int(math.ceil(math.log2(4 * n)))
    # X = S - A: index i holds the value i - (n - 1)
    step = np.fft.irfft(np.fft.rfft(service, size) * np.fft.rfft(gaps[..., ::-1], size), size)[..., : 2 * n - 1]
    step = np.maximum(step, 0.0)
    step = step / step.sum(axis=-1, keepdims=True)
    # 1 - p(z) on the circle |z| = r = exp(eta h / 2), between its zeros at 1 and exp(eta h) (Lundberg's root)
    powers = np.arange(2 * n - 1) - (n - 1)
    tilt = np.exp(eta * h / 2.0)[..., None]
    factor = np.zeros((*h.shape, size))
    factor[..., powers % size] = ((powers == 0) - step) * tilt**powers
    spectrum = np.fft.fft(factor, axis=-1)
    cepstrum = np.fft.ifft(np.log(np.abs(spectrum)) + 1j * np.unwrap(np.angle(spectrum), axis=-1), axis=-1)
    ladder = np.zeros_like(cepstrum)
    ladder[..., 1 : size // 2] = cepstrum[..., 1 : size // 2] * tilt ** -np.arange(1.0, size // 2)
    at_one = ladder.sum(axis=-1)
    wait = np.maximum(np.fft.ifft(np.exp(at_one[..., None] - np.fft.fft(ladder, axis=-1)), axis=-1).real, 0.0)
    wait = wait / wait.sum(axis=-1, keepdims=True)
    where = np.ceil((top + 6.0 / eta) / h).astype(int)
    beyond = 1.0 - np.take_along_axis(np.cumsum(wait, axis=-1), where[..., None], axis=-1)[..., 0]
    lags = np.arange(size, dtype=float)
    return np.stack([1.0 - wait[..., 0], beyond * np.exp(eta * where * h), (wait @ lags) * h])


def _queue(w: np.ndarray, s: np.ndarray, rate: np.ndarray, c: np.ndarray, scv_arrival: float):
    """(stable, probability of waiting, tail decay per s, mean wait s, shift s) of G/G/c prefill queues, elementwise:
    the wait is 0 with probability ``p_wait``, else ``shift`` plus an exponential of rate ``decay`` (Lundberg's).

    c_a^2 <= 1: Allen-Cunneen's mean wait (Erlang C's M/M/c wait scaled by (c_a^2 + c_s^2) / 2) and the probability
    of waiting that gives the exponential tail that mean, no shift. c_a^2 > 1 (bursty): the c servers as one c-times
    faster server, its GI/G/1 wait from Lindley's recursion (``_lindley``): P(wait) = min(P, C) and the shift that puts
    the tail on C exp(-eta t), so P(W > t) = min(P, C exp(-eta t))."""
    mean = s @ w
    stable = rate * mean < c
    busy = stable & (mean > 0.0) & (rate > 0.0)
    safe_mean = np.where(mean > 0.0, mean, 1.0)
    safe_rate = np.where(busy, rate, 0.0)
    scv_s = ((s - mean[..., None]) ** 2 @ w) / safe_mean**2
    with np.errstate(divide="ignore", invalid="ignore"):
        p_c = _erlang_c(c, safe_rate * mean)
        wait = np.where(busy, p_c / (c / safe_mean - safe_rate) * (scv_arrival + scv_s) / 2.0, 0.0)
    fast = s / c[..., None]
    decay = _decay_per_s(w, fast, np.where(busy, rate, 1.0), scv_arrival)
    waits = busy & (wait > 0.0) & np.isfinite(decay)
    p_wait = np.minimum(1.0, np.where(waits, wait, 0.0) * np.where(waits, decay, 0.0))
    shift = np.zeros(np.shape(waits))
    if scv_arrival > 1.0 and waits.any():
        p, constant, mean_wait = _lindley(w, fast[waits], rate[waits], scv_arrival, decay[waits])
        p_wait, wait = np.array(p_wait, dtype=float), np.array(wait, dtype=float)
        p_wait[waits] = np.minimum(p, constant)
        shift[waits] = np.log(np.maximum(constant / p, 1.0)) / decay[waits]
        wait[waits] = mean_wait
    return stable, p_wait, np.where(waits, decay, np.inf), np.where(waits, wait, 0.0), shift


def _percentile(
    percentile: float, w: np.ndarray, t0: np.ndarray, p_wait, decay, shift, lag=0.0, unshifted=0.0
) -> np.ndarray:
    """Percentile of t0 + W + ``shift`` x [W > ``unshifted``] elementwise, t0 (..., k) for a share w of requests: the
    wait W is 0 with probability 1 - p_wait, else ``lag`` plus an exponential of rate ``decay`` (bisection).

    P(t0 + W + shift [W > u] > t) = P(W > g), g = max(min(t - t0, u), t - t0 - shift): up to u the wait is itself,
    beyond it the shift is added (u = 0: every positive wait carries the shift)."""
    tail = 1.0 - percentile / 100.0
    eta = np.where(p_wait > 0.0, decay, 1.0)
    shift, lag, unshifted = (
        np.broadcast_to(np.asarray(v, dtype=float), np.shape(p_wait)) for v in (shift, lag, unshifted)
    )

    def exceeded(t):
        gap = t[..., None] - t0
        g = np.maximum(np.minimum(gap, unshifted[..., None]), gap - shift[..., None])
        queued = p_wait[..., None] * np.exp(-np.maximum(g - lag[..., None], 0.0) * eta[..., None])
        return np.where(gap < 0, 1.0, queued) @ w <= tail

    lo = t0.min(axis=-1)
    hi = t0.max(axis=-1) + np.where(p_wait > 0.0, shift + lag + 50.0 / eta, 0.0)
    return _bisect(lo, hi, exceeded, 100)[1]


class QueueingTtft(TypedDict):
    """TTFT at load: ``ttft_s`` one per percentile, the prefill path's utilisation, the probability of waiting and
    the mean wait; ``decode_batch`` (mean sequences decoding) for an aggregated instance."""

    ttft_s: np.ndarray
    utilisation: float
    p_wait: float
    wait_s: float
    decode_batch: NotRequired[float]


def percentile_ttft_s(
    percentile: float,
    weights,
    service_s,
    ttft0_s,
    rate_per_s,
    servers=1,
    scv_arrival: float = 1.0,
    shift_s=0.0,
    overlap_s=0.0,
    unshifted_s=0.0,
) -> np.ndarray:
    """TTFT at a percentile of requests arriving at ``rate_per_s`` to a G/G/c prefill queue, elementwise.

    The queue of this module (exponential tail of Lundberg's decay rate from Allen-Cunneen's mean wait, or for bursty
    arrivals from the lattice GI/G/1 wait; see the module docstring), vectorised over setups: the one function that
    query tables, the enumeration oracle, fleets and ``disaggregated_ttft``/``aggregated_ttft`` compute a percentile
    TTFT with.

    Parameters
    ----------
    percentile : in (0, 100), e.g. 90.
    weights : (k,) shares of the request classes.
    service_s : (..., k) seconds one server is busy with a request of each class.
    ttft0_s : (..., k) TTFT of each class once its wait is over (its service plus what follows: the KV transfer, or
        the aggregated chunk schedule and the residual step).
    rate_per_s : (...) requests/s arriving to the c servers together.
    servers : (...) c, whole numbers >= 1.
    scv_arrival : c_a^2 of the gaps between arrivals (1 Poisson, > 1 bursty).
    shift_s : (...) seconds every wait beyond ``unshifted_s`` starts with (the aggregated schedule's half step).
    overlap_s : (...) seconds of the work found ahead that end with the step under way (aggregated: that step's
        residual, already in ``ttft0_s``): the wait that counts is the work beyond it, P(W > t + overlap_s)
        (``_beyond``).
    unshifted_s : (...) waits (work found ahead, s) up to which ``shift_s`` does not apply (aggregated: the work of
        one prompt, the one in service: a prompt that finds only it ahead goes whole into the next step).

    Returns
    -------
    (...) seconds; inf where the queue is unstable (utilisation >= 1).
    """
    w = np.asarray(weights, dtype=float)
    w = w / w.sum()
    s, t0 = np.asarray(service_s, dtype=float), np.asarray(ttft0_s, dtype=float)
    shape = np.broadcast_shapes(s.shape[:-1], t0.shape[:-1], np.shape(rate_per_s), np.shape(servers), np.shape(shift_s))
    s, t0 = np.broadcast_to(s, (*shape, len(w))), np.broadcast_to(t0, (*shape, len(w)))
    rate = np.broadcast_to(np.asarray(rate_per_s, dtype=float), shape)
    c = np.broadcast_to(np.asarray(servers, dtype=float), shape)
    shift = np.broadcast_to(np.asarray(shift_s, dtype=float), shape)
    stable, p_wait, decay, _, lag = _queue(w, s, rate, c, scv_arrival)
    overlap = np.broadcast_to(np.asarray(overlap_s, dtype=float), shape)
    p_wait, lag = _beyond(p_wait, decay, lag, overlap)
    unshifted = np.maximum(np.asarray(unshifted_s, dtype=float) - overlap, 0.0)
    return np.where(stable, _percentile(percentile, w, t0, p_wait, decay, shift, lag, unshifted), np.inf)


def _beyond(p_wait, decay, lag, overlap):
    """(probability, lag) of the wait beyond ``overlap`` seconds, max(0, W - overlap), elementwise, for a wait W that
    is 0 with probability 1 - p_wait, else ``lag`` plus an exponential of rate ``decay``: the lag absorbs the overlap
    first, the rest thins the tail by exp(-decay x rest)."""
    rest = np.maximum(overlap - lag, 0.0)
    with np.errstate(invalid="ignore"):
        thinned = np.where(rest > 0.0, p_wait * np.exp(-decay * rest), p_wait)
    return thinned, np.maximum(lag - overlap, 0.0)


def max_rate_per_s(
    percentile: float, limit_s, weights, service_s, ttft0_s, servers=1, scv_arrival: float = 1.0, shift_s=0.0
) -> np.ndarray:
    """Highest arrival rate (requests/s, elementwise) whose ``percentile_ttft_s`` is within ``limit_s``: the prefill
    path's capacity at an SLO, 0 where even an idle queue misses it. TTFT rises with the rate, so the rate is found
    by bisection below the stable rate c / mean service, to 2^-45 of it, on the side that meets the limit."""
    w = np.asarray(weights, dtype=float)
    w = w / w.sum()
    s = np.asarray(service_s, dtype=float)
    limit = np.asarray(limit_s, dtype=float) * (1 + 1e-12)
    top = np.asarray(servers, dtype=float) / np.maximum(s @ w, 1e-300)
    top = np.broadcast_to(top, np.broadcast_shapes(top.shape, limit.shape, np.shape(ttft0_s)[:-1]))

    def too_fast(rate):
        return percentile_ttft_s(percentile, w, s, ttft0_s, rate, servers, scv_arrival, shift_s) > limit

    rate = _bisect(np.zeros_like(top), top.copy(), too_fast, 45)[0]
    return np.where(too_fast(np.zeros_like(top)), 0.0, rate)


def response_percentiles(
    weights, service_s, p_wait: float, decay_per_s: float, percentiles=PERCENTILES, shift_s: float = 0.0
) -> np.ndarray:
    """Percentiles of wait + service: the wait is 0 with probability 1 - p_wait, else ``shift_s`` plus an exponential
    of rate ``decay_per_s``; the service is ``service_s[k]`` for a share ``weights[k]`` of requests (bisection)."""
    w = np.asarray(weights, dtype=float) / np.sum(weights)
    if decay_per_s <= 0.0:
        return np.full(len(percentiles), math.inf)
    t0, p, eta, shift = (np.asarray(v, dtype=float) for v in (service_s, p_wait, decay_per_s, shift_s))
    return np.array([float(_percentile(q, w, t0, p, eta, shift)) for q in percentiles])


def _wait_tail(servers: int, weights, service_s, arrivals: Arrivals) -> tuple[float, float, float, float]:
    """(probability of waiting, tail decay per s, mean wait s, shift s) of one G/G/c prefill queue (``_queue``)."""
    w = np.asarray(weights, dtype=float) / np.sum(weights)
    s = np.asarray(service_s, dtype=float)
    rate, c = np.asarray(arrivals.rate_per_s, dtype=float), np.asarray(float(servers))
    stable, p_wait, decay, wait, shift = _queue(w, s, rate, c, arrivals.scv)
    if not stable:
        return 1.0, 0.0, math.inf, 0.0
    return float(p_wait), float(decay), float(wait), float(shift)


def prefill_classes(
    model: ModelSpec,
    gpu: GpuSpec,
    preset: Preset,
    weight_bits: int,
    layout: ev.Layout,
    workload: rq.Workload,
    link_bytes_per_s,
    hop_latency_s: float = 0.0,
    draft: ModelSpec | None = None,
    draft_weight_bits: int = ev.DRAFT_WEIGHT_BITS,
) -> tuple[np.ndarray, np.ndarray]:
    """(service (..., k), TTFT once served (..., k)) of a prefill instance at batch 1 per request class, elementwise
    over layouts: ``requests.prefill_step`` of one prompt, then its KV transfer; with a ``draft`` the instance
    prefills it too and sends its KV cache with the target's (as ``requests.prefill_figures``)."""
    service, ttft0 = [], []
    for i, p in workload.classes:
        step = rq.prefill_step(model, gpu, preset, weight_bits, layout, 1.0, i, p).step_time_s
        transfer = rq.kv_transfer_s(model, layout, i - p, link_bytes_per_s, hop_latency_s)
        if draft is not None:
            d_layout = layout.for_draft(draft)
            step = step + rq.prefill_step(draft, gpu, preset, draft_weight_bits, d_layout, 1.0, i, p).step_time_s
            transfer = transfer + rq.kv_transfer_s(draft, layout, i - p, link_bytes_per_s)
        service.append(np.asarray(step, dtype=float))
        ttft0.append(service[-1] + transfer)
    both = np.broadcast_arrays(*service, *ttft0)
    return np.stack(both[: len(service)], axis=-1), np.stack(both[len(service) :], axis=-1)


def prefill_slo_rate_per_s(
    percentile: float,
    limit_s: float,
    model: ModelSpec,
    gpu: GpuSpec,
    preset: Preset,
    weight_bits: int,
    layout: ev.Layout,
    workload: rq.Workload,
    servers,
    link_bytes_per_s,
    hop_latency_s: float = 0.0,
    scv_arrival: float = 1.0,
    draft: ModelSpec | None = None,
) -> np.ndarray:
    """Requests/s that ``servers`` prefill instances of ``layout`` (batch 1) take with the TTFT ``percentile`` within
    ``limit_s``, elementwise over layouts and instance counts (``prefill_classes``, ``max_rate_per_s``; ``draft``:
    the instances prefill it too)."""
    args = (model, gpu, preset, weight_bits, layout, workload, link_bytes_per_s, hop_latency_s, draft)
    service, ttft0 = prefill_classes(*args)
    return max_rate_per_s(percentile, limit_s, workload._w(), service, ttft0, servers, scv_arrival)


def disaggregated_ttft(
    model: ModelSpec,
    preset: Preset,
    weight_bits: int,
    workload: rq.Workload,
    prefill: tuple[GpuSpec, ev.Layout, int],
    decode: tuple[GpuSpec, ev.Layout],
    arrivals: Arrivals,
    percentiles=PERCENTILES,
    draft: ModelSpec | None = None,
    draft_weight_bits: int = ev.DRAFT_WEIGHT_BITS,
) -> QueueingTtft:
    """TTFT percentiles of x prefill instances (prefill = (gpu, layout, x), prefill batch 1) as a G/G/x queue.

    Service time and TTFT at no load of each class from ``prefill_classes`` over the link ``requests`` picks for the
    pair (``draft``: the instances prefill it too); the KV transfer adds to TTFT after the queue. Returns ttft_s (one
    per percentile), utilisation, p_wait, mean wait_s."""
    p_gpu, p_layout, x = prefill
    d_gpu, d_layout = decode
    same = bool(rq.shares_domain(p_gpu, d_gpu, p_layout.n_gpus, d_layout.n_gpus))
    hop = p_gpu.intra_hop_latency_s if same else max(p_gpu.inter_hop_latency_s, d_gpu.inter_hop_latency_s)
    link = rq.kv_link_bytes_per_s(p_gpu, d_gpu, same)
    args = (model, p_gpu, preset, weight_bits, p_layout, workload, link, hop, draft, draft_weight_bits)
    service, ttft0 = prefill_classes(*args)
    w = workload._w()
    p_wait, decay, wait, shift = _wait_tail(x, w, service, arrivals)
    return {
        "ttft_s": response_percentiles(w, ttft0, p_wait, decay, percentiles, shift),
        "utilisation": arrivals.rate_per_s * float(service @ w) / x,
        "p_wait": p_wait,
        "wait_s": wait,
    }


def mean_decode_batch(
    model: ModelSpec,
    gpu: GpuSpec,
    preset: Preset,
    weight_bits: int,
    layout: ev.Layout,
    workload: rq.Workload,
    chunk_tokens: int,
    rate_per_s: float,
    aggregated: float = 1.0,
    spec: rq.Speculation | None = None,
) -> float:
    """Sequences decoding at once in an aggregated instance (``aggregated`` 0: a decode instance, its steps decode
    only) at ``rate_per_s``: the fixed point of Little's law B = rate * O * TPOT(B), TPOT the steady-state step
    (``requests.tpot_step``, its speculative rounds with ``spec``); inf when it has none."""
    b = 1.0
    for _ in range(200):
        step = rq.tpot_step(model, gpu, preset, weight_bits, layout, b, workload, chunk_tokens, aggregated, spec)
        tpot = float(step.step_time_s)
        nxt = max(rate_per_s * workload.mean_osl * tpot, 1.0)
        if abs(nxt - b) < 1e-9 * b:
            return nxt
        if nxt > 1e7:
            return math.inf
        b = nxt
    return b


def _aggregated_parts(model, gpu, preset, weight_bits, layout, batch, workload: rq.Workload, chunk_tokens, spec=None):
    """(work (..., k), TTFT once at the head (..., k), shift (...), mean step (...)) of an aggregated instance's
    prompt queue at a mean decode batch, elementwise over layouts, batches and chunks (chunk 0: a whole prompt of the
    longest class per step). A cached prefix is not work: a prompt's share is its I - P new tokens. Speculating
    (``spec``), a step is a round: the mean step is the mean TPOT times E."""
    given = np.asarray(chunk_tokens, dtype=float)
    mean_token = rq.tpot_step(model, gpu, preset, weight_bits, layout, batch, workload, given, 1.0, spec).step_time_s
    mean_step = mean_token * rq.tokens_per_round(spec)
    return _served_parts(model, gpu, preset, weight_bits, layout, batch, workload, chunk_tokens, mean_step, spec)


def _served_parts(
    model, gpu, preset, weight_bits, layout, batch, workload: rq.Workload, chunk_tokens, mean_step, spec=None
):
    """``_aggregated_parts`` with the prompt's steps at decode batch ``batch`` and the step under way when it
    arrives a ``mean_step`` (the time-average step: Poisson arrivals see time averages)."""
    batch = np.asarray(batch, dtype=float)
    given = np.asarray(chunk_tokens, dtype=float)
    chunk = np.where(given > 0, given, float(max(workload.max_isl, 1)))
    # a step carrying a full chunk: the schedule of a prompt of exactly one chunk (``ttft_aggregated_s``, n = 1)
    prompt = (chunk, chunk * (chunk - 1.0) / 2.0, chunk)
    full = np.asarray(rq.loaded_gap_s(model, gpu, preset, weight_bits, layout, batch, *prompt, spec), dtype=float)
    work, schedule = [], []
    for i, p in workload.classes:
        one = rq.Workload((i,), (1,), (1.0,), (p,))
        t = rq.ttft_aggregated_s(model, gpu, preset, weight_bits, layout, batch, one, given, spec)
        # a prompt longer than a chunk fills whole chunks of its own attention context; shorter ones share a chunk
        new = i - p
        work.append(np.where(new >= chunk, t / np.ceil(new / chunk), full) * new / chunk)
        schedule.append(t)
    mean_step = np.asarray(mean_step, dtype=float)
    shape = np.broadcast_shapes(full.shape, mean_step.shape, *(np.shape(t) for t in schedule))
    stack = [np.stack(np.broadcast_arrays(*v, np.zeros(shape))[:-1], axis=-1) for v in (work, schedule)]
    residual = np.broadcast_to(mean_step / 2.0, shape)
    return (
        stack[0],
        stack[1] + residual[..., None],
        np.broadcast_to(full / 2.0, shape),
        np.broadcast_to(mean_step, shape),
    )


BUSY_PERIOD_ROUNDS = 3
"""Rounds of the fixed point between a percentile's wait and the decode batch it is served at
(``_busy_period_percentile_s``), from the time-average batch upwards; on the grid of docs/physics/queueing.md a
fourth round moves no percentile by more than 0.3% (two rounds: 1.3%)."""


def _busy_period_batch(batch, busy_batch, utilisation, osl, wait_steps) -> np.ndarray:
    """Decode batch the wait of a prompt that waits ``wait_steps`` chunk steps is served at, elementwise.

    The sequences decoding at a step are the prompts finished in the last O steps, and a step of a busy period (every
    step carries a full chunk) finishes chunk / I of them; the steps of that window before the busy period finish
    them at the time-average share B / B_busy, so k steps into a busy period the batch is
    B + (B_busy - B) min(k, O) / O, B_busy = O chunk / I. A prompt that finds n steps of work ahead arrives on average
    n / (1 - rho) steps after the queue was last empty (the work's path, reversed in time, drains from n to 0 at the
    net rate 1 - rho) and waits n steps more; that work was built up and is served over the whole span, so its
    steps are priced at the mean batch over the span: K / (2 O) of the way to B_busy for a span K <= O steps,
    1 - O / (2 K) beyond."""
    batch, busy = np.asarray(batch, dtype=float), np.asarray(busy_batch, dtype=float)
    drain = np.maximum(1.0 - np.asarray(utilisation, dtype=float), 1e-12)
    span = np.asarray(wait_steps, dtype=float) * (1.0 + 1.0 / drain)
    ramp = np.where(span <= osl, span / (2.0 * osl), 1.0 - osl / (2.0 * np.maximum(span, osl)))
    return batch + np.maximum(busy - batch, 0.0) * ramp


def _busy_period_percentile_s(
    percentile: float,
    setup: tuple[ModelSpec, GpuSpec, Preset, int, ev.Layout],
    batch,
    workload: rq.Workload,
    chunk_tokens,
    parts,
    rate,
    scv_arrival: float,
    spec: rq.Speculation | None = None,
) -> np.ndarray:
    """TTFT at a percentile of the aggregated prompt queue (``percentile_ttft_s``) with its work, chunk schedule and
    half steps priced at the decode batch of the busy period that percentile waits in (``_busy_period_batch``), a
    fixed point from ``batch`` (the time-average B of Little's law, which also fixes rho and the rate). The wait in
    steps is the percentile less the mean schedule at B, over a step carrying a full chunk at B; for a mix of classes
    B_busy = mean O x chunk / mean new prompt tokens; the step under way at its arrival stays the time-average one.
    Speculating, a sequence decodes for O / E rounds. setup = (model, gpu, preset, weight_bits, layout); parts =
    ``_aggregated_parts`` at B."""
    w = workload._w()
    work, head, shift, mean_step = parts
    chunk = np.asarray(chunk_tokens, dtype=float)
    chunk = np.where(chunk > 0, chunk, float(max(workload.max_isl, 1)))
    rounds = workload.mean_osl / rq.tokens_per_round(spec)
    busy = rounds * chunk / max(workload.mean_computed_isl, 1.0)
    utilisation = np.asarray(rate, dtype=float) * (work @ w)
    residual = mean_step / 2.0  # the step under way at an arrival ends the work it holds (``_beyond``)
    ttft = percentile_ttft_s(percentile, w, work, head, rate, 1, scv_arrival, shift, residual, work @ w)
    for _ in range(BUSY_PERIOD_ROUNDS):
        steps = np.maximum(ttft - head @ w, 0.0) / (2.0 * shift)
        served_at = _busy_period_batch(batch, busy, utilisation, rounds, steps)
        work_b, head_b, shift_b, _ = _served_parts(*setup, served_at, workload, chunk_tokens, mean_step, spec)
        ttft = percentile_ttft_s(percentile, w, work_b, head_b, rate, 1, scv_arrival, shift_b, residual, work_b @ w)
    return ttft


def aggregated_utilisation(
    model, gpu, preset, weight_bits, layout, batch, workload: rq.Workload, chunk_tokens, spec=None
) -> np.ndarray:
    """Share of an aggregated instance's chunk budget its prompts use when loaded to a mean of ``batch`` sequences
    decoding: rho = rate x E[work], rate = B / (O TPOT(B)) (``aggregated_percentile_ttft_s``'s load), elementwise."""
    setup = (model, gpu, preset, weight_bits, layout)
    work, _, _, mean_step = _aggregated_parts(*setup, batch, workload, chunk_tokens, spec)
    return _arrival_rate(batch, workload, mean_step, spec) * (work @ workload._w())


def _arrival_rate(batch, workload: rq.Workload, mean_step, spec: rq.Speculation | None) -> np.ndarray:
    """Requests/s that keep a mean of ``batch`` sequences decoding (Little's law: B / (O TPOT), TPOT = the mean step
    over the tokens per step)."""
    return np.asarray(batch, dtype=float) * rq.tokens_per_round(spec) / (workload.mean_osl * mean_step)


def aggregated_percentile_ttft_s(
    percentile: float,
    model: ModelSpec,
    gpu: GpuSpec,
    preset: Preset,
    weight_bits: int,
    layout: ev.Layout,
    batch,
    workload: rq.Workload,
    chunk_tokens,
    scv_arrival: float = 1.0,
    spec: rq.Speculation | None = None,
) -> np.ndarray:
    """TTFT at a percentile of an aggregated instance loaded to a mean of ``batch`` sequences decoding, elementwise
    over layouts, batches and chunks: requests arrive at rate = B / (O TPOT(B)) (Little's law; the instance's
    throughput B / TPOT), the chunk schedule's prompt queue as in ``aggregated_ttft`` (its rounds with ``spec``)."""
    setup = (model, gpu, preset, weight_bits, layout)
    parts = _aggregated_parts(*setup, batch, workload, chunk_tokens, spec)
    rate = _arrival_rate(batch, workload, parts[3], spec)
    args = (setup, batch, workload, chunk_tokens, parts, rate, scv_arrival, spec)
    return _busy_period_percentile_s(percentile, *args)


def aggregated_ttft(
    model: ModelSpec,
    gpu: GpuSpec,
    preset: Preset,
    weight_bits: int,
    layout: ev.Layout,
    workload: rq.Workload,
    chunk_tokens: int,
    arrivals: Arrivals,
    percentiles=PERCENTILES,
    spec: rq.Speculation | None = None,
) -> QueueingTtft:
    """TTFT percentiles of one aggregated instance with chunked prefill (its prompt path an M/G/1-like queue).

    Each percentile's wait is priced at the decode batch of the busy period it waits in
    (``_busy_period_percentile_s``). Returns ttft_s (one per percentile), and at the mean decode batch: utilisation
    (of the chunk budget), decode_batch (mean sequences decoding), p_wait and mean wait_s. ``spec``: the instance
    speculates (one gamma), its steps are rounds."""
    rate = arrivals.rate_per_s
    batch = mean_decode_batch(model, gpu, preset, weight_bits, layout, workload, chunk_tokens, rate, 1.0, spec)
    if not math.isfinite(batch):
        inf = np.full(len(percentiles), math.inf)
        return {"ttft_s": inf, "utilisation": math.inf, "decode_batch": batch, "p_wait": 1.0, "wait_s": math.inf}
    setup = (model, gpu, preset, weight_bits, layout)
    parts = _aggregated_parts(*setup, batch, workload, chunk_tokens, spec)
    work, w = parts[0], workload._w()
    p_wait, _, wait, _ = _wait_tail(1, w, work, arrivals)
    args = (setup, batch, workload, chunk_tokens, parts, arrivals.rate_per_s, arrivals.scv, spec)
    ttft = [float(_busy_period_percentile_s(q, *args)) for q in percentiles]
    return {
        "ttft_s": np.array(ttft),
        "utilisation": arrivals.rate_per_s * float(work @ w),
        "decode_batch": batch,
        "p_wait": p_wait,
        "wait_s": wait,
    }


def mixed_step(
    model: ModelSpec,
    gpu: GpuSpec,
    preset: Preset,
    weight_bits: int,
    layout: ev.Layout,
    decode,
    prompt_tokens,
    prompt_attention,
    prompt_kv_tokens,
) -> ev.StepFigures:
    """One step of ``decode`` >= 1 sequences decoding at layout.context plus prompt pieces: their tokens, attention
    context summed over them and KV tokens written or re-read (the step ``requests.tpot_step`` and
    ``ttft_aggregated_s`` price), for a simulator that knows each step's pieces."""
    return rq._loaded_step(
        model, gpu, preset, weight_bits, layout, decode, prompt_tokens, prompt_attention, prompt_kv_tokens
    )
