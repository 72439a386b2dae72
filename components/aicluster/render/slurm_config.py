"""Slurm configuration files rendered from the design: slurm.conf, gres.conf, cgroup.conf and
topology.conf.

Pure: a ClusterDesign plus a SlurmRuntime (where things live on the head node) in, file texts
out. The head node publishes nothing itself: these texts are published outside its user data
(so a spec edit never replaces it), pulled by its sync timer, and compute nodes read them from
slurmctld (configless). The same texts are fed to a real slurmctld by tests/slurm/.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

from aicluster.design import balance
from aicluster.design.model import ClusterDesign
from aicluster.design.parts import SlurmNodeSet
from aicluster.design.slurm_blocks import slurm_topology
from aicluster.catalog.node_local import containers
from aicluster.render.templates import render
from aicluster.spec.slurm_settings import merge_conf_settings, merge_line_settings

SLURM_CONFIG_FILES = ("slurm.conf", "gres.conf", "cgroup.conf", "topology.conf", "plugstack.conf")

# SlurmctldParameters=cloud_dns: Slurm hands no node addresses to srun and step launches, so every
# node name must resolve on the head and on every node. Each cluster has a private DNS zone under
# this domain (Route 53 on AWS, Cloud DNS on GCP) whose A records <node>.<domain> the resume
# program writes and the suspend program deletes; every node searches the domain.
def node_domain(cluster: str) -> str:
    """The DNS domain of a cluster's node names: gpu-1 is gpu-1.<cluster>.aicluster.internal.
    Depends only on the cluster name, so the head node's user data stays byte-identical."""
    return f"{cluster}.aicluster.internal"


# Seconds slurmctld waits after SuspendProgram before the node may be resumed again: long enough
# for EC2 to finish terminating a large GPU instance.
SUSPEND_TIMEOUT_S = 300

# HealthCheckInterval: the GPU health check runs every 5 minutes on every node (slurm.conf.j2 says
# why ANY and not CYCLE). ParallelCluster and slurm-gcp leave it off; 5 minutes finds a GPU that
# fell off the bus before most jobs' next checkpoint.
HEALTH_CHECK_INTERVAL_S = 300

# The prolog's opt-in DCGM diagnostic runs at most this long (DCGM_MAX_TIMEOUT in
# aicluster/node/bin/aicluster-gpu-healthcheck, which the tests check against this number); the
# other checks each run under their own timeout, well under a minute all together.
DCGM_MAX_TIMEOUT_S = 300
PROLOG_FAST_CHECKS_S = 60
BATCH_START_TIMEOUT_S = DCGM_MAX_TIMEOUT_S + PROLOG_FAST_CHECKS_S

# KillWait: Slurm's default and its upper limit (slurm.conf(5), KillWait).
KILL_WAIT_DEFAULT_S = 30
KILL_WAIT_MAX_S = 65533
# The balance model's write time assumes the filesystem's nominal aggregate throughput and every
# node writing at once; a real checkpoint (metadata, stragglers, a busy filesystem) is slower, so
# the job gets twice that time between SIGTERM and SIGKILL.
CHECKPOINT_MARGIN = 2

# slurm.conf SlurmctldPort: Slurm's default, and where configless slurmd's fetch their configuration.
SLURMCTLD_PORT = 6817

# Where the head's power programs and reconcile loop log (cluster.json log_file; shipped by the
# head's log agent, slurm_monitoring).
POWER_LOG = "/var/log/aicluster/power.log"
RECONCILE_LOG = "/var/log/aicluster/reconcile.log"


@dataclass(frozen=True)
class SlurmRuntime:
    """Where Slurm lives on the head node. Tests point every path and port at a temp dir."""

    controller_host: str            # SlurmctldHost short name (slurmctld checks it is its own)
    controller_addr: str            # its private IP
    conf_dir: str = "/etc/slurm"
    bin_dir: str = "/opt/aicluster/bin"
    state_dir: str = "/var/spool/slurmctld"
    slurmd_spool_dir: str = "/var/spool/slurmd"
    log_dir: str = "/var/log/slurm"
    run_dir: str = "/run/slurm"
    slurm_user: str = "slurm"
    slurmctld_port: int = SLURMCTLD_PORT
    slurmd_port: int = 6818
    accounting_host: str | None = None     # slurmdbd host when accounting is on (the head itself)
    # Addresses of nodes that are not CLOUD nodes (Cloud TPU hosts Pulumi creates): node -> address,
    # written as NodeAddr so slurmctld needs no name lookup for them.
    node_addrs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _NodeLine:
    """One NodeName line of slurm.conf."""
    hostlist: str
    features: tuple[str, ...]
    nodeset: SlurmNodeSet
    addrs: tuple[str, ...] = ()     # NodeAddr of each node of the hostlist, in order


@dataclass(frozen=True)
class _Switch:
    """One switch of topology.conf."""
    name: str
    nodes: str | None = None        # leaf switch: a hostlist
    switches: str | None = None     # top switch: the leaf switches it joins


def render_slurm_configs(design: ClusterDesign, runtime: SlurmRuntime) -> dict[str, str]:
    """{"slurm.conf": ..., "gres.conf": ..., "cgroup.conf": ..., "topology.conf": ...}

    topology.conf is topology/tree (one switch per placement group) or, with an NVL72 pool,
    topology/block (one block per NVLink domain: design/slurm_blocks.py)."""
    if design.slurm is None:
        raise ValueError(f"cluster {design.name!r} has scheduler {design.scheduler!r}, not slurm")
    slurm = design.slurm
    context = {
        "cluster": design.name,
        "slurm": slurm,
        "rt": runtime,
        "node_lines": _node_lines(slurm.nodesets, design, runtime.node_addrs),
        "accounting_host": runtime.accounting_host or runtime.controller_addr,
        "suspend_timeout_s": SUSPEND_TIMEOUT_S,
        "gpu_nodesets": [n for n in slurm.nodesets if n.gres],
        "gpu_bindings": gpu_bindings,
        "switches": _switches(slurm.nodesets),
        "topology": slurm_topology(design),          # tree, or block with the NVLink domains
        "health_check_interval_s": HEALTH_CHECK_INTERVAL_S,
        "dcgm_max_timeout_s": DCGM_MAX_TIMEOUT_S,
        "batch_start_timeout_s": BATCH_START_TIMEOUT_S,
        "kill_wait_s": kill_wait_s(design),
        "checkpoint_margin": CHECKPOINT_MARGIN,
        "pyxis_plugin": containers().pyxis.plugin,     # plugstack.conf (catalog/node_local.yaml)
    }
    files = {name: render(f"slurm/{name}.j2", **context) for name in SLURM_CONFIG_FILES}
    files["slurm.conf"] = _with_settings(files["slurm.conf"], slurm)
    return files


def _with_settings(text: str, slurm) -> str:
    """slurm.conf with the spec's custom settings merged (slurm_settings.py): pools[].slurm_settings
    into their PartitionName lines, slurm.settings into the file."""
    lines = text.split("\n")
    for part in slurm.partitions:
        if part.settings:
            lines = [merge_line_settings(ln, part.settings) if ln.startswith(f"PartitionName={part.name} ")
                     else ln for ln in lines]
    return merge_conf_settings("\n".join(lines), slurm.settings)


@dataclass(frozen=True)
class GpuBinding:
    """One gres.conf line: GPUs `first`..`last` of a node and the cores of their socket."""
    first: int
    last: int
    cores: str | None      # Slurm's core indexes "0-47" (gres.conf(5) Cores=); None: not bound

    @property
    def file(self) -> str:
        return f"/dev/nvidia{self.first}" if self.first == self.last else f"/dev/nvidia[{self.first}-{self.last}]"


def gpu_bindings(ns: SlurmNodeSet) -> list[GpuBinding]:
    """The GPUs of a node set, bound to the cores of their socket where the catalog sources both
    the socket count and which GPUs sit on which socket; one unbound line otherwise.

    gres.conf(5) Cores=: Slurm's own core indexes, socket by socket (socket s holds cores
    s*CoresPerSocket .. (s+1)*CoresPerSocket-1 whatever the OS numbers them), so they follow from
    the node line's SocketsPerBoard and CoresPerSocket."""
    if ns.gpu_count == 0:
        return []
    per_socket, sockets = ns.gpus_per_socket, ns.sockets
    if not (per_socket and sockets and ns.cores and per_socket * sockets == ns.gpu_count):
        return [GpuBinding(0, ns.gpu_count - 1, None)]
    cores_per_socket = ns.cores // sockets
    return [GpuBinding(s * per_socket, (s + 1) * per_socket - 1,
                       f"{s * cores_per_socket}-{(s + 1) * cores_per_socket - 1}") for s in range(sockets)]


def kill_wait_s(design: ClusterDesign) -> int:
    """KillWait: room for a job to write its checkpoint after SIGTERM, from the plan's checkpoint
    write time (balance.from_design: the workload's checkpoint over the fastest filesystem at the
    pools' max_nodes) times CHECKPOINT_MARGIN; Slurm's default when the spec gives no workload or
    no filesystem, Slurm's limit at most."""
    write_s = balance.from_design(design).checkpoint_write_s
    if write_s is None:
        return KILL_WAIT_DEFAULT_S
    return min(KILL_WAIT_MAX_S, max(KILL_WAIT_DEFAULT_S, math.ceil(CHECKPOINT_MARGIN * write_s)))


def _node_lines(nodesets: tuple[SlurmNodeSet, ...], design: ClusterDesign,
                node_addrs: Mapping[str, str]) -> list[_NodeLine]:
    """Per pool: the always-on (min_nodes) line and the elastic line, each only when non-empty.
    The static|dynamic feature lets users and the resume program tell them apart
    (ParallelCluster's convention). Nodes that are not CLOUD nodes get their NodeAddr when known."""
    lines = []
    for ns in nodesets:
        if ns.static_hostlist:
            addrs: tuple[str, ...] = ()
            if not ns.cloud:
                names = design.pool(ns.pool).node_names()
                if all(n in node_addrs for n in names):
                    addrs = tuple(node_addrs[n] for n in names)
            lines.append(_NodeLine(ns.static_hostlist, (*ns.features, "static"), ns, addrs))
        if ns.dynamic_hostlist:
            lines.append(_NodeLine(ns.dynamic_hostlist, (*ns.features, "dynamic"), ns))
    return lines


def _switches(nodesets: tuple[SlurmNodeSet, ...]) -> list[_Switch]:
    """topology/tree: one leaf switch per placement group; a top switch joins them when there
    are several, so Slurm still sees one connected tree (nodes on disjoint trees can never share
    a job, and Slurm logs every disconnected switch)."""
    members: dict[str, list[str]] = {}
    for ns in nodesets:
        # A TPU pool: one switch per slice (its hosts share the slice's ICI, slices meet over DCN).
        for switch, hostlist in ns.switches or ((ns.switch, ns.hostlist),):
            members.setdefault(switch, []).append(hostlist)
    leaves = [_Switch(name, nodes=",".join(hostlists)) for name, hostlists in members.items()]
    if len(leaves) < 2:
        return leaves
    top = "top"
    while top in members:           # a pool may be called "top"
        top += "-root"
    return [*leaves, _Switch(top, switches=",".join(members))]
