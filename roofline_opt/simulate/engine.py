"""Continuous batching step by step: every step's time is the evaluator's step for the tokens in it.

Aggregated (one instance, ``batch`` slots, a budget of ``chunk_tokens`` prompt tokens per step): each step carries
one token of every decoding sequence plus prompt pieces taken first come, first served within the budget (several
prompts may share a step, a long prompt spans several); a request holds a slot from its first prefilled piece to its
last output token; arrivals during a step join the next one. Disaggregated: x prefill instances take up to
``prefill_batch`` waiting prompts per step (priced as that many prompts of the longest of them); the KV cache then
moves to decode instance (request number mod y), which steps its decoding sequences like the aggregated instance
without prompts. The first token comes with the end of prefill (plus the KV transfer), then O decode steps: the
evaluator's accounting. Each request's TPOT = (last token - first token) / O.

Speculative decoding (``requests.Speculation``, one gamma): every step is a round, the target's verification step
(gamma + 1 tokens per sequence, carrying the prompt pieces), the draft's step reading them and its other gamma - 1
steps, plus the round's host time (``requests.loaded_gap_s``); each decoding sequence gains its own random number of
tokens per round, 1 + the drafted tokens accepted before the first rejection (each accepted with the acceptance
probability, independently), at most what it has left.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from roofline_opt.physics import evaluator as ev
from roofline_opt.physics import queueing
from roofline_opt.physics import requests as rq
from roofline_opt.physics.specs import GpuSpec, ModelSpec, Preset
from roofline_opt.simulate.arrivals import Requests


@dataclass(frozen=True)
class Physics:
    """What every step time needs: model, preset and weight bits."""

    model: ModelSpec
    preset: Preset
    weight_bits: int


@dataclass(frozen=True)
class Served:
    """Per-request times (seconds; first_token_s and finish_s are absolute) and the busy time of each pool."""

    arrival_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    osl: np.ndarray
    prefill_busy_s: float
    prefill_servers: int
    decode_batch_time_s: float
    decode_slots: int

    @property
    def ttft_s(self) -> np.ndarray:
        return self.first_token_s - self.arrival_s

    @property
    def tpot_s(self) -> np.ndarray:
        return (self.finish_s - self.first_token_s) / self.osl


class _MixedSteps:
    """Step time of ``d`` decoding sequences plus prompt pieces, from ``queueing.mixed_step`` (the evaluator's step
    ``ttft_aggregated_s`` and ``tpot_step`` price): rows over d = 1..slots cached per prompt-token count. The step's
    figures are affine in the pieces' attention context and KV tokens (every memory and compute field, the kernel
    classes included), so their per-unit seconds are measured once per field and added before the step time is
    taken from the figures as the evaluator combines them."""

    _PROBE = 2.0**20  # a large power of two: the per-unit slope is exact to rounding, not a difference of near-equals

    def __init__(self, physics: Physics, gpu: GpuSpec, layout: ev.Layout, slots: int) -> None:
        self._args = (physics.model, gpu, physics.preset, physics.weight_bits, layout)
        self._d = np.arange(1.0, slots + 1.0)
        self._rows: dict[int, dict[str, list[float]]] = {}
        self._memo: dict[tuple[int, int, float, float], float] = {}
        base = queueing.mixed_step(*self._args, 1.0, 0.0, 0.0, 0.0)
        self._template = base
        attention = queueing.mixed_step(*self._args, 1.0, 0.0, self._PROBE, 0.0)
        kv = queueing.mixed_step(*self._args, 1.0, 0.0, 0.0, self._PROBE)
        self._per_attention = {f: (_field(attention, f) - _field(base, f)) / self._PROBE for f in _FIELDS}
        self._per_kv = {f: (_field(kv, f) - _field(base, f)) / self._PROBE for f in _FIELDS}

    def time_s(self, decode: int, tokens: int, attention: float, kv_tokens: float) -> float:
        key = (decode, tokens, attention, kv_tokens)
        if key not in self._memo:
            self._memo[key] = self._time_s(*key)
        return self._memo[key]

    def _time_s(self, decode: int, tokens: int, attention: float, kv_tokens: float) -> float:
        row = self._rows.get(tokens)
        if row is None:
            step = queueing.mixed_step(*self._args, self._d, float(tokens), 0.0, 0.0)
            row = self._rows[tokens] = {f: np.broadcast_to(getattr(step, f), self._d.shape).tolist() for f in _FIELDS}
        i = max(decode, 1) - 1
        values: dict[str, Any] = {
            f: row[f][i] + attention * self._per_attention[f] + kv_tokens * self._per_kv[f] for f in _FIELDS
        }
        return float(replace(self._template, **values).step_time_s)


_FIELDS = tuple(f.name for f in fields(ev.StepFigures) if f.name != "per_kernel_class")
"""The seconds fields of a step's figures (``per_kernel_class`` is the preset's, the same in every step)."""


def _field(step: ev.StepFigures, name: str) -> float:
    return float(np.asarray(getattr(step, name)))


class _Acceptance:
    """Tokens each decoding sequence gains in a speculative round: 1 + the drafted tokens accepted before the first
    rejection (each with probability ``spec.acceptance``), at most gamma + 1; drawn from ``seed``."""

    def __init__(self, spec: rq.Speculation, seed: int) -> None:
        self._p_reject, self._gamma = 1.0 - spec.acceptance, int(np.asarray(spec.gamma))
        self._rng = np.random.default_rng(seed)
        self._accepted: list[int] = []

    def gains(self, n: int) -> list[int]:
        """Tokens each of ``n`` sequences gains in one round."""
        if self._p_reject <= 0.0:
            return [self._gamma + 1] * n
        while len(self._accepted) < n:
            draws = self._rng.geometric(self._p_reject, 4096) - 1
            self._accepted.extend(np.minimum(draws, self._gamma).tolist())
        out = [1 + a for a in self._accepted[:n]]
        del self._accepted[:n]
        return out


class _Rounds:
    """Round time of ``d`` decoding sequences plus prompt pieces and the tokens each sequence gains per round: the
    plain step and one token (``spec`` None), or a speculative round (module docstring) priced as
    ``requests.loaded_gap_s`` prices it, from ``_MixedSteps`` of the verifying target and of the draft."""

    def __init__(
        self, physics: Physics, gpu: GpuSpec, layout: ev.Layout, slots: int, spec: rq.Speculation | None, seed: int
    ) -> None:
        self._spec = spec
        if spec is None:
            self._target = _MixedSteps(physics, gpu, layout, slots)
            return
        gamma = float(np.asarray(spec.gamma))
        self._gamma = gamma
        self._target = _MixedSteps(physics, gpu, layout.verifying(gamma), slots)
        draft_physics = Physics(spec.draft, physics.preset, spec.weight_bits)
        self._draft = _MixedSteps(draft_physics, gpu, layout.for_draft(spec.draft), slots)
        self._host_s = float(ev.speculative_round_host_s(physics.preset, gamma))
        self._acceptance = _Acceptance(spec, seed)

    def time_s(self, decode: int, tokens: int, attention: float, kv_tokens: float) -> float:
        target = self._target.time_s(decode, tokens, attention, kv_tokens)
        if self._spec is None:
            return target
        plain = self._draft.time_s(decode, 0, 0.0, 0.0)
        if tokens == 0 or self._gamma == 0.0:
            return target + self._gamma * plain + self._host_s
        reading = self._draft.time_s(decode, tokens, attention, kv_tokens)
        return target + reading + (self._gamma - 1.0) * plain + self._host_s

    def gains(self, n: int) -> list[int] | None:
        """Tokens each of ``n`` decoding sequences gains in a round (None: one each)."""
        return None if self._spec is None else self._acceptance.gains(n)


def aggregated(
    physics: Physics,
    gpu: GpuSpec,
    layout: ev.Layout,
    batch: int,
    chunk_tokens: int,
    reqs: Requests,
    spec: rq.Speculation | None = None,
    seed: int = 0,
) -> Served:
    """Serve ``reqs`` on one aggregated instance of ``batch`` slots with chunked prefill (``spec``: speculative
    rounds, their accepted tokens drawn from ``seed``)."""
    steps = _Rounds(physics, gpu, layout, batch, spec, seed)
    n = len(reqs)
    # plain lists: the loop below runs once per step, numpy scalars would dominate it
    arrival, isl, left = reqs.arrival_s.tolist(), reqs.isl.tolist(), reqs.osl.tolist()
    # a cached prefix counts as prefilled: later pieces attend over it and read it, as the evaluator prices them
    first, finish, done_tokens = [math.nan] * n, [math.nan] * n, reqs.cached.tolist()
    waiting: deque[int] = deque()
    prefilling: deque[int] = deque()
    decoding: list[int] = []
    t, nxt, prompt_busy, batch_time = 0.0, 0, 0.0, 0.0
    while nxt < n or waiting or prefilling or decoding:
        if not (waiting or prefilling or decoding):
            t = max(t, arrival[nxt])
        while nxt < n and arrival[nxt] <= t:
            waiting.append(nxt)
            nxt += 1
        while waiting and len(prefilling) + len(decoding) < batch:
            prefilling.append(waiting.popleft())
        budget, tokens, attention, kv, pieces = chunk_tokens, 0, 0.0, 0.0, []
        for r in prefilling:
            if budget == 0:
                break
            start = done_tokens[r]
            q = min(budget, isl[r] - start)
            pieces.append((r, q))
            budget -= q
            tokens += q
            attention += q * start + q * (q - 1) / 2.0
            kv += q + start
        tau = steps.time_s(len(decoding), tokens, attention, kv)
        t += tau
        prompt_busy += tau * tokens / chunk_tokens
        batch_time += tau * len(decoding)
        decoding = _tokens_each(decoding, left, finish, t, steps.gains(len(decoding)))
        for r, q in pieces:
            done_tokens[r] += q
            if done_tokens[r] == isl[r]:
                prefilling.remove(r)
                first[r] = t
                decoding.append(r)
    return Served(reqs.arrival_s, np.array(first), np.array(finish), reqs.osl, prompt_busy, 1, batch_time, batch)


def prefill_pool(
    physics: Physics,
    gpu: GpuSpec,
    layout: ev.Layout,
    instances: int,
    batch: int,
    reqs: Requests,
    spec: rq.Speculation | None = None,
) -> tuple[np.ndarray, float]:
    """End of each request's prefill on ``instances`` prefill instances (first come, first served) and their busy
    seconds; with ``spec`` each step prefills its draft too (``requests.prefill_figures``)."""
    cache: dict[tuple[int, int, int], float] = {}
    new = reqs.isl - reqs.cached

    def step_s(k: int, isl: int, prefix: int) -> float:
        if (k, isl, prefix) not in cache:
            s = rq.prefill_step(physics.model, gpu, physics.preset, physics.weight_bits, layout, float(k), isl, prefix)
            cache[k, isl, prefix] = float(s.step_time_s)
            if spec is not None:
                d_layout = layout.for_draft(spec.draft)
                d = rq.prefill_step(spec.draft, gpu, physics.preset, spec.weight_bits, d_layout, float(k), isl, prefix)
                cache[k, isl, prefix] += float(d.step_time_s)
        return cache[k, isl, prefix]

    n = len(reqs)
    end = np.empty(n)
    free = [(0.0, j) for j in range(instances)]
    i, busy = 0, 0.0
    while i < n:
        at, j = heapq.heappop(free)
        start = max(at, reqs.arrival_s[i])
        k = 1
        while k < batch and i + k < n and reqs.arrival_s[i + k] <= start:
            k += 1
        longest = i + int(np.argmax(new[i : i + k]))  # k prompts priced as k of the most new tokens among them
        tau = step_s(k, int(reqs.isl[longest]), int(reqs.cached[longest]))
        end[i : i + k] = start + tau
        busy += tau
        i += k
        heapq.heappush(free, (start + tau, j))
    return end, busy


def decode_instance(
    step_s: np.ndarray, ready_s: np.ndarray, osl: np.ndarray, slots: int, gains=None
) -> tuple[np.ndarray, float]:
    """Finish times of requests joining one decode instance at ``ready_s`` (sorted), ``step_s[d - 1]`` the step (or
    round) of d sequences; and the sum over steps of step time x sequences (for the mean batch). ``gains(n)``: the
    tokens each of n sequences gains in a round (``_Rounds.gains``; None: one token per step)."""
    n = len(ready_s)
    ready, left, steps, finish = ready_s.tolist(), osl.tolist(), np.asarray(step_s).tolist(), [0.0] * n
    waiting: deque[int] = deque()
    active: list[int] = []
    t, nxt, batch_time = 0.0, 0, 0.0
    while nxt < n or waiting or active:
        if not (waiting or active):
            t = max(t, ready[nxt])
        while nxt < n and ready[nxt] <= t:
            waiting.append(nxt)
            nxt += 1
        while waiting and len(active) < slots:
            active.append(waiting.popleft())
        tau = steps[len(active) - 1]
        t += tau
        batch_time += tau * len(active)
        active = _tokens_each(active, left, finish, t, None if gains is None else gains(len(active)))
    return np.array(finish), batch_time


def disaggregated(
    physics: Physics,
    prefill: tuple[GpuSpec, ev.Layout, int, int],
    decode: tuple[GpuSpec, ev.Layout, int, int],
    reqs: Requests,
    spec: rq.Speculation | None = None,
    seed: int = 0,
) -> Served:
    """Serve ``reqs`` on x prefill instances (prefill = (gpu, layout, batch, x)) and y decode instances
    (decode = (gpu, layout, batch, y)); the KV cache moves as ``requests.disaggregated_figures`` prices it.
    ``spec``: the decode instances speculate (rounds, their accepted tokens drawn from ``seed``) and the prefill
    instances prefill the draft too."""
    p_gpu, p_layout, p_batch, x = prefill
    d_gpu, d_layout, d_batch, y = decode
    drafting = spec is not None and float(np.asarray(spec.gamma)) > 0
    prefilled, busy = prefill_pool(physics, p_gpu, p_layout, x, p_batch, reqs, spec if drafting else None)
    transfer = {}
    classes = list(zip(reqs.isl.tolist(), reqs.cached.tolist(), strict=True))
    for i, p in set(classes):
        fig = rq.disaggregated_figures(
            physics.model,
            physics.preset,
            physics.weight_bits,
            rq.Workload((i,), (1,), (1.0,), (p,)),
            (p_gpu, p_layout, 1.0, 1),
            (d_gpu, d_layout, 1.0, 1),
            spec=spec,
        )
        transfer[i, p] = float(fig["ttft_s"] - fig["prefill_step_s"])  # the KV transfer as the evaluator prices it
    ready = prefilled + np.array([transfer[c] for c in classes])
    args = (physics.model, d_gpu, physics.preset, physics.weight_bits, d_layout)
    zero = np.zeros(d_batch)
    step_s = rq.loaded_gap_s(*args, np.arange(1.0, d_batch + 1.0), zero, zero, zero, spec)
    finish = np.empty(len(reqs))
    batch_time = 0.0
    for j in range(y):
        mine = np.arange(j, len(reqs), y)
        order = mine[np.argsort(ready[mine], kind="stable")]
        gains = None if spec is None else _Acceptance(spec, seed + j).gains
        finish[order], bt = decode_instance(step_s, ready[order], reqs.osl[order], d_batch, gains)
        batch_time += bt
    return Served(reqs.arrival_s, ready, finish, reqs.osl, busy, x, batch_time, y * d_batch)


def _tokens_each(running: list, left, finish, t: float, gains: list[int] | None) -> list:
    """Give every running request its tokens of the step that ended at ``t`` (one each, or ``gains``, at most what it
    has left); return those still decoding (the others finish at ``t``)."""
    still = []
    for k, r in enumerate(running):
        left[r] -= 1 if gains is None else gains[k]
        if left[r] <= 0:
            finish[r] = t
        else:
            still.append(r)
    return still
