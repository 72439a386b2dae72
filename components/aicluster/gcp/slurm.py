"""Slurm on GCP, in two components, as on AWS (components/aicluster/aws/slurm.py), of the shape both
clouds share (components/aicluster/slurm/controller.py: the secrets, the published objects) and
with the same texts (components/aicluster/render/slurm_files.py: the head's cloud-config, the published
files and their manifest); this file holds the GCP parts:

- aicluster:gcp:SlurmController: the munge key in Secret Manager, the configuration bucket, the
  Cloud DNS private zone of the node names, the head node's service account and the head node
  itself. Its inputs never depend on pools, node
  counts, the idle time, accounting or the filesystems, so routine edits never stop or replace it,
  and it is created while the filesystems are (ParallelCluster #4211: a head node that waited on
  FSx timed out): it mounts them when their mount script is published.
- aicluster:gcp:SlurmConfiguration: everything that follows the pools: the same rendered Slurm
  files as on AWS plus cluster.json, published to Cloud Storage with a manifest (the head's
  aicluster-sync timer pulls them), and the head's right to create and delete this cluster's
  instances: a custom role holding only the calls the power programs make, bound with a
  condition on the instance names (instance_prefix: <cluster>-<digest>-...), plus actAs on the
  compute service account only.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from aicluster.catalog import load_catalog
from aicluster.design.model import Cluster, ClusterContext, ClusterDesign
from aicluster.design.parts import SlurmDesign
from aicluster.mounts import Mount
from aicluster.render.node_local_files import ARTIFACT_PREFIX, PYXIS_ARTIFACT_PREFIX
from aicluster.render.node_programs import artifact_file, node_files
from aicluster.render.slurm_config import node_domain
from aicluster.slurm.controller import SlurmConfigurationShape, SlurmControllerShape, pool_facts
from aicluster.render.slurm_files import BIN, CONFIG_PREFIX, BootFile, Published, head_hostname, published_keys  # noqa: F401
from aicluster.render.slurm_files import head_user_data as _head_user_data
from aicluster.render.slurm_files import published_files as _published_files
from aicluster.render.slurm_files import ARTIFACT_KEY, published_archive, slurm_pools
from aicluster.gcp.common import CLUSTER_LABEL, POOL_LABEL, grant_objects_under, head_tag, labels, node_tag, project, short_name
from aicluster.gcp.identity import CLOUD_PLATFORM, NodeIdentity, NodeIdentityArgs

SECRET_ACCESSOR = "roles/secretmanager.secretAccessor"
OBJECT_VIEWER, OBJECT_USER = "roles/storage.objectViewer", "roles/storage.objectUser"

# What the power programs call (aicluster-gcp-power.py, aicluster.node.gcp.Compute) and what creating
# an instance from a template needs; nothing else. Instance calls are further limited by the
# binding's condition to instances named for this cluster. setLabels: bulkInsert labels the
# instances at creation (cluster, pool, resume id). getGuestAttributes: the reconcile loop reads
# why a node's set-up failed (guest attribute aicluster/bootstrap-error, instances.getGuestAttributes).
HEAD_PERMISSIONS = (
    "compute.instances.create", "compute.instances.delete", "compute.instances.get", "compute.instances.list",
    "compute.instances.getGuestAttributes",
    "compute.instances.setLabels", "compute.instances.setMetadata", "compute.instances.setServiceAccount",
    "compute.instances.setTags", "compute.disks.create", "compute.disks.setLabels",
    "compute.instanceTemplates.useReadOnly", "compute.subnetworks.use", "compute.resourcePolicies.use",
    "compute.images.useReadOnly", "compute.zoneOperations.get", "compute.zoneOperations.list",
)
LUSTRE_IMPORT_PERMISSIONS = ("lustre.instances.importData", "lustre.operations.get")
# What the power programs need to write and delete node-name records (aicluster.node.gcp.Dns: batched
# changes, and rrsets list: a deletion must repeat the record), granted on the cluster's own zone only.
DNS_PERMISSIONS = ("dns.changes.create", "dns.resourceRecordSets.create", "dns.resourceRecordSets.delete",
                   "dns.resourceRecordSets.list", "dns.resourceRecordSets.update")


# Compute Engine instance names: 1-63 characters, [a-z]([-a-z0-9]*[a-z0-9])?
# (https://cloud.google.com/compute/docs/naming-resources#resource-name-format).
INSTANCE_NAME_MAX = 63
# The longest Slurm node name the spec allows: a pool name of 24 characters, '-', and the number of
# a node of a pool of max_nodes 100,000 (6 digits) (spec.PoolSpec; a test reads both off the spec).
LONGEST_NODE_NAME = 24 + 1 + 6
INSTANCE_DIGEST = 4                 # hex characters of the cluster name's SHA-256 in the prefix


def instance_prefix(cluster: Cluster) -> str:
    """Compute instances are named <prefix><node>, the prefix <cluster>-<digest>-, the digest four
    hex characters of the cluster name's SHA-256. The node reads its Slurm name from its instance
    name less the prefix. Without the digest two clusters of a zone could name an instance alike
    (cluster a3mega-train's pool b-gpu and cluster a3mega-train-b's pool gpu: a3mega-train-b-gpu-1)
    and one cluster's resume deleted or adopted the other's VM. With it, a name of one cluster is a
    name of another only if the other's name begins with the first's prefix (a3mega-train-c872-...),
    or, for names cut short (below), their digests collide; and the power programs check the
    cluster label before they delete or adopt anything, so even then nothing of another cluster
    is touched.

    The prefix takes no room the spec's check (<cluster>-<pool>-<max_nodes> within 63 characters)
    does not leave: at most 32 characters (what the longest node name leaves), or else as long as
    the cluster's name and a dash, the name cut short for the digest (names of 27 characters or
    more). So every node the spec accepts has an instance name of 63 characters or fewer."""
    digest = hashlib.sha256(cluster.name.encode()).hexdigest()[:INSTANCE_DIGEST]
    room = max(INSTANCE_NAME_MAX - LONGEST_NODE_NAME, len(cluster.name) + 1) - len(digest) - 2
    return f"{cluster.name[:room].rstrip('-')}-{digest}-"


def dns_zone_name(cluster: Cluster) -> str:
    """The Cloud DNS managed zone of the cluster's node names (1-63 characters, a letter first)."""
    return short_name(f"{cluster.name}-nodes", 63)


def secret_id(cluster: Cluster, key: str) -> str:
    return f"aicluster-{cluster.name}-{key}"


@dataclass(frozen=True)
class SlurmControllerArgs:
    """The Slurm head node and what it holds: the munge key (and slurmdbd password) in Secret
    Manager, the configuration bucket, the node-name DNS zone and the head's service account.

    context: the cluster's name, region, zone and labels: `ClusterDesign.context`, or a
        `ClusterContext` of your own.
    slurm: the Slurm design (`ClusterDesign.slurm`): the head's machine type, boot disk and
        public IP, and whether accounting is on. Nothing of pools, node counts or filesystems
        reaches the controller, so routine edits never replace the head.
    subnetwork: the system subnetwork the head's NIC is on (Network.subnetwork_self_link).
    compute_identity: the compute nodes' service account (NodeIdentity): granted the munge key.
    network: the system network, projects/<p>/global/networks/<name> (Network.network_id): the
        node-name zone is visible to it.
    own_network: whether aicluster created that network (`network.create_vpc`); the head gets the
        public IP `slurm.head_public_ip` asks for only then, never on a network someone else runs.
    """
    context: ClusterContext
    slurm: SlurmDesign
    subnetwork: pulumi.Input[str]
    compute_identity: NodeIdentity
    network: pulumi.Input[str]
    own_network: bool = False


class SlurmController(SlurmControllerShape):
    controller_addr: pulumi.Output[str]
    munge_secret: pulumi.Output[str]              # projects/<p>/secrets/<id>
    bucket_name: pulumi.Output[str]
    identity: NodeIdentity
    accounting_secret: pulumi.Output[str] | None
    dns_zone: pulumi.Output[str]                  # the managed zone's name

    def __init__(self, name: str, args: SlurmControllerArgs, opts: pulumi.ResourceOptions | None = None):
        cluster, slurm = args.context, args.slurm
        # The munge key and the accounting password, in Secret Manager.
        super().__init__("aicluster:gcp:SlurmController", name, cluster, slurm,
                         lambda *a: _stored_secret(cluster, *a), opts)
        child, munge = self.child, self.munge
        head_labels = labels(cluster, "head")
        self.munge_secret = munge.id

        self.identity = NodeIdentity(f"{name}-head", NodeIdentityArgs(cluster, "head"), opts=child)
        # Compute nodes read the munge key and nothing else; the head reads the cluster's secrets.
        for who, member in (("compute", args.compute_identity.member), ("head", self.identity.member)):
            gcp.secretmanager.SecretIamMember(f"{name}-munge-{who}", secret_id=munge.id, role=SECRET_ACCESSOR,
                                              member=member, opts=child)

        self.accounting_secret = None
        if self.accounting is not None:
            gcp.secretmanager.SecretIamMember(f"{name}-slurmdbd-head", secret_id=self.accounting.id,
                                              role=SECRET_ACCESSOR, member=self.identity.member, opts=child)
            self.accounting_secret = self.accounting.id

        bucket = gcp.storage.Bucket(
            f"{name}-config", location=cluster.region, uniform_bucket_level_access=True,
            public_access_prevention="enforced", force_destroy=True,
            versioning=gcp.storage.BucketVersioningArgs(enabled=True), labels=head_labels, opts=child)
        gcp.storage.BucketIAMMember(f"{name}-config-head", bucket=bucket.name, role=OBJECT_VIEWER,
                                    member=self.identity.member, opts=child)
        # pyxis is built once, on the head, and published for the nodes (node_local_files): the head
        # writes under the artifacts prefix (objectUser, not objectCreator: a build interrupted
        # between its object and its digest writes the object again, and overwriting needs
        # storage.objects.delete, https://cloud.google.com/storage/docs/json_api/v1/objects/insert);
        # the compute nodes read pyxis there, nothing else.
        grant_objects_under(f"{name}-artifacts-head", bucket.name, ARTIFACT_PREFIX, OBJECT_USER, self.identity.member,
                            "aicluster-head-artifacts", "What the head builds for the nodes (pyxis)", child)
        grant_objects_under(f"{name}-artifacts-compute", bucket.name, PYXIS_ARTIFACT_PREFIX, OBJECT_VIEWER,
                            args.compute_identity.member, "aicluster-compute-pyxis",
                            "pyxis as the head built it, and its SHA-256", child)
        self.bucket_name = bucket.name

        # Node names resolve through this zone (SlurmctldParameters=cloud_dns): the resume program
        # writes <node>.<domain> -> the node's address before it sets the address in Slurm, the
        # suspend program deletes the record, every node searches the domain. A private zone rather
        # than Compute Engine's internal DNS names: instance names are unique per project and zone,
        # so they carry the cluster's name (<cluster>-<digest>-gpu-1) while Slurm's node names stay
        # <pool>-<n> as on AWS. It depends on the cluster name and the network only. Control plane,
        # not data: force_destroy lets `pulumi destroy` delete it with records still in it.
        project_id = project()
        zone = gcp.dns.ManagedZone(
            f"{name}-dns", name=dns_zone_name(cluster), dns_name=f"{node_domain(cluster.name)}.",
            description=f"aicluster {cluster.name}: Slurm node names, written by the resume program",
            visibility="private",
            private_visibility_config=gcp.dns.ManagedZonePrivateVisibilityConfigArgs(
                networks=[gcp.dns.ManagedZonePrivateVisibilityConfigNetworkArgs(network_url=args.network)]),
            force_destroy=True, labels=labels(cluster, "control-plane"), project=project_id, opts=child)
        self.dns_zone = zone.name
        dns_role = gcp.projects.IAMCustomRole(
            f"{name}-dns-role", role_id=short_name(f"aicluster_{cluster.name}_slurm_dns".replace("-", "_"), 64),
            title=f"aicluster {cluster.name}: Slurm node-name records",
            description="Write and delete the node-name records of this cluster's zone",
            permissions=list(DNS_PERMISSIONS), project=project_id, opts=child)
        gcp.dns.DnsManagedZoneIamMember(f"{name}-dns-head", project=project_id, managed_zone=zone.name,
                                        role=dns_role.name, member=self.identity.member, opts=child)

        image = load_catalog().gcp_images["head"].image
        user_data = pulumi.Output.all(bucket.name, munge.id).apply(
            lambda a: head_user_data(cluster, bucket=a[0], munge_secret=a[1]))
        public = slurm.head_public_ip and args.own_network
        head = gcp.compute.Instance(
            f"{name}-head",
            name=head_hostname(cluster.name),
            zone=cluster.zone,
            machine_type=slurm.head_instance_type,
            boot_disk=gcp.compute.InstanceBootDiskArgs(
                # slurmctld state survives an accidental deletion, unless slurm.head_node.on_delete says
                # delete (setDiskAutoDelete: in place).
                auto_delete=slurm.head_on_delete != "retain",
                initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(
                    image=image, size=slurm.head_root_volume_gib, type="pd-balanced", labels=head_labels)),
            network_interfaces=[gcp.compute.InstanceNetworkInterfaceArgs(
                subnetwork=args.subnetwork, nic_type="GVNIC",
                access_configs=[gcp.compute.InstanceNetworkInterfaceAccessConfigArgs()] if public else None)],
            service_account=gcp.compute.InstanceServiceAccountArgs(email=self.identity.email, scopes=[CLOUD_PLATFORM]),
            shielded_instance_config=gcp.compute.InstanceShieldedInstanceConfigArgs(
                enable_secure_boot=True, enable_vtpm=True, enable_integrity_monitoring=True),
            metadata={"user-data": user_data, "enable-oslogin": "TRUE", "block-project-ssh-keys": "TRUE"},
            deletion_protection=slurm.head_on_delete == "retain",    # in place (setDeletionProtection)
            tags=[node_tag(cluster), head_tag(cluster)],
            labels=head_labels,
            # The image family resolves to a dated image at creation: a newer Ubuntu release must
            # not replace the head node on the next `pulumi up`.
            opts=pulumi.ResourceOptions(parent=self, protect=True, retain_on_delete=slurm.head_on_delete == "retain",
                                        ignore_changes=["bootDisk.initializeParams.image"]),
        )
        self.controller_addr = head.network_interfaces.apply(lambda nics: nics[0].network_ip)
        self.register_outputs({"controller_addr": self.controller_addr, "bucket": bucket.name,
                               "munge_secret": munge.id, "dns_zone": zone.name})


def _stored_secret(cluster: ClusterContext, name: str, key: str, what: str, value: pulumi.Input[str],
                   opts: pulumi.ResourceOptions) -> gcp.secretmanager.Secret:
    """A Secret Manager secret holding `value` (secret in Pulumi), protected and retained. (`what`:
    Secret Manager secrets carry no description.)"""
    secret = gcp.secretmanager.Secret(
        # Secret Manager's deletion protection while it is kept (`opts`: the controller's on_delete choice).
        name, secret_id=secret_id(cluster, key), labels=labels(cluster, "head"),
        deletion_protection=bool(opts.retain_on_delete),
        replication=gcp.secretmanager.SecretReplicationArgs(auto=gcp.secretmanager.SecretReplicationAutoArgs()),
        opts=opts)
    gcp.secretmanager.SecretVersion(f"{name}-value", secret=secret.id, secret_data=pulumi.Output.secret(value),
                                    opts=opts)
    return secret


def published_body(key: str, content: pulumi.Output) -> dict:
    """The object's body: ARTIFACT_KEY's is the archive (bytes, the same in every plan), uploaded
    from a file as it is (a GCS object's `content` is text); every other key's is text."""
    if key == ARTIFACT_KEY:
        return {"source": pulumi.FileAsset(artifact_file(published_archive(_PROGRAMS)))}
    return {"content": content}


def head_user_data(context: ClusterContext, *, bucket: str, munge_secret: str) -> str:
    """Metadata holds 256 KB: cloud-init writes the head's programs itself (the secret helper, the
    sync and the Slurm installer, with the Google REST module they import: render/node_programs.py)."""
    programs = [BootFile(path, text, mode) for path, text, mode in node_files(("aicluster-secret", "aicluster-sync", "aicluster-install-slurm"), BIN)]
    return _head_user_data(context, cloud="gcp", bucket=bucket, munge_secret=munge_secret, sync={"storage": "gcs"},
                           boot_files=programs)


def head_permissions(design: ClusterDesign) -> list[str]:
    imports = any(fs.import_path for fs in design.storage if fs.kind == "managed-lustre")
    return sorted(HEAD_PERMISSIONS + (LUSTRE_IMPORT_PERMISSIONS if imports else ()))


def instance_condition(design: ClusterDesign, project_id: str) -> str:
    """IAM condition: instance calls only on instances named for this cluster's nodes; other
    resources (disks, templates, subnetworks, operations) as the role allows. Besides the prefix,
    each Slurm pool's <cluster>-<pool>- for the nodes a cluster created before the prefix carried
    its digest may still run (the power programs delete them once their nodes power down). The
    head (<cluster>-head: a node name has a number) is outside them all."""
    zone = f"projects/{project_id}/zones/{design.zone}/instances/"
    prefixes = [instance_prefix(design)] + [f"{design.name}-{pool.name}-" for pool in slurm_pools(design)]
    return " || ".join([f'!resource.name.startsWith("{zone}")'] +
                       [f'resource.name.startsWith("{zone}{prefix}")' for prefix in prefixes])


@dataclass(frozen=True)
class SlurmConfigurationArgs:
    """Everything that follows the pools: the rendered Slurm files and cluster.json published to
    the controller's bucket, and the head's right to create and delete this cluster's instances.

    design: the whole cluster design (`ClusterDesign`), genuinely: the published files render the
        whole cluster (aicluster.render.slurm_files.published_files: slurm.conf, topology and gres from
        `slurm` and every pool; cluster.json from every pool), and the head's role adds the Lustre
        import permissions when a Managed Lustre filesystem of `storage` has an `import_path`.
    controller: the cluster's SlurmController (its address, bucket, identity, DNS zone, secrets).
    compute_identity: the compute nodes' service account (NodeIdentity): the head may act as it.
    pools: pool name -> its component (GpuPool or TpuSlice): instance templates and placement
        policies, written into cluster.json for the power programs.
    mounts: the filesystems' Mounts (list[Mount]): the head mounts them when published. Default none.
    lustre_imports: Managed Lustre imports, [{"instance": ..., "uri": ..., "path": "/"}], run by the
        head once. Default none.
    node_addrs: Cloud TPU hosts, node name -> address (NodeAddr in slurm.conf). Default None (no
        TPU pool).
    accounting_endpoint: the managed accounting database's {"host", "tls_ca_pem"} (`SlurmdbdDatabase`);
        None with the database on the head or accounting off.
    """
    design: ClusterDesign
    controller: SlurmController
    compute_identity: NodeIdentity
    pools: dict
    mounts: pulumi.Input[list] = ()
    lustre_imports: pulumi.Input[list] = ()
    node_addrs: pulumi.Input[dict] = None
    accounting_endpoint: pulumi.Input[dict] | None = None


class SlurmConfiguration(SlurmConfigurationShape):
    def __init__(self, name: str, args: SlurmConfigurationArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:gcp:SlurmConfiguration", name, opts)
        design, controller, child = args.design, args.controller, self.child
        pools = pool_facts(args.pools, "instance_template", "placement_policy")
        project_id = project()
        files = pulumi.Output.all(controller.controller_addr, pools, controller.accounting_secret or "",
                                  args.lustre_imports, args.mounts, controller.dns_zone, args.node_addrs or {},
                                  args.accounting_endpoint).apply(
            lambda a: published_files(design, project_id=project_id, controller_addr=a[0],
                                      templates=a[1]["instance_template"], placements=a[1]["placement_policy"],
                                      accounting_secret=a[2] or None, lustre_imports=list(a[3]), mounts=list(a[4]),
                                      dns_zone=a[5], node_addrs=dict(a[6]), accounting_endpoint=a[7]))
        self.publish(PUBLISHED_KEYS, files, lambda key, content: gcp.storage.BucketObject(
            f"{name}-{key.replace('/', '-').replace('.', '-').replace('_', '-')}", bucket=controller.bucket_name,
            name=CONFIG_PREFIX + key, **published_body(key, content), opts=child))

        role = gcp.projects.IAMCustomRole(
            f"{name}-head-role", role_id=short_name(f"aicluster_{design.name}_slurm_head".replace("-", "_"), 64),
            title=f"aicluster {design.name}: Slurm head node",
            description="Create, label and delete this cluster's compute instances from its templates",
            permissions=head_permissions(design), project=project_id, opts=child)
        gcp.projects.IAMMember(
            f"{name}-head-compute", project=project_id, role=role.name, member=controller.identity.member,
            condition=gcp.projects.IAMMemberConditionArgs(
                title=f"aicluster-{design.name}-instances", expression=instance_condition(design, project_id),
                description="Only instances named for this cluster"),
            opts=child)
        gcp.serviceaccount.IAMMember(
            f"{name}-head-act-as-compute", service_account_id=args.compute_identity.account_name,
            role="roles/iam.serviceAccountUser", member=controller.identity.member, opts=child)
        self.register_outputs({})


# The published files: object name (under CONFIG_PREFIX) -> where aicluster-sync installs it
# (components/aicluster/render/slurm_files.py), with the GCP power program and the Managed Lustre
# import (aicluster.node; the Google REST module they import comes with them).
_PROGRAMS = ("aicluster-gcp-power.py", "aicluster-gcp-lustre-import")
_LUSTRE_IMPORTS = "aicluster/lustre-imports.json"
PUBLISHED_KEYS = published_keys(_PROGRAMS, [_LUSTRE_IMPORTS])


def template_version(template: str) -> str | None:
    """An instance template's self link (or name) -> its name: a label value (lower-case letters,
    digits, '-'; at most 63: name_prefix keeps it there), unique to that template."""
    return template.rstrip("/").rsplit("/", 1)[-1] or None if template else None


def published_files(design: ClusterDesign, *, project_id: str, controller_addr: str, templates: dict,
                    placements: dict, accounting_secret: str | None, lustre_imports: list,
                    mounts: list[Mount] = (), dns_zone: str | None = None,
                    node_addrs: dict | None = None, accounting_endpoint: dict | None = None) -> dict[str, str]:
    cluster = {
        "project": project_id, "zone": design.zone,
        "cluster_label": CLUSTER_LABEL, "pool_label": POOL_LABEL,
        "instance_prefix": instance_prefix(design), "dns_zone": dns_zone or dns_zone_name(design),
        "pools": {p.name: {
            "instance_template": templates[p.name], "machine_type": p.instance.name,
            "placement_policy": placements[p.name] or None, "capacity": p.capacity.type,
            "reservation": p.capacity.reservation_id if p.capacity.type == "reservation" else None,
            "min_nodes": p.min_nodes, "max_nodes": p.max_nodes,
            # What a node is created from: the instance template's name (a changed template is a new
            # one, name_prefix), the label the resume program puts on each instance and the version
            # the reconcile loop rolls the pool's nodes to (aicluster.node.reconcile, roll_nodes).
            "version": template_version(templates[p.name]), "max_unavailable": p.max_unavailable,
        } for p in slurm_pools(design)},                  # TPU slices are Pulumi's, never launched by Slurm
    }
    imports = Published(_LUSTRE_IMPORTS, "/etc/aicluster/lustre-imports.json",
                        json.dumps({"imports": lustre_imports}, indent=2, sort_keys=True) + "\n",
                        run=(f"{BIN}/aicluster-gcp-lustre-import",))
    return _published_files(design, controller_addr=controller_addr, cluster=cluster, programs=_PROGRAMS,
                            power_program="aicluster-gcp-power.py", accounting_secret=accounting_secret,
                            mounts=mounts, node_addrs=node_addrs, extra=[imports],
                            accounting_endpoint=accounting_endpoint)
