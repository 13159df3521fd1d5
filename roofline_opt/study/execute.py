"""Answering a batch of study questions on a worker: every outcome becomes a row, never an exception.

Questions that differ only in their target (fastest's budget, cheapest's speed) share one prepared question: its
tables and persistent HiGHS model are built once per worker thread and only the target is pushed before each
re-solve, as a frontier does. Other questions go through the public API call of their kind unchanged.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from roofline_opt import api, catalog, checks
from roofline_opt.catalog.parse import GPU_FRACTIONS
from roofline_opt.errors import Infeasible, InvalidInput, SolverFailure
from roofline_opt.study.spec import (
    CARD_FIELDS,
    CARD_FLOP_FIELDS,
    PLAN,
    query_functions,
    query_parameters,
    question_parameters,
)

CACHED_QUESTIONS = 16
"""Prepared questions kept per worker thread (least recently used dropped first)."""
REUSE_PARAMETERS = ("time_limit_s", "mip_gap")
"""Query parameters a prepared question carries besides its target."""
STATUSES = ("ok", "infeasible", "invalid", "solver_failure", "error")
ROW_KEYS = ("question_id", "kind", "status", "message", "reason")
"""A row's own fields; an answer field of the same name is kept as ``answer_<name>``."""

_local = threading.local()


def _cache() -> OrderedDict[str, Any]:
    if not hasattr(_local, "cache"):
        _local.cache = OrderedDict()
    return _local.cache


def _cached(key: str, build: Callable[[], Any]) -> Any:
    """The value built for ``key`` on this thread (an exception raised by ``build`` is cached and re-raised)."""
    cache = _cache()
    if key not in cache:
        try:
            cache[key] = build()
        except (InvalidInput, Infeasible) as exc:
            cache[key] = exc
        while len(cache) > CACHED_QUESTIONS:
            cache.popitem(last=False)
    cache.move_to_end(key)
    value = cache[key]
    if isinstance(value, Exception):
        raise value
    return value


def card_overrides(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The accelerator card fields a question sets, checked (positive numbers, whole numbers for counts, shares of a
    nominal figure in (0, 1])."""
    out: dict[str, Any] = {}
    for name in CARD_FIELDS:
        value = inputs.get(name)
        if value is None:
            continue
        if name == "scaleup_gpus":
            out[name] = checks.positive_int(name, value)
        elif name in GPU_FRACTIONS:
            out[name] = checks.probability(name, value, include_one=True)
        else:
            out[name] = checks.positive_float(name, value)
    return out


def hypothetical_gpus(gpu: Any, overrides: Mapping[str, Any]) -> tuple[Any, ...] | Any:
    """The question's accelerators with the card fields replaced (the names unchanged); ``gpu`` as is without any."""
    if not overrides:
        return gpu
    if gpu is None:
        raise InvalidInput(next(iter(overrides)), "needs --gpu to name the accelerator it changes. Got none instead.")
    specs = []
    for name in checks.parse_name_list("gpu", str(gpu)):
        spec = catalog.load_gpu(name)
        flops = {CARD_FLOP_FIELDS[k]: v for k, v in overrides.items() if k in CARD_FLOP_FIELDS}
        fields = {k: v for k, v in overrides.items() if k not in CARD_FLOP_FIELDS}
        specs.append(spec.with_figures(flops, **fields))
    return tuple(specs)


def build_question(inputs: Mapping[str, Any]) -> Any:
    """The api.Question of a study question's inputs (accelerator card fields applied)."""
    overrides = card_overrides(inputs)
    if overrides and inputs.get("cluster") is not None:
        field = next(iter(overrides))
        raise InvalidInput(field, "cannot change the cards of a cluster's accelerators. Got a --cluster instead.")
    params = question_parameters()
    kwargs = {k: inputs[k] for k in params if k in inputs}
    kwargs["gpu"] = hypothetical_gpus(kwargs.get("gpu"), overrides)
    return api.question(**api.split_lists(kwargs))


def _space_key(inputs: Mapping[str, Any]) -> str:
    names = (*question_parameters(), *CARD_FIELDS)
    return json.dumps({k: inputs.get(k) for k in names}, sort_keys=True, default=str)


def _reusable(kind: str, query: Mapping[str, Any]) -> bool:
    """Only the target and the solver options differ from the defaults, and the method is the MIP."""
    if kind not in api.TARGETS:
        return False
    target = api.TARGETS[kind]
    defaults = query_parameters(kind)
    return query.get("method", "mip") == "mip" and all(
        v == defaults.get(k) for k, v in query.items() if k not in (target, *REUSE_PARAMETERS, "method")
    )


def answer_record(kind: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The answer's fields of one question, as the single-question API call gives them."""
    if kind == PLAN:
        return plan_record(api.plan(**{k: inputs[k] for k in query_parameters(kind) if k in inputs}))
    space = _space_key(inputs)
    q = _cached("q" + space, lambda: build_question(inputs))
    query = {k: inputs[k] for k in query_parameters(kind) if k in inputs}
    if _reusable(kind, query):
        options = {k: query[k] for k in REUSE_PARAMETERS if k in query}
        key = "p" + space + json.dumps(options, sort_keys=True, default=str)
        prep = _cached(key, lambda: api.prepared(q, **options))
        try:
            return api.target_answer(prep, kind, query.get(api.TARGETS[kind])).to_record()
        except (Infeasible, InvalidInput):
            raise
        except Exception:  # a failed solve may leave the loaded model half-changed: the next target rebuilds it
            _cache().pop(key, None)
            raise
    result = query_functions()[kind](q, **query)
    if kind == "frontier":
        return frontier_record(result)
    return result.to_record()


def frontier_record(frame: Any) -> dict[str, Any]:
    """The preferred point's fields, the frontier's extremes and every point (JSON) as one row."""
    record = frame[frame["preferred"]].iloc[0].to_dict()
    record.pop("preferred", None)
    record["frontier_points"] = len(frame)
    record["frontier_max_tok_s_per_request"] = float(frame["tok_s_per_request"].max())
    record["frontier_min_usd_per_mtok"] = float(frame["usd_per_mtok"].min())
    record["frontier_json"] = frame.to_json(orient="records", double_precision=15)
    return record


def plan_record(plan: Any) -> dict[str, Any]:
    """A fleet plan as one row: the cluster's and the solve's figures, models and layouts as JSON."""
    record = {k: v for k, v in plan.cluster.items() if k != "name"}
    names = {"status": "solver_status"}
    record.update({names.get(k, f"solve_{k}" if k in record else k): v for k, v in plan.solve.items()})
    record["models_json"] = json.dumps(plan.models, default=str)
    record["rows_json"] = json.dumps(plan.rows, default=str)
    return record


def _flat(record: Mapping[str, Any]) -> dict[str, Any]:
    """Nested values (a cluster placement) as JSON text, so every column is a plain Parquet type."""
    return {k: json.dumps(v, default=str) if isinstance(v, (dict, list, tuple)) else v for k, v in record.items()}


def answer_row(kind: str, question_id: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """One question's row: id, status, message, reason, seconds and the answer's fields (absent when unanswered)."""
    start = time.perf_counter()
    row: dict[str, Any] = dict.fromkeys(ROW_KEYS) | {"question_id": question_id, "kind": kind, "status": "ok"}
    try:
        record = _flat(answer_record(kind, inputs))
        row.update({f"answer_{k}" if k in ROW_KEYS else k: v for k, v in record.items()})
    except Infeasible as exc:
        row.update(status="infeasible", message=str(exc), reason=exc.reason)
    except InvalidInput as exc:
        row.update(status="invalid", message=str(exc), reason=exc.field)
    except SolverFailure as exc:
        row.update(status="solver_failure", message=str(exc))
    except Exception as exc:  # a bug or a broken environment: the row says so and the study goes on
        row.update(status="error", message=f"{type(exc).__name__}: {' '.join(str(exc).split())}")
    row["question_solve_s"] = time.perf_counter() - start
    return row


def answer_batch(kind: str, items: Sequence[tuple[str, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Rows of a batch of (question id, inputs), in order."""
    return [answer_row(kind, qid, inputs) for qid, inputs in items]


@dataclasses.dataclass(frozen=True)
class Batch:
    """The unit of work sent to a Dask worker, as one object: Dask walks every list, tuple and dict among a task's
    arguments looking for futures, which for a study's inputs (some 40 per question) cost the driver more than
    sending them."""

    kind: str
    items: tuple[tuple[str, Mapping[str, Any]], ...]


@dataclasses.dataclass(frozen=True)
class Answers:
    """A task's rows returned as one object: Dask sizes and serialises a returned list item by item (some 50 dicts of
    40 values), which cost the worker and the driver about 7 ms of CPU per task, more than pickling them at once."""

    rows: tuple[dict[str, Any], ...]


def answer_task(batch: Batch) -> Answers:
    """Rows of a task's batch, in order (what a Dask worker runs)."""
    return Answers(tuple(answer_batch(batch.kind, batch.items)))
