"""MIP coefficient tables computed by the exact evaluator: the only bridge from physics to the formulation.

For each layout the batch range [pp, max_batch] is cut into *intervals* on which every collective keeps one NCCL
protocol, so network time is affine in the batch there; compute time is linear and, for dense models, memory time is
affine. On an interval the evaluator is sampled at both ends and each term becomes the chord between them, which is
exact for affine terms. For a MoE model the memory term is concave in the batch (expert-touched fraction); its chord
lies below it, so the MIP is optimistic there by at most the chord gap. The rows a query's screening keeps are split
until that gap is below ``MOE_CHORD_TOLERANCE`` of the term (``refine_rows``: the other rows keep their coarse,
optimistic chords, valid bounds that only rise when refined), and queries re-evaluate the answer and split again
where it still differs (see queries.py), so answers are exact.

Units in the tables: time per generated token in ``Tables.time_unit_s`` (chosen per question), memory in GB (1e9 B),
dollars.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from roofline_opt.optimize.space import Layouts, Question, layouts, replica_caps
from roofline_opt.physics import evaluator as ev

MOE_CHORD_TOLERANCE = 1e-5
MAX_REFINE_ROUNDS = 24


@dataclass(frozen=True)
class Tables:
    """One row per (layout, batch interval): a *choice* of the MIP.

    pieces_a0 / pieces_a1: time per generated token >= a0 + a1 * batch for every piece (convex on the
    interval). mem_a0_gb / mem_a1_gb / mem_cap_gb: per-device memory = a0 + a1 * batch <= cap.
    usd_per_mtok_coef: usd_per_mtok = usd_per_mtok_coef * tau / batch (instance GPUs x $/s x 1e6 x time unit).
    time_unit_s: the seconds one unit of tau stands for, a power of ten near the question's typical time per token,
    so the MIP's coefficients stay near 1 whether a step takes nanoseconds or seconds.
    replicas_cap: how many instances of the row's shape the GPU limit and the cluster allow.
    refined: whether the row's chords are within MOE_CHORD_TOLERANCE of the terms (always for dense models; MoE rows
    are refined when a query first needs them, see ``refine_rows``).
    """

    layouts: Layouts
    layout_of: np.ndarray
    batch_lo: np.ndarray
    batch_hi: np.ndarray
    pieces_a0: np.ndarray
    pieces_a1: np.ndarray
    mem_a0_gb: np.ndarray
    mem_a1_gb: np.ndarray
    mem_cap_gb: np.ndarray
    n_gpus: np.ndarray
    usd_per_mtok_coef: np.ndarray
    replicas_cap: np.ndarray
    refined: np.ndarray
    exclusions: dict[str, int]
    time_unit_s: float = 1e-3

    def __len__(self) -> int:
        return len(self.layout_of)

    def take(self, rows: np.ndarray) -> Tables:
        """The tables restricted to the given rows (choices)."""
        whole = ("layouts", "exclusions", "time_unit_s")
        per_row = {f: getattr(self, f)[rows] for f in self.__dataclass_fields__ if f not in whole}
        return Tables(layouts=self.layouts, exclusions=self.exclusions, time_unit_s=self.time_unit_s, **per_row)

    def extended(self, more: Tables) -> Tables:
        """These rows followed by ``more``'s (same layouts, time unit and exclusions)."""
        whole = ("layouts", "exclusions", "time_unit_s")
        per_row = {
            f: np.concatenate([getattr(self, f), getattr(more, f)]) for f in self.__dataclass_fields__ if f not in whole
        }
        return Tables(layouts=self.layouts, exclusions=self.exclusions, time_unit_s=self.time_unit_s, **per_row)


def _group_layout(lay: Layouts, idx: np.ndarray, question: Question, tokens: np.ndarray) -> ev.Layout:
    return ev.Layout.of(lay.tp[idx], lay.tp_2d[idx], lay.pp[idx], question.context, tokens, lay.ep[idx])


def _step_terms(question: Question, gpu_index: int, bits: int, lay: Layouts, idx: np.ndarray, batch: np.ndarray):
    """Per-token milliseconds of the target (and draft) step terms at the given batches, for layouts idx."""
    gpu = question.gpus[gpu_index]
    gamma = lay.gamma[idx].astype(float)
    layout = _group_layout(lay, idx, question, 1.0)
    terms = [ev.step(question.model, gpu, question.preset, bits, layout.verifying(gamma), batch)]
    if question.draft is not None:
        terms.append(ev.step(question.draft, gpu, question.preset, ev.DRAFT_WEIGHT_BITS, layout.for_draft(), batch))
    return terms


def _breakpoints(question: Question, gpu_index: int, bits: int, lay: Layouts, idx: np.ndarray) -> list[np.ndarray]:
    """Batches at which some collective changes its fastest protocol, per layout of idx."""
    gpu = question.gpus[gpu_index]
    layout = _group_layout(lay, idx, question, 1.0)
    groups = [(question.model, bits, layout.verifying(lay.gamma[idx]))]
    if question.draft is not None:
        groups.append((question.draft, ev.DRAFT_WEIGHT_BITS, layout.for_draft()))
    points = []
    for model, b, layout in groups:
        for coll in ev.collectives(model, gpu, question.preset, b, layout):
            lat, slope = coll.latency_s, coll.s_per_seq
            n_proto = lat.shape[-1]
            for p in range(n_proto):
                for q in range(p + 1, n_proto):
                    ds = slope[..., p] - slope[..., q]
                    with np.errstate(divide="ignore", invalid="ignore"):
                        x = (lat[..., q] - lat[..., p]) / ds
                    points.append(np.where((coll.count > 0) & (ds != 0) & np.isfinite(x), x, np.nan))
    stacked = np.stack(np.broadcast_arrays(*points), axis=-1) if points else np.full((len(idx), 0), np.nan)
    return [row[np.isfinite(row)] for row in stacked]


def _memory_line(question: Question, gpu_index: int, bits: int, lay: Layouts, idx: np.ndarray):
    """Per-device (or aggregate) memory as a0 + a1 * batch in GB, and capacity in GB (memory is affine in batch)."""
    gpu = question.gpus[gpu_index]
    layout = _group_layout(lay, idx, question, 1.0)
    with_draft = question.draft is not None
    lines = []
    for b in (0.0, 1.0):
        mems = ev.memory(question.model, gpu, question.preset, bits, layout, b, question.draft if with_draft else None)
        if with_draft:
            plain = ev.memory(question.model, gpu, question.preset, bits, layout, b)
            total = np.where(lay.gamma[idx] > 0, _used(mems), _used(plain))
        else:
            total = _used(mems)
        lines.append(total)
        cap = mems.capacity_bytes
    a0 = lines[0]
    a1 = lines[1] - lines[0]
    return a0 / 1e9, a1 / 1e9, np.broadcast_to(cap, a0.shape) / 1e9


def _confirm_fit(question, gi, bits, lay, idx, fit_hi):
    """Step the memory-limited batch down where the evaluator's own check disagrees by rounding."""
    layout = _group_layout(lay, idx, question, 1.0)
    draft = question.draft if question.draft is not None else None
    fits = ev.memory(question.model, question.gpus[gi], question.preset, bits, layout, np.maximum(fit_hi, 0.0)).fits
    if draft is not None:
        with_draft = ev.memory(
            question.model, question.gpus[gi], question.preset, bits, layout, np.maximum(fit_hi, 0.0), draft
        )
        fits = np.where(lay.gamma[idx] > 0, with_draft.fits, fits)
    return np.where(fits | (fit_hi < 0), fit_hi, fit_hi - 1.0)


def _used(mem: ev.DeviceMemory) -> np.ndarray:
    return mem.weights_bytes + mem.kv_cache_bytes + mem.activations_bytes


def _per_token_s(question: Question, terms, gamma: np.ndarray, which: tuple[str, ...]) -> np.ndarray:
    """Seconds per generated token using memory_s or compute_s for the max() of target and draft steps."""
    e_tokens = ev.expected_tokens_per_round(question.acceptance, gamma) if question.draft is not None else 1.0
    total = 0.0
    for term, pick, weight in zip(terms, which, (1.0, gamma), strict=False):
        total = total + weight * (term.kernel_launch_s + term.network_s + getattr(term, pick))
    return np.where(gamma > 0, total / e_tokens, total)


PIECE_PICKS = (
    ("memory_s", "memory_s"),
    ("memory_s", "compute_s"),
    ("compute_s", "memory_s"),
    ("compute_s", "compute_s"),
)


def _pieces(question, gpu_index, bits, lay, idx, lo, hi):
    """a0, a1 of every convex piece on [lo, hi] (chords of the evaluator between the interval ends)."""
    gamma = lay.gamma[idx].astype(float)
    at_lo = _step_terms(question, gpu_index, bits, lay, idx, lo)
    at_hi = _step_terms(question, gpu_index, bits, lay, idx, hi)
    picks = PIECE_PICKS if question.draft is not None else PIECE_PICKS[::3]
    a0s, a1s = [], []
    width = np.maximum(hi - lo, 1.0)
    for pick in picks:
        y_lo = _per_token_s(question, at_lo, gamma, pick)
        y_hi = _per_token_s(question, at_hi, gamma, pick)
        slope = np.where(hi > lo, (y_hi - y_lo) / width, 0.0)
        a1s.append(slope)
        a0s.append(y_lo - slope * lo)
    return np.stack(a0s, axis=-1), np.stack(a1s, axis=-1)


def _concave_gap(question, gpu_index, bits, lay, idx, lo, hi) -> np.ndarray:
    """Relative gap between the memory term and its chord at the interval middle (0 where it is affine)."""
    gpu = question.gpus[gpu_index]
    layout = _group_layout(lay, idx, question, 1.0).verifying(lay.gamma[idx])
    tokens_lo = lo * layout.tokens_per_step / layout.pp
    saturated = 1.0 - ev.expert_touched_fraction(question.model, tokens_lo) < MOE_CHORD_TOLERANCE * 1e-3
    mid = np.floor((lo + hi) / 2.0)
    vals = [ev.memory_time_s(question.model, gpu, question.preset, bits, layout, b) for b in (lo, mid, hi)]
    width = np.maximum(hi - lo, 1.0)
    chord = vals[0] + (vals[2] - vals[0]) * (mid - lo) / width
    gap = np.abs(vals[1] - chord) / np.maximum(vals[1], 1e-300)
    return np.where(saturated, 0.0, gap)


def _intervals(lo: float, hi: float, breaks: np.ndarray) -> list[tuple[float, float]]:
    """Split the integer range [lo, hi] at the given real breakpoints."""
    cuts = sorted({float(np.floor(x)) for x in breaks if lo <= x < hi})
    out, start = [], lo
    for c in cuts:
        if c >= start:
            out.append((start, c))
            start = c + 1.0
    if start <= hi:
        out.append((start, hi))
    return out


def split_choice(tables: Tables, question: Question, choice: int, batch: int) -> Tables:
    """Tables with choice's interval split so that ``batch`` becomes an interval of its own (exact there).

    Only the new parts are evaluated; every other row is kept as it is (the split parts go last).
    """
    lo, hi = tables.batch_lo[choice], tables.batch_hi[choice]
    parts = [(lo, batch - 1.0), (float(batch), float(batch)), (batch + 1.0, hi)]
    layout = int(tables.layout_of[choice])
    rows = [(layout, a, b) for a, b in parts if a <= b]
    new = _assemble(
        question, tables.layouts, rows, tables.exclusions, tables.time_unit_s, refined=bool(tables.refined[choice])
    )
    return tables.take(np.delete(np.arange(len(tables)), choice)).extended(new)


def build_tables(question: Question) -> Tables:
    """Evaluate the question's layouts into MIP choices, dropping those that cannot fit or be placed."""
    lay = layouts(question)
    batch_hi = np.zeros(len(lay))
    batch_lo = lay.pp.astype(float)
    fits = np.zeros(len(lay), dtype=bool)
    for gi, bits, idx in lay.groups():
        a0, a1, cap = _memory_line(question, gi, bits, lay, idx)
        with np.errstate(divide="ignore"):
            fit_hi = np.where(a1 > 0, np.floor((cap - a0) / np.where(a1 > 0, a1, 1.0)), question.max_batch)
        fit_hi = np.where(a0 > cap, -1.0, np.minimum(fit_hi, question.max_batch))
        fit_hi = _confirm_fit(question, gi, bits, lay, idx, fit_hi)
        fits[idx] = fit_hi >= lay.pp[idx]
        batch_hi[idx] = fit_hi
        if question.demand_tok_s is not None:
            _demand_range(question, gi, bits, lay, idx, batch_lo, batch_hi)
    placeable = replica_caps(question, lay) >= 1
    served = batch_hi >= batch_lo
    exclusions = {
        "memory": int((~fits).sum()),
        "demand": int((fits & ~served).sum()),
        "topology": int((fits & served & ~placeable).sum()) if question.instance_limit is not None else 0,
        "gpu_limit": int((fits & served & ~placeable).sum()) if question.instance_limit is None else 0,
    }
    kept = np.flatnonzero(fits & served & placeable)
    rows = []
    for gi, bits, pos in lay.groups(kept):
        idx = kept[pos]
        breaks = _breakpoints(question, gi, bits, lay, idx)
        for j, br in zip(idx, breaks, strict=True):
            rows += [(int(j), a, b) for a, b in _intervals(float(batch_lo[j]), float(batch_hi[j]), br)]
    return _assemble(question, lay, rows, exclusions, refined=not question.model.is_moe)


def refine_rows(tables: Tables, question: Question, rows: np.ndarray) -> Tables:
    """Tables whose given (unrefined MoE) rows are split until their memory chords are within MOE_CHORD_TOLERANCE.

    Chords of a concave term only rise when an interval is split, so refining rows raises their bounds; queries
    refine the rows their screening keeps until every kept row is refined (no other row is evaluated again).
    """
    parts = [(int(tables.layout_of[r]), float(tables.batch_lo[r]), float(tables.batch_hi[r])) for r in rows]
    new = _assemble(
        question,
        tables.layouts,
        _refine_concave(question, tables.layouts, parts),
        tables.exclusions,
        tables.time_unit_s,
        refined=True,
    )
    return tables.take(np.delete(np.arange(len(tables)), rows)).extended(new)


def _throughput(question: Question, gpu_index: int, bits: int, lay: Layouts, idx: np.ndarray, batch) -> np.ndarray:
    """Exact tokens/s of one instance of each layout at the given batches."""
    layout = _group_layout(lay, idx, question, 1.0)
    tau = ev.time_per_token_with_gamma(
        question.model,
        question.gpus[gpu_index],
        question.preset,
        bits,
        layout,
        batch,
        lay.gamma[idx].astype(float),
        question.draft,
        question.acceptance,
    )
    return batch / tau


def _first_batch(question, gi, bits, lay, idx, lo, hi, predicate) -> np.ndarray:
    """Smallest batch in [lo, hi] where a predicate monotone in the batch holds (hi + 1 where it never does)."""
    lo, hi = lo.copy(), hi + 1.0
    while np.any(lo < hi):
        mid = np.floor((lo + hi) / 2.0)
        ok = predicate(_throughput(question, gi, bits, lay, idx, np.maximum(mid, 1.0)))
        hi = np.where(ok & (lo < hi), mid, hi)
        lo = np.where(~ok & (lo < hi), mid + 1.0, lo)
    return lo


def _demand_range(question, gi, bits, lay, idx, batch_lo, batch_hi) -> None:
    """Batch range meeting the demand exactly: instance throughput <= demand (the paper's cap: a batch must be
    filled) and ceil(demand / throughput) replicas within the GPU limit and cluster. Throughput rises with the batch,
    so both are thresholds found by bisection on the evaluator."""
    demand = question.demand_tok_s
    lo, hi = batch_lo[idx].astype(float), batch_hi[idx].astype(float)
    above = _first_batch(question, gi, bits, lay, idx, lo, hi, lambda thr: thr > demand * (1 + 1e-12))
    caps = replica_caps(question, lay)[idx].astype(float)
    enough = _first_batch(question, gi, bits, lay, idx, lo, hi, lambda thr: np.ceil(demand / thr - 1e-9) <= caps)
    batch_hi[idx] = np.minimum(hi, above - 1.0)
    batch_lo[idx] = np.maximum(lo, enough)


def _refine_concave(question: Question, lay: Layouts, rows):
    """Split intervals until the MoE memory chord is within MOE_CHORD_TOLERANCE of the term."""
    if not rows:
        return rows
    arr = np.array(rows, dtype=float)
    done = np.zeros(len(arr), dtype=bool)
    for _ in range(MAX_REFINE_ROUNDS):
        j = arr[:, 0].astype(int)
        gap = np.zeros(len(arr))
        open_rows = np.flatnonzero(~done)
        for gi, bits, pos in lay.groups(j[open_rows]):
            sel = open_rows[pos]
            gap[sel] = _concave_gap(question, gi, bits, lay, j[sel], arr[sel, 1], arr[sel, 2])
        wide = ~done & (gap > MOE_CHORD_TOLERANCE) & (arr[:, 2] - arr[:, 1] >= 2)
        done |= ~wide
        if not wide.any():
            break
        mid = np.floor((arr[wide, 1] + arr[wide, 2]) / 2.0)
        left = np.column_stack([arr[wide, 0], arr[wide, 1], mid])
        right = np.column_stack([arr[wide, 0], mid + 1.0, arr[wide, 2]])
        arr = np.concatenate([arr[~wide], left, right])
        done = np.concatenate([done[~wide], np.zeros(2 * int(wide.sum()), dtype=bool)])
    return [(int(a), float(b), float(c)) for a, b, c in arr]


def _time_unit_s(a0_s: np.ndarray, a1_s: np.ndarray, lo: np.ndarray) -> float:
    """A power of ten near the median time per token at the choices' smallest batches."""
    tau = (a0_s + a1_s * lo[:, None]).max(axis=1)
    typical = float(np.median(tau[tau > 0])) if np.any(tau > 0) else 1e-3
    return float(10.0 ** np.round(np.log10(typical)))


def _assemble(
    question: Question, lay: Layouts, rows, exclusions, time_unit_s: float | None = None, refined: bool = True
) -> Tables:
    """Compute the coefficients of every (layout, interval) row, vectorised per (accelerator, precision)."""
    if not rows:
        empty = np.zeros(0)
        return Tables(
            lay,
            empty.astype(int),
            empty,
            empty,
            np.zeros((0, 1)),
            np.zeros((0, 1)),
            empty,
            empty,
            empty,
            empty,
            empty,
            empty.astype(int),
            empty.astype(bool),
            exclusions,
        )
    arr = np.array(rows, dtype=float)
    layout_of = arr[:, 0].astype(int)
    lo, hi = arr[:, 1], arr[:, 2]
    n_pieces = 4 if question.draft is not None else 2
    a0 = np.zeros((len(rows), n_pieces))
    a1 = np.zeros((len(rows), n_pieces))
    m0, m1, mcap = np.zeros(len(rows)), np.zeros(len(rows)), np.zeros(len(rows))
    for gi, bits, sel in lay.groups(layout_of):
        idx = layout_of[sel]
        a0[sel], a1[sel] = _pieces(question, gi, bits, lay, idx, lo[sel], hi[sel])
        m0[sel], m1[sel], mcap[sel] = _memory_line(question, gi, bits, lay, idx)
    n_gpus = lay.n_gpus[layout_of].astype(float)
    usd_per_s = np.array([question.gpus[g].usd_per_s for g in lay.gpu_index[layout_of]])
    shapes, where = np.unique(layout_of, return_inverse=True)
    replicas = replica_caps(question, lay, shapes)[where]
    unit = _time_unit_s(a0, a1, lo) if time_unit_s is None else time_unit_s
    return Tables(
        layouts=lay,
        layout_of=layout_of,
        batch_lo=lo,
        batch_hi=hi,
        pieces_a0=a0 / unit,
        pieces_a1=a1 / unit,
        mem_a0_gb=m0,
        mem_a1_gb=m1,
        mem_cap_gb=mcap,
        n_gpus=n_gpus,
        usd_per_mtok_coef=n_gpus * usd_per_s * 1e6 * unit,
        replicas_cap=replicas,
        refined=np.full(len(rows), refined),
        exclusions=exclusions,
        time_unit_s=unit,
    )
