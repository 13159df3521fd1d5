"""Catalog: model and accelerator cards (YAML) and HuggingFace config.json files turned into checked specs.

Cards live in ``models/`` and ``instances/gpus/`` at the repository's top level, one ``<name>.yaml`` per entry.
Folders listed in the environment variable ``ROOFLINE_OPT_DATA`` (``os.pathsep``-separated, each holding
``models/`` and/or ``instances/gpus/``) are searched first, so an installed copy can point at its cards and a user
can add or override entries without touching the repository.

May import: ``roofline_opt.physics.specs``, the base modules (errors, checks, files) and PyYAML.
Modules: ``parse`` (bounded reading, fields checked into specs), ``hf_config``, ``cards`` (lookup by name).
"""

from roofline_opt.catalog.cards import (
    DATA_ENV,
    REPO_ROOT,
    data_dirs,
    list_gpus,
    list_models,
    load_gpu,
    load_model,
    resolve_model,
    split_precision_suffix,
)
from roofline_opt.catalog.hf_config import model_from_hf_config

__all__ = [
    "DATA_ENV",
    "REPO_ROOT",
    "data_dirs",
    "list_gpus",
    "list_models",
    "load_gpu",
    "load_model",
    "model_from_hf_config",
    "resolve_model",
    "split_precision_suffix",
]
