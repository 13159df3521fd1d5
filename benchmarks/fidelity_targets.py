"""Issue 22's fidelity targets on measured-points CSVs: bound coverage, the estimate's error, layout ordering.

Usage::

    python benchmarks/fidelity_targets.py FILE.csv [FILE.csv ...] [--since 2025] [--slices] [--show-misordered]
        [--engine-profiles]

For each file (and for all files together when more than one is given) it prints:

- the share of rows with a verdict on which the bound holds (``validate``'s verdict, default preset at peak);
  with ``--engine-profiles`` the estimate of each row uses its engine's packaged profile (the framework column:
  vLLM, SGLang, TensorRT-LLM; other rows stay neutral), as ``roofline-opt validate`` does without --engine;
- the median absolute error |estimate / measured - 1| of the default preset's realistic estimate, for tok/s per GPU
  and tok/s per user, on all rows and on *modern* rows (see ``is_modern``), over rows stating both input and output
  lengths (a row without an input length is bounded with empty prompts, which estimates nothing). Tok/s per user is
  compared on ``point`` rows only (the estimate at the measured batch); tok/s per GPU on ``point``, ``throughput
  ceiling`` (the largest batch that fits) and ``frontier`` rows (at the measured speed);
- the estimate's time to first token over the median a row states (its notes' ``median TTFT N ms``), on modern
  point rows with whole requests;
- layout ordering: over pairs of rows with the same model card, weight precision, accelerator, framework (as written,
  version included), input/output lengths, batch or concurrency text, check and MTP depth but different mapped
  layouts, the share the estimate orders like the measurement (tok/s per GPU; and tok/s per user for ``point``
  pairs); and over pairs of ``point`` rows of one workload at any concurrency where one layout beats the other on
  both figures, the share the estimate puts the same row ahead on both;
- a per-framework table: rows, verdicts, bound holds, median bound/measured, and the estimate's median errors.

No figure is fitted: the script only reads ``roofline_opt.fidelity.validate`` results.
"""

from __future__ import annotations

import argparse
import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from roofline_opt.catalog.profiles import MEASURED_ENGINE_KEYS, engine_of_framework, load_profile
from roofline_opt.fidelity.measured import read_measured
from roofline_opt.fidelity.summary import framework_family, summarise
from roofline_opt.fidelity.validate import ValidationRow, validate
from roofline_opt.physics.profiles import EngineProfile

DATE_RE = re.compile(r"\b(20\d\d)-(?:0[1-9]|1[0-2])\b")
"""A date a row's source or notes state (``2026-05-20``, ``runs 2025-10-29``)."""

MODERN_SOFTWARE_RE = re.compile(
    r"pytorch backend|tensorrt-llm 1\.|release:1\.|sglang v0\.5|dynamo|\bv1\b|atom|mlperf v5|inference_results_v5",
    re.IGNORECASE,
)
"""Software released in 2025 or later, when a row states no date: TensorRT-LLM's PyTorch backend (trtllm-bench's
default from v0.17, 2025) and its 1.x releases, LMDeploy's PyTorch backend (v0.7, 2025), SGLang 0.5, NVIDIA Dynamo,
vLLM's V1 engine, AMD's ATOM and MLPerf Inference v5.x submissions."""

PER_GPU_CHECKS = ("point", "throughput ceiling", "frontier")


@dataclass(frozen=True)
class Judged:
    """A validated row with the CSV cells it was read from (lengths, batch text, source and notes)."""

    result: ValidationRow
    cells: Mapping[str, str]


def is_modern(j: Judged, since: int) -> bool:
    """A row measured in ``since`` or later: a date in its source or notes, else software of that era."""
    text = " ".join(str(j.cells.get(k, "")) for k in ("framework", "source_url_or_repo_path", "notes"))
    years = [int(y) for y in DATE_RE.findall(text)]
    if years:
        return max(years) >= since
    return since <= 2025 and MODERN_SOFTWARE_RE.search(text) is not None


def _error(estimate: float | None, measured: float | None) -> float | None:
    if estimate is None or measured is None or measured <= 0:
        return None
    return abs(estimate / measured - 1.0)


def _whole_requests(rows: Iterable[Judged]) -> Iterable[ValidationRow]:
    """Rows stating both input and output lengths: a row without an input length is read with empty prompts, a
    generous bound but no estimate of the row."""
    return (j.result for j in rows if j.result.row.setup is not None and j.result.row.setup.input_len is not None)


def per_gpu_errors(rows: Iterable[Judged]) -> list[float]:
    out = []
    for r in _whole_requests(rows):
        if r.check in PER_GPU_CHECKS:
            e = _error(r.estimate.tok_s_per_gpu, r.row.measured_tok_s_per_gpu)
            if e is not None:
                out.append(e)
    return out


def per_user_errors(rows: Iterable[Judged]) -> list[float]:
    out = []
    for r in _whole_requests(rows):
        if r.check == "point":
            e = _error(r.estimate.tok_s_per_request, r.row.measured_tok_s_per_request)
            if e is not None:
                out.append(e)
    return out


def ttft_ratios(rows: Iterable[Judged]) -> list[float]:
    """Estimated over measured median time to first token, on point rows stating a TTFT the estimate has one for."""
    out = []
    for r in _whole_requests(rows):
        estimate, measured = r.estimate.ttft_s, r.row.measured_ttft_s
        if r.check == "point" and estimate is not None and measured:
            out.append(estimate / measured)
    return out


def _median(values: Sequence[float]) -> str:
    return f"{np.median(values):.1%} (n={len(values)})" if values else "- (n=0)"


def _workload_key(j: Judged) -> tuple | None:
    r, cells = j.result, j.cells
    s = r.row.setup
    if s is None or r.check is None:
        return None
    return (
        s.model_card,
        s.weight_bits,
        s.gpu_card,
        r.row.framework.strip(),
        cells.get("input_len", ""),
        cells.get("output_len", ""),
        cells.get("batch_or_concurrency", ""),
        r.check,
        s.mtp_depth,
    )


def _same_order(a_est, b_est, a_meas, b_meas) -> bool | None:
    if None in (a_est, b_est, a_meas, b_meas) or a_meas == b_meas:
        return None
    return (a_est > b_est) == (a_meas > b_meas)


def layout_pairs(rows: Iterable[Judged]) -> tuple[list[bool], list[bool], list[str]]:
    """Whether the estimate orders each same-workload layout pair like the measurement: per GPU, per user, and the
    disagreeing pairs in words."""
    groups: dict[tuple, list[ValidationRow]] = {}
    for j in rows:
        key = _workload_key(j)
        if key is not None:
            groups.setdefault(key, []).append(j.result)
    per_gpu, per_user, wrong = [], [], []
    for key, members in groups.items():
        for a, b in itertools.combinations(members, 2):
            if a.row.setup.label == b.row.setup.label:  # type: ignore[union-attr]
                continue
            g = _same_order(
                a.estimate.tok_s_per_gpu,
                b.estimate.tok_s_per_gpu,
                a.row.measured_tok_s_per_gpu,
                b.row.measured_tok_s_per_gpu,
            )
            if g is not None:
                per_gpu.append(g)
                if not g:
                    wrong.append(
                        f"{key[0]} {key[2]} {key[3]} {key[4]}/{key[5]} {key[6]}: {a.row.setup.label} "  # type: ignore[union-attr]
                        f"(line {a.row.line}) vs {b.row.setup.label} (line {b.row.line}); measured "  # type: ignore[union-attr]
                        f"{a.row.measured_tok_s_per_gpu:.0f} vs {b.row.measured_tok_s_per_gpu:.0f}, estimated "
                        f"{a.estimate.tok_s_per_gpu:.0f} vs {b.estimate.tok_s_per_gpu:.0f} tok/s per GPU"
                    )
            if key[7] == "point":
                u = _same_order(
                    a.estimate.tok_s_per_request,
                    b.estimate.tok_s_per_request,
                    a.row.measured_tok_s_per_request,
                    b.row.measured_tok_s_per_request,
                )
                if u is not None:
                    per_user.append(u)
    return per_gpu, per_user, wrong


def dominance_pairs(rows: Iterable[Judged]) -> list[bool]:
    """Point rows of one workload (``_workload_key`` without the concurrency) in different layouts where the
    measurement has one row ahead on both tok/s per GPU and per user: whether the estimate puts the same row ahead on
    both (the order a frontier over layouts would draw)."""
    groups: dict[tuple, list[ValidationRow]] = {}
    for j in rows:
        key = _workload_key(j)
        if key is not None and key[7] == "point":
            groups.setdefault(key[:6] + key[7:], []).append(j.result)
    out = []
    for members in groups.values():
        for a, b in itertools.combinations(members, 2):
            if a.row.setup.label == b.row.setup.label:  # type: ignore[union-attr]
                continue
            figures = [
                (
                    r.row.measured_tok_s_per_gpu,
                    r.row.measured_tok_s_per_request,
                    r.estimate.tok_s_per_gpu,
                    r.estimate.tok_s_per_request,
                )
                for r in (a, b)
            ]
            if any(v is None for f in figures for v in f):
                continue
            (ga, ua, ega, eua), (gb, ub, egb, eub) = figures
            if ga > gb and ua > ub:
                out.append(ega > egb and eua > eub)
            elif gb > ga and ub > ua:
                out.append(egb > ega and eub > eua)
    return out


def _share(flags: Sequence[bool]) -> str:
    return f"{sum(flags)}/{len(flags)} = {sum(flags) / len(flags):.0%}" if flags else "-"


def load(path: Path, engine_profiles: bool = False) -> list[Judged]:
    """``validate``'s rows (default preset; with ``engine_profiles`` each row's estimate under its engine's packaged
    profile), each with the CSV cells it was read from."""
    cells = {int(c["line"]): c for c in read_measured(path)}
    profile_of = None
    if engine_profiles:
        profiles = {engine: load_profile(engine) for engine in MEASURED_ENGINE_KEYS}

        def profile_of(framework: str) -> EngineProfile | None:
            return profiles.get(engine_of_framework(framework) or "")

    return [Judged(r, cells[r.row.line]) for r in validate(path, profile_of=profile_of)]


def report(name: str, rows: list[Judged], since: int, show_wrong: bool) -> None:
    s = summarise([j.result for j in rows])
    modern = [j for j in rows if is_modern(j, since)]
    sm = summarise([j.result for j in modern])
    print(f"== {name}: {s.rows} rows, {s.compared} with a verdict ({sm.compared} of them modern, {since} or later)")
    print(f"bound holds: all {s.bounded}/{s.compared}" + (f" = {s.fraction_bounded:.1%}" if s.compared else ""))
    print(f"bound holds: modern {sm.bounded}/{sm.compared}" + (f" = {sm.fraction_bounded:.1%}" if sm.compared else ""))
    print(
        f"median |estimate/measured - 1|, tok/s per GPU: all {_median(per_gpu_errors(rows))}; "
        f"modern {_median(per_gpu_errors(modern))}"
    )
    print(
        f"median |estimate/measured - 1|, tok/s per user (point rows): all {_median(per_user_errors(rows))}; "
        f"modern {_median(per_user_errors(modern))}"
    )
    ceiling = [j for j in modern if j.result.check == "throughput ceiling"]
    print(
        "the same on modern throughput-ceiling rows (the largest batch that fits): per GPU "
        f"{_median(per_gpu_errors(ceiling))}"
    )
    plain = [j for j in modern if j.result.row.setup is not None and not j.result.row.setup.mtp_depth]
    print(
        f"the same on modern rows without speculative decoding (MTP): per GPU {_median(per_gpu_errors(plain))}; "
        f"per user {_median(per_user_errors(plain))}"
    )
    ttft = ttft_ratios(modern)
    quartiles = f"{np.percentile(ttft, 25):.3g}-{np.percentile(ttft, 75):.3g}" if ttft else "-"
    print(
        f"time to first token, modern point rows stating one: median estimate/measured "
        f"{np.median(ttft) if ttft else float('nan'):.3g} (n={len(ttft)}; quartiles {quartiles}); median |error| "
        f"{_median([abs(t - 1) for t in ttft])}"
    )
    gpu, user, wrong = layout_pairs(rows)
    print(
        f"same-workload layout pairs ordered like the measurement: tok/s per GPU {_share(gpu)}; tok/s per user "
        f"{_share(user)}; pairs one layout dominates (any concurrency) {_share(dominance_pairs(rows))}"
    )
    if show_wrong:
        for w in wrong:
            print(f"  misordered: {w}")
    print(
        "| framework | rows | verdicts | bound holds | median bound/measured | median est. error per GPU | per user |"
    )
    print("|---|---|---|---|---|---|---|")
    families: dict[str, list[Judged]] = {}
    for j in rows:
        families.setdefault(framework_family(j.result.row.framework), []).append(j)
    for fam, members in sorted(families.items(), key=lambda kv: -len(kv[1])):
        f = summarise([j.result for j in members])
        ratio = f"{f.median_ratio:.2f}" if f.median_ratio is not None else "-"
        print(
            f"| {fam} | {f.rows} | {f.compared} | {f.bounded} | {ratio} | "
            f"{_median(per_gpu_errors(members))} | {_median(per_user_errors(members))} |"
        )


def by_slice(rows: list[Judged]) -> None:
    """Where the estimate misses: the modern rows per accelerator, serving and MTP, with the median estimate/measured
    tok/s per GPU and the median errors."""
    slices: dict[tuple, list[Judged]] = {}
    for j in rows:
        s = j.result.row.setup
        if s is not None and j.result.check is not None:
            slices.setdefault((s.gpu_card, s.serving, "MTP" if s.mtp_depth else "no MTP"), []).append(j)
    print("| accelerator | serving | MTP | rows | median estimate/measured per GPU | error per GPU | per user |")
    print("|---|---|---|---|---|---|---|")
    for key, members in sorted(slices.items()):
        ratios = [
            r.estimate.tok_s_per_gpu / r.row.measured_tok_s_per_gpu
            for r in _whole_requests(members)
            if r.estimate.tok_s_per_gpu and r.row.measured_tok_s_per_gpu
        ]
        ratio = f"{np.median(ratios):.2f}" if ratios else "-"
        print(
            f"| {key[0]} | {key[1]} | {key[2]} | {len(members)} | {ratio} | {_median(per_gpu_errors(members))} | "
            f"{_median(per_user_errors(members))} |"
        )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="measured-points CSVs")
    parser.add_argument("--slices", action="store_true", help="also print the modern rows per accelerator and serving")
    parser.add_argument("--since", type=int, default=2025, help="first year of 'modern' rows (default 2025)")
    parser.add_argument(
        "--show-misordered", action="store_true", help="list the layout pairs ordered unlike the measurement"
    )
    parser.add_argument(
        "--engine-profiles", action="store_true", help="estimate each row under its engine's packaged profile"
    )
    args = parser.parse_args(argv)
    everything: list[Judged] = []
    for path in args.files:
        rows = load(path, args.engine_profiles)
        everything += rows
        report(str(path), rows, args.since, args.show_misordered)
        if args.slices:
            by_slice([j for j in rows if is_modern(j, args.since)])
    if len(args.files) > 1:
        report("all files", everything, args.since, False)


if __name__ == "__main__":
    main()
