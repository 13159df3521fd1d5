"""What InferenceX's launch scripts set for a DeepSeek-R1 run that its published row leaves unstated.

InferenceX (SemiAnalysisAI/InferenceX) publishes each point with the GitHub Actions run that measured it and the
image it ran, but not the KV-cache precision nor the MTP depth; its launch scripts do, one per model, precision,
accelerator and engine (``benchmarks/dsr1_<precision>_<accelerator>[_<engine>][_mtp].sh``, moved to
``benchmarks/single_node/`` in February 2026 and ``benchmarks/single_node/fixed_seq_len/`` in June 2026). Each entry
below is one version of one such script, read at the commit last touching it before the run (``git log -1
--before=<run date> -- <path>`` on the InferenceX history), and holds for runs from that commit's date until the
script next changed. A run may have used a pull request's branch rather than the main branch; the main branch at the
run's date is the best public record of what it ran.

Only aggregated single-node recipes are listed: the disaggregated rows' recipes (Dynamo's srt-slurm recipes, AMD's
MoRI ``amd_utils``) set the MTP depth per matrix entry, which the published row does not name.

Besides the KV cache and the MTP depth (which the estimate reads), each entry records the recipe's prefill chunk,
prefill token budget, CUDA-graph batch and memory fraction as text (``other``): the estimate does not read them from
a row, so they are recorded in the row's assumptions, not applied.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SOURCE_REPO = "SemiAnalysisAI/InferenceX"
"""The repository whose launch scripts the entries read."""

_RUN_DATE_RE = re.compile(r"SemiAnalysisAI/InferenceX/actions/runs/\d+(?:/attempts/\d+)?\s*\((\d{4}-\d{2}-\d{2})\)")
"""An InferenceX row's run and its date, as its notes state them (``.../actions/runs/26135021096/attempts/1
(2026-05-20)``)."""

ENGINES = ("TensorRT-LLM", "SGLang", "ATOM")
"""Engines with single-node recipes, in the order a framework text is matched (TensorRT-LLM before SGLang)."""


@dataclass(frozen=True)
class Recipe:
    """One version of an InferenceX DeepSeek-R1 launch script: ``engine`` on ``gpu_card`` at ``weight_format``
    (InferenceX's ``fp8`` or ``fp4``), with MTP (``mtp``) or without, in effect from ``since`` until ``until``
    (ISO dates; ``until`` exclusive, empty: still current). ``kv_bits``: the KV cache the script sets (None: it passes
    no KV flag, so the engine's ``auto`` default applies); ``mtp_depth``: drafted tokens per round (None: the script
    leaves it to the engine), ``mtp_depth_dp_attention`` with attention data parallelism (None: the same).
    ``other``: the script's prefill and memory settings, as text. ``source``: the script's path and commit."""

    engine: str
    gpu_card: str
    weight_format: str
    mtp: bool
    since: str
    until: str
    kv_bits: int | None
    mtp_depth: int | None
    source: str
    other: str = ""
    mtp_depth_dp_attention: int | None = None

    def depth(self, dp_attention: bool) -> int | None:
        """Drafted tokens per round the script runs, with attention data parallelism or without."""
        if dp_attention and self.mtp_depth_dp_attention is not None:
            return self.mtp_depth_dp_attention
        return self.mtp_depth

    def describe(self) -> str:
        """What the row is read with from this recipe, in words (the row's assumptions column)."""
        kv = f"{self.kv_bits}-bit KV cache" if self.kv_bits else "no KV flag (the engine's auto default)"
        parts = [kv]
        if self.mtp:
            depth = "the engine's default depth" if self.mtp_depth is None else f"{self.mtp_depth} drafted tokens"
            if self.mtp_depth_dp_attention is not None:
                depth += f" ({self.mtp_depth_dp_attention} with attention data parallelism)"
            parts.append(f"MTP at {depth}")
        tail = f"; also sets {self.other} (not read by the estimate)" if self.other else ""
        return f"InferenceX recipe {self.source}: {', '.join(parts)}{tail}"


def _src(path: str, commit: str, flags: str) -> str:
    return f"{SOURCE_REPO} benchmarks/{path} @{commit} ({flags})"


_SG_KV = "--kv-cache-dtype fp8_e4m3"
_SG_MTP2 = "--speculative-num-steps 2 --speculative-num-draft-tokens 3"
_SG_MTP3 = "--speculative-num-steps 3 --speculative-num-draft-tokens 4"
_TRT_KV = "kv_cache_config: dtype: fp8"
_TRT_MTP = "num_nextn_predict_layers: MTP=3, MTP=1 when DP_ATTENTION=true"
_ATOM_KV = "--kv_cache_dtype fp8"

# engine settings several script versions share (what the table records as text, not applied)
_SG_PREFILL_131K = "chunked prefill 131072, max prefill tokens 131072, cuda-graph max bs 128, mem fraction 0.8"
_SG_PREFILL_16K_BS256 = "chunked prefill 16384, cuda-graph max bs 256, mem fraction 0.85"
_SG_PREFILL_196K = (
    "chunked prefill = max prefill tokens 196608 (32768 at 8k/1k above concurrency 32), cuda-graph max bs 128, "
    "mem fraction 0.8"
)
_TRT_BS128_FREE_075 = "cuda_graph_config max_batch_size 128, free_gpu_memory_fraction 0.75"
_SG_PREFILL_16K_BS512 = "chunked prefill 16384, max prefill tokens 16384, cuda-graph max bs 512, mem fraction 0.82"
_SG_PREFILL_196K_BS_CONCURRENCY = (
    "chunked prefill 196608, max prefill tokens 196608, cuda-graph max bs = concurrency, mem fraction 0.8"
)
_SG_PREFILL_32K_BS128 = "chunked prefill 32768, max prefill tokens 32768, cuda-graph max bs 128, mem fraction 0.82"
_SG_PREFILL_32K_TP8_8K_TP4 = (
    "TP8: chunked prefill 32768, max prefill tokens 32768, cuda-graph max bs 128, mem fraction 0.82; TP4: 8192, 8192, "
    "32, 0.95"
)
_SG_PREFILL_32K_BS512_OR_256 = (
    "chunked prefill 32768, max prefill tokens 32768, cuda-graph max bs 512 (1k/1k) or 256, mem fraction 0.82"
)
_TRT_BS512_FREE_08 = "cuda_graph_config max_batch_size 512, free_gpu_memory_fraction 0.8"
_TRT_BS256_FREE_08 = "cuda_graph_config max_batch_size 256, free_gpu_memory_fraction 0.8"
_ATOM_MTP_DEFAULT = (
    "--method mtp without --num-speculative-tokens: ATOM's default 1 drafted token, ROCm/ATOM "
    "atom/model_engine/arg_utils.py default=1 from @7b4b6089 (2025-12-10) to v0.1.3 @bdcc62e9 (2026-05-30)"
)

RECIPES: tuple[Recipe, ...] = (
    # SGLang, B200
    Recipe(
        "SGLang",
        "b200",
        "fp8",
        False,
        "2025-11-10",
        "2025-11-21",
        8,
        None,
        _src("dsr1_fp8_b200_docker.sh", "d8fe8f73", _SG_KV),
        _SG_PREFILL_32K_BS128,
    ),
    Recipe(
        "SGLang",
        "b200",
        "fp8",
        False,
        "2025-11-21",
        "2026-01-12",
        8,
        None,
        _src("dsr1_fp8_b200_docker.sh", "d22bf9ca", _SG_KV) + "; dsr1_fp8_b200_slurm.sh @ea181ae6 the same",
        _SG_PREFILL_32K_BS128,
    ),
    Recipe(
        "SGLang",
        "b200",
        "fp8",
        False,
        "2026-03-11",
        "2026-03-27",
        8,
        None,
        _src("single_node/dsr1_fp8_b200.sh", "64c20b6b", _SG_KV),
        _SG_PREFILL_32K_TP8_8K_TP4,
    ),
    Recipe(
        "SGLang",
        "b200",
        "fp8",
        False,
        "2026-05-12",
        "2026-06-02",
        8,
        None,
        _src("single_node/dsr1_fp8_b200.sh", "ed5867f9", _SG_KV),
        _SG_PREFILL_32K_TP8_8K_TP4,
    ),
    Recipe(
        "SGLang",
        "b200",
        "fp8",
        True,
        "2026-03-11",
        "2026-03-27",
        8,
        2,
        _src("single_node/dsr1_fp8_b200_mtp.sh", "64c20b6b", f"{_SG_KV}, {_SG_MTP2}"),
        _SG_PREFILL_16K_BS512,
    ),
    Recipe(
        "SGLang",
        "b200",
        "fp8",
        True,
        "2026-05-12",
        "2026-06-02",
        8,
        2,
        _src("single_node/dsr1_fp8_b200_mtp.sh", "ed5867f9", f"{_SG_KV}, {_SG_MTP2}"),
        _SG_PREFILL_16K_BS512,
    ),
    Recipe(
        "SGLang",
        "b200",
        "fp4",
        False,
        "2025-10-01",
        "2025-11-10",
        8,
        None,
        _src("dsr1_fp4_b200_docker.sh", "4b860b78", _SG_KV),
        _SG_PREFILL_16K_BS256,
    ),
    Recipe(
        "SGLang",
        "b200",
        "fp4",
        False,
        "2025-11-10",
        "2025-11-21",
        8,
        None,
        _src("dsr1_fp4_b200_docker.sh", "d8fe8f73", _SG_KV),
        _SG_PREFILL_16K_BS256,
    ),
    Recipe(
        "SGLang",
        "b200",
        "fp4",
        False,
        "2026-03-11",
        "2026-03-27",
        8,
        None,
        _src("single_node/dsr1_fp4_b200.sh", "64c20b6b", _SG_KV),
        _SG_PREFILL_16K_BS256,
    ),
    Recipe(
        "SGLang",
        "b200",
        "fp4",
        False,
        "2026-05-12",
        "2026-06-02",
        8,
        None,
        _src("single_node/dsr1_fp4_b200.sh", "ed5867f9", _SG_KV),
        _SG_PREFILL_16K_BS256,
    ),
    Recipe(
        "SGLang",
        "b200",
        "fp4",
        True,
        "2026-05-20",
        "2026-06-02",
        8,
        2,
        _src("single_node/dsr1_fp4_b200_mtp.sh", "292726bb", f"{_SG_KV}, {_SG_MTP2}"),
        _SG_PREFILL_16K_BS512,
    ),
    # SGLang, H200: no KV flag (BF16 for DeepSeek-R1's FP8 checkpoint, which carries no KV-cache quantization)
    Recipe(
        "SGLang",
        "h200",
        "fp8",
        False,
        "2026-03-06",
        "2026-03-27",
        None,
        None,
        _src("single_node/dsr1_fp8_h200.sh", "41aff0af", "no --kv-cache-dtype"),
        _SG_PREFILL_32K_BS512_OR_256,
    ),
    Recipe(
        "SGLang",
        "h200",
        "fp8",
        False,
        "2026-05-12",
        "2026-06-02",
        None,
        None,
        _src("single_node/dsr1_fp8_h200.sh", "ed5867f9", "no --kv-cache-dtype"),
        _SG_PREFILL_32K_BS512_OR_256,
    ),
    Recipe(
        "SGLang",
        "h200",
        "fp8",
        True,
        "2026-05-20",
        "2026-06-02",
        None,
        2,
        _src("single_node/dsr1_fp8_h200_mtp.sh", "cd5f6dd2", f"no --kv-cache-dtype, {_SG_MTP2}"),
        "chunked prefill 32768, max prefill tokens 32768, cuda-graph max bs 512 or 256, mem fraction 0.82",
    ),
    # SGLang, AMD
    Recipe(
        "SGLang",
        "mi300x",
        "fp8",
        False,
        "2026-02-19",
        "2026-03-11",
        8,
        None,
        _src("single_node/dsr1_fp8_mi300x.sh", "8d81e0bf", _SG_KV),
        _SG_PREFILL_131K,
    ),
    Recipe(
        "SGLang",
        "mi300x",
        "fp8",
        False,
        "2026-05-12",
        "2026-06-02",
        8,
        None,
        _src("single_node/dsr1_fp8_mi300x.sh", "ed5867f9", _SG_KV),
        _SG_PREFILL_131K,
    ),
    Recipe(
        "SGLang",
        "mi325x",
        "fp8",
        False,
        "2026-02-19",
        "2026-03-08",
        8,
        None,
        _src("single_node/dsr1_fp8_mi325x.sh", "8d81e0bf", _SG_KV),
        _SG_PREFILL_131K,
    ),
    Recipe(
        "SGLang",
        "mi325x",
        "fp8",
        False,
        "2026-05-12",
        "2026-06-02",
        8,
        None,
        _src("single_node/dsr1_fp8_mi325x.sh", "ed5867f9", _SG_KV),
        _SG_PREFILL_131K,
    ),
    Recipe(
        "SGLang",
        "mi325x",
        "fp8",
        True,
        "2026-05-18",
        "2026-06-02",
        8,
        3,
        _src("single_node/dsr1_fp8_mi325x_mtp.sh", "8283444d", f"{_SG_KV}, {_SG_MTP3}"),
        _SG_PREFILL_131K,
    ),
    Recipe(
        "SGLang",
        "mi355x",
        "fp8",
        False,
        "2026-03-05",
        "2026-03-11",
        8,
        None,
        _src("single_node/dsr1_fp8_mi355x.sh", "9d39c92e", _SG_KV),
        _SG_PREFILL_196K_BS_CONCURRENCY,
    ),
    Recipe(
        "SGLang",
        "mi355x",
        "fp8",
        False,
        "2026-05-12",
        "2026-06-02",
        8,
        None,
        _src("single_node/dsr1_fp8_mi355x.sh", "ed5867f9", _SG_KV),
        _SG_PREFILL_196K_BS_CONCURRENCY,
    ),
    Recipe(
        "SGLang",
        "mi355x",
        "fp8",
        True,
        "2026-05-20",
        "2026-06-02",
        8,
        3,
        _src("single_node/dsr1_fp8_mi355x_mtp.sh", "c178e282", f"{_SG_KV}, {_SG_MTP3}"),
        _SG_PREFILL_196K_BS_CONCURRENCY,
    ),
    # MI355X MXFP4: the October 2025 script passes no KV flag
    Recipe(
        "SGLang",
        "mi355x",
        "fp4",
        False,
        "2025-10-02",
        "2025-11-21",
        None,
        None,
        _src("dsr1_fp4_mi355x_docker.sh", "a25544f7", "no --kv-cache-dtype; dsr1_fp4_mi355x_slurm.sh the same"),
        _SG_PREFILL_196K,
    ),
    Recipe(
        "SGLang",
        "mi355x",
        "fp4",
        False,
        "2026-02-19",
        "2026-03-11",
        8,
        None,
        _src("single_node/dsr1_fp4_mi355x.sh", "8d81e0bf", _SG_KV),
        _SG_PREFILL_196K,
    ),
    Recipe(
        "SGLang",
        "mi355x",
        "fp4",
        False,
        "2026-06-02",
        "",
        8,
        None,
        _src("single_node/fixed_seq_len/dsr1_fp4_mi355x.sh", "1b234994", _SG_KV),
        _SG_PREFILL_196K,
    ),
    Recipe(
        "SGLang",
        "mi355x",
        "fp4",
        True,
        "2026-05-20",
        "2026-06-02",
        8,
        3,
        _src("single_node/dsr1_fp4_mi355x_mtp.sh", "8a16828e", f"{_SG_KV}, {_SG_MTP3}"),
        _SG_PREFILL_196K,
    ),
    # TensorRT-LLM
    Recipe(
        "TensorRT-LLM",
        "b200",
        "fp4",
        False,
        "2025-10-29",
        "2025-11-03",
        8,
        None,
        _src("dsr1_fp4_b200_trt_slurm.sh", "9596d23d", _TRT_KV),
        _TRT_BS512_FREE_08,
    ),
    Recipe(
        "TensorRT-LLM",
        "b200",
        "fp4",
        False,
        "2025-11-21",
        "2026-01-12",
        8,
        None,
        _src("dsr1_fp4_b200_trt_slurm.sh", "d22bf9ca", _TRT_KV),
        _TRT_BS512_FREE_08,
    ),
    Recipe(
        "TensorRT-LLM",
        "b200",
        "fp4",
        False,
        "2026-02-03",
        "2026-02-19",
        8,
        None,
        _src("dsr1_fp4_b200_trt.sh", "6eecc0e6", _TRT_KV),
        "cuda-graph max batch = concurrency (concurrency / 4 with DP attention), free_gpu_memory_fraction 0.8",
    ),
    Recipe(
        "TensorRT-LLM",
        "b200",
        "fp4",
        False,
        "2026-05-12",
        "2026-06-02",
        8,
        None,
        _src("single_node/dsr1_fp4_b200_trt.sh", "ed5867f9", _TRT_KV),
        "cuda-graph max batch = concurrency (concurrency / 4 with DP attention), free_gpu_memory_fraction 0.8, "
        "max_num_tokens max(8192, concurrency + ISL rounded up to 64)",
    ),
    Recipe(
        "TensorRT-LLM",
        "b200",
        "fp8",
        False,
        "2025-11-21",
        "2026-01-12",
        8,
        None,
        _src("dsr1_fp8_b200_trt_slurm.sh", "d22bf9ca", _TRT_KV),
        _TRT_BS256_FREE_08,
    ),
    Recipe(
        "TensorRT-LLM",
        "b200",
        "fp8",
        False,
        "2026-01-29",
        "2026-02-19",
        8,
        None,
        _src("dsr1_fp8_b200_trt.sh", "ec7bafaa", _TRT_KV),
        "cuda-graph max batch = concurrency (less with DP attention), free_gpu_memory_fraction 0.8 (0.7-0.75 "
        "in some branches)",
    ),
    Recipe(
        "TensorRT-LLM",
        "b200",
        "fp8",
        False,
        "2026-05-12",
        "2026-06-02",
        8,
        None,
        _src("single_node/dsr1_fp8_b200_trt.sh", "ed5867f9", _TRT_KV),
        "cuda-graph max batch = concurrency, free_gpu_memory_fraction 0.8 (0.75 in one branch), max_num_tokens "
        "max(8192, concurrency + ISL rounded up to 64)",
    ),
    Recipe(
        "TensorRT-LLM",
        "h200",
        "fp8",
        False,
        "2025-10-29",
        "2025-11-03",
        8,
        None,
        _src("dsr1_fp8_h200_trt_slurm.sh", "9596d23d", _TRT_KV),
        _TRT_BS128_FREE_075,
    ),
    Recipe(
        "TensorRT-LLM",
        "h200",
        "fp8",
        False,
        "2025-11-21",
        "2026-01-12",
        8,
        None,
        _src("dsr1_fp8_h200_trt_slurm.sh", "d22bf9ca", _TRT_KV),
        _TRT_BS128_FREE_075,
    ),
    Recipe(
        "TensorRT-LLM",
        "h200",
        "fp8",
        False,
        "2026-05-12",
        "2026-06-02",
        8,
        None,
        _src("single_node/dsr1_fp8_h200_trt.sh", "ed5867f9", _TRT_KV),
        "cuda_graph_config max_batch_size 128, free_gpu_memory_fraction 0.75, max_num_tokens max(8192, "
        "concurrency + ISL rounded up to 64)",
    ),
    Recipe(
        "TensorRT-LLM",
        "b200",
        "fp8",
        True,
        "2026-01-14",
        "2026-01-22",
        8,
        3,
        _src("dsr1_fp8_b200_trt_mtp_slurm.sh", "bf345672", f"{_TRT_KV}, {_TRT_MTP}"),
        _TRT_BS256_FREE_08,
        mtp_depth_dp_attention=1,
    ),
    Recipe(
        "TensorRT-LLM",
        "b200",
        "fp8",
        True,
        "2026-02-05",
        "2026-02-19",
        8,
        3,
        _src("dsr1_fp8_b200_trt_mtp.sh", "5d517074", f"{_TRT_KV}, {_TRT_MTP}"),
        "free_gpu_memory_fraction 0.8 (0.7 with DP attention)",
        mtp_depth_dp_attention=1,
    ),
    Recipe(
        "TensorRT-LLM",
        "b200",
        "fp8",
        True,
        "2026-05-12",
        "2026-06-02",
        8,
        3,
        _src("single_node/dsr1_fp8_b200_trt_mtp.sh", "ed5867f9", f"{_TRT_KV}, {_TRT_MTP}"),
        "free_gpu_memory_fraction 0.8 (0.7 with DP attention), max_num_tokens (MTP+1) x max batch + ISL "
        "rounded up to 64",
        mtp_depth_dp_attention=1,
    ),
    Recipe(
        "TensorRT-LLM",
        "h200",
        "fp8",
        True,
        "2026-01-14",
        "2026-01-22",
        8,
        3,
        _src("dsr1_fp8_h200_trt_mtp_slurm.sh", "bf345672", f"{_TRT_KV}, {_TRT_MTP}"),
        _TRT_BS128_FREE_075,
        mtp_depth_dp_attention=1,
    ),
    Recipe(
        "TensorRT-LLM",
        "h200",
        "fp8",
        True,
        "2026-05-12",
        "2026-06-02",
        8,
        3,
        _src("single_node/dsr1_fp8_h200_trt_mtp.sh", "ed5867f9", f"{_TRT_KV}, {_TRT_MTP}"),
        _TRT_BS128_FREE_075,
        mtp_depth_dp_attention=1,
    ),
    Recipe(
        "TensorRT-LLM",
        "b200",
        "fp4",
        True,
        "2026-02-06",
        "2026-02-19",
        8,
        3,
        _src("dsr1_fp4_b200_trt_mtp.sh", "0aae52d4", f"{_TRT_KV}, {_TRT_MTP}"),
        "free_gpu_memory_fraction 0.8",
        mtp_depth_dp_attention=1,
    ),
    Recipe(
        "TensorRT-LLM",
        "b200",
        "fp4",
        True,
        "2026-05-12",
        "2026-06-02",
        8,
        3,
        _src("single_node/dsr1_fp4_b200_trt_mtp.sh", "ed5867f9", f"{_TRT_KV}, {_TRT_MTP}"),
        "free_gpu_memory_fraction 0.8, max_num_tokens (MTP+1) x max batch + ISL rounded up to 64",
        mtp_depth_dp_attention=1,
    ),
    # ATOM (AMD), MI355X: "--method mtp" without --num-speculative-tokens runs ATOM's default, 1 drafted token
    Recipe(
        "ATOM",
        "mi355x",
        "fp8",
        False,
        "2026-01-14",
        "2026-01-21",
        8,
        None,
        _src("dsr1_fp8_mi355x_atom_slurm.sh", "2be3de60", _ATOM_KV),
    ),
    Recipe(
        "ATOM",
        "mi355x",
        "fp8",
        False,
        "2026-03-27",
        "2026-06-02",
        8,
        None,
        _src("single_node/dsr1_fp8_mi355x_atom.sh", "626932a1", _ATOM_KV),
    ),
    Recipe(
        "ATOM",
        "mi355x",
        "fp4",
        False,
        "2026-02-19",
        "2026-03-11",
        8,
        None,
        _src("single_node/dsr1_fp4_mi355x_atom.sh", "8d81e0bf", _ATOM_KV),
    ),
    Recipe(
        "ATOM",
        "mi355x",
        "fp4",
        False,
        "2026-03-27",
        "2026-06-02",
        8,
        None,
        _src("single_node/dsr1_fp4_mi355x_atom.sh", "626932a1", _ATOM_KV),
    ),
    Recipe(
        "ATOM",
        "mi355x",
        "fp8",
        True,
        "2026-02-10",
        "2026-02-19",
        8,
        1,
        _src("dsr1_fp8_mi355x_atom_mtp.sh", "7c7db9d4", f"{_ATOM_KV}, {_ATOM_MTP_DEFAULT}"),
    ),
    Recipe(
        "ATOM",
        "mi355x",
        "fp8",
        True,
        "2026-06-02",
        "2026-06-03",
        8,
        3,
        _src(
            "single_node/fixed_seq_len/dsr1_fp8_mi355x_atom_mtp.sh",
            "96f15988",
            f"{_ATOM_KV}, --method mtp --num-speculative-tokens 3",
        ),
    ),
    Recipe(
        "ATOM",
        "mi355x",
        "fp4",
        True,
        "2026-02-19",
        "2026-03-11",
        8,
        1,
        _src("single_node/dsr1_fp4_mi355x_atom_mtp.sh", "8d81e0bf", f"{_ATOM_KV}, {_ATOM_MTP_DEFAULT}"),
    ),
    Recipe(
        "ATOM",
        "mi355x",
        "fp4",
        True,
        "2026-03-27",
        "2026-06-02",
        8,
        1,
        _src("single_node/dsr1_fp4_mi355x_atom_mtp.sh", "626932a1", f"{_ATOM_KV}, {_ATOM_MTP_DEFAULT}"),
    ),
)
"""The InferenceX DeepSeek-R1 single-node recipes read (2026-12-02, InferenceX history to @843c6254)."""


def run_date(notes: str) -> str | None:
    """The date of the InferenceX run a row's notes name (``.../actions/runs/N (2026-05-20)``), else None."""
    match = _RUN_DATE_RE.search(notes)
    return match.group(1) if match else None


def engine_of(framework: str) -> str | None:
    """The recipe engine a row's framework text names; None for disaggregated wrappers (Dynamo) and others."""
    low = framework.lower().replace("trt-llm", "tensorrt-llm")
    if "dynamo" in low:
        return None
    return next((e for e in ENGINES if e.lower() in low), None)


def recipe_for(
    model: str, framework: str, notes: str, gpu_card: str, weight_bits: int, serving: str, mtp: bool
) -> Recipe | None:
    """The InferenceX recipe a DeepSeek-R1 row (``model``: its model text) ran with: its engine, accelerator,
    precision and MTP, at the version in effect on its run's date (None: not an InferenceX run, not aggregated, or no
    recipe read for it)."""
    date, engine = run_date(notes), engine_of(framework)
    fmt = {8: "fp8", 4: "fp4"}.get(weight_bits)
    if date is None or engine is None or fmt is None or serving != "aggregated" or "deepseek-r1" not in model.lower():
        return None
    matches = [
        r
        for r in RECIPES
        if (r.engine, r.gpu_card, r.weight_format, r.mtp) == (engine, gpu_card, fmt, mtp)
        and r.since <= date
        and (not r.until or date < r.until)
    ]
    return max(matches, key=lambda r: r.since, default=None)
