"""The decode batch an aggregated prompt's wait is served at: the batch of the busy period it waits in
(docs/physics/queueing.md, "Aggregated with chunked prefill")."""

from __future__ import annotations

import numpy as np
import pytest

from roofline_opt import catalog
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics import queueing as qm
from roofline_opt.physics import requests as rq
from roofline_opt.physics.specs import DEFAULT

H100 = catalog.load_gpu("h100-sxm")
LLAMA8 = catalog.resolve_model("llama-3-8b", "model")[0]
LAYOUT = ev.Layout.of(1, False, 1, 3025.0, 1, 1, 16)


def test_a_prompt_that_does_not_wait_is_served_at_the_time_average_batch():
    assert qm._busy_period_batch(5.0, 17.0, 0.7, 50.0, 0.0) == 5.0


def test_the_batch_is_the_mean_of_the_busy_periods_ramp_over_the_prompts_span():
    # 10 steps of wait at rho 0.5: it arrived 20 steps into the busy period, a span of 30 of the 50-step window
    assert qm._busy_period_batch(5.0, 17.0, 0.5, 50.0, 10.0) == pytest.approx(5.0 + 12.0 * 30.0 / 100.0)


def test_a_long_wait_is_served_at_o_chunk_over_i_sequences():
    assert qm._busy_period_batch(5.0, 17.0, 0.9, 50.0, 1e6) == pytest.approx(17.0, rel=1e-4)


def test_the_busy_period_batch_lifts_the_tail_above_the_time_average_batchs():
    workload, chunk, rate = rq.Workload.single(3000, 50), 1024, 9.0
    setup = (LLAMA8, H100, DEFAULT, 16, LAYOUT)
    batch = qm.mean_decode_batch(*setup, workload, chunk, rate)
    work, head, shift, _ = qm._aggregated_parts(*setup, batch, workload, chunk)
    at_mean = qm.percentile_ttft_s(99.0, workload._w(), work, head, rate, 1, 1.0, shift)
    model = qm.aggregated_ttft(*setup, workload, chunk, qm.Arrivals(rate))
    assert model["ttft_s"][2] > 1.1 * float(at_mean)


def test_aggregated_percentile_is_the_same_elementwise_over_batches_as_one_at_a_time():
    workload, batches = rq.Workload((3000, 800), (50, 200), (1.0, 2.0)), np.array([2.0, 8.0, 20.0])
    setup = (LLAMA8, H100, DEFAULT, 16, LAYOUT)
    together = qm.aggregated_percentile_ttft_s(90.0, *setup, batches, workload, 1024)
    alone = [float(qm.aggregated_percentile_ttft_s(90.0, *setup, b, workload, 1024)) for b in batches]
    assert together == pytest.approx(alone, rel=1e-12)
