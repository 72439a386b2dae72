"""aicluster:gcp:GpuPool - a compact placement policy and the pool's instance template.

The instance template is the single source of truth for a node, as the launch template is on AWS:
whoever creates nodes (Slurm's resume program through instances.bulkInsert) uses it as it is. It
carries every NIC of the machine family in the design's order (gVNIC on the system VPC, the extra
gVNIC or GPU NIC networks, MRDMA NICs on the RDMA VPC), no external IP, Shielded VM, the pool's
capacity (reservation affinity, Spot or DWS flex-start), the placement policy and the boot image
pinned per family in the catalog. It carries no node count beyond the labels the policy pack reads.

Placement: a compact resource policy (collocation COLLOCATED) for multi-node pools; none when a
reservation brings its own placement (dense A3 Ultra / A4 reservations) or for a single node.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pulumi
import pulumi_gcp as gcp

from aicluster.design.model import ClusterContext
from aicluster.design.parts import PoolDesign
from aicluster.gcp.common import labels, node_tag, pool_labels, short_name
from aicluster.gcp.identity import CLOUD_PLATFORM

# DWS flex-start VMs run at most this long before Compute Engine deletes them: the maximum it
# allows, the default of slurm-gcp's dws_flex.max_run_duration.
FLEX_START_MAX_RUN_S = 7 * 24 * 3600
RESERVATION_KEY = "compute.googleapis.com/reservation-name"


@dataclass(frozen=True)
class GpuPoolArgs:
    """A pool's instance template and compact placement policy.

    context: the cluster's name, region, zone, labels and workload hints (`ClusterDesign.context`,
        or a `ClusterContext` of your own). pool: the pool's design: machine type, every NIC of the
        family, placement, image (`aicluster.design.cluster.design_pool("a3-megagpu-8g", cloud="gcp")`).
    nic_subnetworks: one subnetwork per NIC of the design, in order (Network.nic_subnetworks).
    service_account_email: the nodes' service account.
    user_data: cloud-init text (metadata user-data).
    image: the image the nodes boot instead of the pool's own (`pool.image`): the baked node image
        (gcp/image.py), a self link known once it is built.
    """
    context: ClusterContext
    pool: PoolDesign
    nic_subnetworks: Sequence[pulumi.Input[str]]
    service_account_email: pulumi.Input[str]
    user_data: pulumi.Input[str] = "#cloud-config\n"
    image: pulumi.Input[str] | None = None


class GpuPool(pulumi.ComponentResource):
    instance_template: pulumi.Output[str]          # self link
    placement_policy: pulumi.Output[str] | None    # self link

    def __init__(self, name: str, args: GpuPoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:gcp:GpuPool", name, None, opts)
        cluster, pool = args.context, args.pool
        if len(args.nic_subnetworks) != len(pool.nics):
            raise ValueError(f"pool {pool.name}: {len(args.nic_subnetworks)} subnetworks for {len(pool.nics)} NICs")
        child = pulumi.ResourceOptions(parent=self)
        pool_label_set = labels(cluster, "compute", pool.name)

        placement = None
        if pool.placement.strategy:
            placement = gcp.compute.ResourcePolicy(
                f"{name}-placement", name=short_name(f"{cluster.name}-{pool.name}-placement", 63),
                region=cluster.region,
                description=f"aicluster {cluster.name} pool {pool.name}: compact placement"
                            + (f", one NVLink domain ({pool.placement.gpu_topology})" if pool.placement.gpu_topology else ""),
                group_placement_policy=gcp.compute.ResourcePolicyGroupPlacementPolicyArgs(
                    collocation="COLLOCATED", gpu_topology=pool.placement.gpu_topology),
                opts=child)

        template = gcp.compute.InstanceTemplate(
            f"{name}-template",
            # A prefix, not a name: a changed template is created before the old one is deleted.
            name_prefix=short_name(f"{cluster.name}-{pool.name}", 36) + "-",
            description=f"aicluster {cluster.name} pool {pool.name}: {pool.instance.name}, {len(pool.nics)} NICs "
                        f"({pool.gpu_nics} for GPU traffic)",
            machine_type=pool.instance.name,
            disks=[gcp.compute.InstanceTemplateDiskArgs(
                boot=True, auto_delete=True, source_image=args.image or pool.image, disk_size_gb=pool.root_volume_gib,
                disk_type=pool.boot_disk_type, labels=pool_label_set)],
            network_interfaces=[gcp.compute.InstanceTemplateNetworkInterfaceArgs(
                subnetwork=subnetwork, nic_type=nic.nic_type)               # no access_configs: no external IP
                for nic, subnetwork in zip(pool.nics, args.nic_subnetworks)],
            scheduling=scheduling(pool),
            reservation_affinity=reservation_affinity(pool),
            resource_policies=placement.self_link if placement else None,   # one policy: a string in pulumi_gcp 10
            service_account=gcp.compute.InstanceTemplateServiceAccountArgs(
                email=args.service_account_email, scopes=[CLOUD_PLATFORM]),
            # vTPM and integrity monitoring. Secure Boot stays off: the Lustre client and the TCPXO
            # dmabuf helper are DKMS modules the node builds at boot, and Secure Boot refuses unsigned ones.
            shielded_instance_config=gcp.compute.InstanceTemplateShieldedInstanceConfigArgs(
                enable_secure_boot=False, enable_vtpm=True, enable_integrity_monitoring=True),
            metadata={
                "user-data": args.user_data,
                "enable-oslogin": "TRUE",            # SSH keys come from IAM (OS Login), never from metadata
                "block-project-ssh-keys": "TRUE",
                # A node whose set-up fails writes why as the guest attribute aicluster/bootstrap-error
                # (aicluster.node.slurm.BOOTSTRAP_ERROR_ATTRIBUTE): slurmd never starts, so this is how the
                # reconcile loop learns the reason. Guest attributes are off unless enabled:
                # https://cloud.google.com/compute/docs/metadata/manage-guest-attributes
                "enable-guest-attributes": "TRUE",
            },
            tags=[node_tag(cluster)],
            labels={**pool_label_set, **pool_labels(cluster, pool)},
            opts=child,
        )
        self.instance_template = template.self_link
        self.placement_policy = placement.self_link if placement else None
        self.register_outputs({"instance_template": template.self_link,
                               "placement_policy": placement.self_link if placement else None})


def scheduling(pool: PoolDesign) -> gcp.compute.InstanceTemplateSchedulingArgs:
    """GPU VMs cannot live-migrate: TERMINATE on host maintenance. Spot and flex-start VMs are
    deleted, not stopped, when Compute Engine takes them back (the resume program relaunches)."""
    kind = pool.capacity.type
    if kind == "spot":
        return gcp.compute.InstanceTemplateSchedulingArgs(
            provisioning_model="SPOT", preemptible=True, automatic_restart=False,
            on_host_maintenance="TERMINATE", instance_termination_action="DELETE")
    if kind == "flex-start":
        return gcp.compute.InstanceTemplateSchedulingArgs(
            provisioning_model="FLEX_START", automatic_restart=False, on_host_maintenance="TERMINATE",
            instance_termination_action="DELETE",
            max_run_duration=gcp.compute.InstanceTemplateSchedulingMaxRunDurationArgs(seconds=FLEX_START_MAX_RUN_S))
    return gcp.compute.InstanceTemplateSchedulingArgs(
        provisioning_model="STANDARD", automatic_restart=True, on_host_maintenance="TERMINATE")


def reservation_affinity(pool: PoolDesign) -> gcp.compute.InstanceTemplateReservationAffinityArgs:
    """A named reservation for reservation pools; any matching reservation first for on-demand
    pools (as AWS's open preference); none for Spot and flex-start, which cannot consume one."""
    kind = pool.capacity.type
    if kind == "reservation":
        return gcp.compute.InstanceTemplateReservationAffinityArgs(
            type="SPECIFIC_RESERVATION",
            specific_reservation=gcp.compute.InstanceTemplateReservationAffinitySpecificReservationArgs(
                key=RESERVATION_KEY, values=[pool.capacity.reservation_id]))
    if kind in ("spot", "flex-start"):
        return gcp.compute.InstanceTemplateReservationAffinityArgs(type="NO_RESERVATION")
    return gcp.compute.InstanceTemplateReservationAffinityArgs(type="ANY_RESERVATION")
