"""Serving at load: arrivals and a queueing model of the prefill path for TTFT percentiles (docs/physics/queueing.md).

The evaluator's figures are service times of an instance at steady state; this module adds the time a request waits
for the prefill path under random arrivals. Arrivals are a renewal process of a rate and a squared coefficient of
variation of the inter-arrival times, c_a^2 (1 = Poisson; > 1 bursty, gamma-distributed gaps). The prefill path is a
G/G/c queue: its wait has an exponential tail, P(W > t) = P(wait) exp(-eta t), eta the decay rate of Lundberg's
equation (exact for M/M/c), P(wait) such that the mean is Allen-Cunneen's mean wait (Kingman's for c = 1).
TTFT = wait + service (+ KV transfer).

- disaggregated: c = x prefill instances at prefill batch 1, service time ``prefill_step`` of one prompt;
- aggregated with chunked prefill: one instance whose steps carry up to ``chunk`` prompt tokens beside the decoding
  sequences; a prompt's work is its share I / chunk of a step carrying a full chunk, its own time once it is at the
  head of the queue its chunk schedule (``ttft_aggregated_s``), both at the mean decode batch found by Little's law;
  an arrival waits for the step under way (M/G/1 with vacations: half a mean step) and a prompt that queued ends
  with the step holding its last piece (half a full step more).

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
    rho = offered / servers
    term, total = 1.0, 1.0
    for k in range(1, servers):
        term *= offered / k
        total += term
    last = term * offered / servers / (1.0 - rho)
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


def tail_decay_per_s(servers: int, weights, service_s, arrivals: Arrivals) -> float:
    """Decay rate eta of the waiting-time tail, P(W > t) ~ exp(-eta t): the positive root of Lundberg's equation
    E[exp(eta S / c)] E[exp(-eta A)] = 1 for gaps A of ``arrivals`` and the c servers as one c-times faster server
    (exact for M/M/c: eta = c mu - lambda); inf without waiting, 0 when unstable."""
    w = np.asarray(weights, dtype=float) / np.sum(weights)
    s = np.asarray(service_s, dtype=float) / servers
    scv, mean_gap = arrivals.scv, 1.0 / arrivals.rate_per_s

    def g(eta: float) -> float:
        gaps = eta * mean_gap if scv == 0.0 else math.log1p(eta * scv * mean_gap) / scv
        return float(np.log(w @ np.exp(np.minimum(eta * s, 700.0)))) - gaps

    if float(w @ s) * arrivals.rate_per_s >= 1.0:
        return 0.0
    hi = 1.0 / float(s.max())
    while g(hi) <= 0.0:
        hi *= 2.0
        if hi > 1e12:
            return math.inf
    lo = hi / 2.0 if g(hi / 2.0) <= 0.0 else 0.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if g(mid) <= 0.0 else (lo, mid)
    return hi


class QueueingTtft(TypedDict):
    """TTFT at load: ``ttft_s`` one per percentile, the prefill path's utilisation, the probability of waiting and
    the mean wait; ``decode_batch`` (mean sequences decoding) for an aggregated instance."""

    ttft_s: np.ndarray
    utilisation: float
    p_wait: float
    wait_s: float
    decode_batch: NotRequired[float]


def response_percentiles(
    weights, service_s, p_wait: float, decay_per_s: float, percentiles=PERCENTILES, shift_s: float = 0.0
) -> np.ndarray:
    """Percentiles of wait + service: the wait is 0 with probability 1 - p_wait, else ``shift_s`` plus an exponential
    of rate ``decay_per_s``; the service is ``service_s[k]`` for a share ``weights[k]`` of requests (bisection)."""
    w = np.asarray(weights, dtype=float) / np.sum(weights)
    s = np.asarray(service_s, dtype=float)
    if decay_per_s <= 0.0:
        return np.full(len(percentiles), math.inf)
    out = []
    for p in percentiles:
        tail = 1.0 - p / 100.0

        def exceed(t: float) -> float:
            gap = t - s
            if p_wait == 0.0:
                return float(w @ (gap < 0))
            return float(w @ np.where(gap < 0, 1.0, p_wait * np.exp(-np.maximum(gap - shift_s, 0.0) * decay_per_s)))

        lo, hi = float(s.min()), float(s.max()) + shift_s + (50.0 / decay_per_s if math.isfinite(decay_per_s) else 0.0)
        for _ in range(100):
            mid = (lo + hi) / 2.0
            lo, hi = (mid, hi) if exceed(mid) > tail else (lo, mid)
        out.append(hi)
    return np.asarray(out)


def _wait_tail(servers: int, weights, service_s, arrivals: Arrivals) -> tuple[float, float, float]:
    """(probability of waiting, tail decay per s, mean wait s) of the G/G/c prefill queue: the tail's decay rate from
    Lundberg's equation, Allen-Cunneen's mean wait (Erlang C's M/M/c wait scaled by (c_a^2 + c_s^2) / 2), and the
    probability of waiting that gives the exponential tail that mean."""
    mean = float(np.asarray(weights) @ np.asarray(service_s)) / float(np.sum(weights))
    if mean == 0.0:
        return 0.0, math.inf, 0.0
    _, wait = gg_wait(servers, arrivals.rate_per_s, mean, arrivals.scv, _scv(weights, service_s))
    decay = tail_decay_per_s(servers, weights, service_s, arrivals)
    if wait == 0.0 or math.isinf(decay):
        return 0.0, math.inf, 0.0
    return min(1.0, wait * decay), decay, wait


def _scv(weights, values) -> float:
    w = np.asarray(weights, dtype=float) / np.sum(weights)
    v = np.asarray(values, dtype=float)
    mean = float(w @ v)
    return float(w @ (v - mean) ** 2) / mean**2


def disaggregated_ttft(
    model: ModelSpec,
    preset: Preset,
    weight_bits: int,
    workload: rq.Workload,
    prefill: tuple[GpuSpec, ev.Layout, int],
    decode: tuple[GpuSpec, ev.Layout],
    arrivals: Arrivals,
    percentiles=PERCENTILES,
) -> QueueingTtft:
    """TTFT percentiles of x prefill instances (prefill = (gpu, layout, x), prefill batch 1) as a G/G/x queue.

    Service time and TTFT at no load of each class come from ``requests.disaggregated_figures``; the KV transfer
    adds to TTFT after the queue. Returns ttft_s (one per percentile), utilisation, p_wait, mean wait_s."""
    p_gpu, p_layout, x = prefill
    d_gpu, d_layout = decode
    service, ttft0 = [], []
    for i, o in zip(workload.isl, workload.osl, strict=True):
        fig = rq.disaggregated_figures(
            model, preset, weight_bits, rq.Workload.single(i, o), (p_gpu, p_layout, 1.0, x), (d_gpu, d_layout, 1.0, 1)
        )
        service.append(float(fig["prefill_step_s"]))
        ttft0.append(float(fig["ttft_s"]))
    w = workload._w()
    mean_service = float(w @ np.asarray(service))
    p_wait, decay, wait = _wait_tail(x, w, service, arrivals)
    return {
        "ttft_s": response_percentiles(w, ttft0, p_wait, decay, percentiles),
        "utilisation": arrivals.rate_per_s * mean_service / x,
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
) -> float:
    """Sequences decoding at once in an aggregated instance at ``rate_per_s``: the fixed point of Little's law
    B = rate * O * TPOT(B), TPOT the steady-state step (``requests.tpot_step``); inf when it has none."""
    b = 1.0
    for _ in range(200):
        tpot = float(rq.tpot_step(model, gpu, preset, weight_bits, layout, b, workload, chunk_tokens, 1.0).step_time_s)
        nxt = max(rate_per_s * workload.mean_osl * tpot, 1.0)
        if abs(nxt - b) < 1e-9 * b:
            return nxt
        if nxt > 1e7:
            return math.inf
        b = nxt
    return b


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
) -> QueueingTtft:
    """TTFT percentiles of one aggregated instance with chunked prefill (its prompt path an M/G/1-like queue).

    Returns ttft_s (one per percentile), utilisation (of the chunk budget), decode_batch (mean sequences decoding),
    p_wait and mean wait_s."""
    batch = mean_decode_batch(model, gpu, preset, weight_bits, layout, workload, chunk_tokens, arrivals.rate_per_s)
    if not math.isfinite(batch):
        inf = np.full(len(percentiles), math.inf)
        return {"ttft_s": inf, "utilisation": math.inf, "decode_batch": batch, "p_wait": 1.0, "wait_s": math.inf}

    def schedule_s(isl: int) -> float:
        single = rq.Workload.single(isl, 1)
        return float(rq.ttft_aggregated_s(model, gpu, preset, weight_bits, layout, batch, single, chunk_tokens))

    full_step = schedule_s(chunk_tokens)
    schedule = [schedule_s(i) for i in workload.isl]
    # a prompt longer than a chunk fills whole chunks of its own attention context; shorter ones share a first chunk
    work = [
        i / chunk_tokens * (t / math.ceil(i / chunk_tokens) if i >= chunk_tokens else full_step)
        for i, t in zip(workload.isl, schedule, strict=True)
    ]
    w = workload._w()
    mean_work = float(w @ np.asarray(work))
    p_wait, decay, wait = _wait_tail(1, w, work, arrivals)
    mean_step = float(
        rq.tpot_step(model, gpu, preset, weight_bits, layout, batch, workload, chunk_tokens, 1.0).step_time_s
    )
    residual = mean_step / 2.0
    return {
        "ttft_s": response_percentiles(w, np.asarray(schedule) + residual, p_wait, decay, percentiles, full_step / 2.0),
        "utilisation": arrivals.rate_per_s * mean_work,
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
