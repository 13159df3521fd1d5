"""Topology: cluster graphs (networkx) from files or builders, the figures they imply, and placements.

May import: networkx, PyYAML, ``roofline_opt.physics.specs`` and the base modules (errors, checks, files).
Modules: ``schema`` (kinds, server types, validation), ``builders``, ``files`` (read/write), ``derive`` (domains,
min cuts, effective accelerators), ``placement``.

Schema. A cluster is an undirected ``networkx.Graph`` whose node ids are strings.

- Node attribute ``kind``: ``gpu``, ``switch`` (NVSwitch, PCIe switch, InfiniBand/Ethernet leaf or spine) or ``host``
  (a CPU). GPU nodes also carry ``gpu``, an accelerator name of the catalog (``h100-sxm``, ``h200``, ``a100-80gb``,
  ``v100``, ``b200``, ``gb200``, ``mi300x``, ``mi325x``, ...).
- Edge attributes: ``bandwidth_gb_s`` (> 0, GB/s in each direction: a full-duplex link moves that much each way at
  once), ``latency_us`` (>= 0, microseconds a message pays on this hop *on top of* NCCL's tuning constants, which
  already charge the ordinary NVLink and NIC hops: 0 for standard fabrics) and ``kind`` (``nvlink``, ``nvswitch``,
  ``xgmi`` = AMD Infinity Fabric, ``c2c`` = NVLink-C2C to a Grace CPU, ``pcie``, ``infiniband``, ``ethernet``).
- A bundle of parallel links (18 NVLinks of an H100, the planes of an NVSwitch tray) is one edge carrying their summed
  bandwidth to one logical switch; parallel edges between two nodes are rejected.
- Graph attribute ``name`` (optional). Files: GraphML (``.graphml``), networkx node-link JSON (``.json``, edges under
  ``"edges"`` or the older ``"links"``) and the compact YAML below (``.yaml``/``.yml``, read only).

Compact YAML: servers of a known type (``NODE_TYPES``) on a scale-out fabric, or a torus of GPUs::

    name: pod-4x-hgx-h100
    nodes: 4                 # servers (racks for gb200-nvl72) of one type ...
    node_type: hgx-h100
    gpu: h100-sxm            # optional: override the type's GPU name
    nic_gb_s: 50             # optional: per-GPU NIC bandwidth per direction (the type's default otherwise)
    # ... or several kinds of server: groups: [{node_type: hgx-h100, nodes: 2}, {node_type: hgx-a100, nodes: 2}]
    fabric: rail-optimised   # rail-optimised (default for > 1 server) | single-switch | none (default for 1 server)
    spines: 2                # rail-optimised: spine switches joining the rail leaves (non-blocking uplinks)
    nic_kind: infiniband     # or ethernet
    latency_us: {infiniband: 1.0}   # optional: per-hop latency by edge kind (0 everywhere otherwise)

    torus: [4, 4]            # a 2-D (or n-D) torus of GPUs with direct links; excludes the keys above but name
    gpu: h100-sxm            # and latency_us
    link_gb_s: 100
    link_kind: nvlink

Rail-optimised: GPU i of every server has its own NIC link to leaf ``rail<i>``; each leaf has one uplink to every spine
carrying (sum of its NIC bandwidth) / spines, so the fabric is non-blocking. Within a server, NVSwitch types join
every GPU to one logical switch, mesh types (4-GPU HGX, AMD platforms) join every GPU pair directly, and the PCIe type
puts four GPUs behind each PCIe switch under one host CPU; NVLink servers also link each GPU to a host by PCIe (C2C on
GB200).

Derivation (what ``effective_gpu`` and ``collective_figures`` compute):

- A *scale-up domain* is a connected group of GPUs in the subgraph of scale-up links (edge kind nvlink, nvswitch or
  xgmi, whatever their bandwidth) through GPU and switch nodes only (never a host). PCIe and NICs never make a domain,
  so a PCIe-only server is eight domains of one GPU. For one GPU type a domain is the GPUs of that type in such a
  component.
- Bandwidth is a minimum cut, in GB/s per direction: with a single path it is the narrowest link on it, with parallel
  paths (a mesh, a torus) it counts them all. Intra-domain: the smallest cut between two GPUs of the same domain within
  the scale-up subgraph (H100 HGX: 450; MI300X mesh: 7 x 64 = 448). Inter-domain: for each domain, the max flow from its
  GPUs to the group's GPUs in other domains divided by its GPU count, then the smallest over domains (4 x HGX H100 with
  400G NICs: 8 x 50 / 8 = 50). Contention between different domains on shared uplinks is not modelled.
- Latency: the least-latency path between two GPUs (in the scale-up subgraph for a pair in one domain, in the whole
  graph across domains); the worst pair's sum of ``latency_us`` and its hop count are reported.
- With no domain of two or more GPUs the intra figures equal the inter ones (collectives among one-GPU domains use the
  same links). A figure the graph cannot give (no pair of GPUs across domains: a single server) is None, and
  ``effective_gpu`` keeps the base GpuSpec's value.
- ``effective_gpu`` maps the figures onto the GpuSpec fields the evaluator already uses: scaleup_gpus = largest domain
  of that type, intra/inter_bytes_per_s = half the per-direction bandwidth (450 GB/s -> 9e11/4, 50 GB/s -> 5e10/2, the
  notebook's rule), intra/inter_hop_latency_s = the worst path's latency. With several domain sizes of one type the
  size is the largest, the bandwidth the smallest and the latency the largest over domains; ``max_instances`` and
  ``place`` keep per-domain sizes.

Placement (``max_instances``, ``place``): an instance is ``pp`` tensor-parallel groups of ``tp`` GPUs of one type. If
``tp`` fits in the largest domain, each TP group lies inside one domain (domains too small for it stay unused, as the
evaluator prices such a group at intra-domain bandwidth); otherwise a TP group takes whole domains, largest first, until
it has ``tp`` GPUs, and the rest of its last domain stays idle. Pipeline stages are any TP groups (they may sit in
different domains; the evaluator prices stage-to-stage sends at inter-domain bandwidth). Packing is greedy: domains by
size (largest first, then graph order), GPUs in graph order, consecutive groups forming one replica's stages.
"""

from roofline_opt.topology.builders import (
    MAX_CLUSTER_GPUS,
    SPEC_KEYS,
    add_server,
    from_spec,
    pod,
    single_node,
    torus,
)
from roofline_opt.topology.derive import (
    CollectiveFigures,
    collective_figures,
    effective_gpu,
    effective_gpus,
    scaleup_domains,
)
from roofline_opt.topology.files import is_inline_spec, load_cluster, load_inline_spec, save_cluster
from roofline_opt.topology.placement import Placement, instance_limit, max_instances, place
from roofline_opt.topology.schema import (
    BANDWIDTH,
    BUILTIN_GPU_NAMES,
    FABRICS,
    GPUS_PER_PCIE_SWITCH,
    LATENCY,
    LINK_KINDS,
    NIC_KINDS,
    NODE_KINDS,
    NODE_TYPES,
    SCALEUP_LINK_KINDS,
    LinkTier,
    NodeGroup,
    NodeType,
    gpu_counts,
    gpu_ids,
    link_tiers,
    validate_cluster,
)

__all__ = [
    "BANDWIDTH",
    "BUILTIN_GPU_NAMES",
    "MAX_CLUSTER_GPUS",
    "CollectiveFigures",
    "FABRICS",
    "GPUS_PER_PCIE_SWITCH",
    "LATENCY",
    "LINK_KINDS",
    "LinkTier",
    "NIC_KINDS",
    "NODE_KINDS",
    "NODE_TYPES",
    "NodeGroup",
    "NodeType",
    "Placement",
    "SCALEUP_LINK_KINDS",
    "SPEC_KEYS",
    "add_server",
    "collective_figures",
    "effective_gpu",
    "effective_gpus",
    "from_spec",
    "gpu_counts",
    "gpu_ids",
    "link_tiers",
    "is_inline_spec",
    "load_cluster",
    "load_inline_spec",
    "instance_limit",
    "max_instances",
    "place",
    "pod",
    "save_cluster",
    "scaleup_domains",
    "single_node",
    "torus",
    "validate_cluster",
]
