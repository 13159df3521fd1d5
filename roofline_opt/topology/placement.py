"""Placement of instances (pipeline stages of tensor-parallel groups) onto the GPUs of a cluster graph."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import networkx as nx

from roofline_opt import checks
from roofline_opt.errors import Infeasible
from roofline_opt.topology.derive import _require_type, scaleup_domains


@dataclass(frozen=True)
class Placement:
    """GPU node ids of placed instances: ``replicas[r][s]`` is the TP group of pipeline stage ``s`` of replica ``r``."""

    gpu_type: str
    tp: int
    pp: int
    replicas: tuple[tuple[tuple[str, ...], ...], ...]

    def to_dict(self) -> dict[str, Any]:
        """Plain lists and numbers, ready for ``json.dumps`` and a launcher."""
        return {
            "gpu_type": self.gpu_type,
            "tp": self.tp,
            "pp": self.pp,
            "replicas": [[list(group) for group in stages] for stages in self.replicas],
        }


def _tp_groups(domains: tuple[tuple[str, ...], ...], tp: int) -> list[tuple[str, ...]]:
    """Disjoint TP groups of ``tp`` GPUs from scale-up ``domains`` (largest first), packed greedily as the module
    docstring describes."""
    if not domains:
        return []
    if tp <= len(domains[0]):
        return [d[i : i + tp] for d in domains for i in range(0, len(d) - tp + 1, tp)]
    groups: list[tuple[str, ...]] = []
    pending: list[str] = []
    for d in domains:
        pending += d
        if len(pending) >= tp:
            groups.append(tuple(pending[:tp]))
            pending = []
    return groups


def instance_limit(cluster: nx.Graph, gpu_type: str) -> Callable[[int, int], int]:
    """``max_instances`` for one GPU type as a function of (tp, pp), the domains found once (large clusters)."""
    domains = scaleup_domains(cluster, gpu_type)

    @functools.cache
    def limit(tp: int, pp: int) -> int:
        return len(_tp_groups(domains, checks.positive_int("tp", tp))) // checks.positive_int("pp", pp)

    return limit


def max_instances(cluster: nx.Graph, gpu_type: str, tp: int, pp: int) -> int:
    """How many disjoint instances of ``tp`` x ``pp`` GPUs of ``gpu_type`` the cluster holds at once (0 if none)."""
    return instance_limit(cluster, gpu_type)(tp, pp)


def place(cluster: nx.Graph, gpu_type: str, tp: int, pp: int, replicas: int) -> Placement:
    """Concrete GPU ids for ``replicas`` instances; Infeasible (reason "topology") if the cluster cannot hold them."""
    tp = checks.positive_int("tp", tp)
    pp = checks.positive_int("pp", pp)
    replicas = checks.positive_int("replicas", replicas)
    _require_type(cluster, gpu_type)
    groups = _tp_groups(scaleup_domains(cluster, gpu_type), tp)
    available = len(groups) // pp
    if replicas > available:
        sizes = ", ".join(str(len(d)) for d in scaleup_domains(cluster, gpu_type))
        msg = (
            f"{replicas} instance(s) of TP={tp} x PP={pp} on {gpu_type} do not fit: the cluster holds {available} "
            f"(scale-up domains of {sizes} GPUs)"
        )
        raise Infeasible(msg, reason="topology")
    stages = tuple(tuple(groups[r * pp : (r + 1) * pp]) for r in range(replicas))
    return Placement(gpu_type, tp, pp, stages)
