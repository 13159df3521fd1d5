"""The MIP's time pieces of one row, computed by the evaluator: which step a row's time per token is, and the chords
of its pieces between the ends of a batch interval (the conditions that keep them optimistic bounds are in
tables.py's docstring and docs/physics/step-structure.md).
"""

from __future__ import annotations

import numpy as np

from roofline_opt.optimize.space import Layouts, Question
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics import requests as rq


def group_layout(lay: Layouts, idx: np.ndarray, question: Question, tokens=1.0) -> ev.Layout:
    """The evaluator's layout of decode layouts idx at the question's context."""
    return lay.layout(idx, question.context, tokens)


def prefill_cycle(question: Question) -> bool:
    """Whether the question's aggregated layouts run the decode/chunk cycle (their TPOT is the cycle's mean)."""
    return question.workload is not None and question.preset.prefill_cycle


def needs_refining(question: Question) -> bool:
    """Whether rows start with chords that are optimistic by more than a rounding (MoE memory, the cycle)."""
    return question.model.is_moe or prefill_cycle(question)


def n_pieces(question: Question) -> int:
    """Pieces per row: GEMM memory or compute of the target (and draft step, or decode and chunk step of a cycle)."""
    return 4 if question.draft is not None or prefill_cycle(question) else 2


def target_step(
    question: Question, gpu_index: int, bits: int, lay: Layouts, idx: np.ndarray, batch
) -> ev.StepFigures | rq.CycleFigures:
    """The step whose time is the time per token (or per draft round): decode, verification, or the TPOT step."""
    gpu = question.gpus[gpu_index]
    layout = group_layout(lay, idx, question)
    if question.workload is None:
        return ev.step(question.model, gpu, question.preset_on(gpu), bits, layout.verifying(lay.gamma[idx]), batch)
    return rq.tpot_step(
        question.model,
        gpu,
        question.preset_on(gpu),
        bits,
        layout,
        batch,
        question.workload,
        lay.chunk[idx],
        ~lay.disagg[idx],
    )


def step_terms(question: Question, gpu_index: int, bits: int, lay: Layouts, idx: np.ndarray, batch: np.ndarray):
    """Per-token milliseconds of the target (and draft) step terms at the given batches, for layouts idx."""
    gpu = question.gpus[gpu_index]
    layout = group_layout(lay, idx, question)
    terms = [target_step(question, gpu_index, bits, lay, idx, batch)]
    if question.draft is not None:
        draft_layout = layout.for_draft(question.draft)
        terms.append(ev.step(question.draft, gpu, question.preset_on(gpu), ev.DRAFT_WEIGHT_BITS, draft_layout, batch))
    return terms


def per_token_s(question: Question, terms, gamma: np.ndarray, which: tuple[str, ...]) -> np.ndarray:
    """Seconds per generated token using the GEMM class's memory or compute time for the max() of target and draft
    steps (the serial part - launches, network, attention classes - in every piece)."""
    if isinstance(terms[0], rq.CycleFigures):
        return terms[0].piece_s(*which)
    e_tokens = ev.expected_tokens_per_round(question.acceptance, gamma) if question.draft is not None else 1.0
    total = 0.0
    for term, pick, weight in zip(terms, which, (1.0, gamma), strict=False):
        total = total + weight * (term.serial_s + getattr(term, pick))
    return np.where(gamma > 0, total / e_tokens, total)


PIECE_PICKS = (
    ("gemm_memory_s", "gemm_memory_s"),
    ("gemm_memory_s", "gemm_compute_s"),
    ("gemm_compute_s", "gemm_memory_s"),
    ("gemm_compute_s", "gemm_compute_s"),
)


def chord_pieces(question, gpu_index, bits, lay, idx, lo, hi):
    """a0, a1 of every convex piece on [lo, hi] (chords of the evaluator between the interval ends; a cycle's pieces
    lowered by their quadratic's chord gap, see ``cycle_gap_s``)."""
    gamma = lay.gamma[idx].astype(float)
    at_ends = step_terms(question, gpu_index, bits, lay, idx, np.stack([lo, hi]))  # one call: collectives once
    picks = PIECE_PICKS if n_pieces(question) == 4 else PIECE_PICKS[::3]
    a0s, a1s = [], []
    width = np.maximum(hi - lo, 1.0)
    for pick in picks:
        y_lo, y_hi = per_token_s(question, at_ends, gamma, pick)
        slope = np.where(hi > lo, (y_hi - y_lo) / width, 0.0)
        a1s.append(slope)
        below = cycle_gap_s(at_ends[0], pick, lo, hi) if isinstance(at_ends[0], rq.CycleFigures) else 0.0
        a0s.append(y_lo - slope * lo - below)
    return np.stack(a0s, axis=-1), np.stack(a1s, axis=-1)


def cycle_gap_s(cycle: rq.CycleFigures, pick: tuple[str, str], lo, hi) -> np.ndarray:
    """How far a cycle piece's chord may lie above the piece on [lo, hi]: a piece is (1 - f) A + f C with A (the decode
    step) and C (the chunk step) concave in the batch and f = kappa B; A and C lie above their chords, so the piece lies
    above the quadratic (1 - f) chord_A + f chord_C, whose chord is the piece's own and whose curvature is
    kappa (slope C - slope A). Where that is convex its chord lies at most kappa (slope C - slope A) (hi - lo)^2 / 4
    above it (at the middle): lowering the chord by that much keeps a valid lower bound, exact where lo = hi."""
    width = np.maximum(hi - lo, 1.0)
    f_lo, f_hi = cycle.chunk_share
    decode_lo, decode_hi = cycle.decode.serial_s + getattr(cycle.decode, pick[0])
    chunk_lo, chunk_hi = cycle.chunk.serial_s + getattr(cycle.chunk, pick[1])
    kappa = np.where(hi > lo, (f_hi - f_lo) / width, 0.0)
    curvature = kappa * ((chunk_hi - chunk_lo) - (decode_hi - decode_lo)) / width
    return np.maximum(curvature, 0.0) * (hi - lo) ** 2 / 4.0
