"""Slurm's view of multi-node NVLink domains (GB200/GB300 NVL72): topology/block, one block per
domain, and the IMEX switch plugin. Pure: a ClusterDesign in, the topology it gets out.

A pool of a type whose NVLink domain spans nodes is exactly one domain (spec/cluster.py
nvlink_domain_problems: one capacity block or one 1x72 placement policy a pool, 18 nodes or a
9-node UltraServer, every node static), so each domain is one pool and its block is that pool's
nodes, named after the pool (its nodes keep the pool's hostlist naming, gb200a-[1-18]).

Slurm 24.11 (the release the nodes run, catalog/slurm_release.yaml) has one TopologyPlugin for the
whole cluster; a partition picks its own topology only with topology.yaml, from 25.05. So a cluster
with an NVL72 pool runs topology/block for every partition, and the nodes of the other pools are in
no block: the block plugin leaves a job whose nodes are in no block to Slurm's plain best fit
("Don't use eval_nodes_block() when there isn't any block node on node_map. This allows the
allocation of nodes not connected by block topology (separated by partition or constraints)",
src/plugins/topology/block/topology_block.c, slurm-24-11-5-1), which is how ParallelCluster's
topology generator leaves its non-GB200 queues (aws-parallelcluster-cookbook,
pcluster_topology_generator.py). They cannot have blocks of their own: every block needs at least
the base block size of nodes (block_record.c: "children count lower than bblock_node_cnt" is
fatal), and the base must stay the domain size or no job could ask for a whole domain as a segment
("segment > bblock_node_cnt is not supported", eval_nodes_block.c). What those pools lose is the
tree's one switch per placement group, which only mattered to jobs spanning several pools of one
shared partition; a partition never mixes NVL72 pools with others (spec/cluster.py). slurmctld
logs "blocks lack access to N nodes: <the other pools>" once at start for such a mixed cluster.
"""
from __future__ import annotations

from dataclasses import dataclass

from aicluster.design.model import ClusterDesign

# Slurm's plugins (slurm.conf(5) TopologyPlugin, SwitchType; topology.conf(5) topology/block).
TREE = "topology/tree"
BLOCK = "topology/block"
# switch/nvidia_imex (Slurm 24.05+): slurmctld gives every job its own IMEX channel, and slurmd
# shows each step only that channel (/dev/nvidia-caps-imex-channels/channel<N>, in the step's own
# mount namespace: src/plugins/switch/nvidia_imex/imex_device.c), so two jobs in one NVLink domain
# cannot import each other's memory although one IMEX domain spans them.
IMEX_SWITCH = "switch/nvidia_imex"


@dataclass(frozen=True)
class SlurmBlock:
    """One BlockName line of topology.conf: one NVLink domain, one pool."""
    name: str            # the pool's name
    hostlist: str        # the pool's nodes, as its node lines name them
    nodes: int


@dataclass(frozen=True)
class SlurmTopology:
    """The cluster's topology plugin and, for topology/block, its blocks and BlockSizes."""
    plugin: str
    blocks: tuple[SlurmBlock, ...] = ()
    block_sizes: tuple[int, ...] = ()
    unblocked: tuple[str, ...] = ()      # hostlists of the pools in no block (plain best fit)

    @property
    def switch_type(self) -> str | None:
        """SwitchType: the IMEX channel plugin wherever there is an NVLink domain, else Slurm's default."""
        return IMEX_SWITCH if self.blocks else None


def slurm_topology(design: ClusterDesign) -> SlurmTopology:
    """topology/tree (one switch per placement group, render/slurm_config.py) unless a pool is a
    multi-node NVLink domain; then topology/block with one block per such pool."""
    if design.slurm is None:
        raise ValueError(f"cluster {design.name!r} has scheduler {design.scheduler!r}, not slurm")
    blocks, unblocked = [], []
    for ns in design.slurm.nodesets:
        pool = design.pool(ns.pool)
        if pool.tpu is None and pool.instance.nodes_per_nvlink_domain > 1:
            # Never powered down: on Slurm 25.x a powered-down node drops out of its block (the
            # 25.11 regression ParallelCluster works around with Topology=default:<block> on the
            # NodeName lines, aws-parallelcluster-cookbook PR 3123), and IMEX's node list cannot
            # change while it runs. The spec makes every node of a domain static, so every block
            # node is in SuspendExcNodes; a design that broke that is refused here, not rendered.
            if ns.dynamic_hostlist or ns.static_hostlist != ns.hostlist:
                raise ValueError(f"pool {ns.pool!r}: the nodes of an NVLink domain must all be static "
                                 f"(min_nodes = max_nodes), got static {ns.static_hostlist!r} of {ns.hostlist!r}")
            blocks.append(SlurmBlock(ns.pool, ns.hostlist, pool.max_nodes))
        else:
            unblocked.append(ns.hostlist)
    if not blocks:
        return SlurmTopology(TREE)
    return SlurmTopology(BLOCK, tuple(blocks), block_sizes(tuple(b.nodes for b in blocks)), tuple(unblocked))


def block_sizes(domain_nodes: tuple[int, ...]) -> tuple[int, ...]:
    """BlockSizes: the base block size only, the smallest domain (18, or 9 with a 9-node UltraServer).

    topology.conf(5): the first size is the planning base block, every block holds at least that
    many nodes, and each further size is the base times a power of two (block_record.c refuses
    anything else: "Invalid BlockSizes value"). A further size makes Slurm pair blocks by their
    order in topology.conf into aggregated blocks and keep a larger job inside one such pair; here
    no two domains are closer than any other two (each is its own capacity block or reservation
    sub-block, joined to the rest over EFA or RDMA alike), so pairing would only let a busy
    neighbour keep a 36-node job waiting while two other domains are free. With the base alone a
    job larger than a domain takes the fewest whole domains anywhere in the partition."""
    if not domain_nodes or min(domain_nodes) < 1:
        raise ValueError(f"block sizes need at least one domain of at least one node, got {domain_nodes}")
    base = min(domain_nodes)
    return (base,)
