"""Launch recipes (roofline_opt.deploy): every emitted flag exists in the engine table of the version named, with its
value in range; each decision of the answer appears as its flag; manifests validate against the Kubernetes API
schema subset in tests/data/k8s; answers an engine cannot express say why.

Answers come from the evaluator (``api.evaluate``) and are varied field by field, so no default-preset figure is
hard-coded: expected values are read from the answer itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import engine_parsers
import jsonschema
import pytest
import yaml

from roofline_opt import api, catalog
from roofline_opt.deploy import answer, bench, engines, flags, manifests, recipe

SCHEMAS = json.loads((Path(__file__).parent / "data" / "k8s" / "schemas.json").read_text())
KIND_SCHEMA = {
    "Deployment": "Deployment",
    "LeaderWorkerSet": "LeaderWorkerSet",
    "DynamoGraphDeployment": "DynamoGraphDeployment",
}
ENGINES = ("vllm", "sglang", "trtllm")


@pytest.fixture(scope="module")
def base() -> dict:
    """A decode-only answer record of Llama 3 70B on 8 H100s at batch 32 (figures from the evaluator)."""
    return dict(api.evaluate("llama-3-70b", "h100-sxm", tp=8, pp=1, batch=32).to_dict())


def _agg(base: dict, **changes) -> dict:
    return {**base, "serving": "agg", "chunk_tokens": 2048, **changes}


def _disagg(base: dict, **changes) -> dict:
    return {
        **base,
        "serving": "disagg",
        "chunk_tokens": 0,
        "decode_gpu": base["gpu"],
        "decode_instances": 3,
        "prefill_gpu": "h200",
        "prefill_instances": 2,
        "prefill_tp": 4,
        "prefill_tp_2d": False,
        "prefill_pp": 1,
        "prefill_batch": 2,
        "prefill_layout": "tp4pp1",
        "ttft_s": 0.5,
        "tpot_s": base["time_per_token_s"],
        "requests_per_s": 3.0,
        **changes,
    }


def _settings(cmd: engines.Command) -> dict:
    return dict(cmd.settings)


def _variants(base: dict) -> list[answer.Deployment]:
    """Answers covering every decision: plain, whole requests with FP8 weights and KV, a draft model, MTP on a MoE
    with data-parallel attention, expert parallelism, disaggregated xPyD, a multi-node instance, replicas."""
    return [
        answer.from_record(base),
        answer.from_record(_agg(base, weight_bits=8, kv_bits=8, replicas=3), isl=4000, osl=1000),
        answer.from_record({**base, "gamma": 4}, draft="llama-3-8b"),
        answer.from_record(
            {
                **base,
                "model": "deepseek-v3",
                "weight_bits": 8,
                "tp": 16,
                "ep": 16,
                "dp_attention": True,
                "batch": 1024,
                "gamma": 1,
            },
            draft="deepseek-v3-mtp",
        ),
        answer.from_record({**base, "model": "mixtral-8x7b", "ep": 8}),
        answer.from_record(_disagg(base, kv_bits=8), isl=8000, osl=500),
        answer.from_record({**base, "tp": 8, "pp": 2, "n_gpus": 16}),
    ]


def _all_commands(base: dict):
    for dep in _variants(base):
        for engine in (*ENGINES, "dynamo"):
            try:
                cmds = engines.commands(engine, dep)
            except engines.Unsupported:
                continue
            yield engine, dep, cmds


def test_every_emitted_flag_is_in_the_table_of_the_version_named_and_in_range(base):
    checked = 0
    for engine, dep, cmds in _all_commands(base):
        for table, used in recipe.settings_used(cmds, engine).items():
            assert flags.problems(table, used) == [], (engine, table, dep.name)
        for c in cmds:
            for text in c.files.values():
                assert flags.problems(engine, flags.flatten(yaml.safe_load(text))) == []
        for table, _, settings in bench.clients(engine, dep, "id"):
            assert flags.problems(table, settings) == []
        checked += 1
    assert checked >= 20


def test_the_table_check_finds_an_unknown_flag_and_a_value_out_of_range():
    found = flags.problems(
        "vllm",
        [
            ("--tensor-parallel-sizes", 8),
            ("--gpu-memory-utilization", 1.5),
            ("--kv-cache-dtype", "fp4"),
            ("--speculative-config", {"method": "eagle9"}),
        ],
    )
    assert len(found) == 4


def test_every_flag_of_every_table_names_its_source():
    for table in (*flags.TABLES.values(), *flags.HELPERS.values()):
        assert table.version
        assert all(flag.source for flag in table.flags.values())


def test_each_decision_of_an_aggregated_answer_is_its_flag(base):
    record = _agg(base, weight_bits=8, kv_bits=8)
    dep = answer.from_record(record, isl=4000, osl=1000)
    v = _settings(engines.vllm(dep, dep.instances[0]))
    assert (v["--tensor-parallel-size"], v["--pipeline-parallel-size"]) == (record["tp"], record["pp"])
    assert v["--max-num-seqs"] == record["batch"]
    assert v["--max-num-batched-tokens"] == record["chunk_tokens"] + record["batch"]
    assert (v["--kv-cache-dtype"], v["--quantization"], v["--max-model-len"]) == ("fp8", "fp8", 5000)
    device_bytes = catalog.load_gpu(record["gpu"]).hbm_bytes
    assert v["--gpu-memory-utilization"] == pytest.approx(record["memory_capacity_bytes"] / device_bytes, abs=1e-3)
    s = _settings(engines.sglang(dep, dep.instances[0]))
    assert (s["--tp-size"], s["--max-running-requests"], s["--chunked-prefill-size"]) == (8, record["batch"], 2048)
    assert s["--kv-cache-dtype"] == "fp8_e4m3"
    t = engines.trtllm(dep, dep.instances[0])
    assert (_settings(t)["--tp_size"], _settings(t)["--max_batch_size"]) == (8, record["batch"])
    assert "--enable_chunked_prefill" in _settings(t)
    assert yaml.safe_load(next(iter(t.files.values()))) == {"kv_cache_config": {"dtype": "fp8"}}


def test_a_draft_model_and_mtp_become_each_engines_speculative_settings(base):
    dep = answer.from_record({**base, "gamma": 4}, draft="llama-3-8b")
    spec = _settings(engines.vllm(dep, dep.instances[0]))["--speculative-config"]
    assert spec == {"method": "draft_model", "model": engines.hf_model("llama-3-8b"), "num_speculative_tokens": 4}
    s = _settings(engines.sglang(dep, dep.instances[0]))
    assert (s["--speculative-algorithm"], s["--speculative-num-steps"], s["--speculative-num-draft-tokens"]) == (
        "STANDALONE",
        4,
        5,
    )
    mtp = answer.from_record({**base, "model": "deepseek-v3", "gamma": 1}, draft="deepseek-v3-mtp")
    options = engines.trtllm_options(mtp, mtp.instances[0])
    assert options["speculative_config"] == {"decoding_type": "MTP", "num_nextn_predict_layers": 1}


def test_data_parallel_attention_is_dp_ranks_with_expert_parallelism(base):
    dep = answer.from_record({**base, "model": "deepseek-v3", "tp": 8, "ep": 8, "dp_attention": True, "batch": 800})
    v = _settings(engines.vllm(dep, dep.instances[0]))
    assert (v["--tensor-parallel-size"], v["--data-parallel-size"], v["--max-num-seqs"]) == (1, 8, 100)
    assert "--enable-expert-parallel" in v
    s = _settings(engines.sglang(dep, dep.instances[0]))
    assert (s["--attn-dp-size"], s["--ep-size"], s["--max-running-requests"]) == (8, 8, 800)
    assert engines.trtllm_options(dep, dep.instances[0]) == {"enable_attention_dp": True}


def test_a_disaggregated_answer_has_xpyd_workers_with_kv_transfer(base):
    record = _disagg(base)
    dep = answer.from_record(record, isl=8000, osl=500)
    cmds = engines.commands("sglang", dep)
    assert [(c.role, c.count, c.gpus) for c in cmds] == [("prefill", 2, 4), ("decode", 3, 8), ("router", 1, 0)]
    assert [_settings(c)["--disaggregation-mode"] for c in cmds[:2]] == ["prefill", "decode"]
    v = engines.commands("vllm", dep)
    assert all(_settings(c)["--kv-transfer-config"]["kv_connector"] == "NixlConnector" for c in v[:2])
    router = engines.commands("trtllm", dep)[-1]
    config = yaml.safe_load(next(iter(router.files.values())))
    assert (config["context_servers"]["num_instances"], config["generation_servers"]["num_instances"]) == (2, 3)
    dynamo = engines.commands("dynamo", dep)
    assert [_settings(c)["--disaggregation-mode"] for c in dynamo[1:]] == ["prefill", "decode"]


@pytest.mark.parametrize("engine", [*ENGINES, "dynamo"])
def test_a_2d_tensor_parallel_answer_says_why_it_cannot_be_launched(base, engine):
    dep = answer.from_record(_disagg({**base, "tp_2d": True}) if engine == "dynamo" else {**base, "tp_2d": True})
    with pytest.raises(engines.Unsupported, match="2-D tensor parallelism"):
        engines.commands(engine, dep)


def test_decisions_an_engine_lacks_say_why(base):
    kv4 = answer.from_record({**base, "kv_bits": 4})
    for engine in ENGINES:
        with pytest.raises(engines.Unsupported, match="4-bit KV"):
            engines.commands(engine, kv4)
    narrow_ep = answer.from_record({**base, "model": "mixtral-8x7b", "ep": 2})
    with pytest.raises(engines.Unsupported, match="EP 2 inside TP 8"):
        engines.commands("vllm", narrow_ep)
    assert engines.commands("sglang", narrow_ep)
    with pytest.raises(engines.Unsupported, match="disaggregated"):
        engines.commands("dynamo", answer.from_record(base))


def _validate(doc: dict) -> None:
    schema = {**SCHEMAS, "$ref": f"#/$defs/{KIND_SCHEMA[doc['kind']]}"}
    jsonschema.Draft202012Validator(schema).validate(doc)


def test_every_manifest_validates_against_the_kubernetes_schemas(base):
    kinds = set()
    for engine, dep, cmds in _all_commands(base):
        for doc in yaml.safe_load_all(manifests.to_yaml(manifests.manifests(engine, dep.name, cmds))):
            _validate(doc)
            kinds.add(doc["kind"])
    assert kinds == {"Deployment", "LeaderWorkerSet", "DynamoGraphDeployment"}


def test_the_schema_refuses_a_misspelt_field(base):
    dep = answer.from_record(base)
    doc = manifests.manifests("vllm", "x", engines.commands("vllm", dep))[0]
    doc["spec"]["template"]["spec"]["containers"][0]["resource"] = {}
    with pytest.raises(jsonschema.ValidationError):
        _validate(doc)


def test_a_manifest_asks_for_the_instance_gpus_on_nodes_of_its_accelerator(base):
    dep = answer.from_record({**base, "replicas": 2})
    (doc,) = manifests.manifests("vllm", "x", engines.commands("vllm", dep))
    pod = doc["spec"]["template"]["spec"]
    assert doc["kind"] == "Deployment" and doc["spec"]["replicas"] == 2
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == str(base["n_gpus"])
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": manifests.GPU_PRODUCT["h100-sxm"]}


def test_an_instance_spanning_nodes_is_a_leader_worker_set_of_one_pod_per_node(base):
    dep = answer.from_record({**base, "tp": 8, "pp": 4, "n_gpus": 32})
    (doc,) = manifests.manifests("sglang", "x", engines.commands("sglang", dep))
    assert doc["kind"] == "LeaderWorkerSet" and doc["spec"]["leaderWorkerTemplate"]["size"] == 4
    worker = doc["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == "8" and "--nnodes 4" in worker["args"][0]


PLAN = json.loads((Path(__file__).parent / "data" / "deploy_plan.json").read_text())
"""The shape of ``plan --json``: two copies of one layout placed on servers n1 and n3 of a cluster graph."""


def test_a_plan_on_a_cluster_graph_pins_each_copy_to_the_servers_of_its_placement():
    (dep,) = answer.from_plan(PLAN, {"chat": (2000, 400)})
    docs = manifests.manifests("vllm", "chat", engines.commands("vllm", dep))
    hosts = [d["spec"]["template"]["spec"]["nodeSelector"]["kubernetes.io/hostname"] for d in docs]
    assert hosts == ["n1", "n3"] and all(d["spec"]["replicas"] == 1 for d in docs)


def test_the_benchmark_runs_the_answer_workload_at_its_batch(base):
    dep = answer.from_record(_agg(base, replicas=3), isl=4000, osl=1000)
    (_, _, settings), *_ = bench.clients("vllm", dep, "rid")
    s = dict(settings)
    assert (s["--random-input-len"], s["--random-output-len"], s["--max-concurrency"]) == (
        4000,
        1000,
        3 * base["batch"],
    )
    assert s["--metadata"] == "roofline_recipe=rid"
    p = bench.predicted(dep, "vllm", "rid")["predicted"]
    assert p["median_tpot_ms"] == pytest.approx(base["time_per_token_s"] * 1e3)
    assert p["output_throughput"] == pytest.approx(3 * base["throughput_tok_s"])


def test_the_benchmark_predicts_a_closed_loop_output_rate(base):
    """Its clients wait for each request's last token: Little's law over TTFT + (O - 1) TPOT."""
    dep = answer.from_record(_agg(base, ttft_s=0.8, tpot_s=0.02, time_per_token_s=0.02), isl=4000, osl=1000)
    p = bench.predicted(dep, "vllm", "rid")["predicted"]
    requests_per_s = base["batch"] / (0.8 + 999 * 0.02)
    assert p["request_throughput"] == pytest.approx(requests_per_s)
    assert p["output_throughput"] == pytest.approx(requests_per_s * 1000)


def test_the_benchmark_predicts_the_steady_state_of_an_answer_limited_at_a_percentile(base):
    """An answer whose limits hold at p90 under Poisson arrivals carries those percentiles as ttft_s and tpot_s; a
    closed-loop client sees the steady state: the TTFT at no load and the mean TPOT."""
    record = _agg(base, ttft_s=0.8, ttft_no_load_s=0.3, tpot_s=0.03, time_per_token_s=0.02)
    p = bench.predicted(answer.from_record(record, isl=4000, osl=1000), "vllm", "rid")["predicted"]
    assert (p["median_ttft_ms"], p["median_tpot_ms"]) == pytest.approx((300.0, 20.0))
    assert p["request_throughput"] == pytest.approx(base["batch"] / (0.3 + 999 * 0.02))


def test_the_closed_loop_rate_stops_at_the_deployments_capacity(base):
    dep = answer.from_record(_disagg(base, requests_per_s=0.1), isl=4000, osl=1000)
    p = bench.predicted(dep, "vllm", "rid")["predicted"]
    assert p["request_throughput"] == pytest.approx(0.1 * dep.units)


def test_a_decode_only_answer_benchmarks_lengths_whose_mean_context_is_the_answers(base):
    dep = answer.from_record(base)
    assert not dep.lengths_stated and dep.isl + dep.osl / 2 == pytest.approx(base["context"], abs=1)


def test_the_recipe_folder_holds_every_engine_and_names_the_one_that_cannot(base, tmp_path):
    deps = [answer.from_record({**base, "kv_bits": 8})]
    built = recipe.build(deps, ("vllm", "sglang", "trtllm"), "test")
    recipe.write(str(tmp_path / "r"), built)
    names = {p.name for p in (tmp_path / "r").iterdir()}
    assert {f"{e}.{k}" for e in ENGINES for k in ("serve.sh", "k8s.yaml", "bench.sh", "predicted.json")} <= names
    index = json.loads((tmp_path / "r" / "recipe.json").read_text())
    assert set(index["deployments"][0]["engines"]) == set(ENGINES) and built.unsupported == []
    kv4 = recipe.build([answer.from_record({**base, "kv_bits": 4})], ENGINES, "test")
    assert len(kv4.unsupported) == 3 and set(kv4.files) == {"recipe.json"}


def test_2d_tensor_parallelism_is_offered_on_request_only():
    assert api.question("llama-3-70b", "h100-sxm").tp_modes == (False,)
    assert api.question("llama-3-70b", "h100-sxm", tp_modes=("1d", "2d")).tp_modes == (False, True)


def test_an_instance_spanning_nodes_runs_over_the_ray_cluster_of_its_leader(base):
    tp16 = answer.from_record({**base, "tp": 8, "pp": 2})
    assert _settings(engines.vllm(tp16, tp16.instances[0]))["--distributed-executor-backend"] == "ray"
    dp16 = answer.from_record({**base, "model": "deepseek-v3", "tp": 16, "ep": 16, "dp_attention": True})
    assert _settings(engines.vllm(dp16, dp16.instances[0]))["--data-parallel-backend"] == "ray"


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_disaggregated_recipe_routes_to_every_prefill_and_decode_server(base, engine):
    dep = answer.from_record(_disagg(base), isl=8000, osl=500)
    router = engines.commands(engine, dep)[-1]
    words = router.argv()
    assert words.count("--prefill") == 2 and words.count("--decode") == 3
    assert ("--vllm-pd-disaggregation" if engine == "vllm" else "--pd-disaggregation") in words
    assert flags.problems(router.table, router.settings) == []
    if engine == "sglang":  # each prefill URL carries the bootstrap port its prefill server opens
        prefill = _settings(engines.commands(engine, dep)[0])
        ports = [v[1] for k, v in router.settings if k == "--prefill"]
        assert ports == [prefill["--disaggregation-bootstrap-port"]] * 2


def test_a_router_is_a_deployment_without_gpus(base):
    dep = answer.from_record(_disagg(base), isl=8000, osl=500)
    docs = manifests.manifests("vllm", "r", engines.commands("vllm", dep))
    router = next(d for d in docs if d["metadata"]["name"].endswith("router"))
    _validate(router)
    assert "resources" not in router["spec"]["template"]["spec"]["containers"][0]


def test_a_trtllm_instance_spanning_nodes_runs_under_srun_with_one_rank_per_gpu(base):
    dep = answer.from_record({**base, "tp": 16, "n_gpus": 16})
    (cmd,) = engines.commands("trtllm", dep)
    assert cmd.shell().startswith("srun --nodes=2 --ntasks=16 --ntasks-per-node=8 --mpi=pmix")
    assert cmd.launcher[-1] == "trtllm-llmapi-launch" and _settings(cmd)["--tp_size"] == 16
    assert manifests.manifests("trtllm", "r", [cmd]) == []
    assert any("srun" in note for note in recipe.notes("trtllm", dep))


def test_every_emitted_command_parses_with_its_engines_own_parser(base):
    """Every command of every variant (servers, routers, benchmark clients) parses with the parser the engine's
    release builds (rebuilt from tests/data/engine_args), and the decisions read back as the engine sees them."""
    parsed = 0
    for engine, dep, cmds in _all_commands(base):
        runs = [c.argv() for c in cmds] + [
            engines.Command("bench", program, tuple(settings), 1, 0).argv()
            for _, program, settings in bench.clients(engine, dep, "id")
        ]
        for argv in runs:
            if engine_parsers.program_of(argv) is None:  # TensorRT-LLM, SGLang's bench_serving: no dump
                continue
            ns = engine_parsers.parse(argv)
            parsed += 1
            inst = next((c.instance for c in cmds if c.argv() == argv), None)
            if inst is not None and hasattr(ns, "tensor_parallel_size") and not inst.dp_attention:
                assert (ns.tensor_parallel_size, ns.pipeline_parallel_size) == (inst.tp, inst.pp)
            if inst is not None and hasattr(ns, "tp_size"):
                assert ns.tp_size == inst.tp
    assert parsed >= 40


def test_an_engine_parser_refuses_what_the_engine_refuses():
    with pytest.raises(ValueError, match="does not know"):
        engine_parsers.parse(["vllm", "serve", "m", "--tensor-parallel-sizes", "8"])
    with pytest.raises(ValueError, match="refuses"):
        engine_parsers.parse(["python3", "-m", "sglang.launch_server", "--kv-cache-dtype", "fp4"])
    with pytest.raises(ValueError, match="refuses"):
        engine_parsers.parse(["python3", "-m", "sglang.launch_server", "--tp-size", "eight"])


ENGINE_DUMPS = {
    "vllm": ("vllm-serve", "vllm-bench-serve"),
    "sglang": ("sglang-launch-server",),
    "dynamo": ("dynamo-vllm", "vllm-bench-serve"),
    "vllm-router": ("vllm-router",),
    "sglang-router": ("sglang-router",),
    "dynamo-frontend": ("dynamo-frontend",),
}


@pytest.mark.parametrize("name", ENGINE_DUMPS)
def test_every_flag_of_a_table_is_an_option_of_that_release_with_its_choices(name):
    """The tables name the release whose parser was dumped; each flag is one of its options, and a flag's choices are
    among the parser's own where the parser declares them (SGLang's bench_serving flags come from older sources)."""
    options: dict[str, dict] = {}
    for dump in ENGINE_DUMPS[name]:
        record = engine_parsers.dump(dump)
        if dump != "vllm-bench-serve":
            assert flags.table(name).version.split()[0] in record["version"], (name, record["version"])
        options.update({o: a for a in record["arguments"] for o in a["options"]})
    for flag_name, flag in flags.table(name).flags.items():
        if not flag_name.startswith("--") or "." in flag_name or flag.source == flags.SGLANG_BENCH:
            continue
        assert flag_name in options, (name, flag_name)
        declared = options[flag_name]["choices"]
        if flag.kind == "choice" and declared is not None:
            assert set(flag.choices) <= set(declared), (name, flag_name)
