"""The discrete decision space of a deployment question, defined once for both the MIP and the enumeration oracle.

A *layout* fixes every discrete choice but the batch: accelerator, weight precision, tensor-parallel degree and
1-D/2-D mode, pipeline degree, expert-parallel degree and draft length gamma. The batch ranges over whole numbers
from the pipeline degree (a microbatch holds at least one sequence) up to ``max_batch``. Nothing here scores a point.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from roofline_opt.physics.specs import DEFAULT, GpuSpec, ModelSpec, Preset

DEFAULT_TP_DEGREES = (1, 2, 4, 8, 16, 32, 64)
DEFAULT_PP_DEGREES = (1, 2, 4, 8)
DEFAULT_MAX_BATCH = 4096
DEFAULT_CONTEXT = 8000
DEFAULT_ACCEPTANCE = 0.8

InstanceLimit = Callable[[GpuSpec, int, int], int]
"""How many disjoint instances of (accelerator, tp, pp) fit at once (a cluster's placement rule)."""


@dataclass(frozen=True)
class Question:
    """Everything a query fixes except its target: model, choices offered, physics and limits."""

    model: ModelSpec
    gpus: tuple[GpuSpec, ...]
    weight_bits: tuple[int, ...] = (16,)
    tp_degrees: tuple[int, ...] = DEFAULT_TP_DEGREES
    tp_modes: tuple[bool, ...] = (False, True)
    pp_degrees: tuple[int, ...] = DEFAULT_PP_DEGREES
    ep_degrees: tuple[int, ...] = (1,)
    max_batch: int = DEFAULT_MAX_BATCH
    context: int = DEFAULT_CONTEXT
    draft: ModelSpec | None = None
    acceptance: float = DEFAULT_ACCEPTANCE
    gamma_max: int = 0
    preset: Preset = DEFAULT
    max_gpus: int | None = None
    demand_tok_s: float | None = None
    instance_limit: InstanceLimit | None = field(default=None, compare=False)
    cluster_name: str | None = None
    cluster: Any = field(default=None, compare=False, repr=False)

    @property
    def gammas(self) -> tuple[int, ...]:
        return tuple(range(self.gamma_max + 1)) if self.draft is not None else (0,)


@dataclass(frozen=True)
class Layouts:
    """Column arrays, one entry per layout (every discrete choice but the batch)."""

    gpu_index: np.ndarray
    weight_bits: np.ndarray
    tp: np.ndarray
    tp_2d: np.ndarray
    pp: np.ndarray
    ep: np.ndarray
    gamma: np.ndarray

    def __len__(self) -> int:
        return len(self.tp)

    def take(self, mask: np.ndarray) -> Layouts:
        return Layouts(*(getattr(self, f)[mask] for f in self.__dataclass_fields__))

    @property
    def n_gpus(self) -> np.ndarray:
        return self.tp * self.pp

    def groups(self, rows: np.ndarray | None = None) -> Iterator[tuple[int, int, np.ndarray]]:
        """(gpu index, weight bits, positions in rows) per accelerator/precision pair: the evaluator's unit of work.

        ``rows`` are layout indices (all layouts when None); positions index into it.
        """
        rows = np.arange(len(self)) if rows is None else np.asarray(rows, dtype=int)
        keys = self.gpu_index[rows] * 64 + self.weight_bits[rows]
        for key in np.unique(keys):
            yield int(key // 64), int(key % 64), np.flatnonzero(keys == key)


def layouts(question: Question) -> Layouts:
    """Every admissible combination of the discrete choices (2-D mode only for tp > 1, ep dividing tp and E)."""
    rows = []
    model = question.model
    for g, gpu in enumerate(question.gpus):
        for bits in question.weight_bits:
            if not gpu.supports(bits):
                continue
            for tp in question.tp_degrees:
                for two_d in question.tp_modes:
                    if two_d and tp == 1:
                        continue
                    for pp in question.pp_degrees:
                        if pp > question.max_batch:
                            continue
                        for ep in question.ep_degrees:
                            if ep > 1 and (tp % ep or model.n_experts % ep):
                                continue
                            for gamma in question.gammas:
                                rows.append((g, bits, tp, two_d, pp, ep, gamma))
    if not rows:
        return Layouts(*(np.zeros(0, dtype=t) for t in (int, int, int, bool, int, int, int)))
    cols = list(zip(*rows, strict=True))
    return Layouts(
        gpu_index=np.array(cols[0], dtype=int),
        weight_bits=np.array(cols[1], dtype=int),
        tp=np.array(cols[2], dtype=int),
        tp_2d=np.array(cols[3], dtype=bool),
        pp=np.array(cols[4], dtype=int),
        ep=np.array(cols[5], dtype=int),
        gamma=np.array(cols[6], dtype=int),
    )


def replica_caps(question: Question, lay: Layouts, which: np.ndarray | None = None) -> np.ndarray:
    """max_replicas of every layout (or of the layouts ``which``)."""
    idx = np.arange(len(lay.tp)) if which is None else which
    shapes = zip(lay.gpu_index[idx], lay.tp[idx], lay.pp[idx], strict=True)
    return np.array([max_replicas(question, question.gpus[g], int(t), int(p)) for g, t, p in shapes], dtype=int)


def max_replicas(question: Question, gpu: GpuSpec, tp: int, pp: int) -> int:
    """Disjoint instances of this shape the GPU limit and the cluster allow (a large number when unlimited)."""
    limit = 1 << 30
    if question.max_gpus is not None:
        limit = question.max_gpus // (tp * pp)
    if question.instance_limit is not None:
        limit = min(limit, question.instance_limit(gpu, tp, pp))
    return limit
