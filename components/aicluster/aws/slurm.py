"""Slurm on AWS, in three components, of the shape both clouds share (components/aicluster/
slurm_controller.py: the secrets, the published objects) and with the same texts
(components/aicluster/render/slurm_files.py: the head's cloud-config, the published files and their
manifest); this file holds the AWS parts:

- aicluster:aws:SlurmController: the munge key in Secrets Manager, the configuration bucket, the
  private hosted zone of the node names, the head node (role, security group, launch template,
  instance). Its inputs never depend on pools, node counts, the idle time or accounting, so
  routine edits never stop or replace it (ParallelCluster #6743).
- aicluster:aws:SlurmNodeFiles: the compute nodes' programs (join, health check, secret helper,
  mount script) in the bucket at content-addressed keys, and the compute role's read of exactly
  those keys. EC2 takes at most 16 KB of user data: nodes carry a small bootstrap that fetches
  these, each checked against the SHA-256 it pins (ParallelCluster keeps its node set-up out of
  user data the same way).
- aicluster:aws:SlurmConfiguration: everything that follows the pools: the rendered Slurm files
  and cluster.json published to the bucket with a manifest (the head's aicluster-sync timer pulls
  them and runs `scontrol reconfigure`), and the head's EC2 permissions scoped to the pools'
  launch templates.
"""
from __future__ import annotations

import base64
import json
import posixpath
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from aicluster.design.model import Cluster, ClusterContext, ClusterDesign
from aicluster.design.parts import SlurmDesign
from aicluster.mounts import Mount
from aicluster.render.node_local_files import ARTIFACT_PREFIX, PYXIS_ARTIFACT_PREFIX, node_local_programs
from aicluster.render.node_programs import NODE_PROGRAMS, PROGRAM_MODE, node_files, program_text
from aicluster.render.templates import render
from aicluster.render.slurm_config import node_domain
from aicluster.slurm.controller import SlurmConfigurationShape, SlurmControllerShape, pool_facts
from aicluster.render.slurm_files import (BIN, CONFIG_PREFIX, MOUNT_SCRIPT, BootFile, head_hostname, published_keys,  # noqa: F401
                           slurm_pools)
from aicluster.render.slurm_files import head_user_data as _head_user_data
from aicluster.render.slurm_files import published_files as _published_files
from aicluster.render.slurm_files import ARTIFACT_KEY
from aicluster.render.slurm_files import digest as content_digest
from aicluster.aws.gpu_pool import within_user_data_limit
from aicluster.aws.iam import ec2_assume_role_policy, partition, ssm_core_policy_arn
from aicluster.aws.launch_template import ubuntu_launch_template

NODE_TAG = "aicluster-node"
CLUSTER_TAG = "aicluster-cluster"
POOL_TAG = "aicluster-pool"
RESUME_ID_TAG = "aicluster-resume-id"         # tagged at launch by the resume program (CreateFleet)
BOOTSTRAP_ERROR_TAG = "aicluster-bootstrap-error"   # set by a node on itself when its set-up fails
HEAD_BOOT_PREFIX = f"{CONFIG_PREFIX}boot/"    # the head's own programs, fetched by its user data
COMPUTE_PREFIX = "compute/"                   # the compute nodes' programs: all that they may read
# Programs fetched at boot, installed in BIN: of aicluster.node (with the modules they need,
# render/node_programs.py), and shell programs (name -> template).
_HEAD_PROGRAMS = ("aicluster-secret", "aicluster-sync", "aicluster-install-slurm")
_NODE_NODE_PROGRAMS = NODE_PROGRAMS
_NODE_PROGRAMS = {"aicluster-node-bootstrap": "aicluster-node-bootstrap",
                  "aicluster-gpu-healthcheck": "aicluster-gpu-healthcheck",
                  # slurm.conf TaskProlog: the NCCL environment of every task.
                  "aicluster-task-prolog": "aicluster-task-prolog",
                  # Runs inside a job's batch script (opt-in auto-resume; docs/jobs-and-health.md).
                  "aicluster-resume-job": "aicluster-resume-job",
                  # slurm.conf's second Prolog on clusters with NVL72 pools (IMEX's node list); exits 0
                  # on a node in no NVLink domain. Fetched by every node: one content key, no user data.
                  "aicluster-imex-config": "aicluster-imex-config"}


def secret_prefix(cluster: Cluster) -> str:
    """Every secret of the cluster lives under this name, so IAM can scope reads to it."""
    return f"aicluster/{cluster.name}/"


# --- programs fetched at boot ------------------------------------------------------------------
# User data carries aicluster-fetch and a list of {key, path, mode, sha256}; the programs live in
# the configuration bucket (private, encrypted) at keys named by their SHA-256. A new content is a
# new object, never a rewrite of one a booting node may be reading, so a node installs exactly what
# its launch template was rendered with, and a routine edit that changes no program changes no
# key (the head node's user data stays byte-identical).

def boot_file(prefix: str, name: str, path: str, content: str | bytes, mode: str = PROGRAM_MODE) -> dict:
    """One entry of a fetch list: the content-addressed key, ending in the SHA-256 aicluster-fetch
    checks (of the bytes it writes: text as UTF-8, the archive of aicluster.node as it is), and
    where it is installed. The digest is not repeated beside the key: user data holds 16 KB."""
    digest = content_digest(content)
    return {"key": f"{prefix}{name}/{digest}", "path": path, "mode": mode}


def object_body(content: pulumi.Input[str] | bytes) -> dict:
    """The S3 object's body argument: text as `content`, bytes (the archive of aicluster.node) as
    `content_base64`, which S3 stores decoded, so the object holds exactly the bytes a node checks."""
    if isinstance(content, bytes):
        return {"content_base64": base64.b64encode(content).decode()}
    return {"content": content}


def published_body(key: str, content: pulumi.Output) -> dict:
    """object_body of a published file, whose content is known once the cluster's outputs are:
    ARTIFACT_KEY's is the archive (bytes), every other key's is text."""
    if key == ARTIFACT_KEY:
        return {"content_base64": content.apply(lambda c: base64.b64encode(c).decode())}
    return {"content": content}


def head_boot_files() -> list[tuple[dict, str | bytes]]:
    """(entry, content) of the head node's own programs: the sync, the secret helper and the Slurm
    installer."""
    return [(boot_file(HEAD_BOOT_PREFIX, _boot_name(path), path, text, mode), text)
            for path, text, mode in node_files(_HEAD_PROGRAMS, BIN)]


def _boot_name(path: str) -> str:
    """The key's name part: a program's or the archive's file name (aicluster-sync,
    aicluster-node-<sha12>.pyz)."""
    return posixpath.basename(path)


def node_program_files() -> list[tuple[dict, str | bytes]]:
    """(entry, content) of the compute nodes' programs that do not depend on the cluster."""
    # | node_local_programs(): /scratch on local NVMe, enroot and pyxis (node_local_files.py).
    texts = {name: program_text(src) for name, src in _NODE_PROGRAMS.items()} | node_local_programs()
    return ([(boot_file(COMPUTE_PREFIX, _boot_name(path), path, text, mode), text)
             for path, text, mode in node_files(_NODE_NODE_PROGRAMS, BIN)]
            + [(boot_file(COMPUTE_PREFIX, name, f"{BIN}/{name}", text), text) for name, text in texts.items()])


def node_mount_file(mounts: list[Mount]) -> tuple[dict, str]:
    """(entry, content) of the compute nodes' mount script (changes when a filesystem is added)."""
    text = render("scripts/mount-storage.sh.j2", mounts=list(mounts))
    return boot_file(COMPUTE_PREFIX, "aicluster-mount-storage", MOUNT_SCRIPT, text), text


def fetch_list(cluster: Cluster, bucket: str, files: list[dict]) -> str:
    """What aicluster-fetch reads (/etc/aicluster/*-files.json on the node)."""
    head = json.dumps({"bucket": bucket, "region": cluster.region})[:-1]
    return head + ', "files": [\n' + ",\n".join(json.dumps(f) for f in files) + "\n]}\n"


def _boot_object(name: str, bucket: pulumi.Input[str], key: pulumi.Input[str], content: pulumi.Input[str] | bytes,
                 parent: pulumi.Resource) -> aws.s3.BucketObjectv2:
    # Kept when replaced (a new content is a new key): a node launched from the previous version of
    # its launch template may still be fetching the old one. The bucket's force_destroy removes it.
    return aws.s3.BucketObjectv2(name, bucket=bucket, key=key, **object_body(content), server_side_encryption="AES256",
                                 opts=pulumi.ResourceOptions(parent=parent, retain_on_delete=True))


@dataclass(frozen=True)
class SlurmControllerArgs:
    """The Slurm controller: secrets, configuration bucket, node-name zone, head node.

    context: the cluster's name, region and tags: `ClusterDesign.context`, or a `ClusterContext`
        of your own.
    slurm: the Slurm design (`ClusterDesign.slurm`): the head's instance type, root volume and
        public IP, and whether accounting is on. Nothing of pools, storage or node counts reaches
        the controller, so routine edits never touch the head node.
    vpc_id: the VPC (the head's security group, the private zone of node names).
    subnet_id: the private cluster subnet, where the head node goes.
    public_subnet_id: the public subnet, used only when `slurm.head_public_ip` is set; None (an
        existing network) keeps the head private.
    nodes_security_group_id: the compute nodes' group, which the head joins (slurmctld and slurmd
        talk within it).
    compute_role_name: the compute nodes' role (`NodeIdentity`), given the read of the munge key.
    ssh_ingress_cidrs: the CIDRs the head takes SSH from (`network.ssh_ingress_cidrs`); none by
        default: reach the head with SSM Session Manager.
    """
    context: ClusterContext
    slurm: SlurmDesign
    vpc_id: pulumi.Input[str]
    subnet_id: pulumi.Input[str]
    public_subnet_id: pulumi.Input[str] | None
    nodes_security_group_id: pulumi.Input[str]
    compute_role_name: pulumi.Input[str]
    ssh_ingress_cidrs: tuple[str, ...] = ()


class SlurmController(SlurmControllerShape):
    controller_addr: pulumi.Output[str]
    munge_secret_arn: pulumi.Output[str]
    bucket_name: pulumi.Output[str]
    bucket_arn: pulumi.Output[str]
    role_name: pulumi.Output[str]
    role_arn: pulumi.Output[str]
    accounting_secret_arn: pulumi.Output[str] | None
    dns_zone_id: pulumi.Output[str]               # the private hosted zone of the node names
    head_security_group_id: pulumi.Output[str]
    dns_domain: str

    def __init__(self, name: str, args: SlurmControllerArgs, opts: pulumi.ResourceOptions | None = None):
        cluster, slurm = args.context, args.slurm
        # The munge key and the accounting password, in Secrets Manager under the cluster's prefix.
        super().__init__("aicluster:aws:SlurmController", name, cluster, slurm,
                         lambda *a: _stored_secret(cluster, *a), opts)
        child, munge = self.child, self.munge
        head_tags = cluster.labels("head")
        self.munge_secret_arn = munge.arn
        self.accounting_secret_arn = self.accounting.arn if self.accounting else None

        bucket = aws.s3.Bucket(f"{name}-config", force_destroy=True, tags=head_tags, opts=child)
        aws.s3.BucketPublicAccessBlock(f"{name}-config-private", bucket=bucket.id, block_public_acls=True,
                                       block_public_policy=True, ignore_public_acls=True,
                                       restrict_public_buckets=True, opts=child)
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-config-encryption", bucket=bucket.id,
            rules=[aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                apply_server_side_encryption_by_default=aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                    sse_algorithm="AES256"))],
            opts=child)
        aws.s3.BucketVersioning(f"{name}-config-versions", bucket=bucket.id,
                                versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(
                                    status="Enabled"),
                                opts=child)
        self.bucket_name, self.bucket_arn = bucket.bucket, bucket.arn

        # Compute nodes may read the munge key and nothing else of the cluster's secrets.
        aws.iam.RolePolicy(f"{name}-compute-munge", role=args.compute_role_name,
                           policy=munge.arn.apply(lambda arn: json.dumps({
                               "Version": "2012-10-17",
                               "Statement": [{"Sid": "ReadMungeKey", "Effect": "Allow",
                                              "Action": "secretsmanager:GetSecretValue", "Resource": arn}]})),
                           opts=child)

        role = aws.iam.Role(f"{name}-head-role", description=f"aicluster {cluster.name}: Slurm head node",
                            assume_role_policy=ec2_assume_role_policy(cluster.region), tags=head_tags, opts=child)
        aws.iam.RolePolicyAttachment(
            f"{name}-head-ssm", role=role.name,
            policy_arn=ssm_core_policy_arn(cluster.region), opts=child)
        head_read = aws.iam.RolePolicy(f"{name}-head-read", role=role.name,
                                       policy=pulumi.Output.all(role.arn, bucket.arn).apply(
                                           lambda a: json.dumps(head_read_policy(cluster, account_of(a[0]), a[1]))),
                                       opts=child)
        # pyxis is built once, on the head, and published for the nodes (node_local_files).
        aws.iam.RolePolicy(f"{name}-head-artifacts", role=role.name,
                           policy=bucket.arn.apply(lambda arn: json.dumps(head_artifacts_policy(arn))), opts=child)
        # A node whose set-up fails says why on its own instance, in one tag and nothing more
        # (aicluster-node-bootstrap); the resume-fail and reconcile paths read it from the head.
        aws.iam.RolePolicy(f"{name}-compute-bootstrap-error", role=args.compute_role_name,
                           policy=role.arn.apply(lambda arn: json.dumps(
                               compute_bootstrap_error_policy(cluster, account_of(arn)))),
                           opts=child)
        profile = aws.iam.InstanceProfile(f"{name}-head-profile", role=role.name, tags=head_tags, opts=child)
        self.role_name, self.role_arn = role.name, role.arn

        # Node names resolve through this zone (SlurmctldParameters=cloud_dns), as in ParallelCluster
        # (<cluster>.pcluster.): the resume program writes <node>.<domain> -> private IP before it
        # sets the node's address, the suspend program deletes the record; every node searches the
        # domain. It depends on the cluster name and the VPC only. Control plane, not data: the
        # records are rewritten at every resume, and force_destroy lets `pulumi destroy` delete the
        # zone while records the power programs wrote are still in it.
        self.dns_domain = node_domain(cluster.name)
        zone = aws.route53.Zone(
            f"{name}-dns", name=self.dns_domain,
            comment=f"aicluster {cluster.name}: Slurm node names, written by the resume program",
            vpcs=[aws.route53.ZoneVpcArgs(vpc_id=args.vpc_id, vpc_region=cluster.region)],
            force_destroy=True, tags=cluster.labels("control-plane"), opts=child)
        self.dns_zone_id = zone.zone_id
        aws.iam.RolePolicy(f"{name}-head-dns", role=role.name,
                           policy=zone.zone_id.apply(lambda z: json.dumps(head_dns_policy(cluster, z))), opts=child)

        ssh_rules = [aws.ec2.SecurityGroupIngressArgs(protocol="tcp", from_port=22, to_port=22, cidr_blocks=[cidr],
                                                      description="SSH (network.ssh_ingress_cidrs)")
                     for cidr in args.ssh_ingress_cidrs]
        head_sg = aws.ec2.SecurityGroup(
            f"{name}-head", description=f"aicluster {cluster.name}: head node (SSH only from the CIDRs the spec names)",
            vpc_id=args.vpc_id, ingress=ssh_rules, tags=head_tags, opts=child)

        # The head's programs (the sync, the secret helper) are fetched by its user data, which
        # stays a small bootstrap (EC2 takes at most 16 KB) and names them by SHA-256.
        boot = [_boot_object(f"{name}-boot-{entry['path'].rsplit('/', 1)[1]}", bucket.bucket, entry["key"], text, self)
                for entry, text in head_boot_files()]
        # No filesystem among its inputs: the head node is created while FSx still is (a first
        # `pulumi up` does not wait for one after the other; ParallelCluster #4211) and adding a
        # filesystem leaves it untouched. It mounts them when SlurmConfiguration publishes their
        # mount script.
        user_data = pulumi.Output.all(bucket.bucket, munge.arn, *[o.key for o in boot]).apply(
            lambda a: within_user_data_limit(f"{name}-head", head_user_data(cluster, bucket=a[0], munge_secret=a[1])))
        public = slurm.head_public_ip and args.public_subnet_id is not None
        # The launch template (launch_template.py says why one): the root volume survives an
        # accidental termination, slurmctld's state lives on it.
        template = ubuntu_launch_template(
            f"{name}-head-template", description=f"aicluster {cluster.name}: Slurm head node (image, root volume, "
                                                 "metadata options)",
            root_volume_gib=slurm.head_root_volume_gib, keep_root_volume=True, tags=head_tags, opts=child)
        head = aws.ec2.Instance(
            f"{name}-head",
            launch_template=aws.ec2.InstanceLaunchTemplateArgs(id=template.id,
                                                               version=template.latest_version.apply(str)),
            instance_type=slurm.head_instance_type,
            subnet_id=args.public_subnet_id if public else args.subnet_id,
            vpc_security_group_ids=[args.nodes_security_group_id, head_sg.id],
            associate_public_ip_address=public,
            iam_instance_profile=profile.name,
            # IMDSv2 on the instance as well: it can be changed in place on a running head node
            # (the template is read at launch only) and is judged on the instance itself.
            metadata_options=aws.ec2.InstanceMetadataOptionsArgs(
                http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1),
            user_data=user_data,
            # slurm.head_node.on_delete (docs/teardown.md): termination protection only under retain,
            # else `aicluster destroy` could not terminate it (ModifyInstanceAttribute: in place).
            disable_api_termination=slurm.head_on_delete == "retain",
            tags={**head_tags, "Name": head_hostname(cluster.name)},
            volume_tags=head_tags,
            # The instance reports the AMI it was launched with: "ami" is ignored so the provider never
            # plans a replacement for it. The launch template is read at launch only: a later
            # version (a bigger root volume) is for a new head node; the provider would replace this
            # one for it (`launch_template` forces a new instance), so it is ignored too.
            # Its first boot reads the bucket: the read permission exists before it is launched.
            opts=pulumi.ResourceOptions(parent=self, protect=True, retain_on_delete=slurm.head_on_delete == "retain",
                                        depends_on=[head_read],
                                        ignore_changes=["ami", "launchTemplate"]),
        )
        self.controller_addr = head.private_ip
        self.head_security_group_id = head_sg.id     # the accounting database admits the head only
        self.register_outputs({"controller_addr": head.private_ip, "bucket": bucket.bucket,
                               "munge_secret_arn": munge.arn, "dns_zone_id": zone.zone_id})


def _stored_secret(cluster: ClusterContext, name: str, key: str, what: str, value: pulumi.Input[str],
                   opts: pulumi.ResourceOptions) -> aws.secretsmanager.Secret:
    """A Secrets Manager secret under the cluster's prefix, holding `value` (secret in Pulumi)."""
    secret = aws.secretsmanager.Secret(name, name=f"{secret_prefix(cluster)}{key}",
                                       description=f"aicluster {cluster.name}: {what}",
                                       recovery_window_in_days=7, tags=cluster.labels("head"), opts=opts)
    aws.secretsmanager.SecretVersion(f"{name}-value", secret_id=secret.id, secret_string=value, opts=opts)
    return secret


def account_of(arn: str) -> str:
    return arn.split(":")[4]


def head_read_policy(cluster: Cluster, account: str, bucket_arn: str) -> dict:
    """What the head reads: its published files and the cluster's own secrets, nothing else."""
    part = partition(cluster.region)
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "ReadPublishedConfiguration", "Effect": "Allow", "Action": "s3:GetObject",
         "Resource": f"{bucket_arn}/{CONFIG_PREFIX}*"},
        {"Sid": "ListPublishedConfiguration", "Effect": "Allow", "Action": "s3:ListBucket",
         "Resource": bucket_arn, "Condition": {"StringLike": {"s3:prefix": [f"{CONFIG_PREFIX}*"]}}},
        {"Sid": "ReadClusterSecrets", "Effect": "Allow", "Action": "secretsmanager:GetSecretValue",
         "Resource": f"arn:{part}:secretsmanager:{cluster.region}:{account}:secret:{secret_prefix(cluster)}*"},
    ]}


def head_artifacts_policy(bucket_arn: str) -> dict:
    """What the head builds for the nodes (pyxis, aicluster-pyxis-build): it writes and reads under
    the artifacts prefix of its bucket, nothing else of it. The listing (under that prefix only)
    lets S3 answer NoSuchKey, not AccessDenied, for a digest not published yet."""
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "PublishArtifacts", "Effect": "Allow", "Action": ["s3:PutObject", "s3:GetObject"],
         "Resource": f"{bucket_arn}/{ARTIFACT_PREFIX}*"},
        {"Sid": "ListArtifacts", "Effect": "Allow", "Action": "s3:ListBucket",
         "Resource": bucket_arn, "Condition": {"StringLike": {"s3:prefix": [f"{ARTIFACT_PREFIX}*"]}}},
    ]}


def head_dns_policy(cluster: Cluster, zone_id: str) -> dict:
    """Write and delete A records in the cluster's own zone of node names, nothing else: not its
    SOA or NS records, not another zone (the resume and suspend programs)."""
    zone = f"arn:{partition(cluster.region)}:route53:::hostedzone/{zone_id}"
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "WriteNodeRecords", "Effect": "Allow", "Action": "route53:ChangeResourceRecordSets",
         "Resource": zone, "Condition": {"ForAllValues:StringEquals": {
             "route53:ChangeResourceRecordSetsRecordTypes": ["A"],
             "route53:ChangeResourceRecordSetsActions": ["UPSERT", "DELETE"]}}},
        # A DELETE must repeat the record's current value: the suspend program reads it first.
        {"Sid": "ReadNodeRecords", "Effect": "Allow", "Action": "route53:ListResourceRecordSets", "Resource": zone},
    ]}


def compute_bootstrap_error_policy(cluster: Cluster, account: str) -> dict:
    """A compute node may set the aicluster-bootstrap-error tag, and only that tag, on instances of
    its own cluster: no other tag (not the node name, not the cluster tag that scopes the head's
    terminations), no other resource, no deletion. ForAllValues alone also holds for a request
    without tags, so the Null condition demands some
    (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-single-vs-multi-valued-context-keys.html)."""
    ec2 = f"arn:{partition(cluster.region)}:ec2:{cluster.region}:{account}"
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "ReportBootstrapError", "Effect": "Allow", "Action": "ec2:CreateTags",
         "Resource": f"{ec2}:instance/*",
         "Condition": {"StringEquals": {f"ec2:ResourceTag/{CLUSTER_TAG}": cluster.name},
                       "ForAllValues:StringEquals": {"aws:TagKeys": [BOOTSTRAP_ERROR_TAG]},
                       "Null": {"aws:TagKeys": "false"}}},
    ]}


def head_fleet_policy(cluster: Cluster, account: str, launch_template_ids: list[str],
                      compute_role_arn: str) -> dict:
    """Launch from this cluster's launch templates only, tag what it launches, terminate only
    instances tagged for this cluster (the resume and suspend programs)."""
    part, region = partition(cluster.region), cluster.region
    ec2 = f"arn:{part}:ec2:{region}:{account}"
    tagged_request = {"StringEquals": {f"aws:RequestTag/{CLUSTER_TAG}": cluster.name}}
    tagged_resource = {"StringEquals": {f"aws:ResourceTag/{CLUSTER_TAG}": cluster.name}}
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "LaunchFromClusterTemplates", "Effect": "Allow",
         "Action": ["ec2:CreateFleet", "ec2:RunInstances"],
         "Resource": [f"{ec2}:launch-template/{lt}" for lt in launch_template_ids]},
        {"Sid": "CreateTaggedInstances", "Effect": "Allow",
         "Action": ["ec2:CreateFleet", "ec2:RunInstances"],
         "Resource": [f"{ec2}:instance/*", f"{ec2}:fleet/*"],
         "Condition": tagged_request},
        # Volumes and interfaces come only with an instance (which must carry the cluster tag);
        # their tags come from the launch template, which a request-tag condition may not see.
        {"Sid": "LaunchIntoClusterNetwork", "Effect": "Allow",
         "Action": ["ec2:CreateFleet", "ec2:RunInstances"],
         "Resource": [f"{ec2}:volume/*", f"{ec2}:network-interface/*", f"{ec2}:subnet/*",
                      f"{ec2}:security-group/*", f"arn:{part}:ec2:{region}::image/*",
                      f"{ec2}:placement-group/*", f"{ec2}:capacity-reservation/*"]},
        {"Sid": "TagAtLaunch", "Effect": "Allow", "Action": "ec2:CreateTags",
         "Resource": [f"{ec2}:instance/*", f"{ec2}:volume/*", f"{ec2}:network-interface/*", f"{ec2}:fleet/*"],
         "Condition": {"StringEquals": {"ec2:CreateAction": ["CreateFleet", "RunInstances"]}}},
        {"Sid": "NameClusterInstances", "Effect": "Allow", "Action": "ec2:CreateTags",
         "Resource": f"{ec2}:instance/*", "Condition": tagged_resource},
        {"Sid": "TerminateClusterInstances", "Effect": "Allow", "Action": "ec2:TerminateInstances",
         "Resource": f"{ec2}:instance/*", "Condition": tagged_resource},
        # EC2 Describe calls cannot be scoped to resources. DescribeInstanceStatus (scheduled
        # events) and DescribeSpotInstanceRequests (interruption notices): the reconcile loop.
        {"Sid": "Describe", "Effect": "Allow",
         "Action": ["ec2:DescribeInstances", "ec2:DescribeInstanceStatus", "ec2:DescribeSpotInstanceRequests",
                    "ec2:DescribeLaunchTemplates", "ec2:DescribeLaunchTemplateVersions",
                    "ec2:DescribeCapacityReservations"],
         "Resource": "*"},
        {"Sid": "PassComputeRole", "Effect": "Allow", "Action": "iam:PassRole", "Resource": compute_role_arn,
         "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}}},
    ]}


def head_user_data(context: ClusterContext, *, bucket: str, munge_secret: str) -> str:
    """The head fetches its programs (EC2 takes at most 16 KB of user data): cloud-init writes only
    aicluster-fetch and the list of what it fetches, each program named by its SHA-256."""
    fetch = [BootFile("/etc/aicluster/head-files.json", fetch_list(context, bucket, [e for e, _ in head_boot_files()]),
                      "0644"),
             *[BootFile(path, text, mode) for path, text, mode in node_files(("aicluster-fetch",), BIN)]]
    return _head_user_data(context, cloud="aws", bucket=bucket, munge_secret=munge_secret, sync={}, boot_files=fetch)


def compute_read_policy(bucket_arn: str) -> dict:
    """Compute nodes read their own programs and pyxis as the head built it (node_local_files), and
    nothing else of the bucket: not the head's configuration, not cluster.json, and nothing they
    could write."""
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "ReadNodePrograms", "Effect": "Allow", "Action": "s3:GetObject",
         "Resource": f"{bucket_arn}/{COMPUTE_PREFIX}*"},
        {"Sid": "ReadPyxis", "Effect": "Allow", "Action": "s3:GetObject",
         "Resource": f"{bucket_arn}/{PYXIS_ARTIFACT_PREFIX}*"},
    ]}


@dataclass(frozen=True)
class SlurmNodeFilesArgs:
    """The compute nodes' programs in the configuration bucket, and the nodes' read of them. Reads
    nothing of the design: the programs are the same for every cluster but for the mount script.

    controller: the cluster's `SlurmController`: its configuration bucket holds the programs.
    compute_role_name: the compute nodes' role (`NodeIdentity`), given the read of exactly the
        nodes' programs.
    mounts: the filesystems the nodes mount at boot (`list[Mount]`, e.g. `LustreFilesystem.mount`
        of each); default none.
    """
    controller: SlurmController
    compute_role_name: pulumi.Input[str]
    mounts: pulumi.Input[list] = ()


class SlurmNodeFiles(pulumi.ComponentResource):
    """The compute nodes' programs in the configuration bucket and the compute role's read of them.
    `files` (the fetch list of the nodes' user data) resolves once every object and the permission
    exist, so no launch template names a program a node could not fetch yet."""

    files: pulumi.Output[list]

    def __init__(self, name: str, args: SlurmNodeFilesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:aws:SlurmNodeFiles", name, None, opts)
        controller = args.controller
        programs = node_program_files()
        objects = [_boot_object(f"{name}-{entry['path'].rsplit('/', 1)[1]}", controller.bucket_name, entry["key"],
                                text, self) for entry, text in programs]
        mount = pulumi.Output.from_input(args.mounts).apply(lambda m: node_mount_file(list(m)))
        objects.append(_boot_object(f"{name}-aicluster-mount-storage", controller.bucket_name,
                                    mount.apply(lambda f: f[0]["key"]), mount.apply(lambda f: f[1]), self))
        read = aws.iam.RolePolicy(f"{name}-compute-read", role=args.compute_role_name,
                                  policy=controller.bucket_arn.apply(lambda arn: json.dumps(compute_read_policy(arn))),
                                  opts=pulumi.ResourceOptions(parent=self))
        self.files = pulumi.Output.all(mount, read.id, *[o.key for o in objects]).apply(
            lambda a: [entry for entry, _ in programs] + [a[0][0]])
        self.register_outputs({"files": self.files})


@dataclass(frozen=True)
class SlurmConfigurationArgs:
    """Everything that follows the pools: the published Slurm files and the head's right to launch
    the pools' nodes.

    design: the whole cluster design, and genuinely so: it renders slurm.conf and its companions
        (nodesets, partitions, topology, accounting: `slurm`; every Slurm pool's instance type,
        capacity and sizes: `pools`) and cluster.json (name, region), and scopes the head's EC2
        permissions to the cluster (name, region).
    controller: the cluster's `SlurmController` (its address, bucket, role, secrets, zone).
    compute_role_arn: the compute nodes' role, which the head may pass to the instances it launches.
    pools: pool name -> its `GpuPool` (launch template, placement group), for every Slurm pool.
    subnet_id: the private cluster subnet the resume program launches nodes into.
    mounts: the filesystems the head mounts once they are published (`list[Mount]`); default none.
    accounting_endpoint: the managed accounting database's {"host": ...} (`SlurmdbdDatabase`);
        None with the database on the head or accounting off.
    metrics_write_url: the AMP workspace's remote-write URL (`ObservabilityBackend.remote_write_url`),
        where the head's metrics agent writes; None leaves the head unmonitored (its set-up says so).
    """
    design: ClusterDesign
    controller: SlurmController
    compute_role_arn: pulumi.Input[str]
    pools: dict
    subnet_id: pulumi.Input[str]
    mounts: pulumi.Input[list] = ()
    accounting_endpoint: pulumi.Input[dict] | None = None
    metrics_write_url: pulumi.Input[str] | None = None


class SlurmConfiguration(SlurmConfigurationShape):
    def __init__(self, name: str, args: SlurmConfigurationArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:aws:SlurmConfiguration", name, opts)
        design, controller, child = args.design, args.controller, self.child
        pools = pool_facts(args.pools, "launch_template_id", "placement_group_name", "launch_template_version")
        files = pulumi.Output.all(controller.controller_addr, args.subnet_id, pools,
                                  controller.accounting_secret_arn or "", args.mounts, controller.dns_zone_id,
                                  args.accounting_endpoint, args.metrics_write_url).apply(
            lambda a: published_files(design, controller_addr=a[0], subnet_id=a[1],
                                      launch_templates=a[2]["launch_template_id"],
                                      placement_groups=a[2]["placement_group_name"],
                                      launch_template_versions=a[2]["launch_template_version"],
                                      accounting_secret=a[3] or None, mounts=list(a[4]), hosted_zone_id=a[5],
                                      accounting_endpoint=a[6], metrics_write_url=a[7]))
        self.publish(PUBLISHED_KEYS, files, lambda key, content: aws.s3.BucketObjectv2(
            f"{name}-{key.replace('/', '-').replace('.', '-')}", bucket=controller.bucket_name,
            key=CONFIG_PREFIX + key, **published_body(key, content), server_side_encryption="AES256", opts=child))
        aws.iam.RolePolicy(
            f"{name}-head-fleet", role=controller.role_name,
            policy=pulumi.Output.all(controller.role_arn, args.compute_role_arn,
                                     pool_facts(args.pools, "launch_template_id")).apply(
                lambda a: json.dumps(head_fleet_policy(design, account_of(a[0]), list(a[2]["launch_template_id"].values()),
                                                       a[1]))),
            opts=child)
        self.register_outputs({})


# The published files: S3 key (under CONFIG_PREFIX) -> where aicluster-sync installs it
# (components/aicluster/render/slurm_files.py), with the AWS power program.
_PROGRAMS = ("aicluster-power.py",)
PUBLISHED_KEYS = published_keys(_PROGRAMS)


def published_files(design: ClusterDesign, *, controller_addr: str, subnet_id: str, launch_templates: dict,
                    placement_groups: dict, accounting_secret: str | None, hosted_zone_id: str,
                    mounts: list[Mount] = (), accounting_endpoint: dict | None = None,
                    metrics_write_url: str | None = None,
                    launch_template_versions: dict | None = None) -> dict[str, str]:
    """The head's published files. `launch_template_versions`: pool -> its launch template's
    latest_version (`pulumi up` makes a new one for every change of image, user data or type): the
    version the resume program launches exactly and the reconcile loop rolls the pool's nodes to
    (aicluster.node.reconcile, roll_nodes); None launches "$Latest" and rolls nothing."""
    versions = launch_template_versions or {}
    cluster = {
        "cluster_tag": CLUSTER_TAG, "node_tag": NODE_TAG, "pool_tag": POOL_TAG, "hosted_zone_id": hosted_zone_id,
        "pools": {p.name: {
            "launch_template_id": launch_templates[p.name], "instance_type": p.instance.name,
            "subnet_id": subnet_id, "placement_group": placement_groups[p.name] or None,
            "capacity": p.capacity.type, "reservation_id": p.capacity.reservation_id,
            "min_nodes": p.min_nodes, "max_nodes": p.max_nodes,
            "version": str(versions[p.name]) if versions.get(p.name) not in (None, "") else None,
            "max_unavailable": p.max_unavailable,
        } for p in slurm_pools(design)},
    }
    return _published_files(design, controller_addr=controller_addr, cluster=cluster, programs=_PROGRAMS,
                            power_program="aicluster-power.py", accounting_secret=accounting_secret, mounts=mounts,
                            accounting_endpoint=accounting_endpoint, metrics_write_url=metrics_write_url)
