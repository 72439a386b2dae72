"""The launch template of the cluster's Ubuntu CPU instances (the Slurm head node, the login nodes):
the image, an encrypted gp3 root volume and IMDSv2, in one place.

Image, root volume and metadata options go in a launch template and the instance is launched from
it. An instance given a "resolve:ssm:" image together with a root_block_device fails at create: the
provider looks the image up with DescribeImages to find its root device (InvalidAMIID.Malformed,
terraform-provider-aws #43488, open). Launch templates take "resolve:ssm:" themselves and resolve it
at launch; EC2 keeps the parameter, not the AMI id, in the template, so a new Ubuntu release changes
nothing here.
"""
from __future__ import annotations

from typing import Mapping

import pulumi
import pulumi_aws as aws

from aicluster.catalog import load_catalog


def ubuntu_launch_template(name: str, *, description: str, root_volume_gib: int, keep_root_volume: bool,
                           tags: Mapping[str, str], opts: pulumi.ResourceOptions,
                           image_id: pulumi.Input[str] | None = None) -> aws.ec2.LaunchTemplate:
    """keep_root_volume: the root volume outlives the instance (the head's slurmctld state).
    image_id: the baked node image (aws/image.py) instead of Ubuntu's, for the login nodes; its
    root device is the GPU image's, which the bake starts from."""
    image = load_catalog().images["head" if image_id is None else "gpu"]
    return aws.ec2.LaunchTemplate(
        name,
        description=description,
        image_id=image_id or f"resolve:ssm:{image['ssm_parameter']}",
        metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
            http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1),
        block_device_mappings=[aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
            device_name=image["root_device"],
            ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                volume_size=root_volume_gib, volume_type="gp3", encrypted="true",
                delete_on_termination="false" if keep_root_volume else "true"),
        )],
        tags=dict(tags),
        opts=opts,
    )
