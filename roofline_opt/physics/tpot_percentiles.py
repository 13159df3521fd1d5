"""TPOT percentiles at load: a request's decode window as a busy period (docs/physics/queueing.md).

The evaluator's TPOT is the mean step of an instance at a steady decode batch B. Under random arrivals the batch and
the prompt work come and go, and a request's TPOT is its own window: the O steps from its first token to its last,
over O. Near B the mean step is linear in the batch, s(b) = a + c b (``requests.tpot_step``: decode tokens' KV reads
and, aggregated, the prompt tokens each decoding sequence brings, I / O per step), so the window's time is

    T = O a + (the work c O of every request served in the window),

the other requests' work arriving with them. That is a busy period started by the work O a: it ends when the work
that arrives during it is done. Its diffusion limit is the first passage of a Brownian motion with drift
-(1 - rho) and variance rate sigma^2 from O a to 0, an inverse Gaussian of mean O a / (1 - rho) and shape
(O a)^2 / sigma^2 (rho = lambda E[W] the load of that work, sigma^2 = lambda (E[W^2] + (c_a^2 - 1) E[W]^2) for
arrivals of c_a^2; for Poisson arrivals the mean and variance are those of the M/G/1 busy period started by O a,
Takacs). Its mean over requests is s(B) again: the evaluator's TPOT is the mean of this distribution.

- aggregated (``aggregated_percentile_tpot_s``): s(b) the prefill cycle's mean step; a request of class j brings
  W_j = O_j c_kv + N_j pi, c_kv the slope of the decode-only step and pi the rest of the slope per new prompt token
  (the mean over classes is c O);
- disaggregated decode instances (``decode_percentile_tpot_s``): s(b) the decode-only step, W_j = O_j c.

Arrivals at rate lambda = B / (O s(B)) (Little's law at the mean batch B). Not modelled: the prompt work already
queued when a request's window starts (it makes short windows slower), memory limits on the batch.

Pure numpy/math; every step time comes from ``requests``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from roofline_opt.physics import evaluator as ev
from roofline_opt.physics import queueing as qm
from roofline_opt.physics import requests as rq
from roofline_opt.physics.specs import GpuSpec, ModelSpec, Preset

BISECTION_ROUNDS = 60
"""Halvings of the bracket of a TPOT percentile: 2^-60 of its upper end, below float rounding of the figures."""

SLOPE_STEP = 1e-4
"""Relative batch step of the central difference that gives the mean step's slope c at B."""

_ERFC = (
    -1.26551223,
    1.00002368,
    0.37409196,
    0.09678418,
    -0.18628806,
    0.27886807,
    -1.13520398,
    1.48851587,
    -0.82215223,
    0.17087277,
)
"""Chebyshev fit of erfc (Press et al., Numerical Recipes, 2nd ed., section 6.2, ``erfcc``; fractional error below
1.2e-7 everywhere): erfc(x) = t exp(-x^2 + P(t)), t = 1 / (1 + x / 2), x >= 0."""


def _log_erfc_rest(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(t, P(t)) of ``_ERFC`` for x >= 0, so erfc(x) = t exp(-x^2 + P(t)) without forming exp(-x^2) alone."""
    t = 1.0 / (1.0 + 0.5 * x)
    poly = np.zeros_like(t)
    for coefficient in reversed(_ERFC):
        poly = poly * t + coefficient
    return t, poly


def _normal_cdf(z: np.ndarray) -> np.ndarray:
    """Standard normal CDF elementwise (``_ERFC``)."""
    x = np.abs(z) / math.sqrt(2.0)
    t, poly = _log_erfc_rest(x)
    upper = 0.5 * t * np.exp(-x * x + poly)
    return np.where(z < 0.0, upper, 1.0 - upper)


def inverse_gaussian_cdf(t, mean, shape) -> np.ndarray:
    """CDF of the inverse Gaussian distribution of ``mean`` and ``shape`` at ``t`` > 0, elementwise.

    Phi(sqrt(k / t) (t / mu - 1)) + exp(2 k / mu) Phi(-sqrt(k / t) (t / mu + 1)); the second term is formed as
    t_c exp(-(k / 2t) (t / mu - 1)^2 + P(t_c)) / 2 (``_ERFC``), which never overflows."""
    t, mean, shape = (np.asarray(v, dtype=float) for v in (t, mean, shape))
    safe = np.maximum(t, 1e-300)
    root = np.sqrt(shape / safe)
    first = _normal_cdf(root * (safe / mean - 1.0))
    tc, poly = _log_erfc_rest(root * (safe / mean + 1.0) / math.sqrt(2.0))
    second = 0.5 * tc * np.exp(-shape / (2.0 * safe) * (safe / mean - 1.0) ** 2 + poly)
    return np.where(t > 0.0, np.minimum(first + second, 1.0), 0.0)


class _Windows(NamedTuple):
    """Per-class decode windows of a batch of setups: shares w (k,), output tokens O (k,), inverse Gaussian mean and
    shape of each window (..., k), and where a steady state exists (...)."""

    w: np.ndarray
    o: np.ndarray
    mean_s: np.ndarray
    shape_s: np.ndarray
    stable: np.ndarray

    def share_within(self, tpot_s) -> np.ndarray:
        """Share of requests whose TPOT is at most ``tpot_s`` (...), elementwise."""
        t = np.asarray(tpot_s, dtype=float)[..., None] * self.o
        return inverse_gaussian_cdf(t, self.mean_s, self.shape_s) @ self.w


def _windows(weights, osl, intercept_s, work_s, rate_per_s, scv_arrival: float, rounds_var_s2=None) -> _Windows:
    """The windows of ``window_percentile_tpot_s``'s arguments (module docstring)."""
    w = np.asarray(weights, dtype=float)
    w = w / w.sum()
    o = np.asarray(osl, dtype=float)
    a = np.asarray(intercept_s, dtype=float)
    work = np.asarray(work_s, dtype=float)
    rate = np.asarray(rate_per_s, dtype=float)
    shape = np.broadcast_shapes(a.shape, work.shape[:-1], rate.shape)
    a, rate = np.broadcast_to(a, shape), np.broadcast_to(rate, shape)
    work = np.broadcast_to(work, (*shape, len(w)))
    mean_work = work @ w
    rho = rate * mean_work
    variance_rate = rate * ((work**2) @ w + (scv_arrival - 1.0) * mean_work**2)
    stable = (rho < 1.0) & (a > 0.0)
    drain = np.where(stable, 1.0 - rho, 1.0)
    start = np.where(stable, a, 1.0)[..., None] * o
    spread = np.maximum(variance_rate, 1e-300)[..., None]
    mean, shape = start / drain[..., None], start**2 / spread
    if rounds_var_s2 is not None:
        # the same mean, the variance of the rounds a window takes added: shape = mean^3 / variance
        shape = mean**3 / (mean**3 / shape + np.asarray(rounds_var_s2, dtype=float))
    return _Windows(w, o, mean, shape, stable)


def window_percentile_tpot_s(
    percentile: float, weights, osl, intercept_s, work_s, rate_per_s, scv_arrival: float = 1.0, rounds_var_s2=None
) -> np.ndarray:
    """TPOT at a percentile of requests whose decode windows are busy periods, elementwise (module docstring).

    Parameters
    ----------
    percentile : in (0, 100), e.g. 90.
    weights : (k,) shares of the request classes.
    osl : (k,) output tokens of each class, O_j.
    intercept_s : (...) a, the mean step's value at batch 0 of its linearisation at B: a window of O_j steps starts
        with the work O_j a.
    work_s : (..., k) W_j, the seconds a request of class j adds to the steps of the windows it is served in.
    rate_per_s : (...) requests/s arriving.
    scv_arrival : c_a^2 of the gaps between arrivals.
    rounds_var_s2 : (..., k) or None, speculating: the variance (s^2) a window's time gains from the number of rounds
        its O_j tokens take (``_rounds_variance_s2``), added to the busy period's.

    Returns
    -------
    (...) seconds per output token; inf where the work's load rho >= 1 or a <= 0 (no steady state).
    """
    windows = _windows(weights, osl, intercept_s, work_s, rate_per_s, scv_arrival, rounds_var_s2)
    tail = percentile / 100.0
    per_token_mean = windows.mean_s / windows.o
    per_token_sd = np.sqrt(windows.mean_s**3 / windows.shape_s) / windows.o
    hi = np.max(per_token_mean + 10.0 * per_token_sd, axis=-1)
    for _ in range(200):
        short = windows.share_within(hi) < tail
        if not short.any():
            break
        hi = np.where(short, 2.0 * hi, hi)
    lo = np.zeros_like(hi)
    for _ in range(BISECTION_ROUNDS):
        mid = (lo + hi) / 2.0
        up = windows.share_within(mid) >= tail
        lo, hi = np.where(up, lo, mid), np.where(up, mid, hi)
    return np.where(windows.stable, hi, np.inf)


def linearised_step(step, batch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(s(B), slope c, intercept a = s(B) - c B) of a mean-step function of the batch at B (central difference,
    elementwise); 1 - a / s(B) is the load rho of the work the requests bring."""
    batch = np.asarray(batch, dtype=float)
    h = SLOPE_STEP * np.maximum(batch, 1.0)
    value = np.asarray(step(batch), dtype=float)
    slope = (np.asarray(step(batch + h), dtype=float) - np.asarray(step(batch - h), dtype=float)) / (2.0 * h)
    return value, slope, value - slope * batch


def _rounds_variance_s2(spec: rq.Speculation | None, mean_token_s, osl: np.ndarray):
    """Speculating, the variance (s^2, (..., k)) of a window's time from the rounds its O tokens take: a round yields
    X tokens (mean E, variance V; ``Speculation``), so O tokens take about O / E rounds of variance O V / E^3 (renewal
    theory), each a round of E x TPOT seconds: O V TPOT^2 / E. None without a draft."""
    if spec is None:
        return None
    e = np.asarray(spec.tokens_per_round, dtype=float)
    per_token = np.asarray(spec.tokens_per_round_variance, dtype=float) / e * np.asarray(mean_token_s) ** 2
    return per_token[..., None] * osl


def _aggregated_windows(
    model, gpu, preset, weight_bits, layout, batch, workload: rq.Workload, chunk_tokens, scv, spec=None
):
    """The decode windows of an aggregated instance at mean batch ``batch`` (``aggregated_percentile_tpot_s``)."""
    args = (model, gpu, preset, weight_bits, layout)
    mean, slope, intercept = linearised_step(
        lambda b: rq.tpot_step(*args, b, workload, chunk_tokens, 1.0, spec).step_time_s, batch
    )
    kv_slope = linearised_step(lambda b: rq.tpot_step(*args, b, workload, chunk_tokens, 0.0, spec).step_time_s, batch)[
        1
    ]
    o = np.asarray(workload.osl, dtype=float)
    new = np.asarray([i - p for i, p in workload.classes], dtype=float)
    per_token = (slope - kv_slope)[..., None] * workload.mean_osl / max(workload.mean_computed_isl, 1e-300)
    work = kv_slope[..., None] * o + per_token * new
    rate = np.asarray(batch, dtype=float) / (workload.mean_osl * mean)
    return (workload._w(), o, intercept, work, rate, scv, _rounds_variance_s2(spec, mean, o))


def aggregated_percentile_tpot_s(
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
    """TPOT at a percentile of an aggregated instance loaded to a mean of ``batch`` sequences decoding, elementwise
    over layouts, batches and chunks: requests arrive at B / (O TPOT(B)) (Little's law), each bringing its decode
    tokens' KV reads and its prompt's share of the prefill cycle, no window slower than the chunk budget allows
    (module docstring; ``spec``: its steps are speculative rounds)."""
    setup = (model, gpu, preset, weight_bits, layout, batch, workload, chunk_tokens)
    tpot = window_percentile_tpot_s(percentile, *_aggregated_windows(*setup, scv_arrival, spec))
    return np.minimum(tpot, _chunk_bound_s(*setup, spec))


def aggregated_tpot_within(
    percentile: float,
    limit_s: float,
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
    """Whether ``aggregated_percentile_tpot_s`` is within ``limit_s``, elementwise, from the windows' CDF at the
    limit (no search for the percentile)."""
    setup = (model, gpu, preset, weight_bits, layout, batch, workload, chunk_tokens)
    windows = _windows(*_aggregated_windows(*setup, scv_arrival, spec))
    reached = windows.stable & (windows.share_within(limit_s) >= percentile / 100.0)
    return reached | (_chunk_bound_s(*setup, spec) <= limit_s)


def _chunk_bound_s(
    model, gpu, preset, weight_bits, layout, batch, workload: rq.Workload, chunk_tokens, spec=None
) -> np.ndarray:
    """The slowest an aggregated instance's steps get: every step carrying a full chunk beside the batch a long busy
    period of the prompt queue settles at, O chunk / I (each step finishes chunk / I prompts, each decoding O
    steps; speculating O / E rounds of E tokens, the round's time over E per token), or the mean batch if higher.
    Prompts that arrive faster than that wait for prefill (TTFT) instead of slowing the steps, so no window is slower
    per token."""
    given = np.asarray(chunk_tokens, dtype=float)
    chunk = np.where(given > 0, given, float(max(workload.max_isl, 1)))
    tokens = rq.tokens_per_round(spec)
    rounds = workload.mean_osl / tokens
    busy = np.maximum(np.asarray(batch, dtype=float), rounds * chunk / max(workload.mean_computed_isl, 1.0))
    prompt = (chunk, chunk * (chunk - 1.0) / 2.0, chunk)
    return (
        np.asarray(rq.loaded_gap_s(model, gpu, preset, weight_bits, layout, busy, *prompt, spec), dtype=float) / tokens
    )


def _decode_windows(model, gpu, preset, weight_bits, layout, batch, workload: rq.Workload, scv, spec=None):
    """The decode windows of a decode instance at mean batch ``batch`` (``decode_percentile_tpot_s``)."""
    args = (model, gpu, preset, weight_bits, layout)
    mean, slope, intercept = linearised_step(
        lambda b: rq.tpot_step(*args, b, workload, 0.0, 0.0, spec).step_time_s, batch
    )
    o = np.asarray(workload.osl, dtype=float)
    rate = np.asarray(batch, dtype=float) / (workload.mean_osl * mean)
    return (workload._w(), o, intercept, slope[..., None] * o, rate, scv, _rounds_variance_s2(spec, mean, o))


def decode_percentile_tpot_s(
    percentile: float,
    model: ModelSpec,
    gpu: GpuSpec,
    preset: Preset,
    weight_bits: int,
    layout: ev.Layout,
    batch,
    workload: rq.Workload,
    scv_arrival: float = 1.0,
    spec: rq.Speculation | None = None,
) -> np.ndarray:
    """TPOT at a percentile of a disaggregated decode instance loaded to a mean of ``batch`` sequences, elementwise:
    its steps decode only, each request bringing its decode tokens' KV reads (module docstring; ``spec``: its steps
    are speculative rounds)."""
    setup = (model, gpu, preset, weight_bits, layout, batch, workload)
    return window_percentile_tpot_s(percentile, *_decode_windows(*setup, scv_arrival, spec))


def decode_tpot_within(
    percentile: float,
    limit_s: float,
    model: ModelSpec,
    gpu: GpuSpec,
    preset: Preset,
    weight_bits: int,
    layout: ev.Layout,
    batch,
    workload: rq.Workload,
    scv_arrival: float = 1.0,
    spec: rq.Speculation | None = None,
) -> np.ndarray:
    """Whether ``decode_percentile_tpot_s`` is within ``limit_s``, elementwise, from the windows' CDF at the
    limit."""
    setup = (model, gpu, preset, weight_bits, layout, batch, workload)
    windows = _windows(*_decode_windows(*setup, scv_arrival, spec))
    return windows.stable & (windows.share_within(limit_s) >= percentile / 100.0)


def tpot_at_rate_s(
    model: ModelSpec,
    gpu: GpuSpec,
    preset: Preset,
    weight_bits: int,
    layout: ev.Layout,
    workload: rq.Workload,
    chunk_tokens: int,
    arrivals: qm.Arrivals,
    aggregated: bool,
    percentiles=qm.PERCENTILES,
    spec: rq.Speculation | None = None,
) -> np.ndarray:
    """TPOT percentiles (one per percentile, s) of one instance that ``arrivals`` reach: an aggregated instance with
    its chunk budget, or a decode instance (``aggregated`` False), at the mean decode batch of Little's law
    (``queueing.mean_decode_batch``); inf where it has no steady state. ``spec``: its steps are speculative rounds."""
    rate = arrivals.rate_per_s
    args = (model, gpu, preset, weight_bits, layout)
    batch = qm.mean_decode_batch(*args, workload, chunk_tokens, rate, float(aggregated), spec)
    if not math.isfinite(batch):
        return np.full(len(percentiles), math.inf)
    if aggregated:
        tpots = [
            aggregated_percentile_tpot_s(q, *args, batch, workload, chunk_tokens, arrivals.scv, spec)
            for q in percentiles
        ]
    else:
        tpots = [decode_percentile_tpot_s(q, *args, batch, workload, arrivals.scv, spec) for q in percentiles]
    return np.array([float(t) for t in tpots])
