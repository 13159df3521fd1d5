"""Kubernetes manifests of a recipe: a Deployment per instance kind that fits one node, a LeaderWorkerSet for one
that spans nodes, a DynamoGraphDeployment for a disaggregated Dynamo recipe.

Each pod asks for its GPUs as ``nvidia.com/gpu`` (the NVIDIA device plugin's resource) and selects nodes by the
accelerator's ``nvidia.com/gpu.product`` label (set by GPU feature discovery). For a fleet plan on a cluster graph
every copy is pinned to the servers of its placement by ``kubernetes.io/hostname`` (the graph's server names:
relabel if your nodes are named otherwise). Manifests are plain dicts; ``to_yaml`` writes them as one document each.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from roofline_opt.deploy.engines import SERVE_PORT, Command, gpus_per_node

GPU_PRODUCT = {
    "h100-sxm": "NVIDIA-H100-80GB-HBM3",
    "h200": "NVIDIA-H200",
    "h800": "NVIDIA-H800",
    "a100-80gb": "NVIDIA-A100-SXM4-80GB",
    "b200": "NVIDIA-B200",
    "gb200": "NVIDIA-GB200",
    "gh200": "NVIDIA-GH200-480GB",
    "l40s": "NVIDIA-L40S",
    "v100": "Tesla-V100-SXM2-32GB",
}
"""``nvidia.com/gpu.product`` label values per catalog accelerator (GPU feature discovery names); an accelerator
not listed is selected by its catalog name, to be relabelled."""
PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_RESOURCE = "nvidia.com/gpu"
IMAGES = {
    "vllm": "vllm/vllm-openai:v0.33.0",
    "sglang": "lmsysorg/sglang:latest",
    "trtllm": "nvcr.io/nvidia/tensorrt-llm/release:latest",
    "dynamo": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:latest",
}
"""Container images; pin the tag of the version the flag table names before deploying."""
SHM_GIB = 16
"""Shared memory (/dev/shm) per pod in GiB: NCCL and the engines' worker processes exchange tensors through it."""


def _name(text: str) -> str:
    """A DNS-1123 name (lower case, digits and dashes, at most 63 characters)."""
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:63].strip("-") or "recipe"


def _node_of(gpu_id: str) -> str:
    return gpu_id.rsplit(".", 1)[0] if "." in gpu_id else gpu_id


def _container(engine: str, cmd: Command, script: str, gpus: int) -> dict[str, Any]:
    port = SERVE_PORT.get(engine, 8000)
    return {
        "name": _name(cmd.label),
        "image": IMAGES[engine],
        "command": ["/bin/sh", "-c"],
        "args": [script],
        "ports": [{"containerPort": port, "name": "http"}],
        "resources": {"limits": {GPU_RESOURCE: str(gpus)}, "requests": {GPU_RESOURCE: str(gpus)}},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }


def _pod(engine: str, cmd: Command, script: str, gpus: int, nodes: Sequence[str] = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeSelector": {PRODUCT_LABEL: GPU_PRODUCT.get(cmd.gpu, cmd.gpu)},
        "containers": [_container(engine, cmd, script, gpus)],
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{SHM_GIB}Gi"}}],
    }
    if len(nodes) == 1:
        spec["nodeSelector"]["kubernetes.io/hostname"] = nodes[0]
    elif nodes:
        term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": list(nodes)}]}
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        }
    return spec


def _labels(app: str, role: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": app, "app.kubernetes.io/component": role}


def deployment(engine: str, app: str, cmd: Command, replicas: int, nodes: Sequence[str] = ()) -> dict[str, Any]:
    """An apps/v1 Deployment of ``replicas`` single-node servers."""
    labels = _labels(app, cmd.label)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": _name(f"{app}-{cmd.label}"), "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": _pod(engine, cmd, cmd.shell(), cmd.gpus, nodes)},
        },
    }


def multinode_scripts(engine: str, cmd: Command, n_nodes: int) -> tuple[str, str]:
    """(leader, worker) shell of an instance spanning ``n_nodes`` nodes: vLLM over a Ray cluster the leader heads,
    SGLang with every node running the server with its node rank (LeaderWorkerSet's environment variables)."""
    if engine in ("vllm", "dynamo"):
        leader = f"ray start --head --port=6379 && {cmd.shell()}"
        return leader, "ray start --address=$(LWS_LEADER_ADDRESS):6379 --block"
    extra = f" --nnodes {n_nodes} --dist-init-addr $(LWS_LEADER_ADDRESS):20000 --node-rank $(LWS_WORKER_INDEX)"
    return cmd.shell() + extra, cmd.shell() + extra


def leader_worker_set(engine: str, app: str, cmd: Command, replicas: int, nodes: Sequence[str] = ()) -> dict[str, Any]:
    """A leaderworkerset.x-k8s.io/v1 LeaderWorkerSet: ``replicas`` groups of one leader and (size - 1) workers, one
    pod per node with that node's GPUs."""
    per_node = gpus_per_node(cmd.gpu)
    size = -(-cmd.gpus // per_node)
    leader, worker = multinode_scripts(engine, cmd, size)
    labels = _labels(app, cmd.label)
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": _name(f"{app}-{cmd.label}"), "labels": labels},
        "spec": {
            "replicas": replicas,
            "leaderWorkerTemplate": {
                "size": size,
                "leaderTemplate": {"metadata": {"labels": labels}, "spec": _pod(engine, cmd, leader, per_node, nodes)},
                "workerTemplate": {"metadata": {"labels": labels}, "spec": _pod(engine, cmd, worker, per_node, nodes)},
            },
        },
    }


ROUTER_INSTALL = {"vllm": "pip install vllm-router==0.1.17 && "}
"""What a router pod runs before the router where the engine's image lacks it (vLLM's image has no vllm-router)."""


def router_deployment(engine: str, app: str, cmd: Command) -> dict[str, Any]:
    """An apps/v1 Deployment of the disaggregated router: one pod, no GPUs, in the engine's image."""
    labels = _labels(app, cmd.label)
    container = {
        "name": cmd.role,
        "image": IMAGES[engine],
        "command": ["/bin/sh", "-c"],
        "args": [ROUTER_INSTALL.get(engine, "") + cmd.shell()],
        "ports": [{"containerPort": SERVE_PORT.get(engine, 8000), "name": "http"}],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": _name(f"{app}-{cmd.label}"), "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }


def instance_manifests(engine: str, app: str, cmd: Command) -> list[dict[str, Any]]:
    """The manifests of one command kind: one per copy when its placement pins copies to servers; none for a
    TensorRT-LLM instance spanning nodes (TensorRT-LLM documents its launch under Slurm or mpirun, not on
    Kubernetes; the serve script holds its srun command)."""
    if cmd.gpus == 0:
        return [router_deployment(engine, app, cmd)] if cmd.role == "router" else []
    spans = cmd.gpus > gpus_per_node(cmd.gpu)
    if spans and engine == "trtllm":
        return []
    build = leader_worker_set if spans else deployment
    placement = cmd.instance.placement if cmd.instance is not None else ()
    if not placement:
        return [build(engine, app, cmd, cmd.count)]
    out = []
    for k, stages in enumerate(placement):
        nodes = sorted({_node_of(g) for stage in stages for g in stage})
        manifest = build(engine, f"{app}-{k + 1}", cmd, 1, nodes)
        out.append(manifest)
    return out


def dynamo_graph(app: str, cmds: Sequence[Command]) -> dict[str, Any]:
    """A nvidia.com/v1alpha1 DynamoGraphDeployment: the frontend and one service per worker kind (replicas, GPUs per
    replica, nodes per replica, the worker's command)."""
    services: dict[str, Any] = {}
    for cmd in cmds:
        if cmd.role == "frontend":
            services["Frontend"] = {
                "componentType": "frontend",
                "replicas": 1,
                "extraPodSpec": {
                    "mainContainer": {"image": IMAGES["dynamo"], "command": ["/bin/sh", "-c"], "args": [cmd.shell()]}
                },
            }
            continue
        per_node = gpus_per_node(cmd.gpu)
        nodes = -(-cmd.gpus // per_node)
        service: dict[str, Any] = {
            "componentType": "worker",
            "subComponentType": cmd.role,
            "replicas": cmd.count,
            "resources": {"limits": {"gpu": str(min(cmd.gpus, per_node))}},
            "extraPodSpec": {
                "nodeSelector": {PRODUCT_LABEL: GPU_PRODUCT.get(cmd.gpu, cmd.gpu)},
                "mainContainer": {"image": IMAGES["dynamo"], "command": ["/bin/sh", "-c"], "args": [cmd.shell()]},
            },
        }
        if nodes > 1:
            service["multinode"] = {"nodeCount": nodes}
        kind = "".join(part.capitalize() for part in cmd.label.split("-"))
        services[f"Vllm{kind}Worker"] = service
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": _name(app)},
        "spec": {"backendFramework": "vllm", "services": services},
    }


def manifests(engine: str, app: str, cmds: Sequence[Command]) -> list[dict[str, Any]]:
    """Every manifest of a recipe."""
    if engine == "dynamo":
        return [dynamo_graph(app, cmds)]
    return [m for cmd in cmds for m in instance_manifests(engine, app, cmd)]


def to_yaml(docs: Sequence[Mapping[str, Any]]) -> str:
    """The manifests as YAML documents, without anchors (each manifest reads on its own)."""
    import yaml

    class _Plain(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True

    if not docs:
        return "# no manifest: every instance of this recipe is launched by its serve script (see its notes)\n"
    return "".join("---\n" + yaml.dump(dict(d), Dumper=_Plain, sort_keys=False) for d in docs)
