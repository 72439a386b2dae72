"""aicluster:gcp:GkeCluster - the Kubernetes control plane for `cloud: gcp`, `scheduler: kubernetes`.

- The cluster: regional (a replicated control plane), its nodes in the spec's zone; Dataplane V2
  (ADVANCED_DATAPATH) and multi-networking, which the GPU NIC networks of A3 / A4 node pools need
  (GKE docs, Set up multi-network support for Pods); private nodes and a private IP endpoint, with a public IP endpoint only for
  `kubernetes.api_access_cidrs` (master authorized networks, Google's public ranges left out);
  with `kubernetes.api_access: endpoint` (the default) the DNS-based control-plane endpoint takes
  traffic from outside Google Cloud, authorized by IAM (container.clusters.connect), so the
  `pulumi up` that installs the add-ons reaches the API from anywhere with no IP allowlist;
  Workload Identity; the release channel and minimum version pinned in catalog/kubernetes.yaml;
  a maintenance window and an exclusion of automatic minor and node upgrades (gke_upgrades.py);
  the Managed Lustre, Filestore and Cloud Storage FUSE CSI drivers (always on: adding a filesystem
  or a dataset must never change the cluster); the Container File System API, which the node
  pools' image streaming needs (GKE docs, Use Image streaming to pull container images); VPC-native pod and service ranges from the design; shielded nodes, no client
  certificate, deletion protection, `protect` and `retain_on_delete` (it holds the jobs' and
  queues' state). Its inputs depend on the spec's cluster settings and the network only.
- The node service account (NodeIdentity's compute account) gets GKE's node role.
- The system node pool (add-on controllers: Kueue, JobSet, CSI controllers, CoreDNS).
- A Kubernetes provider built from the cluster's outputs, authenticating with the caller's Google
  credentials (gke-gcloud-auth-plugin): no token or key is stored. It talks to the DNS endpoint
  (api_access endpoint) or the private IP endpoint (vpc); with api_access private there is none, as
  this `pulumi up` creates nothing inside the cluster.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from aicluster.design.model import ClusterContext, ClusterDesign
from aicluster.design.gke_parts import GkeDesign
from aicluster.design.gke import SYSTEM_POOL
from aicluster.design.kubernetes import ROLE_LABEL
from aicluster.gcp.common import labels, node_metadata, node_tag, project
from aicluster.gcp.gke_addons import GkeAddons, GkeAddonsArgs, GkeFilesystem
from aicluster.gcp.gke_nodes import GkeNodePoolArgs, GkeNodePools, network_names
from aicluster.gcp.gke_upgrades import maintenance_policy
from aicluster.gcp.identity import CLOUD_PLATFORM
from aicluster.gcp.workload_identity import WorkloadIdentities, WorkloadIdentitiesArgs

# GKE's own role for a custom node service account: logs, metrics, image pulls (GKE docs,
# "Use a least privileged IAM service account for nodes").
NODE_ROLE = "roles/container.defaultNodeServiceAccount"
SYSTEM_DISK_GIB = 100
IMAGE_STREAMING_API = "containerfilesystem.googleapis.com"


def kubeconfig(cluster_name: str, endpoint: str, ca_data: str | None) -> str:
    """A kubeconfig that authenticates with the caller's Google credentials (no stored token). The
    DNS endpoint serves a publicly trusted certificate: no cluster CA (ca_data None), as
    `gcloud container clusters get-credentials --dns-endpoint` writes it."""
    server = {"server": f"https://{endpoint}"}
    if ca_data:
        server["certificate-authority-data"] = ca_data
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": cluster_name,
        "clusters": [{"name": cluster_name, "cluster": server}],
        "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": cluster_name}}],
        "users": [{"name": cluster_name, "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "gke-gcloud-auth-plugin",
            "interactiveMode": "Never", "provideClusterInfo": True}}}],
    }, sort_keys=True)


def workload_pool(project_id: str) -> str:
    return f"{project_id}.svc.id.goog"


@dataclass(frozen=True)
class GkeClusterArgs:
    """The GKE control plane, its system node pool and a Kubernetes provider for it.

    context: the cluster's name (descriptions), labels and the node network tag:
        `ClusterDesign.context`, or a `ClusterContext` of your own.
    gke: the GKE design (`ClusterDesign.kubernetes.gke`): the cluster's name, location and zone,
        pod and service ranges, API access, release channel and version, image type and the
        system node pool's machine type and size.
    network_id: the system network, projects/<p>/global/networks/<name> (Network.network_id).
    subnetwork: the system subnetwork's self link (Network.subnetwork_self_link).
    node_service_account: the nodes' service account email (NodeIdentity.email).
    node_service_account_member: the same account as an IAM member (NodeIdentity.member): granted
        GKE's node role.
    in_cluster: build a Kubernetes provider for the cluster (`KubernetesDesign.in_cluster`: False
        only in phase 1 of api_access private, when this `pulumi up` creates nothing inside the
        cluster). Default True.
    """
    context: ClusterContext
    gke: GkeDesign
    network_id: pulumi.Input[str]
    subnetwork: pulumi.Input[str]
    node_service_account: pulumi.Input[str]
    node_service_account_member: pulumi.Input[str]
    in_cluster: bool = True


class GkeCluster(pulumi.ComponentResource):
    cluster_name: pulumi.Output[str]
    cluster_id: pulumi.Output[str]
    endpoint: pulumi.Output[str]                  # what the kubeconfig's server names
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider | None                 # None with api_access private (phase 1)
    before_nodes: list[pulumi.Resource]           # what node pools wait for
    ready: list[pulumi.Resource]                  # what Kubernetes objects wait for

    def __init__(self, name: str, args: GkeClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:gcp:GkeCluster", name, None, opts)
        design, gke = args.context, args.gke
        project_id = project()
        child = pulumi.ResourceOptions(parent=self)

        node_role = gcp.projects.IAMMember(f"{name}-node-role", project=project_id, role=NODE_ROLE,
                                           member=args.node_service_account_member, opts=child)
        # Image streaming (gcfs_config on the node pools) needs this API; left on when the stack goes.
        image_streaming = gcp.projects.Service(f"{name}-containerfilesystem", project=project_id,
                                               service=IMAGE_STREAMING_API, disable_on_destroy=False,
                                               disable_dependent_services=False, opts=child)
        public = not gke.private_endpoint
        cluster = gcp.container.Cluster(
            name,
            name=gke.cluster_name,
            location=gke.location,
            node_locations=[gke.zone],
            description=f"aicluster {design.name}: GKE control plane",
            network=args.network_id,
            subnetwork=args.subnetwork,
            networking_mode="VPC_NATIVE",
            ip_allocation_policy=gcp.container.ClusterIpAllocationPolicyArgs(
                cluster_ipv4_cidr_block=gke.pods_cidr, services_ipv4_cidr_block=gke.services_cidr,
                stack_type="IPV4"),
            default_max_pods_per_node=gke.max_pods_per_node,
            # Dataplane V2: required for multi-networking (the GPU NIC networks as pod interfaces).
            datapath_provider="ADVANCED_DATAPATH",
            enable_multi_networking=True,
            private_cluster_config=gcp.container.ClusterPrivateClusterConfigArgs(
                enable_private_nodes=True, enable_private_endpoint=not public),
            master_authorized_networks_config=gcp.container.ClusterMasterAuthorizedNetworksConfigArgs(
                cidr_blocks=[gcp.container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(
                    cidr_block=cidr, display_name="kubernetes.api_access_cidrs") for cidr in gke.api_access_cidrs],
                gcp_public_cidrs_access_enabled=False),
            # The DNS-based endpoint: reachable from anywhere, authorized by IAM alone; what `pulumi
            # up` reaches the API through with api_access endpoint. Off (VPC only) otherwise.
            control_plane_endpoints_config=gcp.container.ClusterControlPlaneEndpointsConfigArgs(
                dns_endpoint_config=gcp.container.ClusterControlPlaneEndpointsConfigDnsEndpointConfigArgs(
                    allow_external_traffic=gke.dns_endpoint)),
            master_auth=gcp.container.ClusterMasterAuthArgs(
                client_certificate_config=gcp.container.ClusterMasterAuthClientCertificateConfigArgs(
                    issue_client_certificate=False)),
            workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(
                workload_pool=workload_pool(project_id)),
            release_channel=gcp.container.ClusterReleaseChannelArgs(channel=gke.release_channel),
            min_master_version=gke.version,
            # A weekly window, and no automatic minor or node upgrade until end of support: a node
            # upgrade drains nodes under running gangs (gke_upgrades.py).
            maintenance_policy=maintenance_policy(),
            addons_config=gcp.container.ClusterAddonsConfigArgs(
                lustre_csi_driver_config=gcp.container.ClusterAddonsConfigLustreCsiDriverConfigArgs(enabled=True),
                gcp_filestore_csi_driver_config=gcp.container.ClusterAddonsConfigGcpFilestoreCsiDriverConfigArgs(
                    enabled=True),
                gce_persistent_disk_csi_driver_config=gcp.container.ClusterAddonsConfigGcePersistentDiskCsiDriverConfigArgs(
                    enabled=True),
                # Datasets in Cloud Storage (kubernetes.datasets), read with each pod's Workload Identity.
                gcs_fuse_csi_driver_config=gcp.container.ClusterAddonsConfigGcsFuseCsiDriverConfigArgs(enabled=True)),
            # Managed Service for Prometheus: GKE runs the managed collectors, metrics go to Cloud
            # Monitoring (gcp/observability.py); nothing self-run holds the history.
            monitoring_config=gcp.container.ClusterMonitoringConfigArgs(
                managed_prometheus=gcp.container.ClusterMonitoringConfigManagedPrometheusArgs(enabled=True)),
            enable_shielded_nodes=True,
            # The default node pool is removed at once; node pools are separate resources.
            remove_default_node_pool=True,
            initial_node_count=1,
            node_config=gcp.container.ClusterNodeConfigArgs(
                service_account=args.node_service_account, oauth_scopes=[CLOUD_PLATFORM],
                workload_metadata_config=gcp.container.ClusterNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA"),
                shielded_instance_config=gcp.container.ClusterNodeConfigShieldedInstanceConfigArgs(
                    enable_secure_boot=True, enable_integrity_monitoring=True),
                metadata=node_metadata(), tags=[node_tag(design)]),
            deletion_protection=True,
            resource_labels=labels(design, "control-plane"),
            # Set on the resource itself (mocks and policies see only what is set here). The default
            # pool's settings no longer exist once it is removed: never diff them.
            opts=pulumi.ResourceOptions(parent=self, protect=True, retain_on_delete=True,
                                        ignore_changes=["nodeConfig", "initialNodeCount"]),
        )
        self.cluster_name, self.cluster_id = cluster.name, cluster.id
        if gke.dns_endpoint:
            endpoint = cluster.control_plane_endpoints_config.apply(_dns_endpoint)
        elif public:
            endpoint = cluster.endpoint
        else:
            endpoint = cluster.private_cluster_config.apply(lambda c: _get(c, "private_endpoint"))
        self.endpoint = endpoint

        system = gcp.container.NodePool(
            f"{name}-system",
            name=SYSTEM_POOL,
            cluster=cluster.id,
            location=gke.location,
            node_locations=[gke.zone],
            node_count=gke.system_nodes,
            node_config=gcp.container.NodePoolNodeConfigArgs(
                machine_type=gke.system_machine_type, image_type=gke.image_type, disk_type="pd-balanced",
                disk_size_gb=SYSTEM_DISK_GIB, service_account=args.node_service_account, oauth_scopes=[CLOUD_PLATFORM],
                workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA"),
                shielded_instance_config=gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs(
                    enable_secure_boot=True, enable_integrity_monitoring=True),
                labels={ROLE_LABEL: "system"}, resource_labels=labels(design, "control-plane"),
                metadata=node_metadata(), tags=[node_tag(design)]),
            network_config=gcp.container.NodePoolNetworkConfigArgs(enable_private_nodes=True),
            management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[node_role]))

        self.kubeconfig = pulumi.Output.all(cluster.name, endpoint, cluster.master_auth).apply(
            lambda a: kubeconfig(a[0], a[1], None if gke.dns_endpoint else _ca(a[2])))
        self.provider = None
        if args.in_cluster:
            self.provider = k8s.Provider(f"{name}-k8s", kubeconfig=self.kubeconfig, enable_server_side_apply=True,
                                         opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster]))
        self.before_nodes = [node_role, image_streaming]
        self.ready = [system]
        self.register_outputs({"cluster_name": cluster.name, "endpoint": endpoint, "kubeconfig": self.kubeconfig})


def _get(value, key: str):
    """A field of a typed output, or of the plain dict (camelCase or snake_case) mocks give."""
    if value is None:
        return None
    if hasattr(value, key):
        return getattr(value, key)
    camel = key.split("_")[0] + "".join(w.title() for w in key.split("_")[1:])
    return value.get(key, value.get(camel)) if isinstance(value, dict) else None


def _dns_endpoint(config) -> str | None:
    """controlPlaneEndpointsConfig.dnsEndpointConfig.endpoint: gke-<id>.<region>.gke.goog."""
    return _get(_get(config, "dns_endpoint_config"), "endpoint")


def _ca(master_auth) -> str:
    """The cluster CA from master_auth (typed output or plain dict under mocks)."""
    if hasattr(master_auth, "cluster_ca_certificate"):
        return master_auth.cluster_ca_certificate
    return (master_auth or {}).get("cluster_ca_certificate") or (master_auth or {}).get("clusterCaCertificate")


def attach_gke(design: ClusterDesign, network, nodes, filesystems: list) -> dict[str, pulumi.Output]:
    """GKE on the cluster's network: the control plane, a node pool per pool (TPU: per slice) with
    its GPU NIC networks, then everything inside the cluster."""
    gke_design: GkeDesign = design.kubernetes.gke
    cluster = GkeCluster(f"{design.name}-gke", GkeClusterArgs(
        context=design.context, gke=gke_design, network_id=network.network_id,
        subnetwork=network.subnetwork_self_link, node_service_account=nodes.email,
        node_service_account_member=nodes.member, in_cluster=design.kubernetes.in_cluster))
    pools = {
        pool.pool: GkeNodePools(f"{design.name}-{pool.pool}-gke", GkeNodePoolArgs(
            context=design.context, gke=gke_design, pool=pool, pool_design=design.pool(pool.pool),
            kubernetes_pool=design.kubernetes.pool(pool.pool), cluster_id=cluster.cluster_id,
            service_account=nodes.email, networks=network_names(network.fabric, pool.networks),
            depends_on=cluster.before_nodes))
        for pool in gke_design.node_pools
    }
    networks = {n.name: (names.network, names.subnetwork)
                for n, names in zip(gke_design.networks, network_names(network.fabric, gke_design.networks))}
    identities = WorkloadIdentities(f"{design.name}-pods", WorkloadIdentitiesArgs(
        context=design.context, identities=design.kubernetes.identities, depends_on=[cluster]))
    if design.kubernetes.in_cluster:
        GkeAddons(f"{design.name}-k8s", GkeAddonsArgs(
            design=design, provider=cluster.provider, networks=networks,
            filesystems=[GkeFilesystem(fs_design, fs.instance_id, fs.mount)
                         for fs_design, fs in zip(design.storage, filesystems)],
            depends_on=cluster.ready, gsa_emails=identities.emails))
    return {
        "gke_cluster": cluster.cluster_name,
        "kubeconfig": cluster.kubeconfig,
        "kubernetes_api": cluster.endpoint.apply(lambda e: f"https://{e}"),
        "node_pools": {name: list(p.node_pools) for name, p in pools.items()},
    }
