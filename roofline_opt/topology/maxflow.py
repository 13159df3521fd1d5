"""Max flow between two node sets of an undirected capacitated graph (shortest augmenting paths, lazy residuals).

networkx's max-flow functions build a residual copy of the whole graph on every call; the flows a cluster needs
(one domain's GPUs to every other GPU) are found by a few short augmenting paths near the source, so searching the
residual graph lazily from the source is much faster on large clusters and gives the same value.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Mapping

RELATIVE_TOLERANCE = 1e-12
"""Residual capacity below this fraction of the largest capacity counts as saturated (float round-off)."""


def max_flow_value(adj: Mapping[str, Mapping[str, float]], sources: Collection[str], sinks: Collection[str]) -> float:
    """Largest flow from ``sources`` to ``sinks`` (disjoint node sets) where ``adj[u][v]`` is the capacity of edge
    u-v in each direction (undirected, symmetric). Edmonds-Karp: every augmenting path is a shortest one.
    """
    source_set, sink_set = set(sources), set(sinks)
    if not source_set or not sink_set:
        return 0.0
    largest = max((c for nbrs in adj.values() for c in nbrs.values()), default=0.0)
    tiny = largest * RELATIVE_TOLERANCE
    flow: dict[tuple[str, str], float] = {}
    total = 0.0
    while True:
        parent: dict[str, str | None] = dict.fromkeys(source_set)
        queue = deque(source_set)
        end = None
        while queue and end is None:
            u = queue.popleft()
            for v, capacity in adj[u].items():
                if v not in parent and capacity - flow.get((u, v), 0.0) > tiny:
                    parent[v] = u
                    if v in sink_set:
                        end = v
                        break
                    queue.append(v)
        if end is None:
            return total
        path: list[tuple[str, str]] = []
        v = end
        while (previous := parent[v]) is not None:
            path.append((previous, v))
            v = previous
        push = min(adj[u][v] - flow.get((u, v), 0.0) for u, v in path)
        for u, v in path:
            flow[u, v] = flow.get((u, v), 0.0) + push
            flow[v, u] = flow.get((v, u), 0.0) - push
        total += push
