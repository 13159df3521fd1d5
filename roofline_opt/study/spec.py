"""Study files: axes whose product is the grid and/or explicit questions, resolved and identified by a hash.

A study file (YAML) holds ``kind`` (the query of every question), optional ``fixed`` values shared by every question,
``axes`` (lists whose product is the grid) and ``questions`` (explicit mappings). Keys are the flags of the query
command (``max_usd_per_mtok``, ``context``, ``weight_bits`` ...; dashes or underscores) and accelerator card fields
for hypothetical parts (``hbm_bytes_per_s``, ``flop_per_s_16bit`` ...), applied to every accelerator of the question.

A question's id hashes its resolved inputs: every parameter with its default filled in, plus the content of the
cards and cluster file it names, so editing a card makes its questions new while reordering the file does not.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import itertools
import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roofline_opt import api, catalog, checks
from roofline_opt.catalog.parse import read_yaml
from roofline_opt.errors import InvalidInput
from roofline_opt.physics.specs import WEIGHT_BITS, GpuSpec, ModelSpec

STUDY_KEYS = ("name", "kind", "fixed", "axes", "questions", "summary")
ALIASES = {"time_limit": "time_limit_s"}
"""Flag names whose API parameter is spelled differently (``--time-limit`` is ``time_limit_s``)."""
NOT_INPUTS = ("q", "progress")
"""API parameters a study does not set: the question object and the progress callback."""
MAX_QUESTIONS = 1_000_000
INTEGER_BELOW = 1e9
"""Integral numbers below this are integers (8000.0 is 8000); larger ones (bytes/s, FLOP/s) stay floats."""
CARD_FLOP_FIELDS = {f"flop_per_s_{bits}bit": bits for bits in WEIGHT_BITS}
"""Pseudo card fields for one precision's dense FLOP/s (``flop_per_s_by_bits[bits]`` of the card)."""
CARD_FIELDS = tuple(
    f.name for f in dataclasses.fields(GpuSpec) if f.type in ("float", "int") and f.name != "name"
) + tuple(CARD_FLOP_FIELDS)
"""Accelerator card fields a study may set for hypothetical parts."""
MODEL_KEYS, GPU_KEYS = ("model", "draft"), ("gpu", "prefill_gpu", "decode_gpu")
FILE_KEYS = ("cluster", "workload", "fleet")
PROFILE_KEYS = ("profile", "engine")
"""Engine profiles (a packaged name or a YAML file): the profile's content is part of a question's id."""
PATH_KEYS = (*MODEL_KEYS, *GPU_KEYS, *FILE_KEYS, *PROFILE_KEYS)
"""Inputs that name cards or files: their content is part of a question's id."""


def query_functions() -> dict[str, Callable[..., Any]]:
    """The API function answering each query kind; ``plan`` joins when the API has it."""
    kinds: dict[str, Callable[..., Any]] = {
        "fastest": api.fastest_answer,
        "cheapest": api.cheapest_answer,
        "frontier": api.frontier_frame,
    }
    if hasattr(api, "plan"):
        kinds["plan"] = api.plan
    return kinds


PLAN = "plan"
"""The fleet query: its inputs are api.plan's (a fleet file per question), not a single model's question."""


def _parameters(function: Callable[..., Any]) -> dict[str, Any]:
    """Parameter name -> default (inspect.Parameter.empty when required) of an API function."""
    params = inspect.signature(function).parameters.values()
    return {p.name: p.default for p in params if p.name not in NOT_INPUTS and p.kind is not p.VAR_KEYWORD}


def question_parameters(kind: str | None = None) -> dict[str, Any]:
    """Parameters of api.question (none for a fleet plan, whose file holds its models' questions)."""
    return {} if kind == PLAN else _parameters(api.question)


def query_parameters(kind: str) -> dict[str, Any]:
    return _parameters(query_functions()[kind])


@dataclass(frozen=True, slots=True)
class StudyQuestion:
    """One question of a study: its resolved inputs (every parameter, defaults filled in) and its id."""

    id: str
    kind: str
    inputs: tuple[tuple[str, Any], ...]

    @property
    def values(self) -> dict[str, Any]:
        return dict(self.inputs)


@dataclass(frozen=True)
class Study:
    """A parsed study: its questions in file order, the keys its file sets, and summary options."""

    name: str
    kind: str
    questions: tuple[StudyQuestion, ...]
    keys: tuple[str, ...]
    summary: Mapping[str, str]
    path: Path


def _key(raw: Any, where: str, known: tuple[str, ...]) -> str:
    key = str(raw).strip().lstrip("-").replace("-", "_")
    return checks.choice(where, ALIASES.get(key, key), known)


def _value(key: str, raw: Any, where: str) -> Any:
    """A YAML value as a flag would give it: lists become comma-separated text, numbers numbers (integral ones
    integers), so that 8000, 8000.0 and "8e3" are the same input."""
    if isinstance(raw, (list, tuple)):
        if not raw or any(isinstance(v, (list, tuple, dict)) for v in raw):
            raise InvalidInput(f"{where}: {key}", f"must be a value or a flat list. Got {raw!r} instead.")
        return ",".join(str(_value(key, v, where)) for v in raw)
    if isinstance(raw, dict):
        raise InvalidInput(f"{where}: {key}", f"must be a value or a list. Got a mapping {raw!r} instead.")
    if isinstance(raw, str):
        raw = raw.strip()
        try:  # YAML 1.1 reads 3.35e12 (no dot in the mantissa, no sign in the exponent) as text
            raw = float(raw) if raw.lower() not in ("nan", "inf", "-inf", "infinity") else raw
        except ValueError:
            return raw
    if isinstance(raw, float) and math.isfinite(raw) and raw.is_integer() and abs(raw) < INTEGER_BELOW:
        return int(raw)
    return raw


def _mapping(raw: Any, where: str) -> dict[Any, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise InvalidInput(where, f"must be a mapping of flag: value. Got {raw!r} instead.")
    return raw


def _canonical(value: Any) -> Any:
    """Defaults of API signatures in the study's spelling (tuples as comma-separated text)."""
    if isinstance(value, (tuple, list)):
        return ",".join(str(v) for v in value)
    return value


def load_study(path: str | Path) -> Study:
    """Parse and check a study file (one that ships, ``instances/studies/hbm-value.yaml``, from any folder); any
    problem is InvalidInput naming the file and the key."""
    path = Path(catalog.data_file(str(path)))
    if not path.is_file():
        raise InvalidInput("study", f"must be an existing YAML file. Got {str(path)!r} instead (no such file).")
    data = read_yaml(path)
    for key in data:
        checks.choice(f"{path}: key", key, STUDY_KEYS)
    kind = checks.choice(f"{path}: kind", data.get("kind"), query_functions())
    defaults = {**question_parameters(kind), **query_parameters(kind)}
    known = (*defaults, *(() if kind == PLAN else CARD_FIELDS))
    fixed = {
        _key(k, f"{path}: fixed", known): _value(str(k), v, f"{path}: fixed")
        for k, v in _mapping(data.get("fixed"), f"{path}: fixed").items()
    }
    axes: dict[str, list[Any]] = {}
    for k, v in _mapping(data.get("axes"), f"{path}: axes").items():
        values = v if isinstance(v, list) else [v]
        if not values:
            raise InvalidInput(f"{path}: axes: {k}", "must list at least one value. Got an empty list instead.")
        axes[_key(k, f"{path}: axes", known)] = [_value(str(k), x, f"{path}: axes") for x in values]
    explicit = data.get("questions") or []
    if not isinstance(explicit, list):
        raise InvalidInput(f"{path}: questions", f"must be a list of mappings. Got {explicit!r} instead.")
    rows = []
    for i, raw in enumerate(explicit, start=1):
        where = f"{path}: questions[{i}]"
        rows.append({_key(k, where, known): _value(str(k), v, where) for k, v in _mapping(raw, where).items()})
    grid_size = math.prod(len(v) for v in axes.values()) if axes else 0
    if grid_size + len(rows) == 0:
        raise InvalidInput(f"{path}: axes", "must list at least one axis, or give questions. Got neither instead.")
    if grid_size + len(rows) > MAX_QUESTIONS:
        raise InvalidInput(f"{path}: axes", f"must make at most {MAX_QUESTIONS} questions. Got {grid_size} instead.")
    grid = [dict(zip(axes, combo, strict=True)) for combo in itertools.product(*axes.values())] if axes else []
    given = [{**fixed, **row} for row in [*grid, *rows]]
    required = [k for k, v in defaults.items() if v is inspect.Parameter.empty]
    keys = tuple(dict.fromkeys(k for q in given for k in q))
    questions = []
    pool: dict[tuple[str, Any], tuple[str, Any]] = {}
    for i, q in enumerate(given):
        missing = [k for k in required if k not in q]
        if missing:
            raise InvalidInput(f"{path}: question {i + 1}", f"must set {', '.join(missing)}. Got {q!r} instead.")
        resolved = {k: _canonical(v) for k, v in defaults.items() if v is not inspect.Parameter.empty}
        resolved.update(q)
        inputs = tuple(_shared(item, pool) for item in sorted(resolved.items()))
        questions.append(StudyQuestion(question_id(kind, resolved), kind, inputs))
    summary = {str(k): str(v) for k, v in _mapping(data.get("summary"), f"{path}: summary").items()}
    return Study(str(data.get("name") or path.stem), kind, tuple(questions), keys, summary, path)


def _shared(item: tuple[str, Any], pool: dict[tuple[str, Any], tuple[str, Any]]) -> tuple[str, Any]:
    """One object for every equal (key, value) pair of a study's questions: a million questions share their fixed
    and default inputs instead of holding a copy each."""
    try:
        return pool.setdefault(item, item)
    except TypeError:  # an unhashable default is kept as it is
        return item


def named_files(study: Study) -> tuple[str, ...]:
    """The files the study's questions name (cards by path, clusters, workloads, fleets): inputs no output may
    replace."""
    names = {
        name.strip()
        for q in study.questions
        for key, value in q.inputs
        if key in PATH_KEYS and isinstance(value, str)
        for name in value.split(",")
    }
    return tuple(sorted(n for n in names if n and os.path.isfile(n)))


def question_id(kind: str, resolved: Mapping[str, Any]) -> str:
    """A hash of the kind, the resolved inputs and the content of every card and file they name."""
    cards = {k: _fingerprint(k, str(resolved[k])) for k in PATH_KEYS if resolved.get(k) is not None}
    text = json.dumps({"kind": kind, "inputs": dict(resolved), "cards": cards}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


@functools.cache
def _fingerprint(key: str, value: str) -> str:
    """Content of the cards or file a value names ("invalid" when it names none: the worker reports why)."""
    try:
        if key in FILE_KEYS:
            return hashlib.sha256(Path(value).read_bytes()).hexdigest()
        if key in PROFILE_KEYS:
            from roofline_opt.catalog.profiles import load_profile

            return hashlib.sha256(repr(load_profile(value, key)).encode()).hexdigest()
        specs: list[GpuSpec] | list[ModelSpec]
        if key in GPU_KEYS:
            specs = [catalog.load_gpu(name) for name in checks.parse_name_list(key, value)]
        else:
            specs = [catalog.resolve_model(value, key)[0]]
    except (InvalidInput, OSError):
        return "invalid"
    return hashlib.sha256(repr([dataclasses.asdict(s) for s in specs]).encode()).hexdigest()
