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
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

import numpy as np

from roofline_opt import api, catalog, checks
from roofline_opt.catalog.parse import read_yaml
from roofline_opt.errors import InvalidInput
from roofline_opt.physics.specs import WEIGHT_BITS, GpuSpec, ModelSpec

STUDY_KEYS = ("name", "kind", "fixed", "axes", "questions", "summary")
SUMMARY_KEYS = ("x", "y", "facet")
"""What a study's ``summary`` may set (``study/summary.py``): the horizontal axis, the figure, the facet input."""
ALIASES = {"time_limit": "time_limit_s"}
"""Flag names whose API parameter is spelled differently (``--time-limit`` is ``time_limit_s``)."""
NOT_INPUTS = ("q", "progress")
"""API parameters a study does not set: the question object and the progress callback."""
MAX_QUESTIONS = 1_000_000
ID_CHARS = 20
"""Hex digits of a question id."""
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


Progress = Callable[[int, int], None]
"""Told (questions done, total) while a study's questions are made."""
PROGRESS_EVERY = 10_000
"""Questions between two progress calls while a study loads."""


class Questions(Sequence[StudyQuestion]):
    """A study's questions, made when asked for: a million questions are their inputs' spec (``fixed``, ``axes``,
    explicit ``rows``) and three compact arrays filled in one pass at load time (ids, a digest of each question's
    inputs but its target, the target's sort order), not a million objects (docs/how-to/study.md, "Memory").

    The grid is the product of the axes in file order, the last axis varying fastest (``itertools.product``); the
    explicit questions follow it.
    """

    def __init__(
        self,
        kind: str,
        defaults: Mapping[str, Any],
        fixed: Mapping[str, Any],
        axes: Mapping[str, list[Any]],
        rows: list[dict[str, Any]],
        progress: Progress | None = None,
    ) -> None:
        self.kind = kind
        self._defaults = dict(defaults)
        self._fixed = dict(fixed)
        self._axes = {k: list(v) for k, v in axes.items()}
        self._rows = rows
        self._grid = math.prod(len(v) for v in self._axes.values()) if self._axes else 0
        self._radix = [len(v) for v in self._axes.values()]
        n = self._grid + len(rows)
        self.ids = np.empty(n, dtype=f"S{ID_CHARS}")
        """Each question's id (ASCII), in study order."""
        self.group_keys = np.empty(n, dtype="S16")
        """A digest of each question's inputs but its target: questions with equal keys share tables."""
        self.target_rank = np.empty(n, dtype=np.int8)
        self.target_value = np.empty(n, dtype=float)
        """The order of the targets within a group: numbers ascending, then no target, then text (invalid rows)."""
        target = api.TARGETS.get(kind)
        for i in range(n):
            if progress is not None and i % PROGRESS_EVERY == 0:
                progress(i, n)
            resolved = self.resolved(i)
            self.ids[i] = question_id(kind, resolved).encode()
            self.group_keys[i] = group_digest(resolved, target)
            self.target_rank[i], self.target_value[i] = target_order(resolved.get(target) if target else None)
        if progress is not None:
            progress(n, n)

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, index: int) -> StudyQuestion: ...

    @overload
    def __getitem__(self, index: slice) -> list[StudyQuestion]: ...

    def __getitem__(self, index: int | slice) -> StudyQuestion | list[StudyQuestion]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        i = range(len(self))[index]
        return StudyQuestion(self.ids[i].decode(), self.kind, tuple(sorted(self.resolved(i).items())))

    def given(self, i: int) -> dict[str, Any]:
        """The inputs the study file sets for question ``i`` (fixed values, then its grid point or its row)."""
        if i >= self._grid:
            return {**self._fixed, **self._rows[i - self._grid]}
        point: dict[str, Any] = {}
        for (key, values), size in zip(reversed(self._axes.items()), reversed(self._radix), strict=True):
            i, digit = divmod(i, size)
            point[key] = values[digit]
        return {**self._fixed, **{k: point[k] for k in self._axes}}

    def resolved(self, i: int) -> dict[str, Any]:
        """Every input of question ``i``: the API's defaults with the study's values over them."""
        return {**self._defaults, **self.given(i)}

    def values_of(self, key: str) -> list[Any]:
        """The distinct values input ``key`` takes over the study (None where a question lacks it), from the spec."""
        values: list[Any] = []
        if self._grid:
            values += self._axes[key] if key in self._axes else [self._fixed.get(key, self._defaults.get(key))]
        values += [row.get(key, self._fixed.get(key, self._defaults.get(key))) for row in self._rows]
        return list({repr(v): v for v in values}.values())


@dataclass(frozen=True)
class Study:
    """A parsed study: its questions in file order, the keys its file sets, and summary options."""

    name: str
    kind: str
    questions: Questions
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


def load_study(path: str | Path, progress: Progress | None = None) -> Study:
    """Parse and check a study file (one that ships, ``instances/studies/hbm-value.yaml``, from any folder); any
    problem is InvalidInput naming the file and the key. ``progress(done, total)`` is called as the questions' ids
    are made (about 10 s per 100,000 questions here)."""
    path = Path(catalog.data_file(str(path)))
    if not path.is_file():
        raise InvalidInput("study", f"must be an existing YAML file. Got {str(path)!r} instead (no such file).")
    data = read_yaml(path, "a study file")
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
    required = [k for k, v in defaults.items() if v is inspect.Parameter.empty]
    shapes = ([({**fixed, **dict.fromkeys(axes)}, 1)] if grid_size else []) + [
        ({**fixed, **row}, grid_size + i + 1) for i, row in enumerate(rows)
    ]
    for given, number in shapes:
        missing = [k for k in required if k not in given]
        if missing:
            shown = {**fixed, **(rows[number - grid_size - 1] if number > grid_size else _first_point(axes))}
            raise InvalidInput(f"{path}: question {number}", f"must set {', '.join(missing)}. Got {shown!r} instead.")
    keys = tuple(dict.fromkeys([*fixed, *(axes if grid_size else ()), *(k for row in rows for k in row)]))
    resolved_defaults = {k: _canonical(v) for k, v in defaults.items() if v is not inspect.Parameter.empty}
    questions = Questions(kind, resolved_defaults, fixed, axes, rows, progress)
    summary = _summary(_mapping(data.get("summary"), f"{path}: summary"), f"{path}: summary", keys)
    return Study(str(data.get("name") or path.stem), kind, questions, keys, summary, path)


def _summary(raw: Mapping[Any, Any], where: str, keys: tuple[str, ...]) -> dict[str, str]:
    """The ``summary`` options, checked before any question runs: only ``SUMMARY_KEYS``, and x and facet must name
    an input the study sets (its ``in_`` columns). y names an output column, known only once questions answer: the
    summary checks it (``summary.layout``)."""
    summary = {checks.choice(f"{where}: key", str(k), SUMMARY_KEYS): str(v) for k, v in raw.items()}
    for name in ("x", "facet"):
        if name in summary:
            flag = summary[name].strip().lstrip("-").replace("-", "_")
            summary[name] = checks.choice(f"{where}: {name}", ALIASES.get(flag, flag), keys)
    return summary


def _first_point(axes: Mapping[str, list[Any]]) -> dict[str, Any]:
    return {k: v[0] for k, v in axes.items()}


def group_digest(resolved: Mapping[str, Any], target: str | None) -> bytes:
    text = repr(sorted((k, v) for k, v in resolved.items() if k != target))
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def target_order(value: Any) -> tuple[int, float]:
    """Targets ascending, no target after them, values that are not numbers (invalid rows) last."""
    if value is None:
        return (1, 0.0)
    try:
        number = float(value)
    except (TypeError, ValueError):
        return (2, 0.0)
    return (2, 0.0) if math.isnan(number) else (0, number)


def named_files(study: Study) -> tuple[str, ...]:
    """The files the study's questions name (cards by path, clusters, workloads, fleets): inputs no output may
    replace."""
    values = {v for key in PATH_KEYS for v in study.questions.values_of(key) if isinstance(v, str)}
    names = {name.strip() for value in values for name in value.split(",")}
    return tuple(sorted(n for n in names if n and os.path.isfile(n)))


def question_id(kind: str, resolved: Mapping[str, Any]) -> str:
    """A hash of the kind, the resolved inputs and the content of every card and file they name."""
    cards = {k: _fingerprint(k, str(resolved[k])) for k in PATH_KEYS if resolved.get(k) is not None}
    text = json.dumps({"kind": kind, "inputs": dict(resolved), "cards": cards}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:ID_CHARS]


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
