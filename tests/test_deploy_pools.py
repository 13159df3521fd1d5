"""Launch recipes of fleet plans with disaggregated pools (``serving: disagg`` per model): a pooled model is one xPyD
recipe (its prefill pool, every decode kind the plan mixes, the router and the KV transfer), never aggregated servers.

The plan is solved once from instances/fleets/disagg-pools.yaml; expected values are read from the plan itself.
"""

from __future__ import annotations

import contextlib
import io
import json
import shlex
from pathlib import Path

import engine_parsers
import jsonschema
import pytest
import yaml

from roofline_opt.cli import main
from roofline_opt.deploy import answer, engines, flags, manifests, recipe

ROOT = Path(__file__).parent.parent
FLEET = ROOT / "instances" / "fleets" / "disagg-pools.yaml"
SCHEMAS = json.loads((Path(__file__).parent / "data" / "k8s" / "schemas.json").read_text())
ENGINES = ("vllm", "sglang", "trtllm", "dynamo")


@pytest.fixture(scope="module")
def planned(tmp_path_factory) -> tuple[Path, dict]:
    """The plan's JSON and the recipes ``plan --emit`` wrote for it (one solve for the module)."""
    root = tmp_path_factory.mktemp("pools")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["plan", str(FLEET), "--json", "--emit", str(root / "emit")]) == 0
    (root / "plan.json").write_text(out.getvalue())
    return root, json.loads(out.getvalue())


def _chat(plan: dict) -> answer.Deployment:
    deps = answer.from_plan(plan, {"chat": (2000, 400), "code": (1000, 200)})
    return next(d for d in deps if d.name == "chat")


def test_a_pooled_model_is_one_xpyd_deployment_of_its_prefill_pool_and_decode_instances(planned):
    _, plan = planned
    summary = next(m for m in plan["models"] if m["model"] == "chat")
    dep = _chat(plan)
    prefill = [i for i in dep.instances if i.role == "prefill"]
    decode = [i for i in dep.instances if i.role == "decode"]
    assert dep.disaggregated and len(prefill) == 1 and decode
    assert prefill[0].count == summary["prefill_instances"] and prefill[0].gpu == summary["prefill_gpu"]
    assert f"tp{prefill[0].tp}pp{prefill[0].pp}" == summary["prefill_layout"]
    assert prefill[0].prefill_batch == summary["prefill_batch"]
    assert sum(i.count for i in decode) == summary["decode_instances"]
    assert {i.gpu for i in decode} == {summary["decode_gpu"]}


def test_the_aggregated_model_of_the_same_plan_stays_aggregated(planned):
    _, plan = planned
    (code,) = [d for d in answer.from_plan(plan) if d.name == "code"]
    assert [i.role for i in code.instances] == ["agg"]


def test_the_pool_predicts_the_decode_capacity_and_no_median_ttft_for_a_percentile_limit(planned):
    _, plan = planned
    dep = _chat(plan)
    decode_rows = [r for r in plan["rows"] if r["model"] == "chat" and r["role"] == "decode"]
    assert dep.predicted["throughput_tok_s"] == pytest.approx(sum(r["capacity_tok_s"] for r in decode_rows))
    means = [1.0 / r["tok_s_per_request"] for r in decode_rows]  # the rows' tpot_ms is their p90 TPOT
    assert min(means) <= dep.predicted["time_per_token_s"] <= max(means)
    assert dep.predicted["time_per_token_s"] < min(r["tpot_ms"] / 1e3 for r in decode_rows)
    assert "ttft_s" not in dep.predicted  # the plan's TTFT is its 90th percentile, not a median


def test_mixed_decode_kinds_get_distinct_host_names_in_every_router(planned):
    _, plan = planned
    dep = _chat(plan)
    servers = sum(i.count for i in dep.instances)
    for engine in ("vllm", "sglang"):
        router = engines.commands(engine, dep)[-1]
        urls = [v[0] if isinstance(v, tuple) else v for k, v in router.settings if k in ("--prefill", "--decode")]
        assert len(set(urls)) == len(urls) == servers
    trt = engines.commands("trtllm", dep)
    config = yaml.safe_load(next(iter(trt[-1].files.values())))
    urls = config["context_servers"]["urls"] + config["generation_servers"]["urls"]
    assert len(set(urls)) == servers
    assert config["generation_servers"]["num_instances"] == sum(i.count for i in dep.instances if i.role == "decode")


def test_every_pooled_command_has_flags_of_its_table_and_parses_with_the_engines_parser(planned):
    _, plan = planned
    dep = _chat(plan)
    parsed = 0
    for engine in ENGINES:
        cmds = engines.commands(engine, dep)
        for table, used in recipe.settings_used(cmds, engine).items():
            assert flags.problems(table, used) == [], (engine, table)
        for c in cmds:
            if c.role in ("prefill", "decode") and engine != "trtllm":
                assert "--kv-transfer-config" in dict(c.settings) or "--disaggregation-mode" in dict(c.settings)
            if engine_parsers.program_of(c.argv()) is not None:
                engine_parsers.parse(c.argv())
                parsed += 1
    assert parsed >= 10


def test_every_pooled_manifest_validates_and_is_named_apart(planned):
    _, plan = planned
    dep = _chat(plan)
    for engine in ENGINES:
        docs = manifests.manifests(engine, f"chat-{engine}", engines.commands(engine, dep))
        names = [d["metadata"]["name"] for d in docs]
        assert len(set(names)) == len(names)
        for doc in yaml.safe_load_all(manifests.to_yaml(docs)):
            schema = {**SCHEMAS, "$ref": f"#/$defs/{doc['kind']}"}
            jsonschema.Draft202012Validator(schema).validate(doc)
    (graph,) = manifests.manifests("dynamo", "chat", engines.commands("dynamo", dep))
    workers = [s for s in graph["spec"]["services"].values() if s["componentType"] == "worker"]
    assert sum(s["replicas"] for s in workers) == sum(i.count for i in dep.instances)


def test_each_pooled_copy_is_pinned_to_the_node_of_its_placement(planned):
    _, plan = planned
    dep = _chat(plan)
    placed = {
        (p["role"], p["tp"]): p["stages"][0][0].split(".")[0] for p in plan["placement"][0] if p["model"] == "chat"
    }
    docs = manifests.manifests("vllm", "chat", engines.commands("vllm", dep))
    pinned = {
        d["spec"]["template"]["spec"]["nodeSelector"]["kubernetes.io/hostname"]
        for d in docs
        if d["metadata"]["labels"]["app.kubernetes.io/component"] != "router"
    }
    assert pinned == set(placed.values())


def test_plan_emit_writes_the_xpyd_recipe_and_launch_of_the_plan_json_writes_the_same(planned, tmp_path):
    root, _ = planned
    emitted = root / "emit"
    assert {f"chat.{e}.serve.sh" for e in ENGINES} <= {p.name for p in emitted.iterdir()}
    assert not (emitted / "code.dynamo.serve.sh").exists()
    serve = (emitted / "chat.vllm.serve.sh").read_text()
    assert "vllm-router" in serve and serve.count("NixlConnector") == len(_chat(planned[1]).instances)
    args = ["launch", str(root / "plan.json"), "--isl", "2000", "--osl", "400", "--out", str(tmp_path / "r")]
    with contextlib.redirect_stderr(io.StringIO()):
        assert main(args) == 0
    for engine in ENGINES:
        name = f"chat.{engine}.serve.sh"
        body = [x for x in (tmp_path / "r" / name).read_text().splitlines() if not x.startswith("#")]
        assert body == [x for x in (emitted / name).read_text().splitlines() if not x.startswith("#")]


def test_a_model_on_two_aggregated_layouts_gets_two_recipes_apart():
    plan = json.loads((Path(__file__).parent / "data" / "deploy_plan.json").read_text())
    row = plan["rows"][0]
    plan = {**plan, "rows": [row, {**row, "tp": row["tp"] * 2, "n_gpus": row["n_gpus"] * 2}]}
    deps = answer.from_plan(plan, {"chat": (2000, 400)})
    assert [d.name for d in deps] == [f"{row['model']}-1", f"{row['model']}-2"]
    built = recipe.build(deps, ("vllm",), "test")
    scripts = [n for n in built.files if n.endswith("vllm.serve.sh")]
    assert len(scripts) == 2
    tps = {shlex.split(built.files[n].splitlines()[4])[4] for n in scripts}
    assert tps == {str(row["tp"]), str(row["tp"] * 2)}
