"""What a planned cluster pays while idle: its standing cost, per hour and per month, with zero
compute nodes up. Pure: ClusterDesign -> neutral items (aicluster.catalog.standing) -> priced lines.

Counted: the filesystems (FSx for Lustre, Managed Lustre, Filestore, EFS at its expected size), the
head and login nodes and their root disks, Kubernetes system nodes, the NAT gateway and its public
IPv4 address, the accounting database, the EKS/GKE control plane fee, secrets, KMS keys, the
private DNS zone, and the metric samples the always-on nodes send (estimated). Usage-priced (notes
with unit prices): NAT data, log GB, EFS bytes, backups.
The policy pack builds the same items from raw resources (policies/rules/model/standing.py).
"""
from __future__ import annotations

from aicluster.catalog.observability import scrape
from aicluster.catalog.standing import (HOURS_PER_MONTH, CostLine, StandingCost, StandingItem, dcgm_gpus,
                                        price_standing, standing_item, static_pool_notes)
from aicluster.design.model import ClusterDesign
from aicluster.design.parts import StorageDesign
from aicluster.design.telemetry_backend import LOG_RETENTION_DAYS

# Root and boot disks of the head and login nodes (aws/slurm.py, aws/login.py: gp3; gcp/slurm.py,
# gcp/login.py: pd-balanced).
ROOT_DISK = {"aws": "gp3", "gcp": "pd-balanced"}


def _storage_item(d: ClusterDesign, fs: StorageDesign) -> StandingItem:
    c, r = d.cloud, d.region
    if fs.kind == "fsx-lustre":
        return standing_item("fsx_lustre", "FSx for Lustre", c, r, gib=fs.capacity_gib, deployment=fs.deployment_type,
                             mbps_per_tib=fs.throughput_mbps_per_tib, metadata_mode="AUTOMATIC")
    if fs.kind == "managed-lustre":
        return standing_item("managed_lustre", "Managed Lustre", c, r, gib=fs.capacity_gib,
                             mbps_per_tib=fs.throughput_mbps_per_tib)
    if fs.kind == "filestore":
        return standing_item("filestore", "Filestore", c, r, gib=fs.capacity_gib, tier=fs.filestore_tier)
    return standing_item("efs", "EFS", c, r, expected_gib=0)      # elastic: the spec gives no size


def _nodes(d: ClusterDesign) -> tuple[list[StandingItem], int]:
    """The always-on VMs (head, login, Kubernetes system nodes) and their disks; and their count."""
    c, r, items, vms = d.cloud, d.region, [], 0
    if d.slurm is not None:
        s = d.slurm
        items += [standing_item("instance", "head node", c, r, type=s.head_instance_type, count=1),
                  standing_item("disk", "head node root disk", c, r, disk_type=ROOT_DISK[c],
                                gib=s.head_root_volume_gib, count=1)]
        vms += 1
        if s.login and s.login.count:
            items += [standing_item("instance", "login nodes", c, r, type=s.login.instance_type, count=s.login.count),
                      standing_item("disk", "login node root disks", c, r, disk_type=ROOT_DISK[c],
                                    gib=s.login.root_volume_gib, count=s.login.count)]
            vms += s.login.count
    k = d.kubernetes
    if k is not None and k.system_nodes:
        items.append(standing_item("instance", "system nodes", c, r, type=k.system_instance_type, count=k.system_nodes))
        vms += k.system_nodes
    return items, vms


def standing_items(d: ClusterDesign) -> tuple[StandingItem, ...]:
    """The neutral items of the design, in plan order."""
    c, r = d.cloud, d.region
    items = [_storage_item(d, fs) for fs in d.storage]
    nodes, vms = _nodes(d)
    items += nodes
    if d.network.create_vpc:
        if c == "aws":
            items += [standing_item("nat_gateway", "NAT gateway", c, r, count=1),
                      standing_item("public_ipv4", "public IPv4", c, r, count=1 + _head_public(d))]
        else:
            items.append(standing_item("cloud_nat", "Cloud NAT", c, r, vms=vms, ips=1))
    if _head_public(d) and not (c == "aws" and d.network.create_vpc):
        items.append(standing_item("public_ipv4", "public IPv4", c, r, count=1))
    db = d.slurm.accounting_settings.database if d.slurm and d.slurm.accounting_settings else None
    if db is not None:
        items.append(standing_item("rds", "accounting database (RDS)", c, r, instance_class=db.size,
                                   engine=db.engine, storage_gib=db.storage_gib, storage_type="gp3", multi_az=False)
                     if c == "aws" else
                     standing_item("cloud_sql", "accounting database (Cloud SQL)", c, r, tier=db.size,
                                   edition=db.edition, disk_gib=db.storage_gib, disk_type="PD_SSD",
                                   availability="ZONAL"))
    if d.kubernetes is not None:
        items.append(standing_item("control_plane", "control plane", c, r, platform=d.kubernetes.platform))
    if d.slurm is not None:       # the munge key, and slurmdbd's password with a managed database
        items.append(standing_item("secret", "secrets", c, r, count=1 + (db is not None)))
        items.append(standing_item("dns_zone", "node DNS zone", c, r, count=1))
    if c == "aws":                # the alerts topic's key (aws/observability.py)
        items.append(standing_item("kms_key", "KMS key", c, r, count=1))
    k8s = d.kubernetes is not None
    items.append(standing_item("metrics", "metrics", c, r, nodes=vms + sum(p.min_nodes for p in d.pools),
                               gpus=sum(dcgm_gpus(k8s, p.instance, p.min_nodes) for p in d.pools),
                               scrape_interval_s=scrape().interval_s))
    items.append(standing_item("logs", "logs", c, r, retention_days=LOG_RETENTION_DAYS))
    return tuple(items)


def _head_public(d: ClusterDesign) -> int:
    """1 when the head node has a public IPv4 address: slurm.head_public_ip (on GCP only on a network
    the stack creates: gcp/slurm.py)."""
    if d.slurm is None or not d.slurm.head_public_ip:
        return 0
    return int(d.cloud == "aws" or d.network.create_vpc)


def standing_cost(design: ClusterDesign) -> StandingCost:
    """What the designed cluster pays per hour (and per 730-hour month) with zero compute nodes up."""
    notes = static_pool_notes([(p.name, p.min_nodes, p.instance.name) for p in design.pools])
    return price_standing(standing_items(design), notes)


def plan_lines(cost: StandingCost) -> list[str]:
    """The plan's "Standing cost" block: one line per item, the totals, unpriced items, usage notes."""
    lines = []
    for ln in cost.lines:
        money = "unpriced" if ln.usd_per_hour is None else \
            f"${ln.usd_per_hour:,.4f}/h  ${ln.usd_per_hour * HOURS_PER_MONTH:,.2f}/month"
        lines.append(f"{ln.item:<32} {money:<30} {ln.what}")
    lines.append(f"{'total':<32} ${cost.usd_per_hour:,.2f}/h  ${cost.usd_per_month:,.2f}/month ({HOURS_PER_MONTH} h)"
                 + (f"; {len(cost.unpriced)} item(s) unpriced" if cost.unpriced else ""))
    lines += [f"usage-priced: {n}" for n in cost.usage_notes]
    return lines


__all__ = ["CostLine", "StandingCost", "plan_lines", "standing_cost", "standing_items"]
