"""The KV transfer of a disaggregated pool and the prefill figures it enters: link, service, TTFT (at a percentile).

A model's prefill instances send every request's KV cache to one of its decode instances. In a fleet they are
placed wherever the MIP finds room, so the transfer is priced across scale-up domains, never inside one:

- on a cluster graph, at the bandwidth and path latency ``topology.collective_figures`` derives over the GPUs of the
  two types together (per GPU, the worst domain's share of the max-flow out of it, and the worst path's latency);
  a type pair some of whose domains have no path to the others gets bandwidth 0, so its TTFT is infinite and the
  pairing is never planned (a cluster of one scale-up domain keeps the cards' scale-out figures);
- without a graph, at the slower scale-out link of the two accelerators (``requests.kv_link_bytes_per_s``).

The decode accelerator is kept as a *partner* spec carrying that link (named ``<type>:kv``, so that
``requests.shares_domain`` never prices it inside one domain, should it be handed to ``requests`` as a decode
accelerator); the link is ``requests.kv_link_bytes_per_s(prefill, partner, False)`` (``link``), the same in the
candidates, the oracle, the queue (``queueing.prefill_classes``) and the re-evaluation.

A model with a draft (``gamma_max`` > 0) prefills it in every prefill instance (``prefill_draft``) and sends its KV
cache with the target's, so that any of its decode instances can draft: an engine's disaggregated deployment runs
one speculative configuration per model.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from roofline_opt import topology
from roofline_opt.optimize.pairing import prefill_layout
from roofline_opt.optimize.space import Layouts, Question
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics import queueing
from roofline_opt.physics import requests as rq
from roofline_opt.physics.specs import GpuSpec

PARTNER_SUFFIX = ":kv"


def kv_partner(prefill: GpuSpec, decode: GpuSpec, cluster=None) -> GpuSpec:
    """The decode accelerator as the KV transfer from ``prefill`` sees it (module docstring)."""
    partner = dataclasses.replace(decode, name=decode.name + PARTNER_SUFFIX)
    if cluster is None:
        return partner
    ids = topology.gpu_ids(cluster, prefill.name) + topology.gpu_ids(cluster, decode.name)
    f = topology.collective_figures(cluster, list(dict.fromkeys(ids)))
    if f.inter_link_bytes_per_s is None:  # one scale-up domain: no scale-out path, the card's figures stand
        return partner
    # GpuSpec figures are all-reduce ones, half a direction (topology.effective_gpu)
    return dataclasses.replace(
        partner,
        inter_bytes_per_s=0.5 * f.inter_link_bytes_per_s,
        inter_hop_latency_s=f.inter_latency_s or 0.0,
    )


def link(prefill: GpuSpec, partner: GpuSpec) -> tuple[float, float]:
    """KV link bytes/s per GPU and hop latency (s) from ``prefill`` to its partner, as ``requests`` prices it."""
    hop = max(prefill.inter_hop_latency_s, partner.inter_hop_latency_s)
    return rq.kv_link_bytes_per_s(prefill, partner, False), hop


def prefill_draft(question: Question):
    """The draft a model's prefill instances prefill too (module docstring), None without one."""
    return question.draft if question.draft is not None and question.gamma_max > 0 else None


def prefill_points(question: Question, gi: int, bits: int, lay: Layouts, idx, batch, partner: GpuSpec) -> dict:
    """Exact figures of prefill layouts ``idx`` at ``batch`` sending to ``partner``: requests/s, TTFT of an idle
    pool (service + KV transfer, the longest class), fits_in_memory (``requests.prefill_figures``; the draft too
    where ``prefill_draft``)."""
    gpu = question.gpus[gi]
    bandwidth, hop = link(gpu, partner)
    return rq.prefill_figures(
        question.model,
        gpu,
        question.preset_on(gpu),
        bits,
        prefill_layout(lay, idx),
        batch,
        question.whole_requests,
        bandwidth,
        hop,
        prefill_draft(question),
    )


def prefill_layout_of(tp: int, tp_2d: bool, pp: int, kv_bits: int) -> ev.Layout:
    """The evaluator's layout of one prefill instance."""
    return ev.Layout.of(tp, tp_2d, pp, 0.0, 1.0, 1.0, kv_bits)


def percentile_ttft_s(
    question: Question, gpu: GpuSpec, bits: int, layout: ev.Layout, partner: GpuSpec, instances, rate_req_s: float
) -> np.ndarray:
    """TTFT at the question's percentile (``slo_percentile``, arrivals of c_a^2 ``arrival_scv``) of ``instances``
    prefill instances (prefill batch 1; one or an array of counts) taking ``rate_req_s``: service and TTFT once
    served per class from ``queueing.prefill_classes`` over the KV link to ``partner``, then
    ``queueing.percentile_ttft_s``; inf where the pool cannot keep up."""
    assert question.slo_percentile is not None  # only pools with a percentile limit are queued
    w = question.whole_requests
    bandwidth, hop = link(gpu, partner)
    service, ttft0 = queueing.prefill_classes(
        question.model, gpu, question.preset_on(gpu), bits, layout, w, bandwidth, hop, prefill_draft(question)
    )
    rate = max(rate_req_s, 1e-12)
    return queueing.percentile_ttft_s(
        question.slo_percentile, w._w(), service, ttft0, rate, np.asarray(instances), question.arrival_scv
    )
