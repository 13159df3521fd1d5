"""Disaggregated answers take the smallest prefill batch that serves as many requests/s: where the decode side limits
a unit, a larger prefill batch only raises TTFT (issue 28: a 997 ms TTFT where batch 3 gives 38 ms at one price)."""

from __future__ import annotations

import pytest

from roofline_opt import api
from roofline_opt.optimize.queries import cheapest

QUESTION = dict(model="qwen3-30b-a3b", gpu="h100-sxm", max_gpus=8, isl=2000, osl=500, ttft_ms=1000, serving="disagg")


@pytest.fixture(scope="module")
def answer():
    spec = dict(QUESTION)
    q = api.question(spec.pop("model"), spec.pop("gpu"), **spec)
    return q, cheapest(q, None)


def _prefill(q, s, batch):
    from roofline_opt.physics import evaluator as ev
    from roofline_opt.physics import requests as rq

    gpu = next(g for g in q.gpus if g.name == s.prefill_gpu)
    p_layout = ev.Layout.of(s.prefill_tp, s.prefill_tp_2d, s.prefill_pp, 0, 1, 1, s.kv_bits)
    d_layout = ev.Layout.of(s.tp, s.tp_2d, s.pp, 0, 1, 1, s.kv_bits)
    same = bool(rq.shares_domain(gpu, gpu, p_layout.n_gpus, d_layout.n_gpus))
    hop = gpu.intra_hop_latency_s if same else gpu.inter_hop_latency_s
    link = rq.kv_link_bytes_per_s(gpu, gpu, same)
    return rq.prefill_figures(q.model, gpu, q.preset, s.weight_bits, p_layout, batch, q.workload, link, hop)


def test_one_prompt_less_per_prefill_step_would_serve_fewer_requests(answer):
    q, a = answer
    s = a.setup
    assert s.serving == "disagg" and s.prefill_batch > s.prefill_pp
    fewer = s.prefill_instances * float(_prefill(q, s, s.prefill_batch - 1)["requests_per_s"])
    assert fewer < a.figures["requests_per_s"]


def test_a_larger_prefill_batch_serves_no_more_and_waits_longer(answer):
    """A prefill batch twice as large (still within memory and the TTFT limit) leaves the unit's requests/s, set by
    its decode side, unchanged and raises TTFT: the answer is the better-latency one of equal cost."""
    q, a = answer
    s = a.setup
    larger = _prefill(q, s, 2 * s.prefill_batch)
    assert bool(larger["fits_in_memory"]) and float(larger["ttft_s"]) <= q.max_ttft_s
    assert s.prefill_instances * float(larger["requests_per_s"]) > a.figures["requests_per_s"]
    assert float(larger["ttft_s"]) > a.figures["ttft_s"]
