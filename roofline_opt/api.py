"""Public Python API: validated questions, the queries over them, fully specified setups and fleet plans.

``question`` checks a question (its parameters are every query's); ``fastest``, ``cheapest`` and ``frontier`` answer
one as pandas objects (``fastest_answer``, ``cheapest_answer`` and ``frontier_frame`` take a ``Question`` and return
``Answer`` objects); ``evaluate`` and ``evaluate_setups`` give every figure of setups specified in full; ``plan``
answers a fleet file with an ``optimize.fleet.FleetPlan``. Errors name the parameters (``InvalidInput.field``); the
command line re-names them as its flags.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofline_opt import catalog, checks, files
from roofline_opt.catalog.prices import parse_price_overrides, with_prices
from roofline_opt.errors import InvalidInput
from roofline_opt.optimize import setups
from roofline_opt.optimize.cost_range import check_costs_representable
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
    DEFAULT_DRAFT_GAMMA_MAX,
    DEFAULT_FLEET_MIP_GAP,
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_INSTANCES,
    DEFAULT_MAX_UTILISATION,
    DEFAULT_METHOD,
    DEFAULT_MIP_GAP,
    DEFAULT_POINTS,
    DEFAULT_PP_DEGREES,
    DEFAULT_PRESET,
    DEFAULT_TP_MODES,
    DEFAULT_UTILITY_EXPONENT,
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
from roofline_opt.physics.specs import PRESETS, GpuSpec, ModelSpec

if TYPE_CHECKING:
    import pandas as pd  # imported where a pandas object is built: answering a question needs none

__all__ = [
    "DEFAULT_METHOD",
    "DEFAULT_MIP_GAP",
    "LIST_PARAMETERS",
    "TARGETS",
    "Answer",
    "Question",
    "Setup",
    "answer_series",
    "answers_frame",
    "checked_setup",
    "cheapest",
    "cheapest_answer",
    "cheapest_answers",
    "evaluate",
    "evaluate_setups",
    "fastest",
    "fastest_answer",
    "fastest_answers",
    "frontier",
    "frontier_frame",
    "plan",
    "prepared",
    "question",
    "solver_options",
    "split_lists",
    "target_answer",
]

WORKLOAD_COLUMNS = ("isl", "osl", "weight")
GpuChoice = str | GpuSpec | Sequence[str | GpuSpec]
"""One accelerator (name, card path or spec) or several for the solver to choose among."""
LIST_PARAMETERS = (
    "gpu",
    "weight_bits",
    "tp_degrees",
    "pp_degrees",
    "tp_modes",
    "ep_degrees",
    "kv_bits",
    "serving",
    "chunk_tokens",
    "prefill_gpu",
    "decode_gpu",
)
"""Parameters of ``question`` that take one value or a list of them."""


def split_lists(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with the comma-separated text of list parameters (``"1,2,4"``, ``"h100-sxm,h200"``: how the
    command line and study files write a list) split into lists of items; the API then checks every item.

    Parameters
    ----------
    values : mapping
        Keyword arguments of ``question`` (other keys pass unchanged).

    Returns
    -------
    dict
        The same keys, each list parameter given as text now a list of its stripped items.

    Raises
    ------
    InvalidInput
        Text with an empty item (``"1,,2"``), naming the parameter.
    """
    return {
        k: checks.parse_name_list(k, v) if k in LIST_PARAMETERS and isinstance(v, str) else v for k, v in values.items()
    }


def _model(model: str | ModelSpec, field: str = "model") -> tuple[ModelSpec, int | None]:
    if isinstance(model, ModelSpec):
        return model, None
    return catalog.resolve_model(model, field)


def _draft(target: ModelSpec, draft: str | ModelSpec) -> ModelSpec:
    """The draft model: a spec as given, ``mtp`` (the target's own MTP module) or a catalog name or path."""
    if isinstance(draft, ModelSpec):
        return draft
    return catalog.resolve_draft(target, draft, "draft")[0]


def _gpus(gpu: str | GpuSpec | Sequence[str | GpuSpec], field: str = "gpu") -> tuple[GpuSpec, ...]:
    if isinstance(gpu, GpuSpec):
        return (gpu,)
    names = checks.items(field, gpu)
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
    modes = tuple(checks.choice("tp_modes", m, ("1d", "2d")) for m in checks.items("tp_modes", tp_modes))
    return tuple(sorted(m == "2d" for m in checks.once_each("tp_modes", modes)))


def question(
    model: str | ModelSpec,
    gpu: GpuChoice | None = None,
    *,
    weight_bits: int | Sequence[int] | None = None,
    tp_degrees: int | Sequence[int] = _TP,
    pp_degrees: int | Sequence[int] = DEFAULT_PP_DEGREES,
    tp_modes: str | Sequence[str] = DEFAULT_TP_MODES,
    ep_degrees: int | Sequence[int] | None = None,
    dp_attention: bool | None = None,
    max_batch: int = DEFAULT_MAX_BATCH,
    context: int | None = None,
    draft: str | ModelSpec | None = None,
    acceptance: float = DEFAULT_ACCEPTANCE,
    gamma_max: int | None = None,
    preset: str = DEFAULT_PRESET,
    max_gpus: int | None = None,
    demand_tok_s: float | None = None,
    cluster: str | os.PathLike[str] | None = None,
    kv_bits: int | Sequence[int] | None = None,
    isl: int | None = None,
    osl: int | None = None,
    workload: str | os.PathLike[str] | Sequence[Sequence[float]] | rq.Workload | None = None,
    serving: str | Sequence[str] = rq.AGG,
    chunk_tokens: int | Sequence[int] | None = None,
    ttft_ms: float | None = None,
    tpot_ms: float | None = None,
    prefill_gpu: GpuChoice | None = None,
    decode_gpu: GpuChoice | None = None,
    max_instances: int = DEFAULT_MAX_INSTANCES,
    demand_req_s: float | None = None,
    max_utilisation: float = DEFAULT_MAX_UTILISATION,
    usd_per_gpu_hour: str | Mapping[str, float] | None = None,
    percentile: float | None = None,
    burstiness: float | None = None,
    arrival_trace: str | os.PathLike[str] | None = None,
    prefix_tokens: int | None = None,
    prefix_hit_rate: float | None = None,
    engine: str | None = None,
    profile: str | EngineProfile | None = None,
) -> Question:
    """A validated question: the model, the accelerators and the search space a query optimises over.

    Every query takes these parameters (``fastest``, ``cheapest`` and ``frontier`` as keyword arguments). List
    parameters (``LIST_PARAMETERS``) take one value or a list or tuple of them; comma-separated text such as
    ``"1,2,4"`` is the command line's notation (``split_lists`` reads it) and is refused here.

    Parameters
    ----------
    model : str or ModelSpec
        Catalog name or alias (``llama-3-70b``, ``llama-3-70b-int8``: a suffix sets the weight bits), YAML card path,
        HF config.json, or a spec.
    gpu : str, GpuSpec or sequence of them, optional
        The accelerators the solver chooses among; required unless ``cluster``.
    weight_bits : int or sequence of int, optional
        Weight precisions offered (16, 8, 4). Default: the name's suffix, else the card's ``native_weight_bits``
        (not under the paper preset), else 16.
    tp_degrees, pp_degrees : int or sequence of int
        Tensor- and pipeline-parallel degrees offered (defaults ``DEFAULT_TP_DEGREES``, ``DEFAULT_PP_DEGREES``).
    tp_modes : str or sequence of str
        Subset of ("1d", "2d"); 1-D by default (2-D only on request: no mainstream engine ships it).
    ep_degrees : int or sequence of int, optional
        Expert-parallel degrees offered, each dividing tp and the expert count. Default: 1 for a dense model; for
        a MoE model also each of ``MOE_EP_DEGREES`` dividing its experts (not under the paper preset).
    dp_attention : bool, optional
        Also offer a MoE model data-parallel attention with wide expert parallelism, one group of G GPUs per EP
        degree G > 1 (physics.md 10.5). Default (None): offered to a MoE model with such a degree, except under the
        paper preset.
    max_batch : int
        Largest batch, in sequences per instance (default ``DEFAULT_MAX_BATCH``).
    context : int, optional
        Tokens already in the KV cache (default ``DEFAULT_CONTEXT``; with whole requests I + O / 2).
    draft : str or ModelSpec, optional
        Draft model for speculative decoding on the same GPUs.
    acceptance : float
        Probability that a drafted token is accepted, in (0, 1) (default ``DEFAULT_ACCEPTANCE``).
    gamma_max : int, optional
        Longest draft the solver may choose, 0..gamma_max (default ``DEFAULT_DRAFT_GAMMA_MAX`` with a draft, else 0).
    preset : {"default", "paper"}
        Physics: realistic, or the reference notebook's (default ``DEFAULT_PRESET``).
    max_gpus : int, optional
        GPUs available in all, over every replica (default: unlimited).
    demand_tok_s : float, optional
        Total tokens/s to serve: replicas meet it and an instance may not out-serve it.
    cluster : str or path, optional
        Cluster file (GraphML, node-link JSON or YAML) or catalog cluster name (``hgx-h100``): accelerators and
        placement come from its graph.
    kv_bits : int or sequence of int, optional
        KV-cache precisions offered (16, 8, 4; default 16), independent of the weight precision.
    isl, osl : int, optional
        Input and output tokens per request: price whole requests, prefill included (physics.md 10.1-10.4).
    workload : str, path, sequence of (isl, osl, weight) or Workload, optional
        Request classes served by one deployment (a CSV with columns isl, osl, weight); every class must meet the
        limits. Excludes ``isl``/``osl``.
    serving : str or sequence of str
        "agg" (chunked prefill in the decode steps), "disagg" (separate prefill and decode instances) or both.
    chunk_tokens : int or sequence of int, optional
        Prefill tokens per step of aggregated serving (default ``physics.requests.DEFAULT_CHUNK_TOKENS``).
    ttft_ms, tpot_ms : float, optional
        Time-to-first-token and time-per-output-token limits in ms (``ttft_ms`` needs whole requests).
    prefill_gpu, decode_gpu : str, GpuSpec or sequence of them, optional
        Accelerators offered for the prefill and decode instances of disaggregated serving (default: ``gpu``).
    max_instances : int
        Largest number of prefill or decode instances in one xPyD unit (default ``DEFAULT_MAX_INSTANCES``).
    demand_req_s : float, optional
        Requests/s to serve, instead of ``demand_tok_s`` (needs whole requests).
    max_utilisation : float
        Fraction of each instance's throughput used, in (0, 1] (default ``DEFAULT_MAX_UTILISATION``: busy
        instances, as the paper prices them); prices rise and served rates fall by this factor.
    usd_per_gpu_hour : str or mapping, optional
        Price overrides for this question, ``"h100-sxm=2.5,h200=3.2"`` or a mapping name -> $/GPU-hour.
    percentile : {50, 90, 99}, optional
        ``ttft_ms`` and ``tpot_ms`` hold for that percentile of requests at the answer's own load (TTFT with the
        prefill path's queueing, TPOT over each request's decode window: docs/physics/queueing.md), which then
        sets how busy an instance may be. Default: TTFT is the service time at no load and TPOT the steady-state
        TPOT at the mean batch.
    burstiness : float, optional
        c_a^2 of the gaps between arrivals, with ``percentile`` (default 1, Poisson; 0 evenly spaced).
    arrival_trace : str or path, optional
        A CSV of arrival_s, isl, osl whose gaps give the burstiness (instead of ``burstiness``).
    prefix_tokens : int, optional
        A cached prefix (a shared system prompt) of that many tokens at the start of every class's prompt, below its
        isl: read, not prefilled; a disaggregated prefill instance sends only the rest's KV cache.
    prefix_hit_rate : float, optional
        The share of requests that find the prefix cached (default 1); a hit rate splits each class in two.
    engine : {"vllm", "sglang", "trtllm"}, optional
        That engine's packaged profile: efficiencies per accelerator family, memory settings, default chunk and KV
        precision, deployable layouts (docs/profiles/). Neither engine nor profile: the preset alone.
    profile : str, path or EngineProfile, optional
        A profile name or YAML file (``calibrate --out`` writes one); it wins over ``engine``'s packaged profile
        (their engines must match).

    Returns
    -------
    Question
        The checked question (``optimize.space.Question``), hashable: tables are cached by it.

    Raises
    ------
    InvalidInput
        A parameter that is not valid, named as the parameter (``tp_degrees``), what would be valid in the message.
    """
    engine_profile = resolve_profile(engine, profile, str(preset))
    prices = parse_price_overrides("usd_per_gpu_hour", usd_per_gpu_hour)
    spec, suffix_bits = _model(model)
    preset = checks.choice("preset", preset, PRESETS)
    native_bits = catalog.native_weight_bits(spec.name) if modern_defaults(preset) else None
    ep = ep_degrees_offered(spec, default_ep_degrees(spec, preset) if ep_degrees is None else ep_degrees)
    draft_spec = None if draft is None else _draft(spec, draft)
    if gamma_max is None:
        gamma_max = 0 if draft_spec is None else DEFAULT_DRAFT_GAMMA_MAX
    gamma_max = checks.positive_int("gamma_max", gamma_max, minimum=0, maximum=MAX_GAMMA)
    if gamma_max > 0 and draft_spec is None:
        raise InvalidInput("gamma_max", "needs a draft model (`draft`). Got no draft instead.")
    max_batch = checks.positive_int("max_batch", max_batch, maximum=MAX_BATCH_LIMIT)
    instance_limit, graph = None, None
    if cluster is not None:
        graph, gpus, instance_limit = _cluster(os.fspath(cluster), gpu)
    elif gpu is None:
        raise InvalidInput("gpu", "must name at least one accelerator (or give `cluster`). Got none instead.")
    else:
        gpus = _gpus(gpu)
    gpus, roles = _roles(gpus, prefill_gpu, decode_gpu, cluster is not None)
    load = prefixed_workload(_workload(isl, osl, workload), prefix_tokens, prefix_hit_rate)
    modes = _serving(serving, load)
    if load is None and ttft_ms is not None:
        raise InvalidInput("ttft_ms", "needs whole requests: give `isl` and `osl` or `workload`")
    if demand_req_s is not None and demand_tok_s is not None:
        raise InvalidInput("demand_req_s", "excludes `demand_tok_s`: give the demand in one unit")
    if demand_req_s is not None:
        if load is None:
            raise InvalidInput("demand_req_s", "needs whole requests: give `isl` and `osl` or `workload`")
        demand_tok_s = checks.positive_float("demand_req_s", demand_req_s) * load.mean_osl
    decode_context = setups.decode_context(context, load)
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
        chunk_tokens=degrees("chunk_tokens", rq.DEFAULT_CHUNK_TOKENS if chunk_tokens is None else chunk_tokens),
        max_ttft_s=None if ttft_ms is None else checks.positive_float("ttft_ms", ttft_ms) / 1e3,
        max_tpot_s=None if tpot_ms is None else checks.positive_float("tpot_ms", tpot_ms) / 1e3,
        max_utilisation=utilisation,
        max_instances=checks.positive_int("max_instances", max_instances),
        **roles,
        **_slo(percentile, burstiness, arrival_trace, load, ttft_ms, tpot_ms, utilisation),
    )
    return apply_profile(
        question, engine_profile, kv_bits_given=kv_bits is not None, chunk_given=chunk_tokens is not None
    )


def prefixed_workload(load: rq.Workload | None, tokens, hit_rate) -> rq.Workload | None:
    """The workload with a cached prefix of ``tokens`` found by a share ``hit_rate`` of requests (default 1)."""
    if tokens is None:
        if hit_rate is not None:
            raise InvalidInput("prefix_hit_rate", "needs --prefix-tokens (the length of the cached prefix)")
        return load
    if load is None:
        raise InvalidInput("prefix_tokens", "needs whole requests: give --isl and --osl or --workload")
    if load.prefix:
        raise InvalidInput("prefix_tokens", "the workload already has cached prefixes")
    n = checks.positive_int("prefix_tokens", tokens, minimum=0, maximum=MAX_CONTEXT)
    if n >= min(load.isl):
        raise InvalidInput("prefix_tokens", f"must be below every class's isl ({min(load.isl)}). Got {n} instead.")
    rate = (
        1.0
        if hit_rate is None
        else checks.probability("prefix_hit_rate", hit_rate, include_zero=True, include_one=True)
    )
    return load.with_prefix(n, rate)


SLO_PERCENTILES = (50, 90, 99)
"""Percentiles a TTFT/TPOT limit may hold at (``percentile``)."""


def _slo(percentile, burstiness, arrival_trace, load, ttft_ms, tpot_ms, utilisation: float) -> dict:
    """The Question fields of a percentile limit: slo_percentile and arrival_scv (from ``burstiness``, c_a^2 of the
    gaps, or an arrival trace's own gaps)."""
    if percentile is None:
        for field, value in (("burstiness", burstiness), ("arrival_trace", arrival_trace)):
            if value is not None:
                raise InvalidInput(field, "describes arrivals for a percentile limit: give --percentile 50|90|99 too")
        return {}
    if isinstance(percentile, float) and percentile.is_integer():
        percentile = int(percentile)
    chosen = float(checks.choice("percentile", percentile, SLO_PERCENTILES))
    if load is None:
        raise InvalidInput("percentile", "needs whole requests: give --isl and --osl or --workload")
    if ttft_ms is None and tpot_ms is None:
        raise InvalidInput("percentile", "applies to a limit: give --ttft-ms or --tpot-ms")
    if utilisation < 1.0:
        limit = "TTFT" if ttft_ms is not None else "TPOT"
        raise InvalidInput("max_utilisation", f"follows from the {limit} limit at --percentile: drop --max-utilisation")
    if arrival_trace is not None and burstiness is not None:
        raise InvalidInput("arrival_trace", "gives the arrivals' burstiness: drop --burstiness")
    if arrival_trace is not None:
        from roofline_opt.physics.queueing import Arrivals
        from roofline_opt.simulate.arrivals import read_trace

        times = read_trace(arrival_trace, "arrival_trace", MAX_CONTEXT, MAX_CONTEXT).arrival_s
        scv = Arrivals.of_times(times).scv
    else:
        scv = (
            1.0
            if burstiness is None
            else checks.positive_float("burstiness", burstiness, allow_zero=True, maximum=100.0)
        )
    return {"slo_percentile": chosen, "arrival_scv": scv}


def _demand(demand_tok_s: float) -> float:
    return checks.positive_float("demand_tok_s", demand_tok_s, maximum=MAX_DEMAND_TOK_S)


def _choices(field: str, values, allowed: tuple[int, ...], default: tuple[int, ...]) -> tuple[int, ...]:
    """One value or several (a list) from ``allowed``."""
    if values is None:
        return default
    items = checks.items(field, values)
    if not items:
        raise InvalidInput(field, f"must list at least one of {', '.join(map(str, allowed))}. Got none instead.")
    return tuple(sorted(checks.once_each(field, tuple(checks.choice(field, v, allowed) for v in items)), reverse=True))


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
            raise InvalidInput("workload", "excludes `isl`/`osl`: give the lengths in the file")
        if isinstance(workload, rq.Workload):
            return workload
        rows = _workload_rows(workload)
        return rq.Workload(tuple(r[0] for r in rows), tuple(r[1] for r in rows), tuple(r[2] for r in rows))
    if isl is None and osl is None:
        return None
    if isl is None or osl is None:
        missing = "isl" if isl is None else "osl"
        raise InvalidInput(missing, "is required with the other request length (`isl` and `osl` go together)")
    isl = checks.positive_int("isl", isl, minimum=0, maximum=MAX_CONTEXT)
    return rq.Workload.single(isl, checks.positive_int("osl", osl, maximum=MAX_CONTEXT))


def _workload_rows(workload) -> list[tuple[int, int, float]]:
    if isinstance(workload, str | os.PathLike):
        path = Path(workload)
        frame = files.read_csv_cells(path, "workload", WORKLOAD_COLUMNS, "request class")
        cells = [
            (f"{files.located('workload', path)} line {n}", r) for n, r in enumerate(frame.to_dict("records"), start=2)
        ]
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
    offered = checks.once_each(
        "serving", tuple(checks.choice("serving", v, rq.SERVING_MODES) for v in checks.items("serving", serving))
    )
    modes = tuple(m for m in rq.SERVING_MODES if m in offered)
    if not modes:
        raise InvalidInput("serving", "must offer agg, disagg or both. Got none instead.")
    if rq.DISAGG in modes:
        if load is None:
            raise InvalidInput("serving", "disagg needs whole requests: give `isl` and `osl` or `workload`")
        if min(load.isl) < 1:
            raise InvalidInput("serving", "disagg needs prompts of at least 1 token (every class's isl >= 1)")
    return modes


def _options(time_limit_s: float | None, mip_gap: float) -> SolverOptions:
    limit = None if time_limit_s is None else checks.positive_float("time_limit_s", time_limit_s)
    return SolverOptions(limit, checks.positive_float("mip_gap", mip_gap, allow_zero=True, maximum=1.0))


def fastest_answer(
    q: Question,
    *,
    max_usd_per_mtok: float | None = None,
    method: str = DEFAULT_METHOD,
    time_limit_s: float | None = None,
    mip_gap: float = DEFAULT_MIP_GAP,
) -> Answer:
    """The fastest setup (most tok/s per request) of a question within a budget, as an Answer.

    Parameters
    ----------
    q : Question
        From ``question``.
    max_usd_per_mtok : float, optional
        Budget in $ per million output tokens (default: none, the fastest setup at any price).
    method : {"mip", "enumerate"}, default "mip"
        HiGHS on the MIP, or brute-force enumeration over the same space (the oracle the MIP is tested against).
    time_limit_s : float, optional
        HiGHS time limit per solve, in seconds (default: none).
    mip_gap : float, default 1e-6
        HiGHS relative MIP gap.

    Returns
    -------
    Answer
        The setup with its figures re-evaluated by the evaluator and the solver's report.

    Raises
    ------
    InvalidInput
        A parameter that is not valid, named as the parameter.
    Infeasible
        No setup in the space meets the target and limits; the message says why and quotes the nearest figures.
    SolverFailure
        HiGHS stopped without a usable solution.
    """
    return fastest_answers(
        q, max_usd_per_mtok=max_usd_per_mtok, method=method, time_limit_s=time_limit_s, mip_gap=mip_gap
    )[0]


def fastest_answers(
    q: Question,
    *,
    max_usd_per_mtok: float | None = None,
    method: str = DEFAULT_METHOD,
    time_limit_s: float | None = None,
    mip_gap: float = DEFAULT_MIP_GAP,
    top_n: int = 1,
) -> list[Answer]:
    """The ``top_n`` fastest distinct layouts within a budget, each the best once those before it are excluded.

    Parameters
    ----------
    q : Question
        From ``question``.
    max_usd_per_mtok : float, optional
        Budget in $ per million output tokens (default: none).
    method : {"mip", "enumerate"}, default "mip"
        HiGHS on the MIP, or brute-force enumeration over the same space (the oracle the MIP is tested against).
    time_limit_s : float, optional
        HiGHS time limit per solve, in seconds (default: none).
    mip_gap : float, default 1e-6
        HiGHS relative MIP gap.
    top_n : int, default 1
        Layouts listed.

    Returns
    -------
    list of Answer
        Fastest first; fewer than ``top_n`` when fewer layouts meet the budget.

    Raises
    ------
    InvalidInput
        A parameter that is not valid, named as the parameter.
    Infeasible
        No setup in the space meets the target and limits; the message says why and quotes the nearest figures.
    SolverFailure
        HiGHS stopped without a usable solution.
    """
    budget = None if max_usd_per_mtok is None else checks.positive_float("max_usd_per_mtok", max_usd_per_mtok)
    n = checks.positive_int("top_n", top_n)
    return [_with_placement(q, a) for a in _top_n(q, "fastest", budget, n, method, _options(time_limit_s, mip_gap))]


def cheapest_answer(
    q: Question,
    *,
    min_tok_s: float | None = None,
    method: str = DEFAULT_METHOD,
    time_limit_s: float | None = None,
    mip_gap: float = DEFAULT_MIP_GAP,
) -> Answer:
    """The cheapest setup (least $/Mtok) of a question at a speed or faster, as an Answer.

    Parameters
    ----------
    q : Question
        From ``question``.
    min_tok_s : float, optional
        Speed target in tokens/s per request (default: none, the cheapest setup at any speed).
    method : {"mip", "enumerate"}, default "mip"
        HiGHS on the MIP, or brute-force enumeration over the same space (the oracle the MIP is tested against).
    time_limit_s : float, optional
        HiGHS time limit per solve, in seconds (default: none).
    mip_gap : float, default 1e-6
        HiGHS relative MIP gap.

    Returns
    -------
    Answer
        The setup with its figures re-evaluated by the evaluator and the solver's report.

    Raises
    ------
    InvalidInput
        A parameter that is not valid, named as the parameter.
    Infeasible
        No setup in the space meets the target and limits; the message says why and quotes the nearest figures.
    SolverFailure
        HiGHS stopped without a usable solution.
    """
    return cheapest_answers(q, min_tok_s=min_tok_s, method=method, time_limit_s=time_limit_s, mip_gap=mip_gap)[0]


def cheapest_answers(
    q: Question,
    *,
    min_tok_s: float | None = None,
    method: str = DEFAULT_METHOD,
    time_limit_s: float | None = None,
    mip_gap: float = DEFAULT_MIP_GAP,
    top_n: int = 1,
) -> list[Answer]:
    """The ``top_n`` cheapest distinct layouts at a speed, each the best once those before it are excluded.

    Parameters
    ----------
    q : Question
        From ``question``.
    min_tok_s : float, optional
        Speed target in tokens/s per request (default: none).
    method : {"mip", "enumerate"}, default "mip"
        HiGHS on the MIP, or brute-force enumeration over the same space (the oracle the MIP is tested against).
    time_limit_s : float, optional
        HiGHS time limit per solve, in seconds (default: none).
    mip_gap : float, default 1e-6
        HiGHS relative MIP gap.
    top_n : int, default 1
        Layouts listed.

    Returns
    -------
    list of Answer
        Cheapest first; fewer than ``top_n`` when fewer layouts meet the speed.

    Raises
    ------
    InvalidInput
        A parameter that is not valid, named as the parameter.
    Infeasible
        No setup in the space meets the target and limits; the message says why and quotes the nearest figures.
    SolverFailure
        HiGHS stopped without a usable solution.
    """
    speed = None if min_tok_s is None else checks.positive_float("min_tok_s", min_tok_s)
    n = checks.positive_int("top_n", top_n)
    return [_with_placement(q, a) for a in _top_n(q, "cheapest", speed, n, method, _options(time_limit_s, mip_gap))]


def fastest(
    model: str | ModelSpec,
    gpu: GpuChoice | None = None,
    *,
    max_usd_per_mtok: float | None = None,
    method: str = DEFAULT_METHOD,
    time_limit_s: float | None = None,
    mip_gap: float = DEFAULT_MIP_GAP,
    **space,
) -> pd.Series:
    """Most tok/s per request for at most ``max_usd_per_mtok`` $/Mtok, as a Series of unit-named fields.

    Parameters
    ----------
    model : str or ModelSpec
        Catalog name or alias, card path or spec.
    gpu : str, GpuSpec or sequence of them, optional
        Accelerators the solver chooses among (required unless ``cluster``).
    max_usd_per_mtok : float, optional
        Budget in $ per million output tokens (default: none, the fastest setup at any price).
    method : {"mip", "enumerate"}, default "mip"
        HiGHS on the MIP, or brute-force enumeration over the same space (the oracle the MIP is tested against).
    time_limit_s : float, optional
        HiGHS time limit per solve, in seconds (default: none).
    mip_gap : float, default 1e-6
        HiGHS relative MIP gap.
    **space
        The question: any keyword argument of ``question``.

    Returns
    -------
    pandas.Series
        The answer's record (the fields of ``--json``), each value of its Python type.

    Raises
    ------
    InvalidInput
        A parameter that is not valid, named as the parameter.
    Infeasible
        No setup in the space meets the target and limits; the message says why and quotes the nearest figures.
    SolverFailure
        HiGHS stopped without a usable solution.
    """
    q = question(model, gpu, **space)
    return answer_series(
        fastest_answer(q, max_usd_per_mtok=max_usd_per_mtok, method=method, time_limit_s=time_limit_s, mip_gap=mip_gap)
    )


def cheapest(
    model: str | ModelSpec,
    gpu: GpuChoice | None = None,
    *,
    min_tok_s: float | None = None,
    method: str = DEFAULT_METHOD,
    time_limit_s: float | None = None,
    mip_gap: float = DEFAULT_MIP_GAP,
    **space,
) -> pd.Series:
    """Least $/Mtok at ``min_tok_s`` tok/s per request or faster, as a Series of unit-named fields.

    Parameters
    ----------
    model : str or ModelSpec
        Catalog name or alias, card path or spec.
    gpu : str, GpuSpec or sequence of them, optional
        Accelerators the solver chooses among (required unless ``cluster``).
    min_tok_s : float, optional
        Speed target in tokens/s per request (default: none, the cheapest setup at any speed).
    method : {"mip", "enumerate"}, default "mip"
        HiGHS on the MIP, or brute-force enumeration over the same space (the oracle the MIP is tested against).
    time_limit_s : float, optional
        HiGHS time limit per solve, in seconds (default: none).
    mip_gap : float, default 1e-6
        HiGHS relative MIP gap.
    **space
        The question: any keyword argument of ``question``.

    Returns
    -------
    pandas.Series
        The answer's record (the fields of ``--json``), each value of its Python type.

    Raises
    ------
    InvalidInput
        A parameter that is not valid, named as the parameter.
    Infeasible
        No setup in the space meets the target and limits; the message says why and quotes the nearest figures.
    SolverFailure
        HiGHS stopped without a usable solution.
    """
    q = question(model, gpu, **space)
    return answer_series(
        cheapest_answer(q, min_tok_s=min_tok_s, method=method, time_limit_s=time_limit_s, mip_gap=mip_gap)
    )


def frontier_frame(
    q: Question,
    *,
    points: int = DEFAULT_POINTS,
    utility_exponent: float = DEFAULT_UTILITY_EXPONENT,
    time_limit_s: float | None = None,
    mip_gap: float = DEFAULT_MIP_GAP,
    progress: Callable[[int, int], None] | None = None,
    method: str = DEFAULT_METHOD,
) -> pd.DataFrame:
    """The speed-vs-cost frontier of a question, one row per distinct optimal setup, cheapest first.

    Parameters
    ----------
    q : Question
        From ``question``.
    points : int, default 50
        Budgets swept, spaced geometrically from the cheapest setup's cost to the fastest's (repeats kept once).
    utility_exponent : float, default 4.0
        The preferred point maximises speed^a / price over the whole frontier.
    method : {"mip", "enumerate"}, default "mip"
        HiGHS on the MIP, or brute-force enumeration over the same space (the oracle the MIP is tested against).
    time_limit_s : float, optional
        HiGHS time limit per solve, in seconds (default: none).
    mip_gap : float, default 1e-6
        HiGHS relative MIP gap.
    progress : callable, optional
        Called with (points done, points in all) after each budget.

    Returns
    -------
    pandas.DataFrame
        One answer record a row and a boolean ``preferred`` column; ``attrs["monotone"]`` says whether speed and cost
        rise together along it.

    Raises
    ------
    InvalidInput
        A parameter that is not valid, named as the parameter.
    Infeasible
        No setup in the space meets the target and limits; the message says why and quotes the nearest figures.
    SolverFailure
        HiGHS stopped without a usable solution.
    """
    points = checks.positive_int("points", points, minimum=2, maximum=MAX_POINTS)
    exponent = checks.positive_float("utility_exponent", utility_exponent, maximum=MAX_UTILITY_EXPONENT)
    answers = frontier_answers(q, points, _options(time_limit_s, mip_gap), progress, method, exponent)
    frame = answers_frame(answers)
    frame["preferred"] = False
    frame.loc[preferred_index(frame, exponent), "preferred"] = True
    frame.attrs["monotone"] = is_monotone(frame)
    return frame


def frontier(
    model: str | ModelSpec,
    gpu: GpuChoice | None = None,
    *,
    points: int = DEFAULT_POINTS,
    utility_exponent: float = DEFAULT_UTILITY_EXPONENT,
    time_limit_s: float | None = None,
    mip_gap: float = DEFAULT_MIP_GAP,
    progress: Callable[[int, int], None] | None = None,
    method: str = DEFAULT_METHOD,
    **space,
) -> pd.DataFrame:
    """Speed-vs-cost frontier: one row per distinct optimal setup from the cheapest to the fastest.

    Parameters
    ----------
    model : str or ModelSpec
        Catalog name or alias, card path or spec.
    gpu : str, GpuSpec or sequence of them, optional
        Accelerators the solver chooses among (required unless ``cluster``).
    points : int, default 50
        Budgets swept, spaced geometrically from the cheapest setup's cost to the fastest's (repeats kept once).
    utility_exponent : float, default 4.0
        The preferred point maximises speed^a / price over the whole frontier.
    method : {"mip", "enumerate"}, default "mip"
        HiGHS on the MIP, or brute-force enumeration over the same space (the oracle the MIP is tested against).
    time_limit_s : float, optional
        HiGHS time limit per solve, in seconds (default: none).
    mip_gap : float, default 1e-6
        HiGHS relative MIP gap.
    progress : callable, optional
        Called with (points done, points in all) after each budget.
    **space
        The question: any keyword argument of ``question``.

    Returns
    -------
    pandas.DataFrame
        As ``frontier_frame``.

    Raises
    ------
    InvalidInput
        A parameter that is not valid, named as the parameter.
    Infeasible
        No setup in the space meets the target and limits; the message says why and quotes the nearest figures.
    SolverFailure
        HiGHS stopped without a usable solution.
    """
    q = question(model, gpu, **space)
    return frontier_frame(
        q,
        points=points,
        utility_exponent=utility_exponent,
        time_limit_s=time_limit_s,
        mip_gap=mip_gap,
        progress=progress,
        method=method,
    )


TARGETS = {"fastest": "max_usd_per_mtok", "cheapest": "min_tok_s"}
"""The target parameter of each query kind that can re-solve one prepared model (a sweep along the target)."""


def prepared(q: Question, *, time_limit_s: float | None = None, mip_gap: float = DEFAULT_MIP_GAP) -> Prepared:
    """A question's tables and persistent models, built once to answer it at many targets with ``target_answer``.

    Parameters
    ----------
    q : Question
        From ``question``.
    time_limit_s : float, optional
        HiGHS time limit per solve, in seconds.
    mip_gap : float, default 1e-6
        HiGHS relative MIP gap.

    Returns
    -------
    Prepared
        The prepared question (``optimize.queries.Prepared``).

    Raises
    ------
    InvalidInput
        A solver option that is not valid.
    """
    return prepare(q, _options(time_limit_s, mip_gap))


def target_answer(prep: Prepared, kind: str, target: float | None) -> Answer:
    """What ``fastest_answer`` or ``cheapest_answer`` returns with method "mip", from a prepared question's
    loaded model: only the target is pushed before the re-solve.

    Parameters
    ----------
    prep : Prepared
        From ``prepared``.
    kind : {"fastest", "cheapest"}
        The query.
    target : float or None
        ``max_usd_per_mtok`` (fastest) or ``min_tok_s`` (cheapest); None: no target.

    Returns
    -------
    Answer
        As the one-off query returns it.

    Raises
    ------
    InvalidInput
        A parameter that is not valid, named as the parameter.
    Infeasible
        No setup in the space meets the target and limits; the message says why and quotes the nearest figures.
    SolverFailure
        HiGHS stopped without a usable solution.
    """
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
    context: int | None = None,
    draft: str | ModelSpec | None = None,
    gamma: int = 0,
    acceptance: float = DEFAULT_ACCEPTANCE,
    preset: str = DEFAULT_PRESET,
    usd_per_gpu_hour: str | Mapping[str, float] | None = None,
    engine: str | None = None,
    profile: str | EngineProfile | None = None,
) -> pd.Series:
    """Every figure of one fully specified setup, as the unit-named fields an answer of ``fastest`` carries.

    The setup is checked as ``evaluate_setups`` checks one (same defaults); it need not fit in memory
    (``fits_in_memory`` says whether it does).

    Parameters
    ----------
    model : str or ModelSpec
        Catalog name or alias, card path or spec.
    gpu : str or GpuSpec
        One accelerator.
    tp, pp, batch : int
        Tensor- and pipeline-parallel degrees, and sequences decoded together by the instance.
    weight_bits : int, optional
        16, 8 or 4 (default: the name's suffix, else the card's native precision, else 16; 16 under the paper preset).
    tp_2d : bool, default False
        2-D tensor parallelism.
    ep : int, default 1
        Expert-parallel degree inside TP (a MoE model).
    context : int, optional
        Tokens already in the KV cache (default ``DEFAULT_CONTEXT``).
    draft : str or ModelSpec, optional
        Draft model for speculative decoding on the same GPUs.
    gamma : int, default 0
        Draft tokens per step (at least 1 with ``draft``, 0 without).
    acceptance : float, default 0.8
        Probability that a drafted token is accepted.
    preset : {"default", "paper"}, default "default"
        Physics preset.
    usd_per_gpu_hour : str or mapping, optional
        Price overrides, ``"h100-sxm=2.5"`` or a mapping name -> $/GPU-hour.
    engine, profile : optional
        Price the setup under that engine's packaged profile or that profile (see ``question``).

    Returns
    -------
    pandas.Series
        The answer record of the setup (method ``"evaluate"``).

    Raises
    ------
    InvalidInput
        A parameter that is not valid, named as the parameter.
    """
    given: dict[str, object] = {"model": model, "gpu": gpu, "tp": tp, "pp": pp, "batch": batch}
    given |= {"weight_bits": weight_bits, "tp_2d": tp_2d, "ep": ep, "context": context, "draft": draft}
    given |= {"gamma_max": gamma, "acceptance": acceptance, "preset": preset}
    specs = setups.Specs(parse_price_overrides("usd_per_gpu_hour", usd_per_gpu_hour))
    row = setups.check(setups.DEFAULTS | given, lambda field: "gamma" if field == "gamma_max" else field, specs)
    q = question(
        specs.model(row.model, "model")[0],
        specs.gpu(row.gpu, "gpu"),
        weight_bits=row.weight_bits,
        tp_degrees=(row.tp,),
        pp_degrees=(row.pp,),
        tp_modes=("2d" if row.tp_2d else "1d",),
        ep_degrees=(row.ep,),
        dp_attention=False,
        max_batch=max(row.batch, row.pp),
        context=context,
        draft=specs.model(row.draft, "draft")[0] if row.draft else None,
        acceptance=row.acceptance,
        gamma_max=row.gamma_max,
        preset=row.preset,
        engine=engine,
        profile=profile,
    )
    setup = Setup(
        gpu=q.gpus[0].name,
        weight_bits=row.weight_bits,
        tp=row.tp,
        tp_2d=row.tp_2d,
        pp=row.pp,
        ep=row.ep,
        batch=row.batch,
        gamma=row.gamma_max,
    )
    check_costs_representable(q)
    return answer_series(reevaluate(q, setup, "evaluate"))


def evaluate_setups(
    rows: Sequence[Mapping[str, object]],
    *,
    usd_per_gpu_hour: str | Mapping[str, float] | None = None,
    engine: str | None = None,
    profile: str | EngineProfile | None = None,
) -> pd.DataFrame:
    """Every figure of each fully specified setup, one row each in input order, from the evaluator.

    Parameters
    ----------
    rows : sequence of mappings
        One mapping per setup: ``model``, ``gpu``, ``tp``, ``pp`` and ``batch``, and any of
        ``optimize.setups.DEFAULTS`` (absent or None: the default). Values may be numbers or their text.
    usd_per_gpu_hour : str or mapping, optional
        Price overrides for the run, ``"h100-sxm=2.5"`` or a mapping name -> $/GPU-hour.
    engine, profile : optional
        Price every setup under that engine's packaged profile or that profile (see ``question``); the rows then
        carry ``profile`` and the ``*_low``/``*_high`` figures of its residual range.

    Returns
    -------
    pandas.DataFrame
        The inputs of each setup (spec names, layout label, $/GPU-hour) and every output of
        ``physics.evaluator.evaluate`` (decode steps) or ``physics.requests`` (whole requests: ``isl`` and ``osl``).

    Raises
    ------
    InvalidInput
        A field that is not valid, named ``setups[i].FIELD`` (``i`` counts from 0).
    """
    import pandas as pd

    prices = parse_price_overrides("usd_per_gpu_hour", usd_per_gpu_hour)
    specs = setups.Specs(prices, resolve_profile(engine, profile))
    return pd.DataFrame(setups.evaluate_rows([_checked(i, row, specs) for i, row in enumerate(rows)], specs))


def checked_setup(
    values: Mapping[str, object],
    *,
    usd_per_gpu_hour: str | Mapping[str, float] | None = None,
    engine: str | None = None,
    profile: str | EngineProfile | None = None,
) -> tuple[setups.SetupRow, setups.Specs]:
    """One setup checked as ``evaluate_setups`` checks each, with the specs it names.

    Parameters
    ----------
    values : mapping
        The fields of one setup (``optimize.setups.REQUIRED`` and any of ``optimize.setups.DEFAULTS``).
    usd_per_gpu_hour : str or mapping, optional
        Price overrides for the run.
    engine, profile : optional
        The engine profile the specs price the setup under (see ``question``).

    Returns
    -------
    tuple of (SetupRow, Specs)
        The checked setup and the specs loaded for it (``optimize.setups``).

    Raises
    ------
    InvalidInput
        A field that is not valid, named as the field.
    """
    specs = setups.Specs(parse_price_overrides("usd_per_gpu_hour", usd_per_gpu_hour), resolve_profile(engine, profile))
    return _checked(None, values, specs), specs


def _checked(index: int | None, values: Mapping[str, object], specs: setups.Specs) -> setups.SetupRow:
    where = "" if index is None else f"setups[{index}]."
    unknown = sorted(set(values) - set(setups.REQUIRED) - set(setups.DEFAULTS))
    if unknown:
        known = ", ".join((*setups.REQUIRED, *setups.DEFAULTS))
        raise InvalidInput(f"{where}{unknown[0]}", f"is not a field of a setup ({known})")
    missing = [field for field in setups.REQUIRED if values.get(field) is None]
    if missing:
        raise InvalidInput(f"{where}{missing[0]}", "is required")
    full = setups.DEFAULTS | {k: v for k, v in values.items() if v is not None}
    return setups.check(full, lambda field: where + field, specs)


def answer_series(answer: Answer) -> pd.Series:
    """An answer's record as a Series; each value keeps its Python type (int, float, bool, str).

    Parameters
    ----------
    answer : Answer
        A query's answer.

    Returns
    -------
    pandas.Series
        The record, dtype object.
    """
    import pandas as pd

    return pd.Series(answer.to_record(), dtype=object)


def answers_frame(answers: Sequence[Answer]) -> pd.DataFrame:
    """Answers as a DataFrame, one row each, with numeric, boolean and text columns typed as such.

    Parameters
    ----------
    answers : sequence of Answer
        Answers of any queries.

    Returns
    -------
    pandas.DataFrame
        One record a row.
    """
    import pandas as pd

    return pd.DataFrame([a.to_record() for a in answers]).infer_objects()


def plan(
    fleet,
    *,
    method: str = DEFAULT_METHOD,
    time_limit_s: float | None = None,
    mip_gap: float = DEFAULT_FLEET_MIP_GAP,
    baseline: bool = False,
    engine: str | None = None,
    profile: str | EngineProfile | None = None,
):
    """A fleet plan: replicas per layout for every model, batches within their limits, placement on the cluster.

    Parameters
    ----------
    fleet : str, path or mapping
        A fleet file (YAML; ``instances/fleets/...`` ship with the package) or the same structure as a dict
        (docs/how-to/fleet.md).
    method : {"mip", "enumerate"}, default "mip"
        HiGHS on the fleet MIP, or brute force (small fleets only).
    time_limit_s : float, optional
        HiGHS time limit per solve, in seconds.
    mip_gap : float, default 1e-4
        HiGHS relative MIP gap (``DEFAULT_FLEET_MIP_GAP``).
    baseline : bool, default False
        Also plan each model alone and pack the results, for comparison (single-period fleets).
    engine, profile : optional
        Price every model's question under that engine's packaged profile or that profile (see ``question``).

    Returns
    -------
    FleetPlan
        Rows, model and cluster summaries, placement and the solver report (``optimize.fleet.FleetPlan``).

    Raises
    ------
    InvalidInput
        A parameter that is not valid, named as the parameter.
    Infeasible
        No setup in the space meets the target and limits; the message says why and quotes the nearest figures.
    SolverFailure
        HiGHS stopped without a usable solution.
    """
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
    """Validated HiGHS options, as every query takes them.

    Parameters
    ----------
    time_limit_s : float or None
        Time limit per solve, in seconds.
    mip_gap : float
        Relative MIP gap in [0, 1].

    Returns
    -------
    SolverOptions
        The checked options.

    Raises
    ------
    InvalidInput
        An option that is not valid, named ``time_limit_s`` or ``mip_gap``.
    """
    return _options(time_limit_s, mip_gap)
