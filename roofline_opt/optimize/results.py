"""Answer types: the decoded setup, its figures re-evaluated by the exact evaluator, and how it was found.

``reevaluate`` is the single door through which any chosen setup (MIP or enumeration) becomes printable figures.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from roofline_opt.optimize.space import Question
from roofline_opt.physics import evaluator as ev

if TYPE_CHECKING:
    from roofline_opt.optimize.solve import SolveReport

FIGURES = (
    "tok_s_per_request",
    "usd_per_mtok",
    "time_per_token_s",
    "throughput_tok_s",
    "tok_s_per_gpu",
    "mfu_fraction",
    "step_time_s",
    "kernel_launch_s",
    "network_s",
    "memory_s",
    "compute_s",
    "weights_bytes_per_device",
    "kv_cache_bytes_per_device",
    "activations_bytes_per_device",
    "memory_capacity_bytes",
)


@dataclass(frozen=True)
class Setup:
    """Every decision of one deployment: the instance's layout, its batch and how many replicas serve the demand."""

    gpu: str
    weight_bits: int
    tp: int
    tp_2d: bool
    pp: int
    ep: int
    batch: int
    gamma: int
    replicas: int = 1

    @property
    def n_gpus(self) -> int:
        return self.tp * self.pp

    @property
    def layout(self) -> str:
        """Compact layout name: ``tp8pp2ep1``, ``tp8(2d)pp1ep1``, with ``g4`` appended for a 4-token draft."""
        return layout_name(self.tp, self.tp_2d, self.pp, self.ep, self.gamma)

    @property
    def layout_key(self) -> tuple:
        """Every discrete choice but the batch: what makes two setups distinct layouts."""
        return (self.gpu, self.weight_bits, self.tp, self.tp_2d, self.pp, self.ep, self.gamma)


def layout_name(tp: int, tp_2d: bool, pp: int, ep: int, gamma: int = 0) -> str:
    """``tp8pp2ep1``; ``(2d)`` after the TP degree for 2-D tensor parallelism; ``g<gamma>`` with a draft."""
    return f"tp{tp}{'(2d)' if tp_2d else ''}pp{pp}ep{ep}" + (f"g{gamma}" if gamma else "")


@dataclass(frozen=True)
class Answer:
    """A chosen setup with exact figures, and the solve report of the method that chose it."""

    setup: Setup
    figures: dict[str, float]
    bottleneck: str
    fits_in_memory: bool
    method: str
    report: SolveReport | None = None
    placement: dict | None = field(default=None)
    bounds: dict[str, float] = field(default_factory=dict)
    """Proven bounds on the objective in its own unit (bound_tok_s_per_request or bound_usd_per_mtok)."""
    question_fields: dict = field(default_factory=dict)
    """The question's own fields (model, context, preset, price) so answers of several questions can be stacked."""

    @property
    def tok_s_per_request(self) -> float:
        return self.figures["tok_s_per_request"]

    @property
    def usd_per_mtok(self) -> float:
        return self.figures["usd_per_mtok"]

    def to_record(self) -> dict:
        """Flat dict with unit-named keys (the JSON and CSV row)."""
        rec = dict(self.question_fields)
        rec.update(asdict(self.setup))
        rec["layout"] = self.setup.layout
        rec["n_gpus"] = self.setup.n_gpus
        rec["total_gpus"] = self.setup.n_gpus * self.setup.replicas
        rec.update(self.figures)
        rec["usd_per_hour"] = self.figures["usd_per_hour_per_instance"] * self.setup.replicas
        rec["bottleneck"] = self.bottleneck
        rec["fits_in_memory"] = self.fits_in_memory
        rec["method"] = self.method
        rep = self.report
        rec["solver_status"] = rep.termination if rep else "enumerated"
        rec["mip_gap"] = rep.mip_gap if rep else 0.0
        rec.update(self.bounds)
        rec["solve_seconds"] = rep.seconds if rep else None
        if self.placement is not None:
            rec["placement"] = self.placement
        return rec


def replicas_for(question: Question, throughput_tok_s: float) -> int:
    """Instances needed to serve the demand (1 without a demand)."""
    if question.demand_tok_s is None:
        return 1
    return max(1, math.ceil(question.demand_tok_s / throughput_tok_s - 1e-9))


def reevaluate(question: Question, setup: Setup, method: str, report: SolveReport | None = None) -> Answer:
    """Exact figures of ``setup`` from the evaluator; the only source of printed numbers."""
    gpu = next(g for g in question.gpus if g.name == setup.gpu)
    layout = ev.Layout.of(setup.tp, setup.tp_2d, setup.pp, question.context, 1, setup.ep)
    draft = question.draft if setup.gamma > 0 else None
    out = ev.evaluate(
        question.model,
        gpu,
        question.preset,
        setup.weight_bits,
        layout,
        setup.batch,
        draft=draft,
        acceptance=question.acceptance,
        gamma=setup.gamma if draft is not None else None,
    )
    figures = {k: float(np.asarray(out[k])) for k in FIGURES}
    figures["usd_per_hour_per_instance"] = float(np.asarray(out["usd_per_hour"]))
    replicas = replicas_for(question, figures["throughput_tok_s"])
    full = Setup(**{**asdict(setup), "replicas": replicas})
    return Answer(
        setup=full,
        figures=figures,
        bottleneck=str(np.asarray(out["bottleneck"])),
        fits_in_memory=bool(np.asarray(out["fits_in_memory"])),
        method=method,
        report=report,
        question_fields=question_fields(question, gpu),
    )


def question_fields(question: Question, gpu) -> dict:
    """The fields of the question an answer belongs to (weight bits are the setup's own)."""
    return {
        "model": question.model.name,
        "context": question.context,
        "preset": question.preset.name,
        "usd_per_gpu_hour": gpu.usd_per_hour,
        "price_basis": gpu.price_basis,
    }
