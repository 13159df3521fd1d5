"""Verified symmetries of a cluster graph, so that equivalent domains and GPUs are derived once.

Every automorphism used here is checked edge by edge before it is used, so the orbits it yields are exact whatever
proposed it; a graph without symmetry simply gets one orbit per node (the exact per-domain computation). Two proposers:

- *Swaps.* A block is a scale-up component with the nodes private to it (a server's hosts). Two blocks whose
  bijection (found by colour refinement inside each block, external neighbours by their literal ids) preserves every
  node attribute, every internal edge and every edge to the rest of the graph can be exchanged: that transposition
  is an automorphism. This finds the servers of a pod (1,250 HGX servers: 8 GPU orbits, one domain orbit).
- *Individualisation.* For graphs that swaps leave with many orbits (a torus: one big domain), an automorphism
  mapping a GPU to a nearby one is built by individualising nodes in both copies (colouring by BFS distance from
  them, deterministic hashes) until every colour is unique, then matching colours. A 100 x 100 torus needs a few
  searches of a few BFS each.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Hashable, Iterable, Sequence

import networkx as nx
import numpy as np

from roofline_opt.topology.schema import BANDWIDTH, LATENCY

SEARCH_ABOVE_ORBITS = 16
"""Individualisation search runs when swaps leave more member orbits than this."""
SEARCH_TARGETS = 8
"""At most this many automorphisms are searched for (mapping the first member to its nearest look-alikes)."""
SEARCH_LEVELS = 12
"""Individualisation depth per search before giving up (a torus needs about 3)."""
SEARCH_TRIES = 4
"""Candidates tried per level before giving up."""
REFINE_CHECK_ROUNDS = 8
"""Colour refinement rounds between checks that the partition still splits."""

Adjacency = dict[str, dict[str, dict]]
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


def edge_colour(attrs: dict) -> tuple[str, float, float]:
    """What an automorphism must preserve on an edge: kind, bandwidth and latency."""
    return attrs["kind"], attrs[BANDWIDTH], attrs[LATENCY]


def node_colour(cluster: nx.Graph, node: str, members: Collection[str]) -> tuple[str, str, bool]:
    """What an automorphism must preserve on a node: kind, accelerator name and membership of the group."""
    attrs = cluster.nodes[node]
    return attrs["kind"], attrs.get("gpu", ""), node in members


class Orbits:
    """Union-find over node ids: nodes joined by a verified automorphism share an orbit."""

    def __init__(self, nodes: Iterable[str]) -> None:
        self._parent = {n: n for n in nodes}

    def find(self, node: str) -> str:
        parent = self._parent
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self._parent[max(ra, rb)] = min(ra, rb)

    def count(self, nodes: Iterable[str]) -> int:
        return len({self.find(n) for n in nodes})


def orbits(cluster: nx.Graph, members: Collection[str], components: Sequence[frozenset[str]]) -> Orbits:
    """Orbits of the automorphisms found by swaps of the blocks around ``components``, then by individualisation."""
    found = Orbits(cluster)
    colour = {n: node_colour(cluster, n, members) for n in cluster}
    adj: Adjacency = dict(cluster.adjacency())
    _add_swaps(adj, colour, [_block(adj, c) for c in components], found)
    if found.count(members) > SEARCH_ABOVE_ORBITS:
        _add_searched(cluster, colour, members, found)
    return found


# ------------------------------------------------------------------------------------------------------ swaps


def _block(adj: Adjacency, component: frozenset[str]) -> frozenset[str]:
    """The component plus the nodes outside it whose every neighbour lies in it (a server's hosts)."""
    private = {y for x in component for y in adj[x] if y not in component and all(z in component for z in adj[y])}
    return component | private


def _block_colours(adj: Adjacency, block: frozenset[str], colour: dict[str, Hashable]) -> dict[str, int]:
    """Colour refinement inside ``block``, seeded with node colours and the literal ids of outside neighbours."""
    col = {
        x: hash((colour[x], tuple(sorted((edge_colour(a), y) for y, a in adj[x].items() if y not in block))))
        for x in block
    }
    classes = len(set(col.values()))
    for _ in range(len(block)):
        new = {
            x: hash((col[x], tuple(sorted((edge_colour(a), col[y]) for y, a in adj[x].items() if y in block))))
            for x in block
        }
        if len(set(new.values())) == classes:
            break
        col, classes = new, len(set(new.values()))
    return col


def _is_swap(adj: Adjacency, colour: dict, phi: dict[str, str], other: frozenset[str]) -> bool:
    """Whether exchanging ``phi``'s domain with its image ``other`` (all else fixed) is an automorphism."""
    for x, fx in phi.items():
        if colour[x] != colour[fx] or len(adj[x]) != len(adj[fx]):
            return False
        image_edges = adj[fx]
        for y, attrs in adj[x].items():
            if y in other:
                return False
            fy = phi.get(y, y)
            if fy not in image_edges or edge_colour(image_edges[fy]) != edge_colour(attrs):
                return False
    return True


def _add_swaps(adj: Adjacency, colour: dict, blocks: Sequence[frozenset[str]], found: Orbits) -> None:
    """Join blocks that can be exchanged with the first block of the same refined signature."""
    sizes = Counter((len(b), sum(len(adj[x]) for x in b)) for b in blocks)
    first: dict[tuple, tuple[frozenset[str], dict[int, str]]] = {}
    for block in blocks:
        if sizes[len(block), sum(len(adj[x]) for x in block)] == 1:
            continue  # no other block of its size: nothing to exchange it with
        col = _block_colours(adj, block, colour)
        if len(set(col.values())) != len(block):
            continue  # colours leave a choice: this block keeps its own orbits
        signature = tuple(sorted(col.values()))
        if signature not in first:
            first[signature] = (block, {c: x for x, c in col.items()})
            continue
        rep_block, rep_by_colour = first[signature]
        phi = {x: rep_by_colour[c] for x, c in col.items()}
        if _is_swap(adj, colour, phi, rep_block):
            for x, fx in phi.items():
                found.union(x, fx)


# ------------------------------------------------------------------------------------------ individualisation


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: a deterministic hash of uint64 values (wrapping arithmetic)."""
    x = (x ^ (x >> _S30)) * _M1
    x = (x ^ (x >> _S27)) * _M2
    return x ^ (x >> _S31)


class _Indexed:
    """The graph as integer arrays: CSR adjacency, node colours, and sorted coloured edge keys for verification."""

    def __init__(self, cluster: nx.Graph, colour: dict[str, Hashable]) -> None:
        self.nodes = list(cluster)
        index = {n: i for i, n in enumerate(self.nodes)}
        n = len(self.nodes)
        node_ids = {c: i for i, c in enumerate(sorted(set(colour.values()), key=repr))}
        self.base = _mix(np.array([node_ids[colour[v]] + 1 for v in self.nodes], dtype=np.uint64))
        edge_ids: dict[tuple, int] = {}
        src, dst, ecol = [], [], []
        for u, v, attrs in cluster.edges(data=True):
            c = edge_ids.setdefault(edge_colour(attrs), len(edge_ids))
            src += [index[u], index[v]]
            dst += [index[v], index[u]]
            ecol += [c, c]
        s, d, e = np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), np.array(ecol, dtype=np.int64)
        order = np.lexsort((d, s))
        self.indices = d[order]
        self.edge_salt = _mix(e[order].astype(np.uint64) + np.uint64(1))
        self.indptr = np.concatenate(([0], np.cumsum(np.bincount(s, minlength=n))))
        self.n, self.n_colours = n, max(len(edge_ids), 1)
        self.src, self.dst, self.ecol = s, d, e
        self.keys = np.sort(self._keys(np.arange(n)))

    def _keys(self, phi: np.ndarray) -> np.ndarray:
        return (phi[self.src] * self.n + phi[self.dst]) * self.n_colours + self.ecol

    def is_automorphism(self, phi: np.ndarray) -> bool:
        return bool(np.array_equal(self.base[phi], self.base) and np.array_equal(np.sort(self._keys(phi)), self.keys))

    def refine(self, colours: np.ndarray) -> np.ndarray:
        """Colour refinement (1-WL with edge colours) until the partition is stable, checked every few rounds."""
        starts = self.indptr[:-1]
        classes = len(np.unique(colours))
        while True:
            for _ in range(REFINE_CHECK_ROUNDS):
                spread = _mix(colours[self.indices] + self.edge_salt)
                colours = _mix(colours ^ np.add.reduceat(spread, starts))
            now = len(np.unique(colours))
            if now == classes:
                return colours
            classes = now

    def hops(self, source: int) -> np.ndarray:
        """BFS hop counts from ``source`` (vectorised level by level)."""
        dist = np.full(self.n, -1, dtype=np.int64)
        dist[source] = 0
        frontier, level = np.array([source]), 0
        while frontier.size:
            level += 1
            starts, ends = self.indptr[frontier], self.indptr[frontier + 1]
            counts = ends - starts
            offsets = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
            reached = np.unique(self.indices[offsets])
            frontier = reached[dist[reached] < 0]
            dist[frontier] = level
        return dist


def _individualise(g: _Indexed, colours: np.ndarray, node: int, level: int) -> np.ndarray:
    """Colours refined by the hop distance from ``node``, then by colour refinement (both invariant under
    automorphisms fixing ``node``)."""
    salt = np.uint64(0x9E3779B97F4A7C15 * (level + 1) % (1 << 64))
    return g.refine(_mix(colours ^ _mix(g.hops(node).astype(np.uint64) + salt)))


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.array_equal(np.sort(a), np.sort(b)))


def _automorphism(g: _Indexed, a: int, b: int) -> np.ndarray | None:
    """An automorphism mapping node ``a`` to ``b`` (as an index array), or None if the search finds none.

    Each level individualises the non-singleton node nearest to ``a`` (and in the other copy a node of the same
    colour nearest to ``b``): near nodes break the remaining symmetry fastest (a torus is discrete after 3 levels).
    """
    near_a, near_b = g.hops(a), g.hops(b)
    ca, cb = _individualise(g, g.base, a, 0), _individualise(g, g.base, b, 0)
    if not _same(ca, cb):
        return None
    for level in range(1, SEARCH_LEVELS + 1):
        values, inverse, counts = np.unique(ca, return_inverse=True, return_counts=True)
        if counts.max() == 1:
            phi = np.empty(g.n, dtype=np.int64)
            phi[np.argsort(ca)] = np.argsort(cb)
            return phi if g.is_automorphism(phi) else None
        open_nodes = np.flatnonzero(counts[inverse] > 1)
        x = int(open_nodes[np.lexsort((ca[open_nodes], near_a[open_nodes]))[0]])
        refined_a = _individualise(g, ca, x, level)
        candidates = np.flatnonzero(cb == ca[x])
        for y in candidates[np.argsort(near_b[candidates], kind="stable")][:SEARCH_TRIES]:
            refined_b = _individualise(g, cb, int(y), level)
            if _same(refined_a, refined_b):
                ca, cb = refined_a, refined_b
                break
        else:
            return None
    return None


def _add_searched(cluster: nx.Graph, colour: dict, members: Collection[str], found: Orbits) -> None:
    """Automorphisms from the first member to its nearest look-alikes outside its orbit, joined into ``found``."""
    g = _Indexed(cluster, colour)
    index = {n: i for i, n in enumerate(g.nodes)}
    start = next(n for n in cluster if n in members)
    a = index[start]
    dist = g.hops(a)
    candidates = [i for i in np.argsort(dist, kind="stable") if i != a and g.base[i] == g.base[a]]
    tried = 0
    for b in candidates:
        if tried == SEARCH_TARGETS:
            break
        if found.find(g.nodes[b]) == found.find(start):
            continue
        tried += 1
        phi = _automorphism(g, a, int(b))
        if phi is not None:
            for i in np.flatnonzero(phi != np.arange(g.n)):
                found.union(g.nodes[i], g.nodes[phi[i]])
