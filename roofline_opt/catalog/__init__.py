"""Catalog: model and accelerator cards (YAML) and HuggingFace config.json files turned into checked specs.

Cards live in ``models/`` and ``instances/gpus/`` at the repository's top level, one ``<name>.yaml`` per entry; a
built wheel carries a copy in ``roofline_opt/_data``. Folders listed in the environment variable ``ROOFLINE_OPT_DATA``
(``os.pathsep``-separated) add the user's cards; a name clash with a packaged card is an error, never a silent
replacement. Model cards list ``aliases:`` (HuggingFace ids); ``resolve_alias`` maps them to cards.
Accelerator prices: ``prices`` (one basis, owned-hardware derivation, per-question overrides).

May import: ``roofline_opt.physics.specs``, the base modules (errors, checks, files) and PyYAML.
Modules: ``parse`` (bounded reading, fields checked into specs), ``hf_config``, ``cards`` (lookup by name).
"""

from roofline_opt.catalog.cards import (
    DATA_ENV,
    REPO_ROOT,
    cluster_file,
    data_dirs,
    data_file,
    list_clusters,
    list_gpus,
    list_models,
    load_gpu,
    load_model,
    model_aliases,
    native_weight_bits,
    packaged_root,
    resolve_alias,
    resolve_draft,
    resolve_model,
    split_precision_suffix,
)
from roofline_opt.catalog.hf_config import model_from_hf_config

__all__ = [
    "DATA_ENV",
    "REPO_ROOT",
    "cluster_file",
    "data_dirs",
    "data_file",
    "list_clusters",
    "model_aliases",
    "native_weight_bits",
    "packaged_root",
    "resolve_alias",
    "list_gpus",
    "list_models",
    "load_gpu",
    "load_model",
    "model_from_hf_config",
    "resolve_draft",
    "resolve_model",
    "split_precision_suffix",
]
