"""aicluster:gcp:GkeNodePool - the GKE node pools of one aicluster pool.

GPU pools: one node pool in the cluster's zone with
- every GPU NIC network of the design as an additional node network (A3 High: 4 TCPX VPCs; A3 Mega:
  8 TCPXO VPCs; A3 Ultra / A4: the second gVNIC network and the 8 subnets of the RDMA VPC), which
  the pool's GKENetworkParamSet / Network pairs (gke_addons) expose to pods; node networks cannot
  change once the pool exists (GKE docs, Set up multi-network support for Pods), so they come from the machine family only;
- compact placement (placement_policy COMPACT) unless a reservation brings its own;
- reservation affinity (the named reservation, any matching one for on-demand, none for Spot and
  flex-start), Spot or flex-start;
- the GPUs with GKE's driver installation (the pinned driver version), gVNIC, GKE's
  Container-Optimized OS image, the GPU taint, the aicluster.io labels Kueue's flavor selects on,
  private nodes, the node service account with Workload Identity's metadata server, Shielded VM
  with Secure Boot and the boot disk type the machine takes (from the design);
- the machine's bundled Local SSDs as RAID0 ephemeral storage (container images, emptyDirs, the
  GCS FUSE file cache) and image streaming (gcfs_config) on every pool;
- autoscaling from min_nodes to max_nodes (GKE's cluster autoscaler adds nodes for the pods Kueue
  admits); flex-start pools start empty with queued provisioning: a gang gets all its nodes or none and surge upgrades that add a node before draining one (max_surge 1, max_unavailable 0:
  gke_upgrades.py), so an upgrade never shrinks the pool under a running gang.

TPU pools: one node pool per slice, each of the slice's hosts, with placement_policy COMPACT and the
slice's tpu_topology for a multi-host slice (GKE creates and scales such a pool atomically; TPU7x
names a HIGH_THROUGHPUT workload policy of the topology instead), the generation's boot disk type
(v6e and TPU7x take Hyperdisk), and no Secure Boot when they mount Managed
Lustre (GKE mounts it on Secure Boot nodes of GPU machine types only).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pulumi
import pulumi_gcp as gcp

from aicluster.design.model import ClusterContext
from aicluster.design.parts import PoolDesign
from aicluster.design.gke_parts import GkeDesign, GkeNetwork, GkeNodePool
from aicluster.kubernetes.capacity import autoscaled_health_marks
from aicluster.design.kubernetes import KubernetesPool
from aicluster.gcp.common import labels, node_metadata, node_tag, pool_labels, short_name
from aicluster.gcp.gke_upgrades import gpu_upgrade_settings
from aicluster.gcp.gpu_pool import RESERVATION_KEY
from aicluster.gcp.identity import CLOUD_PLATFORM

_EFFECTS = {"NoSchedule": "NO_SCHEDULE", "NoExecute": "NO_EXECUTE", "PreferNoSchedule": "PREFER_NO_SCHEDULE"}


@dataclass(frozen=True)
class NodeNetwork:
    """The cloud names of one additional node network (Network.fabric): network and subnetwork."""

    network: pulumi.Input[str]
    subnetwork: pulumi.Input[str]


@dataclass(frozen=True)
class GkeNodePoolArgs:
    """The GKE node pools of one aicluster pool (GPU: one; TPU: one per slice).

    context: the cluster's name (the node network tag), labels and workload hints (the pool facts
        on every node): `ClusterDesign.context`, or a `ClusterContext` of your own.
    gke: the GKE design (`ClusterDesign.kubernetes.gke`): the location and zone, image type and
        the pinned GPU driver version.
    pool: the pool as GKE builds it (one of `gke.node_pools`): machine type, accelerators, node
        networks, capacity, placement, disk, Secure Boot, node pool names and slice sizes.
    pool_design: the same pool's design (`ClusterDesign.pool(pool.pool)`): its size, in the
        pool facts the policy pack reads off the nodes' resource labels.
    kubernetes_pool: the pool as Kubernetes sees it (`ClusterDesign.kubernetes.pool(pool.pool)`):
        its node labels and taints.
    cluster_id: the GKE cluster (GkeCluster.cluster_id).
    service_account: the nodes' service account email (NodeIdentity.email).
    networks: one additional node network per `pool.networks` entry, in order (`network_names`).
    depends_on: what the node pools wait for (GkeCluster.before_nodes). Default nothing.
    """
    context: ClusterContext
    gke: GkeDesign
    pool: GkeNodePool
    pool_design: PoolDesign
    kubernetes_pool: KubernetesPool
    cluster_id: pulumi.Input[str]
    service_account: pulumi.Input[str]
    networks: Sequence[NodeNetwork]
    depends_on: Sequence[pulumi.Resource] = ()


def reservation_affinity(pool: GkeNodePool) -> gcp.container.NodePoolNodeConfigReservationAffinityArgs:
    if pool.reservation:
        return gcp.container.NodePoolNodeConfigReservationAffinityArgs(
            consume_reservation_type="SPECIFIC_RESERVATION", key=RESERVATION_KEY, values=[pool.reservation])
    if pool.capacity in ("spot", "flex-start"):
        return gcp.container.NodePoolNodeConfigReservationAffinityArgs(consume_reservation_type="NO_RESERVATION")
    return gcp.container.NodePoolNodeConfigReservationAffinityArgs(consume_reservation_type="ANY_RESERVATION")


class GkeNodePools(pulumi.ComponentResource):
    node_pools: dict[str, pulumi.Output[str]]     # GKE node pool name -> its id

    def __init__(self, name: str, args: GkeNodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:gcp:GkeNodePool", name, None, opts)
        design, gke, pool, kpool = args.context, args.gke, args.pool, args.kubernetes_pool
        if len(args.networks) != len(pool.networks):
            raise ValueError(f"pool {pool.pool}: {len(args.networks)} networks for {len(pool.networks)}")
        flex = pool.capacity == "flex-start"
        # A pool that scales: its nodes are born with the health label the jobs require and a taint
        # the autoscaler leaves out of its templates, which the health agent's first check removes.
        marks, startup_taints = autoscaled_health_marks(kpool)
        guest = None
        if pool.accelerator:
            guest = [gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(
                type=pool.accelerator, count=pool.gpus,
                gpu_driver_installation_config=gcp.container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
                    gpu_driver_version=gke.gpu_driver_version))]
        node_config = gcp.container.NodePoolNodeConfigArgs(
            machine_type=pool.machine_type,
            guest_accelerators=guest,
            image_type=gke.image_type,
            gvnic=gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True) if pool.accelerator else None,
            disk_type=pool.disk_type,
            disk_size_gb=pool.disk_size_gib,
            spot=pool.capacity == "spot" or None,
            flex_start=True if flex else None,
            reservation_affinity=reservation_affinity(pool),
            service_account=args.service_account,
            oauth_scopes=[CLOUD_PLATFORM],
            workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA"),
            shielded_instance_config=gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs(
                enable_secure_boot=pool.secure_boot, enable_integrity_monitoring=True),
            labels={**kpool.labels, **marks},
            taints=[gcp.container.NodePoolNodeConfigTaintArgs(key=t.key, value=t.value, effect=_EFFECTS[t.effect])
                    for t in (*kpool.taints, *startup_taints)],
            resource_labels={**labels(design, "compute", pool.pool), **pool_labels(design, args.pool_design)},
            metadata=node_metadata(),
            tags=[node_tag(design)],
            # The bundled Local SSDs as RAID0 ephemeral storage (images, emptyDirs, the GCS FUSE file
            # cache), and image streaming: a multi-GB training image starts before it is all pulled.
            ephemeral_storage_local_ssd_config=gcp.container.NodePoolNodeConfigEphemeralStorageLocalSsdConfigArgs(
                local_ssd_count=pool.local_ssds) if pool.local_ssds else None,
            gcfs_config=gcp.container.NodePoolNodeConfigGcfsConfigArgs(enabled=pool.image_streaming),
        )
        network_config = gcp.container.NodePoolNetworkConfigArgs(
            enable_private_nodes=True,
            additional_node_network_configs=[
                gcp.container.NodePoolNetworkConfigAdditionalNodeNetworkConfigArgs(network=n.network, subnetwork=n.subnetwork)
                for n in args.networks] or None)
        common = dict(cluster=args.cluster_id, location=gke.location, node_locations=[gke.zone],
                      node_config=node_config, network_config=network_config,
                      management=gcp.container.NodePoolManagementArgs(auto_repair=not flex, auto_upgrade=True))
        # The autoscaler owns the node count after creation; a changed minimum must not replace the pool.
        keep = pulumi.ResourceOptions(parent=self, depends_on=list(args.depends_on),
                                      ignore_changes=["initialNodeCount", "nodeCount"])
        self.node_pools = {}
        # An NVLink-domain pool (A4X) names a HIGH_THROUGHPUT workload policy with its accelerator
        # topology: GKE then places the pool's nodes in one NVLink domain (Cluster Toolkit
        # examples/gke-a4x: resource-policy module, workload_policy {type: HIGH_THROUGHPUT,
        # accelerator_topology: 1x72}, used by the A4X node pool).
        workload_policy = None
        if pool.tpu is None and pool.gpu_topology:
            workload_policy = self._workload_policy(name, design, f"{pool.names[0]}-nvl", pool.gpu_topology,
                                                    f"node pool {pool.names[0]}: one NVLink domain")
        if pool.tpu is None:
            node_pool = gcp.container.NodePool(
                f"{name}-pool", name=pool.names[0], **common,
                initial_node_count=pool.min_nodes,
                autoscaling=gcp.container.NodePoolAutoscalingArgs(
                    min_node_count=pool.min_nodes, max_node_count=pool.max_nodes,
                    location_policy="ANY" if flex else None),
                # Flex-start: queued provisioning. GKE creates the nodes of a ProvisioningRequest (made
                # by Kueue's admission check for an admitted gang) all at once, or none (GKE docs,
                # provisioningrequest: --flex-start --enable-queued-provisioning --num-nodes=0
                # --location-policy=ANY --reservation-affinity=none --no-enable-autorepair).
                queued_provisioning=gcp.container.NodePoolQueuedProvisioningArgs(enabled=True) if flex else None,
                placement_policy=gcp.container.NodePoolPlacementPolicyArgs(
                    type="COMPACT", policy_name=workload_policy.name if workload_policy else None) if pool.compact else None,
                # A new node first, none down before it is up: a running gang keeps its nodes.
                upgrade_settings=gpu_upgrade_settings(kpool.max_unavailable),
                opts=keep)
            self.node_pools[pool.names[0]] = node_pool.id
        else:
            # A generation GKE places by a workload policy (TPU7x: xpk's tpu_type_requires_workload_policy;
            # Cluster Toolkit examples/gke-tpu-7x: resource-policy workload_policy {type: HIGH_THROUGHPUT,
            # accelerator_topology: the tpu_topology}, named by every slice's node pool): one policy
            # for the pool's slices, in place of placement_policy.tpu_topology.
            tpu_policy = None
            if pool.tpu.generation.workload_policy:
                tpu_policy = self._workload_policy(name, design, f"{pool.names[0]}-tpu", pool.tpu.topology,
                                                   f"node pool {pool.names[0]}: TPU {pool.tpu.name} slices")
            if tpu_policy is not None:
                placement = gcp.container.NodePoolPlacementPolicyArgs(type="COMPACT", policy_name=tpu_policy.name)
            elif pool.tpu.multi_host:
                placement = gcp.container.NodePoolPlacementPolicyArgs(type="COMPACT", tpu_topology=pool.tpu.topology)
            else:
                placement = None
            for node_pool_name, low, high in pool.slice_sizes():
                node_pool = gcp.container.NodePool(
                    f"{name}-{node_pool_name}", name=node_pool_name, **common,
                    # An always-on slice has a fixed size; the others scale from 0 to the whole slice.
                    initial_node_count=low if low < high else None,
                    autoscaling=gcp.container.NodePoolAutoscalingArgs(min_node_count=low, max_node_count=high)
                    if low < high else None,
                    node_count=high if low == high else None,
                    placement_policy=placement,
                    opts=keep)
                self.node_pools[node_pool_name] = node_pool.id
        self.register_outputs({"node_pools": self.node_pools})

    def _workload_policy(self, name: str, design: ClusterContext, suffix: str, topology: str,
                         what: str) -> gcp.compute.ResourcePolicy:
        """A HIGH_THROUGHPUT workload policy of `topology` (1x72, a TPU slice's shape) that a node
        pool names in its placement_policy: how GKE places A4X domains and TPU7x slices."""
        return gcp.compute.ResourcePolicy(
            f"{name}-workload-policy", name=short_name(f"{design.name}-{suffix}", 63), region=design.region,
            description=f"aicluster {design.name} {what} ({topology})",
            workload_policy=gcp.compute.ResourcePolicyWorkloadPolicyArgs(
                type="HIGH_THROUGHPUT", accelerator_topology=topology),
            opts=pulumi.ResourceOptions(parent=self))


def network_names(fabric: dict, networks: Sequence[GkeNetwork]) -> list[NodeNetwork]:
    """The cloud names of each additional node network, from Network.fabric."""
    return [NodeNetwork(network=fabric[n.network].network.name,
                        subnetwork=fabric[n.network].subnetworks[n.subnet].name) for n in networks]
