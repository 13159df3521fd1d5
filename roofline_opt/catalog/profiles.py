"""Engine profiles as YAML: the packaged ones (``instances/profiles/``, like accelerator cards) and users' files.

``load_profile("vllm")`` reads a packaged profile (or one of ``ROOFLINE_OPT_DATA``'s ``instances/profiles/``);
``load_profile("my.yaml")`` a file, bounded like cards (files.MAX_CARD_BYTES, the bounded YAML loader) with every
field checked: efficiencies in (0, 1], factors positive, settings only Preset fields of the right type (a
``kv_memory_rule`` as a mapping of ``KvMemoryRule``'s fields), accelerator names or family keys
(``physics.profiles.ACCELERATOR_FAMILIES``). ``profile_yaml`` writes the form ``load_profile`` reads back to an equal
profile. The schema: docs/profiles/index.md.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import typing
from pathlib import Path
from typing import Any

from roofline_opt import checks
from roofline_opt.catalog import cards
from roofline_opt.catalog.parse import MAX_CARD_NUMBER, read_yaml
from roofline_opt.errors import InvalidInput
from roofline_opt.physics.evaluator import KV_BITS
from roofline_opt.physics.profiles import (
    ACCELERATOR_FAMILIES,
    ANY_ACCELERATOR,
    LAYOUT_FEATURES,
    SETTING_FIELDS,
    AcceleratorEfficiency,
    EngineProfile,
)
from roofline_opt.physics.specs import KV_MEMORY_RULE_KINDS, PRESETS, KvMemoryRule, Preset

PROFILES_SUBDIR = Path("instances") / "profiles"

NEUTRAL = "neutral"
"""The packaged profile equal to the ``default`` preset: what every command uses without --engine/--profile."""

ENGINE_KEYS = ("vllm", "sglang", "trtllm")
"""Engines with a packaged profile of that name and a launch recipe (the keys deploy/ uses, --engine's choices)."""

MEASURED_ENGINE_KEYS = (*ENGINE_KEYS, "atom")
"""Engines with a packaged profile of that name: ENGINE_KEYS and engines profiled only to price measured rows
(``validate``, benchmarks/fidelity_targets.py), without a launch recipe in deploy/ (AMD's ATOM)."""

TOP_KEYS = (
    "name",
    "engine",
    "engine_versions",
    "base_preset",
    "source",
    "settings",
    "default_chunk_tokens",
    "default_kv_bits",
    "deployable",
    "accelerators",
)
ENTRY_KEYS = tuple(f.name for f in dataclasses.fields(AcceleratorEfficiency))
MAX_ENTRIES = 64
MAX_LOG_ERROR = 5.0
"""Largest |ln(measured / estimate)| quantile a profile may state (a factor of ~150)."""


ENGINE_WORDS = (
    ("sglang", "sglang"),
    ("tensorrt-llm", "trtllm"),
    ("trt-llm", "trtllm"),
    ("vllm", "vllm"),
    ("atom", "atom"),
)
"""Words of a measured row's framework text naming an engine with a profile, matched as whole words ("ATOM" but not
"atomic"; SGLang before vLLM: neither contains the other, but "NVIDIA Dynamo + TensorRT-LLM" is TensorRT-LLM's)."""


def engine_of_framework(framework: str) -> str | None:
    """The engine key a framework text names (``"TensorRT-LLM v0.6.1"`` -> ``"trtllm"``, ``"vLLM (ROCm)"`` ->
    ``"vllm"``, ``"ATOM (AMD) (image ...)"`` -> ``"atom"``), or None (LMDeploy, an API provider: no packaged
    profile)."""
    low = framework.casefold()
    return next((key for word, key in ENGINE_WORDS if re.search(rf"\b{re.escape(word)}\b", low)), None)


def profile_names() -> list[str]:
    """Names of the packaged (and ROOFLINE_OPT_DATA) profiles."""
    return list(cards._card_index(PROFILES_SUBDIR))


def list_profiles() -> list[EngineProfile]:
    """Every packaged profile, sorted by name."""
    return [load_profile(str(path)) for path in cards._card_index(PROFILES_SUBDIR).values()]


@functools.lru_cache(maxsize=16)
def packaged_profile(name: str) -> EngineProfile:
    """A packaged profile by name, read once per process (the neutral one every default answer's interval uses)."""
    return load_profile(str(cards._card_index(PROFILES_SUBDIR)[name]))


def load_profile(name_or_path: str, field: str = "profile") -> EngineProfile:
    """A profile from a packaged name (``neutral``, ``vllm``, ``sglang``, ``trtllm``, ``atom``) or a YAML file path."""
    text = str(name_or_path)
    index = cards._card_index(PROFILES_SUBDIR)
    if text in index and not Path(text).expanduser().is_file():
        path = index[text]
    elif cards._is_path(text):
        path = Path(cards.data_file(text)).expanduser()
        if not path.is_file():
            why = "not a regular file" if path.exists() else "no such file"
            msg = f"must be a profile name ({', '.join(index)}) or an existing YAML file. Got {text!r} instead ({why})."
            raise InvalidInput(field, msg)
    else:
        path = index[checks.choice(field, text, index)]
    return profile_from_mapping(read_yaml(path), str(path))


def profile_from_mapping(data: dict[str, Any], where: str) -> EngineProfile:
    """Every field checked (one InvalidInput naming ``where: key`` and what would be valid) into an EngineProfile."""
    for key in data:
        checks.choice(f"{where}: key", key, TOP_KEYS)
    for key in ("name", "engine_versions", "accelerators"):
        if key not in data:
            raise InvalidInput(f"{where}: {key}", "is missing: a profile needs it")
    base = checks.choice(f"{where}: base_preset", data.get("base_preset", "default"), PRESETS)
    engine = data.get("engine") or ""
    if engine:
        engine = checks.choice(f"{where}: engine", engine, MEASURED_ENGINE_KEYS)
    entries = data["accelerators"]
    if not isinstance(entries, list) or len(entries) > MAX_ENTRIES:
        raise InvalidInput(f"{where}: accelerators", f"must be a list of at most {MAX_ENTRIES} entries")
    return EngineProfile(
        name=_text(f"{where}: name", data["name"], required=True),
        engine=engine,
        engine_versions=_text(f"{where}: engine_versions", data["engine_versions"]),
        base_preset=base,
        settings=_settings(f"{where}: settings", data.get("settings") or {}),
        accelerators=tuple(_entry(f"{where}: accelerators[{i}]", e) for i, e in enumerate(entries)),
        default_chunk_tokens=_optional_int(f"{where}: default_chunk_tokens", data.get("default_chunk_tokens")),
        default_kv_bits=_kv_bits(f"{where}: default_kv_bits", data.get("default_kv_bits")),
        deployable=_names(f"{where}: deployable", data.get("deployable", list(LAYOUT_FEATURES)), LAYOUT_FEATURES),
        source=_text(f"{where}: source", data.get("source", "")),
    )


def _text(field: str, value: Any, required: bool = False) -> str:
    if not isinstance(value, str) or (required and not value.strip()):
        raise InvalidInput(
            field, f"must be a {'non-empty ' if required else ''}text. Got {checks.shown(value)} instead."
        )
    return value


def _optional_int(field: str, value: Any) -> int | None:
    return None if value is None else checks.positive_int(field, value)


def _kv_bits(field: str, value: Any) -> int | None:
    return None if value is None else checks.choice(field, value, KV_BITS)


def _names(field: str, value: Any, allowed: tuple[str, ...] | None) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidInput(field, f"must be a list of names. Got {checks.shown(value)} instead.")
    if allowed is not None:
        for v in value:
            checks.choice(field, v, allowed)
    return tuple(value)


def _settings(field: str, value: Any) -> tuple[tuple[str, object], ...]:
    if not isinstance(value, dict):
        raise InvalidInput(field, f"must be a mapping of preset field: value. Got {checks.shown(value)} instead.")
    hints = typing.get_type_hints(Preset)
    out = []
    for key, raw in value.items():
        name = checks.choice(field, key, SETTING_FIELDS)
        hint = hints[name]
        where = f"{field}: {name}"
        converted: object
        if name == "kv_memory_rule":
            converted = _kv_memory_rule(where, raw)
        elif hint is bool:
            if not isinstance(raw, bool):
                raise InvalidInput(where, f"must be true or false. Got {checks.shown(raw)} instead.")
            converted = raw
        elif hint is str:
            converted = checks.choice(where, raw, ("aggregate", "per_device"))
        elif name == "usable_hbm_fraction":
            converted = checks.probability(where, raw, include_one=True)
        elif name == "expert_load_imbalance":
            converted = checks.positive_float(where, raw, minimum=1.0, maximum=MAX_CARD_NUMBER)
        else:
            converted = checks.positive_float(where, raw, allow_zero=True, maximum=MAX_CARD_NUMBER)
        out.append((name, converted))
    return tuple(sorted(out))


KV_MEMORY_RULE_BYTES_KEYS = (
    "reserve_bytes",
    "reserve_bytes_per_instance_gpu",
    "large_device_hbm_bytes",
    "large_device_reserve_bytes",
)
"""A ``kv_memory_rule``'s optional byte counts (0 when left out)."""


def _kv_memory_rule(field: str, value: Any) -> KvMemoryRule:
    """A ``kv_memory_rule`` setting: a mapping of kind, fraction and (optionally) the reserve and tier bytes."""
    keys = tuple(f.name for f in dataclasses.fields(KvMemoryRule))
    if not isinstance(value, dict):
        raise InvalidInput(field, f"must be a mapping of {', '.join(keys)}. Got {checks.shown(value)} instead.")
    for key in value:
        checks.choice(f"{field}: key", key, keys)
    for key in ("kind", "fraction"):
        if key not in value:
            raise InvalidInput(f"{field}: {key}", "is missing: a KV-memory rule needs it")
    return KvMemoryRule(
        kind=checks.choice(f"{field}: kind", value["kind"], KV_MEMORY_RULE_KINDS),
        fraction=checks.probability(f"{field}: fraction", value["fraction"], include_one=True),
        **{
            key: checks.positive_float(f"{field}: {key}", value.get(key, 0.0), allow_zero=True, maximum=MAX_CARD_NUMBER)
            for key in KV_MEMORY_RULE_BYTES_KEYS
        },
    )


def _setting_yaml(value: object) -> object:
    """A setting's value as YAML reads it back (a KV-memory rule as its mapping)."""
    return dataclasses.asdict(value) if isinstance(value, KvMemoryRule) else value


def _entry(field: str, value: Any) -> AcceleratorEfficiency:
    if not isinstance(value, dict):
        raise InvalidInput(field, f"must be a mapping of {', '.join(ENTRY_KEYS)}. Got {checks.shown(value)} instead.")
    for key in value:
        checks.choice(f"{field}: key", key, ENTRY_KEYS)
    for key in ("accelerators", "flop_efficiency", "hbm_efficiency"):
        if key not in value:
            raise InvalidInput(f"{field}: {key}", "is missing: an accelerator entry needs it")
    known = {*ACCELERATOR_FAMILIES, ANY_ACCELERATOR, *(n for names in ACCELERATOR_FAMILIES.values() for n in names)}
    names = tuple(
        _gpu_name(f"{field}: accelerators", n, known)
        for n in _names(f"{field}: accelerators", value["accelerators"], None)
    )
    if not names:
        raise InvalidInput(f"{field}: accelerators", "must name at least one accelerator or family")
    quantiles = value.get("log_error_quantiles", [0.0, 0.0])
    if not isinstance(quantiles, list) or len(quantiles) != 2:
        raise InvalidInput(
            f"{field}: log_error_quantiles", f"must be [low, high]. Got {checks.shown(quantiles)} instead."
        )
    low, high = (_signed(f"{field}: log_error_quantiles", q) for q in quantiles)
    if low > high:
        raise InvalidInput(f"{field}: log_error_quantiles", f"must have low <= high. Got [{low}, {high}] instead.")
    return AcceleratorEfficiency(
        accelerators=names,
        flop_efficiency=checks.probability(f"{field}: flop_efficiency", value["flop_efficiency"], include_one=True),
        hbm_efficiency=checks.probability(f"{field}: hbm_efficiency", value["hbm_efficiency"], include_one=True),
        network_latency_factor=_factor(f"{field}: network_latency_factor", value.get("network_latency_factor", 1.0)),
        kernel_launch_factor=_factor(f"{field}: kernel_launch_factor", value.get("kernel_launch_factor", 1.0)),
        source=_text(f"{field}: source", value.get("source", "")),
        fitted=_names(
            f"{field}: fitted",
            value.get("fitted", []),
            ("flop_efficiency", "hbm_efficiency", "network_latency_factor", "kernel_launch_factor"),
        ),
        rows=checks.positive_int(f"{field}: rows", value.get("rows", 0), minimum=0),
        log_error_quantiles=(low, high),
    )


def _gpu_name(field: str, name: str, known: set[str]) -> str:
    """A catalog accelerator (any alias: ``h100`` -> ``h100-sxm``), a family key or ``*``; other names are kept (a
    user's own card) only when a card of that name exists."""
    if name in known:
        return name
    resolved = cards.resolve_gpu_name(name)
    if resolved in known or resolved in cards._card_index(cards.GPUS_SUBDIR):
        return resolved
    options = (*ACCELERATOR_FAMILIES, *cards._card_index(cards.GPUS_SUBDIR), ANY_ACCELERATOR)
    return checks.choice(field, name, options)


def _factor(field: str, value: Any) -> float:
    return checks.positive_float(field, value, maximum=1e3)


def _signed(field: str, value: Any) -> float:
    number = checks._number(value)
    if number is None or not abs(number) <= MAX_LOG_ERROR:
        raise InvalidInput(
            field, f"must be numbers in [-{MAX_LOG_ERROR:g}, {MAX_LOG_ERROR:g}]. Got {checks.shown(value)} instead."
        )
    return number


def profile_yaml(profile: EngineProfile) -> str:
    """The profile as YAML that ``load_profile`` reads back to an equal profile."""
    import yaml

    data: dict[str, Any] = {
        "name": profile.name,
        "engine": profile.engine,
        "engine_versions": profile.engine_versions,
        "base_preset": profile.base_preset,
        "source": profile.source,
        "settings": {k: _setting_yaml(v) for k, v in profile.settings},
        "default_chunk_tokens": profile.default_chunk_tokens,
        "default_kv_bits": profile.default_kv_bits,
        "deployable": list(profile.deployable),
        "accelerators": [
            {
                "accelerators": list(e.accelerators),
                "flop_efficiency": e.flop_efficiency,
                "hbm_efficiency": e.hbm_efficiency,
                "network_latency_factor": e.network_latency_factor,
                "kernel_launch_factor": e.kernel_launch_factor,
                "fitted": list(e.fitted),
                "rows": e.rows,
                "log_error_quantiles": list(e.log_error_quantiles),
                "source": e.source,
            }
            for e in profile.accelerators
        ],
    }
    return yaml.safe_dump(data, sort_keys=False, width=120, allow_unicode=False)
