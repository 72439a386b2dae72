"""aicluster:gcp:LoginNodes - where a Slurm cluster's users log in (never on the head node).

Private by default: no external IP; SSH arrives through Identity-Aware Proxy TCP forwarding (the
network's `<cluster>-iap-ssh` rule admits 35.235.240.0/20, IAP's range, to every node of the
cluster, login nodes included) or from `network.ssh_ingress_cidrs` (a rule of their own, targeting
the login nodes' tag only; none by default). OS Login decides who may log in (IAM), project SSH
keys are refused. Shielded VM (secure boot, vTPM, integrity monitoring).

Least privilege: a service account of their own (logs and metrics, gcp/identity.py), given the read
of the munge key and of exactly the objects of the configuration bucket it fetches (the head's
published mount script, aicluster-nccl-check and cluster.json: login_files.HEAD_KEYS_READ, through
an IAM condition on the objects' names).

Not stateful (users' files belong on /home), and routine edits never replace them: the user data
depends on the cluster's name, the controller's address, the munge key and the bucket only
(login_files.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from aicluster.catalog import load_catalog
from aicluster.design.model import Cluster, ClusterContext
from aicluster.design.login import LoginDesign
from aicluster.render import node_image
from aicluster.render.login_files import HEAD_KEYS_READ, login_user_data
from aicluster.render.node_local_files import PYXIS_ARTIFACT_PREFIX
from aicluster.gcp.common import grant_objects_under, labels, node_tag
from aicluster.gcp.identity import CLOUD_PLATFORM, NodeIdentity, NodeIdentityArgs

ROLE = "login"
SECRET_ACCESSOR = "roles/secretmanager.secretAccessor"
OBJECT_VIEWER = "roles/storage.objectViewer"


def login_tag(cluster: Cluster) -> str:
    """The network tag of the login nodes: the SSH rule from network.ssh_ingress_cidrs targets it."""
    return f"{cluster.name}-login"


def published_files_condition(bucket: str) -> str:
    """CEL: the objects the login nodes may read, each by its exact name (Cloud Storage resource
    names in IAM conditions, https://cloud.google.com/storage/docs/access-control/iam#conditions)."""
    return " || ".join(f'resource.name == "projects/_/buckets/{bucket}/objects/{key}"' for key in HEAD_KEYS_READ)


@dataclass(frozen=True)
class LoginNodesArgs:
    """The login nodes of a Slurm cluster.

    context: the cluster's name, zone and labels (`ClusterDesign.context`, or your own).
    login: how many, of which machine type, with which boot disk (`ClusterDesign.slurm.login`).
    network: the system network (the SSH firewall rule).
    subnetwork: the system subnetwork their NIC is on.
    controller_addr: slurmctld's address (`SlurmController.controller_addr`).
    munge_secret: the munge key, projects/<p>/secrets/<id> (`SlurmController.munge_secret`).
    bucket_name: the configuration bucket the head's files are published to.
    ssh_ingress_cidrs: the CIDRs allowed SSH besides IAP (`network.ssh_ingress_cidrs`).
    """
    context: ClusterContext
    login: LoginDesign
    network: pulumi.Input[str]
    subnetwork: pulumi.Input[str]
    controller_addr: pulumi.Input[str]
    munge_secret: pulumi.Input[str]
    bucket_name: pulumi.Input[str]
    ssh_ingress_cidrs: tuple[str, ...] = ()
    # The baked node image (gcp/image.py) to boot instead of Ubuntu's; None: Ubuntu, and the login
    # node installs its software at boot.
    image: pulumi.Input[str] | None = None


class LoginNodes(pulumi.ComponentResource):
    private_ips: list[pulumi.Output[str]]

    def __init__(self, name: str, args: LoginNodesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:gcp:LoginNodes", name, None, opts)
        cluster, login = args.context, args.login
        child = pulumi.ResourceOptions(parent=self)
        node_labels = labels(cluster, ROLE)

        identity = NodeIdentity(name, NodeIdentityArgs(cluster, ROLE), opts=child)
        munge_read = gcp.secretmanager.SecretIamMember(f"{name}-munge", secret_id=args.munge_secret,
                                                       role=SECRET_ACCESSOR, member=identity.member, opts=child)
        # Named for the first object it granted (the mount script); kept so the grant's URN stays.
        script_read = gcp.storage.BucketIAMMember(
            f"{name}-mount-script", bucket=args.bucket_name, role=OBJECT_VIEWER, member=identity.member,
            condition=gcp.storage.BucketIAMMemberConditionArgs(
                title="aicluster-login-mount-script",
                description="The head's published files a login node fetches: mount script, fabric check, cluster.json",
                expression=pulumi.Output.from_input(args.bucket_name).apply(published_files_condition)),
            opts=child)
        # pyxis as the head built it, and its SHA-256 (aicluster-containers; node_local_files).
        pyxis_read = grant_objects_under(f"{name}-pyxis", args.bucket_name, PYXIS_ARTIFACT_PREFIX, OBJECT_VIEWER,
                                         identity.member, "aicluster-login-pyxis",
                                         "pyxis as the head built it, and its SHA-256", child)
        if args.ssh_ingress_cidrs:
            gcp.compute.Firewall(
                f"{name}-ssh", name=f"{cluster.name}-login-ssh", network=args.network, direction="INGRESS",
                allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=["22"])],
                source_ranges=list(args.ssh_ingress_cidrs), target_tags=[login_tag(cluster)],
                description=f"aicluster {cluster.name}: SSH to the login nodes (network.ssh_ingress_cidrs)",
                opts=child)

        # The head's image (the same Ubuntu), or the baked node image (gcp/image.py).
        image = args.image or load_catalog().gcp_images["head"].image
        contents = node_image.contents_key("gcp") if args.image else ""   # a baked image: installs nothing
        self.private_ips = []
        for number, hostname in enumerate(login.names(cluster.name), start=1):
            user_data = pulumi.Output.all(args.controller_addr, args.munge_secret, args.bucket_name).apply(
                lambda a, h=hostname: login_user_data(cloud="gcp", cluster=cluster.name, region=cluster.region,
                                                      hostname=h, controller_addr=a[0], munge_secret=a[1],
                                                      bucket=a[2], image_contents=contents))
            instance = gcp.compute.Instance(
                f"{name}-{number}",
                name=hostname,
                zone=cluster.zone,
                machine_type=login.instance_type,
                boot_disk=gcp.compute.InstanceBootDiskArgs(
                    auto_delete=True,   # nothing of value lives on it: /home is shared
                    initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(
                        image=image, size=login.root_volume_gib, type="pd-balanced", labels=node_labels)),
                network_interfaces=[gcp.compute.InstanceNetworkInterfaceArgs(
                    subnetwork=args.subnetwork, nic_type="GVNIC")],   # no access_configs: no external IP
                service_account=gcp.compute.InstanceServiceAccountArgs(email=identity.email, scopes=[CLOUD_PLATFORM]),
                shielded_instance_config=gcp.compute.InstanceShieldedInstanceConfigArgs(
                    enable_secure_boot=True, enable_vtpm=True, enable_integrity_monitoring=True),
                metadata={"user-data": user_data, "enable-oslogin": "TRUE", "block-project-ssh-keys": "TRUE"},
                tags=[node_tag(cluster), login_tag(cluster)],
                labels=node_labels,
                # The image family resolves to a dated image at creation: a newer Ubuntu release is
                # for a new login node, never a reason to replace this one (a new baked image is: it
                # carries the cluster's pins). Its first boot reads the munge key and the published
                # files: the grants exist before it is created.
                opts=pulumi.ResourceOptions(parent=self, depends_on=[munge_read, script_read, pyxis_read],
                                            ignore_changes=[] if args.image else ["bootDisk.initializeParams.image"]))
            self.private_ips.append(instance.network_interfaces.apply(lambda nics: nics[0].network_ip))
        self.register_outputs({"private_ips": self.private_ips})
