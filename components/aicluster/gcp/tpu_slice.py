"""aicluster:gcp:TpuSlice - the Cloud TPU slices of a pool on Slurm.

A TPU pool on Slurm is `max_nodes / hosts` slices of its topology, each one TPU VM (`gcp.tpu.V2Vm`
with acceleratorConfig {type, topology} and the generation's pinned software version) whose hosts
are the slice's workers. Pulumi creates them, so every host is always on: Slurm sees them as
ordinary nodes (not State=CLOUD), never powers them down (SuspendExcNodes) and puts them in one
partition with one topology switch per slice (components/aicluster/design/cluster.py, slurm_config.py). Each host's
node name is <pool>-<n>: the slice's first node number (metadata aicluster-first-node) plus the
host's worker number. Pulumi writes each host's name into the cluster's node-name zone
(<node>.<cluster>.aicluster.internal -> the host's address, the same zone the resume program
writes for GPU nodes), so Slurm resolves TPU hosts as it resolves every node (cloud_dns).

No external IP, the cluster's node tag (firewall rules between the cluster's nodes, LNet from the
Lustre servers), the compute service account, Spot or reserved capacity, OS Login.
"""
from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from aicluster.design.model import ClusterContext, ClusterDesign
from aicluster.design.parts import PoolDesign
from aicluster.mounts import Mount
from aicluster.render.node_programs import NODE_PROGRAMS, node_files, program_text
from aicluster.render.slurm_files import BIN, BootFile
from aicluster.render.templates import render
from aicluster.render.slurm_config import node_domain
from aicluster.gcp.common import labels, node_tag, pool_labels, short_name
from aicluster.gcp.identity import CLOUD_PLATFORM

# A Slurm node record: short TTL, as the resume program writes them.
RECORD_TTL_S = 60


def startup_script(design: ClusterDesign, pool: PoolDesign, mounts: list[Mount], controller: str,
                   munge_secret: str) -> str:
    """What every host of the pool's slices runs at boot (templates/scripts/aicluster-tpu-startup.sh.j2)."""
    return render("scripts/aicluster-tpu-startup.sh.j2", cluster=design.name, pool=pool.name,
                  tpu=pool.tpu.describe(), tpu_type=pool.tpu.name, topology=pool.tpu.topology,
                  controller=controller, munge_secret=munge_secret, dns_domain=node_domain(design.name),
                  node_files=[BootFile(path, text, mode) for path, text, mode in node_files(NODE_PROGRAMS, BIN)],
                  healthcheck_script=program_text("aicluster-gpu-healthcheck"),
                  task_prolog_script=program_text("aicluster-task-prolog"),
                  node_name_script=program_text("aicluster-tpu-node-name"),
                  bootstrap_script=program_text("aicluster-gcp-node-bootstrap"),
                  mount_script=render("scripts/mount-storage.sh.j2", mounts=mounts))


def scheduling(pool: PoolDesign) -> gcp.tpu.V2VmSchedulingConfigArgs | None:
    if pool.capacity.type == "spot":
        return gcp.tpu.V2VmSchedulingConfigArgs(spot=True)
    if pool.capacity.type == "reservation":
        return gcp.tpu.V2VmSchedulingConfigArgs(reserved=True)
    return None


@dataclass(frozen=True)
class TpuSliceArgs:
    """A TPU pool's slices (one TPU VM each) and the node-name records of their hosts.

    context: the cluster's name (VM names, the node-name domain, the node tag), zone (where the
        slices live), labels and workload hints (the pool facts on every VM): `ClusterDesign.context`,
        or a `ClusterContext` of your own.
    pool: the pool's design (one of `ClusterDesign.pools`, with `tpu` set): its slice (type,
        topology, hosts, runtime), node count (max_nodes / hosts slices) and capacity.
    network: the system network, projects/<p>/global/networks/<name> (Network.network_id).
    subnetwork: the system subnetwork (Network.subnetwork_self_link).
    service_account_email: the nodes' service account (NodeIdentity.email).
    startup_script: what every host runs at boot (`startup_script`).
    dns_zone: the cluster's node-name managed zone (SlurmController.dns_zone).
    """
    context: ClusterContext
    pool: PoolDesign
    network: pulumi.Input[str]
    subnetwork: pulumi.Input[str]
    service_account_email: pulumi.Input[str]
    startup_script: pulumi.Input[str]
    dns_zone: pulumi.Input[str]


class TpuSlice(pulumi.ComponentResource):
    slices: list[pulumi.Output[str]]              # TPU VM ids
    addresses: pulumi.Output[list]                # every host's address, in node order
    # What SlurmConfiguration reads of a pool (a TPU pool is not launched from a template).
    instance_template: str = ""
    placement_policy = None

    def __init__(self, name: str, args: TpuSliceArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:gcp:TpuSlice", name, None, opts)
        design, pool = args.context, args.pool
        tpu = pool.tpu
        child = pulumi.ResourceOptions(parent=self)
        domain = node_domain(design.name)
        self.slices, addresses = [], []
        for k in range(pool.slices):
            first = k * tpu.hosts + 1
            vm = gcp.tpu.V2Vm(
                f"{name}-{k}",
                name=short_name(f"{design.name}-{pool.name}-{k}", 63),
                zone=design.zone,
                description=f"aicluster {design.name} pool {pool.name}: slice {k}, {tpu.describe()}, "
                            f"nodes {pool.node_name(first)}..{pool.node_name(first + tpu.hosts - 1)}",
                accelerator_config=gcp.tpu.V2VmAcceleratorConfigArgs(type=tpu.tpu_vm_config_type,
                                                                     topology=tpu.topology),
                runtime_version=tpu.generation.runtime_version,
                network_config=gcp.tpu.V2VmNetworkConfigArgs(network=args.network, subnetwork=args.subnetwork,
                                                             enable_external_ips=False),
                service_account=gcp.tpu.V2VmServiceAccountArgs(email=args.service_account_email,
                                                               scopes=[CLOUD_PLATFORM]),
                scheduling_config=scheduling(pool),
                metadata={"startup-script": args.startup_script, "aicluster-first-node": str(first),
                          "enable-oslogin": "TRUE", "block-project-ssh-keys": "TRUE"},
                tags=[node_tag(design)],
                labels={**labels(design, "compute", pool.name), **pool_labels(design, pool)},
                opts=child,
            )
            self.slices.append(vm.id)
            for worker in range(tpu.hosts):
                node = pool.node_name(first + worker)
                address = vm.network_endpoints.apply(lambda eps, w=worker: _address(eps[w]))
                gcp.dns.RecordSet(f"{name}-{node}", managed_zone=args.dns_zone, name=f"{node}.{domain}.",
                                  type="A", ttl=RECORD_TTL_S, rrdatas=[address], opts=child)
                addresses.append(address)
        self.addresses = pulumi.Output.all(*addresses)
        self.register_outputs({"slices": self.slices})


def _address(endpoint) -> str:
    """A network endpoint's address (typed output or plain dict under mocks)."""
    if hasattr(endpoint, "ip_address"):
        return endpoint.ip_address
    return endpoint.get("ip_address") or endpoint.get("ipAddress")
