"""A recipe folder: per engine the serve script, its config files, the Kubernetes manifests, the benchmark client
and the predicted figures; ``recipe.json`` lists the decisions, every emitted flag with its source, and the engines
that cannot express the answer with the reason.

Files are flat (``vllm.serve.sh``, ``vllm.k8s.yaml``, ``vllm.bench.sh``, ``vllm.predicted.json``, ...; a fleet plan
prefixes each with its model's name) and appear together or not at all (``files.output_folder``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from roofline_opt.deploy import bench, engines, flags, manifests
from roofline_opt.deploy.answer import Deployment


@dataclass
class Recipes:
    """The files of a recipe folder and the engines left out, each with its one-line reason."""

    files: dict[str, str] = field(default_factory=dict)
    unsupported: list[str] = field(default_factory=list)


def recipe_id(dep: Deployment, engine: str) -> str:
    """A short stable id of (deployment, engine): the benchmark's result carries it back to the recipe."""
    fields = asdict(dep)
    for inst in fields["instances"]:  # ids of recipes written before kinds existed stay the same
        if not inst["kind"]:
            del inst["kind"]
    text = json.dumps([fields, engine], sort_keys=True, default=str)
    return f"{engine}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def _script(engine: str, dep: Deployment, cmds: Sequence[engines.Command]) -> str:
    lines = [
        "#!/bin/sh",
        f"# {engine} ({flags.TABLES[engine].version}) recipe for {dep.name}: {_summary(dep)}",
        "# one command per server kind; run `count` copies of each (the Kubernetes manifests do).",
        "",
    ]
    for c in cmds:
        lines.append(f"# {c.role}: {c.count} x {c.gpus} x {c.gpu}" if c.gpus else f"# {c.role}")
        lines += [c.shell(), ""]
    for note in notes(engine, dep):
        lines.append(f"# note: {note}")
    return "\n".join(lines).rstrip() + "\n"


def _summary(dep: Deployment) -> str:
    parts = [
        f"{i.count} x {i.role} {i.gpu} tp{i.tp}pp{i.pp}ep{i.ep}{' dp-attention' if i.dp_attention else ''} "
        f"batch {i.prefill_batch if i.role == 'prefill' else i.batch}"
        for i in dep.instances
    ]
    return "; ".join(parts) + f"; {dep.weight_bits}-bit weights, {dep.kv_bits}-bit KV"


def notes(engine: str, dep: Deployment) -> list[str]:
    """What a user must know that no flag says (checkpoints, routing, derived benchmark lengths)."""
    out = []
    if dep.weight_bits == 4 or (dep.weight_bits == 8 and engine == "trtllm"):
        out.append(
            f"{dep.weight_bits}-bit weights: serve a checkpoint quantised to {dep.weight_bits} bits (the engine "
            "reads its quantisation config); replace the model id with it"
        )
    if dep.disaggregated and engine != "dynamo":
        out.append(
            "the router names each server as ROLE-K (prefill-0, decode-0, ...): set them to the servers' addresses "
            "(one pod per copy) before starting it; the benchmark sends its requests to the router"
        )
    decode_kinds = [i.label for i in dep.instances if i.role == "decode"]
    if len(decode_kinds) > 1:
        policy = {
            "vllm": "the router balances by load (power_of_two)",
            "sglang": "the router balances by load (power_of_two)",
            "trtllm": "trtllm-serve disaggregated spreads requests over the generation servers",
            "dynamo": "the frontend's round-robin spreads requests evenly",
        }[engine]
        out.append(
            f"the decode instances are of {len(decode_kinds)} kinds ({', '.join(decode_kinds)}) of unequal "
            f"capacity, as the plan sized them; {policy}, while the plan gives each kind its share of requests "
            "in proportion to its capacity"
        )
    if engine == "trtllm" and any(i.n_gpus > engines.gpus_per_node(i.gpu) for i in dep.instances):
        out.append(
            "an instance spanning nodes runs under Slurm as TensorRT-LLM documents (srun, one rank per GPU, "
            "trtllm-llmapi-launch); k8s.yaml has no manifest for it (TensorRT-LLM documents no Kubernetes launcher; "
            "Dynamo's DynamoGraphDeployment with multinode is one)"
        )
    if not dep.lengths_stated:
        out.append(
            f"the answer states a decode context, not request lengths: the benchmark uses {dep.isl} in / "
            f"{dep.osl} out tokens, whose mean decode context is the answer's"
        )
    return out


def settings_used(cmds: Sequence[engines.Command], engine: str) -> dict[str, list[tuple[str, Any]]]:
    """Every (flag, value) the commands emit, per flag table they are checked against (the engine's, a router's)."""
    out: dict[str, list[tuple[str, Any]]] = {}
    for c in cmds:
        out.setdefault(c.table or engine, []).extend(c.settings)
    return out


def _sources(engine: str, used: Sequence[tuple[str, Any]]) -> dict[str, str]:
    table = flags.table(engine).flags
    names = {name for name, _ in used}
    for name, value in used:
        if isinstance(value, Mapping):
            names |= {f"{name}.{k}" for k in value}
    return {name: table[name].source for name in sorted(names) if name in table}


def engine_files(engine: str, dep: Deployment, prefix: str = "") -> dict[str, str]:
    """The files of one engine's recipe (raises engines.Unsupported with the reason)."""
    cmds = engines.commands(engine, dep, prefix)
    rid = recipe_id(dep, engine)
    out = {f"{prefix}{engine}.serve.sh": _script(engine, dep, cmds)}
    for c in cmds:
        out.update(c.files)
    out[f"{prefix}{engine}.k8s.yaml"] = manifests.to_yaml(manifests.manifests(engine, f"{dep.name}-{engine}", cmds))
    runs = bench.clients(engine, dep, rid, prefix)
    lines = [engines.Command("bench", program, tuple(settings), 1, 0).shell() for _, program, settings in runs]
    out[f"{prefix}{engine}.bench.sh"] = (
        f"#!/bin/sh\n# the answer's workload against the {engine} servers\n" + "\n".join(lines) + "\n"
    )
    predicted = bench.predicted(dep, engine, rid)
    predicted["flags"] = {}
    for table, used in settings_used(cmds, engine).items():
        named = _sources(table, used)
        predicted["flags"].update(named if table == engine else {f"{table} {k}": v for k, v in named.items()})
    for table, program, settings in runs:
        predicted["flags"].update({f"{' '.join(program)} {k}": v for k, v in _sources(table, settings).items()})
    predicted["version"] = flags.TABLES[engine].version
    out[f"{prefix}{engine}.predicted.json"] = json.dumps(predicted, indent=2) + "\n"
    return out


def build(deps: Sequence[Deployment], chosen: Sequence[str], source: str) -> Recipes:
    """Recipes of every deployment on every chosen engine; engines that cannot express one are listed with why."""
    result = Recipes()
    index: dict[str, Any] = {"source": source, "deployments": []}
    for dep in deps:
        prefix = f"{dep.name}." if len(deps) > 1 else ""
        entry: dict[str, Any] = {"name": dep.name, "summary": _summary(dep), "engines": {}}
        for engine in chosen:
            try:
                result.files.update(engine_files(engine, dep, prefix))
                entry["engines"][engine] = {
                    "recipe_id": recipe_id(dep, engine),
                    "version": flags.TABLES[engine].version,
                }
            except engines.Unsupported as exc:
                result.unsupported.append(f"{dep.name}: {exc}" if len(deps) > 1 else str(exc))
                entry["engines"][engine] = {"unsupported": str(exc)}
        index["deployments"].append(entry)
    result.files["recipe.json"] = json.dumps(index, indent=2) + "\n"
    return result


def write(folder: str, recipes: Recipes, field_name: str = "--emit") -> None:
    """Write the recipe files into ``folder`` together (all or nothing)."""
    from roofline_opt import files

    with files.output_folder(folder, field_name) as staging:
        for name, text in recipes.files.items():
            (staging / name).write_text(text, encoding="utf-8")
            if name.endswith(".sh"):
                (staging / name).chmod(0o755)
