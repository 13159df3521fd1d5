"""The prefill pool's rate measured rows imply, against the estimate's saturated prefill rate.

Usage::

    python benchmarks/prefill_rates.py FILE.csv [FILE.csv ...] [--rows] [--queue-batches 4] [--preset default]

Every disaggregated row that states its prefill side, both lengths, its concurrency, a median TTFT and a median TPOT
is read as the closed loop its benchmark ran (docs/fidelity.md, "Closed-loop benchmarks"). C clients each hold one
request at a time; a request spends TTFT before its first token and (O - 1) TPOT decoding the rest. By Little's law
the deployment completes

    X = C / (TTFT + (O - 1) TPOT)   requests/s,

of which D = X (O - 1) TPOT clients are decoding at any time and n = C - D = X TTFT are on the prefill side (queued,
prefilling, moving their KV cache). Whatever the pool's queue, every completed request was prefilled once, so the
prefill pool serves X requests/s: X I input tokens/s, over P prefill GPUs X I / P per GPU. That is the pool's
*saturated* rate only where it is the bottleneck, i.e. where requests queue in front of it. A row is counted as
prefill-bound when both

- n holds at least ``--queue-batches`` (default 4) full prefill batches of the estimate's pool (x instances, each
  batching ``whole_requests.PREFILL_BATCH_TOKENS`` prompt tokens per step per rank), and
- the measured TTFT is at least that many times the estimate's full-batch prefill step:

a queue several full steps deep, so the pool never idles. Its measured rate is compared with the estimate's saturated
rate (``whole_requests.prefill_rate``, third value, times I over P), both as input tokens/s per prefill GPU, per row
(``--rows``) and grouped by accelerator, weight bits, the prefill side's layout kind (TP; TP+EP: experts spread over
the TP ranks; DP-attention) and prompt length.

Caveats the arithmetic carries: the rows state medians, Little's law needs means (TTFT's distribution is skewed on a
queued pool, so the median TTFT understates the mean and X is an upper estimate); a benchmark's warm-up and tail are
in its stated throughput but not in the medians, which is why the stated output rate (``tok_s_per_gpu`` x GPUs / O,
printed as ``stated``) is a little below X. Nothing is fitted: the script only reads measured rows and the estimate.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from roofline_opt.fidelity import whole_requests
from roofline_opt.fidelity.measured import MeasuredRow, gpu_card, map_row, model_card, read_measured
from roofline_opt.physics.specs import PRESETS, Preset


@dataclass(frozen=True)
class PrefillRate:
    """One disaggregated row read as a closed loop: what its medians imply for the prefill pool, and the estimate."""

    row: MeasuredRow
    kind: str
    prefill_gpus: int
    requests_per_s: float
    stated_requests_per_s: float | None
    decoding_clients: float
    prefill_clients: float
    full_batches_queued: float
    ttft_over_step: float
    measured_tok_s_per_gpu: float
    estimated_tok_s_per_gpu: float

    @property
    def ratio(self) -> float:
        """Measured over estimated saturated rate (< 1: the pool serves fewer requests/s than estimated)."""
        return self.measured_tok_s_per_gpu / self.estimated_tok_s_per_gpu

    def prefill_bound(self, queue_batches: float) -> bool:
        return self.full_batches_queued >= queue_batches and self.ttft_over_step >= queue_batches


def layout_kind(row: MeasuredRow) -> str:
    """The prefill side's parallelism: DP-attention, TP+EP (experts spread over the TP ranks) or TP."""
    p = row.setup.prefill if row.setup else None
    assert p is not None
    if p.dp_attention:
        return "DP-attention"
    return "TP+EP" if p.ep > 1 else "TP"


def read(row: MeasuredRow, preset: Preset) -> PrefillRate | None:
    """The closed-loop reading of ``row`` (module docstring), None where it lacks a figure the arithmetic needs."""
    s = row.setup
    if s is None or s.serving != "disaggregated" or s.prefill is None or s.speed_basis != "tpot":
        return None
    if None in (s.input_len, s.output_len, s.clients, row.measured_ttft_s, row.measured_tok_s_per_request):
        return None
    assert s.input_len is not None and s.output_len is not None and s.clients is not None
    assert row.measured_ttft_s is not None and row.measured_tok_s_per_request is not None
    i, o, c, ttft_s = s.input_len, s.output_len, float(s.clients), row.measured_ttft_s
    tpot_s = 1.0 / row.measured_tok_s_per_request
    served = c / (ttft_s + (o - 1) * tpot_s)
    decoding = served * (o - 1) * tpot_s
    p = s.prefill
    prefill_gpus = p.tp * p.pp * p.instances
    model, gpu = model_card(s.model_card), gpu_card(s.gpu_card)
    assert model is not None
    _, _, saturated = whole_requests.prefill_rate(s, model, gpu, preset)
    most = whole_requests.prefill_batch(s)
    step_s = p.instances * most / saturated  # one full prefill step: the saturated pool's instances each finish `most`
    stated = None
    if row.measured_tok_s_per_gpu is not None:
        stated = row.measured_tok_s_per_gpu * s.gpus_in_all / o
    return PrefillRate(
        row=row,
        kind=layout_kind(row),
        prefill_gpus=prefill_gpus,
        requests_per_s=served,
        stated_requests_per_s=stated,
        decoding_clients=decoding,
        prefill_clients=c - decoding,
        full_batches_queued=(c - decoding) / (p.instances * most),
        ttft_over_step=ttft_s / step_s,
        measured_tok_s_per_gpu=served * i / prefill_gpus,
        estimated_tok_s_per_gpu=saturated * i / prefill_gpus,
    )


def rates(paths: Sequence[Path], preset: Preset) -> list[PrefillRate]:
    out = []
    for path in paths:
        for cells in read_measured(path):
            got = read(map_row(cells), preset)
            if got is not None:
                out.append(got)
    return out


def _prefill_text(r: PrefillRate) -> str:
    p = r.row.setup.prefill if r.row.setup else None
    assert p is not None
    return f"{p.instances} x {'DEP' if p.dp_attention else 'TP'}{p.tp}" + (f" EP{p.ep}" if p.ep > 1 else "")


def print_rows(chosen: list[PrefillRate]) -> None:
    print(
        "| line | accelerator | bits | prefill | I | C | TTFT s | TPOT ms | decoding | queued batches | "
        "Little req/s | stated req/s | measured tok/s/GPU | estimate | measured/estimate |"
    )
    print("|---" * 15 + "|")
    for r in sorted(chosen, key=lambda r: (r.row.gpu, r.kind, r.row.setup.input_len if r.row.setup else 0)):
        s = r.row.setup
        assert s is not None and r.row.measured_ttft_s and r.row.measured_tok_s_per_request
        stated = f"{r.stated_requests_per_s:.2f}" if r.stated_requests_per_s is not None else "-"
        print(
            f"| {r.row.line} | {s.gpu_card} | {s.weight_bits} | {_prefill_text(r)} | {s.input_len} | {s.clients} | "
            f"{r.row.measured_ttft_s:.2f} | {1e3 / r.row.measured_tok_s_per_request:.2f} | {r.decoding_clients:.0f} | "
            f"{r.full_batches_queued:.1f} | {r.requests_per_s:.2f} | {stated} | {r.measured_tok_s_per_gpu:,.0f} | "
            f"{r.estimated_tok_s_per_gpu:,.0f} | {r.ratio:.2f} |"
        )


def print_groups(chosen: list[PrefillRate]) -> None:
    groups: dict[tuple, list[PrefillRate]] = defaultdict(list)
    for r in chosen:
        s = r.row.setup
        assert s is not None
        groups[(s.gpu_card, s.weight_bits, r.kind, s.input_len)].append(r)
    print(
        "| accelerator | bits | prefill layout | I | rows | measured tok/s/GPU (median) | estimate (median) | "
        "measured/estimate median (range) | lines |"
    )
    print("|---" * 9 + "|")
    for (gpu, bits, kind, i), members in sorted(groups.items()):
        ratios = [r.ratio for r in members]
        print(
            f"| {gpu} | {bits} | {kind} | {i} | {len(members)} | "
            f"{np.median([r.measured_tok_s_per_gpu for r in members]):,.0f} | "
            f"{np.median([r.estimated_tok_s_per_gpu for r in members]):,.0f} | "
            f"{np.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) | "
            f"{', '.join(str(r.row.line) for r in members)} |"
        )
    ratios = [r.ratio for r in chosen]
    if ratios:
        q1, q3 = np.percentile(ratios, [25, 75])
        print(
            f"\nall prefill-bound rows: median measured/estimate {np.median(ratios):.2f} (n={len(ratios)}; "
            f"quartiles {q1:.2f}-{q3:.2f})"
        )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="measured-points CSVs")
    parser.add_argument("--preset", default="default", choices=sorted(PRESETS), help="the estimate's preset")
    parser.add_argument("--queue-batches", type=float, default=4.0, help="full prefill batches queued to count a row")
    parser.add_argument("--rows", action="store_true", help="also list every prefill-bound row")
    args = parser.parse_args(argv)
    found = rates(args.files, PRESETS[args.preset])
    chosen = [r for r in found if r.prefill_bound(args.queue_batches)]
    print(
        f"{len(found)} disaggregated rows with a stated prefill side, TTFT and TPOT; {len(chosen)} prefill-bound "
        f"(>= {args.queue_batches:g} full batches queued and TTFT >= {args.queue_batches:g} full prefill steps); "
        f"preset {args.preset}\n"
    )
    print_groups(chosen)
    if args.rows:
        print()
        print_rows(chosen)


if __name__ == "__main__":
    main()
