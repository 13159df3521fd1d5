"""Public Python API: validated questions from names, fastest / cheapest / frontier as pandas objects, and plan.

``plan`` takes a fleet file (or the same structure as a dict; see the README section Fleet planning) and returns an
``optimize.fleet.FleetPlan`` (rows, model and cluster summaries, placement, solver report).

Shared parameters (documented once here):

model : catalog name (``llama-3-70b``, ``llama-3-70b-int8``), YAML card path, HF config.json, or a ModelSpec.
gpu : one name, a comma-separated string or a sequence of names/GpuSpecs; the solver chooses among them.
weight_bits : one precision or several (16, 8, 4); default the name's suffix, else the card's native_weight_bits.
tp_degrees, pp_degrees, ep_degrees : degrees offered; tp_modes : subset of ("1d", "2d"), default 1-D (2-D: on request);
    ep_degrees: see below.
dp_attention : also offer a MoE model data-parallel attention with wide expert parallelism, one group of G GPUs
    per EP degree G > 1 dividing the experts (EP beyond TP; physics.md 10.5). Defaults of a MoE model (None):
    optimize.space.default_ep_degrees and default_dp_attention (not under the paper preset, nor native precision).
max_batch : largest batch (sequences per instance); context : tokens already in the KV cache (default 8000).
draft, acceptance, gamma_max : speculative decoding with a draft model on the same GPUs (gamma 0..gamma_max;
    gamma_max defaults to DEFAULT_DRAFT_GAMMA_MAX = 4 with a draft, else 0).
preset : "default" (realistic) or "paper" (the reference notebook). max_gpus : GPUs available in all.
demand_tok_s : total tokens/s to serve; an instance may not out-serve it and replicas meet it.
cluster : a cluster file (GraphML, node-link JSON or YAML) or a catalog cluster name (``hgx-h100``).
usd_per_gpu_hour : price overrides for this question, ``"h100-sxm=2.5,h200=3.2"`` or a mapping name -> $/GPU-hour.
method : "mip" (HiGHS) or "enumerate" (brute force). time_limit_s, mip_gap : HiGHS options.
kv_bits : KV-cache precision(s) offered (16, 8, 4; default 16), independent of the weight precision.
engine : "vllm", "sglang" or "trtllm": that engine's packaged profile (efficiencies per accelerator family, memory
    settings, default chunk and KV precision, deployable layouts; docs/profiles/). profile : a profile name or YAML
    file (``calibrate`` writes one); it wins over ``engine``'s packaged profile (their engines must match). Neither:
    the preset alone (the neutral profile's physics).

Whole requests (physics.md 10.1-10.4; without them every figure is the paper's decode step at ``context``):
isl, osl : input and output tokens per request; the decode context is then I + O / 2 unless ``context`` is given.
workload : a CSV file with columns isl, osl, weight (request classes served by one deployment; every class must meet
    the limits), or a sequence of (isl, osl, weight) tuples. Excludes isl/osl.
serving : "agg", "disagg" or "agg,disagg" (the solver chooses). chunk_tokens : prefill tokens per step of aggregated
    serving, one or several (default 2048). ttft_ms : time-to-first-token limit in ms. tpot_ms : time-per-output-token
    limit in ms (the same limit as a speed of 1000 / tpot_ms tok/s per request).
prefill_gpu, decode_gpu : accelerators offered for prefill and decode instances of disaggregated serving (default:
    ``gpu``). max_instances : largest x and y of an xPyD unit (default 4). demand_req_s : requests/s to serve (instead
    of demand_tok_s, output tokens). max_utilisation : fraction of each instance's throughput used, in (0, 1] (default
    1.0: busy instances, as the paper prices them); prices rise and served rates fall by this factor.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from roofline_opt import catalog, checks, files
from roofline_opt.catalog.prices import parse_price_overrides, with_prices
from roofline_opt.errors import InvalidInput
from roofline_opt.optimize.offers import (
    default_ep_degrees,
    degrees,
    dp_attention_offered,
    ep_degrees_offered,
    modern_defaults,
    weight_bits_offered,
)
from roofline_opt.optimize.profile_offers import apply_profile, resolve_profile
from roofline_opt.optimize.queries import Prepared, SolverOptions, prepare, solve_prepared
from roofline_opt.optimize.queries import top_n as _top_n
from roofline_opt.optimize.results import Answer, Setup, reevaluate
from roofline_opt.optimize.space import (
    DEFAULT_ACCEPTANCE,
    DEFAULT_CONTEXT,
    DEFAULT_DRAFT_GAMMA_MAX,
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_INSTANCES,
    DEFAULT_PP_DEGREES,
    MAX_BATCH_LIMIT,
    MAX_CHOICES,
    MAX_CONTEXT,
    MAX_DEMAND_TOK_S,
    MAX_GAMMA,
    MAX_POINTS,
    MAX_UTILITY_EXPONENT,
    Question,
)
from roofline_opt.optimize.space import DEFAULT_TP_DEGREES as _TP
from roofline_opt.optimize.sweep import frontier_answers, is_monotone, preferred_index
from roofline_opt.physics import requests as rq
from roofline_opt.physics.evaluator import DEFAULT_KV_BITS, KV_BITS
from roofline_opt.physics.profiles import EngineProfile
from roofline_opt.physics.specs import PRESETS, WEIGHT_BITS, GpuSpec, ModelSpec

if TYPE_CHECKING:
    import pandas as pd  # imported where a pandas object is built: answering a question needs none

WORKLOAD_COLUMNS = ("isl", "osl", "weight")


def _model(model: str | ModelSpec, field: str = "model") -> tuple[ModelSpec, int | None]:
    if isinstance(model, ModelSpec):
        return model, None
    return catalog.resolve_model(model, field)


def _gpus(gpu: str | GpuSpec | Sequence[str | GpuSpec], field: str = "gpu") -> tuple[GpuSpec, ...]:
    if isinstance(gpu, GpuSpec):
        return (gpu,)
    names = checks.parse_name_list(field, gpu) if isinstance(gpu, str) else tuple(gpu)
    if len(names) > MAX_CHOICES:
        raise InvalidInput(field, f"must name at most {MAX_CHOICES} accelerators. Got {len(names):,} instead.")
    specs = tuple(g if isinstance(g, GpuSpec) else catalog.load_gpu(g, field) for g in names)
    if len({g.name for g in specs}) != len(specs):
        raise InvalidInput(field, f"must name each accelerator once. Got {', '.join(g.name for g in specs)} instead.")
    return specs


def _cluster(path: str, gpu) -> tuple[object, tuple[GpuSpec, ...], Callable[[GpuSpec, int, int], int]]:
    """A cluster graph, its accelerator types as effective specs (bandwidths from the graph) and its placement limit."""
    from roofline_opt import topology

    path = catalog.cluster_file(path)
    graph = topology.load_cluster(path, known_gpus={g.name for g in catalog.list_gpus()})
    types = sorted(topology.gpu_counts(graph))
    if gpu is not None:
        wanted = {g.name if isinstance(g, GpuSpec) else g for g in _gpus(gpu)}
        missing = wanted - set(types)
        if missing:
            got = ", ".join(sorted(missing))
            msg = f"must name accelerators the cluster has ({', '.join(types)}). Got {got} instead."
            raise InvalidInput("gpu", msg)
        types = [t for t in types if t in wanted]
    gpus = tuple(topology.effective_gpu(graph, t, catalog.load_gpu(t)) for t in types)

    limits = {t: topology.instance_limit(graph, t) for t in types}
    return graph, gpus, lambda g, tp, pp: limits[g.name](tp, pp)


def _with_placement(q: Question, answer: Answer) -> Answer:
    """Attach the GPU ids of every TP group and PP stage when the question runs on a cluster graph."""
    if q.cluster is None:
        return answer
    from roofline_opt import topology

    s = answer.setup
    if not s.disaggregated:
        placement = topology.place(q.cluster, s.gpu, s.tp, s.pp, s.replicas)
        return dataclasses.replace(answer, placement=placement.to_dict())
    if s.prefill_gpu == s.gpu:
        return answer  # one accelerator type for both sides: counted together, not placed instance by instance
    decode = topology.place(q.cluster, s.gpu, s.tp, s.pp, s.replicas * s.decode_instances)
    prefill = topology.place(q.cluster, s.prefill_gpu, s.prefill_tp, s.prefill_pp, s.replicas * s.prefill_instances)
    return dataclasses.replace(answer, placement={"decode": decode.to_dict(), "prefill": prefill.to_dict()})


def _modes(tp_modes) -> tuple[bool, ...]:
    raw = checks.parse_name_list("tp_modes", tp_modes) if isinstance(tp_modes, str) else tuple(tp_modes)
    return tuple(sorted({checks.choice("tp_modes", m, ("1d", "2d")) == "2d" for m in raw}))


def question(
    model: str | ModelSpec,
    gpu: str | GpuSpec | Sequence[str | GpuSpec] | None = None,
    *,
    weight_bits=None,
    tp_degrees=_TP,
    pp_degrees=DEFAULT_PP_DEGREES,
    tp_modes=None,
    ep_degrees=None,
    dp_attention: bool | None = None,
    max_batch: int = DEFAULT_MAX_BATCH,
    context: int | None = None,
    draft: str | ModelSpec | None = None,
    acceptance: float = DEFAULT_ACCEPTANCE,
    gamma_max: int | None = None,
    preset: str = "default",
    max_gpus: int | None = None,
    demand_tok_s: float | None = None,
    cluster: str | None = None,
    kv_bits=None,
    isl: int | None = None,
    osl: int | None = None,
    workload=None,
    serving=rq.AGG,
    chunk_tokens=None,
    ttft_ms: float | None = None,
    tpot_ms: float | None = None,
    prefill_gpu=None,
    decode_gpu=None,
    max_instances: int = DEFAULT_MAX_INSTANCES,
    demand_req_s: float | None = None,
    max_utilisation: float = 1.0,
    usd_per_gpu_hour: str | Mapping[str, float] | None = None,
    engine: str | None = None,
    profile: str | EngineProfile | None = None,
) -> Question:
    """A validated Question (see the module docstring for every parameter)."""
    engine_profile = resolve_profile(engine, profile, str(preset))
    prices = parse_price_overrides("usd_per_gpu_hour", usd_per_gpu_hour)
    spec, suffix_bits = _model(model)
    preset = checks.choice("preset", preset, PRESETS)
    native_bits = catalog.native_weight_bits(spec.name) if modern_defaults(preset) else None
    ep = ep_degrees_offered(spec, default_ep_degrees(spec, preset) if ep_degrees is None else ep_degrees)
    draft_spec = None if draft is None else _model(draft, "draft")[0]
    if gamma_max is None:
        gamma_max = 0 if draft_spec is None else DEFAULT_DRAFT_GAMMA_MAX
    gamma_max = checks.positive_int("gamma_max", gamma_max, minimum=0, maximum=MAX_GAMMA)
    if gamma_max > 0 and draft_spec is None:
        raise InvalidInput("gamma_max", "needs a draft model (--draft). Got no draft instead.")
    max_batch = checks.positive_int("max_batch", max_batch, maximum=MAX_BATCH_LIMIT)
    instance_limit, graph = None, None
    if cluster is not None:
        graph, gpus, instance_limit = _cluster(cluster, gpu)
    elif gpu is None:
        raise InvalidInput("gpu", "must name at least one accelerator (or give --cluster). Got none instead.")
    else:
        gpus = _gpus(gpu)
    gpus, roles = _roles(gpus, prefill_gpu, decode_gpu, cluster is not None)
    load = _workload(isl, osl, workload)
    modes = _serving(serving, load)
    if load is not None and draft_spec is not None:
        raise InvalidInput("draft", "cannot be combined with whole requests (--isl/--workload) yet. Drop one of them.")
    if load is None and ttft_ms is not None:
        raise InvalidInput("ttft_ms", "needs whole requests: give --isl and --osl or --workload")
    if demand_req_s is not None and demand_tok_s is not None:
        raise InvalidInput("demand_req_s", "excludes --demand-tok-s: give the demand in one unit")
    if demand_req_s is not None:
        if load is None:
            raise InvalidInput("demand_req_s", "needs whole requests: give --isl and --osl or --workload")
        demand_tok_s = checks.positive_float("demand_req_s", demand_req_s) * load.mean_osl
    decode_context: float  # I + O / 2 of whole requests need not be whole
    if context is None:
        decode_context = DEFAULT_CONTEXT if load is None else load.decode_context
    else:
        decode_context = checks.positive_int("context", context, minimum=0, maximum=MAX_CONTEXT)
    utilisation = checks.positive_float("max_utilisation", max_utilisation)
    if utilisation > 1.0:
        raise InvalidInput("max_utilisation", f"must be in (0, 1]. Got {max_utilisation!r} instead.")
    question = Question(
        model=spec,
        gpus=with_prices(gpus, prices, "usd_per_gpu_hour"),
        weight_bits=weight_bits_offered(weight_bits, suffix_bits, native_bits),
        tp_degrees=degrees("tp_degrees", tp_degrees),
        tp_modes=Question.tp_modes if tp_modes is None else _modes(tp_modes),
        pp_degrees=degrees("pp_degrees", pp_degrees),
        ep_degrees=ep,
        dp_attention=dp_attention_offered(spec, dp_attention, ep, preset),
        max_batch=max_batch,
        context=decode_context,
        draft=draft_spec,
        acceptance=checks.probability("acceptance", acceptance),
        gamma_max=gamma_max,
        preset=PRESETS[preset],
        max_gpus=None if max_gpus is None else checks.positive_int("max_gpus", max_gpus),
        demand_tok_s=None if demand_tok_s is None else _demand(demand_tok_s),
        instance_limit=instance_limit,
        cluster_name=None if cluster is None else str(cluster),
        cluster=graph,
        kv_bits=_choices("kv_bits", kv_bits, KV_BITS, (DEFAULT_KV_BITS,)),
        workload=load,
        serving=modes,
        chunk_tokens=degrees(
            "chunk_tokens", _listed(rq.DEFAULT_CHUNK_TOKENS if chunk_tokens is None else chunk_tokens)
        ),
        max_ttft_s=None if ttft_ms is None else checks.positive_float("ttft_ms", ttft_ms) / 1e3,
        max_tpot_s=None if tpot_ms is None else checks.positive_float("tpot_ms", tpot_ms) / 1e3,
        max_utilisation=utilisation,
        max_instances=checks.positive_int("max_instances", max_instances),
        **roles,
    )
    return apply_profile(
        question, engine_profile, kv_bits_given=kv_bits is not None, chunk_given=chunk_tokens is not None
    )


def _demand(demand_tok_s: float) -> float:
    return checks.positive_float("demand_tok_s", demand_tok_s, maximum=MAX_DEMAND_TOK_S)


def _listed(values):
    """A single number as a one-item tuple; text and sequences unchanged."""
    return (values,) if isinstance(values, int | float) and not isinstance(values, bool) else values


def _choices(field: str, values, allowed: tuple[int, ...], default: tuple[int, ...]) -> tuple[int, ...]:
    """One value or several (a list or "16,8") from ``allowed``."""
    if values is None:
        return default
    raw = checks.parse_int_list(field, values) if isinstance(values, str) else values
    items = (raw,) if isinstance(raw, int) else tuple(raw)
    if not items:
        raise InvalidInput(field, f"must list at least one of {', '.join(map(str, allowed))}. Got none instead.")
    return tuple(sorted({checks.choice(field, v, allowed) for v in items}, reverse=True))


def _roles(gpus, prefill_gpu, decode_gpu, on_cluster: bool):
    """All accelerators (the --gpu list, then any named only for prefill or decode) and each role's indices."""
    names = [g.name for g in gpus]
    roles: dict[str, tuple[int, ...] | None] = dict.fromkeys(("agg_gpu_index", "prefill_gpu_index", "decode_gpu_index"))
    if prefill_gpu is None and decode_gpu is None:
        return gpus, roles
    extra = list(gpus)
    for field, value in (("prefill_gpu", prefill_gpu), ("decode_gpu", decode_gpu)):
        if value is None:
            continue
        for spec in _gpus(value, field):
            if spec.name in names:
                continue
            if on_cluster:
                msg = f"must name accelerators the cluster has ({', '.join(names)}). Got {spec.name} instead."
                raise InvalidInput(field, msg)
            extra.append(spec)
            names.append(spec.name)
    main = tuple(range(len(gpus)))
    roles["agg_gpu_index"] = main
    for field, value in (("prefill_gpu", prefill_gpu), ("decode_gpu", decode_gpu)):
        wanted = main if value is None else tuple(names.index(g.name) for g in _gpus(value, field))
        roles[field + "_index"] = tuple(sorted(set(wanted)))
    return tuple(extra), roles


def _workload(isl, osl, workload) -> rq.Workload | None:
    """A single class from isl/osl, a mix from a CSV file or tuples, or None (decode only)."""
    if workload is not None:
        if isl is not None or osl is not None:
            raise InvalidInput("workload", "excludes --isl/--osl: give the lengths in the file")
        if isinstance(workload, rq.Workload):
            return workload
        rows = _workload_rows(workload)
        return rq.Workload(tuple(r[0] for r in rows), tuple(r[1] for r in rows), tuple(r[2] for r in rows))
    if isl is None and osl is None:
        return None
    if isl is None or osl is None:
        missing = "isl" if isl is None else "osl"
        raise InvalidInput(missing, "is required with the other request length (--isl and --osl go together)")
    isl = checks.positive_int("isl", isl, minimum=0, maximum=MAX_CONTEXT)
    return rq.Workload.single(isl, checks.positive_int("osl", osl, maximum=MAX_CONTEXT))


def _workload_rows(workload) -> list[tuple[int, int, float]]:
    if isinstance(workload, str | os.PathLike):
        path = Path(workload)
        frame = files.read_csv_cells(path, "workload", WORKLOAD_COLUMNS, "request class")
        cells = [(f"{path} line {n}", r) for n, r in enumerate(frame.to_dict("records"), start=2)]
    else:
        cells = [(f"workload row {n}", dict(zip(WORKLOAD_COLUMNS, r, strict=True))) for n, r in enumerate(workload)]
    return [
        (
            checks.positive_int(f"{where}: isl", row["isl"], minimum=0, maximum=MAX_CONTEXT),
            checks.positive_int(f"{where}: osl", row["osl"], maximum=MAX_CONTEXT),
            checks.positive_float(f"{where}: weight", row["weight"]),
        )
        for where, row in cells
    ]


def _serving(serving, load: rq.Workload | None) -> tuple[str, ...]:
    raw = checks.parse_name_list("serving", serving) if isinstance(serving, str) else tuple(serving)
    modes = tuple(m for m in rq.SERVING_MODES if m in {checks.choice("serving", v, rq.SERVING_MODES) for v in raw})
    if not modes:
        raise InvalidInput("serving", "must offer agg, disagg or both. Got none instead.")
    if rq.DISAGG in modes:
        if load is None:
            raise InvalidInput("serving", "disagg needs whole requests: give --isl and --osl or --workload")
        if min(load.isl) < 1:
            raise InvalidInput("serving", "disagg needs prompts of at least 1 token (every class's isl >= 1)")
    return modes


def _options(time_limit_s: float | None, mip_gap: float) -> SolverOptions:
    limit = None if time_limit_s is None else checks.positive_float("time_limit", time_limit_s)
    return SolverOptions(limit, checks.positive_float("mip_gap", mip_gap, allow_zero=True, maximum=1.0))


def fastest_answer(
    q: Question,
    max_usd_per_mtok: float | None = None,
    method: str = "mip",
    time_limit_s: float | None = None,
    mip_gap: float = 1e-6,
) -> Answer:
    """The fastest setup within the budget as an Answer (exact figures, solve report)."""
    return fastest_answers(q, max_usd_per_mtok, method, time_limit_s, mip_gap)[0]


def fastest_answers(
    q: Question,
    max_usd_per_mtok: float | None = None,
    method: str = "mip",
    time_limit_s: float | None = None,
    mip_gap: float = 1e-6,
    top_n: int = 1,
) -> list[Answer]:
    """The ``top_n`` fastest distinct layouts within the budget, each the best once those before it are excluded."""
    budget = None if max_usd_per_mtok is None else checks.positive_float("max_usd_per_mtok", max_usd_per_mtok)
    n = checks.positive_int("top_n", top_n)
    return [_with_placement(q, a) for a in _top_n(q, "fastest", budget, n, method, _options(time_limit_s, mip_gap))]


def cheapest_answer(
    q: Question,
    min_tok_s: float | None = None,
    method: str = "mip",
    time_limit_s: float | None = None,
    mip_gap: float = 1e-6,
) -> Answer:
    """The cheapest setup at or above the speed as an Answer."""
    return cheapest_answers(q, min_tok_s, method, time_limit_s, mip_gap)[0]


def cheapest_answers(
    q: Question,
    min_tok_s: float | None = None,
    method: str = "mip",
    time_limit_s: float | None = None,
    mip_gap: float = 1e-6,
    top_n: int = 1,
) -> list[Answer]:
    """The ``top_n`` cheapest distinct layouts at the speed, each the best once those before it are excluded."""
    speed = None if min_tok_s is None else checks.positive_float("min_tok_s", min_tok_s)
    n = checks.positive_int("top_n", top_n)
    return [_with_placement(q, a) for a in _top_n(q, "cheapest", speed, n, method, _options(time_limit_s, mip_gap))]


def fastest(
    model,
    gpu=None,
    max_usd_per_mtok: float | None = None,
    *,
    method: str = "mip",
    time_limit_s: float | None = None,
    mip_gap: float = 1e-6,
    **space,
) -> pd.Series:
    """Most tok/s per request for at most ``max_usd_per_mtok`` $/Mtok, as a Series of unit-named fields."""
    return answer_series(fastest_answer(question(model, gpu, **space), max_usd_per_mtok, method, time_limit_s, mip_gap))


def cheapest(
    model,
    gpu=None,
    min_tok_s: float | None = None,
    *,
    method: str = "mip",
    time_limit_s: float | None = None,
    mip_gap: float = 1e-6,
    **space,
) -> pd.Series:
    """Least $/Mtok at ``min_tok_s`` tok/s per request or faster, as a Series of unit-named fields."""
    return answer_series(cheapest_answer(question(model, gpu, **space), min_tok_s, method, time_limit_s, mip_gap))


def frontier_frame(
    q: Question,
    points: int = 50,
    utility_exponent: float = 4.0,
    time_limit_s: float | None = None,
    mip_gap: float = 1e-6,
    progress: Callable[[int, int], None] | None = None,
    method: str = "mip",
) -> pd.DataFrame:
    """The frontier of a Question as a DataFrame, cheapest first, with a boolean ``preferred`` column."""
    points = checks.positive_int("points", points, minimum=2, maximum=MAX_POINTS)
    exponent = checks.positive_float("utility_exponent", utility_exponent, maximum=MAX_UTILITY_EXPONENT)
    answers = frontier_answers(q, points, _options(time_limit_s, mip_gap), progress, method, exponent)
    frame = answers_frame(answers)
    frame["preferred"] = False
    frame.loc[preferred_index(frame, exponent), "preferred"] = True
    frame.attrs["monotone"] = is_monotone(frame)
    return frame


def frontier(
    model,
    gpu=None,
    points: int = 50,
    *,
    utility_exponent: float = 4.0,
    time_limit_s: float | None = None,
    mip_gap: float = 1e-6,
    progress: Callable[[int, int], None] | None = None,
    method: str = "mip",
    **space,
) -> pd.DataFrame:
    """Speed-vs-cost frontier: one row per distinct optimal setup from the cheapest to the fastest."""
    q = question(model, gpu, **space)
    return frontier_frame(q, points, utility_exponent, time_limit_s, mip_gap, progress, method)


TARGETS = {"fastest": "max_usd_per_mtok", "cheapest": "min_tok_s"}
"""The target parameter of each query kind that can re-solve one prepared model (a sweep along the target)."""


def prepared(q: Question, time_limit_s: float | None = None, mip_gap: float = 1e-6) -> Prepared:
    """A question's tables and persistent models, built once to answer it at many targets with ``target_answer``."""
    return prepare(q, _options(time_limit_s, mip_gap))


def target_answer(prep: Prepared, kind: str, target: float | None) -> Answer:
    """What ``fastest_answer`` (target $/Mtok) or ``cheapest_answer`` (target tok/s) returns with method "mip",
    from the prepared question's loaded model: only the target is pushed before the re-solve."""
    field = TARGETS[checks.choice("kind", kind, TARGETS)]
    value = None if target is None else checks.positive_float(field, target)
    return _with_placement(prep.question, solve_prepared(prep, kind, value))


def evaluate(
    model: str | ModelSpec,
    gpu: str | GpuSpec,
    tp: int,
    pp: int,
    batch: int,
    *,
    weight_bits: int | None = None,
    tp_2d: bool = False,
    ep: int = 1,
    context: int = DEFAULT_CONTEXT,
    draft: str | ModelSpec | None = None,
    gamma: int = 0,
    acceptance: float = DEFAULT_ACCEPTANCE,
    preset: str = "default",
    usd_per_gpu_hour: str | Mapping[str, float] | None = None,
    engine: str | None = None,
    profile: str | EngineProfile | None = None,
) -> pd.Series:
    """Every figure of one fully specified setup (``gamma`` draft tokens per step with ``draft``), as the same
    unit-named fields an answer of ``fastest``/``cheapest`` carries; the setup need not fit in memory
    (``fits_in_memory`` says whether it does)."""
    tp, pp, batch = (checks.positive_int(f, v) for f, v in (("tp", tp), ("pp", pp), ("batch", batch)))
    gamma = checks.positive_int("gamma", gamma, minimum=0)
    if gamma and draft is None:
        raise InvalidInput("gamma", f"needs a draft model (draft=...). Got {gamma} without one instead.")
    q = question(
        model,
        gpu,
        weight_bits=weight_bits,
        tp_degrees=(tp,),
        pp_degrees=(pp,),
        tp_modes=("2d" if tp_2d else "1d",),
        ep_degrees=(ep,),
        dp_attention=False,
        max_batch=max(batch, pp),
        context=context,
        draft=draft,
        acceptance=acceptance,
        gamma_max=gamma,
        preset=preset,
        usd_per_gpu_hour=usd_per_gpu_hour,
        engine=engine,
        profile=profile,
    )
    if len(q.gpus) != 1 or len(q.weight_bits) != 1:
        raise InvalidInput("gpu", "must name one accelerator and one weight precision for evaluate")
    g, bits = q.gpus[0], q.weight_bits[0]
    if not g.supports(bits):
        runs = ", ".join(str(b) for b in WEIGHT_BITS if g.supports(b))
        raise InvalidInput(
            "weight_bits", f"must be a precision {g.name} has a FLOP rate for ({runs}). Got {bits} instead."
        )
    if ep > 1 and tp % ep:
        raise InvalidInput("ep", f"must divide tp ({tp}). Got {ep} instead.")
    setup = Setup(gpu=g.name, weight_bits=bits, tp=tp, tp_2d=bool(tp_2d), pp=pp, ep=ep, batch=batch, gamma=gamma)
    return answer_series(reevaluate(q, setup, "evaluate"))


def answer_series(answer: Answer) -> pd.Series:
    """An answer's record as a Series; each value keeps its Python type (int, float, bool, str)."""
    import pandas as pd

    return pd.Series(answer.to_record(), dtype=object)


def answers_frame(answers: Sequence[Answer]) -> pd.DataFrame:
    """Answers as a DataFrame, one row each, with numeric, boolean and text columns typed as such."""
    import pandas as pd

    return pd.DataFrame([a.to_record() for a in answers]).infer_objects()


def plan(
    fleet,
    *,
    method: str = "mip",
    time_limit_s: float | None = None,
    mip_gap: float = 1e-4,
    baseline: bool = False,
    engine: str | None = None,
    profile: str | EngineProfile | None = None,
):
    """A fleet plan (``optimize.fleet.FleetPlan``) for a fleet file path or the same structure as a dict;
    ``baseline`` also plans each model alone and packs the results, for comparison (single-period fleets);
    ``engine``/``profile`` price every model's question under that profile."""
    import functools

    from roofline_opt.optimize import fleet as fl

    question_of: Callable[..., Question] = question
    if engine is not None or profile is not None:
        question_of = functools.partial(question, engine=engine, profile=resolve_profile(engine, profile))
    is_path = isinstance(fleet, str | os.PathLike)
    fleet = catalog.data_file(fleet) if is_path else fleet  # instances/fleets/... ship with the package
    spec = fl.load_fleet_file(fleet, question_of) if is_path else fl.parse_fleet(fleet, question_of)
    answer = fl.plan_fleet(spec, method, _options(time_limit_s, mip_gap))
    if baseline:
        from roofline_opt.optimize.fleet.baseline import per_model_baseline

        answer = answer.with_baseline(per_model_baseline(spec, _options(time_limit_s, mip_gap)))
    return answer


def solver_options(time_limit_s: float | None, mip_gap: float) -> SolverOptions:
    """Validated HiGHS options (time limit in seconds, relative gap), as every query takes them."""
    return _options(time_limit_s, mip_gap)
