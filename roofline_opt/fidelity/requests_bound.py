"""Prefill-aware predictions for measured rows that state input and output lengths (model-notes 10.2-10.3).

A static batch (all B prompts prefilled in one step, then O decode steps at the mean context I + O / 2) gives each
request O / (T_prefill(B, I) + O x TPOT) tokens/s; continuous batching runs at the aggregated steady state, whose TPOT
carries the B x I / O prompt tokens per step (chunk budget: the default 2048 tokens, or the steady-state load when it
is larger). Both include the prompt's cost the decode-only bound ignores, so they bound measured figures more tightly.
"""

from __future__ import annotations

import math

import numpy as np

from roofline_opt.fidelity.measured import MeasuredSetup, gpu_card, model_card
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics import requests as rq
from roofline_opt.physics.specs import Preset


def request_prediction(setup: MeasuredSetup, preset: Preset) -> tuple[float | None, float | None]:
    """(tok/s per request, tok/s per GPU) of one measured setup with its prompts priced (None without lengths).

    ``speed_basis`` "request" (a static batch's whole-request average) takes the static-batch formula, "tpot" the
    aggregated steady state."""
    if setup.input_len is None or setup.output_len is None:
        return None, None
    model, gpu = model_card(setup.model_card), gpu_card(setup.gpu_card)
    assert model is not None  # map_row only builds setups of catalog models
    layout = ev.Layout.of(setup.tp, False, setup.pp, setup.context, 1, setup.ep, setup.kv_bits)
    b, i, o = float(setup.batch), setup.input_len, setup.output_len
    workload = rq.Workload.single(i, o)
    if setup.speed_basis == "request":
        prefill = rq.prefill_step(model, gpu, preset, setup.weight_bits, layout, b, i).step_time_s if i else 0.0
        decode = ev.step(model, gpu, preset, setup.weight_bits, layout, b).step_time_s
        seconds = float(np.asarray(prefill + o * decode))
        per_request = o / seconds
    else:
        chunk = max(rq.DEFAULT_CHUNK_TOKENS, math.ceil(b * workload.prompt_tokens_per_output))
        step = rq.tpot_step(model, gpu, preset, setup.weight_bits, layout, b, workload, chunk, 1.0)
        per_request = 1.0 / float(np.asarray(step.step_time_s))
    return per_request, per_request * b / setup.n_gpus
