"""Each measured setup's step components evaluated once, and its tok/s per request at any efficiency point (numpy).

A row's predicted tok/s per request is ``numerator / sum_k weight_k * T_k``: one decoding step (``evaluator.step``)
for a decode-only row, prefill step plus O decode steps for a static batch, the prefill cycle's decode and chunk
steps (and the time to first token) for continuous batching, as ``whole_requests`` composes them. Every step time is

    T = kernel_launch_factor * L + N(f) + max(G_mem / h + G_flop / e ... , O(f))

precisely ``StepFigures.step_time_s`` with its memory parts divided by the HBM efficiency ``h``, its compute parts by
the FLOP efficiency ``e``, each part taken once at unit efficiency. The serial and overlapped network times ``N`` and
``O`` are rebuilt from the step's collectives (``evaluator.collectives``, ``dp_attention.dispatch_combine``): per
collective ``count * min over protocols of (latency * f + seconds per batch)``, ``f`` the NCCL latency factor. A
collective whose fastest protocol is the same at both ends of the factor's range is affine in between (every protocol
is a line in f) and is summed into the step's ``a + b f``; the others are kept per protocol. The rebuilt network time
is checked against the step's own at two factors when the components are built.

So a parameter point costs a few array operations over the steps instead of an evaluator call per point;
``tok_s_per_request`` equals the evaluator's figures to rounding (tests/test_calibration_components.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from roofline_opt.fidelity import whole_requests
from roofline_opt.fidelity.measured import MeasuredSetup, gpu_card, model_card
from roofline_opt.physics import dp_attention, evaluator, requests
from roofline_opt.physics.specs import Preset
from roofline_opt.physics.step_figures import StepFigures

PARAMETERS = ("flop_efficiency", "hbm_efficiency", "network_latency_factor", "kernel_launch_factor")
"""The preset fields a calibration fits, in the order of a parameter point's columns."""

REBUILT_TOLERANCE = 1e-9
"""Largest relative difference allowed between a step's network time rebuilt from its collectives and the step's own
(at two latency factors): a larger one means the physics changed under this module."""

_FIELDS = (
    "launch",
    "gemm_memory",
    "gemm_compute",
    "decode_memory",
    "decode_compute",
    "prefill_memory",
    "prefill_compute",
)


@dataclass(frozen=True)
class Kind:
    """What a row's prediction is made of: the decode step alone, a static batch, or continuous batching."""

    kind: str
    input_len: int = 0
    output_len: int = 0
    per_request: bool = False


def kind_of(s: MeasuredSetup) -> Kind:
    """The prediction ``validate`` makes for the setup (``whole_requests.applies``)."""
    if not whole_requests.applies(s):
        return Kind("decode")
    assert s.input_len is not None and s.output_len is not None  # applies(s) holds
    return Kind("static" if s.static_batch else "continuous", s.input_len, s.output_len, s.speed_basis == "request")


def _layout(setups: Sequence[MeasuredSetup]) -> evaluator.Layout:
    def column(name: str) -> np.ndarray:
        return np.array([getattr(s, name) for s in setups])

    return evaluator.Layout.of(
        column("tp"),
        False,
        column("pp"),
        column("context"),
        1,
        column("ep"),
        setups[0].kv_bits,
        dp_attention=column("dp_attention"),
        a2a_overlap=column("a2a_overlap"),
    )


Term = tuple[np.ndarray, StepFigures, evaluator.Layout]
"""A step of a row's prediction: its weight, its figures and the layout its collectives see."""


def _steps(setups: Sequence[MeasuredSetup], kind: Kind, preset: Preset) -> tuple[np.ndarray, list[Term]]:
    """(numerator, terms) of setups sharing model, precision, accelerator and kind, as ``whole_requests.figures`` and
    ``evaluator.evaluate`` compose them (no draft: calibrated rows have no MTP)."""
    first = setups[0]
    model = model_card(first.model_card)
    assert model is not None  # map_row only builds setups of catalog models
    gpu, bits, layout = gpu_card(first.gpu_card), first.weight_bits, _layout(setups)
    batch = np.array([float(s.batch or 0) for s in setups])  # point rows have a batch
    one = np.ones_like(batch)

    def carrying(prompt_tokens) -> evaluator.Layout:  # the layout requests._loaded_step gives ev.step
        return replace(layout, tokens_per_step=layout.tokens_per_step + np.asarray(prompt_tokens, dtype=float) / batch)

    decode = (one, evaluator.step(model, gpu, preset, bits, layout, batch), layout)
    i, o = kind.input_len, kind.output_len
    if kind.kind == "decode" or not kind.per_request and kind.kind == "static":
        return one, [decode]
    if kind.kind == "static":
        terms = [(o * one, decode[1], layout)]
        if i:
            prefill = replace(layout, context=np.zeros_like(layout.context), tokens_per_step=np.full_like(one, i))
            terms.append((one, requests.prefill_step(model, gpu, preset, bits, layout, batch, i), prefill))
        return o * one, terms
    workload = requests.Workload.single(i, o)
    budget = np.array([requests.DEFAULT_CHUNK_TOKENS if s.chunk_tokens is None else s.chunk_tokens for s in setups])
    chunk = np.maximum(budget, np.ceil(batch * workload.prompt_tokens_per_output))
    step = requests.tpot_step(model, gpu, preset, bits, layout, batch, workload, chunk, 1.0)
    prompt = batch / o * i
    assert not isinstance(step, requests.Round)  # no draft here
    if isinstance(step, requests.CycleFigures):
        assert not isinstance(step.decode, requests.Round) and not isinstance(step.chunk, requests.Round)
        share = np.broadcast_to(step.chunk_share, batch.shape)
        carried = np.where(share > 0, prompt / np.where(share > 0, share, 1.0), 0.0)
        tpot = [(1.0 - share, step.decode, layout), (share, step.chunk, carrying(carried))]
    else:
        tpot = [(one, step, carrying(prompt))]
    if not kind.per_request:
        return one, tpot
    # the time to first token as requests.ttft_aggregated_s takes it for one request class
    n = np.ceil(i / chunk)
    piece = np.minimum(chunk, float(i))
    kv = piece + chunk * (n - 1.0) / 2.0
    first_token = requests._loaded_step(model, gpu, preset, bits, layout, batch, piece, piece * (i - 1.0) / 2.0, kv)
    return o * one, [(n, first_token, carrying(piece))] + [((o - 1.0) * w, f, at) for w, f, at in tpot]


def _parts(f: StepFigures, shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    def b(x) -> np.ndarray:
        return np.broadcast_to(np.asarray(x, dtype=float), shape)

    by_class = f.per_kernel_class
    return {
        "launch": b(f.kernel_launch_s),
        "gemm_memory": b(f.gemm_memory_s),
        "gemm_compute": b(f.gemm_compute_s),
        "decode_memory": b(f.decode_attention_memory_s if by_class else 0.0),
        "decode_compute": b(f.decode_attention_compute_s if by_class else 0.0),
        "prefill_memory": b(f.prefill_attention_memory_s if by_class else 0.0),
        "prefill_compute": b(f.prefill_attention_compute_s if by_class else 0.0),
        "network": b(f.network_s),
        "overlapped": b(f.overlapped_network_s),
    }


def _sum_into(values: np.ndarray, target: np.ndarray, size: int) -> np.ndarray:
    """(points x size) sums of ``values`` (points x items) by item -> ``target`` index (one bincount)."""
    points = values.shape[0]
    at = (np.arange(points)[:, None] * size + target[None, :]).ravel()
    return np.bincount(at, weights=values.ravel(), minlength=points * size).reshape(points, size)


@dataclass(frozen=True)
class _Network:
    """Network seconds of steps as functions of the latency factor f: ``affine[0] + affine[1] * f`` plus, for the
    collectives whose fastest protocol changes within the range, ``count * min_p(latency_p * f + rest_p)``."""

    affine: np.ndarray  # 2 x steps
    step: np.ndarray  # the step of each kept collective
    count: np.ndarray
    latency_s: np.ndarray  # kept collectives x protocols, at f = 1
    rest_s: np.ndarray

    def at(self, f: np.ndarray) -> np.ndarray:
        """Seconds (points x steps) at latency factors ``f`` (points)."""
        out = self.affine[0] + self.affine[1] * f[:, None]
        if len(self.step):
            kept = self.count * np.min(self.latency_s * f[:, None, None] + self.rest_s, axis=-1)
            out = out + _sum_into(kept, self.step, out.shape[1])
        return out


def _network(
    collectives: list[list[evaluator.Collective]], batch: np.ndarray, bounds: tuple[float, float], protocols: int
) -> _Network:
    """``_Network`` of steps, each given as its collectives (at f = 1) evaluated at ``batch``."""
    steps = len(collectives)
    affine = np.zeros((2, steps, len(batch)))
    kept: list[tuple[np.ndarray, ...]] = []
    for k, step_collectives in enumerate(collectives):
        for c in step_collectives:
            count = np.broadcast_to(c.count, batch.shape)
            latency = np.broadcast_to(c.latency_s, (*batch.shape, c.latency_s.shape[-1]))
            rest = np.broadcast_to(c.s_per_seq * batch[:, None], latency.shape)
            low, high = (np.argmin(latency * f + rest, axis=-1) for f in bounds)
            same = (low == high) | (count == 0)
            pick = np.take_along_axis(latency, low[:, None], -1)[:, 0], np.take_along_axis(rest, low[:, None], -1)[:, 0]
            affine[1, k] += np.where(same, count * pick[0], 0.0)
            affine[0, k] += np.where(same, count * pick[1], 0.0)
            where = np.flatnonzero(~same)
            kept.append((k * len(batch) + where, count[where], latency[where], rest[where]))
    pieces = [x for x in kept if len(x[0])]
    return _Network(
        affine=affine.reshape(2, -1),
        step=np.concatenate([x[0] for x in pieces]) if pieces else np.zeros(0, dtype=int),
        count=np.concatenate([x[1] for x in pieces]) if pieces else np.zeros(0),
        latency_s=np.concatenate([x[2] for x in pieces]) if pieces else np.zeros((0, protocols)),
        rest_s=np.concatenate([x[3] for x in pieces]) if pieces else np.zeros((0, protocols)),
    )


@dataclass(frozen=True)
class Components:
    """Every step of a set of setups at unit efficiencies; ``tok_s_per_request(points)`` at parameter points.

    Steps are flattened; ``step_setup[k]`` is the setup step k belongs to, ``weight[k]`` its weight in the setup's
    time per request (whose numerator is ``numerator[setup]``)."""

    n_setups: int
    numerator: np.ndarray
    step_setup: np.ndarray
    weight: np.ndarray
    parts: dict[str, np.ndarray]
    network: _Network
    overlapped: _Network

    def step_time_s(self, points: np.ndarray) -> np.ndarray:
        """Seconds of every step (points x steps) at parameter points (points x PARAMETERS)."""
        points = np.atleast_2d(np.asarray(points, dtype=float))
        e, h, k = points[:, [0]], points[:, [1]], points[:, [3]]
        p = self.parts
        gemm = np.maximum(p["gemm_memory"] / h, p["gemm_compute"] / e)
        attention = np.maximum(p["decode_memory"] / h, p["decode_compute"] / e)
        attention = attention + np.maximum(p["prefill_memory"] / h, p["prefill_compute"] / e)
        busy = np.maximum(gemm + attention, self.overlapped.at(points[:, 2]))
        return k * p["launch"] + self.network.at(points[:, 2]) + busy

    def tok_s_per_request(self, points: np.ndarray) -> np.ndarray:
        """tok/s per request of every setup (points x setups) at parameter points (points x PARAMETERS)."""
        weighted = self.step_time_s(points) * self.weight
        return self.numerator / _sum_into(weighted, self.step_setup, self.n_setups)


def build(
    setups: Sequence[MeasuredSetup], preset: Preset, factor_bounds: tuple[float, float]
) -> tuple[Components, np.ndarray]:
    """Components of ``setups`` (point rows with a batch, no MTP) under ``preset``, network times exact for latency
    factors within ``factor_bounds``; returns them and, for each input setup, the index of its distinct setup."""
    distinct = list(dict.fromkeys(setups))
    where = {s: i for i, s in enumerate(distinct)}
    groups: dict[tuple, list[int]] = {}
    for i, s in enumerate(distinct):
        groups.setdefault((s.model_card, s.weight_bits, s.kv_bits, s.gpu_card, kind_of(s)), []).append(i)
    pieces = [_group(ids, [distinct[i] for i in ids], key[-1], preset, factor_bounds) for key, ids in groups.items()]
    numerator = np.zeros(len(distinct))
    offset = 0
    for ids, num, *_ in pieces:
        numerator[ids] = num
    networks: dict[str, list[_Network]] = {"network": [], "overlapped": []}
    for p in pieces:
        for name in networks:
            net = p[4][name]
            networks[name].append(replace(net, step=net.step + offset))
        offset += len(p[2])

    def joined(nets: list[_Network]) -> _Network:
        return _Network(
            affine=np.concatenate([n.affine for n in nets], axis=1),
            step=np.concatenate([n.step for n in nets]),
            count=np.concatenate([n.count for n in nets]),
            latency_s=np.concatenate([n.latency_s for n in nets]),
            rest_s=np.concatenate([n.rest_s for n in nets]),
        )

    components = Components(
        n_setups=len(distinct),
        numerator=numerator,
        step_setup=np.concatenate([p[1 + 1] for p in pieces]),
        weight=np.concatenate([p[3] for p in pieces]),
        parts={k: np.concatenate([p[5][k] for p in pieces]) for k in _FIELDS},
        network=joined(networks["network"]),
        overlapped=joined(networks["overlapped"]),
    )
    return components, np.array([where[s] for s in setups], dtype=int)


def _group(ids: list[int], setups: list[MeasuredSetup], kind: Kind, preset: Preset, bounds: tuple[float, float]):
    """One group's steps (term-major): ids, numerator, step -> setup, weights, network functions, unit parts."""
    first = setups[0]
    model = model_card(first.model_card)
    assert model is not None  # map_row only builds setups of catalog models
    unit = replace(
        preset, flop_efficiency=1.0, hbm_efficiency=1.0, kernel_launch_factor=1.0, network_latency_factor=1.0
    )
    gpu = evaluator.hardware(gpu_card(first.gpu_card), unit)
    numerator, terms = _steps(setups, kind, unit)
    batch = np.array([float(s.batch or 0) for s in setups])
    shape = batch.shape
    serial = [evaluator.collectives(model, gpu, unit, first.weight_bits, at) for _, _, at in terms]
    hidden = [
        [dp_attention.dispatch_combine(model, gpu, unit, at, overlapped=True)] if np.any(at.a2a_overlap) else []
        for _, _, at in terms
    ]
    networks = {
        "network": _network(serial, batch, bounds, len(unit.protocols)),
        "overlapped": _network(hidden, batch, bounds, len(unit.protocols)),
    }
    parts = [_parts(f, shape) for _, f, _ in terms]
    for factor in (1.0, bounds[1]):
        figures = (
            parts
            if factor == 1.0
            else [_parts(f, shape) for _, f, _ in _steps(setups, kind, replace(unit, network_latency_factor=factor))[1]]
        )
        for name, net in networks.items():
            own = np.concatenate([p[name] for p in figures])
            rebuilt = net.at(np.array([factor]))[0]
            if not np.allclose(rebuilt, own, rtol=REBUILT_TOLERANCE, atol=0.0):
                raise AssertionError(f"{name} time rebuilt from the collectives differs from evaluator.step's")
    weights = np.concatenate([np.broadcast_to(w, shape) for w, _, _ in terms])
    step_setup = np.tile(np.array(ids), len(terms))
    flat = {k: np.concatenate([p[k] for p in parts]) for k in _FIELDS}
    return ids, numerator, step_setup, weights, networks, flat
