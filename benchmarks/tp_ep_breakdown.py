"""Prefill and decode steps of TP+EP rows (experts spread over the TP ranks, attention tensor-parallel) and their
TP twins, as their parts: kernel launches, network by collective, memory, compute.

Usage::

    python benchmarks/tp_ep_breakdown.py FILE.csv [FILE.csv ...] [--gpus h200 b200] [--preset default]

Every disaggregated row on the chosen accelerators whose prefill or decode side is TP8 EP8 (no data-parallel
attention) is read; its prefill step is the estimate's full prefill batch
(``whole_requests.PREFILL_BATCH_TOKENS`` prompt tokens, whole prompts) and its decode step the row's clients per
decode instance at the mean context I + O / 2, one token per sequence (MTP drafts left out: the point is the
step's communication). Both are printed for the row's layout and for its twin: the same row with ``ep`` switched
between 1 and the TP degree. Network time is split by collective (milliseconds per step); ``step`` is the step as
the preset combines its parts. Nothing is fitted; this only prints the evaluator's terms.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from roofline_opt.fidelity import whole_requests
from roofline_opt.fidelity.measured import gpu_card, map_row, model_card, read_measured
from roofline_opt.physics import evaluator, requests
from roofline_opt.physics.sizes import model_sizes
from roofline_opt.physics.specs import PRESETS, GpuSpec, ModelSpec, Preset


@dataclass(frozen=True)
class Side:
    """One instance's layout and the step it runs: ``kind`` "prefill" (``prompts`` of ``isl`` tokens) or
    "decode" (``batch`` sequences at ``context``)."""

    kind: str
    tp: int
    ep: int
    batch: float
    isl: int = 0
    context: float = 0.0

    @property
    def name(self) -> str:
        return f"TP{self.tp} EP{self.ep}" if self.ep > 1 else f"TP{self.tp}"


def collective_labels(model: ModelSpec, preset: Preset, layout: evaluator.Layout) -> list[str]:
    """Names of ``evaluator.collectives``' entries, in its order."""
    sz = model_sizes(model)
    labels: list[str] = []
    kinds = [("moe" if model.is_moe else "ff", sz.n_moe_layers)]
    if sz.n_dense_layers:
        kinds.append(("dense", sz.n_dense_layers))
    for kind, n_layers in kinds:
        if n_layers == 0:
            continue
        labels += [f"2-D {kind} {part}" for part in ("qkv", "attn out", "ff in", "ff out")]
        labels += [f"{kind} layers: attn out all-reduce", f"{kind} layers: ff out all-reduce"]
        if model.is_moe and kind == "moe":
            labels.append("moe layers: expert dispatch + combine")
    labels.append("pipeline send")
    if layout.any_dp_attention:
        labels.append("DP-attention dispatch + combine")
    return labels


def breakdown(model: ModelSpec, gpu: GpuSpec, preset: Preset, weight_bits: int, kv_bits: int, side: Side) -> dict:
    """The step's parts in milliseconds (network by collective) for one side."""
    if side.kind == "prefill":
        layout = evaluator.Layout.of(side.tp, False, 1, 0, 1, side.ep, kv_bits)
        figures = requests.prefill_step(model, gpu, preset, weight_bits, layout, side.batch, side.isl)
        # prefill_step times its collectives on the prompt's tokens at C = prefix
        timed = evaluator.Layout.of(side.tp, False, 1, 0, side.isl, side.ep, kv_bits)
        step_preset = preset
    else:
        layout = evaluator.Layout.of(side.tp, False, 1, side.context, 1, side.ep, kv_bits)
        figures = evaluator.step(model, gpu, preset, weight_bits, layout, side.batch)
        timed, step_preset = layout, preset
    collectives = evaluator.collectives(model, evaluator.hardware(gpu, preset), step_preset, weight_bits, timed)
    labels = collective_labels(model, preset, timed)
    assert len(labels) == len(collectives)
    network = {
        label: 1e3 * float(np.ravel(c.time_s(side.batch))[0])
        for label, c in zip(labels, collectives, strict=True)
        if float(np.ravel(c.time_s(side.batch))[0]) > 0.0
    }
    one = lambda x: 1e3 * float(np.ravel(x)[0])  # noqa: E731
    return {
        "launch": one(figures.kernel_launch_s),
        "network": one(figures.network_s),
        "by collective": network,
        "memory": one(figures.memory_s),
        "compute": one(figures.compute_s),
        "step": one(figures.step_time_s),
    }


def sides(path: Path, gpus: Sequence[str]):
    """(line, row setup, its TP8 sides) for the disaggregated rows on ``gpus`` with a TP side (no DP attention)."""
    for cells in read_measured(path):
        row = map_row(cells)
        s = row.setup
        if s is None or s.serving != "disaggregated" or s.prefill is None or s.gpu_card not in gpus:
            continue
        if None in (s.input_len, s.output_len, s.clients):
            continue
        assert s.input_len is not None and s.output_len is not None and s.clients is not None
        out = []
        p = s.prefill
        if not p.dp_attention and p.pp == 1:
            prompts = float(max(1, whole_requests.PREFILL_BATCH_TOKENS // s.input_len))
            out.append(Side("prefill", p.tp, p.ep, prompts, isl=s.input_len))
        if not s.dp_attention and s.pp == 1:
            per_instance = max(1.0, round(s.clients / max(s.instances, 1)))
            out.append(Side("decode", s.tp, s.ep, per_instance, context=s.input_len + s.output_len / 2.0))
        if out:
            yield row.line, row, out


def twin(side: Side) -> Side:
    """The same step with experts spread over the TP ranks (EP = TP) or not (EP 1)."""
    return Side(side.kind, side.tp, 1 if side.ep > 1 else side.tp, side.batch, side.isl, side.context)


def print_breakdown(label: str, parts: dict) -> None:
    network = ", ".join(f"{k} {v:.2f}" for k, v in parts["by collective"].items()) or "none"
    print(
        f"  {label}: step {parts['step']:.2f} ms = launch {parts['launch']:.2f} + network {parts['network']:.2f} "
        f"+ max-combined memory {parts['memory']:.2f} / compute {parts['compute']:.2f}\n    network: {network}"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--gpus", nargs="+", default=["h200", "b200"], help="accelerator cards to read")
    parser.add_argument("--preset", default="default", choices=sorted(PRESETS))
    args = parser.parse_args(argv)
    preset = PRESETS[args.preset]
    for path in args.files:
        for line, row, chosen in sides(path, args.gpus):
            s = row.setup
            assert s is not None
            if not any(side.tp == 8 and side.ep == side.tp for side in chosen):
                continue
            model, gpu = model_card(s.model_card), gpu_card(s.gpu_card)
            assert model is not None
            print(
                f"{path.name}:{line} {s.gpu_card} {s.weight_bits}-bit {row.layout} clients {s.clients} "
                f"I/O {s.input_len}/{s.output_len} ({s.framework}); preset {preset.name}"
            )
            for side in chosen:
                if side.tp != 8 or side.ep != side.tp:
                    continue
                what = (
                    f"{side.batch:g} prompts of {side.isl}"
                    if side.kind == "prefill"
                    else (f"batch {side.batch:g} at context {side.context:g}")
                )
                for one in (side, twin(side)):
                    parts = breakdown(model, gpu, preset, s.weight_bits, s.kv_bits, one)
                    tag = "row" if one is side else "twin"
                    print_breakdown(f"{side.kind} {one.name} ({tag}; {what})", parts)


if __name__ == "__main__":
    main()
