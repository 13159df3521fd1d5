"""Where a speculative (MTP) round's time goes in the estimate, next to the same setup without MTP.

Usage::

    python benchmarks/mtp_verify_breakdown.py [FILE.csv] [--lines 224,227,...] [--preset default]

For each chosen row of a measured-points CSV (default: ``tests/data/measured_public_2026.csv``, a handful of
InferenceX DeepSeek-R1 rows measured with MTP on and rows of the same setup without it) it prints, at the row's batch
and decode context (I + O / 2), decode only (no prompt tokens, ``evaluator.step`` on the layouts the estimate uses):

- the target's verification step of gamma + 1 tokens per sequence (``Layout.verifying``) split into its parts:
  kernel launches, serial network, GEMM memory and compute, decode attention (KV read and attention FLOPs), each in
  ms, with the resource that binds each class;
- the MTP block's draft step (``Layout.for_draft``) the same way, and gamma of them per round; and the draft pass
  over gamma + 1 tokens per sequence that engines run as one of those gamma passes (SGLang's ``draft_extend`` after
  verification, sgl-project/sglang python/sglang/srt/speculative/eagle_worker_v2.py @006b0e3d: gamma - 1 draft
  decode passes plus one extend of ``speculative_num_steps + 1`` tokens per request), which the estimate prices as a
  plain draft step (the difference is printed);
- the round (verification + gamma draft steps + host), the expected tokens per round E and the decode TPOT
  (``evaluator.time_per_token_with_gamma``);
- the plain step at the same batch (the row's no-MTP twin), and the estimate's speed-up of MTP at that batch;
- the measured TPOT, the estimate's whole-request TPOT (``validate``'s estimate, prefill cycle included) and their
  ratio; and, read backwards, the round time the measured TPOT implies at the estimate's E.

No figure is fitted; the script only reads the physics and the CSV.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from roofline_opt.fidelity.measured import gpu_card, map_row, model_card, read_measured
from roofline_opt.fidelity.validate import validate
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics.mtp import mtp_module
from roofline_opt.physics.specs import PRESETS, Preset
from roofline_opt.physics.step_figures import StepFigures

DEFAULT_CSV = Path(__file__).resolve().parents[1] / "tests" / "data" / "measured_public_2026.csv"
DEFAULT_LINES = (
    # MI325X SGLang v0.5.12 TP8 (MTP 2): 1k/1k and 8k/1k at concurrency 16 and 64; no MTP at 4 and 8
    222,
    224,
    229,
    225,
    227,
    236,
    # H200 SGLang v0.5.12 TP8 (MTP 2) 8k/1k at 16 and 64; no MTP at 8; TensorRT-LLM without MTP at 64
    180,
    182,
    191,
    203,
    # MI355X SGLang v0.5.12 TP8 FP8 8k/1k concurrency 32, with and without MTP (same setup)
    308,
    318,
    # H200 and B200 TensorRT-LLM: DP attention MTP 1 at 256 (8k/1k), TP8 EP8 MTP 3 at 16
    197,
    194,
    87,
    99,
)


def _ms(x) -> float:
    return float(np.ravel(x)[0]) * 1e3


def _parts(f: StepFigures) -> str:
    gemm = "mem" if _ms(f.gemm_memory_s) >= _ms(f.gemm_compute_s) else "flop"
    attn = "kv" if _ms(f.decode_attention_memory_s) >= _ms(f.decode_attention_compute_s) else "flop"
    return (
        f"step {_ms(f.step_time_s):7.2f} = launch {_ms(f.kernel_launch_s):5.2f} + net {_ms(f.network_s):5.2f}"
        f" + GEMM max(mem {_ms(f.gemm_memory_s):6.2f}, flop {_ms(f.gemm_compute_s):6.2f})={gemm:4s}"
        f" + attn max(kv {_ms(f.decode_attention_memory_s):6.2f}, flop {_ms(f.decode_attention_compute_s):6.2f})"
        f"={attn}"
    )


def breakdown(path: Path, lines: tuple[int, ...], preset: Preset) -> str:
    """The report for the CSV rows at ``lines`` (1-based CSV lines, header = 1)."""
    cells = read_measured(path)
    estimates = {v.row.line: v for v in validate(path, preset)}
    out = [f"preset {preset.name}; decode-only parts at the row's batch and context (ms)"]
    for line in lines:
        row = map_row(cells[line - 2])
        s = row.setup
        if s is None or s.batch is None:
            out.append(f"line {line}: no setup with a batch ({'; '.join(row.reasons)})")
            continue
        model = model_card(s.model_card)
        assert model is not None
        gpu = gpu_card(s.gpu_card)
        layout = ev.Layout.of(s.tp, False, s.pp, s.context, 1, s.ep, s.kv_bits, s.dp_attention, s.a2a_overlap)
        batch = np.asarray(float(s.batch))
        head = (
            f"line {line}: {s.gpu_card} {row.framework[:34]} w{s.weight_bits} kv{s.kv_bits} {s.label} "
            f"B {s.batch} I/O {s.input_len}/{s.output_len} context {s.context}"
        )
        out.append(head)
        plain = ev.step(model, gpu, preset, s.weight_bits, layout, batch)
        out.append(f"  no MTP   {_parts(plain)}")
        if s.mtp_depth:
            gamma = float(s.mtp_depth)
            draft = mtp_module(model)
            bits = s.draft_weight_bits or s.weight_bits
            verify = ev.step(model, gpu, preset, s.weight_bits, layout.verifying(gamma), batch)
            draft_step = ev.step(draft, gpu, preset, bits, layout.for_draft(draft), batch)
            e = float(ev.expected_tokens_per_round(s.acceptance, gamma))
            host = float(ev.speculative_round_host_s(preset, gamma))
            round_ms = _ms(verify.step_time_s) + gamma * _ms(draft_step.step_time_s) + host * 1e3
            out.append(f"  verify   {_parts(verify)}  (x{_ms(verify.step_time_s) / _ms(plain.step_time_s):.2f})")
            out.append(f"  draft    {_parts(draft_step)}  x gamma {gamma:g} (draft at {bits} bits)")
            extend = ev.step(draft, gpu, preset, bits, layout.for_draft(draft).verifying(gamma), batch)
            extra_ms = _ms(extend.step_time_s) - _ms(draft_step.step_time_s)
            out.append(
                f"  extend   {_parts(extend)}  (one draft pass over gamma + 1 tokens per sequence, as SGLang's "
                f"draft extend and TensorRT-LLM's first MTP pass run it: +{extra_ms:.2f} ms per round, not priced)"
            )
            out.append(
                f"  round {round_ms:.2f} ms (host {host * 1e3:.2f}) / E {e:.3f} (acceptance {s.acceptance:.3f}) = "
                f"TPOT {round_ms / e:.2f} ms; MTP speed-up at this batch {_ms(plain.step_time_s) * e / round_ms:.2f}x"
            )
        v = estimates[line]
        if v.estimate.tok_s_per_request and row.measured_tok_s_per_request:
            measured_ms = 1e3 / row.measured_tok_s_per_request
            estimated_ms = 1e3 / v.estimate.tok_s_per_request
            implied = ""
            if s.mtp_depth:
                implied = f"; measured round at E {e:.2f}: {measured_ms * e:.1f} ms"
            out.append(
                f"  measured TPOT {measured_ms:.2f} ms, estimate (whole requests) {estimated_ms:.2f} ms: "
                f"estimate/measured tok/s per user {measured_ms / estimated_ms:.2f}{implied}"
            )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", nargs="?", type=Path, default=DEFAULT_CSV)
    parser.add_argument("--lines", default=",".join(str(x) for x in DEFAULT_LINES))
    parser.add_argument("--preset", default="default", choices=sorted(PRESETS))
    args = parser.parse_args(argv)
    lines = tuple(int(x) for x in args.lines.split(",") if x)
    print(breakdown(args.csv, lines, PRESETS[args.preset]))


if __name__ == "__main__":
    main()
