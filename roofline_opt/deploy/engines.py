"""Serve commands per engine: one flag per decision of an instance, from the flag tables of ``deploy.flags``.

A decision an engine cannot express raises ``Unsupported`` with the reason in one line (2-D tensor parallelism, a
4-bit KV cache, vLLM's expert parallelism narrower than TP). Each builder returns a ``Command``: the program and its
(flag, value) settings, checked against the table by the tests. A disaggregated answer also gets its router: vLLM's
``vllm-router --vllm-pd-disaggregation``, SGLang's ``sglang_router.launch_router --pd-disaggregation``,
TensorRT-LLM's ``trtllm-serve disaggregated``, Dynamo's frontend. A TensorRT-LLM instance spanning nodes is launched
as TensorRT-LLM documents it: ``srun`` over the nodes, each rank running ``trtllm-llmapi-launch trtllm-serve``.
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from roofline_opt.deploy.answer import Deployment, Instance
from roofline_opt.deploy.flags import TABLES
from roofline_opt.physics.mtp import is_mtp_draft

SERVE_PORT = {"vllm": 8000, "sglang": 30000, "trtllm": 8000, "dynamo": 8000}
"""Port each engine's server listens on (its default)."""
SGLANG_BOOTSTRAP_PORT = 8998
"""SGLang's --disaggregation-bootstrap-port (its default), named to the router with each prefill server."""
KV_DTYPE = {"vllm": "fp8", "sglang": "fp8_e4m3", "trtllm": "fp8", "dynamo": "fp8"}
"""KV-cache dtype of an 8-bit KV cache per engine (16-bit: the engine's default, the model's dtype)."""
DEFAULT_MEMORY_FRACTION = 0.9
"""Memory fraction when an answer states no memory figures (a fleet row): the default preset's usable HBM share."""
NODE_GPUS = {"gb200": 4, "gh200": 1}
"""GPUs per Kubernetes node where it differs from the accelerator's scale-up domain (capped at 8)."""


class Unsupported(Exception):
    """An answer's decision the engine cannot express; the message is the one-line reason."""


@dataclass(frozen=True)
class Command:
    """One server (or helper) process kind of a recipe."""

    role: str
    program: tuple[str, ...]
    settings: tuple[tuple[str, Any], ...]
    count: int
    gpus: int
    gpu: str = ""
    instance: Instance | None = None
    files: Mapping[str, str] = field(default_factory=dict)
    """Config files the command reads (name -> text), written beside it."""
    table: str = ""
    """The flag table its settings are checked against when not the recipe's engine (a router's)."""
    launcher: tuple[str, ...] = ()
    """What starts the program on every rank of an instance spanning nodes (srun ... trtllm-llmapi-launch)."""

    def argv(self) -> list[str]:
        """The program and its settings (a tuple value is several words: a router's URL and bootstrap port)."""
        out = list(self.program)
        for name, value in self.settings:
            out.append(name)
            if isinstance(value, Mapping):
                out.append(json.dumps(value, separators=(",", ":")))
            elif isinstance(value, tuple):
                out += [str(v) for v in value]
            elif value is not None:
                out.append(str(value))
        return out

    def shell(self) -> str:
        return shlex.join([*self.launcher, *self.argv()])

    @property
    def label(self) -> str:
        """The kind's name in host names, file names and manifests (its instance's label, else the role)."""
        return self.instance.label if self.instance is not None else self.role


def gpus_per_node(gpu: str) -> int:
    """GPUs of one Kubernetes node of this accelerator (the scale-up domain, at most 8, unless listed)."""
    from roofline_opt import catalog

    if gpu in NODE_GPUS:
        return NODE_GPUS[gpu]
    return max(1, min(8, catalog.load_gpu(gpu).scaleup_gpus))


def hf_model(name: str) -> str:
    """The HuggingFace id a server loads for a catalog model: its first alias with an organisation, else the name."""
    from roofline_opt import catalog

    base, _ = catalog.cards.split_precision_suffix(name)
    aliases = catalog.cards.model_aliases(base)  # none for a card outside the catalog: served by its name
    return next((a for a in aliases if "/" in a), base)


def memory_fraction(dep: Deployment) -> float:
    """Share of each device's HBM the answer plans to use: its usable capacity over the HBM of the accelerator those
    figures are for (the decoding one), the same share on every accelerator of the answer (a preset setting)."""
    from roofline_opt import catalog

    if dep.memory_capacity_bytes is None:
        return DEFAULT_MEMORY_FRACTION
    return round(min(1.0, float(dep.memory_capacity_bytes) / catalog.load_gpu(dep.instances[-1].gpu).hbm_bytes), 3)


def _common_checks(engine: str, dep: Deployment, inst: Instance) -> None:
    label = TABLES[engine].version
    if inst.tp_2d:
        raise Unsupported(
            f"{engine}: 2-D tensor parallelism (tp{inst.tp}(2d)) is not shipped by {engine} {label}; "
            "ask again with --tp-modes 1d (the default)"
        )
    if dep.kv_bits == 4:
        raise Unsupported(
            f"{engine}: a 4-bit KV cache is not among {engine} {label}'s KV-cache dtypes; use --kv-bits 16,8"
        )


def _draft_is_mtp(dep: Deployment) -> bool:
    return dep.draft is not None and is_mtp_draft(dep.draft)


def _batch_tokens(dep: Deployment, inst: Instance) -> int | None:
    """Tokens one step may carry: a prefill step of its batch of prompts, or an aggregated step's prefill chunk plus
    one token per decoding sequence; None for decode-only steps (the engine's default is enough)."""
    if inst.role == "prefill":
        return inst.prefill_batch * dep.isl
    if inst.role == "agg" and inst.chunk_tokens:
        return inst.chunk_tokens + inst.batch
    return None


def vllm(dep: Deployment, inst: Instance, engine: str = "vllm") -> Command:
    """``vllm serve``: TP/PP (or DP attention as data-parallel ranks with expert parallelism), the batch as
    --max-num-seqs (per DP rank), the step's token budget, KV dtype, FP8 weights, the draft, memory, length."""
    _common_checks(engine, dep, inst)
    s: list[tuple[str, Any]] = []
    if inst.dp_attention:
        s += [("--tensor-parallel-size", 1), ("--data-parallel-size", inst.tp), ("--enable-expert-parallel", None)]
        seqs = math.ceil(inst.batch / inst.tp)
    else:
        s += [("--tensor-parallel-size", inst.tp), ("--pipeline-parallel-size", inst.pp)]
        if inst.ep > 1:
            if inst.ep != inst.tp:
                raise Unsupported(
                    f"{engine}: vLLM's expert parallelism spans every TP rank (EP = TP = {inst.tp}); EP {inst.ep} "
                    f"inside TP {inst.tp} cannot be expressed"
                )
            s.append(("--enable-expert-parallel", None))
        seqs = inst.prefill_batch if inst.role == "prefill" else inst.batch
    s.append(("--max-num-seqs", seqs))
    if (tokens := _batch_tokens(dep, inst)) is not None:
        s.append(("--max-num-batched-tokens", tokens))
    if dep.kv_bits == 8:
        s.append(("--kv-cache-dtype", KV_DTYPE[engine]))
    if dep.weight_bits == 8:
        s.append(("--quantization", "fp8"))
    if dep.gamma and inst.role != "prefill":
        spec = (
            {"method": "mtp"} if _draft_is_mtp(dep) else {"method": "draft_model", "model": hf_model(dep.draft or "")}
        )
        s.append(("--speculative-config", {**spec, "num_speculative_tokens": dep.gamma}))
    s += [("--gpu-memory-utilization", memory_fraction(dep)), ("--max-model-len", dep.max_model_len)]
    if inst.n_gpus > gpus_per_node(inst.gpu):  # over the Ray cluster the LeaderWorkerSet's leader heads
        s.append(("--data-parallel-backend" if inst.dp_attention else "--distributed-executor-backend", "ray"))
    if engine == "dynamo":
        program: tuple[str, ...] = ("python3", "-m", "dynamo.vllm")
        s.insert(0, ("--model", hf_model(dep.model)))
        s.append(("--disaggregation-mode", inst.role))
    else:
        program = ("vllm", "serve", hf_model(dep.model))
        if inst.role != "agg":
            s.append(("--kv-transfer-config", {"kv_connector": "NixlConnector", "kv_role": "kv_both"}))
    return Command(inst.role, program, tuple(s), inst.count, inst.n_gpus, inst.gpu, inst)


def sglang(dep: Deployment, inst: Instance) -> Command:
    """``python3 -m sglang.launch_server``: TP/PP/EP (or DP attention), --max-running-requests, the prefill chunk,
    KV dtype, FP8 weights, the draft (NEXTN for MTP, STANDALONE for a draft model), memory, length, PD mode."""
    _common_checks("sglang", dep, inst)
    s: list[tuple[str, Any]] = [
        ("--model-path", hf_model(dep.model)),
        ("--host", "0.0.0.0"),
        ("--port", SERVE_PORT["sglang"]),
    ]
    if inst.dp_attention:
        s += [("--tp-size", inst.tp), ("--attn-dp-size", inst.tp), ("--ep-size", inst.tp)]  # 0.5.23 spelling
    else:
        s += [("--tp-size", inst.tp), ("--pp-size", inst.pp)]
        if inst.ep > 1:
            s.append(("--ep-size", inst.ep))
    s.append(("--max-running-requests", inst.prefill_batch if inst.role == "prefill" else inst.batch))
    if inst.role == "prefill":
        s.append(("--chunked-prefill-size", inst.prefill_batch * dep.isl))
    elif inst.role == "agg" and inst.chunk_tokens:
        s.append(("--chunked-prefill-size", inst.chunk_tokens))
    if dep.kv_bits == 8:
        s.append(("--kv-cache-dtype", KV_DTYPE["sglang"]))
    if dep.weight_bits == 8:
        s.append(("--quantization", "fp8"))
    if dep.gamma and inst.role != "prefill":
        if _draft_is_mtp(dep):
            s.append(("--speculative-algorithm", "NEXTN"))
        else:
            s += [
                ("--speculative-algorithm", "STANDALONE"),
                ("--speculative-draft-model-path", hf_model(dep.draft or "")),
            ]
        s += [
            ("--speculative-num-steps", dep.gamma),
            ("--speculative-eagle-topk", 1),
            ("--speculative-num-draft-tokens", dep.gamma + 1),
        ]
    s += [("--mem-fraction-static", memory_fraction(dep)), ("--context-length", dep.max_model_len)]
    if inst.role != "agg":
        s += [("--disaggregation-mode", inst.role), ("--disaggregation-transfer-backend", "nixl")]
    if inst.role == "prefill":
        s.append(("--disaggregation-bootstrap-port", SGLANG_BOOTSTRAP_PORT))
    return Command(
        inst.role, ("python3", "-m", "sglang.launch_server"), tuple(s), inst.count, inst.n_gpus, inst.gpu, inst
    )


def trtllm_free_fraction(dep: Deployment, gpu: str) -> float:
    """TensorRT-LLM's --kv_cache_free_gpu_memory_fraction: the KV cache's share of the memory left after weights
    (the answer's usable capacity minus weights and activations, over the card's HBM minus weights)."""
    from roofline_opt import catalog

    if dep.memory_capacity_bytes is None or dep.weights_bytes_per_device is None or gpu != dep.instances[-1].gpu:
        return DEFAULT_MEMORY_FRACTION  # the answer's memory figures are the decoding instance's
    hbm, weights = catalog.load_gpu(gpu).hbm_bytes, float(dep.weights_bytes_per_device)
    free = float(dep.memory_capacity_bytes) - weights - float(dep.activations_bytes_per_device or 0)
    return round(min(1.0, max(0.01, free / (hbm - weights))), 3)


def _yaml(data: Mapping[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(dict(data), sort_keys=False)


def trtllm_options(dep: Deployment, inst: Instance) -> dict[str, Any]:
    """The --extra_llm_api_options YAML of one instance kind (attention DP, KV dtype, draft, KV transfer)."""
    options: dict[str, Any] = {}
    if inst.dp_attention:
        options["enable_attention_dp"] = True
    if dep.kv_bits == 8:
        options["kv_cache_config"] = {"dtype": KV_DTYPE["trtllm"]}
    if dep.gamma and inst.role != "prefill":
        options["speculative_config"] = (
            {"decoding_type": "MTP", "num_nextn_predict_layers": dep.gamma}
            if _draft_is_mtp(dep)
            else {
                "decoding_type": "Draft_Target",
                "max_draft_len": dep.gamma,
                "speculative_model": hf_model(dep.draft or ""),
            }
        )
    if inst.role != "agg":
        options["cache_transceiver_config"] = {"backend": "DEFAULT"}
    return options


def trtllm(dep: Deployment, inst: Instance, prefix: str = "") -> Command:
    """``trtllm-serve``: TP/PP/EP flags, --max_batch_size (per attention-DP rank), the step's token budget, the
    length and the KV share, the rest in an --extra_llm_api_options YAML file."""
    _common_checks("trtllm", dep, inst)
    s: list[tuple[str, Any]] = [
        ("--backend", "pytorch"),
        ("--host", "0.0.0.0"),
        ("--port", SERVE_PORT["trtllm"]),
        ("--tp_size", inst.tp),
        ("--pp_size", inst.pp),
    ]
    if inst.dp_attention or inst.ep > 1:
        s.append(("--ep_size", inst.ep))
    batch = inst.prefill_batch if inst.role == "prefill" else inst.batch
    s.append(("--max_batch_size", math.ceil(batch / inst.tp) if inst.dp_attention else batch))
    if (tokens := _batch_tokens(dep, inst)) is not None:
        s.append(("--max_num_tokens", tokens))
    if inst.role == "agg" and inst.chunk_tokens:
        s.append(("--enable_chunked_prefill", None))
    s += [
        ("--max_seq_len", dep.max_model_len),
        ("--kv_cache_free_gpu_memory_fraction", trtllm_free_fraction(dep, inst.gpu)),
    ]
    files = {}
    if options := trtllm_options(dep, inst):
        name = f"{prefix}trtllm.{inst.label}.extra-llm-api-options.yaml"
        s.append(("--extra_llm_api_options", name))
        files[name] = _yaml(options)
    return Command(
        inst.role,
        ("trtllm-serve", hf_model(dep.model)),
        tuple(s),
        inst.count,
        inst.n_gpus,
        inst.gpu,
        inst,
        files,
        launcher=trtllm_launcher(inst),
    )


def trtllm_launcher(inst: Instance) -> tuple[str, ...]:
    """``srun`` over the nodes of an instance that spans them, one MPI rank per GPU, each running
    ``trtllm-llmapi-launch`` (TensorRT-LLM's multi-node form); nothing for an instance on one node."""
    per_node = gpus_per_node(inst.gpu)
    if inst.n_gpus <= per_node:
        return ()
    nodes = -(-inst.n_gpus // per_node)
    return (
        "srun",
        f"--nodes={nodes}",
        f"--ntasks={inst.n_gpus}",
        f"--ntasks-per-node={per_node}",
        "--mpi=pmix",
        f"--gres=gpu:{per_node}",
        "trtllm-llmapi-launch",
    )


def trtllm_router(dep: Deployment, workers: list[Command], prefix: str = "") -> Command:
    """``trtllm-serve disaggregated``: the front server over the xPyD workers (their URLs are set at launch)."""
    port = SERVE_PORT["trtllm"]
    config: dict[str, Any] = {"hostname": "0.0.0.0", "port": port}
    for w in workers:  # several decode kinds (a fleet pool) are one group of generation servers
        key = "context_servers" if w.role == "prefill" else "generation_servers"
        group = config.setdefault(key, {"num_instances": 0, "urls": []})
        group["num_instances"] += w.count
        group["urls"] += [f"{w.label}-{i}:{port}" for i in range(w.count)]
    name = f"{prefix}trtllm.disagg.yaml"
    return Command(
        "router", ("trtllm-serve", "disaggregated"), (("--config_file", name),), 1, 0, "", None, {name: _yaml(config)}
    )


def dynamo_frontend() -> Command:
    """Dynamo's HTTP frontend, routing each request to a prefill then a decode worker (round robin over workers)."""
    settings = (("--http-port", SERVE_PORT["dynamo"]), ("--router-mode", "round-robin"))
    return Command("frontend", ("python3", "-m", "dynamo.frontend"), settings, 1, 0, table="dynamo-frontend")


def pd_router(engine: str, workers: list[Command]) -> Command:
    """The prefill/decode router of a disaggregated vLLM or SGLang recipe: every prefill and decode server by URL
    (``ROLE-K`` host names, to be set to the servers' addresses at launch); SGLang's prefill URLs carry their
    bootstrap port."""
    port = SERVE_PORT[engine]  # the router listens where the benchmark sends requests: the engine's port
    s: list[tuple[str, Any]] = [("--host", "0.0.0.0"), ("--port", port)]
    if engine == "vllm":
        program: tuple[str, ...] = ("vllm-router",)
        s.append(("--vllm-pd-disaggregation", None))
    else:
        program = ("python3", "-m", "sglang_router.launch_router")
        s.append(("--pd-disaggregation", None))
    for w in workers:
        for k in range(w.count):
            url = f"http://{w.label}-{k}:{port}"
            if w.role == "prefill":
                s.append(("--prefill", (url, SGLANG_BOOTSTRAP_PORT) if engine == "sglang" else (url,)))
            else:
                s.append(("--decode", url))
    # Decode kinds of unequal capacity (a fleet pool) need load-aware routing: round robin would split evenly.
    kinds = {w.label for w in workers if w.role == "decode"}
    s.append(("--policy", "power_of_two" if len(kinds) > 1 else "round_robin"))
    return Command("router", program, tuple(s), 1, 0, table=f"{engine}-router")


def commands(engine: str, dep: Deployment, prefix: str = "") -> list[Command]:
    """Every process kind of the recipe of ``dep`` on ``engine`` (raises Unsupported with the reason)."""
    if engine == "dynamo" and not dep.disaggregated:
        raise Unsupported(
            "dynamo: recipes are written for disaggregated answers (serving disagg); use vllm, sglang or trtllm"
        )
    if engine == "dynamo":
        return [dynamo_frontend(), *(vllm(dep, inst, engine) for inst in dep.instances)]
    if engine in ("vllm", "sglang"):
        out = [vllm(dep, inst) if engine == "vllm" else sglang(dep, inst) for inst in dep.instances]
        return [*out, pd_router(engine, out)] if dep.disaggregated else out
    workers = [trtllm(dep, inst, prefix) for inst in dep.instances]
    return [*workers, trtllm_router(dep, workers, prefix)] if dep.disaggregated else workers
