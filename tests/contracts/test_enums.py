"""Provider inputs that take an enum: every value any stack or variant renders must be one the
cloud's API accepts. The provider SDKs' typed Args catch a misspelled field name, not a misspelled
value ("capacity_block", "gp-3", "efa_only" construct fine and fail at the cloud).

One table: (resource type, input path in wire camelCase with [] for list items, the allowed values
or a function of the resource's inputs giving them, the source). A row no plan of the matrix
exercises fails too, so the table cannot rot: remove it or add a variant that renders the input.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, NamedTuple

import pytest

from tests.support.cloud_limits import at, inputs
from aicluster.catalog import load_catalog
from tests.support.contract_plans import variants

CATALOG = load_catalog()


class Row(NamedTuple):
    type: str
    path: str
    allowed: Iterable[Any] | Callable[[dict], Iterable[Any]]
    source: str


LT = "aws:ec2/launchTemplate:LaunchTemplate"
FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
NODEGROUP = "aws:eks/nodeGroup:NodeGroup"
GCE_TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"
GCE_INSTANCE = "gcp:compute/instance:Instance"
NODEPOOL = "gcp:container/nodePool:NodePool"
GKE = "gcp:container/cluster:Cluster"
TPU_VM = "gcp:tpu/v2Vm:V2Vm"

EC2_API = "EC2 API Reference"
EBS_TYPES = {"standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"}
GCE_DISK_TYPES = {"pd-standard", "pd-balanced", "pd-ssd", "pd-extreme", "hyperdisk-balanced", "hyperdisk-extreme",
                  "hyperdisk-throughput", "hyperdisk-ml", "hyperdisk-balanced-high-availability", "local-ssd"}
SG_PROTOCOLS = {"-1", "tcp", "udp", "icmp", "icmpv6", *map(str, range(256))}
# RDS API Reference, CreateDBInstance EnableCloudwatchLogsExports: the log types each engine exports.
RDS_LOG_EXPORTS = {"mariadb": {"audit", "error", "general", "slowquery", "iam-db-auth-error"},
                   "mysql": {"audit", "error", "general", "slowquery", "iam-db-auth-error"}}
TPU_TYPES = {"V2": "v2", "V3": "v3", "V4": "v4", "V5LITE_POD": "v5e", "V5P": "v5p", "V6E": "v6e"}


def _tpu_vm_topologies(i: dict) -> set[str]:
    """A TPU VM's topology: one of its generation's slice shapes (catalog/tpu.yaml)."""
    gen = CATALOG.tpus.get(TPU_TYPES.get((i.get("acceleratorConfig") or {}).get("type"), ""))
    return set(gen.topologies) if gen else set()


def _node_pool_topologies(i: dict) -> set[str]:
    machine = (i.get("nodeConfig") or {}).get("machineType")
    return {t for gen in CATALOG.tpus.values() if machine in gen.machine_types.values() for t in gen.topologies}


TABLE = [
    # --- EC2 launch templates and instances
    Row("aws:ec2/placementGroup:PlacementGroup", "strategy", {"cluster", "partition", "spread"},
        f"{EC2_API}, CreatePlacementGroup Strategy (cluster | spread | partition)"),
    Row(LT, "networkInterfaces[].interfaceType", {"interface", "efa", "efa-only"},
        f"{EC2_API}, LaunchTemplateInstanceNetworkInterfaceSpecificationRequest InterfaceType (interface | efa | efa-only)"),
    Row(LT, "networkInterfaces[].associatePublicIpAddress", {"true", "false"},
        "pulumi_aws v7 LaunchTemplateNetworkInterface associate_public_ip_address (a boolean as a string)"),
    Row(LT, "networkInterfaces[].deleteOnTermination", {"true", "false"},
        "pulumi_aws v7 LaunchTemplateNetworkInterface delete_on_termination (a boolean as a string)"),
    Row(LT, "instanceMarketOptions.marketType", {"spot", "capacity-block"},
        f"{EC2_API}, LaunchTemplateInstanceMarketOptionsRequest MarketType (spot | capacity-block)"),
    Row(LT, "instanceMarketOptions.spotOptions.spotInstanceType", {"one-time", "persistent"},
        f"{EC2_API}, LaunchTemplateSpotMarketOptionsRequest SpotInstanceType (one-time | persistent)"),
    Row(LT, "instanceMarketOptions.spotOptions.instanceInterruptionBehavior", {"hibernate", "stop", "terminate"},
        f"{EC2_API}, LaunchTemplateSpotMarketOptionsRequest InstanceInterruptionBehavior"),
    Row(LT, "capacityReservationSpecification.capacityReservationPreference",
        {"capacity-reservations-only", "open", "none"},
        f"{EC2_API}, LaunchTemplateCapacityReservationSpecificationRequest CapacityReservationPreference"),
    Row(LT, "blockDeviceMappings[].ebs.volumeType", EBS_TYPES,
        f"{EC2_API}, LaunchTemplateEbsBlockDeviceRequest VolumeType (standard | io1 | io2 | gp2 | sc1 | st1 | gp3)"),
    Row(LT, "blockDeviceMappings[].ebs.encrypted", {"true", "false"},
        "pulumi_aws v7 LaunchTemplateBlockDeviceMappingEbs encrypted (a boolean as a string)"),
    Row(LT, "ebsOptimized", {"true", "false"}, "pulumi_aws v7 LaunchTemplate ebs_optimized (a boolean as a string)"),
    Row(LT, "metadataOptions.httpTokens", {"optional", "required"},
        f"{EC2_API}, LaunchTemplateInstanceMetadataOptionsRequest HttpTokens (optional | required)"),
    Row(LT, "metadataOptions.httpEndpoint", {"enabled", "disabled"},
        f"{EC2_API}, LaunchTemplateInstanceMetadataOptionsRequest HttpEndpoint (disabled | enabled)"),
    Row(LT, "metadataOptions.instanceMetadataTags", {"enabled", "disabled"},
        f"{EC2_API}, LaunchTemplateInstanceMetadataOptionsRequest InstanceMetadataTags (disabled | enabled)"),
    Row(LT, "metadataOptions.httpPutResponseHopLimit", set(range(1, 65)),
        f"{EC2_API}, LaunchTemplateInstanceMetadataOptionsRequest HttpPutResponseHopLimit (1 to 64)"),
    Row(LT, "tagSpecifications[].resourceType", {"instance", "volume", "network-interface", "spot-instances-request"},
        f"{EC2_API}, LaunchTemplateTagSpecificationRequest ResourceType (at launch: instance | volume | "
        "network-interface | spot-instances-request)"),
    # --- VPC
    Row("aws:ec2/securityGroup:SecurityGroup", "ingress[].protocol", SG_PROTOCOLS,
        f"{EC2_API}, IpPermission IpProtocol (tcp | udp | icmp | icmpv6 | -1 or a protocol number)"),
    Row("aws:ec2/securityGroup:SecurityGroup", "egress[].protocol", SG_PROTOCOLS, f"{EC2_API}, IpPermission IpProtocol"),
    Row("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "ipProtocol", SG_PROTOCOLS,
        f"{EC2_API}, AuthorizeSecurityGroupIngress IpPermissions.IpProtocol"),
    Row("aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule", "ipProtocol", SG_PROTOCOLS,
        f"{EC2_API}, AuthorizeSecurityGroupEgress IpPermissions.IpProtocol"),
    Row("aws:ec2/vpcEndpoint:VpcEndpoint", "vpcEndpointType",
        {"Interface", "Gateway", "GatewayLoadBalancer", "Resource", "ServiceNetwork"},
        f"{EC2_API}, CreateVpcEndpoint VpcEndpointType"),
    Row("aws:ec2/natGateway:NatGateway", "connectivityType", {"private", "public"},
        f"{EC2_API}, CreateNatGateway ConnectivityType (private | public)"),
    Row("aws:ec2/eip:Eip", "domain", {"vpc", "standard"}, f"{EC2_API}, AllocateAddress Domain (vpc | standard)"),
    # --- FSx for Lustre
    Row(FSX, "deploymentType", {"SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2"},
        "Amazon FSx API Reference, CreateFileSystemLustreConfiguration DeploymentType"),
    Row(FSX, "storageType", {"SSD", "HDD", "INTELLIGENT_TIERING"}, "Amazon FSx API Reference, CreateFileSystem StorageType"),
    Row(FSX, "dataCompressionType", {"NONE", "LZ4"},
        "Amazon FSx API Reference, CreateFileSystemLustreConfiguration DataCompressionType (NONE | LZ4)"),
    Row(FSX, "fileSystemTypeVersion", {"2.10", "2.12", "2.15"},
        "Amazon FSx API Reference, CreateFileSystem FileSystemTypeVersion (2.10 | 2.12 | 2.15)"),
    Row(FSX, "perUnitStorageThroughput", {12, 40, 50, 100, 125, 200, 250, 500, 1000},
        "Amazon FSx API Reference, CreateFileSystemLustreConfiguration PerUnitStorageThroughput"),
    Row(FSX, "logConfiguration.level", {"DISABLED", "WARN_ONLY", "ERROR_ONLY", "WARN_ERROR"},
        "Amazon FSx API Reference, LustreLogCreateConfiguration Level"),
    Row(FSX, "metadataConfiguration.mode", {"AUTOMATIC", "USER_PROVISIONED"},
        "Amazon FSx API Reference, CreateFileSystemLustreMetadataConfiguration Mode"),
    Row("aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation", "s3.autoImportPolicy.events[]",
        {"NEW", "CHANGED", "DELETED"}, "Amazon FSx API Reference, AutoImportPolicy Events (NEW | CHANGED | DELETED)"),
    Row("aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation", "s3.autoExportPolicy.events[]",
        {"NEW", "CHANGED", "DELETED"}, "Amazon FSx API Reference, AutoExportPolicy Events"),
    # --- EKS
    Row(NODEGROUP, "capacityType", {"ON_DEMAND", "SPOT", "CAPACITY_BLOCK"},
        "Amazon EKS API Reference, CreateNodegroup capacityType (ON_DEMAND | SPOT | CAPACITY_BLOCK)"),
    Row(NODEGROUP, "amiType", {"AL2_x86_64", "AL2_x86_64_GPU", "AL2_ARM_64", "CUSTOM", "BOTTLEROCKET_ARM_64",
                               "BOTTLEROCKET_x86_64", "BOTTLEROCKET_ARM_64_FIPS", "BOTTLEROCKET_x86_64_FIPS",
                               "BOTTLEROCKET_ARM_64_NVIDIA", "BOTTLEROCKET_x86_64_NVIDIA", "WINDOWS_CORE_2019_x86_64",
                               "WINDOWS_FULL_2019_x86_64", "WINDOWS_CORE_2022_x86_64", "WINDOWS_FULL_2022_x86_64",
                               "AL2023_x86_64_STANDARD", "AL2023_ARM_64_STANDARD", "AL2023_x86_64_NEURON",
                               "AL2023_x86_64_NVIDIA", "AL2023_ARM_64_NVIDIA"},
        "Amazon EKS API Reference, CreateNodegroup amiType"),
    Row(NODEGROUP, "taints[].effect", {"NO_SCHEDULE", "NO_EXECUTE", "PREFER_NO_SCHEDULE"},
        "Amazon EKS API Reference, Taint effect (NO_SCHEDULE | NO_EXECUTE | PREFER_NO_SCHEDULE)"),
    Row("aws:eks/cluster:Cluster", "accessConfig.authenticationMode", {"API", "API_AND_CONFIG_MAP", "CONFIG_MAP"},
        "Amazon EKS API Reference, CreateAccessConfigRequest authenticationMode"),
    Row("aws:eks/cluster:Cluster", "enabledClusterLogTypes[]",
        {"api", "audit", "authenticator", "controllerManager", "scheduler"},
        "Amazon EKS API Reference, LogSetup types (api | audit | authenticator | controllerManager | scheduler)"),
    Row("aws:eks/addon:Addon", "resolveConflictsOnCreate", {"NONE", "OVERWRITE"},
        "Amazon EKS API Reference, CreateAddon resolveConflicts (on create: NONE | OVERWRITE)"),
    Row("aws:eks/addon:Addon", "resolveConflictsOnUpdate", {"NONE", "OVERWRITE", "PRESERVE"},
        "Amazon EKS API Reference, UpdateAddon resolveConflicts (NONE | OVERWRITE | PRESERVE)"),
    # --- S3, Secrets Manager, CloudWatch Logs
    Row("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
        "rules[].applyServerSideEncryptionByDefault.sseAlgorithm", {"AES256", "aws:kms", "aws:kms:dsse"},
        "Amazon S3 API Reference, ServerSideEncryptionByDefault SSEAlgorithm (AES256 | aws:kms | aws:kms:dsse)"),
    Row("aws:s3/bucketObjectv2:BucketObjectv2", "serverSideEncryption", {"AES256", "aws:kms", "aws:kms:dsse"},
        "Amazon S3 API Reference, PutObject x-amz-server-side-encryption"),
    Row("aws:s3/bucketVersioning:BucketVersioning", "versioningConfiguration.status", {"Enabled", "Suspended"},
        "Amazon S3 API Reference, VersioningConfiguration Status (Enabled | Suspended)"),
    Row("aws:secretsmanager/secret:Secret", "recoveryWindowInDays", {0, *range(7, 31)},
        "AWS Secrets Manager API Reference, DeleteSecret RecoveryWindowInDays (7 to 30; pulumi_aws: 0 forces deletion)"),
    Row("aws:cloudwatch/logGroup:LogGroup", "retentionInDays",
        {1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653},
        "Amazon CloudWatch Logs API Reference, PutRetentionPolicy retentionInDays"),
    # --- RDS: the logs an instance exports (slurmdbd's database, slurm.accounting: managed)
    Row("aws:rds/instance:Instance", "enabledCloudwatchLogsExports[]", lambda i: RDS_LOG_EXPORTS.get(i.get("engine"), ()),
        "Amazon RDS API Reference, CreateDBInstance EnableCloudwatchLogsExports (RDS for MariaDB: audit | error | "
        "general | slowquery | iam-db-auth-error; RDS for MySQL the same)"),
    # --- VPC flow logs
    Row("aws:ec2/flowLog:FlowLog", "trafficType", {"ACCEPT", "REJECT", "ALL"},
        f"{EC2_API}, CreateFlowLogs TrafficType (ACCEPT | REJECT | ALL)"),
    Row("aws:ec2/flowLog:FlowLog", "logDestinationType", {"cloud-watch-logs", "s3", "kinesis-data-firehose"},
        f"{EC2_API}, CreateFlowLogs LogDestinationType (cloud-watch-logs | s3 | kinesis-data-firehose)"),
    Row("aws:ec2/flowLog:FlowLog", "maxAggregationInterval", {60, 600},
        f"{EC2_API}, CreateFlowLogs MaxAggregationInterval (60 | 600 seconds)"),
    # --- Compute Engine
    Row(GCE_TEMPLATE, "networkInterfaces[].nicType", {"GVNIC", "VIRTIO_NET", "IDPF", "MRDMA", "IRDMA"},
        "Compute Engine API reference, NetworkInterface.nicType (GVNIC | VIRTIO_NET | IDPF | MRDMA | IRDMA)"),
    Row(GCE_INSTANCE, "networkInterfaces[].nicType", {"GVNIC", "VIRTIO_NET", "IDPF", "MRDMA", "IRDMA"},
        "Compute Engine API reference, NetworkInterface.nicType"),
    Row(GCE_TEMPLATE, "disks[].diskType", GCE_DISK_TYPES, 'Compute Engine docs, "Disk types" (Persistent Disk and Hyperdisk types)'),
    Row(GCE_INSTANCE, "bootDisk.initializeParams.type", GCE_DISK_TYPES, 'Compute Engine docs, "Disk types"'),
    Row(GCE_TEMPLATE, "scheduling.provisioningModel", {"STANDARD", "SPOT", "FLEX_START", "RESERVATION_BOUND"},
        "Compute Engine API reference, Scheduling.provisioningModel (STANDARD | SPOT | FLEX_START | RESERVATION_BOUND)"),
    Row(GCE_TEMPLATE, "scheduling.onHostMaintenance", {"MIGRATE", "TERMINATE"},
        "Compute Engine API reference, Scheduling.onHostMaintenance (MIGRATE | TERMINATE)"),
    Row(GCE_TEMPLATE, "scheduling.instanceTerminationAction", {"STOP", "DELETE"},
        "Compute Engine API reference, Scheduling.instanceTerminationAction (STOP | DELETE)"),
    Row(GCE_TEMPLATE, "reservationAffinity.type", {"ANY_RESERVATION", "SPECIFIC_RESERVATION", "NO_RESERVATION"},
        "Compute Engine API reference, ReservationAffinity.consumeReservationType"),
    Row("gcp:compute/resourcePolicy:ResourcePolicy", "groupPlacementPolicy.collocation",
        {"COLLOCATED", "UNSPECIFIED_COLLOCATION"},
        "Compute Engine API reference, ResourcePolicyGroupPlacementPolicy.collocation"),
    # Multi-node NVLink domains (A4X, 18 VMs) and TPU7x slices are placed by an accelerator topology.
    Row("gcp:compute/resourcePolicy:ResourcePolicy", "groupPlacementPolicy.gpuTopology", {"1x72"},
        "Compute Engine API reference, ResourcePolicyGroupPlacementPolicy.gpuTopology; Cluster Toolkit "
        "a4xhigh-slurm-blueprint.yaml (accelerator_topology 1x72: one GB200 NVL72 domain of 18 a4x-highgpu-4g)"),
    Row("gcp:compute/resourcePolicy:ResourcePolicy", "workloadPolicy.type", {"HIGH_AVAILABILITY", "HIGH_THROUGHPUT"},
        "Compute Engine API reference, ResourcePolicyWorkloadPolicy.type (HIGH_AVAILABILITY | HIGH_THROUGHPUT)"),
    Row("gcp:compute/resourcePolicy:ResourcePolicy", "workloadPolicy.acceleratorTopology",
        {"1x72"} | {t for g in CATALOG.tpus.values() if g.workload_policy for t in g.topologies},
        "Compute Engine API reference, ResourcePolicyWorkloadPolicy.acceleratorTopology; Cluster Toolkit "
        "examples/gke-a4x (1x72) and examples/gke-tpu-7x (the TPU7x slice's tpu_topology, catalog/tpu.yaml)"),
    Row("gcp:compute/firewall:Firewall", "direction", {"INGRESS", "EGRESS"}, "Compute Engine API reference, Firewall.direction"),
    Row("gcp:compute/firewall:Firewall", "allows[].protocol",
        {"tcp", "udp", "icmp", "esp", "ah", "sctp", "ipip", "all", *map(str, range(256))},
        "Compute Engine API reference, Firewall.allowed[].IPProtocol (tcp, udp, icmp, esp, ah, sctp, ipip, all, or a number)"),
    Row("gcp:compute/globalAddress:GlobalAddress", "addressType", {"INTERNAL", "EXTERNAL"},
        "Compute Engine API reference, Address.addressType"),
    Row("gcp:compute/globalAddress:GlobalAddress", "purpose", {"VPC_PEERING", "PRIVATE_SERVICE_CONNECT"},
        "Compute Engine API reference, Address.purpose (global addresses: VPC_PEERING | PRIVATE_SERVICE_CONNECT)"),
    Row("gcp:compute/network:Network", "routingMode", {"REGIONAL", "GLOBAL"},
        "Compute Engine API reference, Network.routingConfig.routingMode"),
    Row("gcp:compute/routerNat:RouterNat", "natIpAllocateOption", {"MANUAL_ONLY", "AUTO_ONLY"},
        "Compute Engine API reference, RouterNat.natIpAllocateOption"),
    Row("gcp:compute/routerNat:RouterNat", "sourceSubnetworkIpRangesToNat",
        {"ALL_SUBNETWORKS_ALL_IP_RANGES", "ALL_SUBNETWORKS_ALL_PRIMARY_IP_RANGES", "LIST_OF_SUBNETWORKS"},
        "Compute Engine API reference, RouterNat.sourceSubnetworkIpRangesToNat"),
    Row("gcp:compute/routerNat:RouterNat", "subnetworks[].sourceIpRangesToNats[]",
        {"ALL_IP_RANGES", "PRIMARY_IP_RANGE", "LIST_OF_SECONDARY_IP_RANGES"},
        "Compute Engine API reference, RouterNatSubnetworkToNat.sourceIpRangesToNat"),
    Row("gcp:compute/routerNat:RouterNat", "logConfig.filter", {"ERRORS_ONLY", "TRANSLATIONS_ONLY", "ALL"},
        "Compute Engine API reference, RouterNatLogConfig.filter"),
    # --- GKE
    Row(NODEPOOL, "placementPolicy.type", {"COMPACT"},
        "GKE API reference, NodePool.PlacementPolicy.type (COMPACT; pulumi_gcp: supports a single value, COMPACT)"),
    Row(NODEPOOL, "placementPolicy.tpuTopology", _node_pool_topologies,
        'GKE docs, "Plan TPUs in GKE" (a topology of the machine type\'s TPU generation; catalog/tpu.yaml)'),
    Row(NODEPOOL, "nodeConfig.machineType",
        lambda i: {t for c in ("gcp",) for t in CATALOG.instance_types[c]} | set(CATALOG.controllers)
        | {m for g in CATALOG.tpus.values() for m in g.machine_types.values()},
        "Compute Engine machine types and GKE TPU machine types the catalog lists (catalog/gcp.yaml, tpu.yaml)"),
    Row(NODEPOOL, "nodeConfig.imageType", {"COS_CONTAINERD", "UBUNTU_CONTAINERD", "WINDOWS_LTSC_CONTAINERD"},
        'GKE docs, "Node images" (COS_CONTAINERD | UBUNTU_CONTAINERD | WINDOWS_LTSC_CONTAINERD)'),
    Row(NODEPOOL, "nodeConfig.diskType", GCE_DISK_TYPES - {"local-ssd"}, "GKE API reference, NodeConfig.diskType"),
    Row(NODEPOOL, "nodeConfig.reservationAffinity.consumeReservationType",
        {"UNSPECIFIED", "NO_RESERVATION", "ANY_RESERVATION", "SPECIFIC_RESERVATION"},
        "GKE API reference, ReservationAffinity.consumeReservationType"),
    Row(NODEPOOL, "nodeConfig.taints[].effect", {"NO_SCHEDULE", "PREFER_NO_SCHEDULE", "NO_EXECUTE"},
        "GKE API reference, NodeTaint.effect"),
    Row(NODEPOOL, "nodeConfig.workloadMetadataConfig.mode", {"MODE_UNSPECIFIED", "GCE_METADATA", "GKE_METADATA"},
        "GKE API reference, WorkloadMetadataConfig.mode"),
    Row(NODEPOOL, "nodeConfig.guestAccelerators[].type",
        {"nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-tesla-p100", "nvidia-tesla-p4", "nvidia-l4",
         "nvidia-tesla-a100", "nvidia-a100-80gb", "nvidia-h100-80gb", "nvidia-h100-mega-80gb", "nvidia-h200-141gb",
         "nvidia-b200", "nvidia-gb200", "nvidia-rtx-pro-6000"},
        'GKE docs, "About GPUs in GKE" / Compute Engine "GPU machine types" (accelerator type names)'),
    Row(NODEPOOL, "nodeConfig.guestAccelerators[].gpuDriverInstallationConfig.gpuDriverVersion",
        {"GPU_DRIVER_VERSION_UNSPECIFIED", "INSTALLATION_DISABLED", "DEFAULT", "LATEST"},
        "GKE API reference, GPUDriverInstallationConfig.gpuDriverVersion"),
    Row(NODEPOOL, "upgradeSettings.strategy", {"SURGE", "BLUE_GREEN", "SHORT_LIVED"},
        "GKE API reference, UpgradeSettings.strategy (SURGE | BLUE_GREEN | SHORT_LIVED)"),
    Row(NODEPOOL, "autoscaling.locationPolicy", {"BALANCED", "ANY"},
        "GKE API reference, NodePoolAutoscaling.locationPolicy (BALANCED | ANY)"),
    Row(GKE, "datapathProvider", {"DATAPATH_PROVIDER_UNSPECIFIED", "LEGACY_DATAPATH", "ADVANCED_DATAPATH"},
        "GKE API reference, NetworkConfig.datapathProvider"),
    Row(GKE, "networkingMode", {"VPC_NATIVE", "ROUTES"}, "pulumi_gcp container.Cluster networking_mode (VPC_NATIVE | ROUTES)"),
    Row(GKE, "ipAllocationPolicy.stackType", {"IPV4", "IPV4_IPV6"}, "GKE API reference, IPAllocationPolicy.stackType"),
    Row(GKE, "releaseChannel.channel", {"UNSPECIFIED", "RAPID", "REGULAR", "STABLE", "EXTENDED"},
        "GKE API reference, ReleaseChannel.channel"),
    Row(GKE, "nodeConfig.workloadMetadataConfig.mode", {"MODE_UNSPECIFIED", "GCE_METADATA", "GKE_METADATA"},
        "GKE API reference, WorkloadMetadataConfig.mode"),
    # --- storage, DNS, TPU
    Row("gcp:lustre/instance:Instance", "perUnitStorageThroughput", {"125", "250", "500", "1000"},
        "Google Cloud Managed Lustre API reference, Instance.perUnitStorageThroughput (125, 250, 500, 1000)"),
    Row("gcp:filestore/instance:Instance", "tier",
        {"STANDARD", "PREMIUM", "BASIC_HDD", "BASIC_SSD", "HIGH_SCALE_SSD", "ZONAL", "REGIONAL", "ENTERPRISE"},
        "Filestore API reference, Instance.Tier"),
    Row("gcp:filestore/instance:Instance", "networks[].connectMode",
        {"DIRECT_PEERING", "PRIVATE_SERVICE_ACCESS", "PRIVATE_SERVICE_CONNECT"},
        "Filestore API reference, NetworkConfig.connectMode"),
    Row("gcp:filestore/instance:Instance", "networks[].modes[]", {"ADDRESS_MODE_UNSPECIFIED", "MODE_IPV4", "MODE_IPV6"},
        "Filestore API reference, NetworkConfig.modes"),
    Row("gcp:storage/bucket:Bucket", "publicAccessPrevention", {"inherited", "enforced"},
        'Cloud Storage docs, "Public access prevention" (inherited | enforced)'),
    Row("gcp:dns/managedZone:ManagedZone", "visibility", {"public", "private"}, "Cloud DNS API reference, ManagedZone.visibility"),
    Row("gcp:dns/recordSet:RecordSet", "type",
        {"A", "AAAA", "CAA", "CNAME", "DNSKEY", "DS", "HTTPS", "IPSECKEY", "MX", "NAPTR", "NS", "PTR", "SOA", "SPF",
         "SRV", "SSHFP", "SVCB", "TLSA", "TXT"}, "Cloud DNS docs, Supported DNS record types"),
    Row(TPU_VM, "acceleratorConfig.type", set(TPU_TYPES),
        "Cloud TPU API reference, AcceleratorConfig.Type (V2 | V3 | V4 | V5LITE_POD | V5P | V6E)"),
    Row(TPU_VM, "acceleratorConfig.topology", _tpu_vm_topologies,
        'Cloud TPU docs, "TPU versions" (the slice shapes of each generation; catalog/tpu.yaml)'),
]


@pytest.mark.parametrize("row", TABLE, ids=[f"{r.type.split(':')[1]}.{r.path}" for r in TABLE])
def test_rendered_enum_values_are_ones_the_cloud_accepts(row):
    wrong, seen = [], 0
    for v in variants():
        for r in v.result().plan.custom_resources():
            if r.type != row.type:
                continue
            i = inputs(r)
            allowed = set(row.allowed(i) if callable(row.allowed) else row.allowed)
            for path, value in at(i, row.path):
                seen += 1
                if value not in allowed:
                    wrong.append(f"{v.id}: {r.urn}\n    {path} = {value!r}\n    allowed: "
                                 f"{', '.join(sorted(map(str, allowed)))[:400]}\n    source: {row.source}")
    assert seen, f"no plan renders {row.type} {row.path}: remove the row or add a variant that renders it"
    assert not wrong, "\n".join(wrong)
