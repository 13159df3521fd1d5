"""Disaggregated serving: prefill partners of decode layouts, from the evaluator, reduced to those that can be optimal.

A *prefill option* is a prefill layout at its best batch, the KV link it sends over (to which decode accelerator, in
one scale-up domain or across), and the instance counts (x prefill, y decode). For a fixed prefill layout a larger
batch serves more requests/s (b / T_pre(b) never falls: every step term has a non-negative intercept and slope) and
costs the same per hour, so the best batch is the largest that fits in memory and meets the TTFT limit; it is found
by bisection on the exact evaluator. The enumeration oracle does not rely on this: it evaluates every prefill batch.

A unit of x prefill and y decode instances serves min(x r_p, y r_d) requests/s for x K_p + y K_d dollars/s, so its cost
per output token is max((x/y K_p + K_d) tau / B, (x K_p + y K_d) / (x r_p) / O) over the utilisation cap: the MIP's
per-choice cost coefficient and cost floor. An option is dropped when another with the same key is no worse in every
criterion that enters the cost or the limits (``_criteria``), which cannot change any optimum.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from roofline_opt.optimize.space import Layouts, Question, prefill_layouts
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics import queueing as qm
from roofline_opt.physics import requests as rq


@dataclass(frozen=True)
class PrefillOptions:
    """One row per prefill option (see the module docstring); ``layouts`` are the prefill layouts indexed."""

    layouts: Layouts
    layout: np.ndarray
    batch: np.ndarray
    x: np.ndarray
    y: np.ndarray
    requests_per_s: np.ndarray
    ttft_s: np.ndarray
    usd_per_s: np.ndarray
    n_gpus: np.ndarray
    decode_gpu: np.ndarray
    same_domain: np.ndarray

    def __len__(self) -> int:
        return len(self.layout)

    def take(self, rows) -> PrefillOptions:
        kept = {f: getattr(self, f)[rows] for f in self.__dataclass_fields__ if f != "layouts"}
        return PrefillOptions(layouts=self.layouts, **kept)


def prefill_layout(lay: Layouts, idx: np.ndarray) -> ev.Layout:
    return ev.Layout.of(lay.tp[idx], lay.tp_2d[idx], lay.pp[idx], 0.0, 1.0, 1.0, lay.kv_bits[idx])


def link_of(question: Question, prefill_gpu: int, decode_gpu: int, same: bool) -> tuple[float, float]:
    """KV link bandwidth per GPU and hop latency between a prefill and a decode accelerator."""
    p, d = question.gpus[prefill_gpu], question.gpus[decode_gpu]
    hop = p.intra_hop_latency_s if same else max(p.inter_hop_latency_s, d.inter_hop_latency_s)
    return rq.kv_link_bytes_per_s(p, d, same), hop


def prefill_points(question: Question, lay: Layouts, idx: np.ndarray, gpu: int, bits: int, batch, decode_gpu, same):
    """Exact prefill figures of layouts idx (one accelerator and precision) at the given batches; layouts with gamma 1
    prefill the question's draft too."""
    link, hop = link_of(question, gpu, decode_gpu, same)
    args = (question.gpus[gpu], question.preset_on(question.gpus[gpu]), bits, prefill_layout(lay, idx), batch)
    plain = rq.prefill_figures(question.model, *args, question.whole_requests, link, hop)
    drafts = lay.gamma[idx] > 0
    if question.draft is None or not np.any(drafts):
        return plain
    both = rq.prefill_figures(question.model, *args, question.whole_requests, link, hop, question.draft)
    return {k: np.where(drafts, both[k], plain[k]) for k in plain}


def _admissible(question: Question, figures) -> np.ndarray:
    ok = np.asarray(figures["fits_in_memory"], dtype=bool)
    if question.max_ttft_s is not None:
        ok = ok & (figures["ttft_s"] <= question.max_ttft_s * (1 + 1e-12))
    return ok


def slo_requests_per_s(question: Question, lay: Layouts, idx, gpu: int, bits: int, decode_gpu: int, same, x):
    """Requests/s per prefill instance (batch 1) of layouts idx when x of them take the requests and the TTFT
    percentile must stay within the limit (``queueing.prefill_slo_rate_per_s`` over the pair's KV link)."""
    assert question.slo_percentile is not None and question.max_ttft_s is not None
    link, hop = link_of(question, gpu, decode_gpu, same)
    p_gpu = question.gpus[gpu]
    args = (question.slo_percentile, question.max_ttft_s, question.model, p_gpu, question.preset_on(p_gpu), bits)
    rest = (prefill_layout(lay, idx), question.whole_requests, x, link, hop, question.arrival_scv)
    rate = qm.prefill_slo_rate_per_s(*args, *rest)
    drafts = lay.gamma[idx] > 0
    if question.draft is not None and np.any(drafts):
        both = qm.prefill_slo_rate_per_s(*args, *rest, question.draft)
        rate = np.where(drafts, both, rate)  # layouts with gamma 1 prefill the draft too
    return rate / x


def _best_batch(question: Question, lay: Layouts, idx, gpu, bits, decode_gpu, same) -> np.ndarray:
    """Largest batch in [pp, max_batch] that fits and meets the TTFT limit (pp - 1 where none does); with a TTFT
    percentile, batch 1 where it fits (the queueing model's prefill instance serves one prompt at a time)."""
    lo = lay.pp[idx].astype(float)
    if question.queued_ttft:
        fits = np.asarray(prefill_points(question, lay, idx, gpu, bits, 1.0, decode_gpu, same)["fits_in_memory"])
        return np.where(fits & (lo <= 1.0), 1.0, lo - 1.0)
    hi = np.full(len(idx), float(question.max_batch))
    start = lo.copy()
    while np.any(lo <= hi):
        mid = np.floor((lo + hi) / 2.0)
        ok = _admissible(
            question, prefill_points(question, lay, idx, gpu, bits, np.maximum(mid, 1.0), decode_gpu, same)
        )
        lo = np.where(ok & (lo <= hi), mid + 1.0, lo)
        hi = np.where(~ok & (lo <= hi), mid - 1.0, hi)
    return np.maximum(hi, start - 1.0)


def build_options(question: Question) -> PrefillOptions:
    """Every useful prefill option of the question (empty without disaggregated serving)."""
    lay = prefill_layouts(question)
    cols: dict[str, list] = {f: [] for f in PrefillOptions.__dataclass_fields__ if f != "layouts"}
    decode_gpus = [g for g in range(len(question.gpus)) if question.offers(rq.DISAGG, g)]
    for gpu, bits, pos in lay.groups():
        for d in decode_gpus:
            same_type = question.gpus[gpu].name == question.gpus[d].name
            for same in (False, True) if same_type else (False,):
                b = _best_batch(question, lay, pos, gpu, bits, d, same)
                ok = b >= lay.pp[pos]
                if same:
                    ok &= lay.n_gpus[pos] < question.gpus[gpu].scaleup_gpus
                idx, b = pos[ok], b[ok]
                if not len(idx):
                    continue
                fig = prefill_points(question, lay, idx, gpu, bits, b, d, same)
                price = question.gpus[gpu].usd_per_s
                xs = np.unique([x for x, _ in question.ratios])
                if question.queued_ttft:
                    at_slo = dict(
                        zip(xs, slo_requests_per_s(question, lay, idx, gpu, bits, d, same, xs[:, None]), strict=True)
                    )
                for x, y in question.ratios:
                    rate = fig["requests_per_s"]
                    keep = np.ones(len(idx), dtype=bool)
                    if question.queued_ttft:
                        rate = at_slo[x]
                        keep = rate > 0.0
                    cols["layout"].append(idx[keep])
                    cols["batch"].append(b[keep])
                    cols["x"].append(np.full(int(keep.sum()), x))
                    cols["y"].append(np.full(int(keep.sum()), y))
                    cols["requests_per_s"].append(np.broadcast_to(rate, keep.shape)[keep])
                    cols["ttft_s"].append(fig["ttft_s"][keep])
                    cols["usd_per_s"].append((lay.n_gpus[idx] * price)[keep])
                    cols["n_gpus"].append(lay.n_gpus[idx][keep])
                    cols["decode_gpu"].append(np.full(int(keep.sum()), d))
                    cols["same_domain"].append(np.full(int(keep.sum()), same))
    types = {"layout": int, "x": int, "y": int, "n_gpus": int, "decode_gpu": int, "same_domain": bool}
    arrays = {k: np.concatenate(v) if v else np.zeros(0, dtype=types.get(k, float)) for k, v in cols.items()}
    options = PrefillOptions(layouts=lay, **arrays)
    return options.take(_undominated(question, options))


def _limited(question: Question) -> bool:
    return question.max_gpus is not None or question.instance_limit is not None or question.demand_tok_s is not None


def _criteria(question: Question, o: PrefillOptions) -> np.ndarray:
    """Smaller-is-better figures of each option: x/y K_p, K_p / r_p, y / (x r_p); with limits also x, N_p, -x r_p."""
    ratio = o.x / o.y
    cols = [ratio * o.usd_per_s, o.usd_per_s / o.requests_per_s, 1.0 / (ratio * o.requests_per_s)]
    if _limited(question):
        cols += [o.x.astype(float), o.n_gpus.astype(float), -o.x * o.requests_per_s]
    return np.column_stack(cols)


def _keys(question: Question, o: PrefillOptions) -> np.ndarray:
    """Options compete only within a key: decode accelerator, link, precisions (and more under limits)."""
    lay = o.layouts
    cols = [o.decode_gpu, o.same_domain, lay.weight_bits[o.layout], lay.kv_bits[o.layout], lay.gamma[o.layout] > 0]
    cols.append(np.where(o.same_domain, o.n_gpus, 0))
    if _limited(question):
        cols.append(o.y)
    if question.instance_limit is not None:
        cols += [lay.gpu_index[o.layout], lay.tp[o.layout], lay.pp[o.layout]]
    return np.column_stack(cols)


def _undominated(question: Question, o: PrefillOptions) -> np.ndarray:
    """Indices of options no other option of the same key dominates (of equal ones, the first is kept).

    Skyline scan: in lexicographic order a dominating option comes first, and a dominated option is dominated by a
    kept one (dominance is transitive), so each option is compared with the kept options of its key only.
    """
    if not len(o):
        return np.zeros(0, dtype=int)
    crit, keys = _criteria(question, o), _keys(question, o)
    kept = []
    _, group_of = np.unique(keys, axis=0, return_inverse=True)
    group_of = group_of.reshape(-1)
    for g in np.unique(group_of):
        members = np.flatnonzero(group_of == g)
        c = crit[members]
        order = np.lexsort(c.T[::-1])
        front: list[int] = []
        for i in order:
            if front:
                f = c[front]
                if np.any(np.all(f <= c[i] * (1 + 1e-12) + 1e-300, axis=1)):
                    continue
            front.append(int(i))
        kept.append(members[front])
    return np.sort(np.concatenate(kept))


def matches(question: Question, options: PrefillOptions, dec: Layouts, j: int) -> np.ndarray:
    """Options that can pair with decode layout j: its accelerator, precisions, and the link their sizes imply."""
    lay = options.layouts
    d_gpu = int(dec.gpu_index[j])
    p_gpu = lay.gpu_index[options.layout]
    same_type = np.array([question.gpus[g].name == question.gpus[d_gpu].name for g in p_gpu], dtype=bool)
    room = options.n_gpus + dec.n_gpus[j] <= np.array([question.gpus[g].scaleup_gpus for g in p_gpu])
    return np.flatnonzero(
        (options.decode_gpu == d_gpu)
        & (lay.weight_bits[options.layout] == dec.weight_bits[j])
        & (lay.kv_bits[options.layout] == dec.kv_bits[j])
        & ((lay.gamma[options.layout] > 0) == (dec.gamma[j] > 0))
        & (options.same_domain == (same_type & room))
    )


def unit_caps(question: Question, options: PrefillOptions, q: np.ndarray, dec: Layouts, j: np.ndarray) -> np.ndarray:
    """Disaggregated units (x prefill + y decode instances) the GPU limit and the cluster allow: each side's shape must
    be placeable x (y) times per unit, and one accelerator type serving both sides must hold both."""
    lay = options.layouts
    pl = options.layout[q]
    x, y = options.x[q], options.y[q]
    caps = np.full(len(q), 1 << 30, dtype=int)
    if question.max_gpus is not None:
        caps = question.max_gpus // (x * lay.n_gpus[pl] + y * dec.n_gpus[j])
    if question.instance_limit is not None:
        for shapes, count in (
            (np.column_stack([lay.gpu_index[pl], lay.tp[pl], lay.pp[pl]]), x),
            (np.column_stack([dec.gpu_index[j], dec.tp[j], dec.pp[j]]), y),
        ):
            unique, where = np.unique(shapes, axis=0, return_inverse=True)
            limits = np.array([question.instance_limit(question.gpus[g], int(t), int(p)) for g, t, p in unique])
            caps = np.minimum(caps, limits[where.reshape(-1)] // count)
        same = lay.gpu_index[pl] == dec.gpu_index[j]
        if same.any():
            gpus = x * lay.n_gpus[pl] + y * dec.n_gpus[j]
            of_type = np.array([question.instance_limit(question.gpus[g], 1, 1) for g in range(len(question.gpus))])
            caps = np.where(same, np.minimum(caps, of_type[dec.gpu_index[j]] // gpus), caps)
    return caps


def unit_usd_per_mtok(question: Question, options: PrefillOptions, q, decode_usd_per_s):
    """Cost coefficient per (tau / B) and cost floor, in $/Mtok: see the module docstring."""
    u = question.max_utilisation
    ratio = options.x[q] / options.y[q]
    per_decode = ratio * options.usd_per_s[q] + decode_usd_per_s
    floor = 1e6 * per_decode / (ratio * options.requests_per_s[q] * question.whole_requests.mean_osl) / u
    return 1e6 * per_decode / u, floor
