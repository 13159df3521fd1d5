"""Whole requests for measured rows that state input and output lengths: the prefill-aware model (physics.md 10.2-3)
run the way the benchmarks run it, closed loop (docs/fidelity.md, "Closed-loop benchmarks").

A static batch (``static batch N``: all B prompts prefilled in one step, then O decode steps at the mean context
I + O / 2) takes T_prefill(B, I) + O x TPOT for O tokens per request.

The other rows come from fixed-concurrency benchmarks (InferenceX's and the engines' ``benchmark_serving`` with
``--max-concurrency C``): C clients each send a request, wait for its last token and send the next one at once. By
Little's law such a deployment serves X = C / (TTFT + (O - 1) TPOT) requests/s, O output tokens each: a client waiting
for its first token produces none, so the output rate is below C / TPOT by the TTFT's share of the request.

- Aggregated (continuous batching): each step carries the decode tokens and the steady state's B x I / O prompt
  tokens in chunks (budget: what the run's launch script sets, ``MeasuredSetup.chunk_tokens`` from
  ``fidelity.recipes``, else the engines' default 2048 tokens; the steady-state load when larger;
  ``physics.requests.aggregated_figures``), which gives TPOT and TTFT; the row's output rate is C O / (TTFT + (O - 1)
  TPOT).
- Disaggregated (the row states its prefill side): the C clients are split between the prefill pool (queued,
  prefilling or moving their KV cache) and the decode instances. With b sequences decoding per decode instance, the
  y decode instances finish X_d(b) = y b / ((O - 1) TPOT(b)) requests/s, and the n = C - y b - X t_kv clients before
  them keep the x prefill instances busy at X_p(n): n / T_pre(n / x) while each instance batches all it holds, at most
  ``PREFILL_BATCH_TOKENS`` prompt tokens per step, beyond that x B_max / T_pre(B_max) with the rest queued. The
  steady state is the b where X_d(b) = X_p(n) (X_d rises with b and X_p falls: one crossing, found by bisection).
  TPOT(b) is the decode step's (speculative rounds included) at the b that crossing gives, so a prefill-bound row
  decodes a small batch fast; TTFT is the prefill side's residence time (C - y b) / X.

A row's tok/s per request is compared like with like: 1 / TPOT, or O over the whole request's time (TTFT + (O - 1)
TPOT; static: T_prefill + O TPOT) when its notes say the measured speed spans the whole request. An aggregated row
measured with speculative decoding (MTP) runs the draft in the same cycle (``physics.requests.Speculation``: each
round yields E tokens per sequence and carries E times a step's prompt tokens); its static batches are not modelled
with a draft and keep the decode-only model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from roofline_opt.fidelity.measured import MeasuredSetup
from roofline_opt.physics import evaluator, requests
from roofline_opt.physics.mtp import mtp_module
from roofline_opt.physics.specs import GpuSpec, ModelSpec, Preset

PREFILL_BATCH_TOKENS = 16384
"""Prompt tokens a prefill instance (each data-parallel attention rank of it) batches into one step at most: SGLang's
default ``max_prefill_tokens`` (sgl-project/sglang python/sglang/srt/server_args.py, ``max_prefill_tokens: int =
16384``). Prefill at the rows' 1k-8k prompts is compute-bound, so the figure moves the prefill rate little."""

SATURATED_SHARE = 0.999
"""A disaggregated row's ``bottleneck`` is ``prefill`` where its pool serves at least this share of its saturated
rate (the bisection meets the saturated rate to rounding, not exactly)."""

BISECTION_ROUNDS = 60
"""Halvings of the decode batch's interval when solving the closed loop's steady state (2^-60 of the batch)."""

Decode = Callable[[np.ndarray], dict[str, np.ndarray]]
"""The evaluator's decode figures of the row's decode instance at given batches (its MTP draft included)."""


def applies(s: MeasuredSetup) -> bool:
    """The row states both lengths and is aggregated (but not a static batch measured with speculative decoding), or
    disaggregated with a stated prefill side and at least two output tokens (one from prefill, the rest decoded)."""
    if s.input_len is None or s.output_len is None:
        return False
    if s.serving == "disaggregated":
        return s.prefill is not None and s.input_len >= 1 and s.output_len >= 2 and not s.static_batch
    return not (s.static_batch and s.mtp_depth)


def figures(
    s: MeasuredSetup,
    model: ModelSpec,
    gpu: GpuSpec,
    preset: Preset,
    layout: evaluator.Layout,
    batch,
    decode: Decode,
) -> dict[str, np.ndarray]:
    """The evaluator's whole-request figures of the row's instance at ``batch`` (clients per decode instance): tok/s per
    request on the row's basis, output tok/s of the instance, memory and the binding resource."""
    assert s.input_len is not None and s.output_len is not None  # applies(s) holds
    i, o = s.input_len, s.output_len
    batch = np.asarray(batch, dtype=float)
    if s.serving == "disaggregated":
        return disaggregated(s, model, gpu, preset, batch, decode)
    if not s.static_batch:
        depths = range(s.mtp_depth + 1) if s.mtp_best_depth else (s.mtp_depth,)
        return _best(_aggregated(s, model, gpu, preset, layout, batch, _speculation(s, model, g)) for g in depths)
    out = dict(evaluator.evaluate(model, gpu, preset, s.weight_bits, layout, batch))
    prefill = requests.prefill_step(model, gpu, preset, s.weight_bits, layout, batch, i).step_time_s if i else 0.0
    tpot = out["step_time_s"]
    whole_s = prefill + o * tpot
    out["throughput_tok_s"] = batch * o / whole_s
    out["ttft_s"] = np.broadcast_to(prefill, batch.shape)
    out["tok_s_per_request"] = o / whole_s if s.speed_basis == "request" else 1.0 / tpot
    return out


def _speculation(s: MeasuredSetup, model: ModelSpec, gamma: int) -> requests.Speculation | None:
    """The row's MTP draft proposing ``gamma`` tokens per round (None without one)."""
    if not gamma:
        return None
    return requests.Speculation(mtp_module(model), float(gamma), s.acceptance, s.draft_weight_bits or s.weight_bits)


def _aggregated(
    s: MeasuredSetup,
    model: ModelSpec,
    gpu: GpuSpec,
    preset: Preset,
    layout: evaluator.Layout,
    batch: np.ndarray,
    spec: requests.Speculation | None,
) -> dict[str, np.ndarray]:
    """Closed-loop figures of an aggregated instance at ``batch`` clients (module docstring), speculating with
    ``spec``: its chunk budget holds a round's prompt tokens, B E I / O."""
    assert s.input_len is not None and s.output_len is not None
    o = s.output_len
    workload = requests.Workload.single(s.input_len, o)
    per_round = 1.0 if spec is None else spec.tokens_per_round
    load = np.ceil(batch * workload.prompt_tokens_per_output * per_round)
    budget = requests.DEFAULT_CHUNK_TOKENS if s.chunk_tokens is None else s.chunk_tokens
    chunk = np.maximum(budget, load)
    out = requests.aggregated_figures(model, gpu, preset, s.weight_bits, layout, batch, workload, chunk, spec=spec)
    tpot = out["tpot_s"]
    whole_s = out["ttft_s"] + (o - 1) * tpot
    out["throughput_tok_s"] = batch * o / whole_s
    out["bottleneck"] = np.select(
        [out["network_s"] >= np.maximum(out["memory_s"], out["compute_s"]), out["memory_s"] >= out["compute_s"]],
        ["network", "memory"],
        "compute",
    )
    out["tok_s_per_request"] = o / whole_s if s.speed_basis == "request" else 1.0 / tpot
    return out


def _best(candidates: Iterable[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The figures of the draft depth with the most throughput at each batch, its speed the fastest depth's (the
    bound reads an unstated depth as favourably as any: ``MeasuredSetup.for_bound``)."""
    best: dict[str, np.ndarray] | None = None
    for out in candidates:
        if best is None:
            best = out
            continue
        ahead = out["throughput_tok_s"] > best["throughput_tok_s"]
        speed = np.maximum(out["tok_s_per_request"], best["tok_s_per_request"])
        best = {k: np.where(ahead, out[k], best[k]) if k in out else best[k] for k in best}
        best["tok_s_per_request"] = speed
    assert best is not None
    return best


def _table_batches(top: float) -> np.ndarray:
    """Decode batches the TPOT curve is tabulated at: every whole batch up to 4096, then 4,000 geometrically spaced."""
    dense = np.arange(1.0, min(top, 4096.0) + 1.0)
    if top <= 4096:
        return dense
    return np.unique(np.concatenate([dense, np.geomspace(4096.0, top, 4000), [top]]))


def prefill_batch(s: MeasuredSetup) -> int:
    """The most prompts one prefill instance of a disaggregated row batches into a step: ``PREFILL_BATCH_TOKENS`` of
    prompt tokens per data-parallel attention rank (at least one prompt each)."""
    p = s.prefill
    assert p is not None and s.input_len is not None and s.input_len >= 1  # applies(s) holds
    ranks = p.tp if p.dp_attention else 1
    return max(1, PREFILL_BATCH_TOKENS // s.input_len) * ranks


def prefill_rate(
    s: MeasuredSetup, model: ModelSpec, gpu: GpuSpec, preset: Preset
) -> tuple[Callable[[np.ndarray], np.ndarray], float, float]:
    """The prefill pool of a disaggregated row: requests/s it serves with n clients in it (a function of n), the
    seconds one request's KV cache takes to reach its decode instance, and the pool's saturated requests/s (its
    instances each prefilling their largest batch: ``prefill_batch``)."""
    p = s.prefill
    assert p is not None and s.input_len is not None  # applies(s) holds
    i = s.input_len
    layout = evaluator.Layout.of(
        p.tp, False, p.pp, 0, 1, p.ep, s.kv_bits, dp_attention=p.dp_attention, a2a_overlap=p.a2a_overlap
    )
    most = prefill_batch(s)
    prompts = np.arange(1.0, most + 1.0)
    step_s = np.broadcast_to(
        requests.prefill_step(model, gpu, preset, s.weight_bits, layout, prompts, i).step_time_s, prompts.shape
    )
    decode_gpus = s.tp * s.pp
    same = bool(requests.shares_domain(gpu, gpu, p.tp * p.pp, decode_gpus))
    link = requests.kv_link_bytes_per_s(gpu, gpu, same)
    hop = gpu.intra_hop_latency_s if same else gpu.inter_hop_latency_s
    kv_s = float(np.ravel(requests.kv_transfer_s(model, layout, i, link, hop))[0])
    x = float(p.instances)

    def rate(clients: np.ndarray) -> np.ndarray:
        held = np.clip(clients / x, 0.0, None)
        batched = np.clip(held, 1.0, float(most))
        return x * np.minimum(held, float(most)) / np.interp(batched, prompts, step_s)

    return rate, kv_s, x * most / float(step_s[-1])


def disaggregated(
    s: MeasuredSetup, model: ModelSpec, gpu: GpuSpec, preset: Preset, batch: np.ndarray, decode: Decode
) -> dict[str, np.ndarray]:
    """Closed-loop figures of a disaggregated row at ``batch`` clients per decode instance (module docstring)."""
    assert s.output_len is not None
    o, y = s.output_len, float(s.instances)
    rate, kv_s, saturated = prefill_rate(s, model, gpu, preset)
    table = _table_batches(float(max(np.max(batch), 1.0)))
    tpot_table = 1.0 / np.broadcast_to(decode(table)["tok_s_per_request"], table.shape)

    def tpot(b: np.ndarray) -> np.ndarray:
        return np.interp(np.clip(b, 1.0, None), table, tpot_table)

    def decode_rate(b: np.ndarray) -> np.ndarray:
        return y * b / ((o - 1) * tpot(b))

    clients = batch * y
    low, high = np.zeros_like(batch), batch.copy()
    for _ in range(BISECTION_ROUNDS):
        mid = (low + high) / 2
        served = decode_rate(mid)
        ahead = rate(clients - y * mid - served * kv_s) > served
        low, high = np.where(ahead, mid, low), np.where(ahead, high, mid)
    decoding = (low + high) / 2
    served = decode_rate(decoding)
    tpot_s = tpot(decoding)
    ttft_s = (clients - y * decoding) / served
    out = dict(decode(batch))
    prefill_bound = served >= SATURATED_SHARE * saturated
    out.update(
        tpot_s=tpot_s,
        ttft_s=ttft_s,
        decoding_batch=decoding,
        requests_per_s=served,
        throughput_tok_s=served * o / y,
        bottleneck=np.where(prefill_bound, "prefill", np.broadcast_to(out["bottleneck"], batch.shape)),
    )
    whole_s = ttft_s + (o - 1) * tpot_s
    out["tok_s_per_request"] = o / whole_s if s.speed_basis == "request" else 1.0 / tpot_s
    return out
