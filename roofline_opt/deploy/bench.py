"""The benchmark that checks a recipe: the client command measuring the answer's workload, and what the model
predicts it will measure (a closed loop: a client waiting for its first token receives none, so the measured output
rate is the answer's less the time to first token's share of each request).

The client sends requests of the answer's input and output lengths (random tokens, exact lengths, EOS ignored) with
as many in flight as the deployment's decode slots (the batch of each decoding instance times their number), so the
servers run at the batch the answer chose. vLLM's ``vllm bench serve`` measures vLLM, TensorRT-LLM, Dynamo
and SGLang (all serve the OpenAI API; ``--save-result`` writes the JSON ``validate --bench`` reads back); SGLang's
own ``sglang.bench_serving`` is written too, and for every engine NVIDIA's GenAI-Perf and AIPerf (``genai-perf
profile`` / ``aiperf profile``: synthetic prompts of exactly the input length, ``--output-tokens-mean`` with EOS
ignored, ``--concurrency`` the decode slots, as many distinct prompts as requests so no prompt is served from the
prefix cache). Each client's result carries the recipe id back: vLLM's as ``--metadata roofline_recipe=ID``,
GenAI-Perf's and AIPerf's in the ``--artifact-dir`` their export records, SGLang's in its output file's name.
"""

from __future__ import annotations

from typing import Any

from roofline_opt.deploy.answer import Deployment
from roofline_opt.deploy.engines import SERVE_PORT, hf_model
from roofline_opt.deploy.results import RECIPE_KEY

PROMPTS_PER_SLOT = 4
"""Requests per in-flight slot: each slot serves several requests in a row, so the steady state dominates."""
RESULT_FILE = "{prefix}{engine}.bench-result.json"
ARTIFACT_DIR = "{prefix}{recipe_id}.{client}"
"""GenAI-Perf's and AIPerf's --artifact-dir: the recipe id in it comes back in their export's input_config."""


def closed_loop(
    clients: int, osl: int, ttft_s: float, tpot_s: float, capacity_requests_per_s: float | None
) -> dict[str, float]:
    """What a client holding ``clients`` requests in flight measures (``--max-concurrency``): each waits for a
    request's last token before sending the next, so by Little's law the deployment serves clients / (TTFT + (O - 1)
    TPOT) requests/s, at most its capacity (docs/fidelity.md, "Closed-loop benchmarks")."""
    served = clients / (ttft_s + (osl - 1) * tpot_s)
    if capacity_requests_per_s is not None:
        served = min(served, capacity_requests_per_s)
    return {"request_throughput": served, "output_throughput": served * osl}


def concurrency(dep: Deployment) -> int:
    """Requests in flight at the answer's batch: decode slots of every decoding instance."""
    return sum(i.batch * i.count for i in dep.instances if i.role != "prefill")


def _profile_client(
    client: str, engine: str, dep: Deployment, recipe_id: str, prefix: str
) -> tuple[str, tuple[str, ...], list]:
    """GenAI-Perf's or AIPerf's ``profile`` command of the answer's workload (their flag names are shared)."""
    c = concurrency(dep)
    model = hf_model(dep.model)
    settings: list[tuple[str, Any]] = [
        ("--model", model),
        ("--tokenizer", model),
        ("--endpoint-type", "completions"),
        ("--streaming", None),
        ("--url", f"127.0.0.1:{SERVE_PORT[engine]}"),
        ("--synthetic-input-tokens-mean", dep.isl),
        ("--synthetic-input-tokens-stddev", 0),
        ("--output-tokens-mean", dep.osl),
        ("--output-tokens-stddev", 0),
        ("--extra-inputs", "ignore_eos:true"),
        ("--num-dataset-entries", PROMPTS_PER_SLOT * c),
        ("--concurrency", c),
        ("--request-count", PROMPTS_PER_SLOT * c),
        ("--artifact-dir", ARTIFACT_DIR.format(prefix=prefix, recipe_id=recipe_id, client=client)),
    ]
    return client, (client, "profile"), settings


def clients(engine: str, dep: Deployment, recipe_id: str, prefix: str = "") -> list[tuple[str, tuple[str, ...], list]]:
    """(flag table, program, settings) of each benchmark client for ``engine``: vLLM's client first (it caps the
    requests in flight at the deployment's batch and its result file goes back into ``validate --bench``), then for
    SGLang its own ``bench_serving``, whose version read has no concurrency cap (the server's
    --max-running-requests holds the batch; its TTFT then includes queueing), then GenAI-Perf and AIPerf."""
    c = concurrency(dep)
    lengths: list[tuple[str, Any]] = [
        ("--dataset-name", "random"),
        ("--random-input-len", dep.isl),
        ("--random-output-len", dep.osl),
        ("--num-prompts", PROMPTS_PER_SLOT * c),
    ]
    result = RESULT_FILE.format(prefix=prefix, engine=engine)
    head = [
        ("--backend", "vllm" if engine == "vllm" else "openai"),
        ("--host", "127.0.0.1"),
        ("--port", SERVE_PORT[engine]),
        ("--model", hf_model(dep.model)),
    ]
    tail = [
        ("--max-concurrency", c),
        ("--ignore-eos", None),
        ("--save-result", None),
        ("--result-filename", result),
        ("--metadata", f"{RECIPE_KEY}={recipe_id}"),
    ]
    out: list[tuple[str, tuple[str, ...], list]] = [("vllm", ("vllm", "bench", "serve"), [*head, *lengths, *tail])]
    if engine == "sglang":
        own = [
            ("--backend", "sglang"),
            ("--host", "127.0.0.1"),
            ("--port", SERVE_PORT["sglang"]),
            *lengths,
            ("--random-range-ratio", 1.0),
            ("--output-file", f"{prefix}{recipe_id}.bench_serving.jsonl"),
        ]
        out.append(("sglang", ("python3", "-m", "sglang.bench_serving"), own))
    out += [_profile_client(client, engine, dep, recipe_id, prefix) for client in ("genai-perf", "aiperf")]
    return out


def _deployment(dep: Deployment) -> dict[str, Any]:
    """What ran, for reading a result back as a measured row (``fidelity.measurements``)."""
    return {
        "model": dep.model,
        "weight_bits": dep.weight_bits,
        "kv_bits": dep.kv_bits,
        "gamma": dep.gamma,
        "draft": dep.draft,
        "instances": [
            {
                "role": i.role,
                "gpu": i.gpu,
                "tp": i.tp,
                "pp": i.pp,
                "ep": i.ep,
                "dp_attention": i.dp_attention,
                "batch": i.batch,
                "count": i.count,
            }
            for i in dep.instances
        ],
    }


def predicted(dep: Deployment, engine: str, recipe_id: str) -> dict[str, Any]:
    """The figures the model predicts for the benchmark, under the client's result field names (``median_tpot_ms``,
    ``median_ttft_ms``, ``output_throughput`` and ``request_throughput`` of the whole deployment)."""
    p = dep.predicted
    pred: dict[str, float] = {}
    # a closed-loop client sees the steady state, not an answer's percentiles under Poisson arrivals
    tpot = p.get("time_per_token_s", p.get("tpot_s"))
    ttft = p.get("ttft_no_load_s", p.get("ttft_s"))
    if tpot is not None:
        pred["median_tpot_ms"] = tpot * 1e3
    if ttft is not None:
        pred["median_ttft_ms"] = ttft * 1e3
    if "throughput_tok_s" in p:
        pred["output_throughput"] = p["throughput_tok_s"] * dep.units
    if "requests_per_s" in p:
        pred["request_throughput"] = p["requests_per_s"] * dep.units
    if "tok_s_per_request" in p:
        pred["tok_s_per_request"] = p["tok_s_per_request"]
    c = concurrency(dep)
    if ttft is not None and tpot is not None and dep.osl > 1:
        pred.update(closed_loop(c, dep.osl, ttft, tpot, pred.get("request_throughput")))
    workload = {
        "isl": dep.isl,
        "osl": dep.osl,
        "max_concurrency": c,
        "num_prompts": PROMPTS_PER_SLOT * c,
        "lengths_stated": dep.lengths_stated,
    }
    return {
        "recipe_id": recipe_id,
        "engine": engine,
        "model": dep.model,
        "workload": workload,
        "predicted": pred,
        "deployment": _deployment(dep),
    }
