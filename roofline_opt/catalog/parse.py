"""Card files read (bounded) and turned into checked specs, each bad field named with what would be valid."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from typing import Any

from roofline_opt import checks, files
from roofline_opt.errors import InvalidInput
from roofline_opt.physics.specs import FP4_FORMATS, SCALEUP_TOPOLOGIES, WEIGHT_BITS, GpuSpec, ModelSpec


def read_text(path: Path, what: str = "a card") -> str:
    """A card's text (or ``what`` else), at most files.MAX_CARD_BYTES long."""
    return files.read_text(path, str(path), files.MAX_CARD_BYTES, what)


def read_yaml(path: Path, what: str = "a card") -> dict[str, Any]:
    """The mapping a YAML card (or ``what`` else, as the size limit's message names it) holds (bounded: see
    files.load_yaml); syntax errors and non-mappings name the file."""
    return require_mapping(path, files.load_yaml(read_text(path, what), str(path)))


def read_json(path: Path) -> dict[str, Any]:
    """The object a JSON file holds (bounded: see files.load_json)."""
    return require_mapping(path, files.load_json(read_text(path), str(path)))


def require_mapping(path: Path, data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        msg = f"must hold a mapping of field: value. Got a {type(data).__name__} instead."
        raise InvalidInput(str(path), msg)
    return data


MAX_CARD_NUMBER = 1e300
"""Largest number a card field takes: products of a few card numbers must stay finite."""


Spec = typing.TypeVar("Spec", ModelSpec, GpuSpec)


def spec_from_mapping(cls: type[Spec], data: dict[str, Any], where: str) -> Spec:
    """Check every field of ``data`` against the dataclass ``cls`` (types, ranges, required) and build it."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key in data:
        checks.choice(f"{where}: {key}", key, fields)
    hints = typing.get_type_hints(cls)
    values = {}
    for name, f in fields.items():
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if name not in data:
            if required:
                raise InvalidInput(f"{where}: {name}", f"is missing: a {cls.__name__} needs it")
            continue
        zero_ok = f.default == 0 or f.default_factory is dict
        values[name] = _field_value(f"{where}: {name}", hints[name], data[name], zero_ok=zero_ok)
    spec = cls(**values)
    _check_consistency(spec, where)
    return spec


def _field_value(field: str, hint: Any, value: Any, zero_ok: bool) -> Any:
    """One card value converted to the field's type, or InvalidInput naming the field."""
    if hint is bool:
        if not isinstance(value, bool):
            raise InvalidInput(field, f"must be true or false. Got {checks.shown(value)} instead.")
        return value
    if hint is int:
        return checks.positive_int(field, value, minimum=0 if zero_ok else 1)
    if hint is float:
        return checks.positive_float(field, value, allow_zero=zero_ok, maximum=MAX_CARD_NUMBER)
    if hint is str:
        if not isinstance(value, str):
            raise InvalidInput(field, f"must be a text. Got {checks.shown(value)} instead.")
        return value
    if typing.get_origin(hint) is dict:
        return _flop_rates(field, value, empty_ok=zero_ok)
    msg = f"no card reader for fields of type {hint}"
    raise TypeError(msg)


def _flop_rates(field: str, value: Any, empty_ok: bool = False) -> dict[int, float]:
    """``{16: 1e15, 8: 2e15}``: FLOP/s per weight bits; a null rate is the same as an absent one (``empty_ok``: a
    field that may give none, such as ``notebook_flop_per_s_by_bits``)."""
    if not isinstance(value, dict):
        like = "{16: 1.0e+15, 8: 2.0e+15}"
        msg = f"must be a mapping of weight bits to FLOP/s, like {like}. Got {checks.shown(value)} instead."
        raise InvalidInput(field, msg)
    top = MAX_CARD_NUMBER
    rates = {
        checks.choice(field, bits, WEIGHT_BITS): checks.positive_float(f"{field}[{bits}]", rate, maximum=top)
        for bits, rate in value.items()
        if rate is not None
    }
    if not rates and not empty_ok:
        raise InvalidInput(field, "must give a FLOP rate for at least one weight precision")
    return rates


def _check_consistency(spec: ModelSpec | GpuSpec, where: str) -> None:
    """Cross-field rules a spec must meet for the formulas to mean anything."""
    if not spec.name.strip():
        raise InvalidInput(f"{where}: name", "must be a non-empty text. Got '' instead.")
    if isinstance(spec, ModelSpec):
        _check_model_consistency(spec, where)
    else:
        _check_gpu_consistency(spec, where)


GPU_FRACTIONS = ("scaleup_link_efficiency", "achievable_hbm_fraction", "achievable_flop_fraction")
"""Card fields that are shares of a nominal figure: in (0, 1]."""


def _check_gpu_consistency(gpu: GpuSpec, where: str) -> None:
    """A known scale-up topology and FP4 format, and measured shares of the nominal figures no larger than them."""
    checks.choice(f"{where}: scaleup_topology", gpu.scaleup_topology, SCALEUP_TOPOLOGIES)
    if gpu.fp4_format:
        checks.choice(f"{where}: fp4_format", gpu.fp4_format, tuple(FP4_FORMATS))
    for name in GPU_FRACTIONS:
        checks.probability(f"{where}: {name}", getattr(gpu, name), include_one=True)


def _check_model_consistency(model: ModelSpec, where: str) -> None:
    """Experts, heads and dense layers must be consistent with each other."""
    if model.n_active_experts > model.n_experts:
        msg = f"must be <= n_experts ({model.n_experts}). Got {model.n_active_experts} instead."
        raise InvalidInput(f"{where}: n_active_experts", msg)
    if not model.is_mla and model.n_q_heads % model.group_size:
        msg = f"must divide n_q_heads ({model.n_q_heads}). Got {model.group_size} instead."
        raise InvalidInput(f"{where}: group_size", msg)
    if model.n_dense_layers >= model.n_layers:
        msg = f"must be < n_layers ({model.n_layers}). Got {model.n_dense_layers} instead."
        raise InvalidInput(f"{where}: n_dense_layers", msg)
