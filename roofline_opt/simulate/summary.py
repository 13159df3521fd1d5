"""Figures of a simulated run: TTFT and TPOT percentiles, utilisation of each pool and throughput."""

from __future__ import annotations

import numpy as np

from roofline_opt.physics.queueing import PERCENTILES
from roofline_opt.simulate.engine import Served


def figures(served: Served, percentiles=PERCENTILES) -> dict[str, float]:
    """One flat dict: ttft_p50_s.., tpot_p50_s.., prefill_utilisation (busy share of the prefill path),
    decode_utilisation (mean sequences decoding over slots), requests_per_s and output tok/s over the run."""
    span = float(served.finish_s.max() - served.arrival_s.min())
    out: dict[str, float] = {"requests": len(served.arrival_s), "span_s": span}
    for name, values in (("ttft", served.ttft_s), ("tpot", served.tpot_s)):
        for p, v in zip(percentiles, np.percentile(values, percentiles), strict=True):
            out[f"{name}_p{p:g}_s"] = float(v)
        out[f"{name}_mean_s"] = float(values.mean())
    out["prefill_utilisation"] = served.prefill_busy_s / (served.prefill_servers * span)
    out["decode_utilisation"] = served.decode_batch_time_s / (served.decode_slots * span)
    out["requests_per_s"] = len(served.arrival_s) / span
    out["throughput_tok_s"] = float(served.osl.sum()) / span
    return out
