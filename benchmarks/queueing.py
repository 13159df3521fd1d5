"""Queueing model against the simulator, run by hand: ``python benchmarks/queueing.py [--requests 20000 --seeds 4]``.

Prints the p90/p99 TTFT error of ``physics.queueing`` and the p90/p99 TPOT error of ``physics.tpot_percentiles``
against ``simulate.engine`` in percent (negative: the model is lower) on the grid of docs/physics/queueing.md:
Llama-3-8B on one H100 SXM (TP 1, default preset); disaggregated 2,000-token prompts on x = 1, 2 prefill instances,
Poisson and c_a^2 = 4, and a decode instance of 2000/200 requests; aggregated 3000/1024 and 1500/2048
(prompt/chunk) with 50 output tokens and 2000/200/2048, 256 slots.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from roofline_opt import catalog
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics import queueing as qm
from roofline_opt.physics import requests as rq
from roofline_opt.physics import tpot_percentiles as tq
from roofline_opt.physics.specs import DEFAULT
from roofline_opt.simulate import arrivals, engine

H100 = catalog.load_gpu("h100-sxm")
MODEL = catalog.resolve_model("llama-3-8b", "model")[0]
PHYSICS = engine.Physics(MODEL, DEFAULT, 16)
UTILISATIONS = (0.3, 0.5, 0.7, 0.8, 0.9)


def _layout(context: float) -> ev.Layout:
    return ev.Layout.of(1, False, 1, context, 1, 1, 16)


def _error(model_s: np.ndarray, runs: list[engine.Served], figure: str = "ttft_s") -> str:
    sim = np.mean([np.percentile(getattr(r, figure), [90.0, 99.0]) for r in runs], axis=0)
    p90, p99 = 100.0 * (model_s[1:] / sim - 1.0)
    return f"{p90:+.1f} / {p99:+.1f}"


def _table(title: str, header: str, rows: list[tuple[str, list[str]]]) -> None:
    print(title)
    print(f"| {header} | " + " | ".join(f"rho {u}" for u in UTILISATIONS) + " |")
    print("|---" * (header.count("|") + 1 + len(UTILISATIONS)) + "|")
    for label, cells in rows:
        print(f"| {label} | " + " | ".join(cells) + " |")
    print()


def disaggregated(n: int, seeds: int) -> None:
    """TTFT on x prefill instances of 2,000-token prompts (2 output tokens); TPOT of one decode instance serving
    2000 / 200 requests behind four prefill instances, at the decode batch of each rho's arrival rate."""
    workload, prefill = rq.Workload.single(2000, 2), _layout(0.0)
    service = float(rq.prefill_step(MODEL, H100, DEFAULT, 16, prefill, 1.0, 2000).step_time_s)
    rows = []
    for x in (1, 2):
        for scv in (1.0, 4.0):
            cells = []
            for u in UTILISATIONS:
                process = qm.Arrivals(u * x / service, scv)
                model = qm.disaggregated_ttft(
                    MODEL, DEFAULT, 16, workload, (H100, prefill, x), (H100, _layout(2001.0)), process
                )
                runs = [
                    engine.disaggregated(
                        PHYSICS,
                        (H100, prefill, 1, x),
                        (H100, _layout(2001.0), 64, x),
                        arrivals.draw(process, workload, n, s),
                    )
                    for s in range(seeds)
                ]
                cells.append(_error(model["ttft_s"], runs))
            rows.append((f"{x} | {scv:g}", cells))
    _table("Disaggregated TTFT p90 / p99, model against simulator (%):", "x | c_a^2", rows)
    decode_workload, decode = rq.Workload.single(2000, 200), _layout(2100.0)
    rows = []
    for scv in (1.0, 4.0):
        cells = []
        for u in UTILISATIONS:
            # u: the decode-only work's load rho = lambda O c at the arrival rate (physics/tpot_percentiles.py)
            process = qm.Arrivals(_decode_rate(decode, decode_workload, u), scv)
            model = tq.tpot_at_rate_s(MODEL, H100, DEFAULT, 16, decode, decode_workload, 0, process, False)
            runs = [
                engine.disaggregated(
                    PHYSICS,
                    (H100, prefill, 1, 4),
                    (H100, decode, 1024, 1),
                    arrivals.draw(process, decode_workload, n, s),
                )
                for s in range(seeds)
            ]
            cells.append(_error(model, runs, "tpot_s"))
        rows.append((f"{scv:g}", cells))
    _table("Disaggregated decode instance TPOT p90 / p99, 2000 / 200, 1024 slots (%):", "c_a^2", rows)


def _decode_rate(layout: ev.Layout, workload: rq.Workload, utilisation: float) -> float:
    """Arrival rate at which a decode instance's load-driven share of its step, rho = 1 - a / s(B)
    (physics/tpot_percentiles.py), is ``utilisation``."""

    def step(batch):
        return rq.tpot_step(MODEL, H100, DEFAULT, 16, layout, batch, workload, 0, 0.0).step_time_s

    lo, hi = 1e-3, 1e4
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        batch = qm.mean_decode_batch(MODEL, H100, DEFAULT, 16, layout, workload, 0, mid, 0.0)
        load = 2.0 if not math.isfinite(batch) else 1.0 - float(tq.linearised_step(step, batch)[2]) / float(step(batch))
        lo, hi = (mid, hi) if load < utilisation else (lo, mid)
    return lo


def _aggregated_rate(layout: ev.Layout, workload: rq.Workload, chunk: int, utilisation: float) -> float:
    lo, hi = 1e-3, 1e3
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        u = qm.aggregated_ttft(MODEL, H100, DEFAULT, 16, layout, workload, chunk, qm.Arrivals(mid))["utilisation"]
        lo, hi = (mid, hi) if u < utilisation else (lo, mid)
    return lo


def aggregated(n: int, seeds: int) -> None:
    """TTFT and TPOT of one aggregated instance (256 slots) at rho of the chunk budget: 3000 / 1024 and 1500 / 2048
    (prompt / chunk) with 50 output tokens, and 2000 / 200 / 2048 (the workload of the docs' percentile example)."""
    ttft_rows, tpot_rows = [], []
    for isl, osl, chunk in ((3000, 50, 1024), (1500, 50, 2048), (2000, 200, 2048)):
        workload, layout = rq.Workload.single(isl, osl), _layout(isl + osl / 2)
        ttft_cells, tpot_cells = [], []
        for u in UTILISATIONS:
            process = qm.Arrivals(_aggregated_rate(layout, workload, chunk, u))
            model = qm.aggregated_ttft(MODEL, H100, DEFAULT, 16, layout, workload, chunk, process)
            tpot = tq.tpot_at_rate_s(MODEL, H100, DEFAULT, 16, layout, workload, chunk, process, True)
            runs = [
                engine.aggregated(PHYSICS, H100, layout, 256, chunk, arrivals.draw(process, workload, n, s))
                for s in range(seeds)
            ]
            ttft_cells.append(_error(model["ttft_s"], runs))
            tpot_cells.append(_error(tpot, runs, "tpot_s"))
        ttft_rows.append((f"{isl} / {osl} / {chunk}", ttft_cells))
        tpot_rows.append((f"{isl} / {osl} / {chunk}", tpot_cells))
    _table("Aggregated TTFT p90 / p99, model against simulator (%):", "prompt / output / chunk", ttft_rows)
    _table("Aggregated TPOT p90 / p99, model against simulator (%):", "prompt / output / chunk", tpot_rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000, help="requests per seed (default 20000)")
    parser.add_argument("--seeds", type=int, default=4, help="seeds averaged (default 4)")
    args = parser.parse_args()
    disaggregated(args.requests, args.seeds)
    aggregated(args.requests, args.seeds)


if __name__ == "__main__":
    main()
