"""aicluster:aws:LoginNodes - where a Slurm cluster's users log in (never on the head node).

Private by default: instances in the private cluster subnet with no public IP, reached through SSM
Session Manager (the instance profile's AmazonSSMManagedInstanceCore) or by SSH from
`network.ssh_ingress_cidrs` only (their own security group; none by default). IMDSv2 only, root
volume encrypted. They join the nodes' security group, as the head does: sackd talks to slurmctld,
`srun` takes connections back from slurmstepd on the compute nodes, and Lustre servers answer
clients of that group.

Least privilege: the role may read the munge key, its own programs and exactly the head's published
objects it fetches (login_files.HEAD_KEYS_READ: the filesystems' mount script, the fabric check and
cluster.json), nothing else of the configuration bucket.

Not stateful: users' files belong on /home and the shared filesystems, so a login node is not
protected and may be replaced. Routine edits still never replace it: its inputs are the cluster's
name, the controller's address, the munge key's ARN and the bucket (login_files.py), never pools,
node counts or filesystems.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from aicluster.design.model import ClusterContext
from aicluster.design.login import LoginDesign
from aicluster.render import node_image
from aicluster.render.login_files import HEAD_KEYS_READ, LOGIN_PREFIX, login_programs, login_user_data
from aicluster.render.node_local_files import PYXIS_ARTIFACT_PREFIX
from aicluster.aws.gpu_pool import within_user_data_limit
from aicluster.aws.slurm import object_body
from aicluster.aws.launch_template import ubuntu_launch_template
from aicluster.aws.iam import ec2_assume_role_policy, ssm_core_policy_arn

ROLE = "login"


def login_read_policy(munge_secret_arn: str, bucket_arn: str) -> dict:
    """The munge key, the login nodes' own programs and the head's published files they fetch (each
    by its exact key: the mount script, aicluster-nccl-check, cluster.json) and pyxis as the head
    built it (node_local_files); nothing else of the cluster's secrets or bucket (not slurm.conf,
    the manifest or the head's other programs)."""
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "ReadMungeKey", "Effect": "Allow", "Action": "secretsmanager:GetSecretValue",
         "Resource": munge_secret_arn},
        {"Sid": "ReadLoginPrograms", "Effect": "Allow", "Action": "s3:GetObject",
         "Resource": [f"{bucket_arn}/{LOGIN_PREFIX}*", *[f"{bucket_arn}/{key}" for key in HEAD_KEYS_READ]]},
        {"Sid": "ReadPyxis", "Effect": "Allow", "Action": "s3:GetObject",
         "Resource": f"{bucket_arn}/{PYXIS_ARTIFACT_PREFIX}*"},
    ]}


@dataclass(frozen=True)
class LoginNodesArgs:
    """The login nodes of a Slurm cluster.

    context: the cluster's name, region and tags (`ClusterDesign.context`, or your own).
    login: how many, of which type, with which root volume (`ClusterDesign.slurm.login`).
    vpc_id: the VPC (their security group).
    subnet_id: the private cluster subnet they go in (never a public one).
    nodes_security_group_id: the cluster nodes' group, which they join (Slurm, srun, Lustre).
    controller_addr: slurmctld's address (`SlurmController.controller_addr`).
    munge_secret_arn: the munge key in Secrets Manager (`SlurmController.munge_secret_arn`).
    bucket_name, bucket_arn: the configuration bucket the head's files are published to.
    ssh_ingress_cidrs: the CIDRs allowed SSH (`network.ssh_ingress_cidrs`); none by default.
    metrics_write_url: the AMP workspace's remote-write URL (`ObservabilityBackend.remote_write_url`),
        where the nodes' metrics agent writes; None leaves them unmonitored (their set-up says so).
        Grant the role its writes with `observability.grant_shipping(..., role_name)`.
    image_id: the baked node image (aws/image.py) to boot instead of Ubuntu's; None: Ubuntu, and the
        login node installs its software at boot.
    """
    context: ClusterContext
    login: LoginDesign
    vpc_id: pulumi.Input[str]
    subnet_id: pulumi.Input[str]
    nodes_security_group_id: pulumi.Input[str]
    controller_addr: pulumi.Input[str]
    munge_secret_arn: pulumi.Input[str]
    bucket_name: pulumi.Input[str]
    bucket_arn: pulumi.Input[str]
    ssh_ingress_cidrs: tuple[str, ...] = ()
    metrics_write_url: pulumi.Input[str] | None = None
    image_id: pulumi.Input[str] | None = None


class LoginNodes(pulumi.ComponentResource):
    instance_ids: list[pulumi.Output[str]]
    private_ips: list[pulumi.Output[str]]

    def __init__(self, name: str, args: LoginNodesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:aws:LoginNodes", name, None, opts)
        cluster, login = args.context, args.login
        child = pulumi.ResourceOptions(parent=self)
        tags = cluster.labels(ROLE)

        role = aws.iam.Role(f"{name}-role", description=f"aicluster {cluster.name}: Slurm login nodes",
                            assume_role_policy=ec2_assume_role_policy(cluster.region), tags=tags, opts=child)
        aws.iam.RolePolicyAttachment(
            f"{name}-ssm", role=role.name,
            policy_arn=ssm_core_policy_arn(cluster.region), opts=child)
        read = aws.iam.RolePolicy(f"{name}-read", role=role.name,
                                  policy=pulumi.Output.all(args.munge_secret_arn, args.bucket_arn).apply(
                                      lambda a: json.dumps(login_read_policy(a[0], a[1]))),
                                  opts=child)
        profile = aws.iam.InstanceProfile(f"{name}-profile", role=role.name, tags=tags, opts=child)

        # SSH only from the CIDRs the spec names (none by default: SSM Session Manager). Rules
        # inline: a CIDR edit updates this group in place, the instances keep its id.
        sg = aws.ec2.SecurityGroup(
            f"{name}-ssh", description=f"aicluster {cluster.name}: login nodes (SSH only from the CIDRs the spec names)",
            vpc_id=args.vpc_id,
            ingress=[aws.ec2.SecurityGroupIngressArgs(protocol="tcp", from_port=22, to_port=22, cidr_blocks=[cidr],
                                                      description="SSH (network.ssh_ingress_cidrs)")
                     for cidr in args.ssh_ingress_cidrs],
            tags=tags, opts=child)

        # The programs at content-addressed keys: a new content is a new object, never a rewrite of
        # one a booting node may be reading; kept when replaced (a node launched from older user
        # data may still fetch it), removed with the bucket (force_destroy).
        programs = [aws.s3.BucketObjectv2(
            f"{name}-{entry['path'].rsplit('/', 1)[1]}", bucket=args.bucket_name, key=entry["key"], **object_body(text),
            server_side_encryption="AES256", opts=pulumi.ResourceOptions(parent=self, retain_on_delete=True))
            for entry, text in login_programs()]

        # The launch template (launch_template.py says why one): nothing of value lives on the
        # root volume (/home is shared), so it goes with the instance.
        template = ubuntu_launch_template(
            f"{name}-template", description=f"aicluster {cluster.name}: Slurm login nodes (image, root volume, "
                                            "metadata options)",
            root_volume_gib=login.root_volume_gib, keep_root_volume=False, tags=tags, opts=child,
            image_id=args.image_id)

        self.instance_ids, self.private_ips = [], []
        for number, hostname in enumerate(login.names(cluster.name), start=1):
            user_data = pulumi.Output.all(args.controller_addr, args.munge_secret_arn, args.bucket_name,
                                          args.metrics_write_url).apply(
                lambda a, h=hostname: within_user_data_limit(h, login_user_data(
                    cloud="aws", cluster=cluster.name, region=cluster.region, hostname=h, controller_addr=a[0],
                    munge_secret=a[1], bucket=a[2], metrics_write_url=a[3],
                    image_contents=node_image.contents_key("aws") if args.image_id else "")))
            instance = aws.ec2.Instance(
                f"{name}-{number}",
                launch_template=aws.ec2.InstanceLaunchTemplateArgs(id=template.id,
                                                                   version=template.latest_version.apply(str)),
                instance_type=login.instance_type,
                subnet_id=args.subnet_id,
                vpc_security_group_ids=[args.nodes_security_group_id, sg.id],
                associate_public_ip_address=False,
                iam_instance_profile=profile.name,
                # IMDSv2 on the instance too: judged on the instance, changeable in place.
                metadata_options=aws.ec2.InstanceMetadataOptionsArgs(
                    http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1),
                user_data=user_data,
                tags={**tags, "Name": hostname},
                volume_tags=tags,
                # As for the head: the AMI the instance reports and later launch template versions
                # are for a new login node, never a reason to replace this one. Its first boot
                # fetches its programs and the munge key: both exist before it is launched.
                opts=pulumi.ResourceOptions(parent=self, depends_on=[read, *programs],
                                            ignore_changes=["ami", "launchTemplate"]))
            self.instance_ids.append(instance.id)
            self.private_ips.append(instance.private_ip)
        self.security_group_id = sg.id
        self.role_name = role.name
        self.register_outputs({"instance_ids": self.instance_ids, "private_ips": self.private_ips})
