"""Whole requests for measured rows that state input and output lengths: the prefill-aware model (physics.md 10.2-3).

A static batch (``static batch N``: all B prompts prefilled in one step, then O decode steps at the mean context
I + O / 2) takes T_prefill(B, I) + O x TPOT for O tokens per request. Continuous batching runs at the aggregated
steady state (``physics.requests.aggregated_figures``): each step carries B decode tokens and B x I / O prompt tokens
in chunks (budget: the engines' default 2048 tokens, or the steady-state load when larger), so TPOT and throughput
include the prompts' cost the measurement included. A row's tok/s per request is compared like with like: 1 / TPOT,
or O over the whole request's time (TTFT + (O - 1) TPOT; static: T_prefill + O TPOT) when its notes say the measured
speed spans the whole request. Rows measured with speculative decoding (MTP) and the decode side of disaggregated
rows keep the decode-only model: the whole-request model has no draft, and a decode instance does no prefill.
"""

from __future__ import annotations

import numpy as np

from roofline_opt.fidelity.measured import MeasuredSetup
from roofline_opt.physics import evaluator, requests
from roofline_opt.physics.specs import GpuSpec, ModelSpec, Preset


def applies(s: MeasuredSetup) -> bool:
    """The row states both lengths, is aggregated and was not measured with speculative decoding."""
    return s.input_len is not None and s.output_len is not None and s.serving == "aggregated" and not s.mtp_depth


def figures(
    s: MeasuredSetup, model: ModelSpec, gpu: GpuSpec, preset: Preset, layout: evaluator.Layout, batch
) -> dict[str, np.ndarray]:
    """The evaluator's whole-request figures of the row's instance at ``batch``: tok/s per request on the row's basis,
    output tok/s of the instance, memory and the binding resource of the decode step."""
    assert s.input_len is not None and s.output_len is not None  # applies(s) holds
    i, o = s.input_len, s.output_len
    batch = np.asarray(batch, dtype=float)
    if s.static_batch:
        out = dict(evaluator.evaluate(model, gpu, preset, s.weight_bits, layout, batch))
        prefill = requests.prefill_step(model, gpu, preset, s.weight_bits, layout, batch, i).step_time_s if i else 0.0
        tpot = out["step_time_s"]
        whole_s = prefill + o * tpot
        out["throughput_tok_s"] = batch * o / whole_s
    else:
        workload = requests.Workload.single(i, o)
        chunk = np.maximum(requests.DEFAULT_CHUNK_TOKENS, np.ceil(batch * workload.prompt_tokens_per_output))
        out = requests.aggregated_figures(model, gpu, preset, s.weight_bits, layout, batch, workload, chunk)
        tpot = out["tpot_s"]
        whole_s = out["ttft_s"] + (o - 1) * tpot
        out["throughput_tok_s"] = batch / tpot
        out["bottleneck"] = np.select(
            [out["network_s"] >= np.maximum(out["memory_s"], out["compute_s"]), out["memory_s"] >= out["compute_s"]],
            ["network", "memory"],
            "compute",
        )
    out["tok_s_per_request"] = o / whole_s if s.speed_basis == "request" else 1.0 / tpot
    return out
