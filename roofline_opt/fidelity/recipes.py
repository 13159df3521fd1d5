"""What InferenceX's launch scripts set for a DeepSeek-R1 run that its published row leaves unstated.

InferenceX (SemiAnalysisAI/InferenceX) publishes each point with the GitHub Actions run that measured it and the
image it ran, but not the KV-cache precision nor the MTP depth; its launch scripts do, one per model, precision,
accelerator and engine (``benchmarks/dsr1_<precision>_<accelerator>[_<engine>][_mtp].sh``, moved to
``benchmarks/single_node/`` in February 2026 and ``benchmarks/single_node/fixed_seq_len/`` in June 2026). Each entry
below is one version of one such script, read at the commit last touching it before the run (``git log -1
--before=<run date> -- <path>`` on the InferenceX history), and holds for runs from that commit's date until the
script next changed. A run may have used a pull request's branch rather than the main branch; the main branch at the
run's date is the best public record of what it ran.

``RECIPES`` holds aggregated single-node scripts. A disaggregated row's run is set per matrix entry instead: each
``*-disagg`` entry of InferenceX's ``.github/configs/nvidia-master.yaml`` / ``amd-master.yaml`` names its prefill and
decode workers (count, TP, EP, attention DP), its concurrencies and a recipe: a Dynamo entry a ``CONFIG_FILE`` of
``ishandhanani/srt-slurm`` (branch ``sa-submission-q1-2026``, cloned unpinned by ``runners/launch_*.sh``), an AMD
MoRI entry ``DECODE_MTP_SIZE`` for ``benchmarks/multi_node/amd_utils`` (in the repository from 2026-02-19; before,
``billishyahao/sglang_disagg`` branch ``sa-260203``). ``DISAGGREGATED_RUNS`` lists the rows matched to exactly one
entry (model precision, accelerator, engine, ISL/OSL, MTP or not, both sides' shape and the row's concurrency) of
the matrix read at the last commit before the run's date, else at the last commit of that date when its image is
the row's (the run was started by that day's merge), and records what the entry and the in-repository scripts set:

- MTP depth: a Dynamo TensorRT-LLM entry's recipe name ends ``_mtpN`` (``num_nextn_predict_layers``); an AMD entry's
  ``DECODE_MTP_SIZE=N`` (``amd_utils/server.sh``: ``--speculative-num-steps N --speculative-num-draft-tokens
  N+1``). Dynamo SGLang recipe names carry no depth: not read.
- KV cache: ``amd_utils/models.yaml``'s ``base_flags`` ``--kv-cache-dtype fp8_e4m3`` for the model's entry, on both
  sides (runs from 2026-02-19). The srt-slurm recipes' ``kv_cache_config`` is not read: the branch they ran from is
  not pinned, so no version can be tied to a run's date.
- Prefill budget: the AMD scripts pass ``--chunked-prefill-size`` (262144, or 8192 x TP with attention DP) and no
  ``--max-prefill-tokens``, so a prefill step carries SGLang's 16384 at most, which the disaggregated estimate
  already uses (``whole_requests.PREFILL_BATCH_TOKENS``); nothing more is applied.

Besides the KV cache and the MTP depth, the estimate reads each entry's prefill settings (``Prefill``: SGLang's
``--chunked-prefill-size`` and ``--max-prefill-tokens``, TensorRT-LLM's ``max_num_tokens``), which give the prompt
tokens one step of the row's run carries at most (``Recipe.step_prompt_tokens``; the whole-request estimate's chunk
budget in place of ``physics.requests.DEFAULT_CHUNK_TOKENS``), and its memory flag (``Memory``: SGLang's
``--mem-fraction-static``, TensorRT-LLM's ``free_gpu_memory_fraction``, with the runs a script sets another fraction
for), which gives the engine's KV-memory rule at that fraction (``Recipe.kv_memory_rule``; ``validate`` estimates the
row under it in place of its preset's or engine profile's, the bound keeps its own). The entry's text (``other``)
also records its CUDA-graph batch: that is not applied (the row's assumptions say so).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from roofline_opt.physics.specs import KvMemoryRule, sglang_kv_memory_rule, trtllm_kv_memory_rule

SOURCE_REPO = "SemiAnalysisAI/InferenceX"
"""The repository whose launch scripts the entries read."""

_RUN_DATE_RE = re.compile(r"SemiAnalysisAI/InferenceX/actions/runs/\d+(?:/attempts/\d+)?\s*\((\d{4}-\d{2}-\d{2})\)")
"""An InferenceX row's run and its date, as its notes state them (``.../actions/runs/26135021096/attempts/1
(2026-05-20)``)."""

_RUN_ID_RE = re.compile(r"SemiAnalysisAI/InferenceX/actions/runs/(\d+)")
"""An InferenceX row's GitHub Actions run id, as its notes state it."""

ENGINES = ("TensorRT-LLM", "SGLang", "ATOM")
"""Engines with single-node recipes, in the order a framework text is matched (TensorRT-LLM before SGLang)."""


SGLANG_MAX_PREFILL_TOKENS = 16384
"""SGLang's ``--max-prefill-tokens`` when a script passes none (sgl-project/sglang python/sglang/srt/server_args.py
@5d2c83e6bb27e91c893e5fc11f6c268790a2a538: ``max_prefill_tokens ... = 16384``)."""

TOKEN_ROUNDING = 64
"""InferenceX's TensorRT-LLM scripts round ``max_num_tokens`` up to a multiple of 64 tokens."""

PROMPT_RULES = ("", "concurrency + isl", "decode tokens + isl")
"""How a TensorRT-LLM script sizes ``max_num_tokens`` from the run (``Prefill.rule``): not at all (``""``); the
concurrency plus the prompt length rounded up to 64, at least ``Prefill.prefill_tokens``; the step's decode tokens
((MTP + 1) x max batch) plus the prompt length rounded up to 64. Both leave one whole prompt per step besides the
decode tokens the formula adds."""


@dataclass(frozen=True)
class Run:
    """What a run's settings a script's prefill and memory flags may depend on: tensor parallelism, attention data
    parallelism, input and output lengths (None: not stated) and clients per instance (None: not stated)."""

    tp: int
    dp_attention: bool
    isl: int | None
    osl: int | None
    concurrency: int | None


@dataclass(frozen=True)
class PrefillCase:
    """Prefill settings a script applies only to some runs: at tensor parallelism ``tp``, input and output lengths
    ``isl``/``osl`` and above ``above_concurrency`` clients (None: any)."""

    chunk_tokens: int
    prefill_tokens: int
    tp: int | None = None
    isl: int | None = None
    osl: int | None = None
    above_concurrency: int | None = None

    def applies(self, run: Run) -> bool:
        """Whether a run at these settings takes this case."""
        clients = run.concurrency
        above = self.above_concurrency is None or (clients is not None and clients > self.above_concurrency)
        return self.tp in (None, run.tp) and self.isl in (None, run.isl) and self.osl in (None, run.osl) and above


@dataclass(frozen=True)
class Prefill:
    """A script's prefill settings, as its flags state them (None: the script passes none, the engine's default).

    ``chunk_tokens``: SGLang's ``--chunked-prefill-size`` (a prompt is prefilled in pieces of at most this many
    tokens). ``prefill_tokens``: SGLang's ``--max-prefill-tokens`` (prompt tokens of one prefill batch at most) or
    TensorRT-LLM's ``max_num_tokens`` (every token of one step, decode tokens included; TensorRT-LLM runs without
    chunked prefill unless enabled, which no script here does), or its floor when ``rule`` sizes it from the run
    (``PROMPT_RULES``). ``cases``: settings the script sets instead for some runs (the first that applies)."""

    chunk_tokens: int | None = None
    prefill_tokens: int | None = None
    rule: str = ""
    cases: tuple[PrefillCase, ...] = ()

    def __post_init__(self) -> None:
        if self.rule not in PROMPT_RULES:
            raise ValueError(f"prefill rule {self.rule!r} is not one of {PROMPT_RULES}")

    def step_prompt_tokens(self, run: Run) -> int | None:
        """Prompt tokens one step carries at most in a run (None: the run states no lengths, or the script no
        prefill setting).

        SGLang's scheduler stops adding prompts to a prefill batch once either ``--max-prefill-tokens`` or
        ``--chunked-prefill-size`` is spent (``PrefillAdder.budget_state``: ``rem_input_tokens <= 0`` or
        ``rem_chunk_tokens <= 0``, both charged each admitted prompt's tokens; sgl-project/sglang
        python/sglang/srt/managers/schedule_policy.py @00550cd1), so a step carries the smaller of the two
        (``SGLANG_MAX_PREFILL_TOKENS`` where the script sets only the chunk). A TensorRT-LLM ``max_num_tokens``
        formula holds the decode tokens and one whole prompt: the prompt's share is what is left after the
        concurrency (``concurrency + isl``) or the prompt rounded up to 64 (``decode tokens + isl``)."""
        if run.isl is None or run.osl is None:
            return None
        case = next((c for c in self.cases if c.applies(run)), None)
        chunk, budget = (case.chunk_tokens, case.prefill_tokens) if case else (self.chunk_tokens, self.prefill_tokens)
        if self.rule == "concurrency + isl":
            clients = run.concurrency or 0
            return max(budget or 0, _rounded_up(clients + run.isl)) - clients
        if self.rule == "decode tokens + isl":
            return _rounded_up(run.isl)
        if chunk is None:
            return budget
        return min(chunk, SGLANG_MAX_PREFILL_TOKENS if budget is None else budget)

    def describe(self) -> str:
        """The flags, in words (empty: none stated)."""
        parts = []
        if self.chunk_tokens is not None:
            parts.append(f"prefill chunk {self.chunk_tokens}")
        if self.prefill_tokens is not None:
            floor = " at least" if self.rule == "concurrency + isl" else ""
            parts.append(f"prefill token budget{floor} {self.prefill_tokens}")
        if self.rule:
            parts.append(f"max_num_tokens = {self.rule} rounded up to {TOKEN_ROUNDING}")
        parts += [f"chunk {c.chunk_tokens} and budget {c.prefill_tokens} at {_case_condition(c)}" for c in self.cases]
        return ", ".join(parts)


@dataclass(frozen=True)
class MemoryCase:
    """A memory fraction a script sets instead for some runs: with attention data parallelism or without
    (``dp_attention``), at tensor parallelism ``tp``, input and output lengths ``isl``/``osl`` and from
    ``min_concurrency`` clients (None: any)."""

    fraction: float
    dp_attention: bool | None = None
    tp: int | None = None
    isl: int | None = None
    osl: int | None = None
    min_concurrency: int | None = None

    def applies(self, run: Run) -> bool:
        """Whether a run at these settings takes this case."""
        clients = self.min_concurrency is None or (
            run.concurrency is not None and run.concurrency >= self.min_concurrency
        )
        lengths = self.isl in (None, run.isl) and self.osl in (None, run.osl)
        return self.dp_attention in (None, run.dp_attention) and self.tp in (None, run.tp) and lengths and clients


@dataclass(frozen=True)
class Memory:
    """A script's memory flag (``fraction`` None: it passes none, the engine's default): SGLang's
    ``--mem-fraction-static`` (the weights and the KV pool over the memory free at start,
    ``physics.specs.sglang_kv_memory_rule``) or TensorRT-LLM's ``kv_cache_config.free_gpu_memory_fraction`` (the KV
    cache over the memory free after the profiled peak, ``physics.specs.trtllm_kv_memory_rule``). ``cases``: fractions
    the script sets instead for some runs (the first that applies)."""

    fraction: float | None = None
    cases: tuple[MemoryCase, ...] = ()

    def fraction_for(self, run: Run) -> float | None:
        """The fraction a run at these settings starts the engine with (None: the script sets none)."""
        case = next((c for c in self.cases if c.applies(run)), None)
        return case.fraction if case else self.fraction


MEMORY_RULES: dict[str, Callable[[float], KvMemoryRule]] = {
    "SGLang": sglang_kv_memory_rule,
    "TensorRT-LLM": trtllm_kv_memory_rule,
}
"""Each engine's KV-memory rule at the fraction its memory flag gives (``Memory``); ATOM's scripts pass none."""
MEMORY_FLAGS = {"SGLang": "--mem-fraction-static", "TensorRT-LLM": "free_gpu_memory_fraction"}
"""The memory flag of each engine, as its scripts spell it (the row's assumptions name it)."""


def _rounded_up(tokens: int) -> int:
    """``tokens`` rounded up to a multiple of ``TOKEN_ROUNDING``."""
    return -(-tokens // TOKEN_ROUNDING) * TOKEN_ROUNDING


def _case_condition(case: PrefillCase) -> str:
    where = []
    if case.tp is not None:
        where.append(f"TP{case.tp}")
    if case.isl is not None and case.osl is not None:
        where.append(f"{case.isl}/{case.osl} tokens")
    if case.above_concurrency is not None:
        where.append(f"concurrency above {case.above_concurrency}")
    return " and ".join(where)


@dataclass(frozen=True)
class Recipe:
    """One version of an InferenceX DeepSeek-R1 launch script: ``engine`` on ``gpu_card`` at ``weight_format``
    (InferenceX's ``fp8`` or ``fp4``), with MTP (``mtp``) or without, in effect from ``since`` until ``until``
    (ISO dates; ``until`` exclusive, empty: still current). ``kv_bits``: the KV cache the script sets (None: it passes
    no KV flag, so the engine's ``auto`` default applies); ``mtp_depth``: drafted tokens per round (None: the script
    leaves it to the engine), ``mtp_depth_dp_attention`` with attention data parallelism (None: the same).
    ``other``: the script's prefill and memory settings, as text; ``prefill``: the prefill flags of that text, typed
    (the estimate reads them: ``step_prompt_tokens``); ``memory``: its memory flag, typed (the estimate's KV-memory
    rule: ``kv_memory_rule``). ``source``: the script's path and commit."""

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
    prefill: Prefill = Prefill()
    memory: Memory = Memory()

    def step_prompt_tokens(self, run: Run) -> int | None:
        """Prompt tokens one step of a run carries at most (``Prefill.step_prompt_tokens``; None: not stated)."""
        return self.prefill.step_prompt_tokens(run)

    def kv_memory_rule(self, run: Run) -> KvMemoryRule | None:
        """The engine's KV-memory rule at the memory fraction the script sets for the run (None: it sets none)."""
        fraction = self.memory.fraction_for(run)
        return None if fraction is None else MEMORY_RULES[self.engine](fraction)

    def depth(self, dp_attention: bool) -> int | None:
        """Drafted tokens per round the script runs, with attention data parallelism or without."""
        if dp_attention and self.mtp_depth_dp_attention is not None:
            return self.mtp_depth_dp_attention
        return self.mtp_depth

    def describe(self, step_prompt_tokens: int | None = None, memory_fraction: float | None = None) -> str:
        """What the row is read with from this recipe, in words (the row's assumptions column); ``step_prompt_tokens``:
        the chunk budget the estimate takes from it for the row (None: the estimate's default); ``memory_fraction``:
        the memory fraction it takes (None: the script sets none, the estimate keeps its preset's rule)."""
        kv = f"{self.kv_bits}-bit KV cache" if self.kv_bits else "no KV flag (the engine's auto default)"
        parts = [kv]
        if self.mtp:
            depth = "the engine's default depth" if self.mtp_depth is None else f"{self.mtp_depth} drafted tokens"
            if self.mtp_depth_dp_attention is not None:
                depth += f" ({self.mtp_depth_dp_attention} with attention data parallelism)"
            parts.append(f"MTP at {depth}")
        flags = self.prefill.describe()
        if step_prompt_tokens is not None:
            parts.append(f"{flags}: a step carries at most {step_prompt_tokens} prompt tokens")
        if memory_fraction is not None:
            parts.append(f"{MEMORY_FLAGS[self.engine]} {memory_fraction} applied to the estimate's memory check")
        tail = f"; its text: {self.other} (CUDA-graph batch not applied)" if self.other else ""
        return f"InferenceX recipe {self.source}: {', '.join(parts)}{tail}"


def _src(path: str, commit: str, flags: str) -> str:
    return f"{SOURCE_REPO} benchmarks/{path} @{commit} ({flags})"


_SG_KV = "--kv-cache-dtype fp8_e4m3"
_SG_MTP2 = "--speculative-num-steps 2 --speculative-num-draft-tokens 3"
_SG_MTP3 = "--speculative-num-steps 3 --speculative-num-draft-tokens 4"
_TRT_KV = "kv_cache_config: dtype: fp8"
_TRT_MTP = "num_nextn_predict_layers: MTP=3, MTP=1 when DP_ATTENTION=true"
_ATOM_KV = "--kv_cache_dtype fp8"

# engine settings several script versions share, as text and typed (the prefill flags)
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

_SG_131K = Prefill(131072, 131072)
_SG_16K_CHUNK = Prefill(16384)
_SG_196K = Prefill(196608, 196608, cases=(PrefillCase(32768, 32768, isl=8192, osl=1024, above_concurrency=32),))
_SG_196K_EVERY_WORKLOAD = Prefill(196608, 196608)
_SG_16K = Prefill(16384, 16384)
_SG_32K = Prefill(32768, 32768)
_SG_32K_TP8_8K_TP4 = Prefill(cases=(PrefillCase(32768, 32768, tp=8), PrefillCase(8192, 8192, tp=4)))
_TRT_CONCURRENCY_ISL = Prefill(prefill_tokens=8192, rule="concurrency + isl")
_TRT_DECODE_ISL = Prefill(rule="decode tokens + isl")

_SG_MEM_08 = Memory(0.8)
_SG_MEM_082 = Memory(0.82)
_SG_MEM_085 = Memory(0.85)
_SG_MEM_082_TP8_095_TP4 = Memory(cases=(MemoryCase(0.82, tp=8), MemoryCase(0.95, tp=4)))
_TRT_FREE_08 = Memory(0.8)
_TRT_FREE_075 = Memory(0.75)
_TRT_FREE_08_DP_07 = Memory(0.8, cases=(MemoryCase(0.7, dp_attention=True),))
_TRT_FREE_08_1K8K_07_TP4_8K1K_075 = Memory(
    0.8, cases=(MemoryCase(0.7, isl=1024, osl=8192, min_concurrency=256), MemoryCase(0.75, tp=4, isl=8192, osl=1024))
)
_TRT_FREE_08_TP4_8K1K_075 = Memory(0.8, cases=(MemoryCase(0.75, tp=4, isl=8192, osl=1024),))

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
        prefill=_SG_32K,
        memory=_SG_MEM_082,
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
        prefill=_SG_32K,
        memory=_SG_MEM_082,
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
        prefill=_SG_32K_TP8_8K_TP4,
        memory=_SG_MEM_082_TP8_095_TP4,
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
        prefill=_SG_32K_TP8_8K_TP4,
        memory=_SG_MEM_082_TP8_095_TP4,
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
        prefill=_SG_16K,
        memory=_SG_MEM_082,
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
        prefill=_SG_16K,
        memory=_SG_MEM_082,
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
        prefill=_SG_16K_CHUNK,
        memory=_SG_MEM_085,
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
        prefill=_SG_16K_CHUNK,
        memory=_SG_MEM_085,
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
        prefill=_SG_16K_CHUNK,
        memory=_SG_MEM_085,
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
        prefill=_SG_16K_CHUNK,
        memory=_SG_MEM_085,
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
        prefill=_SG_16K,
        memory=_SG_MEM_082,
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
        prefill=_SG_32K,
        memory=_SG_MEM_082,
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
        prefill=_SG_32K,
        memory=_SG_MEM_082,
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
        prefill=_SG_32K,
        memory=_SG_MEM_082,
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
        prefill=_SG_131K,
        memory=_SG_MEM_08,
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
        prefill=_SG_131K,
        memory=_SG_MEM_08,
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
        prefill=_SG_131K,
        memory=_SG_MEM_08,
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
        prefill=_SG_131K,
        memory=_SG_MEM_08,
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
        prefill=_SG_131K,
        memory=_SG_MEM_08,
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
        prefill=_SG_196K_EVERY_WORKLOAD,
        memory=_SG_MEM_08,
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
        prefill=_SG_196K_EVERY_WORKLOAD,
        memory=_SG_MEM_08,
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
        prefill=_SG_196K_EVERY_WORKLOAD,
        memory=_SG_MEM_08,
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
        prefill=_SG_196K,
        memory=_SG_MEM_08,
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
        prefill=_SG_196K,
        memory=_SG_MEM_08,
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
        prefill=_SG_196K,
        memory=_SG_MEM_08,
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
        prefill=_SG_196K,
        memory=_SG_MEM_08,
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
        memory=_TRT_FREE_08,
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
        memory=_TRT_FREE_08,
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
        memory=_TRT_FREE_08,
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
        prefill=_TRT_CONCURRENCY_ISL,
        memory=_TRT_FREE_08,
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
        memory=_TRT_FREE_08,
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
        memory=_TRT_FREE_08_1K8K_07_TP4_8K1K_075,
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
        prefill=_TRT_CONCURRENCY_ISL,
        memory=_TRT_FREE_08_TP4_8K1K_075,
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
        memory=_TRT_FREE_075,
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
        memory=_TRT_FREE_075,
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
        prefill=_TRT_CONCURRENCY_ISL,
        memory=_TRT_FREE_075,
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
        memory=_TRT_FREE_08,
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
        memory=_TRT_FREE_08_DP_07,
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
        prefill=_TRT_DECODE_ISL,
        mtp_depth_dp_attention=1,
        memory=_TRT_FREE_08_DP_07,
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
        memory=_TRT_FREE_075,
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
        memory=_TRT_FREE_075,
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
        memory=_TRT_FREE_08,
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
        prefill=_TRT_DECODE_ISL,
        mtp_depth_dp_attention=1,
        memory=_TRT_FREE_08,
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


MATRIX_SOURCE = f"{SOURCE_REPO} .github/configs"
"""Where the disaggregated matrix entries are read (``nvidia-master.yaml``, ``amd-master.yaml``)."""


@dataclass(frozen=True)
class DisaggregatedRun:
    """What one disaggregated InferenceX row's run set, read from the one matrix entry it matches (module docstring):
    the run ``run`` (its GitHub Actions id) at ``isl``/``osl`` tokens and ``concurrency`` clients, with MTP (``mtp``)
    or without, on ``gpus`` (prefill GPUs, decode GPUs) of ``gpu_card`` at ``weight_format``, engine ``engine``.
    ``kv_bits``: the KV cache both sides ran (None: not read); ``mtp_depth``: drafted tokens per decode round (None:
    not read, or no MTP). ``source``: the matrix file and commit, and the script that sets the KV cache."""

    run: str
    isl: int
    osl: int
    concurrency: int
    mtp: bool
    gpus: tuple[int, int]
    engine: str
    gpu_card: str
    weight_format: str
    kv_bits: int | None
    mtp_depth: int | None
    source: str

    def describe(self) -> str:
        """What the row is read with from its matrix entry, in words (the row's assumptions column)."""
        kv = f"{self.kv_bits}-bit KV cache on both sides" if self.kv_bits else "KV cache not read"
        parts = [kv] + ([f"MTP at {self.mtp_depth} drafted tokens on the decode side"] if self.mtp_depth else [])
        return f"InferenceX disaggregated {self.engine} matrix entry {self.source}: {', '.join(parts)}"


def _nv(commit: str, config_file: str) -> str:
    return f"{MATRIX_SOURCE}/nvidia-master.yaml @{commit} (CONFIG_FILE={config_file}: MTP depth from its _mtpN)"


def _amd(commit: str, mtp_size: int, kv_commit: str = "", model_name: str = "") -> str:
    text = f"{MATRIX_SOURCE}/amd-master.yaml @{commit} (DECODE_MTP_SIZE={mtp_size})"
    if kv_commit:
        text += (
            f"; {SOURCE_REPO} benchmarks/multi_node/amd_utils/models.yaml @{kv_commit} ({model_name}: "
            "--kv-cache-dtype fp8_e4m3)"
        )
    return text


DISAGGREGATED_RUNS: tuple[DisaggregatedRun, ...] = (
    DisaggregatedRun(
        "21484975323",
        1024,
        1024,
        10860,
        True,
        (12, 20),
        "TensorRT-LLM",
        "b200",
        "fp4",
        None,
        1,
        _nv("d7a6d4e7", "recipes/trtllm/b200-fp4/1k1k/mtp/ctx3_gen5_dep4_batch512_eplb0_mtp1.yaml"),
    ),
    DisaggregatedRun(
        "21484975323",
        1024,
        1024,
        6,
        True,
        (4, 40),
        "TensorRT-LLM",
        "b200",
        "fp4",
        None,
        3,
        _nv("d7a6d4e7", "recipes/trtllm/b200-fp4/1k1k/mtp/ctx1_gen5_tep8_batch1_eplb0_mtp3.yaml"),
    ),
    DisaggregatedRun(
        "21484975323",
        8192,
        1024,
        6,
        True,
        (4, 40),
        "TensorRT-LLM",
        "b200",
        "fp4",
        None,
        3,
        _nv("d7a6d4e7", "recipes/trtllm/b200-fp4/8k1k/mtp/ctx1_gen5_tep8_batch1_eplb0_mtp3.yaml"),
    ),
    DisaggregatedRun(
        "21484975323",
        8192,
        1024,
        66,
        True,
        (4, 24),
        "TensorRT-LLM",
        "b200",
        "fp4",
        None,
        3,
        _nv("d7a6d4e7", "recipes/trtllm/b200-fp4/8k1k/mtp/ctx1_gen3_tep8_batch16_eplb0_mtp3.yaml"),
    ),
    DisaggregatedRun(
        "21484975323",
        1024,
        1024,
        1214,
        True,
        (4, 16),
        "TensorRT-LLM",
        "b200",
        "fp4",
        None,
        2,
        _nv("d7a6d4e7", "recipes/trtllm/b200-fp4/1k1k/mtp/ctx1_gen2_dep8_batch64_eplb0_mtp2.yaml"),
    ),
    DisaggregatedRun(
        "21484975323",
        8192,
        1024,
        658,
        True,
        (20, 16),
        "TensorRT-LLM",
        "b200",
        "fp4",
        None,
        3,
        _nv("d7a6d4e7", "recipes/trtllm/b200-fp4/8k1k/mtp/ctx5_gen2_dep8_batch32_eplb0_mtp3.yaml"),
    ),
    DisaggregatedRun(
        "23438524239",
        1024,
        1024,
        896,
        True,
        (8, 56),
        "TensorRT-LLM",
        "b200",
        "fp8",
        None,
        3,
        _nv("35d4bb36", "recipes/trtllm/b200-fp8/1k1k/mtp/ctx1_gen7_dep8_batch128_eplb0_mtp3_896.yaml"),
    ),
    DisaggregatedRun(
        "23438524239",
        1024,
        1024,
        1600,
        True,
        (8, 16),
        "TensorRT-LLM",
        "b200",
        "fp8",
        None,
        2,
        _nv("35d4bb36", "recipes/trtllm/b200-fp8/1k1k/mtp/ctx1_gen2_dep8_batch768_eplb0_mtp2_1600.yaml"),
    ),
    DisaggregatedRun(
        "23438524239",
        8192,
        1024,
        1088,
        True,
        (32, 8),
        "TensorRT-LLM",
        "b200",
        "fp8",
        None,
        2,
        _nv("f316a0ef", "recipes/trtllm/b200-fp8/8k1k/mtp/ctx4_gen1_dep8_batch128_eplb0_mtp2_1088.yaml"),
    ),
    DisaggregatedRun(
        "23438524239",
        1024,
        1024,
        16130,
        True,
        (12, 20),
        "TensorRT-LLM",
        "gb200",
        "fp4",
        None,
        1,
        _nv("35d4bb36", "recipes/trtllm/gb200-fp4/1k1k/mtp/ctx3_gen5_dep4_batch768_eplb0_mtp1.yaml"),
    ),
    DisaggregatedRun(
        "23438524239",
        1024,
        8192,
        7,
        True,
        (4, 56),
        "TensorRT-LLM",
        "gb200",
        "fp4",
        None,
        3,
        _nv("35d4bb36", "recipes/trtllm/gb200-fp4/1k8k/mtp/ctx1_gen7_tep8_batch1_eplb0_mtp3.yaml"),
    ),
    DisaggregatedRun(
        "23438524239",
        8192,
        1024,
        4301,
        True,
        (44, 16),
        "TensorRT-LLM",
        "gb200",
        "fp4",
        None,
        1,
        _nv("35d4bb36", "recipes/trtllm/gb200-fp4/8k1k/mtp/ctx11_gen1_dep16_batch256_eplb256_mtp1.yaml"),
    ),
    DisaggregatedRun(
        "21701654125",
        1024,
        8192,
        4,
        True,
        (8, 32),
        "TensorRT-LLM",
        "gb200",
        "fp8",
        None,
        3,
        _nv("daa8239f", "recipes/trtllm/gb200-fp8/1k8k/mtp/ctx1_gen4_tep8_batch2_eplb0_mtp3_8.yaml"),
    ),
    DisaggregatedRun(
        "21701654125",
        1024,
        8192,
        2152,
        True,
        (8, 32),
        "TensorRT-LLM",
        "gb200",
        "fp8",
        None,
        1,
        _nv("daa8239f", "recipes/trtllm/gb200-fp8/1k8k/mtp/ctx1_gen2_dep16_batch64_eplb0_mtp1_2152.yaml"),
    ),
    DisaggregatedRun(
        "21701654125",
        8192,
        1024,
        666,
        True,
        (40, 16),
        "TensorRT-LLM",
        "gb200",
        "fp8",
        None,
        3,
        _nv("daa8239f", "recipes/trtllm/gb200-fp8/8k1k/mtp/ctx5_gen1_dep16_batch32_eplb0_mtp3_666.yaml"),
    ),
    DisaggregatedRun(
        "21790074782",
        8192,
        1024,
        30,
        True,
        (16, 48),
        "TensorRT-LLM",
        "h100-sxm",
        "fp8",
        None,
        3,
        _nv("04b564b3", "recipes/trtllm/h100-fp8/8k1k/mtp/ctx1_gen3_tep16_batch8_eplb0_mtp3.yaml"),
    ),
    DisaggregatedRun(
        "21790074782",
        1024,
        1024,
        231,
        True,
        (16, 48),
        "TensorRT-LLM",
        "h100-sxm",
        "fp8",
        None,
        3,
        _nv("04b564b3", "recipes/trtllm/h100-fp8/1k1k/mtp/ctx1_gen3_dep16_batch4_eplb0_mtp3.yaml"),
    ),
    DisaggregatedRun(
        "21790074782",
        1024,
        1024,
        615,
        True,
        (16, 16),
        "TensorRT-LLM",
        "h100-sxm",
        "fp8",
        None,
        2,
        _nv("04b564b3", "recipes/trtllm/h100-fp8/1k1k/mtp/ctx1_gen1_dep16_batch32_eplb0_mtp2.yaml"),
    ),
    DisaggregatedRun(
        "23438524239",
        8192,
        1024,
        128,
        True,
        (16, 8),
        "TensorRT-LLM",
        "h200",
        "fp8",
        None,
        2,
        _nv("f316a0ef", "recipes/trtllm/h200/8k1k/mtp/c128_ctx2_gen1_dep8_batch32_eplb0_mtp2.yaml"),
    ),
    DisaggregatedRun(
        "23438524239",
        8192,
        1024,
        256,
        True,
        (24, 8),
        "TensorRT-LLM",
        "h200",
        "fp8",
        None,
        2,
        _nv("f316a0ef", "recipes/trtllm/h200/8k1k/mtp/c256_ctx3_gen1_dep8_batch32_eplb0_mtp2.yaml"),
    ),
    DisaggregatedRun(
        "21660418558",
        1024,
        8192,
        32,
        True,
        (8, 16),
        "SGLang",
        "mi355x",
        "fp4",
        None,
        2,
        _amd("6f6afc1c", 2),
    ),
    DisaggregatedRun(
        "21660418558",
        1024,
        8192,
        128,
        True,
        (8, 16),
        "SGLang",
        "mi355x",
        "fp4",
        None,
        2,
        _amd("6f6afc1c", 2),
    ),
    DisaggregatedRun(
        "26491418772",
        1024,
        1024,
        4096,
        False,
        (4, 8),
        "SGLang",
        "mi355x",
        "fp4",
        8,
        None,
        _amd("bb000558", 0, "ec02dba5", "DeepSeek-R1-0528-MXFP4-v2"),
    ),
    DisaggregatedRun(
        "26491418772",
        8192,
        1024,
        512,
        False,
        (8, 8),
        "SGLang",
        "mi355x",
        "fp4",
        8,
        None,
        _amd("bb000558", 0, "ec02dba5", "DeepSeek-R1-0528-MXFP4-v2"),
    ),
    DisaggregatedRun(
        "26491418772",
        8192,
        1024,
        4096,
        False,
        (16, 8),
        "SGLang",
        "mi355x",
        "fp4",
        8,
        None,
        _amd("bb000558", 0, "ec02dba5", "DeepSeek-R1-0528-MXFP4-v2"),
    ),
    DisaggregatedRun(
        "21741051722",
        1024,
        8192,
        32,
        True,
        (8, 16),
        "SGLang",
        "mi355x",
        "fp8",
        None,
        2,
        _amd("6f6afc1c", 2),
    ),
    DisaggregatedRun(
        "22312145708",
        1024,
        1024,
        1,
        False,
        (8, 8),
        "SGLang",
        "mi355x",
        "fp8",
        8,
        None,
        _amd("e6852f5f", 0, "8d81e0bf", "DeepSeek-R1"),
    ),
    DisaggregatedRun(
        "22312145708",
        8192,
        1024,
        1,
        False,
        (8, 8),
        "SGLang",
        "mi355x",
        "fp8",
        8,
        None,
        _amd("e6852f5f", 0, "8d81e0bf", "DeepSeek-R1"),
    ),
    DisaggregatedRun(
        "26607091549",
        8192,
        1024,
        2048,
        False,
        (16, 8),
        "SGLang",
        "mi355x",
        "fp8",
        8,
        None,
        _amd("bb000558", 0, "ec02dba5", "DeepSeek-R1-0528"),
    ),
)
"""The disaggregated rows of tests/data/measured_public_2026.csv matched to one matrix entry that sets their MTP depth
or KV cache (read 2026-12-03, InferenceX history to @843c6254)."""


def run_id(notes: str) -> str | None:
    """The GitHub Actions run id of the InferenceX run a row's notes name, else None."""
    match = _RUN_ID_RE.search(notes)
    return match.group(1) if match else None


def disaggregated_run_for(
    notes: str,
    gpu_card: str,
    weight_bits: int,
    lengths: tuple[int, int],
    concurrency: int | None,
    mtp: bool,
    gpus: tuple[int, int],
) -> DisaggregatedRun | None:
    """The matrix entry a disaggregated InferenceX row (its notes, accelerator, weight bits, input and output lengths,
    clients, MTP or not, prefill and decode GPUs) ran, as ``DISAGGREGATED_RUNS`` lists it (None: not listed)."""
    run, fmt = run_id(notes), {8: "fp8", 4: "fp4"}.get(weight_bits)
    key = (run, gpu_card, fmt, lengths, concurrency, mtp, gpus)
    return next(
        (
            r
            for r in DISAGGREGATED_RUNS
            if (r.run, r.gpu_card, r.weight_format, (r.isl, r.osl), r.concurrency, r.mtp, r.gpus) == key
        ),
        None,
    )
