"""MIP coefficient tables computed by the exact evaluator: the only bridge from physics to the formulation.

For each layout the batch range [pp, max_batch] is cut into *intervals* on which every collective keeps one NCCL
protocol, so network time is affine in the batch there; compute time is linear and, for dense models, memory time is
affine. On an interval the evaluator is sampled at both ends and each term becomes the chord between them, which is
exact for affine terms. For a MoE model the memory term is concave in the batch (expert-touched fraction); its chord
lies below it, so the MIP is optimistic there by at most the chord gap. The rows a query's screening keeps are split
until that gap is below ``MOE_CHORD_TOLERANCE`` of the term (``refine_rows``: the other rows keep their coarse,
optimistic chords, valid bounds that only rise when refined), and queries re-evaluate the answer and split again
where it still differs (see queries.py), so answers are exact.

Queries start from coarse tables (``build_tables(question, coarse=True)``): one row per layout (and prefill option)
over its whole batch range. For a fixed layout the time per token is concave in the batch (network time is a
minimum of affine protocols, MoE memory is concave, the rest affine), so these chords lie below it and touch it at
both ends: valid optimistic bounds. ``refine_rows`` cuts the rows a query's screening keeps at protocol changes (and
refines their MoE chords); no other row is cut, which is most of the saving on large spaces.

With ``Preset.per_kernel_class`` (the default preset) a step is launches + network + the attention classes, each at
its own max(memory, compute), + max(GEMM memory, GEMM compute). Both attention classes are proportional to the batch
(decode attention: KV read and FLOPs both scale with B at a fixed context; prefill attention: the B * I / O prompt
tokens' KV bytes and FLOPs likewise), so each class's max is linear in B and has no crossing inside a batch range:
it joins the serial part of every piece, and the pieces stay "serial part + GEMM memory" and "serial part + GEMM
compute", each concave (the GEMM memory is affine or, for MoE, concave). The GEMM class's own crossing is handled by
the max over pieces as before, so no new breakpoint is needed and the chords keep every property stated here.

With ``Preset.prefill_cycle`` (the default preset) an aggregated layout's TPOT is the mean of a decode-only step A and
a chunk step C, weighted by the chunk share f = kappa * B, which grows with the batch: a piece (1 - f) A + f C is not
concave, and its chord may lie above it. A and C are concave, so the piece lies above the quadratic (1 - f) chord_A +
f chord_C, whose chord is the piece's own; where that quadratic is convex the chord is lowered by its largest gap
(``pieces.request_pieces``), which keeps every row a valid optimistic bound, exact on a single batch. Such rows have
pieces (each step's GEMM class at memory or compute), start unrefined like MoE rows and are split until the gap is
within MOE_CHORD_TOLERANCE; the chunk step's protocol changes are breakpoints too. Unlike a MoE chord, a lowered cycle
chord need not rise everywhere when its row is split (the new line touches the quadratic at the new middle): every
row stays a valid optimistic bound, but the screening's "refining only raises bounds" (queries.Prepared.solver) is
not proven for the cycle's rows; the MIP-vs-enumeration tests with the cycle on pass.

Questions about whole requests (a workload) use the request physics (physics/requests.py): the time per token is
the TPOT step (with the steady-state prompt tokens when aggregated), an aggregated layout's batch range is also capped
by its TTFT limit and by the chunk budget (both exact, by bisection and division), and a disaggregated decode layout
is paired with prefill options (pairing.py): each pair is a row of its own, with the unit's cost coefficient and cost
floor.

Units in the tables: time per generated token in ``Tables.time_unit_s`` (chosen per question), memory in GB (1e9 B),
dollars.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from roofline_opt.optimize import pairing
from roofline_opt.optimize.pieces import (
    chord_pieces,
    group_layout,
    n_pieces,
    needs_refining,
    prefill_cycle,
    request_pieces,
    speculation,
    target_step,
)
from roofline_opt.optimize.space import Layouts, Question, layouts, replica_caps
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics import queueing as qm
from roofline_opt.physics import requests as rq
from roofline_opt.physics import tpot_percentiles as tq

MOE_CHORD_TOLERANCE = 1e-5
MAX_REFINE_ROUNDS = 24


@dataclass(frozen=True)
class Tables:
    """One row per (layout, batch interval): a *choice* of the MIP.

    pieces_a0 / pieces_a1: time per generated token >= a0 + a1 * batch for every piece (convex on the
    interval). mem_a0_gb / mem_a1_gb / mem_cap_gb: per-device memory = a0 + a1 * batch <= cap.
    usd_per_mtok_coef: usd_per_mtok = usd_per_mtok_coef * tau / batch (instance GPUs x $/s x 1e6 x time unit),
    or max(that, cost_floor_usd_per_mtok) for a disaggregated unit whose prefill side limits it.
    option_of: the prefill option paired with a disaggregated row (-1 otherwise); ``options`` holds them.
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
    option_of: np.ndarray | None = None
    cost_floor_usd_per_mtok: np.ndarray | None = None
    options: pairing.PrefillOptions | None = None

    def __len__(self) -> int:
        return len(self.layout_of)

    @property
    def floors(self) -> np.ndarray:
        """Each choice's cost floor in $/Mtok (0 where only the ratio counts)."""
        return np.zeros(len(self)) if self.cost_floor_usd_per_mtok is None else self.cost_floor_usd_per_mtok

    def take(self, rows: np.ndarray) -> Tables:
        """The tables restricted to the given rows (choices)."""
        whole = ("layouts", "exclusions", "time_unit_s", "options")
        per_row: dict[str, Any] = {
            f: None if getattr(self, f) is None else getattr(self, f)[rows]
            for f in self.__dataclass_fields__
            if f not in whole
        }
        return Tables(
            layouts=self.layouts,
            exclusions=self.exclusions,
            time_unit_s=self.time_unit_s,
            options=self.options,
            **per_row,
        )

    def extended(self, more: Tables) -> Tables:
        """These rows followed by ``more``'s (same layouts, time unit, exclusions and prefill options)."""
        whole = ("layouts", "exclusions", "time_unit_s", "options")
        per_row: dict[str, Any] = {
            f: None if getattr(self, f) is None else np.concatenate([getattr(self, f), getattr(more, f)])
            for f in self.__dataclass_fields__
            if f not in whole
        }
        return Tables(
            layouts=self.layouts,
            exclusions=self.exclusions,
            time_unit_s=self.time_unit_s,
            options=self.options,
            **per_row,
        )


def instance_memory(question: Question, gpu_index: int, bits: int, lay: Layouts, idx: np.ndarray, batch, draft=None):
    """Memory of decode layouts idx at ``batch`` (the prompt tokens in flight included when aggregated)."""
    gpu = question.gpus[gpu_index]
    layout = group_layout(lay, idx, question)
    if question.workload is None:
        return ev.memory(question.model, gpu, question.preset_on(gpu), bits, layout, batch, draft)
    preset = question.preset_on(gpu)
    spec = speculation(question, lay, idx)
    return rq.aggregated_memory(
        question.model, gpu, preset, bits, layout, batch, question.workload, ~lay.disagg[idx], spec
    )


def _breakpoints(question: Question, gpu_index: int, bits: int, lay: Layouts, idx: np.ndarray) -> list[np.ndarray]:
    """Batches at which some collective changes its fastest protocol, per layout of idx (in the decode step and, with
    the prefill cycle, in the chunk step)."""
    gpu = question.gpus[gpu_index]
    layout = group_layout(lay, idx, question)
    cycle = prefill_cycle(question)
    share = 0.0 if cycle else rq.prompt_share(question.workload, ~lay.disagg[idx])
    if question.workload is not None and question.draft is not None:
        share = share * ev.expected_tokens_per_round(question.acceptance, lay.gamma[idx].astype(float))
    tokens = layout.verifying(lay.gamma[idx]).tokens_per_step + share
    groups = [(question.model, bits, replace(layout, tokens_per_step=tokens))]
    if question.draft is not None:
        groups.append((question.draft, ev.DRAFT_WEIGHT_BITS, layout.for_draft(question.draft)))
    points = []
    for model, b, layout in groups:
        for coll in ev.collectives(model, gpu, question.preset_on(gpu), b, layout):
            lat, slope = coll.latency_s, coll.s_per_seq
            n_proto = lat.shape[-1]
            for p in range(n_proto):
                for q in range(p + 1, n_proto):
                    ds = slope[..., p] - slope[..., q]
                    with np.errstate(divide="ignore", invalid="ignore"):
                        x = (lat[..., q] - lat[..., p]) / ds
                    points.append(np.where((coll.count > 0) & (ds != 0) & np.isfinite(x), x, np.nan))
    stacked = np.stack(np.broadcast_arrays(*points), axis=-1) if points else np.full((len(idx), 0), np.nan)
    if cycle:
        # a chunk step's collectives carry B + chunk tokens: the decode step's crossings, moved down by the chunk
        carried = rq.chunk_carried_tokens(question.whole_requests, lay.chunk[idx], 0.0)
        shift = np.where(lay.disagg[idx], np.nan, carried)
        stacked = np.concatenate([stacked, stacked - shift[:, None]], axis=-1)
    return [row[np.isfinite(row)] for row in stacked]


def _memory_line(question: Question, gpu_index: int, bits: int, lay: Layouts, idx: np.ndarray):
    """Per-device (or aggregate) memory as a0 + a1 * batch in GB, and capacity in GB (memory is affine in batch)."""
    with_draft = question.draft is not None
    lines = []
    for b in (0.0, 1.0):
        mems = instance_memory(question, gpu_index, bits, lay, idx, b, question.draft if with_draft else None)
        if with_draft:
            plain = instance_memory(question, gpu_index, bits, lay, idx, b)
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
    draft = question.draft
    fits = instance_memory(question, gi, bits, lay, idx, np.maximum(fit_hi, 0.0)).fits
    if draft is not None:
        with_draft = instance_memory(question, gi, bits, lay, idx, np.maximum(fit_hi, 0.0), draft)
        fits = np.where(lay.gamma[idx] > 0, with_draft.fits, fits)
    return np.where(fits | (fit_hi < 0), fit_hi, fit_hi - 1.0)


def _used(mem: ev.DeviceMemory) -> np.ndarray:
    return mem.weights_bytes + mem.kv_cache_bytes + mem.activations_bytes


def _concave_gap(question, gpu_index, bits, lay, idx, lo, hi) -> np.ndarray:
    """Relative gap between the memory term and its chord at the interval middle (0 where it is affine) and, with the
    prefill cycle, between the TPOT and its pieces' lowered chords."""
    layout = group_layout(lay, idx, question).verifying(lay.gamma[idx])
    tokens = layout.tokens_per_step + rq.prompt_share(question.workload, ~lay.disagg[idx])
    tokens_lo = lo * tokens / layout.pp
    saturated = 1.0 - ev.expert_touched_fraction(question.model, tokens_lo) < MOE_CHORD_TOLERANCE * 1e-3
    mid = np.floor((lo + hi) / 2.0)
    vals = _target_memory_s(question, gpu_index, bits, lay, idx, np.stack([lo, mid, hi]))
    width = np.maximum(hi - lo, 1.0)
    chord = vals[0] + (vals[2] - vals[0]) * (mid - lo) / width
    gap = np.where(saturated, 0.0, np.abs(vals[1] - chord) / np.maximum(vals[1], 1e-300))
    if not prefill_cycle(question):
        return gap
    # the cycle's TPOT against its chord at the middle, plus how far its pieces were lowered (``request_pieces``)
    tpot = target_step(question, gpu_index, bits, lay, idx, np.stack([lo, mid, hi])).step_time_s
    tpot_chord = tpot[0] + (tpot[2] - tpot[0]) * (mid - lo) / width
    ends = target_step(question, gpu_index, bits, lay, idx, np.stack([lo, hi]))
    below = np.max(request_pieces(question, ends, lo, hi)[1], axis=0)
    return np.maximum(gap, (np.abs(tpot[1] - tpot_chord) + below) / np.maximum(tpot[1], 1e-300))


def _target_memory_s(question: Question, gpu_index: int, bits: int, lay: Layouts, idx: np.ndarray, batch):
    """The target step's GEMM-class memory time alone, the concave term (MoE refinement needs no network term)."""
    if question.workload is not None:
        return target_step(question, gpu_index, bits, lay, idx, batch).gemm_memory_s
    layout = group_layout(lay, idx, question).verifying(lay.gamma[idx])
    gpu = question.gpus[gpu_index]
    preset = question.preset_on(gpu)
    total = ev.memory_time_s(question.model, gpu, preset, bits, layout, batch)
    if not preset.per_kernel_class:
        return total
    kv = ev.kv_read_bytes(question.model, preset, layout, batch)
    return total - kv / (layout.n_gpus * ev.sustained_hbm_bytes_per_s(ev.hardware(gpu, preset), preset))


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
    layout, option = int(tables.layout_of[choice]), int(option_of_rows(tables)[choice])
    rows = [(layout, a, b, option) for a, b in parts if a <= b]
    new = _assemble(
        question,
        tables.layouts,
        rows,
        tables.exclusions,
        tables.options,
        tables.time_unit_s,
        refined=bool(tables.refined[choice]),
    )
    return tables.take(np.delete(np.arange(len(tables)), choice)).extended(new)


def option_of_rows(tables: Tables) -> np.ndarray:
    """The prefill option paired with each row (-1 for aggregated rows)."""
    return np.full(len(tables), -1) if tables.option_of is None else tables.option_of


def aggregated_ttft_s(
    question: Question, gpu, bits: int, layout: ev.Layout, batch, chunk_tokens, spec: rq.Speculation | None = None
) -> np.ndarray:
    """The TTFT an aggregated layout's limit applies to at ``batch``: its chunk schedule at no load or, with a
    percentile, that percentile under arrivals at the load whose mean decode batch is ``batch`` (rising in it);
    ``spec``: the layouts' speculative rounds."""
    w = question.whole_requests
    if question.queued_ttft:
        assert question.slo_percentile is not None
        return qm.aggregated_percentile_ttft_s(
            question.slo_percentile,
            question.model,
            gpu,
            question.preset_on(gpu),
            bits,
            layout,
            batch,
            w,
            chunk_tokens,
            question.arrival_scv,
            spec,
        )
    preset = question.preset_on(gpu)
    return rq.ttft_aggregated_s(question.model, gpu, preset, bits, layout, batch, w, chunk_tokens, spec)


def _per_serving_mode(disagg, aggregated: Callable[[], np.ndarray], decode: Callable[[], np.ndarray]) -> np.ndarray:
    """``aggregated()`` where ``disagg`` is False and ``decode()`` where it is True, each computed only if needed."""
    if np.all(disagg):
        return decode()
    agg = aggregated()
    return agg if not np.any(disagg) else np.where(disagg, decode(), agg)


def percentile_tpot_s(
    question: Question, gpu, bits: int, layout: ev.Layout, batch, chunk_tokens, disagg, spec=None
) -> np.ndarray:
    """TPOT at the question's percentile under arrivals at the load whose mean decode batch is ``batch`` (rising in
    it), elementwise: an aggregated instance with its prefill cycle, or (``disagg``) a decode instance; ``spec``: the
    layouts' speculative rounds."""
    assert question.queued_tpot and question.slo_percentile is not None
    args = (question.slo_percentile, question.model, gpu, question.preset_on(gpu), bits, layout, batch)
    w, scv = question.whole_requests, question.arrival_scv
    return _per_serving_mode(
        disagg,
        lambda: tq.aggregated_percentile_tpot_s(*args, w, chunk_tokens, scv, spec),
        lambda: tq.decode_percentile_tpot_s(*args, w, scv, spec),
    )


def within_tpot_limit(
    question: Question, gpu, bits: int, layout: ev.Layout, batch, chunk_tokens, disagg, spec=None
) -> np.ndarray:
    """Whether ``percentile_tpot_s`` is within the question's TPOT limit, elementwise (the windows' CDF at the limit:
    the one test the tables, the enumeration oracle and fleets apply)."""
    assert question.queued_tpot and question.slo_percentile is not None and question.max_tpot_s is not None
    limit = question.max_tpot_s * (1 + 1e-12)
    args = (question.slo_percentile, limit, question.model, gpu, question.preset_on(gpu), bits, layout, batch)
    w, scv = question.whole_requests, question.arrival_scv
    return _per_serving_mode(
        disagg,
        lambda: tq.aggregated_tpot_within(*args, w, chunk_tokens, scv, spec),
        lambda: tq.decode_tpot_within(*args, w, scv, spec),
    )


def _request_caps(question: Question, gi: int, bits: int, lay: Layouts, idx, batch_lo, batch_hi, why) -> None:
    """The batch range meeting the TTFT limit of aggregated layouts (bisection), the chunk budget (B I/O <= chunk) and
    a TPOT limit at a percentile (every layout; bisection)."""
    agg = ~lay.disagg[idx]
    lo, hi = batch_lo[idx].astype(float), batch_hi[idx].astype(float)
    spec = speculation(question, lay, idx)
    stable = np.where(agg, rq.stable_batch_limit(question.whole_requests, lay.chunk[idx], spec), np.inf)
    why[idx[agg & (hi >= lo) & (stable < lo)]] = "chunk"
    hi = np.minimum(hi, stable)
    if question.max_ttft_s is not None:
        gpu, limit = question.gpus[gi], question.max_ttft_s * (1 + 1e-12)
        layout = group_layout(lay, idx, question)

        def too_slow(batch):
            return agg & (aggregated_ttft_s(question, gpu, bits, layout, batch, lay.chunk[idx], spec) > limit)

        first_slow = _first_batch(lo, hi, too_slow)
        why[idx[(hi >= lo) & (first_slow <= lo)]] = "ttft"
        hi = np.minimum(hi, first_slow - 1.0)
    if question.queued_tpot:
        gpu, layout, disagg = question.gpus[gi], group_layout(lay, idx, question), lay.disagg[idx]

        def tpot_too_slow(batch):
            return ~within_tpot_limit(question, gpu, bits, layout, batch, lay.chunk[idx], disagg, spec)

        first_slow = _first_batch(lo, hi, tpot_too_slow)
        why[idx[(hi >= lo) & (first_slow <= lo)]] = "tpot"
        hi = np.minimum(hi, first_slow - 1.0)
    batch_hi[idx] = hi


def build_tables(question: Question, coarse: bool = False) -> Tables:
    """Evaluate the question's layouts into MIP choices, dropping those that cannot fit, meet a limit or be placed.

    ``coarse``: one row per layout (and prefill option) over its whole batch range, unrefined (see ``refine_rows``);
    otherwise the range is cut where a collective changes protocol (the rows are refined unless the model is MoE).
    """
    lay = layouts(question)
    with_disagg = question.workload is not None and rq.DISAGG in question.serving
    options = pairing.build_options(question) if with_disagg else None
    batch_hi = np.zeros(len(lay))
    batch_lo = lay.pp.astype(float)
    why = np.full(len(lay), "", dtype=object)
    for gi, bits, idx in lay.groups():
        a0, a1, cap = _memory_line(question, gi, bits, lay, idx)
        with np.errstate(divide="ignore"):
            fit_hi = np.where(a1 > 0, np.floor((cap - a0) / np.where(a1 > 0, a1, 1.0)), question.max_batch)
        fit_hi = np.where(a0 > cap, -1.0, np.minimum(fit_hi, question.max_batch))
        fit_hi = _confirm_fit(question, gi, bits, lay, idx, fit_hi)
        why[idx[fit_hi < lay.pp[idx]]] = "memory"
        batch_hi[idx] = fit_hi
        if question.workload is not None:
            _request_caps(question, gi, bits, lay, idx, batch_lo, batch_hi, why)
    unit_j, unit_q = _units(question, lay, options, why)
    lo, hi = batch_lo[unit_j], batch_hi[unit_j]
    caps = _unit_caps(question, lay, options, unit_j, unit_q)
    if question.demand_tok_s is not None:
        for gi, bits, pos in lay.groups(unit_j):
            _demand_range(question, gi, bits, lay, options, unit_j[pos], unit_q[pos], caps[pos], lo, hi, pos)
    served = hi >= lo
    placeable = caps >= 1
    alive = np.zeros(len(lay), dtype=bool)
    alive[unit_j[served & placeable]] = True
    demand_blocked = np.zeros(len(lay), dtype=bool)
    demand_blocked[unit_j[~served]] = True
    place_blocked = np.zeros(len(lay), dtype=bool)
    place_blocked[unit_j[served & ~placeable]] = True
    open_layouts = ~alive & (why == "")
    limit_kind = "topology" if question.instance_limit is not None else "gpu_limit"
    exclusions = {
        "memory": int((why == "memory").sum()),
        "ttft": int((why == "ttft").sum()),
        "tpot": int((why == "tpot").sum()),
        "chunk": int((why == "chunk").sum()),
        "demand": int((open_layouts & demand_blocked).sum()),
        "topology": 0,
        "gpu_limit": 0,
    }
    exclusions[limit_kind] = int((open_layouts & ~demand_blocked & place_blocked).sum())
    kept = np.flatnonzero(served & placeable)
    rows = list(zip(unit_j[kept].tolist(), lo[kept].tolist(), hi[kept].tolist(), unit_q[kept].tolist(), strict=True))
    if coarse:
        return _assemble(question, lay, rows, exclusions, options, refined=False)
    rows = _cut_at_protocols(question, lay, rows)
    return _assemble(question, lay, rows, exclusions, options, refined=not needs_refining(question))


def _cut_at_protocols(question: Question, lay: Layouts, rows):
    """(layout, lo, hi, option) rows split at the batches where some collective of their layout changes protocol."""
    if not rows:
        return rows
    j = np.array([r[0] for r in rows], dtype=int)
    out = []
    for gi, bits, pos in lay.groups(j):
        layouts_here, where = np.unique(j[pos], return_inverse=True)
        breaks = _breakpoints(question, gi, bits, lay, layouts_here)
        for p, w in zip(pos, where, strict=True):
            layout, lo, hi, option = rows[p]
            out += [(layout, a, b, option) for a, b in _intervals(float(lo), float(hi), breaks[w])]
    return out


def refine_rows(tables: Tables, question: Question, rows: np.ndarray) -> Tables:
    """Tables whose given (unrefined) rows are cut where a collective changes protocol and, for a MoE model, split
    until their memory chords are within MOE_CHORD_TOLERANCE.

    Time per token is concave in the batch for a fixed layout (network time is the minimum of affine protocols, MoE
    memory is concave, the rest affine), so chords only rise when an interval is split: an unrefined row's chords
    are valid optimistic bounds and refining raises them. Queries refine the rows their screening keeps until every
    kept row is refined (no other row is evaluated again).
    """
    option_of = option_of_rows(tables)
    parts = [
        (int(tables.layout_of[r]), float(tables.batch_lo[r]), float(tables.batch_hi[r]), int(option_of[r]))
        for r in rows
    ]
    parts = _cut_at_protocols(question, tables.layouts, parts)
    if needs_refining(question):
        parts = _refine_concave(question, tables.layouts, parts)
    new = _assemble(
        question,
        tables.layouts,
        parts,
        tables.exclusions,
        tables.options,
        tables.time_unit_s,
        refined=True,
    )
    return tables.take(np.delete(np.arange(len(tables)), rows)).extended(new)


def _units(question: Question, lay: Layouts, options, why) -> tuple[np.ndarray, np.ndarray]:
    """(decode layout, prefill option) pairs: each aggregated layout alone, each disaggregated one with its options."""
    unit_j, unit_q = [], []
    for j in np.flatnonzero(why == ""):
        if not lay.disagg[j]:
            unit_j.append(j)
            unit_q.append(-1)
            continue
        partners = pairing.matches(question, options, lay, int(j))
        if not len(partners):
            why[j] = "ttft" if question.max_ttft_s is not None else "memory"
        unit_j += [j] * len(partners)
        unit_q += list(partners)
    return np.array(unit_j, dtype=int), np.array(unit_q, dtype=int)


def _unit_caps(question: Question, lay: Layouts, options, unit_j, unit_q) -> np.ndarray:
    shapes, where = np.unique(np.asarray(unit_j, dtype=int), return_inverse=True)
    caps = replica_caps(question, lay, shapes)[where] if len(unit_j) else np.zeros(0, dtype=int)
    pair = unit_q >= 0
    if pair.any():
        caps = caps.copy()
        caps[pair] = pairing.unit_caps(question, options, unit_q[pair], lay, unit_j[pair])
    return caps


def unit_throughput(question: Question, gi: int, bits: int, lay: Layouts, options, idx, q, batch) -> np.ndarray:
    """Exact output tokens/s one unit serves: an instance (B / tau), or x prefill + y decode instances, times the
    utilisation cap."""
    layout = group_layout(lay, idx, question)
    if question.workload is None:
        tau = ev.time_per_token_with_gamma(
            question.model,
            question.gpus[gi],
            question.preset_on(question.gpus[gi]),
            bits,
            layout,
            batch,
            lay.gamma[idx].astype(float),
            question.draft,
            question.acceptance,
        )
    else:
        tau = target_step(question, gi, bits, lay, idx, batch).step_time_s
    decode = batch / tau * question.max_utilisation
    if options is None or not np.any(q >= 0):
        return decode
    qs = np.where(q >= 0, q, 0)
    prefill = options.x[qs] * options.requests_per_s[qs] * question.whole_requests.mean_osl * question.max_utilisation
    return np.where(q >= 0, np.minimum(prefill, options.y[qs] * decode), decode)


def _first_batch(lo, hi, predicate) -> np.ndarray:
    """Smallest batch in [lo, hi] where a predicate monotone in the batch holds (hi + 1 where it never does)."""
    lo, hi = lo.copy(), hi + 1.0
    while np.any(lo < hi):
        mid = np.floor((lo + hi) / 2.0)
        ok = predicate(np.maximum(mid, 1.0))
        hi = np.where(ok & (lo < hi), mid, hi)
        lo = np.where(~ok & (lo < hi), mid + 1.0, lo)
    return lo


def _demand_range(question, gi, bits, lay, options, idx, q, caps, batch_lo, batch_hi, pos) -> None:
    """Batch range meeting the demand exactly: ceil(demand / throughput) units within the GPU limit and cluster and,
    for an instance, throughput <= demand (the paper's cap: a batch must be filled). Throughput rises with the batch,
    so both are thresholds found by bisection on the evaluator."""
    demand = question.demand_tok_s
    lo, hi = batch_lo[pos].astype(float), batch_hi[pos].astype(float)

    def thr(batch):
        return unit_throughput(question, gi, bits, lay, options, idx, q, batch)

    above = _first_batch(lo, hi, lambda b: (q < 0) & (thr(b) > demand * (1 + 1e-12)))
    enough = _first_batch(lo, hi, lambda b: np.ceil(demand / thr(b) - 1e-9) <= caps)
    batch_hi[pos] = np.minimum(hi, above - 1.0)
    batch_lo[pos] = np.maximum(lo, enough)


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
        left = np.column_stack([arr[wide, 0], arr[wide, 1], mid, arr[wide, 3]])
        right = np.column_stack([arr[wide, 0], mid + 1.0, arr[wide, 2], arr[wide, 3]])
        arr = np.concatenate([arr[~wide], left, right])
        done = np.concatenate([done[~wide], np.zeros(2 * int(wide.sum()), dtype=bool)])
    return [(int(a), float(b), float(c), int(d)) for a, b, c, d in arr]


def _time_unit_s(a0_s: np.ndarray, a1_s: np.ndarray, lo: np.ndarray) -> float:
    """A power of ten near the median time per token at the choices' smallest batches."""
    tau = (a0_s + a1_s * lo[:, None]).max(axis=1)
    typical = float(np.median(tau[tau > 0])) if np.any(tau > 0) else 1e-3
    return float(10.0 ** np.round(np.log10(typical)))


def _assemble(
    question: Question, lay: Layouts, rows, exclusions, options=None, time_unit_s=None, refined: bool = True
) -> Tables:
    """Compute the coefficients of every (layout, interval, option) row, vectorised per (accelerator, precision).

    ``refined`` says whether the rows' MoE chords are already within MOE_CHORD_TOLERANCE (see ``refine_rows``).
    """
    pieces = n_pieces(question)
    arr = np.array(rows, dtype=float).reshape(-1, 4)
    layout_of = arr[:, 0].astype(int)
    option_of = arr[:, 3].astype(int)
    lo, hi = arr[:, 1], arr[:, 2]
    a0 = np.zeros((len(rows), pieces))
    a1 = np.zeros((len(rows), pieces))
    m0, m1, mcap = np.zeros(len(rows)), np.zeros(len(rows)), np.zeros(len(rows))
    for gi, bits, sel in lay.groups(layout_of):
        idx = layout_of[sel]
        a0[sel], a1[sel] = chord_pieces(question, gi, bits, lay, idx, lo[sel], hi[sel])
        m0[sel], m1[sel], mcap[sel] = _memory_line(question, gi, bits, lay, idx)
    n_gpus = lay.n_gpus[layout_of].astype(float)
    usd_per_s = np.array([gpu.usd_per_s for gpu in question.gpus])[lay.gpu_index[layout_of]]
    unit = (_time_unit_s(a0, a1, lo) if len(rows) else 1e-3) if time_unit_s is None else time_unit_s
    coef = n_gpus * usd_per_s * 1e6 / question.max_utilisation
    floor = np.zeros(len(rows))
    pair = option_of >= 0
    if pair.any():
        coef[pair], floor[pair] = pairing.unit_usd_per_mtok(
            question, options, option_of[pair], (n_gpus * usd_per_s)[pair]
        )
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
        usd_per_mtok_coef=coef * unit,
        replicas_cap=_unit_caps(question, lay, options, layout_of, option_of),
        refined=np.full(len(rows), refined),
        exclusions=exclusions,
        time_unit_s=unit,
        option_of=option_of,
        cost_floor_usd_per_mtok=floor,
        options=options,
    )
