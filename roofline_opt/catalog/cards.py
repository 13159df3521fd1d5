"""Model and accelerator cards found by name: the packaged catalog, plus ROOFLINE_OPT_DATA's folders on top.

The repository's top-level ``models/`` and ``instances/`` are the source of truth; a built wheel or sdist carries a
copy in ``roofline_opt/_data`` (see ``setup.py``), which an installed package reads. An editable install or a
checkout reads the top-level folders directly. Folders listed in ``ROOFLINE_OPT_DATA`` (``os.pathsep``-separated,
each holding ``models/``, ``instances/gpus/`` and/or ``instances/clusters/``) ADD cards: a user card whose name is
already taken (by the packaged catalog or an earlier folder) is refused with a one-line error naming both files, so
a packaged card is never replaced silently. Model cards may list ``aliases:`` (HuggingFace ids such as
``meta-llama/Llama-3.1-70B``); ``resolve_alias`` maps such a name, its ``-Instruct``/``-chat`` variants and any
letter case to the card.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

from roofline_opt import checks
from roofline_opt.catalog.hf_config import model_from_hf_config
from roofline_opt.catalog.parse import read_yaml, spec_from_mapping
from roofline_opt.errors import InvalidInput
from roofline_opt.physics.mtp import MTP_DRAFT, MTP_MODELS, mtp_module
from roofline_opt.physics.specs import WEIGHT_BITS, GpuSpec, ModelSpec

DATA_ENV = "ROOFLINE_OPT_DATA"


REPO_ROOT = Path(__file__).resolve().parents[2]
"""The checkout holding this package (meaningful for an editable install only)."""


PACKAGED_DATA = Path(__file__).resolve().parents[1] / "_data"
"""The catalog copy a built wheel carries (absent in a checkout)."""


MODELS_SUBDIR = Path("models")


GPUS_SUBDIR = Path("instances") / "gpus"


CLUSTERS_SUBDIR = Path("instances") / "clusters"


CARD_SUFFIXES = (".yaml", ".yml")


CLUSTER_SUFFIXES = (".yaml", ".yml", ".graphml", ".json")


PATH_SUFFIXES = (*CARD_SUFFIXES, ".json")


PRECISION_SUFFIXES = {"-int8": 8, "-fp8": 8, "-int4": 4, "-fp4": 4}
"""Name suffixes that select a weight precision for a catalog model: ``llama-3-70b-int8`` is llama-3-70b at 8 bits."""


CARD_ONLY_KEYS = ("aliases", "native_weight_bits")
"""Keys of a model card about the catalog entry, not the architecture: read by ``model_aliases`` and
``native_weight_bits``, left out of the ModelSpec."""


VARIANT_SUFFIXES = re.compile(r"(-(instruct|chat|hf|it|base))+$")
"""Fine-tuned variants served exactly like their base model (same architecture): stripped when resolving aliases."""


def packaged_root() -> Path:
    """The packaged catalog: ``roofline_opt/_data`` in an installed wheel, the checkout's top level otherwise."""
    return PACKAGED_DATA if PACKAGED_DATA.is_dir() else REPO_ROOT


def user_dirs() -> list[Path]:
    """The folders of ``ROOFLINE_OPT_DATA``, in the order given."""
    return [Path(p).expanduser() for p in os.environ.get(DATA_ENV, "").split(os.pathsep) if p.strip()]


def data_dirs() -> list[Path]:
    """Folders searched for cards: the packaged catalog first, then those of ``ROOFLINE_OPT_DATA``."""
    return [packaged_root(), *user_dirs()]


def _card_index(subdir: Path, suffixes: tuple[str, ...] = CARD_SUFFIXES) -> dict[str, Path]:
    """Card name (file stem) -> file over every data folder; a user card reusing a name is an error, and so is a
    user model or accelerator card that does not load (it is never skipped silently)."""
    index: dict[str, Path] = {}
    packaged = packaged_root()
    for root in data_dirs():
        folder = root / subdir
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            if path.suffix not in suffixes or not path.is_file():
                continue
            if path.stem in index and index[path.stem].parent != path.parent:
                msg = (
                    f"adds a card named {path.stem!r}, already taken by {index[path.stem]}: user cards add to the "
                    "catalog and never replace one; rename the file (and its name: field)"
                )
                raise InvalidInput(f"{DATA_ENV}: {path}", msg)
            index.setdefault(path.stem, path)
            if root != packaged and subdir in _USER_CARD_LOADERS:
                info = path.stat()
                _check_user_card(subdir, str(path), info.st_mtime_ns, info.st_size)
    return dict(sorted(index.items()))


_USER_CARD_LOADERS = {MODELS_SUBDIR: "model", GPUS_SUBDIR: "gpu"}


@functools.lru_cache(maxsize=1024)
def _check_user_card(subdir: Path, path: str, mtime_ns: int, size: int) -> None:
    """Load a ROOFLINE_OPT_DATA card once per version of the file: a broken one is an error naming it."""
    loader = load_model if _USER_CARD_LOADERS[subdir] == "model" else load_gpu
    try:
        loader(path, field=f"{DATA_ENV}: {path}")
    except InvalidInput as exc:
        raise InvalidInput(exc.field, f"{exc.message} (a card of {DATA_ENV}: fix or remove it)") from exc


def _nonempty_index(subdir: Path, what: str) -> dict[str, Path]:
    index = _card_index(subdir)
    if not index:
        where = ", ".join(str(root / subdir) for root in data_dirs())
        raise InvalidInput(
            "catalog", f"has no {what} cards (looked in {where}): reinstall the package or set {DATA_ENV}"
        )
    return index


def _is_path(name_or_path: str) -> bool:
    """A path rather than a catalog name: it has a folder separator or a card suffix, or it is a folder holding a
    HuggingFace config.json (``Meta-Llama-3-8B`` downloaded into the current folder, no trailing ``/`` needed)."""
    if "/" in name_or_path or os.sep in name_or_path or name_or_path.endswith(PATH_SUFFIXES):
        return True
    return (Path(name_or_path).expanduser() / "config.json").is_file()


def _resolve_file(name_or_path: str, subdir: Path, field: str, what: str) -> Path:
    """The card or config file ``name_or_path`` designates: an existing path, or a catalog name."""
    if _is_path(name_or_path):
        path = Path(data_file(name_or_path)).expanduser()
        if path.is_dir():
            path = path / "config.json"
        if not path.is_file():
            why = "not a regular file" if path.exists() else "no such file"
            msg = f"must be a catalog name or an existing file. Got {name_or_path!r} instead ({why})."
            raise InvalidInput(field, msg)
        return path
    index = _nonempty_index(subdir, what)
    return index[checks.choice(field, name_or_path, index)]


def split_precision_suffix(name: str) -> tuple[str, int | None]:
    """``"llama-3-70b-int8"`` -> ``("llama-3-70b", 8)``; a name without a precision suffix -> ``(name, None)``."""
    for suffix, bits in PRECISION_SUFFIXES.items():
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)], bits
    return name, None


def _alias_key(name: str) -> str:
    """Case-folded, without a ``-Instruct``/``-chat`` variant suffix: the form aliases are compared in."""
    return VARIANT_SUFFIXES.sub("", name.strip().casefold())


@functools.lru_cache(maxsize=8)
def _alias_table(cards: tuple[tuple[str, Path], ...]) -> dict[str, str]:
    """Alias key -> card name over the model cards given (their names, their HF ids and the ids' last parts)."""
    table: dict[str, str] = {}
    for stem, path in cards:
        aliases = read_yaml(path).get("aliases") or []
        for alias in [stem, *aliases]:
            for key in {_alias_key(str(alias)), _alias_key(str(alias).rsplit("/", 1)[-1])}:
                table.setdefault(key, stem)
    return table


def resolve_alias(name: str) -> str | None:
    """The catalog card a model name designates through the cards' ``aliases:`` (HF ids, -Instruct/-chat variants,
    any letter case), or None. ``meta-llama/Llama-3.1-70B-Instruct`` -> ``llama-3.3-70b``'s sibling card, etc."""
    index = _card_index(MODELS_SUBDIR)
    if name in index:
        return name
    table = _alias_table(tuple(index.items()))
    return table.get(_alias_key(name)) or table.get(_alias_key(name.rsplit("/", 1)[-1]))


def _catalog_name(name: str) -> tuple[str, int | None] | None:
    """(card name, suffix bits) for a name that is a card, an alias, or either with a precision suffix."""
    if (card := resolve_alias(name)) is not None:
        return card, None
    base, bits = split_precision_suffix(name)
    if bits is not None and (card := resolve_alias(base)) is not None:
        return card, bits
    return None


def load_model(name_or_path: str, field: str = "model") -> ModelSpec:
    """A model from a catalog name or alias, a YAML card path, or a HuggingFace config.json (file or its folder)."""
    name_or_path = str(name_or_path)
    if not Path(name_or_path).expanduser().exists() and (found := _catalog_name(name_or_path)) and found[1] is None:
        name_or_path = found[0]
    path = _resolve_file(name_or_path, MODELS_SUBDIR, field, "model")
    if path.suffix == ".json":
        return model_from_hf_config(path)
    data = read_yaml(path)
    for key in CARD_ONLY_KEYS:
        data.pop(key, None)
    return spec_from_mapping(ModelSpec, data, str(path))


def native_weight_bits(name: str) -> int | None:
    """The weight precision a catalog model is released in (its card's ``native_weight_bits``: 8 for DeepSeek-V3's
    FP8 checkpoint), or None when the card states none (16-bit weights) or ``name`` is no catalog card."""
    path = _card_index(MODELS_SUBDIR).get(name)
    bits = None if path is None else read_yaml(path).get("native_weight_bits")
    if bits is None:
        return None
    return checks.choice(f"{path}: native_weight_bits", bits, WEIGHT_BITS)


def resolve_model(name_or_path: str, field: str = "model") -> tuple[ModelSpec, int | None]:
    """A model and the weight bits its name's precision suffix selects (None without a suffix)."""
    name_or_path = str(name_or_path)
    if not Path(name_or_path).expanduser().exists() and (found := _catalog_name(name_or_path)):
        return load_model(found[0], field), found[1]
    return load_model(name_or_path, field), None


def resolve_draft(target: ModelSpec, name_or_path: str, field: str = "draft") -> tuple[ModelSpec, int | None]:
    """A draft model for ``target`` and the weight bits its name's suffix selects: ``mtp`` is the target's own
    multi-token-prediction module (``physics.mtp``), only for a model that has one; else ``resolve_model``."""
    having = ", ".join(sorted(MTP_MODELS))
    if str(name_or_path).strip().casefold() != MTP_DRAFT:
        try:
            return resolve_model(name_or_path, field)
        except InvalidInput as exc:
            more = f"{MTP_DRAFT}: the model's own multi-token-prediction module ({having})"
            raise InvalidInput(exc.field, f"{exc.message} Or give {more}.") from exc
    if target.name not in MTP_MODELS:
        msg = f"{MTP_DRAFT} drafts with the model's own multi-token-prediction module, which only {having} has"
        raise InvalidInput(field, f"{msg}: name a draft model for {target.name} instead.")
    return mtp_module(target), None


def model_aliases(name: str) -> list[str]:
    """The ``aliases:`` a catalog model card lists."""
    path = _card_index(MODELS_SUBDIR).get(name)
    return [] if path is None else [str(a) for a in read_yaml(path).get("aliases") or []]


def _gpu_key(name: str) -> str:
    """An accelerator name in the form names are compared in: case-folded, spaces and underscores as dashes."""
    return re.sub(r"[\s_]+", "-", name.strip().casefold())


def gpu_aliases(names: list[str]) -> dict[str, str]:
    """Alias key -> card name: each card's name in any case, and its first dash-separated part (``h100`` for
    ``h100-sxm``, ``a100`` for ``a100-80gb``) when no other card shares that part."""
    table = {_gpu_key(n): n for n in names}
    parts: dict[str, list[str]] = {}
    for n in names:
        parts.setdefault(_gpu_key(n).split("-")[0], []).append(n)
    for part, owners in parts.items():
        if len(owners) == 1:
            table.setdefault(part, owners[0])
    return table


def resolve_gpu_name(name: str) -> str:
    """The catalog accelerator a name designates in any letter case or through an alias (``H100`` -> ``h100-sxm``),
    or ``name`` unchanged when none does (the caller's error then suggests names)."""
    index = _card_index(GPUS_SUBDIR)
    if name in index:
        return name
    return gpu_aliases(list(index)).get(_gpu_key(name), name)


def load_gpu(name_or_path: str, field: str = "gpu") -> GpuSpec:
    """An accelerator from a catalog name (any letter case, or an alias such as ``H100``) or a YAML card path (an
    owned-hardware card's price is derived)."""
    from roofline_opt.catalog.prices import gpu_from_mapping

    name_or_path = str(name_or_path)
    if not _is_path(name_or_path):
        name_or_path = resolve_gpu_name(name_or_path)
    path = _resolve_file(name_or_path, GPUS_SUBDIR, field, "accelerator")
    return gpu_from_mapping(read_yaml(path), str(path))


def data_file(path: str) -> str:
    """``path`` itself when it exists, else the same relative path inside a data folder (``examples/observed.csv``,
    ``instances/clusters/hgx-h100.yaml`` work from any folder with an installed package), else ``path`` unchanged."""
    text = str(path)
    if Path(text).expanduser().exists() or Path(text).is_absolute():
        return text
    for root in reversed(data_dirs()):
        if (root / text).is_file():
            return str(root / text)
    return text


def cluster_file(name_or_path: str, field: str = "cluster") -> str:
    """A cluster given as an existing file, a catalog cluster name (``hgx-h100``) or a catalog-relative path
    (``instances/clusters/hgx-h100.yaml``, found in the packaged catalog when not in the current folder)."""
    text = str(name_or_path)
    if text.lstrip().startswith("{") and not os.path.isfile(text):
        return text  # an inline compact mapping (``{nodes: 2, node_type: hgx-h100}``): topology.load_cluster reads it
    if Path(found := data_file(text)).expanduser().is_file():
        return found
    index = _card_index(CLUSTERS_SUBDIR, CLUSTER_SUFFIXES)
    if not _is_path(text) and text in index:
        return str(index[text])
    if _is_path(text):
        path = Path(text).expanduser()
        if not path.exists():
            why = f"no such file {path.absolute()}"
            msg = f"must be a catalog cluster name or an existing file. Got {text!r} instead ({why})."
            raise InvalidInput(field, msg)
        return text  # the cluster reader names a folder or a file it cannot read
    return str(index[checks.choice(field, text, index)])


def list_clusters() -> list[Path]:
    """Every cluster file of the catalog, sorted by name."""
    return list(_card_index(CLUSTERS_SUBDIR, CLUSTER_SUFFIXES).values())


def list_models() -> list[ModelSpec]:
    """Every model card of the catalog, sorted by name; an empty catalog is an error."""
    return [load_model(str(path)) for path in _nonempty_index(MODELS_SUBDIR, "model").values()]


def list_gpus() -> list[GpuSpec]:
    """Every accelerator card of the catalog, sorted by name; an empty catalog is an error."""
    return [load_gpu(str(path)) for path in _nonempty_index(GPUS_SUBDIR, "accelerator").values()]
