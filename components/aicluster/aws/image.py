"""aicluster:aws:NodeImage - the Slurm nodes' baked AMI, built by EC2 Image Builder in `pulumi up`.

Why in the cluster stack, not a stack of its own: the image holds exactly the pins the cluster's
files are rendered for (one Slurm release on every role: slurmd may not be newer than slurmctld), so
both come from the same catalog in the same `pulumi up`, and a new pin rolls through the cluster in
that same run (the pools' launch templates get a new version; the reconcile loop replaces idle
nodes, docs/operating.md). A team that shares one image between clusters bakes it once and gives
the others `slurm.node_image.id` (docs/images.md).

What it creates, all named after the cluster and the image's contents key (render/node_image.py:
a digest of every pin), so new pins make new recipe, component and image resources beside the old
ones (Image Builder's recipes and components are immutable versions), never an edit of one in use:

- the bake files (render/image_bake.py: the node archive, the pins file and the bake program, one
  tar) in the configuration bucket at image/<key>/bake.tar, which the component downloads with
  AWSTOE's S3Download action;
- a build component (platform Linux) that downloads them and runs the bake as root, and validates
  that the image's manifest names this contents key;
- an image recipe on the GPU pools' own image (the Deep Learning Base OSS Nvidia Driver AMI, by its
  public SSM parameter: `ssm:` parent images resolve at build time), encrypted gp3 root volume;
- an infrastructure configuration: the builder in the cluster's private subnet, in a security group
  of its own with egress only, IMDSv2 required, terminated on failure, logs to the bucket;
- a distribution configuration: the AMI private to the account, tagged with the cluster's labels and
  the contents key;
- the image itself, which `pulumi up` waits for (up to IMAGE_BUILD_TIMEOUT) and whose AMI id the
  pools' launch templates and the login nodes' template boot.

Least privilege: the builder's role has the two managed policies Image Builder documents for build
instances (EC2InstanceProfileForImageBuilder, AmazonSSMManagedInstanceCore) and reads only
image/<key>/* of the bucket and writes only image-logs/*.

Old AMIs stay when the pins change: Image Builder's DeleteImage does not deregister the AMI, and
nodes still on the old version boot from it until the roll replaces them. docs/images.md says how
to remove them.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from aicluster.aws.iam import ec2_assume_role_policy, partition, ssm_core_policy_arn
from aicluster.aws.slurm import object_body
from aicluster.catalog import load_catalog
from aicluster.design.model import ClusterContext
from aicluster.design.parts import NodeImageDesign
from aicluster.render import image_bake, node_image
from aicluster.spec.cluster import NODE_IMAGE_VOLUME_GIB

ROLE = "image"
PREFIX = "image"                # the bake files: image/<key>/<name>
LOG_PREFIX = "image-logs"       # Image Builder's build logs
# The bake builds Slurm from source and snapshots the root volume: well over the provider's default.
IMAGE_BUILD_TIMEOUT = "3h"
# The builder: a catalog controller type (16 vCPUs compile Slurm in minutes); it needs no GPU, the
# driver comes with the parent image.
BUILDER_TYPE = "m7i.4xlarge"
CONTENTS_TAG = "aicluster-image-contents"


def bake_key(key: str) -> str:
    """The bucket key of the bake files' tar (render/image_bake.py) of contents `key`."""
    return f"{PREFIX}/{key}/bake.tar"


def component_document(bucket: str, key: str) -> str:
    """The AWSTOE document (Image Builder's component data, YAML; JSON is YAML) that downloads the
    bake files' tar, unpacks it and bakes; its validate phase checks the manifest names `key`. It
    names only the contents key, so a new on-node archive never makes a new component."""
    document = {
        "name": f"aicluster-node-bake-{key}",
        "description": f"aicluster: bake the Slurm node image (contents {key})",
        "schemaVersion": 1.0,
        "phases": [
            {"name": "build", "steps": [
                {"name": "DownloadBakeFiles", "action": "S3Download", "onFailure": "Abort",
                 "inputs": [{"source": f"s3://{bucket}/{bake_key(key)}", "destination": image_bake.TAR_PATH}]},
                {"name": "Bake", "action": "ExecuteBash", "onFailure": "Abort",
                 "inputs": {"commands": ["set -euo pipefail", *image_bake.bake_lines("aws")]}},
            ]},
            {"name": "validate", "steps": [
                {"name": "ManifestNamesContents", "action": "ExecuteBash", "onFailure": "Abort",
                 "inputs": {"commands": [f"grep -q '\"contents\": *\"{key}\"' {node_image.MANIFEST}"]}},
            ]},
        ],
    }
    return json.dumps(document, indent=1)


def builder_policy(bucket_arn: str, key: str) -> dict:
    """The bake files of this contents key, and the build logs: nothing else of the bucket."""
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "ReadBakeFiles", "Effect": "Allow", "Action": "s3:GetObject",
         "Resource": f"{bucket_arn}/{PREFIX}/{key}/*"},
        {"Sid": "WriteBuildLogs", "Effect": "Allow", "Action": "s3:PutObject",
         "Resource": f"{bucket_arn}/{LOG_PREFIX}/*"},
    ]}


@dataclass(frozen=True)
class NodeImageArgs:
    """The baked image of a Slurm cluster's GPU pools and login nodes.

    context: the cluster's name, region and tags. image: what to bake from (`ClusterDesign.slurm.node_image`).
    subnet_id, vpc_id: where the builder runs (the private subnet: it reaches the archives through NAT).
    bucket_name, bucket_arn: the configuration bucket (the bake files and the build logs).
    """
    context: ClusterContext
    image: NodeImageDesign
    vpc_id: pulumi.Input[str]
    subnet_id: pulumi.Input[str]
    bucket_name: pulumi.Input[str]
    bucket_arn: pulumi.Input[str]


class NodeImage(pulumi.ComponentResource):
    image_id: pulumi.Output[str]         # the AMI id
    contents: str                        # the contents key the image's manifest names

    def __init__(self, name: str, args: NodeImageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:aws:NodeImage", name, None, opts)
        cluster = args.context
        child = pulumi.ResourceOptions(parent=self)
        tags = cluster.labels(ROLE)
        key = self.contents = node_image.contents_key("aws")

        files = aws.s3.BucketObjectv2(
            f"{name}-bake-files", bucket=args.bucket_name, key=bake_key(key),
            **object_body(image_bake.bake_tar("aws")), server_side_encryption="AES256",
            # Kept when replaced: an image build of the old key may still be reading it.
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=True))

        role = aws.iam.Role(f"{name}-builder-role", assume_role_policy=ec2_assume_role_policy(cluster.region),
                            description=f"aicluster {cluster.name}: the image builder instance", tags=tags, opts=child)
        for short, arn in (("imagebuilder", f"arn:{partition(cluster.region)}:iam::aws:policy/"
                                            "EC2InstanceProfileForImageBuilder"),
                           ("ssm", ssm_core_policy_arn(cluster.region))):
            aws.iam.RolePolicyAttachment(f"{name}-builder-{short}", role=role.name, policy_arn=arn, opts=child)
        aws.iam.RolePolicy(f"{name}-builder-files", role=role.id,
                           policy=pulumi.Output.from_input(args.bucket_arn).apply(
                               lambda arn: json.dumps(builder_policy(arn, key))), opts=child)
        profile = aws.iam.InstanceProfile(f"{name}-builder-profile", role=role.name, tags=tags, opts=child)

        group = aws.ec2.SecurityGroup(
            f"{name}-builder-sg", vpc_id=args.vpc_id,
            description=f"aicluster {cluster.name}: image builder (egress only)",
            egress=[aws.ec2.SecurityGroupEgressArgs(protocol="-1", from_port=0, to_port=0, cidr_blocks=["0.0.0.0/0"],
                                                    description="package archives, S3, SSM")],
            tags=tags, opts=child)

        component = aws.imagebuilder.Component(
            f"{name}-bake", name=f"{cluster.name}-node-bake-{key}", version="1.0.0", platform="Linux",
            description=f"aicluster {cluster.name}: bake the Slurm node image (contents {key})",
            data=pulumi.Output.from_input(args.bucket_name).apply(lambda bucket: component_document(bucket, key)),
            tags=tags, opts=pulumi.ResourceOptions(parent=self, depends_on=[files]))

        recipe = aws.imagebuilder.ImageRecipe(
            f"{name}-recipe", name=f"{cluster.name}-node-{key}", version="1.0.0",
            parent_image=args.image.base_image.replace("resolve:ssm:", "ssm:", 1),
            components=[aws.imagebuilder.ImageRecipeComponentArgs(component_arn=component.arn)],
            block_device_mappings=[aws.imagebuilder.ImageRecipeBlockDeviceMappingArgs(
                device_name=load_catalog().images["gpu"]["root_device"],
                ebs=aws.imagebuilder.ImageRecipeBlockDeviceMappingEbsArgs(
                    volume_size=NODE_IMAGE_VOLUME_GIB, volume_type="gp3", encrypted="true",
                    delete_on_termination="true"))],
            description=f"aicluster {cluster.name}: Slurm GPU node (contents {key})",
            tags=tags, opts=child)

        infrastructure = aws.imagebuilder.InfrastructureConfiguration(
            f"{name}-infrastructure", name=f"{cluster.name}-node-image",
            description=f"aicluster {cluster.name}: where the node image is baked",
            instance_profile_name=profile.name, instance_types=[BUILDER_TYPE],
            subnet_id=args.subnet_id, security_group_ids=[group.id],
            terminate_instance_on_failure=True,
            instance_metadata_options=aws.imagebuilder.InfrastructureConfigurationInstanceMetadataOptionsArgs(
                http_tokens="required", http_put_response_hop_limit=1),
            logging=aws.imagebuilder.InfrastructureConfigurationLoggingArgs(
                s3_logs=aws.imagebuilder.InfrastructureConfigurationLoggingS3LogsArgs(
                    s3_bucket_name=args.bucket_name, s3_key_prefix=LOG_PREFIX)),
            resource_tags=tags, tags=tags, opts=child)

        distribution = aws.imagebuilder.DistributionConfiguration(
            f"{name}-distribution", name=f"{cluster.name}-node-image",
            description=f"aicluster {cluster.name}: the node image, private to the account",
            distributions=[aws.imagebuilder.DistributionConfigurationDistributionArgs(
                region=cluster.region,
                ami_distribution_configuration=aws.imagebuilder.DistributionConfigurationDistributionAmiDistributionConfigurationArgs(
                    name=f"{cluster.name}-node-{key}-{{{{ imagebuilder:buildDate }}}}",
                    description=f"aicluster {cluster.name}: Slurm GPU node (contents {key})",
                    ami_tags={**tags, CONTENTS_TAG: key}))],
            tags=tags, opts=child)

        image = aws.imagebuilder.Image(
            f"{name}-image", image_recipe_arn=recipe.arn,
            infrastructure_configuration_arn=infrastructure.arn,
            distribution_configuration_arn=distribution.arn,
            enhanced_image_metadata_enabled=True,
            tags={**tags, CONTENTS_TAG: key},
            opts=pulumi.ResourceOptions(parent=self, custom_timeouts=pulumi.CustomTimeouts(create=IMAGE_BUILD_TIMEOUT)))

        self.image_id = image.output_resources.apply(_ami_of)
        self.register_outputs({"image_id": self.image_id, "contents": key})


def _ami_of(resources) -> str:
    """The AMI of the image's one distribution (output_resources[0].amis[0].image)."""
    amis = (resources or [{}])[0].get("amis") if isinstance((resources or [{}])[0], dict) else \
        getattr(resources[0], "amis", None)
    first = (amis or [None])[0]
    image = first.get("image") if isinstance(first, dict) else getattr(first, "image", None)
    if not image:
        raise ValueError(f"the image build reported no AMI: {resources!r}")
    return image
