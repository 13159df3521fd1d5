"""Model and accelerator cards found by name in the catalog folders (the repository's and ROOFLINE_OPT_DATA's)."""

from __future__ import annotations

import os
from pathlib import Path

from roofline_opt import checks
from roofline_opt.catalog.hf_config import model_from_hf_config
from roofline_opt.catalog.parse import read_yaml, spec_from_mapping
from roofline_opt.errors import InvalidInput
from roofline_opt.physics.specs import GpuSpec, ModelSpec

DATA_ENV = "ROOFLINE_OPT_DATA"


REPO_ROOT = Path(__file__).resolve().parents[2]


MODELS_SUBDIR = Path("models")


GPUS_SUBDIR = Path("instances") / "gpus"


CARD_SUFFIXES = (".yaml", ".yml")


PATH_SUFFIXES = (*CARD_SUFFIXES, ".json")


PRECISION_SUFFIXES = {"-int8": 8, "-fp8": 8, "-int4": 4, "-fp4": 4}
"""Name suffixes that select a weight precision for a catalog model: ``llama-3-70b-int8`` is llama-3-70b at 8 bits."""


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
            why = "not a regular file" if path.exists() else "no such file"
            msg = f"must be a catalog name or an existing file. Got {name_or_path!r} instead ({why})."
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
    return spec_from_mapping(ModelSpec, read_yaml(path), str(path))


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
    return spec_from_mapping(GpuSpec, read_yaml(path), str(path))


def list_models() -> list[ModelSpec]:
    """Every model card of the catalog, sorted by name."""
    return [load_model(str(path)) for path in _card_index(MODELS_SUBDIR).values()]


def list_gpus() -> list[GpuSpec]:
    """Every accelerator card of the catalog, sorted by name."""
    return [load_gpu(str(path)) for path in _card_index(GPUS_SUBDIR).values()]
