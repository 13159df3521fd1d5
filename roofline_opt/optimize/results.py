"""Answer types: the decoded setup, its figures re-evaluated by the exact evaluator, and how it was found.

``reevaluate`` is the single door through which any chosen setup (MIP or enumeration) becomes printable figures.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from roofline_opt.optimize.layout_record import ServingChoice, layout_label, ordered_fields
from roofline_opt.optimize.space import Question
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics import queueing as qm
from roofline_opt.physics import requests as rq
from roofline_opt.physics import tpot_percentiles as tq

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
REQUEST_FIGURES = (
    "ttft_s",
    "tpot_s",
    "max_itl_s",
    "requests_per_s",
    "usd_per_request",
    "usd_per_mtok_blended",
)
"""Figures of answers about whole requests (a workload), beside FIGURES."""
QUEUED_FIGURES = ("ttft_no_load_s", "ttft_percentile", "arrival_scv", "prefill_utilisation")
"""Figures of answers whose TTFT limit holds at a percentile under load (and of aggregated answers whose TPOT limit
alone does): ``ttft_s`` is then that percentile at the answer's own load, ``ttft_no_load_s`` its service time alone,
``prefill_utilisation`` the busy share of the prefill path at that load (an aggregated instance's chunk budget, or
the prefill instances; physics/queueing.py)."""
QUEUED_TPOT_FIGURES = ("tpot_mean_s", "tpot_percentile", "arrival_scv")
"""Figures of answers whose TPOT limit holds at a percentile under load: ``tpot_s`` is then that percentile at the
answer's own load, ``tpot_mean_s`` the steady-state TPOT at its mean batch (``time_per_token_s``, the inverse of
``tok_s_per_request``; physics/tpot_percentiles.py)."""
DECODE_ONLY, WHOLE_REQUEST = "decode_only", "whole_request"
"""The two scopes of a price (record field ``cost_scope``): decode steps at a fixed context, prefill excluded, or
whole requests (prefill, decode and, when disaggregated, the prefill instances). Each has its own field name:
``usd_per_mtok_decode_only`` or ``usd_per_mtok_whole_request``; ``usd_per_mtok`` is the objective under either."""


SETUP_ORDER = (
    "gpu",
    "weight_bits",
    "tp",
    "tp_2d",
    "pp",
    "ep",
    "batch",
    "gamma",
    "replicas",
    "dp_attention",
    "kv_bits",
    "serving",
    "chunk_tokens",
    "prefill_gpu",
    "prefill_tp",
    "prefill_tp_2d",
    "prefill_pp",
    "prefill_batch",
    "prefill_instances",
    "decode_instances",
)
"""A setup's fields in the order answers print them (JSON keys, CSV columns)."""


@dataclass(frozen=True, kw_only=True)
class Setup(ServingChoice):
    """Every decision of one deployment: the instance's layout (``LayoutChoice``, ``ServingChoice``), its batch, its
    draft length and how many replicas serve the demand. Disaggregated serving: replicas count x prefill plus y
    decode instances as units. Aggregated serving: one instance, prefill chunked into its steps."""

    batch: int
    gamma: int
    replicas: int = 1

    @property
    def unit_gpus(self) -> int:
        """GPUs of one replica: the instance, or x prefill plus y decode instances."""
        if not self.disaggregated:
            return self.n_gpus
        return self.prefill_instances * self.prefill_tp * self.prefill_pp + self.decode_instances * self.n_gpus

    @property
    def layout(self) -> str:
        """Compact layout name: ``tp8pp2ep1``, ``tp8(2d)pp1ep1``, with ``g4`` appended for a 4-token draft."""
        return layout_label(self.tp, self.tp_2d, self.pp, self.ep, self.gamma, self.dp_attention)

    @property
    def layout_key(self) -> tuple:
        """Every discrete choice but the batch: what makes two setups distinct layouts."""
        return (
            self.gpu,
            self.weight_bits,
            self.tp,
            self.tp_2d,
            self.pp,
            self.ep,
            self.gamma,
            self.kv_bits,
            self.serving,
            self.chunk_tokens,
            self.prefill_gpu,
            self.prefill_tp,
            self.prefill_tp_2d,
            self.prefill_pp,
            self.dp_attention,
        )


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
    log_error_quantiles: tuple[float, float] | None = None
    """The (10%, 90%) quantiles of ln(measured / estimate) of the profile's validation rows on this accelerator:
    the ``*_low``/``*_high`` fields (``INTERVAL_FIGURES``); None under the paper preset (no measured basis)."""

    @property
    def tok_s_per_request(self) -> float:
        return self.figures["tok_s_per_request"]

    @property
    def usd_per_mtok(self) -> float:
        return self.figures["usd_per_mtok"]

    def to_record(self) -> dict:
        """Flat dict with unit-named keys (the JSON and CSV row)."""
        s = self.setup
        rec = dict(self.question_fields)
        rec.update(ordered_fields(s, SETUP_ORDER))
        for name in ("serving", "chunk_tokens", *(f for f in rec if f.startswith("prefill_")), "decode_instances"):
            rec.pop(name)
        rec["layout"] = s.layout
        rec["n_gpus"] = s.n_gpus
        rec["total_gpus"] = s.unit_gpus * s.replicas
        if "ttft_s" in self.figures:
            rec.update(_request_fields(s))
        rec.update(self.figures)
        scope = WHOLE_REQUEST if "ttft_s" in self.figures else DECODE_ONLY
        rec["cost_scope"] = scope
        rec[f"usd_per_mtok_{scope}"] = self.figures["usd_per_mtok"]
        for name in ("time_per_token_s", "ttft_s", "tpot_s", "tpot_mean_s"):
            if name in self.figures:
                rec[name.removesuffix("_s") + "_ms"] = self.figures[name] * 1e3
        rec["usd_per_hour"] = self.figures["usd_per_hour_per_instance"] * self.setup.replicas
        rec.update(interval_fields(rec, self.log_error_quantiles))
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


INTERVAL_FIGURES = {
    "tok_s_per_request": 1,
    "tok_s_per_gpu": 1,
    "throughput_tok_s": 1,
    "requests_per_s": 1,
    "usd_per_mtok": -1,
    "usd_per_request": -1,
    "time_per_token_ms": -1,
    "tpot_ms": -1,
}
"""Figures given with an interval, and whether they rise (1) or fall (-1) with the measured/estimate ratio."""
INTERVAL_BASIS = (
    "empirical 10-90% range of ln(measured / estimate) over the profile's validation rows on this accelerator "
    "family (docs/profiles/): how far measured serving fell from such estimates, not a confidence interval of the "
    "physics"
)


def interval_fields(record: dict, quantiles: tuple[float, float] | None) -> dict:
    """``<figure>_low`` and ``<figure>_high`` for each figure of INTERVAL_FIGURES in ``record`` (none without
    quantiles: the paper preset has no measured basis): the figure times exp(q10) and exp(q90), inverted for prices
    and times."""
    out: dict[str, float | None] = {}
    if quantiles is None:
        return out
    for name, sign in INTERVAL_FIGURES.items():
        value = record.get(name)
        if value is None:
            continue
        low, high = sorted(value * math.exp(sign * q) for q in quantiles)
        out[f"{name}_low"], out[f"{name}_high"] = low, high
    return out


def _request_fields(s: Setup) -> dict:
    """The serving decisions of an answer about whole requests (prefill fields only when disaggregated)."""
    rec = {
        "serving": s.serving,
        "chunk_tokens": s.chunk_tokens if not s.disaggregated else 0,
        "decode_layout": layout_label(s.tp, s.tp_2d, s.pp, s.ep, s.gamma, s.dp_attention),
        "decode_gpu": s.gpu,
        "decode_instances": s.decode_instances,
    }
    if s.disaggregated:
        rec.update(
            prefill_layout=layout_label(s.prefill_tp, s.prefill_tp_2d, s.prefill_pp),
            prefill_gpu=s.prefill_gpu,
            prefill_instances=s.prefill_instances,
            prefill_tp=s.prefill_tp,
            prefill_tp_2d=s.prefill_tp_2d,
            prefill_pp=s.prefill_pp,
            prefill_batch=s.prefill_batch,
        )
    return rec


def setup_of(question: Question, lay, j: int, batch: int, options=None, option: int = -1) -> Setup:
    """The setup of decode layout j at ``batch``, paired with prefill option ``option`` when disaggregated."""
    fields: dict[str, Any] = dict(
        gpu=question.gpus[int(lay.gpu_index[j])].name,
        weight_bits=int(lay.weight_bits[j]),
        tp=int(lay.tp[j]),
        tp_2d=bool(lay.tp_2d[j]),
        pp=int(lay.pp[j]),
        ep=int(lay.ep[j]),
        batch=int(batch),
        gamma=int(lay.gamma[j]),
        dp_attention=bool(lay.dp_attention[j]),
        kv_bits=int(lay.kv_bits[j]),
        serving=rq.DISAGG if lay.disagg[j] else rq.AGG,
        chunk_tokens=int(lay.chunk[j]),
    )
    if option >= 0:
        pl, k = options.layouts, int(options.layout[option])
        fields.update(
            prefill_gpu=question.gpus[int(pl.gpu_index[k])].name,
            prefill_tp=int(pl.tp[k]),
            prefill_tp_2d=bool(pl.tp_2d[k]),
            prefill_pp=int(pl.pp[k]),
            prefill_batch=int(options.batch[option]),
            prefill_instances=int(options.x[option]),
            decode_instances=int(options.y[option]),
        )
    return Setup(**fields)


def replicas_for(question: Question, throughput_tok_s: float) -> int:
    """Instances needed to serve the demand (1 without a demand)."""
    if question.demand_tok_s is None:
        return 1
    return max(1, math.ceil(question.demand_tok_s / throughput_tok_s - 1e-9))


def reevaluate(question: Question, setup: Setup, method: str, report: SolveReport | None = None) -> Answer:
    """Exact figures of ``setup`` from the evaluator; the only source of printed numbers."""
    gpu = _gpu(question, setup.gpu)
    layout = ev.Layout.of(
        setup.tp, setup.tp_2d, setup.pp, question.context, 1, setup.ep, setup.kv_bits, dp_attention=setup.dp_attention
    )
    if question.workload is not None:
        if setup.disaggregated and not question.queued_ttft:
            setup = _least_prefill_batch(question, setup, gpu, layout)
        out = _request_figures(question, setup, gpu, layout)
        figures = {k: float(np.asarray(out[k])) for k in (*FIGURES, *REQUEST_FIGURES)}
        if "ttft_percentile" in out:
            figures.update({k: float(np.asarray(out[k])) for k in QUEUED_FIGURES})
        if question.queued_tpot:
            figures.update({k: float(np.asarray(out[k])) for k in QUEUED_TPOT_FIGURES})
    else:
        draft = question.draft if setup.gamma > 0 else None
        out = ev.evaluate(
            question.model,
            gpu,
            question.preset_on(gpu),
            setup.weight_bits,
            layout,
            setup.batch,
            draft=draft,
            acceptance=question.acceptance,
            gamma=setup.gamma if draft is not None else None,
        )
        out["usd_per_mtok"] = out["usd_per_mtok"] / question.max_utilisation
        out["throughput_tok_s"] = out["throughput_tok_s"] * question.max_utilisation
        out["tok_s_per_gpu"] = out["throughput_tok_s"] / out["n_gpus"]
        figures = {k: float(np.asarray(out[k])) for k in FIGURES}
    figures["usd_per_hour_per_instance"] = _unit_usd_per_hour(question, setup)
    replicas = replicas_for(question, figures["throughput_tok_s"])
    full = dataclasses.replace(setup, replicas=replicas)
    return Answer(
        setup=full,
        figures=figures,
        bottleneck=str(np.asarray(out["bottleneck"])),
        fits_in_memory=bool(np.asarray(out["fits_in_memory"])),
        method=method,
        report=report,
        question_fields=question_fields(question, gpu),
        log_error_quantiles=_log_error_quantiles(question, gpu),
    )


def _unit_usd_per_hour(question: Question, setup: Setup) -> float:
    """Dollars per hour of one replica: its GPUs at their accelerators' hourly prices."""
    price = _gpu(question, setup.gpu).usd_per_hour
    if not setup.disaggregated:
        return setup.n_gpus * price
    prefill = (
        setup.prefill_instances * setup.prefill_tp * setup.prefill_pp * _gpu(question, setup.prefill_gpu).usd_per_hour
    )
    return prefill + setup.decode_instances * setup.n_gpus * price


def _profile_of(question: Question):
    """The question's engine profile, or the packaged neutral one for a default-preset question (None: paper)."""
    if question.profile is not None:
        return question.profile
    if question.preset.name != "default":
        return None
    from roofline_opt.catalog.profiles import NEUTRAL, packaged_profile

    return packaged_profile(NEUTRAL)


def _log_error_quantiles(question: Question, gpu) -> tuple[float, float] | None:
    profile = _profile_of(question)
    entry = None if profile is None else profile.efficiency_for(gpu)
    return None if entry is None else entry.log_error_quantiles


def question_fields(question: Question, gpu) -> dict:
    """The fields of the question an answer belongs to (weight bits are the setup's own)."""
    profile = _profile_of(question)
    return {
        "model": question.model.name,
        "context": question.context,
        "preset": question.preset.name,
        **({} if profile is None else {"profile": profile.name}),
        "usd_per_gpu_hour": gpu.usd_per_hour,
        "price_basis": gpu.price_basis,
    }


def _gpu(question: Question, name: str):
    return next(g for g in question.gpus if g.name == name)


def _request_figures(question: Question, setup: Setup, gpu, layout: ev.Layout) -> dict:
    """Figures of an aggregated instance or a disaggregated unit, with time per token = TPOT."""
    u, w = question.max_utilisation, question.whole_requests
    model, preset, bits = question.model, question.preset_on(gpu), setup.weight_bits
    if setup.disaggregated:
        p_gpu = _gpu(question, setup.prefill_gpu)
        p_layout = ev.Layout.of(setup.prefill_tp, setup.prefill_tp_2d, setup.prefill_pp, 0, 1, 1, setup.kv_bits)
        out: dict[str, Any] = rq.disaggregated_figures(
            model,
            preset,
            bits,
            w,
            (p_gpu, p_layout, float(setup.prefill_batch), setup.prefill_instances),
            (gpu, layout, float(setup.batch), setup.decode_instances),
            u,
            prefill_preset=question.preset_on(p_gpu),
            spec=_speculation(question, setup),
        )
        processed: float = setup.batch
    else:
        spec = _speculation(question, setup)
        out = rq.aggregated_figures(model, gpu, preset, bits, layout, setup.batch, w, setup.chunk_tokens, u, spec)
        processed = setup.batch * (1.0 + w.prompt_tokens_per_output)
    out["best_gamma"] = setup.gamma
    if question.queued_ttft:
        _queued(question, setup, gpu, layout, out)
    elif question.queued_tpot and not setup.disaggregated:
        _aggregated_ttft_at_load(question, setup, gpu, layout, out)
    tpot = out["tpot_s"]
    out["time_per_token_s"] = tpot
    out["tok_s_per_request"] = 1.0 / tpot
    flop = 2.0 * ev.model_sizes(model).active_params * processed
    out["mfu_fraction"] = flop / (tpot * setup.n_gpus * ev.flop_rate(gpu, bits))
    out["bottleneck"] = _bottleneck(out)
    if question.queued_tpot:
        _queued_tpot(question, setup, gpu, layout, out)
    return out


def _queued_tpot(question: Question, setup: Setup, gpu, layout: ev.Layout, out: dict) -> None:
    """Figures at load when the TPOT limit holds at a percentile: ``tpot_s`` that percentile for an aggregated
    instance, or a decode instance, loaded to the answer's batch (physics/tpot_percentiles.py)."""
    p, scv, w = question.slo_percentile, question.arrival_scv, question.whole_requests
    assert p is not None
    args = (p, question.model, gpu, question.preset_on(gpu), setup.weight_bits, layout, float(setup.batch))
    out["tpot_mean_s"] = out["tpot_s"]
    out["tpot_percentile"], out["arrival_scv"] = p, scv
    spec = _speculation(question, setup)
    if setup.disaggregated:
        out["tpot_s"] = tq.decode_percentile_tpot_s(*args, w, scv, spec)
    else:
        out["tpot_s"] = tq.aggregated_percentile_tpot_s(*args, w, setup.chunk_tokens, scv, spec)


def _speculation(question: Question, setup: Setup) -> rq.Speculation | None:
    """The answer's draft at its gamma (None without a draft model)."""
    return None if question.draft is None else rq.Speculation(question.draft, setup.gamma, question.acceptance)


def _prefill_side(question: Question, setup: Setup, gpu, layout: ev.Layout):
    """(prefill accelerator, prefill layout, KV link bytes/s per GPU, hop latency s) of a disaggregated setup, the link
    as ``requests.disaggregated_figures`` picks it."""
    p_gpu = _gpu(question, setup.prefill_gpu)
    p_layout = ev.Layout.of(setup.prefill_tp, setup.prefill_tp_2d, setup.prefill_pp, 0, 1, 1, setup.kv_bits)
    same = bool(rq.shares_domain(p_gpu, gpu, p_layout.n_gpus, layout.n_gpus))
    hop = p_gpu.intra_hop_latency_s if same else max(p_gpu.inter_hop_latency_s, gpu.inter_hop_latency_s)
    return p_gpu, p_layout, rq.kv_link_bytes_per_s(p_gpu, gpu, same), hop


def _least_prefill_batch(question: Question, setup: Setup, gpu, layout: ev.Layout) -> Setup:
    """The setup with the smallest prefill batch that serves as many requests/s as its own: where the decode side
    limits a unit, a smaller prefill batch costs the same and gives a lower TTFT (ties go to the better latency).
    Requests/s of a prefill instance never fall with its batch, so the batch is found by bisection."""
    w, x = question.whole_requests, setup.prefill_instances
    p_gpu, p_layout, link, hop = _prefill_side(question, setup, gpu, layout)
    draft = question.draft if setup.gamma > 0 else None

    def prefill_rate(batch: float) -> float:
        fig = rq.prefill_figures(
            question.model, p_gpu, question.preset_on(p_gpu), setup.weight_bits, p_layout, batch, w, link, hop, draft
        )
        return x * float(fig["requests_per_s"])

    spec = _speculation(question, setup)
    tpot = rq.tpot_step(
        question.model, gpu, question.preset_on(gpu), setup.weight_bits, layout, setup.batch, w, 0.0, 0.0, spec
    )
    decode_rate = setup.decode_instances * setup.batch / (w.mean_osl * float(tpot.step_time_s))
    served = min(prefill_rate(setup.prefill_batch), decode_rate)
    lo, hi = setup.prefill_pp, setup.prefill_batch
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if prefill_rate(mid) >= served else (mid + 1, hi)
    return dataclasses.replace(setup, prefill_batch=hi)


def _aggregated_ttft_at_load(question: Question, setup: Setup, gpu, layout: ev.Layout, out: dict) -> None:
    """An aggregated answer's TTFT at the question's percentile at its load (the arrival rate whose mean decode batch
    is the answer's batch; physics/queueing.py), whether or not a TTFT limit holds there: ``ttft_s`` that percentile,
    ``ttft_no_load_s`` the chunk schedule's, ``prefill_utilisation`` the chunk budget's busy share."""
    p, scv, w = question.slo_percentile, question.arrival_scv, question.whole_requests
    assert p is not None
    spec = _speculation(question, setup)
    args = (question.model, gpu, question.preset_on(gpu), setup.weight_bits, layout, float(setup.batch), w)
    out["ttft_no_load_s"] = out["ttft_s"]
    out["ttft_percentile"], out["arrival_scv"] = p, scv
    out["ttft_s"] = qm.aggregated_percentile_ttft_s(p, *args, setup.chunk_tokens, scv, spec)
    out["prefill_utilisation"] = qm.aggregated_utilisation(*args, setup.chunk_tokens, spec)


def _queued(question: Question, setup: Setup, gpu, layout: ev.Layout, out: dict) -> None:
    """Figures at load when the TTFT limit holds at a percentile: an aggregated instance at the arrival rate whose
    mean decode batch is the answer's batch; a disaggregated unit serving min(x prefill instances' rate at the limit,
    y decode instances' rate), its prefill queue at that rate (physics/queueing.py)."""
    p, scv, w = question.slo_percentile, question.arrival_scv, question.whole_requests
    assert p is not None and question.max_ttft_s is not None
    model, bits = question.model, setup.weight_bits
    if not setup.disaggregated:
        _aggregated_ttft_at_load(question, setup, gpu, layout, out)
        return
    out["ttft_no_load_s"] = out["ttft_s"]
    out["ttft_percentile"], out["arrival_scv"] = p, scv
    p_gpu, p_layout, link, hop = _prefill_side(question, setup, gpu, layout)
    x, draft = setup.prefill_instances, question.draft if setup.gamma > 0 else None
    p_preset = question.preset_on(p_gpu)
    service, ttft0 = qm.prefill_classes(model, p_gpu, p_preset, bits, p_layout, w, link, hop, draft)
    prefill_rate = qm.max_rate_per_s(p, question.max_ttft_s, w._w(), service, ttft0, x, scv)
    served = min(float(prefill_rate), setup.decode_instances * float(out["decode_requests_per_s"]))
    scale = served / float(out["requests_per_s"])
    for name in ("requests_per_s", "throughput_tok_s", "tok_s_per_gpu"):
        out[name] = out[name] * scale
    for name in ("usd_per_request", "usd_per_mtok", "usd_per_mtok_blended"):
        out[name] = out[name] / scale
    out["prefill_requests_per_s"] = prefill_rate / x
    out["ttft_s"] = qm.percentile_ttft_s(p, w._w(), service, ttft0, served, x, scv)
    out["prefill_utilisation"] = served * float(np.asarray(service) @ w._w()) / x


def _bottleneck(out: dict) -> str:
    network, memory, compute = (float(np.asarray(out[k])) for k in ("network_s", "memory_s", "compute_s"))
    if network >= max(memory, compute):
        return "network"
    return "memory" if memory >= compute else "compute"
