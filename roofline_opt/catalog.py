"""Model and accelerator catalogs: YAML cards and HuggingFace config.json files turned into checked specs.

Cards live in ``models/`` and ``instances/gpus/`` at the repository's top level, one ``<name>.yaml`` per entry.
Folders listed in the environment variable ``ROOFLINE_OPT_DATA`` (``os.pathsep``-separated, each holding
``models/`` and/or ``instances/gpus/``) are searched first, so an installed copy can point at its cards and a user
can add or override entries without touching the repository.
"""

from __future__ import annotations

import dataclasses
import json
import os
import typing
from pathlib import Path
from typing import Any

import yaml

from roofline_opt import checks
from roofline_opt.errors import InvalidInput
from roofline_opt.physics.specs import WEIGHT_BITS, GpuSpec, ModelSpec

DATA_ENV = "ROOFLINE_OPT_DATA"
REPO_ROOT = Path(__file__).resolve().parents[1]
MODELS_SUBDIR = Path("models")
GPUS_SUBDIR = Path("instances") / "gpus"
CARD_SUFFIXES = (".yaml", ".yml")
PATH_SUFFIXES = (*CARD_SUFFIXES, ".json")
PRECISION_SUFFIXES = {"-int8": 8, "-fp8": 8, "-int4": 4, "-fp4": 4}
"""Name suffixes that select a weight precision for a catalog model: ``llama-3-70b-int8`` is llama-3-70b at 8 bits."""

_GATED_GELU_MODEL_TYPES = frozenset({"gemma", "gemma2", "gemma3", "gemma3_text"})
"""HF model types whose GELU feed-forward is gated (GeGLU, two input matrices) despite a ``gelu*`` activation."""
_GELU_BY_DEFAULT_MODEL_TYPES = frozenset({"falcon", "RefinedWeb", "RefinedWebModel"})
"""HF model types whose config.json may omit the activation although the model uses a plain GELU MLP."""


# ----------------------------------------------------------------------------------------------- lookup by name


def data_dirs() -> list[Path]:
    """Folders searched for cards: those of ``ROOFLINE_OPT_DATA`` first, then the repository's top level."""
    extra = [Path(p).expanduser() for p in os.environ.get(DATA_ENV, "").split(os.pathsep) if p]
    return [*extra, REPO_ROOT]


def _card_index(subdir: Path) -> dict[str, Path]:
    """Card name (file stem) -> file, the first folder of ``data_dirs`` winning on duplicate names."""
    index: dict[str, Path] = {}
    for root in reversed(data_dirs()):
        folder = root / subdir
        if folder.is_dir():
            index.update({p.stem: p for p in folder.iterdir() if p.suffix in CARD_SUFFIXES and p.is_file()})
    return dict(sorted(index.items()))


def _is_path(name_or_path: str) -> bool:
    return "/" in name_or_path or os.sep in name_or_path or name_or_path.endswith(PATH_SUFFIXES)


def _resolve_file(name_or_path: str, subdir: Path, field: str) -> Path:
    """The card or config file ``name_or_path`` designates: an existing path, or a catalog name."""
    if _is_path(name_or_path):
        path = Path(name_or_path).expanduser()
        if path.is_dir():
            path = path / "config.json"
        if not path.is_file():
            msg = f"must be a catalog name or an existing file. Got {name_or_path!r} instead (no such file)."
            raise InvalidInput(field, msg)
        return path
    index = _card_index(subdir)
    return index[checks.choice(field, name_or_path, index)]


def split_precision_suffix(name: str) -> tuple[str, int | None]:
    """``"llama-3-70b-int8"`` -> ``("llama-3-70b", 8)``; a name without a precision suffix -> ``(name, None)``."""
    for suffix, bits in PRECISION_SUFFIXES.items():
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)], bits
    return name, None


def load_model(name_or_path: str, field: str = "model") -> ModelSpec:
    """A model from a catalog name, a YAML card path, or a HuggingFace config.json (file or its folder)."""
    path = _resolve_file(str(name_or_path), MODELS_SUBDIR, field)
    if path.suffix == ".json":
        return model_from_hf_config(path)
    return _spec_from_mapping(ModelSpec, _read_yaml(path), str(path))


def resolve_model(name_or_path: str, field: str = "model") -> tuple[ModelSpec, int | None]:
    """A model and the weight bits its name's precision suffix selects (None without a suffix)."""
    name_or_path = str(name_or_path)
    if _is_path(name_or_path) or name_or_path in _card_index(MODELS_SUBDIR):
        return load_model(name_or_path, field), None
    base, bits = split_precision_suffix(name_or_path)
    return load_model(base, field), bits


def load_gpu(name_or_path: str, field: str = "gpu") -> GpuSpec:
    """An accelerator from a catalog name or a YAML card path."""
    path = _resolve_file(str(name_or_path), GPUS_SUBDIR, field)
    return _spec_from_mapping(GpuSpec, _read_yaml(path), str(path))


def list_models() -> list[ModelSpec]:
    """Every model card of the catalog, sorted by name."""
    return [load_model(str(path)) for path in _card_index(MODELS_SUBDIR).values()]


def list_gpus() -> list[GpuSpec]:
    """Every accelerator card of the catalog, sorted by name."""
    return [load_gpu(str(path)) for path in _card_index(GPUS_SUBDIR).values()]


# ----------------------------------------------------------------------------------------------- reading files


def _read_text(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        msg = f"cannot be read: {exc}"
        raise InvalidInput(str(path), msg) from exc
    if not text.strip():
        raise InvalidInput(str(path), "is empty")
    return text


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _read_yaml(path: Path) -> dict[str, Any]:
    """The mapping a YAML card holds; syntax errors and non-mappings name the file."""
    try:
        data = yaml.safe_load(_read_text(path))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        msg = f"is not valid YAML: {_one_line(getattr(exc, 'problem', None) or exc)}{where}"
        raise InvalidInput(str(path), msg) from exc
    return _require_mapping(path, data)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(_read_text(path))
    except json.JSONDecodeError as exc:
        msg = f"is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        raise InvalidInput(str(path), msg) from exc
    return _require_mapping(path, data)


def _require_mapping(path: Path, data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        msg = f"must hold a mapping of field: value. Got a {type(data).__name__} instead."
        raise InvalidInput(str(path), msg)
    return data


# ----------------------------------------------------------------------------------------------- mapping -> spec

Spec = typing.TypeVar("Spec", ModelSpec, GpuSpec)


def _spec_from_mapping(cls: type[Spec], data: dict[str, Any], where: str) -> Spec:
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
        values[name] = _field_value(f"{where}: {name}", hints[name], data[name], zero_ok=f.default == 0)
    spec = cls(**values)
    _check_consistency(spec, where)
    return spec


def _field_value(field: str, hint: Any, value: Any, zero_ok: bool) -> Any:
    """One card value converted to the field's type, or InvalidInput naming the field."""
    if hint is bool:
        if not isinstance(value, bool):
            raise InvalidInput(field, f"must be true or false. Got {value!r} instead.")
        return value
    if hint is int:
        return checks.positive_int(field, value, minimum=0 if zero_ok else 1)
    if hint is float:
        return checks.positive_float(field, value, allow_zero=zero_ok)
    if hint is str:
        if not isinstance(value, str):
            raise InvalidInput(field, f"must be a text. Got {value!r} instead.")
        return value
    if typing.get_origin(hint) is dict:
        return _flop_rates(field, value)
    msg = f"no card reader for fields of type {hint}"
    raise TypeError(msg)


def _flop_rates(field: str, value: Any) -> dict[int, float]:
    """``{16: 1e15, 8: 2e15}``: FLOP/s per weight bits; a null rate is the same as an absent one."""
    if not isinstance(value, dict):
        msg = f"must be a mapping of weight bits to FLOP/s, like {{16: 1.0e+15, 8: 2.0e+15}}. Got {value!r} instead."
        raise InvalidInput(field, msg)
    rates = {
        checks.choice(field, bits, WEIGHT_BITS): checks.positive_float(f"{field}[{bits}]", rate)
        for bits, rate in value.items()
        if rate is not None
    }
    if not rates:
        raise InvalidInput(field, "must give a FLOP rate for at least one weight precision")
    return rates


def _check_consistency(spec: ModelSpec | GpuSpec, where: str) -> None:
    """Cross-field rules a spec must meet for the formulas to mean anything."""
    if not spec.name.strip():
        raise InvalidInput(f"{where}: name", "must be a non-empty text. Got '' instead.")
    if isinstance(spec, ModelSpec):
        _check_model_consistency(spec, where)


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


# ----------------------------------------------------------------------------------------------- HF config.json

_MISSING = object()


def _hf_get(cfg: dict[str, Any], where: str, keys: tuple[str, ...], default: Any = _MISSING) -> tuple[str, Any]:
    """(key, value) of the first of ``keys`` set in ``cfg``; ``default`` under the first key, or an error."""
    for key in keys:
        if cfg.get(key) is not None:
            return key, cfg[key]
    if default is _MISSING:
        raise InvalidInput(f"{where}: {keys[0]}", "is missing from the config")
    return keys[0], default


def _hf_int(cfg: dict[str, Any], where: str, keys: tuple[str, ...], default: Any = _MISSING, minimum: int = 1) -> int:
    key, value = _hf_get(cfg, where, keys, default)
    return checks.positive_int(f"{where}: {key}", value, minimum=minimum)


def _hf_name(path: Path, cfg: dict[str, Any]) -> str:
    """The model's name: the config's ``_name_or_path``, else its folder (for ``config.json``), else its stem."""
    declared = cfg.get("_name_or_path")
    if isinstance(declared, str) and declared.strip():
        return declared.rstrip("/").split("/")[-1]
    return path.resolve().parent.name if path.name == "config.json" else path.stem


def _hf_attention(cfg: dict[str, Any], where: str, d_model: int, n_q: int) -> dict[str, int]:
    """Head layout: MLA (DeepSeek) latent sizes, or grouped-query heads."""
    if cfg.get("kv_lora_rank") is not None:
        d_head = _hf_int(cfg, where, ("qk_nope_head_dim",))
        return {
            "group_size": 1,
            "d_head": d_head,
            "kv_lora_rank": _hf_int(cfg, where, ("kv_lora_rank",)),
            "qk_rope_head_dim": _hf_int(cfg, where, ("qk_rope_head_dim",)),
            "q_lora_rank": _hf_int(cfg, where, ("q_lora_rank",), default=0, minimum=0),
            "v_head_dim": _hf_int(cfg, where, ("v_head_dim",), default=d_head),
        }
    kv_keys = ("num_key_value_heads", "num_kv_heads", "n_head_kv")
    n_kv = _hf_int(cfg, where, kv_keys, default=1 if cfg.get("multi_query") else n_q)
    if n_q % n_kv:
        msg = f"must divide the number of attention heads ({n_q}). Got {n_kv} instead."
        raise InvalidInput(f"{where}: {kv_keys[0]}", msg)
    return {"group_size": n_q // n_kv, "d_head": _hf_int(cfg, where, ("head_dim",), default=d_model // n_q)}


def _hf_feed_forward(cfg: dict[str, Any], where: str, d_model: int) -> dict[str, int]:
    """Feed-forward widths, experts and the SwiGLU (2, 1) or GELU (1, 1) matrix counts."""
    dense_d_ff = _hf_int(cfg, where, ("intermediate_size", "n_inner", "ffn_hidden_size"), default=4 * d_model)
    n_experts = _hf_int(cfg, where, ("num_local_experts", "n_routed_experts", "num_experts"), default=1)
    default_act = "gelu" if cfg.get("model_type") in _GELU_BY_DEFAULT_MODEL_TYPES else "silu"
    _, act = _hf_get(cfg, where, ("hidden_act", "hidden_activation", "activation_function", "activation"), default_act)
    gated = not str(act).startswith(("gelu", "relu")) or cfg.get("model_type") in _GATED_GELU_MODEL_TYPES
    ff = {"m_in": 2 if gated else 1, "m_out": 1, "d_ff": dense_d_ff, "n_experts": n_experts}
    if n_experts > 1:
        n_dense = _hf_int(cfg, where, ("first_k_dense_replace",), default=0, minimum=0)
        ff |= {
            "d_ff": _hf_int(cfg, where, ("moe_intermediate_size",), default=dense_d_ff),
            "n_active_experts": _hf_int(cfg, where, ("num_experts_per_tok",)),
            "n_shared_experts": _hf_int(cfg, where, ("n_shared_experts",), default=0, minimum=0),
            "n_dense_layers": n_dense,
            "dense_layer_d_ff": dense_d_ff if n_dense else 0,
        }
    return ff


def model_from_hf_config(path: Path) -> ModelSpec:
    """A ModelSpec from a HuggingFace config.json (Llama, Mistral, Mixtral, Qwen2, DeepSeek-V3, GPT-J styles)."""
    cfg = _read_json(path)
    if isinstance(cfg.get("text_config"), dict) and "hidden_size" not in cfg:
        cfg = cfg["text_config"]
    where = str(path)
    d_model = _hf_int(cfg, where, ("hidden_size", "n_embd", "d_model"))
    n_q = _hf_int(cfg, where, ("num_attention_heads", "n_head"))
    values = {
        "name": _hf_name(path, cfg),
        "d_model": d_model,
        "n_layers": _hf_int(cfg, where, ("num_hidden_layers", "n_layer", "num_layers")),
        "n_q_heads": n_q,
        "vocab": _hf_int(cfg, where, ("vocab_size",)),
        "parallel_attention": bool(cfg.get("parallel_attn") or cfg.get("model_type") == "gptj"),
        "tie_embeddings": bool(cfg.get("tie_word_embeddings", False)),
        "source": f"HuggingFace config {path}",
        **_hf_attention(cfg, where, d_model, n_q),
        **_hf_feed_forward(cfg, where, d_model),
    }
    return _spec_from_mapping(ModelSpec, values, where)
