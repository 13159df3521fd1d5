"""An irregular fat tree of switches as GraphML, for timing `cluster show` and `fastest --cluster` on it (issue 27).

Three levels of switches with uneven fan-out (core -> aggregation -> leaf, each switch a random 2..2k children), 8-GPU
servers (an NVSwitch joining the GPUs, a host per server, one InfiniBand link per GPU to its leaf) at the leaves:

    python benchmarks/irregular_tree.py --servers 500 --out /tmp/tree.graphml   # 4,000 GPUs
    time roofline-opt cluster show /tmp/tree.graphml
"""

from __future__ import annotations

import argparse
import random

import networkx as nx


def build(servers: int, gpus_per_server: int = 8, seed: int = 0, spread: int = 12) -> nx.Graph:
    rng = random.Random(seed)
    g = nx.Graph(name=f"irregular-tree-{servers}x{gpus_per_server}")
    leaves: list[str] = []
    core = [f"core{i}" for i in range(4)]
    for c in core:
        g.add_node(c, kind="switch")
    n_agg = 0
    while len(leaves) * spread < servers * 2:
        agg = f"agg{n_agg}"
        n_agg += 1
        g.add_node(agg, kind="switch")
        for c in rng.sample(core, rng.randint(1, len(core))):  # uneven uplinks
            g.add_edge(agg, c, kind="infiniband", bandwidth_gb_s=rng.choice([200.0, 400.0]), latency_us=1.0)
        for _ in range(rng.randint(2, spread)):
            leaf = f"leaf{len(leaves)}"
            leaves.append(leaf)
            g.add_node(leaf, kind="switch")
            g.add_edge(leaf, agg, kind="infiniband", bandwidth_gb_s=rng.choice([400.0, 800.0]), latency_us=1.0)
    for s in range(servers):
        leaf = rng.choice(leaves)
        switch, host = f"s{s}.nvswitch", f"s{s}.host"
        g.add_node(switch, kind="switch")
        g.add_node(host, kind="host")
        for k in range(gpus_per_server):
            gpu = f"s{s}.gpu{k}"
            g.add_node(gpu, kind="gpu", gpu="h100-sxm")
            g.add_edge(gpu, switch, kind="nvswitch", bandwidth_gb_s=450.0, latency_us=0.0)
            g.add_edge(gpu, host, kind="pcie", bandwidth_gb_s=64.0, latency_us=0.0)
            g.add_edge(gpu, leaf, kind="infiniband", bandwidth_gb_s=rng.choice([25.0, 50.0]), latency_us=1.0)
    return g


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=500)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    g = build(args.servers)
    nx.write_graphml(g, args.out)
    gpus = sum(1 for _, k in g.nodes(data="kind") if k == "gpu")
    print(f"wrote {args.out}: {g.number_of_nodes()} nodes, {g.number_of_edges()} edges, {gpus} GPUs")


if __name__ == "__main__":
    main()
