"""The engine flags the recipes use, per engine and version, each with the source it was read from.

Every flag a recipe emits must be listed here for the engine version the recipe names, with its value in range
(``problems`` says what is not; the tests run it on every emitted command). The tables list only the flags the
recipes use, not every flag of an engine. Sources are the engines' own argument definitions (or, for SGLang, its
generated argument table), read at the commits named; a flag's value range is the one its definition declares
(``Field(gt=0, le=1)``, a ``Literal``, ``choices=``). Nested settings passed as JSON or YAML (vLLM's
``--speculative-config``, TensorRT-LLM's ``--extra_llm_api_options`` file) are listed as dotted keys.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

VLLM_RELEASE = "v0.33.0 (commit 4ba787ec9, the PyPI wheel vllm-0.33.0)"
VLLM_ARGS = f"vllm-project/vllm vllm/engine/arg_utils.py @ {VLLM_RELEASE}"
VLLM_CACHE = f"vllm-project/vllm vllm/config/cache.py @ {VLLM_RELEASE}"
VLLM_SPEC = f"vllm-project/vllm vllm/config/speculative.py @ {VLLM_RELEASE}"
VLLM_KV = f"vllm-project/vllm vllm/config/kv_transfer.py @ {VLLM_RELEASE}"
VLLM_PARALLEL = f"vllm-project/vllm vllm/config/parallel.py @ {VLLM_RELEASE}"
VLLM_QUANT = f"vllm-project/vllm vllm/model_executor/layers/quantization/__init__.py @ {VLLM_RELEASE}"
VLLM_BENCH = f"vllm-project/vllm vllm/benchmarks/serve.py @ {VLLM_RELEASE}"
VLLM_ROUTER = "vllm-project/router: vllm_router/router_args.py of the PyPI wheel vllm-router 0.1.17"
SGLANG_ARGS = "sgl-project/sglang: sglang/srt/server_args.py and sglang/srt/arg_groups/ of the PyPI wheel sglang 0.5.23"
SGLANG_BENCH = "sgl-project/sglang python/sglang/bench_serving.py @ 50a613687fe1ffc6f1bb630c684a24c428a54a74"
SGLANG_ROUTER = "sgl-project/sglang: sglang_router/router_args.py of the PyPI wheel sglang-router 0.3.2"
TRTLLM_SERVE = "NVIDIA/TensorRT-LLM tensorrt_llm/commands/serve.py @ 4c05a74891e4df8066f08ed4ce14b0972abe4e25"
TRTLLM_ARGS = (
    "NVIDIA/TensorRT-LLM tensorrt_llm/llmapi/llm_args.py (the version whose DraftTargetDecodingConfig has "
    "decoding_type Literal['Draft_Target'] and CacheTransceiverConfig.transceiver_runtime; commit not shown by the "
    "index)"
)
TRTLLM_DISAGG = (
    "NVIDIA/TensorRT-LLM tensorrt_llm/llmapi/disagg_utils.py extract_disagg_cfg (context_servers, generation_servers)"
)
GENAI_PERF_ARGS = (
    "triton-inference-server/perf_analyzer genai-perf/genai_perf/parser.py @ 263c5f6e0c7a6c15472a54409174981f67930cfe"
)
GENAI_PERF_ENDPOINTS = (
    "triton-inference-server/perf_analyzer genai-perf/genai_perf/config/endpoint_config.py @ "
    "263c5f6e0c7a6c15472a54409174981f67930cfe (endpoint_type_map)"
)
AIPERF_ARGS = "ai-dynamo/aiperf aiperf/common/config/{} @ db4f6397d11ee2d4cfbb41f70b2327315163dcf0"
TRTLLM_MULTINODE = (
    "NVIDIA/TensorRT-LLM docs/source/commands/trtllm-serve/trtllm-serve.rst 'Multi-node Serving with Slurm' @ "
    "5c0c175b854e0a1536299990a32a73ade028e0a8 (srun ... trtllm-llmapi-launch trtllm-serve)"
)
DYNAMO_VLLM = "ai-dynamo/dynamo: dynamo/vllm/backend_args.py of the PyPI wheel ai-dynamo 1.6.1"
DYNAMO_FRONTEND = "ai-dynamo/dynamo: dynamo/frontend/frontend_args.py of the PyPI wheel ai-dynamo 1.6.1"


@dataclass(frozen=True)
class Flag:
    """One flag (or a dotted config key): its value kind and range, and where it is defined.

    kind: ``int`` (``minimum``/``maximum``), ``float`` (``minimum`` exclusive when ``open_minimum``), ``choice``
    (``choices``), ``switch`` (no value), ``text`` (any string), ``json`` (a JSON object whose keys are checked as
    ``FLAG.key`` entries of the same table).
    """

    kind: str
    source: str
    minimum: float | None = None
    maximum: float | None = None
    open_minimum: bool = False
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class EngineTable:
    """The flags one engine version defines that the recipes use."""

    engine: str
    version: str
    flags: Mapping[str, Flag]


def _int(source: str, minimum: int = 1) -> Flag:
    return Flag("int", source, minimum=minimum)


_VLLM = {
    "--tensor-parallel-size": _int(VLLM_ARGS),
    "--pipeline-parallel-size": _int(VLLM_ARGS),
    "--data-parallel-size": _int(VLLM_ARGS),
    "--enable-expert-parallel": Flag("switch", VLLM_ARGS),
    "--max-num-seqs": _int(VLLM_ARGS),
    "--max-num-batched-tokens": _int(VLLM_ARGS),
    "--max-model-len": _int(VLLM_ARGS),
    "--kv-cache-dtype": Flag(
        "choice", VLLM_CACHE, choices=("auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla")
    ),  # a subset of CacheDType
    "--gpu-memory-utilization": Flag("float", VLLM_CACHE, minimum=0.0, maximum=1.0, open_minimum=True),
    "--quantization": Flag("choice", VLLM_QUANT, choices=("fp8",)),
    "--distributed-executor-backend": Flag("choice", VLLM_PARALLEL, choices=("mp", "ray")),
    "--data-parallel-backend": Flag("choice", VLLM_PARALLEL, choices=("mp", "ray")),
    "--speculative-config": Flag("json", VLLM_ARGS),
    "--speculative-config.method": Flag("choice", VLLM_SPEC, choices=("draft_model", "mtp")),
    "--speculative-config.model": Flag("text", VLLM_SPEC),
    "--speculative-config.num_speculative_tokens": _int(VLLM_SPEC),
    "--kv-transfer-config": Flag("json", VLLM_ARGS),
    "--kv-transfer-config.kv_connector": Flag("choice", VLLM_KV, choices=("NixlConnector",)),
    "--kv-transfer-config.kv_role": Flag("choice", VLLM_KV, choices=("kv_both",)),
    # the benchmark client (vllm bench serve)
    "--backend": Flag("choice", VLLM_BENCH, choices=("vllm", "openai")),
    "--host": Flag("text", VLLM_BENCH),
    "--port": _int(VLLM_BENCH),
    "--model": Flag("text", VLLM_BENCH),
    "--dataset-name": Flag("choice", VLLM_BENCH, choices=("random",)),
    "--random-input-len": _int(VLLM_BENCH),
    "--random-output-len": _int(VLLM_BENCH),
    "--num-prompts": _int(VLLM_BENCH),
    "--max-concurrency": _int(VLLM_BENCH),
    "--ignore-eos": Flag("switch", VLLM_BENCH),
    "--save-result": Flag("switch", VLLM_BENCH),
    "--result-filename": Flag("text", VLLM_BENCH),
    "--metadata": Flag("text", VLLM_BENCH),
}

_SGLANG = {
    "--model-path": Flag("text", SGLANG_ARGS),
    "--host": Flag("text", SGLANG_ARGS),
    "--port": _int(SGLANG_ARGS),
    "--tp-size": _int(SGLANG_ARGS),
    "--pp-size": _int(SGLANG_ARGS),
    "--ep-size": _int(SGLANG_ARGS),
    "--attn-dp-size": _int(SGLANG_ARGS),  # replaces --dp-size N --enable-dp-attention (deprecated in 0.5.23)
    "--max-running-requests": _int(SGLANG_ARGS),
    "--chunked-prefill-size": _int(SGLANG_ARGS),
    "--context-length": _int(SGLANG_ARGS),
    "--kv-cache-dtype": Flag("choice", SGLANG_ARGS, choices=("auto", "fp8_e5m2", "fp8_e4m3")),
    "--quantization": Flag("choice", SGLANG_ARGS, choices=("fp8",)),
    "--mem-fraction-static": Flag("float", SGLANG_ARGS, minimum=0.0, maximum=1.0, open_minimum=True),
    "--speculative-algorithm": Flag("choice", SGLANG_ARGS, choices=("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")),
    "--speculative-draft-model-path": Flag("text", SGLANG_ARGS),
    "--speculative-num-steps": _int(SGLANG_ARGS),
    "--speculative-eagle-topk": _int(SGLANG_ARGS),
    "--speculative-num-draft-tokens": _int(SGLANG_ARGS),
    "--disaggregation-mode": Flag("choice", SGLANG_ARGS, choices=("prefill", "decode")),
    "--disaggregation-transfer-backend": Flag("choice", SGLANG_ARGS, choices=("mooncake", "nixl")),
    "--disaggregation-bootstrap-port": _int(SGLANG_ARGS),
    "--nnodes": _int(SGLANG_ARGS),
    "--node-rank": Flag("text", SGLANG_ARGS),  # the LeaderWorkerSet worker index, from the environment
    "--dist-init-addr": Flag("text", SGLANG_ARGS),
    # the benchmark client (python -m sglang.bench_serving)
    "--backend": Flag("choice", SGLANG_BENCH, choices=("sglang",)),
    "--dataset-name": Flag("choice", SGLANG_BENCH, choices=("random",)),
    "--random-input-len": _int(SGLANG_BENCH),
    "--random-output-len": _int(SGLANG_BENCH),
    "--random-range-ratio": Flag("float", SGLANG_BENCH, minimum=0.0, maximum=1.0),
    "--num-prompts": _int(SGLANG_BENCH),
    "--output-file": Flag("text", SGLANG_BENCH),
}

_TRTLLM = {
    "--host": Flag("text", TRTLLM_SERVE),
    "--port": _int(TRTLLM_SERVE),
    "--backend": Flag("choice", TRTLLM_SERVE, choices=("pytorch",)),
    "--tp_size": _int(TRTLLM_SERVE),
    "--pp_size": _int(TRTLLM_SERVE),
    "--ep_size": _int(TRTLLM_SERVE),
    "--max_batch_size": _int(TRTLLM_SERVE),
    "--max_num_tokens": _int(TRTLLM_SERVE),
    "--max_seq_len": _int(TRTLLM_SERVE),
    "--kv_cache_free_gpu_memory_fraction": Flag("float", TRTLLM_SERVE, minimum=0.0, maximum=1.0, open_minimum=True),
    "--enable_chunked_prefill": Flag("switch", TRTLLM_SERVE),
    "--extra_llm_api_options": Flag("text", TRTLLM_SERVE),
    "--config_file": Flag("text", TRTLLM_SERVE),
    # keys of the --extra_llm_api_options YAML file
    "enable_attention_dp": Flag("choice", TRTLLM_ARGS, choices=("true",)),
    "kv_cache_config.dtype": Flag("choice", TRTLLM_ARGS, choices=("auto", "fp8")),
    "speculative_config.decoding_type": Flag("choice", TRTLLM_ARGS, choices=("Draft_Target", "MTP")),
    "speculative_config.max_draft_len": _int(TRTLLM_ARGS),
    "speculative_config.speculative_model": Flag("text", TRTLLM_ARGS),
    "speculative_config.num_nextn_predict_layers": _int(TRTLLM_ARGS),
    "cache_transceiver_config.backend": Flag("choice", TRTLLM_ARGS, choices=("DEFAULT", "UCX", "NIXL", "MPI")),
    # keys of the trtllm-serve disaggregated --config_file YAML
    "hostname": Flag("text", TRTLLM_DISAGG),
    "port": _int(TRTLLM_DISAGG),
    "context_servers.num_instances": _int(TRTLLM_DISAGG),
    "context_servers.urls": Flag("text", TRTLLM_DISAGG),
    "generation_servers.num_instances": _int(TRTLLM_DISAGG),
    "generation_servers.urls": Flag("text", TRTLLM_DISAGG),
}

_DYNAMO = {
    **{k: v for k, v in _VLLM.items() if not k.startswith("--kv-transfer-config")},
    "--model": Flag("text", DYNAMO_VLLM),
    "--disaggregation-mode": Flag("choice", DYNAMO_VLLM, choices=("prefill", "decode")),
}

_GENAI_PERF = {
    "--model": Flag("text", GENAI_PERF_ARGS),
    "--tokenizer": Flag("text", GENAI_PERF_ARGS),
    "--endpoint-type": Flag("choice", GENAI_PERF_ENDPOINTS, choices=("completions", "chat")),
    "--streaming": Flag("switch", GENAI_PERF_ARGS),
    "--url": Flag("text", GENAI_PERF_ARGS),
    "--synthetic-input-tokens-mean": _int(GENAI_PERF_ARGS),
    "--synthetic-input-tokens-stddev": _int(GENAI_PERF_ARGS, minimum=0),
    "--output-tokens-mean": _int(GENAI_PERF_ARGS),
    "--output-tokens-stddev": _int(GENAI_PERF_ARGS, minimum=0),
    "--extra-inputs": Flag("text", GENAI_PERF_ARGS),
    "--num-dataset-entries": _int(GENAI_PERF_ARGS),  # type=positive_integer
    "--concurrency": _int(GENAI_PERF_ARGS),
    "--request-count": _int(GENAI_PERF_ARGS),
    "--artifact-dir": Flag("text", GENAI_PERF_ARGS),
}

_AIPERF = {
    "--model": Flag("text", AIPERF_ARGS.format("endpoint_config.py")),
    "--url": Flag("text", AIPERF_ARGS.format("endpoint_config.py")),
    "--endpoint-type": Flag("choice", AIPERF_ARGS.format("endpoint_config.py"), choices=("completions", "chat")),
    "--streaming": Flag("switch", AIPERF_ARGS.format("endpoint_config.py")),
    "--tokenizer": Flag("text", AIPERF_ARGS.format("tokenizer_config.py")),
    "--synthetic-input-tokens-mean": _int(AIPERF_ARGS.format("prompt_config.py"), minimum=0),  # Field(ge=0)
    "--synthetic-input-tokens-stddev": _int(AIPERF_ARGS.format("prompt_config.py"), minimum=0),
    "--output-tokens-mean": _int(AIPERF_ARGS.format("prompt_config.py"), minimum=0),
    "--output-tokens-stddev": _int(AIPERF_ARGS.format("prompt_config.py"), minimum=0),
    "--extra-inputs": Flag("text", AIPERF_ARGS.format("input_config.py")),
    "--num-dataset-entries": _int(AIPERF_ARGS.format("conversation_config.py")),  # Field(ge=1)
    "--concurrency": _int(AIPERF_ARGS.format("loadgen_config.py")),  # Field(ge=1)
    "--request-count": _int(AIPERF_ARGS.format("loadgen_config.py")),  # Field(ge=1)
    "--artifact-dir": Flag("text", AIPERF_ARGS.format("output_config.py")),
}

_VLLM_ROUTER = {
    "--host": Flag("text", VLLM_ROUTER),
    "--port": _int(VLLM_ROUTER),
    "--policy": Flag("choice", VLLM_ROUTER, choices=("round_robin", "power_of_two")),
    "--vllm-pd-disaggregation": Flag("switch", VLLM_ROUTER),
    "--prefill": Flag("text", VLLM_ROUTER),
    "--decode": Flag("text", VLLM_ROUTER),
}

_SGLANG_ROUTER = {
    "--host": Flag("text", SGLANG_ROUTER),
    "--port": _int(SGLANG_ROUTER),
    "--policy": Flag("choice", SGLANG_ROUTER, choices=("round_robin", "power_of_two")),
    "--pd-disaggregation": Flag("switch", SGLANG_ROUTER),
    "--prefill": Flag("text", SGLANG_ROUTER),
    "--decode": Flag("text", SGLANG_ROUTER),
}

_DYNAMO_FRONTEND = {
    "--http-port": _int(DYNAMO_FRONTEND),
    "--router-mode": Flag("choice", DYNAMO_FRONTEND, choices=("round-robin", "kv")),
}

TABLES: dict[str, EngineTable] = {
    "vllm": EngineTable("vllm", "0.33.0", _VLLM),
    "sglang": EngineTable("sglang", "0.5.23", _SGLANG),
    "trtllm": EngineTable("trtllm", "trtllm-serve @ 4c05a748", _TRTLLM),
    "dynamo": EngineTable("dynamo", "1.6.1 (dynamo.vllm over vLLM 0.33.0)", _DYNAMO),
    "genai-perf": EngineTable("genai-perf", "0.0.16dev (perf_analyzer main @ 263c5f6e)", _GENAI_PERF),
    "aiperf": EngineTable("aiperf", "0.1.1 (main @ db4f6397)", _AIPERF),
}
"""One table per engine, and per benchmark client that has its own (GenAI-Perf, AIPerf; vLLM's and SGLang's clients
are in their engine's table): the version the recipes are written for (the one whose sources were read)."""

CLIENT_TABLES = ("genai-perf", "aiperf")
"""Tables of benchmark clients, not engines."""
ENGINES = tuple(name for name in TABLES if name not in CLIENT_TABLES)

HELPERS: dict[str, EngineTable] = {
    "vllm-router": EngineTable("vllm-router", "0.1.17", _VLLM_ROUTER),
    "sglang-router": EngineTable("sglang-router", "0.3.2", _SGLANG_ROUTER),
    "dynamo-frontend": EngineTable("dynamo-frontend", "1.6.1", _DYNAMO_FRONTEND),
}
"""Tables of the programs a recipe runs beside the engine's servers (the disaggregated routers), not engines."""


def table(name: str) -> EngineTable:
    """The table of an engine or of a helper program."""
    return TABLES[name] if name in TABLES else HELPERS[name]


def _value_problem(name: str, flag: Flag, value: Any) -> str | None:
    """Why ``value`` is not a valid value of ``flag`` (None when it is)."""
    if flag.kind == "switch":
        return None if value is None else f"{name} takes no value, got {value!r}"
    if value is None:
        return f"{name} needs a value"
    text = str(value)
    if flag.kind == "choice":
        return None if text in flag.choices else f"{name} {text!r} is not one of {', '.join(flag.choices)}"
    if flag.kind in ("int", "float"):
        try:
            number = int(text) if flag.kind == "int" else float(text)
        except ValueError:
            return f"{name} {text!r} is not an {flag.kind}"
        low_ok = flag.minimum is None or (number > flag.minimum if flag.open_minimum else number >= flag.minimum)
        high_ok = flag.maximum is None or number <= flag.maximum
        return None if low_ok and high_ok else f"{name} {number} is out of range"
    return None if text else f"{name} is empty"


def flatten(config: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """A nested config file (YAML) as (dotted key, value) pairs: booleans as ``true``/``false``, lists as text."""
    out: list[tuple[str, Any]] = []
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out += flatten(value, f"{name}.")
        elif isinstance(value, bool):
            out.append((name, str(value).lower()))
        elif isinstance(value, list):
            out.append((name, ",".join(str(v) for v in value)))
        else:
            out.append((name, value))
    return out


def problems(engine: str, settings: Iterable[tuple[str, Any]]) -> list[str]:
    """Every emitted (flag, value) that the engine's table does not define or whose value is out of range.

    ``settings`` are pairs (flag or dotted key, value or None for a switch); a ``json`` flag's value is a mapping
    whose keys are checked as ``flag.key``.
    """
    found = []
    flags = table(engine).flags
    for name, value in settings:
        flag = flags.get(name)
        if flag is None:
            found.append(f"{name} is not in the {engine} {table(engine).version} table")
            continue
        if flag.kind == "json":
            if not isinstance(value, Mapping):
                found.append(f"{name} needs a JSON object")
                continue
            found += problems(engine, ((f"{name}.{k}", v) for k, v in value.items()))
            continue
        problem = _value_problem(name, flag, value)
        if problem:
            found.append(problem)
    return found
