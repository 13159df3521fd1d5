"""The discrete decision space of a deployment question, defined once for both the MIP and the enumeration oracle.

A *layout* fixes every discrete choice but the batch: accelerator, weight precision, KV-cache precision, tensor-parallel
degree and 1-D/2-D mode, pipeline degree, expert-parallel degree, data-parallel attention, draft length gamma and, for
questions about whole requests, the serving mode (aggregated or disaggregated) and the prefill chunk of aggregated
serving. With ``dp_attention`` a MoE model is also offered data-parallel attention with wide expert parallelism
(physics.md 10.5): for every EP degree G > 1 dividing the experts, one group of G GPUs (``tp`` = ``ep`` = G,
``pp`` = 1), EP beyond TP. The batch ranges over whole numbers from the pipeline degree (a microbatch holds at least
one sequence) up to ``max_batch``.
A disaggregated setup adds a *prefill layout* (accelerator, TP degree and mode, PP degree; same weight and KV
precision as its decode layout), the prefill batch, and the instance counts (x prefill, y decode) from ``ratios``.
Nothing here scores a point.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from roofline_opt.physics import evaluator as ev
from roofline_opt.physics.profiles import EngineProfile
from roofline_opt.physics.requests import AGG, DEFAULT_CHUNK_TOKENS, DISAGG, Workload, coprime_ratios
from roofline_opt.physics.specs import DEFAULT, GpuSpec, ModelSpec, Preset

DEFAULT_TP_DEGREES = (1, 2, 4, 8, 16, 32, 64)
DEFAULT_PP_DEGREES = (1, 2, 4, 8)
DEFAULT_TP_MODES = ("1d",)
"""Tensor-parallel modes offered unless asked: 1-D only. 2-D tensor parallelism is offered on request (``tp_modes``
``("1d", "2d")``) and marked as not shipped: vLLM, SGLang and TensorRT-LLM split a layer's weights along one axis
only, so an answer in 2-D cannot be launched on them (``roofline_opt.deploy`` says so)."""
DEFAULT_MAX_BATCH = 4096
DEFAULT_CONTEXT = 8000
DEFAULT_ACCEPTANCE = ev.DEFAULT_ACCEPTANCE
DEFAULT_PRESET = "default"
DEFAULT_MAX_UTILISATION = 1.0
"""Busy instances, as the paper prices them."""
DEFAULT_METHOD = "mip"
"""HiGHS on the MIP (``"enumerate"``: the brute-force oracle over the same space)."""
DEFAULT_MIP_GAP = 1e-6
"""HiGHS relative MIP gap of a question's solves."""
DEFAULT_FLEET_MIP_GAP = 1e-4
"""HiGHS relative MIP gap of a fleet plan (a larger model: replicas, placement and periods)."""
DEFAULT_POINTS = 50
"""Budgets a frontier sweeps."""
DEFAULT_UTILITY_EXPONENT = 4.0
"""The preferred point maximises speed^a / price with a = 4, as in the paper."""
TARGET_RTOL = 1e-9
"""Relative slack on a target, so a setup exactly at the target is not lost to rounding. Whether a setup meets a
target is decided by ``within_budget`` and ``meets_speed`` on its exact figures, the same test in the MIP and the
oracle (the MIP's own bounds are looser, ``SCREEN_RTOL``, and never decide)."""
SCREEN_RTOL = 1e-12
"""Extra slack of the MIP's target-tightened batch ranges beyond TARGET_RTOL: the tables' coefficients round
differently from the evaluator, so a setup exactly at the target must stay inside the MIP; the exact test then
accepts or rejects it."""


def within_budget(usd_per_mtok, max_usd_per_mtok: float):
    """Whether a cost meets a budget: the one test both methods apply to exact figures (elementwise on arrays)."""
    return usd_per_mtok <= max_usd_per_mtok * (1 + TARGET_RTOL)


def meets_speed(tok_s_per_request, min_tok_s: float):
    """Whether a speed meets a target: the one test both methods apply to exact figures (elementwise on arrays)."""
    return tok_s_per_request >= min_tok_s * (1 - TARGET_RTOL)


MAX_GAMMA = 64
"""Longest draft (gamma) offered or evaluated."""
MOE_EP_DEGREES = (8, 16, 32, 64)
"""Expert-parallel degrees (beside 1) a MoE model is offered by default, each dividing its expert count; with data-
parallel attention, also groups of that many GPUs (how DeepSeek-V3/R1 and Qwen3 MoE are served today)."""
DEFAULT_DRAFT_GAMMA_MAX = 4
"""Longest draft offered when a draft model is given without gamma_max (the solver still chooses 0..4): a draft
named without a length would otherwise do nothing."""
MAX_BATCH_LIMIT = 1 << 20
"""Largest batch, in sequences per instance."""
MAX_DEGREE = 1 << 16
"""Largest tensor-, pipeline- or expert-parallel degree (GPUs in one instance)."""
MAX_CONTEXT = 1 << 27
"""Most tokens of context in the KV cache (134M)."""
MAX_CHOICES = 64
"""Most values one list flag may offer (--tp-degrees, --pp-degrees, --ep-degrees, --gpu)."""
MAX_DEMAND_TOK_S = 1e12
"""Largest total demand in tokens/s (a thousand times the world's inference traffic)."""
MAX_TOKENS_PER_STEP = 1 << 16
"""Most tokens per sequence in one step."""
MAX_POINTS = 1000
"""Most budgets a frontier sweeps."""
MAX_UTILITY_EXPONENT = 64.0
"""Largest exponent a of the preferred point's speed^a / price."""
DEFAULT_MAX_INSTANCES = 4
"""Largest number of prefill (x) or decode (y) instances in one disaggregated unit (xPyD, in lowest terms)."""

InstanceLimit = Callable[[GpuSpec, int, int], int]
"""How many disjoint instances of (accelerator, tp, pp) fit at once (a cluster's placement rule)."""


def graph_fingerprint(graph: Any) -> str:
    """A SHA-256 digest of a cluster graph's attributes, nodes and links with theirs, in the graph's order: the same
    file read twice gives the same digest; any edit a different one (an equal graph listed in another order only
    misses the cache)."""
    import hashlib

    known = _FINGERPRINTS.get(graph)
    size = (graph.number_of_nodes(), graph.number_of_edges())
    if known is not None and known[0] == size:
        return known[1]
    digest = hashlib.sha256(repr(sorted(graph.graph.items(), key=str)).encode())
    digest.update(repr(list(graph.nodes(data=True))).encode())
    digest.update(repr(list(graph.edges(data=True))).encode())
    _FINGERPRINTS[graph] = (size, digest.hexdigest())
    return digest.hexdigest()


_FINGERPRINTS: weakref.WeakKeyDictionary[Any, tuple[tuple[int, int], str]] = weakref.WeakKeyDictionary()
"""Digests of the graphs in use, so that the questions of one graph (a fleet's models, a study's) hash it once (0.8 s
for a 16,000-GPU pod on 2 busy cores): clusters are validated and not edited once loaded."""


@dataclass(frozen=True)
class Question:
    """Everything a query fixes except its target: model, choices offered, physics and limits."""

    model: ModelSpec
    gpus: tuple[GpuSpec, ...]
    weight_bits: tuple[int, ...] = (16,)
    tp_degrees: tuple[int, ...] = DEFAULT_TP_DEGREES
    tp_modes: tuple[bool, ...] = tuple(mode == "2d" for mode in DEFAULT_TP_MODES)
    """2-D mode offered (True) or 1-D (False); 1-D only by default (DEFAULT_TP_MODES)."""
    pp_degrees: tuple[int, ...] = DEFAULT_PP_DEGREES
    ep_degrees: tuple[int, ...] = (1,)
    dp_attention: bool = False
    max_batch: int = DEFAULT_MAX_BATCH
    context: float = DEFAULT_CONTEXT
    """Tokens in the KV cache while decoding (I + O / 2 by default for whole requests, so not always whole)."""
    draft: ModelSpec | None = None
    acceptance: float = DEFAULT_ACCEPTANCE
    gamma_max: int = 0
    preset: Preset = DEFAULT
    max_gpus: int | None = None
    demand_tok_s: float | None = None
    instance_limit: InstanceLimit | None = field(default=None, compare=False)
    cluster_name: str | None = None
    cluster: Any = field(default=None, compare=False, repr=False)
    cluster_fingerprint: str | None = field(default=None, init=False, repr=False)
    """A digest of ``cluster`` (its nodes, links and their attributes), set from it: part of the question's equality,
    so tables cached by question are never those of another graph (an edited cluster file of the same name)."""
    kv_bits: tuple[int, ...] = (16,)
    workload: Workload | None = None
    serving: tuple[str, ...] = (AGG,)
    chunk_tokens: tuple[int, ...] = (DEFAULT_CHUNK_TOKENS,)
    max_ttft_s: float | None = None
    max_tpot_s: float | None = None
    max_utilisation: float = 1.0
    max_instances: int = DEFAULT_MAX_INSTANCES
    agg_gpu_index: tuple[int, ...] | None = None
    prefill_gpu_index: tuple[int, ...] | None = None
    decode_gpu_index: tuple[int, ...] | None = None
    """Indices into ``gpus`` offered for aggregated instances, prefill instances and decode instances (None: all)."""
    slo_percentile: float | None = None
    """Percentile of requests (50, 90 or 99) that ``max_ttft_s`` and ``max_tpot_s`` hold for at load, requests
    arriving with gaps of squared coefficient of variation ``arrival_scv`` (physics/queueing.py,
    physics/tpot_percentiles.py); None: TTFT is the service time at no load and TPOT the steady-state TPOT at the
    mean batch."""
    arrival_scv: float = 1.0
    """c_a^2 of the gaps between arrivals (1 Poisson, > 1 bursty), with ``slo_percentile``."""

    @property
    def queued_ttft(self) -> bool:
        """Whether TTFT is limited at a percentile under load (the queueing model) rather than as a service time."""
        return self.slo_percentile is not None and self.max_ttft_s is not None and self.workload is not None

    @property
    def queued_tpot(self) -> bool:
        """Whether TPOT is limited at a percentile under load (a batch cap in the tables) rather than as the
        steady-state TPOT (a speed the answers must reach)."""
        return self.slo_percentile is not None and self.max_tpot_s is not None and self.workload is not None

    @property
    def min_tok_s_per_request(self) -> float | None:
        """The speed per request a steady-state TPOT limit implies (None without one, or when the limit holds at a
        percentile instead)."""
        return None if self.max_tpot_s is None or self.queued_tpot else 1.0 / self.max_tpot_s

    profile: EngineProfile | None = None
    """The engine profile whose per-accelerator presets price every figure (None: ``preset`` on every accelerator)."""

    def __post_init__(self) -> None:
        digest = None if self.cluster is None else graph_fingerprint(self.cluster)
        object.__setattr__(self, "cluster_fingerprint", digest)

    def preset_on(self, gpu: GpuSpec) -> Preset:
        """The physics of this question on one accelerator: the profile's preset for it, else ``preset``."""
        return self.preset if self.profile is None else self.profile.preset_for(gpu)

    @property
    def whole_requests(self) -> Workload:
        """``workload``, where only questions about whole requests lead (the code paths of prefill, TTFT, serving)."""
        if self.workload is None:
            raise ValueError("a question about one decode step has no whole requests (workload)")
        return self.workload

    @property
    def gammas(self) -> tuple[int, ...]:
        return tuple(range(self.gamma_max + 1)) if self.draft is not None else (0,)

    @property
    def ratios(self) -> tuple[tuple[int, int], ...]:
        """(x prefill, y decode) instance counts of a disaggregated unit, in lowest terms."""
        return coprime_ratios(self.max_instances)

    def offers(self, role: str, gpu_index: int) -> bool:
        """Whether accelerator ``gpu_index`` may serve ``role`` (agg, prefill or decode)."""
        allowed = {AGG: self.agg_gpu_index, "prefill": self.prefill_gpu_index, DISAGG: self.decode_gpu_index}[role]
        return allowed is None or gpu_index in allowed


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
    kv_bits: np.ndarray
    disagg: np.ndarray
    chunk: np.ndarray
    dp_attention: np.ndarray

    def __len__(self) -> int:
        return len(self.tp)

    def take(self, mask: np.ndarray) -> Layouts:
        return Layouts(*(getattr(self, f)[mask] for f in self.__dataclass_fields__))

    @property
    def n_gpus(self) -> np.ndarray:
        return self.tp * self.pp

    def layout(self, idx, context, tokens_per_step=1.0) -> ev.Layout:
        """The evaluator's Layout of the layouts at ``idx`` (any index shape)."""
        return ev.Layout.of(
            self.tp[idx],
            self.tp_2d[idx],
            self.pp[idx],
            context,
            tokens_per_step,
            self.ep[idx],
            kv_bits=self.kv_bits[idx],
            dp_attention=self.dp_attention[idx],
        )

    def groups(self, rows: np.ndarray | None = None) -> Iterator[tuple[int, int, np.ndarray]]:
        """(gpu index, weight bits, positions in rows) per accelerator/precision pair: the evaluator's unit of work.

        ``rows`` are layout indices (all layouts when None); positions index into it.
        """
        rows = np.arange(len(self)) if rows is None else np.asarray(rows, dtype=int)
        keys = self.gpu_index[rows] * 64 + self.weight_bits[rows]
        for key in np.unique(keys):
            yield int(key // 64), int(key % 64), np.flatnonzero(keys == key)


_COLUMN_TYPES = (int, int, int, bool, int, int, int, int, bool, int, bool)


def _layouts_of(rows: list[tuple]) -> Layouts:
    if not rows:
        return Layouts(*(np.zeros(0, dtype=t) for t in _COLUMN_TYPES))
    cols = list(zip(*rows, strict=True))
    return Layouts(*(np.array(c, dtype=t) for c, t in zip(cols, _COLUMN_TYPES, strict=True)))


def _shapes(
    question: Question, ep_degrees: tuple[int, ...], preset: Preset
) -> Iterator[tuple[int, bool, int, int, bool]]:
    """(tp, 2-D, pp, ep, data-parallel attention) combinations offered: 2-D mode only for tp > 1, ep dividing tp and
    the expert count, tp dividing the query heads where ``preset`` requires it; with ``dp_attention``, a group of G
    GPUs per EP degree G > 1 dividing the experts."""
    for tp in question.tp_degrees:
        if preset.tp_divides_attention_heads and not question.model.tp_splits_heads(tp):
            continue
        for two_d in question.tp_modes:
            if two_d and tp == 1:
                continue
            for pp in question.pp_degrees:
                if pp > question.max_batch:
                    continue
                for ep in ep_degrees:
                    if ep > 1 and (tp % ep or question.model.n_experts % ep):
                        continue
                    yield tp, two_d, pp, ep, False
    if question.dp_attention and question.model.is_moe:
        for group in ep_degrees:
            if group > 1 and question.model.n_experts % group == 0:
                yield group, False, 1, group, True


def layouts(question: Question) -> Layouts:
    """Every admissible decode (or aggregated) layout: the discrete choices of the instance that generates tokens."""
    rows = []
    modes = question.serving if question.workload is not None else (AGG,)
    for g, gpu in enumerate(question.gpus):
        for bits in question.weight_bits:
            if not gpu.supports(bits):
                continue
            for kv in question.kv_bits:
                for mode in modes:
                    if not question.offers(mode, g):
                        continue
                    chunks = question.chunk_tokens if mode == AGG and question.workload is not None else (0,)
                    for chunk in chunks:
                        for tp, two_d, pp, ep, dp in _shapes(question, question.ep_degrees, question.preset_on(gpu)):
                            for gamma in question.gammas:
                                rows.append((g, bits, tp, two_d, pp, ep, gamma, kv, mode == DISAGG, chunk, dp))
    return _layouts_of(rows)


def prefill_layouts(question: Question) -> Layouts:
    """Every admissible prefill layout of disaggregated serving (no expert parallelism); with a draft model, each
    twice: gamma 0 (target only) and gamma 1 (it prefills the draft too, the partner of drafting decode layouts)."""
    if question.workload is None or DISAGG not in question.serving:
        return _layouts_of([])
    rows = []
    for g, gpu in enumerate(question.gpus):
        if not question.offers("prefill", g):
            continue
        for bits in question.weight_bits:
            if not gpu.supports(bits):
                continue
            for kv in question.kv_bits:
                for tp, two_d, pp, ep, dp in _shapes(question, (1,), question.preset_on(gpu)):
                    for drafts in (0, 1) if question.draft is not None and question.gamma_max > 0 else (0,):
                        rows.append((g, bits, tp, two_d, pp, ep, drafts, kv, True, 0, dp))
    return _layouts_of(rows)


def replica_caps(question: Question, lay: Layouts, which: np.ndarray | None = None) -> np.ndarray:
    """max_replicas of every layout (or of the layouts ``which``)."""
    idx = np.arange(len(lay.tp)) if which is None else np.asarray(which, dtype=int)
    if not len(idx):
        return np.zeros(0, dtype=int)
    span = int(max(lay.tp.max(), lay.pp.max())) + 1
    keys, where = np.unique((lay.gpu_index[idx] * span + lay.tp[idx]) * span + lay.pp[idx], return_inverse=True)
    caps = [max_replicas(question, question.gpus[k // span // span], k // span % span, k % span) for k in keys.tolist()]
    return np.array(caps, dtype=int)[where.reshape(-1)]


def max_replicas(question: Question, gpu: GpuSpec, tp: int, pp: int) -> int:
    """Disjoint instances of this shape the GPU limit and the cluster allow (a large number when unlimited)."""
    limit = 1 << 30
    if question.max_gpus is not None:
        limit = question.max_gpus // (tp * pp)
    if question.instance_limit is not None:
        limit = min(limit, question.instance_limit(gpu, tp, pp))
    return limit
