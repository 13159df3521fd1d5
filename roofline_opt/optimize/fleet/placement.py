"""From the MIP's stage counts per domain to GPU ids per instance, and an independent check against the graph."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import networkx as nx

from roofline_opt.optimize.fleet.candidates import Candidate
from roofline_opt.optimize.fleet.problem import Domain, Pool
from roofline_opt.topology import gpu_ids, scaleup_domains


@dataclass(frozen=True)
class PlacedInstance:
    """One replica: its model, candidate index and, per pipeline stage, the GPU ids of its TP group."""

    name: str
    model: str
    candidate: int
    gpu: str
    tp: int
    pp: int
    stages: tuple[tuple[str, ...], ...]
    role: str = "agg"
    """agg, or prefill / decode for an instance of a disaggregated model's pools."""

    def to_dict(self) -> dict:
        out = {
            "instance": self.name,
            "model": self.model,
            "gpu": self.gpu,
            "tp": self.tp,
            "pp": self.pp,
            "stages": [list(s) for s in self.stages],
        }
        return out if self.role == "agg" else {**out, "role": self.role}


def _placed(model_names: Sequence[str], k: int, c: Candidate, serial: dict[str, int], groups) -> PlacedInstance:
    """The next replica of ``c``: ``chat#2``, or ``chat:prefill#1`` / ``chat:decode#3`` in a disaggregated model."""
    name = model_names[c.model]
    label = name if c.role == "agg" else f"{name}:{c.role}"
    serial[label] = serial.get(label, 0) + 1
    return PlacedInstance(f"{label}#{serial[label]}", name, k, c.gpu, c.tp, c.pp, tuple(groups), c.role)


def pool_domains(cluster: nx.Graph) -> tuple[Domain, ...]:
    """The graph's scale-up domains per GPU type (largest first, then graph order)."""
    types = dict.fromkeys(cluster.nodes[g]["gpu"] for g in gpu_ids(cluster))
    return tuple(Domain(t, len(ids), tuple(ids)) for t in types for ids in scaleup_domains(cluster, t))


def decompose(
    pool: Pool,
    cands: Sequence[Candidate],
    model_names: Sequence[str],
    replicas: Mapping[int, int],
    stages: Mapping[tuple[int, int], int],
) -> list[PlacedInstance]:
    """GPU ids for every replica from per-(candidate, domain) stage counts (see formulation: the split is exact).

    Each replica takes its stages from the ``pp`` domains with the most stages of its candidate left; within a
    domain GPUs are handed out in graph order.
    """
    free = {d: list(dom.gpu_ids) for d, dom in enumerate(pool.domains)}
    left = dict(stages)
    placed = []
    serial: dict[str, int] = {}
    for k in sorted(replicas, key=lambda k: (-cands[k].tp, -cands[k].pp, k)):
        c = cands[k]
        for _ in range(replicas[k]):
            options = sorted((d for (kk, d), n in left.items() if kk == k and n > 0), key=lambda d: (-left[k, d], d))
            chosen = sorted(options[: c.pp])
            if len(chosen) < c.pp:
                msg = f"stage counts of candidate {k} do not split into instances"
                raise AssertionError(msg)
            groups = []
            for d in chosen:
                left[k, d] -= 1
                groups.append(tuple(free[d][: c.tp]))
                del free[d][: c.tp]
            placed.append(_placed(model_names, k, c, serial, groups))
    return placed


def placement_problems(cluster: nx.Graph, instances: Sequence[PlacedInstance]) -> list[str]:
    """Everything wrong with a placement on the graph (empty when valid): GPU ids and types, group sizes, TP groups
    inside one scale-up domain, pipeline stages on distinct domains, no GPU used twice."""
    domain_of = {}
    for name in dict.fromkeys(cluster.nodes[g]["gpu"] for g in gpu_ids(cluster)):
        for i, ids in enumerate(scaleup_domains(cluster, name)):
            domain_of.update({g: (name, i) for g in ids})
    problems: list[str] = []
    used: set[str] = set()
    for inst in instances:
        if len(inst.stages) != inst.pp:
            problems.append(f"{inst.name}: {len(inst.stages)} stages, expected {inst.pp}")
        homes = []
        for group in inst.stages:
            bad = [g for g in group if g not in domain_of or cluster.nodes[g]["gpu"] != inst.gpu]
            if bad or len(group) != inst.tp or len(set(group)) != len(group):
                problems.append(f"{inst.name}: TP group {list(group)} is not {inst.tp} distinct {inst.gpu} GPUs")
                continue
            if len({domain_of[g] for g in group}) != 1:
                problems.append(f"{inst.name}: TP group {list(group)} spans scale-up domains")
            homes.append(domain_of[group[0]])
            clash = used.intersection(group)
            if clash:
                problems.append(f"{inst.name}: GPUs {sorted(clash)} used twice")
            used.update(group)
        if len(set(homes)) != len(homes):
            problems.append(f"{inst.name}: pipeline stages share a scale-up domain")
    return problems


def kv_path_problems(cluster: nx.Graph, instances: Sequence[PlacedInstance]) -> list[str]:
    """Prefill instances with no path in the graph to any decode instance of their model (the KV transfer's)."""
    component = {n: i for i, comp in enumerate(nx.connected_components(cluster)) for n in comp}
    reach: dict[str, set[int]] = {}
    for inst in instances:
        if inst.role == "decode":
            reach.setdefault(inst.model, set()).update(component[g] for s in inst.stages for g in s)
    return [
        f"{inst.name}: no path to a decode instance of {inst.model} for the KV transfer"
        for inst in instances
        if inst.role == "prefill" and component[inst.stages[0][0]] not in reach.get(inst.model, set())
    ]


def greedy_place(
    pool: Pool, cands: Sequence[Candidate], model_names: Sequence[str], replicas: Mapping[int, int]
) -> list[PlacedInstance] | None:
    """GPU ids for the replicas by best fit (largest groups first, each stage into the fullest domain that still
    holds it, stages on distinct domains), or None when this greedy rule fails (an exact model then decides)."""
    free = {d: list(dom.gpu_ids) for d, dom in enumerate(pool.domains)}
    placed = []
    serial: dict[str, int] = {}
    for k in sorted(replicas, key=lambda k: (-cands[k].tp, -cands[k].pp, k)):
        c = cands[k]
        for _ in range(replicas[k]):
            fitting = [d for d, dom in enumerate(pool.domains) if dom.gpu == c.gpu and len(free[d]) >= c.tp]
            if len(fitting) < c.pp:
                return None
            chosen = sorted(sorted(fitting, key=lambda d: (len(free[d]), d))[: c.pp])
            groups = []
            for d in chosen:
                groups.append(tuple(free[d][: c.tp]))
                del free[d][: c.tp]
            placed.append(_placed(model_names, k, c, serial, groups))
    return placed
