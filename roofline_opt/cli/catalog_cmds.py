"""``roofline-opt models`` and ``roofline-opt gpus``: the catalogs with their key figures and sources.

Imports neither numpy nor pandas: a model's figures are its static sizes (``physics.sizes``), printed by
``report.records_table``.
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from roofline_opt.physics import sizes
from roofline_opt.physics.specs import DEFAULT, WEIGHT_BITS, GpuSpec, ModelSpec

TABLE_HIDDEN = ["aliases", "price_source"]
"""Fields --json carries that the terminal table leaves out for width."""
SOURCE_WIDTH = 60
"""Characters of a card's source the terminal table shows (--json gives it whole)."""


def _attention(model: ModelSpec) -> str:
    if model.is_mla:
        return "MLA"
    if model.group_size == 1:
        return "MHA"
    return "MQA" if model.group_size == model.n_q_heads else f"GQA/{model.group_size}"


def model_figures(model: ModelSpec) -> dict[str, Any]:
    """Key figures of a model card: parameters in billions, KV-cache bytes per token, layers, experts."""
    from roofline_opt import catalog

    model_sizes = sizes.model_sizes(model)
    return {
        "name": model.name,
        "params_total_b": model_sizes.total_params / 1e9,
        "params_active_b": model_sizes.active_params / 1e9,
        "kv_bytes_per_token": sizes.kv_bytes_per_token(model, DEFAULT.activation_bytes),
        "n_layers": model.n_layers,
        "experts": f"{model.n_experts}/{model.n_active_experts}" if model.is_moe else "-",
        "attention": _attention(model),
        "source": model.source,
        "aliases": catalog.model_aliases(model.name),
    }


def gpu_figures(gpu: GpuSpec) -> dict[str, Any]:
    """Key figures of an accelerator card: dense TFLOP/s per precision, HBM, scale-up domain, price."""
    tflops = {f"tflops_{bits}bit": gpu.flop_per_s_by_bits.get(bits, float("nan")) / 1e12 for bits in WEIGHT_BITS}
    return {
        "name": gpu.name,
        **tflops,
        "hbm_gb": gpu.hbm_bytes / 1e9,
        "hbm_tb_s": gpu.hbm_bytes_per_s / 1e12,
        "scaleup_gpus": gpu.scaleup_gpus,
        "usd_per_hour": gpu.usd_per_hour,
        "price_basis": gpu.price_basis,
        "price_date": gpu.price_date,
        "price_source": gpu.price_source,
        "source": gpu.source,
    }


def _show(specs: list[Any], figures: Callable[[Any], dict[str, Any]], as_json: bool) -> int:
    """Print every card field plus its figures as JSON, or its figures as a table with sources shortened."""
    from roofline_opt import report

    if as_json:
        print(report.to_json([asdict(spec) | figures(spec) for spec in specs]))
        return 0
    rows = [
        {key: value for key, value in figures(spec).items() if key not in TABLE_HIDDEN}
        | {"source": textwrap.shorten(spec.source, SOURCE_WIDTH, placeholder="...")}
        for spec in specs
    ]
    print(report.records_table(rows))
    return 0


def run_models(args: argparse.Namespace) -> int:
    from roofline_opt import catalog

    return _show(catalog.list_models(), model_figures, args.json)


def run_gpus(args: argparse.Namespace) -> int:
    from roofline_opt import catalog

    return _show(catalog.list_gpus(), gpu_figures, args.json)


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    """Register ``models`` and ``gpus``."""
    from roofline_opt.cli import command_help, helpfmt

    for name, func in (("models", run_models), ("gpus", run_gpus)):
        text = command_help(name)
        p = subparsers.add_parser(
            name, help=text, description=f"{text[0].upper()}{text[1:]}.", epilog=helpfmt.examples(name)
        )
        p.add_argument("--json", action="store_true", help="print a JSON list with every card field")
        p.set_defaults(func=func)
