"""aicluster:aws:GpuPool - a cluster placement group and the pool's launch template.

The launch template is the single source of truth for a node: whoever launches nodes (Slurm's
resume program through CreateFleet, an EKS node group) uses it as is. It never carries a node
count, so resizing a pool changes nothing here, and a 2048-node pool has the same resources as
an 8-node one.
"""
from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Literal

import pulumi
import pulumi_aws as aws

from aicluster.catalog import load_limits
from aicluster.design.model import ClusterContext
from aicluster.design.parts import PoolDesign

def within_user_data_limit(name: str, text: str) -> str:
    """`text`, once it is known to fit in EC2's user data; a clear error at plan time otherwise.
    A launch template would accept more, and then every launch from it would fail. The limit and
    its source are in catalog/limits.yaml (ec2_user_data_bytes)."""
    size, limit = len(text.encode()), load_limits()["ec2_user_data_bytes"].value
    if size > limit:
        raise ValueError(f"{name}: user data is {size} bytes; EC2 takes at most {limit} bytes "
                         "(16 KB, before base64): fetch large programs at boot instead of carrying them")
    return text


@dataclass(frozen=True)
class GpuPoolArgs:
    """A pool's launch template and placement group.

    context: the cluster's name, zone, tags and workload hints (`ClusterDesign.context`, or a
        `ClusterContext` of your own). pool: the pool's design: instance type, every EFA device,
        placement, image (`aicluster.design.cluster.design_pool("p5.48xlarge", ...)` builds one with no spec).
    subnet_id, security_group_ids: where the nodes' interfaces go (the group must admit itself: EFA).
    instance_profile_arn: the nodes' instance profile (fleet launcher only).
    user_data: cloud-init text or MIME multipart (base64-encoded here, at most 16 KB raw).
    """
    context: ClusterContext
    pool: PoolDesign
    subnet_id: pulumi.Input[str]
    security_group_ids: pulumi.Input[list[str]]
    instance_profile_arn: pulumi.Input[str] | None = None
    user_data: pulumi.Input[str] = "#cloud-config\n"
    # Who launches nodes from the template: "fleet" (CreateFleet/RunInstances: Slurm's resume
    # program) or "eks" (an EKS managed node group, which supplies the image by ami_type, the
    # instance profile, the subnet and spot, and refuses them in the template).
    launcher: Literal["fleet", "eks"] = "fleet"
    # The image the nodes boot instead of the pool's own (`pool.image`): the baked node image
    # (aws/image.py, an AMI id known once it is built), fleet launcher only.
    image_id: pulumi.Input[str] | None = None


class GpuPool(pulumi.ComponentResource):
    launch_template_id: pulumi.Output[str]
    launch_template_version: pulumi.Output[int]
    placement_group_name: pulumi.Output[str] | None

    def __init__(self, name: str, args: GpuPoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:aws:GpuPool", name, None, opts)
        cluster, pool = args.context, args.pool
        child = pulumi.ResourceOptions(parent=self)
        tags = cluster.labels("compute", pool.name)

        placement_group = None
        if pool.placement.strategy:
            placement_group = aws.ec2.PlacementGroup(
                f"{name}-placement", strategy=pool.placement.strategy, tags=tags, opts=child)

        template = aws.ec2.LaunchTemplate(
            f"{name}-template",
            description=f"aicluster {cluster.name} pool {pool.name}: {pool.instance.name}, "
                        f"{pool.efa_devices} EFA devices",
            instance_type=pool.instance.name,
            image_id=(args.image_id or pool.image) if args.launcher == "fleet" else None,
            update_default_version=True,
            ebs_optimized="true",
            network_interfaces=[
                aws.ec2.LaunchTemplateNetworkInterfaceArgs(
                    network_card_index=nic.network_card_index,
                    device_index=nic.device_index,
                    interface_type=nic.interface_type,
                    subnet_id=args.subnet_id if args.launcher == "fleet" else None,
                    security_groups=args.security_group_ids,
                    associate_public_ip_address="false",   # a string in pulumi_aws v7's LaunchTemplateNetworkInterfaceArgs
                    delete_on_termination="true",
                    description=f"{pool.name} card {nic.network_card_index} {nic.interface_type}",
                )
                for nic in pool.interfaces
            ],
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled",
                http_tokens="required",              # IMDSv2 only
                http_put_response_hop_limit=1,       # containers on the node cannot reach IMDS
                instance_metadata_tags="enabled",    # node name tags readable at boot
            ),
            block_device_mappings=[aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                device_name=pool.root_device,
                ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                    volume_size=pool.root_volume_gib,
                    volume_type="gp3",
                    encrypted="true",
                    delete_on_termination="true",
                ),
            )],
            iam_instance_profile=(aws.ec2.LaunchTemplateIamInstanceProfileArgs(arn=args.instance_profile_arn)
                                  if args.launcher == "fleet" else None),
            placement=_placement(cluster, placement_group),
            instance_market_options=_market_options(pool, args.launcher),
            capacity_reservation_specification=_reservation(pool, args.launcher),
            monitoring=aws.ec2.LaunchTemplateMonitoringArgs(enabled=True),
            user_data=pulumi.Output.from_input(args.user_data).apply(
                lambda text: base64.b64encode(within_user_data_limit(f"{name}-template", text).encode()).decode()),
            tag_specifications=[
                aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags=tags)
                for kind in ("instance", "volume", "network-interface")
            ],
            tags={**tags, **cluster.pool_facts(pool)},
            opts=child,
        )
        self.launch_template_id = template.id
        self.launch_template_version = template.latest_version
        self.placement_group_name = placement_group.name if placement_group else None
        self.register_outputs({
            "launch_template_id": template.id,
            "placement_group": placement_group.name if placement_group else None,
        })


def _placement(cluster: ClusterContext, group: aws.ec2.PlacementGroup | None):
    return aws.ec2.LaunchTemplatePlacementArgs(
        availability_zone=cluster.zone,
        group_name=group.name if group else None,
    )


def _market_options(pool: PoolDesign, launcher: str = "fleet"):
    if pool.capacity.type == "spot" and launcher == "fleet":   # EKS: the node group's capacity_type SPOT
        return aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(
            market_type="spot",
            spot_options=aws.ec2.LaunchTemplateInstanceMarketOptionsSpotOptionsArgs(
                spot_instance_type="one-time", instance_interruption_behavior="terminate"),
        )
    if pool.capacity.type == "capacity-block":
        return aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(market_type="capacity-block")
    return None


def _reservation(pool: PoolDesign, launcher: str = "fleet"):
    if pool.capacity.type in ("reservation", "capacity-block"):
        return aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
            capacity_reservation_target=aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                capacity_reservation_id=pool.capacity.reservation_id),
        )
    if pool.capacity.type == "spot" and launcher == "eks":
        return None
    # On-demand pools still use any open reservation that matches before paying list price.
    if pool.capacity.type == "on-demand":
        return aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(capacity_reservation_preference="open")
    return aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(capacity_reservation_preference="none")
