"""The fleet file (YAML or the same structure as a dict): validated into a Fleet, every bad key named on one line.

Per model, the search-space keys of the single-model queries are handed to a question factory (``api.question``)
so they are validated exactly as the flags of ``fastest``/``cheapest`` are.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import networkx as nx

from roofline_opt import catalog, checks, files, topology
from roofline_opt.errors import InvalidInput
from roofline_opt.optimize.fleet.kv import kv_partner
from roofline_opt.optimize.fleet.placement import pool_domains
from roofline_opt.optimize.fleet.problem import (
    COST,
    DEFAULT_ON_DEMAND_FACTOR,
    DEFAULT_RESERVED_FACTOR,
    OBJECTIVES,
    Fleet,
    FleetModel,
    Pool,
)
from roofline_opt.optimize.space import MAX_DEMAND_TOK_S, Question

FLEET_KEYS = ("cluster", "gpus", "objective", "max_usd_per_hour", "max_utilisation", "models", "prices", "period_hours")
SPACE_KEYS = (
    "weight_bits",
    "tp_degrees",
    "pp_degrees",
    "tp_modes",
    "ep_degrees",
    "max_batch",
    "context",
    "draft",
    "acceptance",
    "gamma_max",
    "preset",
)
REQUEST_KEYS = (
    "isl",
    "osl",
    "ttft_ms",
    "kv_bits",
    "chunk_tokens",
    "serving",
    "prefill_gpu",
    "decode_gpu",
    "percentile",
    "burstiness",
    "prefix_tokens",
    "prefix_hit_rate",
)
"""Whole-request keys handed to the question (prefill, TTFT, KV precision, chunked prefill, disaggregated pools and
their TTFT and TPOT percentile under arrivals of c_a^2 ``burstiness``, a cached prompt prefix; physics.md
10.1-10.4, physics/queueing.md)."""
MAX_NAME_CHARS = 64
"""Longest model name a fleet file may give (it labels every instance in tables and placements)."""
POOL_KEYS = ("prefill_gpu", "decode_gpu")
"""Keys of disaggregated pools only: the accelerators offered to each side."""
LOAD_KEYS = ("percentile", "burstiness")
"""Latency limits at a percentile under arrivals of c_a^2 ``burstiness``, for aggregated and pooled models alike."""
SERVING = ("agg", "disagg")
MODEL_KEYS = (
    "name",
    "model",
    "demand_req_s",
    "demand_tok_s",
    "demand_profile",
    "tpot_ms",
    "min_tok_s",
    "weight",
    *REQUEST_KEYS,
    *SPACE_KEYS,
)
UNLIMITED = "unlimited"
MIN_DEMAND_TOK_S = 1e-6
"""Smallest non-zero demand of a fleet model (one token in 11.6 days): with the 1e12 cap the MIP's demand rows span
at most 18 orders of magnitude, within what HiGHS's scaling keeps exact; a smaller one is almost surely a typo."""
MAX_FILE_BYTES = 1 << 20

QuestionFactory = Callable[..., Question]


def load_fleet_file(path: str | Path, make_question: QuestionFactory) -> Fleet:
    """Read and validate a fleet YAML file (a relative cluster path is looked up next to the file first)."""
    path = Path(path)
    if not path.is_file():
        why = "not a regular file" if path.exists() else f"no such file {path.absolute()}"
        raise InvalidInput("FLEET", f"must be an existing YAML file. Got {str(path)!r} instead ({why}).")
    where = str(path)
    text = files.read_text(path, where, MAX_FILE_BYTES, "a fleet file (a short YAML mapping)")
    try:
        return parse_fleet(files.load_yaml(text, where), make_question, base=path.parent)
    except InvalidInput as exc:
        if exc.field == where or exc.field.startswith(f"{where}: "):
            raise
        raise InvalidInput(f"{where}: {exc.field}", exc.message) from exc


def _mapping(field: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidInput(field, f"must be a mapping of keys to values. Got {type(value).__name__} instead.")
    return value


def _unknown(field: str, data: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
    for key in data:
        if key not in allowed:
            raise InvalidInput(f"{field}{key}", f"is not a fleet key; use {', '.join(allowed)}")


def parse_fleet(data: Any, make_question: QuestionFactory, base: Path | None = None) -> Fleet:
    """A validated Fleet from the file's structure (see the README section Fleet planning)."""
    data = _mapping("fleet", data)
    _unknown("", data, FLEET_KEYS)
    pool = _pool(data, base or Path("."))
    models_raw = data.get("models")
    if not isinstance(models_raw, list) or not models_raw:
        raise InvalidInput("models", "must be a non-empty list of models")
    models = []
    for i, raw in enumerate(models_raw):
        models.append(_model(f"models[{i}].", _mapping(f"models[{i}]", raw), pool, make_question))
    objective = checks.choice("objective", data.get("objective", "cost"), OBJECTIVES)
    for i, m in enumerate(models):
        if m.disaggregated and m.percentile is not None and objective != COST:
            msg = "needs objective cost: the queue's load is the model's whole demand (served objective: drop it)"
            raise InvalidInput(f"models[{i}].percentile", msg)
    names = [m.name for m in models]
    if len(set(names)) != len(names):
        raise InvalidInput("models", f"must have distinct names. Got {', '.join(names)} instead.")
    periods = {len(m.demand_tok_s) for m in models if len(m.demand_tok_s) > 1}
    if len(periods) > 1:
        raise InvalidInput("models", f"demand profiles must all have the same number of periods. Got {sorted(periods)}")
    if periods:
        n = periods.pop()
        models = [m if len(m.demand_tok_s) == n else _broadcast(m, n) for m in models]
    budget = data.get("max_usd_per_hour")
    return Fleet(
        models=tuple(models),
        pool=_with_kv_partners(pool, models),
        objective=objective,
        max_usd_per_hour=None if budget is None else checks.positive_float("max_usd_per_hour", budget),
        max_utilisation=checks.probability("max_utilisation", data.get("max_utilisation", 1.0), include_one=True),
        period_hours=checks.positive_float("period_hours", data.get("period_hours", 1.0)),
    )


def _with_kv_partners(pool: Pool, models: list[FleetModel]) -> Pool:
    """The pool with the KV transfer's partner spec of every (prefill, decode) type pair a disaggregated model
    offers."""
    partners = {}
    for m in models:
        if not m.disaggregated:
            continue
        q = m.question
        for p in (g for i, g in enumerate(q.gpus) if q.offers("prefill", i)):
            for d in (g for i, g in enumerate(q.gpus) if q.offers("disagg", i)):
                if (p.name, d.name) not in partners:
                    partners[p.name, d.name] = kv_partner(p, d, pool.cluster)
    return dataclasses.replace(pool, kv_partners=partners) if partners else pool


def _broadcast(m: FleetModel, n: int) -> FleetModel:
    return dataclasses.replace(m, demand_tok_s=m.demand_tok_s * n)


def _pool(data: Mapping[str, Any], base: Path) -> Pool:
    if ("cluster" in data) == ("gpus" in data):
        raise InvalidInput("cluster", "give exactly one of cluster (a graph file) and gpus (counts per type)")
    known = {g.name for g in catalog.list_gpus()}
    if "cluster" in data:
        graph, label = _graph(data["cluster"], base, known)
        counts: dict[str, int | None] = dict(topology.gpu_counts(graph))
        gpus = tuple(topology.effective_gpu(graph, t, catalog.load_gpu(t)) for t in counts)
        pool = Pool(gpus, counts, pool_domains(graph), graph, label)
    else:
        raw = _mapping("gpus", data["gpus"])
        counts = {}
        for name, value in raw.items():
            checks.choice("gpus", name, sorted(known))
            counts[name] = None if value == UNLIMITED else checks.positive_int(f"gpus.{name}", value, minimum=0)
        if not counts:
            raise InvalidInput("gpus", "must give at least one accelerator type")
        gpus = tuple(catalog.load_gpu(n) for n in counts)
        pool = Pool(gpus, counts)
    return _prices(pool, data.get("prices", {}))


def _graph(raw: Any, base: Path, known: set[str]) -> tuple[nx.Graph, str]:
    """A cluster graph from a file path, an inline compact mapping or a networkx graph, with a label for it."""
    if isinstance(raw, nx.Graph):
        return topology.validate_cluster(raw, known, "cluster"), str(raw.graph.get("name") or "cluster graph")
    if isinstance(raw, Mapping):
        graph = topology.validate_cluster(topology.from_spec(raw, "cluster"), known, "cluster")
        return graph, str(graph.graph.get("name") or "inline cluster")
    path = Path(str(raw))
    if not path.is_absolute() and (base / path).exists():
        path = base / path
    if not path.exists():
        places = dict.fromkeys(str(p.absolute()) for p in (base / path, path))
        msg = f"must be an existing cluster file. Got {str(raw)!r} instead (no such file {' nor '.join(places)})."
        raise InvalidInput("cluster", msg)
    return topology.load_cluster(str(path), known_gpus=known), str(raw)


def _prices(pool: Pool, raw: Any) -> Pool:
    raw = _mapping("prices", raw)
    reserved, on_demand = {}, {}
    for g in pool.gpus:
        given = _mapping(f"prices.{g.name}", raw.get(g.name, {}))
        for key in given:
            checks.choice(f"prices.{g.name}", key, ("reserved", "on_demand"))
        reserved[g.name] = checks.positive_float(
            f"prices.{g.name}.reserved", given.get("reserved", g.usd_per_hour * DEFAULT_RESERVED_FACTOR)
        )
        on_demand[g.name] = checks.positive_float(
            f"prices.{g.name}.on_demand", given.get("on_demand", g.usd_per_hour * DEFAULT_ON_DEMAND_FACTOR)
        )
    for name in raw:
        if name not in pool.counts:
            raise InvalidInput("prices", f"names {name!r}, not an accelerator of the pool ({', '.join(pool.counts)})")
    return dataclasses.replace(pool, reserved_usd_per_hour=reserved, on_demand_usd_per_hour=on_demand)


def _demand(where: str, raw: Mapping[str, Any], osl: int | None) -> tuple[tuple[float, ...], str, float | None]:
    keys = [k for k in ("demand_req_s", "demand_tok_s", "demand_profile") if k in raw]
    if len(keys) != 1:
        raise InvalidInput(f"{where}demand_tok_s", "give exactly one of demand_req_s, demand_tok_s, demand_profile")
    key = keys[0]
    value = raw[key]
    if key == "demand_profile":
        value = _mapping(f"{where}demand_profile", value)
        if len(value) != 1 or next(iter(value)) not in ("req_s", "tok_s"):
            raise InvalidInput(f"{where}demand_profile", "must be {req_s: [...]} or {tok_s: [...]} (one per period)")
        unit, value = next(iter(value.items()))
    else:
        unit = key.removeprefix("demand_")
    values = value if isinstance(value, list) else [value]
    if not values:
        raise InvalidInput(f"{where}{key}", "must give at least one period")
    profile = key == "demand_profile"
    numbers = [checks.positive_float(f"{where}{key}", v, allow_zero=profile) for v in values]
    tok_s = tuple(numbers)
    if unit == "req_s":
        if osl is None:
            raise InvalidInput(f"{where}osl", "is required with demand_req_s: output tokens per request")
        tok_s = tuple(v * osl for v in numbers)
    for given, rate in zip(values, tok_s, strict=True):
        if rate != 0 and not MIN_DEMAND_TOK_S <= rate <= MAX_DEMAND_TOK_S:
            zero = "0 (an idle period) or " if profile else ""
            msg = (
                f"must be {zero}a demand of {MIN_DEMAND_TOK_S:g} to {MAX_DEMAND_TOK_S:g} tok/s. Got "
                f"{checks.shown(given)} instead ({rate:g} tok/s)."
            )
            raise InvalidInput(f"{where}{key}", msg)
    return tok_s, unit, None if osl is None else float(osl)


def _name(field: str, value: Any) -> str:
    """A model's name in the plan (its instances are labelled ``name:role#i``): printable text, one line."""
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise InvalidInput(field, f"must be text. Got {checks.shown(value)} instead.")
    text = str(value).strip()
    if not text or len(text) > MAX_NAME_CHARS or not text.isprintable():
        msg = f"must be printable text of 1-{MAX_NAME_CHARS} characters on one line. Got {checks.shown(value)} instead."
        raise InvalidInput(field, msg)
    return text


def _model(where, raw, pool: Pool, make_question: QuestionFactory) -> FleetModel:
    _unknown(where, raw, MODEL_KEYS)
    if "model" not in raw:
        raise InvalidInput(f"{where}model", "is required: a catalog name, YAML card or config.json")
    name = _name(f"{where}name", raw["name"]) if "name" in raw else str(raw["model"])
    isl = None if "isl" not in raw else checks.positive_int(f"{where}isl", raw["isl"], minimum=0)
    osl = None if "osl" not in raw else checks.positive_int(f"{where}osl", raw["osl"])
    demand, unit, per_request = _demand(where, raw, osl)
    if "tpot_ms" in raw and "min_tok_s" in raw:
        raise InvalidInput(f"{where}tpot_ms", "give one of tpot_ms and min_tok_s")
    limit = None
    if "tpot_ms" in raw:
        limit = checks.positive_float(f"{where}tpot_ms", raw["tpot_ms"]) / 1e3
    elif "min_tok_s" in raw:
        limit = 1.0 / checks.positive_float(f"{where}min_tok_s", raw["min_tok_s"])
    space = {k: raw[k] for k in SPACE_KEYS if k in raw}
    serving = checks.choice(f"{where}serving", raw.get("serving", "agg"), SERVING)
    for key in POOL_KEYS:
        if key in raw and serving != "disagg":
            raise InvalidInput(f"{where}{key}", "applies to disaggregated pools only: give serving: disagg")
    if "percentile" in raw and "ttft_ms" not in raw and "tpot_ms" not in raw:
        msg = "is the percentile of the TTFT and TPOT limits: give ttft_ms or tpot_ms too"
        raise InvalidInput(f"{where}percentile", msg)
    if isl is not None:
        space.update(isl=isl, osl=osl)
    passed: tuple[str, ...] = ("ttft_ms", "kv_bits", "chunk_tokens", "prefix_tokens", "prefix_hit_rate")
    passed += (*POOL_KEYS, *LOAD_KEYS)
    if "percentile" in raw and "tpot_ms" in raw:
        passed += ("tpot_ms",)  # instances are then sized for the TPOT at that percentile (the question's batch cap)
    space.update({k: raw[k] for k in passed if k in raw})
    space["serving"] = serving
    question = _question(where, make_question, raw["model"], pool, space)
    return FleetModel(
        name=name,
        question=question,
        demand_tok_s=demand,
        demand_unit=unit,
        tok_per_request=per_request,
        max_time_per_token_s=limit,
        weight=checks.positive_float(f"{where}weight", raw.get("weight", 1.0)),
    )


def _question(where: str, make_question: QuestionFactory, model: Any, pool: Pool, space: dict) -> Question:
    """The model's Question over the pool's accelerators (effective specs of the graph when there is one)."""
    try:
        q = make_question(model, list(pool.gpus), **space)
    except InvalidInput as exc:
        raise InvalidInput(f"{where}{exc.field}", exc.message) from exc
    return q
