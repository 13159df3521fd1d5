"""The MIP's time pieces of one row, computed by the evaluator: which step a row's time per token is, and the chords
of its pieces between the ends of a batch interval (the conditions that keep them optimistic bounds are in
tables.py's docstring and docs/physics/step-structure.md).
"""

from __future__ import annotations

import itertools

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


def speculation(question: Question, lay: Layouts, idx: np.ndarray) -> rq.Speculation | None:
    """The draft of whole-request layouts idx (their gamma; None without a draft model)."""
    if question.draft is None:
        return None
    return rq.Speculation(question.draft, lay.gamma[idx].astype(float), question.acceptance)


def n_steps(question: Question) -> int:
    """Distinct steps of a whole-request row's TPOT (``requests.step_terms``): the target's step, or decode and chunk
    steps with the cycle; with a draft its plain step and the step reading the prompt tokens too."""
    steps = 2 if prefill_cycle(question) else 1
    return steps + (2 if question.draft is not None else 0)


def n_pieces(question: Question) -> int:
    """Pieces per row: each distinct step's GEMM class at memory or compute (decode only: the target and draft)."""
    if question.workload is None:
        return 4 if question.draft is not None else 2
    return 2 ** n_steps(question)


def target_step(
    question: Question, gpu_index: int, bits: int, lay: Layouts, idx: np.ndarray, batch
) -> ev.StepFigures | rq.Round | rq.CycleFigures:
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
        speculation(question, lay, idx),
    )


def step_terms(question: Question, gpu_index: int, bits: int, lay: Layouts, idx: np.ndarray, batch: np.ndarray):
    """Per-token milliseconds of the target (and draft) step terms at the given batches, for layouts idx (decode
    only; whole requests: ``target_step``)."""
    gpu = question.gpus[gpu_index]
    layout = group_layout(lay, idx, question)
    terms = [target_step(question, gpu_index, bits, lay, idx, batch)]
    if question.draft is not None and question.workload is None:
        draft_layout = layout.for_draft(question.draft)
        terms.append(ev.step(question.draft, gpu, question.preset_on(gpu), ev.DRAFT_WEIGHT_BITS, draft_layout, batch))
    return terms


def per_token_s(question: Question, gpu_index: int, terms, gamma: np.ndarray, which: tuple[str, ...]) -> np.ndarray:
    """Seconds per generated token using the GEMM class's memory or compute time for the max() of target and draft
    steps (the serial part - launches, network, attention classes - in every piece), composed into a round as the
    evaluator does (``evaluator.round_time_per_token_s``); decode only."""
    target, *draft = (term.serial_s + getattr(term, pick) for term, pick in zip(terms, which, strict=False))
    if not draft:
        return target
    preset = question.preset_on(question.gpus[gpu_index])
    return ev.round_time_per_token_s(preset, target, draft[0], gamma, question.acceptance)


PIECE_PICKS = (
    ("gemm_memory_s", "gemm_memory_s"),
    ("gemm_memory_s", "gemm_compute_s"),
    ("gemm_compute_s", "gemm_memory_s"),
    ("gemm_compute_s", "gemm_compute_s"),
)
GEMM_PICKS = ("gemm_memory_s", "gemm_compute_s")


def request_pieces(question: Question, fig, lo, hi) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Every piece of a whole-request TPOT figure evaluated at (lo, hi) (leading axis 2), and how far each piece's chord
    may lie above it on [lo, hi].

    A piece is sum_k w_k (serial_k + GEMM pick_k) over the figure's distinct steps (``requests.step_terms``), with one
    pick per step; padded by repetition to ``n_pieces``. The weights are constant (a speculative round: 1, gamma and
    the draft's chunk reading, over E) or affine in the batch (the cycle's 1 - f and f, f = kappa B) and every step
    term g_k is concave, so a piece lies above the quadratic sum_k w_k chord_k, whose chord is the piece's own; where
    that is convex (curvature sum_k w_k' chord_k') its chord lies at most curvature (hi - lo)^2 / 4 above it."""
    terms = rq.step_terms(fig)
    host = rq.host_per_token_s(fig)  # constant in the batch: in every piece, no curvature
    width = np.maximum(hi - lo, 1.0)
    values, gaps = [], []
    for picks in itertools.product(GEMM_PICKS, repeat=len(terms)):
        value, curvature = host, np.zeros(())
        for (w, step), pick in zip(terms, picks, strict=True):
            g = step.serial_s + getattr(step, pick)
            w = np.broadcast_to(w, np.shape(g))
            value = value + w * g
            curvature = curvature + np.where(hi > lo, (w[1] - w[0]) * (g[1] - g[0]) / width**2, 0.0)
        values.append(value)
        gaps.append(np.maximum(curvature, 0.0) * (hi - lo) ** 2 / 4.0)
    missing = n_pieces(question) - len(values)
    return values + values[:1] * missing, gaps + gaps[:1] * missing


def chord_pieces(question, gpu_index, bits, lay, idx, lo, hi):
    """a0, a1 of every convex piece on [lo, hi] (chords of the evaluator between the interval ends; a cycle's pieces
    lowered by their quadratic's chord gap, see ``request_pieces``)."""
    gamma = lay.gamma[idx].astype(float)
    at_ends = step_terms(question, gpu_index, bits, lay, idx, np.stack([lo, hi]))  # one call: collectives once
    width = np.maximum(hi - lo, 1.0)
    if question.workload is not None:
        ends, belows = request_pieces(question, at_ends[0], lo, hi)
    else:
        picks = PIECE_PICKS if n_pieces(question) == 4 else PIECE_PICKS[::3]
        ends = [per_token_s(question, gpu_index, at_ends, gamma, pick) for pick in picks]
        belows = [0.0] * len(ends)
    a0s, a1s = [], []
    for (y_lo, y_hi), below in zip(ends, belows, strict=True):
        slope = np.where(hi > lo, (y_hi - y_lo) / width, 0.0)
        a1s.append(slope)
        a0s.append(y_lo - slope * lo - below)
    return np.stack(a0s, axis=-1), np.stack(a1s, axis=-1)
