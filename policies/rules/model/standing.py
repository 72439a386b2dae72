"""Standing cost from raw resources: the same neutral items aicluster.design.standing_cost builds
from a design (aicluster.catalog.standing), read off what a stack declares, and priced by the same
function. A hand-written stack is judged by what it creates: a head node is an instance tagged
aicluster-role head, a filesystem is an FSx / Managed Lustre / Filestore / EFS resource.
"""
from __future__ import annotations

from typing import Any

from aicluster.catalog.observability import scrape
from aicluster.catalog.standing import (StandingCost, StandingItem, dcgm_gpus, price_standing, standing_item,
                                        static_pool_notes)

from .._props import ROLE, get, integer, is_unknown, items, kind, number
from .capacity import stack_region
from .cluster import Cluster
from .index import Index

_ROOT_DISK = {"aws": "gp3", "gcp": "pd-balanced"}


def _cloud(ix: Index) -> str | None:
    clouds = {kind(r.resource_type).split(":")[0] for r in ix.resources} & {"aws", "gcp"}
    return clouds.pop() if len(clouds) == 1 else None


def _text(value: Any, default: str = "(unknown)") -> str:
    """A known string property, else `default`: an unknown (preview) or odd value prices as nothing."""
    return value if isinstance(value, str) and value and not is_unknown(value) else default


def _role(ix: Index, r: Any) -> str | None:
    return ix.tags(r).get(ROLE)


def _instances(ix: Index, cloud: str, region: str) -> tuple[list[StandingItem], int]:
    """Head and login VMs with their root disks, and Kubernetes system nodes; and the VM count."""
    out, vms = [], 0
    token = "aws:ec2/instance" if cloud == "aws" else "gcp:compute/instance"
    for role, item in (("head", "head node"), ("login", "login nodes")):
        found = [r for r in ix.of(token) if _role(ix, r) == role]
        if not found:
            continue
        p0 = ix.props(found[0])
        itype = get(p0, "instanceType" if cloud == "aws" else "machineType")
        out.append(standing_item("instance", item, cloud, region, type=_text(itype), count=len(found)))
        gib = _aws_root_gib(ix, found[0]) if cloud == "aws" else number(get(p0, "bootDisk", "initializeParams", "size"))
        out.append(standing_item("disk", f"{item.replace('nodes', 'node')} root disk" + ("s" if role == "login" else ""),
                                 cloud, region, disk_type=_ROOT_DISK[cloud], gib=int(gib or 0), count=len(found)))
        vms += len(found)
    system = _system_nodes(ix, cloud)
    if system:
        itype, count = system
        out.append(standing_item("instance", "system nodes", cloud, region, type=itype, count=count))
        vms += count
    return out, vms


def _aws_root_gib(ix: Index, instance: Any) -> float:
    """The root volume of an instance: its own root_block_device, else its launch template's."""
    size = number(get(ix.props(instance), "rootBlockDevice", "volumeSize"))
    if size is not None:
        return size
    for lt in ix.refs(instance, "launchTemplate", {"aws:ec2/launchTemplate"}):
        for bdm in items(ix.props(lt), "blockDeviceMappings"):
            size = number(get(bdm, "ebs", "volumeSize"))
            if size is not None:
                return size
    return 0


def _system_nodes(ix: Index, cloud: str) -> tuple[str, int] | None:
    """EKS node groups / GKE node pools of aicluster-role control-plane: the add-on controllers' nodes."""
    if cloud == "aws":
        for r in ix.of("aws:eks/nodeGroup"):
            if _role(ix, r) == "control-plane":
                p = ix.props(r)
                return _text(get(p, "instanceTypes", 0)), integer(get(p, "scalingConfig", "desiredSize")) or 0
        return None
    for r in ix.of("gcp:container/nodePool"):
        if _role(ix, r) == "control-plane":
            p = ix.props(r)
            zones = len(items(p, "nodeLocations")) or 1
            return _text(get(p, "nodeConfig", "machineType")), (integer(get(p, "nodeCount")) or 0) * zones
    return None


def _filesystems(c: Cluster, cloud: str, region: str) -> list[StandingItem]:
    out = []
    for fs in c.filesystems:
        p = c.index.props(fs.resource)
        gib = int(fs.capacity_gib or 0)
        if fs.kind == "fsx-lustre":
            out.append(standing_item("fsx_lustre", "FSx for Lustre", cloud, region, gib=gib,
                                     deployment=_text(get(p, "deploymentType"), "SCRATCH_1"),
                                     mbps_per_tib=int(fs.throughput_mbps_per_tib or 0),
                                     metadata_mode=_text(get(p, "metadataConfiguration", "mode"), "AUTOMATIC"),
                                     **({"metadata_iops": get(p, "metadataConfiguration", "iops")}
                                        if get(p, "metadataConfiguration", "mode") == "USER_PROVISIONED" else {})))
        elif fs.kind == "gcp-lustre":
            out.append(standing_item("managed_lustre", "Managed Lustre", cloud, region, gib=gib,
                                     mbps_per_tib=int(fs.throughput_mbps_per_tib or 0)))
        elif fs.kind == "filestore":
            out.append(standing_item("filestore", "Filestore", cloud, region, gib=gib, tier=_text(get(p, "tier"))))
        else:
            out.append(standing_item("efs", "EFS", cloud, region, expected_gib=0))
    return out


def _database(ix: Index, cloud: str, region: str) -> StandingItem | None:
    if cloud == "aws":
        for r in ix.of("aws:rds/instance"):
            p = ix.props(r)
            return standing_item("rds", "accounting database (RDS)", cloud, region,
                                 instance_class=_text(get(p, "instanceClass")), engine=_text(get(p, "engine")),
                                 storage_gib=integer(get(p, "allocatedStorage")) or 0,
                                 storage_type=_text(get(p, "storageType"), "gp2"), multi_az=get(p, "multiAz") is True)
        return None
    for r in ix.of("gcp:sql/databaseInstance"):
        s = get(ix.props(r), "settings") or {}
        return standing_item("cloud_sql", "accounting database (Cloud SQL)", cloud, region, tier=_text(get(s, "tier")),
                             edition=_text(get(s, "edition"), "ENTERPRISE"), disk_gib=integer(get(s, "diskSize")) or 0,
                             disk_type=_text(get(s, "diskType"), "PD_SSD"),
                             availability=_text(get(s, "availabilityType"), "ZONAL"))
    return None


def _count(ix: Index, token: str) -> int:
    return len(ix.of(token))


def _min_nodes(c: Cluster, pool: Any) -> int:
    """A pool's nodes kept up: its aicluster-min-nodes tag (what the plan tags its templates with)."""
    return integer(c.index.tags(pool.anchor).get("aicluster-min-nodes")) or 0


def standing_items_from_resources(c: Cluster) -> tuple[StandingItem, ...]:
    """The neutral items the resources declare, in the design's order."""
    ix = c.index
    cloud = _cloud(ix)
    if cloud is None:
        return ()
    region = stack_region(ix, cloud) or "unknown"
    out = _filesystems(c, cloud, region)
    nodes, vms = _instances(ix, cloud, region)
    out += nodes
    if cloud == "aws":
        if n := _count(ix, "aws:ec2/natGateway"):
            out.append(standing_item("nat_gateway", "NAT gateway", cloud, region, count=n))
        public = _count(ix, "aws:ec2/eip") + sum(1 for r in ix.of("aws:ec2/instance")
                                                 if get(ix.props(r), "associatePublicIpAddress") is True)
        if public:
            out.append(standing_item("public_ipv4", "public IPv4", cloud, region, count=public))
        interface = [r for r in ix.of("aws:ec2/vpcEndpoint") if get(ix.props(r), "vpcEndpointType") == "Interface"]
        if interface:
            azs = max(len(items(ix.props(r), "subnetIds")) for r in interface) or 1
            out.append(standing_item("interface_endpoint", "interface endpoints", cloud, region,
                                     count=len(interface), azs=azs))
    else:
        if _count(ix, "gcp:compute/routerNat"):
            out.append(standing_item("cloud_nat", "Cloud NAT", cloud, region, vms=vms, ips=1))
        public = sum(1 for r in ix.of("gcp:compute/instance")
                     if any(items(nic, "accessConfigs") for nic in items(ix.props(r), "networkInterfaces")))
        if public:
            out.append(standing_item("public_ipv4", "public IPv4", cloud, region, count=public))
    db = _database(ix, cloud, region)
    if db is not None:
        out.append(db)
    if _count(ix, "aws:eks/cluster") or _count(ix, "gcp:container/cluster"):
        out.append(standing_item("control_plane", "control plane", cloud, region,
                                 platform="eks" if cloud == "aws" else "gke"))
    secrets = _count(ix, "aws:secretsmanager/secret") + _count(ix, "gcp:secretmanager/secret")
    if secrets:
        out.append(standing_item("secret", "secrets", cloud, region, count=secrets))
    zones = _count(ix, "aws:route53/zone") + _count(ix, "gcp:dns/managedZone")
    if zones:
        out.append(standing_item("dns_zone", "node DNS zone", cloud, region, count=zones))
    keys = _count(ix, "aws:kms/key") + _count(ix, "gcp:kms/cryptoKey")
    if keys:
        out.append(standing_item("kms_key", "KMS key", cloud, region, count=keys))
    if _count(ix, "aws:amp/workspace") or _count(ix, "gcp:monitoring/alertPolicy"):
        k8s = bool(_count(ix, "aws:eks/cluster") or _count(ix, "gcp:container/cluster"))
        out.append(standing_item("metrics", "metrics", cloud, region,
                                 nodes=vms + sum(_min_nodes(c, p) for p in c.pools),
                                 gpus=sum(dcgm_gpus(k8s, p.instance, _min_nodes(c, p)) for p in c.pools),
                                 scrape_interval_s=scrape().interval_s))
    retention = [integer(get(ix.props(r), "retentionInDays")) for r in ix.of("aws:cloudwatch/logGroup")] + \
        [integer(get(ix.props(r), "retentionDays")) for r in ix.of("gcp:logging/projectBucketConfig")]
    if retention:
        out.append(standing_item("logs", "logs", cloud, region, retention_days=max(d or 0 for d in retention)))
    return tuple(out)


def standing_from_resources(c: Cluster) -> StandingCost:
    """The standing cost of the cluster the resources describe (zero compute nodes up)."""
    static = [(p.key, _min_nodes(c, p), p.instance.name) for p in c.pools]
    return price_standing(standing_items_from_resources(c), static_pool_notes(static))


__all__ = ["standing_from_resources", "standing_items_from_resources"]
