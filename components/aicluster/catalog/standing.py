"""Standing cost: what a cluster pays per hour with no compute node up, priced from neutral items.

Two users build the same items: the design (aicluster.design.standing_cost, from a ClusterDesign)
and the policy pack (policies/rules/model/standing.py, from raw resources). Both hand them to
`price_standing`, so a plan and a pack judging the same stack price it the same way. Here, in the
catalog layer, because the pack may import only the catalog (and balance, stateful, perf).

An item is a kind ("instance", "fsx_lustre", "nat_gateway", ...), its cloud and region and its
quantities. Usage-priced things whose volume the plan does not know (NAT data, log GB, EFS bytes,
backups) become usage notes with their unit prices, never a silent zero; the metric samples of the
always-on nodes, whose volume it does know (nodes, scrape interval, series), are estimated and priced.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from aicluster.catalog.pricing import Quote, instance_price
from aicluster.catalog.service_prices import UnitPrice, unit_price

HOURS_PER_MONTH = 730          # AWS's and Google Cloud's monthly convention (24 x 365 / 12)


@dataclass(frozen=True)
class StandingItem:
    """One thing the cluster pays for while idle, as both the design and the resources see it."""
    kind: str                                   # a key of PRICERS
    item: str                                   # the line's name: "head node", "FSx for Lustre", ...
    cloud: str
    region: str
    qty: tuple[tuple[str, Any], ...] = ()       # (name, value), sorted: comparable and hashable

    def q(self, key: str, default: Any = None) -> Any:
        return dict(self.qty).get(key, default)


def standing_item(kind: str, item: str, cloud: str, region: str, **qty: Any) -> StandingItem:
    return StandingItem(kind, item, cloud, region, tuple(sorted(qty.items())))


@dataclass(frozen=True)
class CostLine:
    """One priced (or unpriced) line of the standing cost."""
    item: str                   # "FSx for Lustre", "head node", "NAT gateway", ...
    what: str                   # "24,000 GiB PERSISTENT_2 at 500 MB/s/TiB"
    usd_per_hour: float | None  # None: no catalog price (`what` says why)
    basis: str                  # unit price and where it comes from


@dataclass(frozen=True)
class StandingCost:
    """What the cluster costs with zero compute nodes up."""
    lines: tuple[CostLine, ...]
    usd_per_hour: float                 # the sum of the priced lines
    unpriced: tuple[str, ...]           # items without a catalog price, with why
    usage_notes: tuple[str, ...]        # usage-priced things left out of the figure, with unit prices

    @property
    def usd_per_month(self) -> float:
        return self.usd_per_hour * HOURS_PER_MONTH

    def to_dict(self) -> dict:
        return {"usd_per_hour": round(self.usd_per_hour, 4), "usd_per_month": round(self.usd_per_month, 2),
                "hours_per_month": HOURS_PER_MONTH,
                "lines": [{"item": ln.item, "what": ln.what, "usd_per_hour": ln.usd_per_hour,
                           "usd_per_month": None if ln.usd_per_hour is None else ln.usd_per_hour * HOURS_PER_MONTH,
                           "basis": ln.basis} for ln in self.lines],
                "unpriced": list(self.unpriced), "usage_notes": list(self.usage_notes)}


# ---------------------------------------------------------------- pricing, one function per kind

Priced = tuple[list[CostLine], list[str]]        # lines, usage notes


def _per_month(price: UnitPrice, amount: float) -> float:
    """$/h of `amount` units priced per month."""
    return price.usd * amount / HOURS_PER_MONTH


def _said(what: str, price: UnitPrice) -> str:
    """The plan line's words, with the stand-in region where the price is another region's."""
    return what if price.approximated_by is None else f"{what} (approximated: {price.approximated_by}'s price)"


def _none(item: StandingItem, what: str, why: str) -> Priced:
    return [CostLine(item.item, f"{what} (no catalog price: {why})", None, "")], []


def _instance_quote(cloud: str, instance_type: str, region: str) -> Quote | None:
    """The instance price list's on-demand price (aicluster.catalog.pricing): head, login and system
    nodes run on demand. None where the list has no price for the type in the region."""
    return instance_price(cloud, instance_type, region)


def _instance(i: StandingItem) -> Priced:
    count, itype = int(i.q("count", 1)), str(i.q("type"))
    what = f"{count} x {itype}"
    quote = _instance_quote(i.cloud, itype, i.region)
    if quote is None:
        return _none(i, what, f"{i.cloud} {itype} in {i.region} on demand")
    return [CostLine(i.item, what, quote.usd_per_hour * count, f"each: {quote.describe()}")], []


_DISK_SERVICE = {"aws": "ebs", "gcp": "persistent_disk"}


def _disk(i: StandingItem) -> Priced:
    count, gib, dtype = int(i.q("count", 1)), float(i.q("gib", 0)), str(i.q("disk_type"))
    what = f"{count} x {gib:,.0f} GiB {dtype}"
    price = unit_price(i.cloud, _DISK_SERVICE[i.cloud], dtype, i.region)
    if price is None:
        return _none(i, what, f"{dtype} in {i.region}")
    return [CostLine(i.item, _said(what, price), _per_month(price, gib * count), price.basis)], []


def _fsx(i: StandingItem) -> Priced:
    deployment, gib, tput = str(i.q("deployment")), float(i.q("gib", 0)), int(i.q("mbps_per_tib", 0))
    what = f"{gib:,.0f} GiB {deployment} at {tput} MB/s/TiB"
    price = unit_price("aws", "fsx_lustre", f"{deployment}-{tput}", i.region)
    lines = ([CostLine(i.item, _said(what, price), _per_month(price, gib), price.basis)] if price else
             _none(i, what, f"{deployment} at {tput} MB/s/TiB in {i.region}")[0])
    mode = i.q("metadata_mode")
    if mode not in (None, "AUTOMATIC"):     # AUTOMATIC metadata IOPS are in the storage price
        lines += _none(i, f"metadata {mode} ({i.q('metadata_iops')} IOPS)", "user-provisioned metadata IOPS")[0]
    return lines, []


def _managed_lustre(i: StandingItem) -> Priced:
    gib, tput = float(i.q("gib", 0)), int(i.q("mbps_per_tib", 0))
    what = f"{gib:,.0f} GiB at {tput} MB/s/TiB"
    price = unit_price("gcp", "managed_lustre", str(tput), i.region)
    if price is None:
        return _none(i, what, f"the {tput} MB/s/TiB tier in {i.region} (cloud.google.com/managed-lustre/pricing)")
    return [CostLine(i.item, _said(what, price), _per_month(price, gib), price.basis)], []


def _filestore(i: StandingItem) -> Priced:
    gib, tier = float(i.q("gib", 0)), str(i.q("tier"))
    what = f"{gib:,.0f} GiB {tier}"
    band = f"{tier}-1to9.75TiB" if gib < 10 * 1024 else f"{tier}-10to100TiB"    # Filestore's capacity bands
    price = unit_price("gcp", "filestore", band, i.region)
    if price is None:
        return _none(i, what, f"{band} in {i.region} (cloud.google.com/filestore/pricing)")
    return [CostLine(i.item, _said(what, price), _per_month(price, gib), price.basis)], []


def _efs(i: StandingItem) -> Priced:
    gib = float(i.q("expected_gib", 0))
    price = unit_price("aws", "efs", "standard", i.region)
    if price is None:
        return _none(i, "elastic", f"EFS Standard in {i.region}")
    what = (f"elastic: {gib:,.0f} GB expected" if gib else
            "elastic: billed on what is stored; 0 GB counted (the spec gives no expected size)")
    backup = unit_price("aws", "efs_backup", "warm", i.region)
    note = (f"{i.item}: ${price.usd:g} per GB-month stored (Standard; less once files move to Infrequent Access)"
            + (f", and AWS Backup's daily backups ${backup.usd:g} per GB-month (warm)" if backup else "")
            + f"; {price.source}" + (f"; {backup.source}" if backup else ""))
    return [CostLine(i.item, what, _per_month(price, gib), price.basis)], [note]


def _nat_gateway(i: StandingItem) -> Priced:
    count = int(i.q("count", 1))
    hour = unit_price("aws", "nat_gateway", "hour", i.region)
    data = unit_price("aws", "nat_gateway_data", "gb", i.region)
    notes = [f"NAT gateway data: ${data.usd:g} per GB processed (image pulls, package installs, "
             f"anything a node fetches from the internet); {data.source}"] if data else []
    if hour is None:
        return _none(i, f"{count} gateway(s)", f"NAT gateway in {i.region}")[0], notes
    return [CostLine(i.item, f"{count} gateway(s)", hour.usd * count, hour.basis)], notes


def _cloud_nat(i: StandingItem) -> Priced:
    vms, ips = int(i.q("vms", 0)), int(i.q("ips", 1))
    per_vm, cap, ip = (unit_price("gcp", "cloud_nat", t, i.region) for t in ("per_vm", "cap", "ip"))
    data = unit_price("gcp", "cloud_nat_data", "gib", i.region)
    usd = min(per_vm.usd * vms, cap.usd) + ip.usd * ips
    notes = [f"Cloud NAT data: ${data.usd:g} per GiB processed, both directions; every compute node that comes "
             f"up adds ${per_vm.usd:g}/h to the gateway (capped at ${cap.usd:g}/h from 32 VMs); {data.source}"]
    return [CostLine(i.item, f"{vms} always-on VM(s) behind it, {ips} NAT IP(s)", usd,
                     f"{per_vm.basis}; ${ip.usd:g} per NAT IP-hour")], notes


def _public_ipv4(i: StandingItem) -> Priced:
    count = int(i.q("count", 1))
    price = unit_price(i.cloud, "public_ipv4" if i.cloud == "aws" else "external_ip", "address", i.region)
    return [CostLine(i.item, f"{count} address(es)", price.usd * count, price.basis)], []


def _interface_endpoint(i: StandingItem) -> Priced:
    count, azs = int(i.q("count", 1)), int(i.q("azs", 1))
    hour = unit_price("aws", "interface_endpoint", "az_hour", i.region)
    data = unit_price("aws", "interface_endpoint_data", "gb", i.region)
    notes = [f"interface endpoints: ${data.usd:g} per GB processed; {data.source}"] if data else []
    if hour is None:
        return _none(i, f"{count} endpoint(s) x {azs} AZ(s)", f"interface endpoints in {i.region}")[0], notes
    return [CostLine(i.item, f"{count} endpoint(s) x {azs} AZ(s)", hour.usd * count * azs, hour.basis)], notes


def _rds(i: StandingItem) -> Priced:
    klass, gib, stype = str(i.q("instance_class")), float(i.q("storage_gib", 0)), str(i.q("storage_type"))
    what = f"{klass} {i.q('engine')}, {gib:,.0f} GiB {stype}" + (", Multi-AZ" if i.q("multi_az") else "")
    if i.q("multi_az"):
        return _none(i, what, "the catalog prices Single-AZ only")
    inst = unit_price("aws", "rds", klass, i.region)
    disk = unit_price("aws", "rds_storage", stype, i.region)
    if inst is None or disk is None:
        return _none(i, what, f"{klass if inst is None else stype} in {i.region}")
    backup = unit_price("aws", "rds_backup", "gb", i.region)
    return [CostLine(i.item, what, inst.usd + _per_month(disk, gib), f"{inst.basis}; storage {disk.basis}")], \
        [f"{i.item}: automated backups are free up to the database's size ({gib:,.0f} GiB), then "
         + (f"${backup.usd:g} per GB-month; {backup.source}" if backup else "per GB-month")]


def _cloud_sql(i: StandingItem) -> Priced:
    tier, gib, dtype = str(i.q("tier")), float(i.q("disk_gib", 0)), str(i.q("disk_type"))
    what = f"{tier} ({i.q('edition')}, {i.q('availability')}), {gib:,.0f} GB {dtype}"
    parts = tier.split("-")     # db-custom-<vCPUs>-<MiB>
    if len(parts) != 4 or parts[1] != "custom" or i.q("availability") != "ZONAL":
        return _none(i, what, "the catalog prices zonal db-custom tiers only")
    edition = str(i.q("edition")).lower()
    vcpu = unit_price("gcp", "cloud_sql_vcpu", edition, i.region)
    mem = unit_price("gcp", "cloud_sql_memory", edition, i.region)
    disk = unit_price("gcp", "cloud_sql_storage", dtype, i.region)
    if vcpu is None or mem is None or disk is None:
        return _none(i, what, f"Cloud SQL {edition} in {i.region}")
    usd = vcpu.usd * int(parts[2]) + mem.usd * int(parts[3]) / 1024 + _per_month(disk, gib)
    return [CostLine(i.item, what, usd, f"{vcpu.basis}; ${mem.usd:g} per GB-hour memory; storage {disk.basis}")], \
        [f"{i.item}: its backups are billed per GB-month of backup storage (price not in the catalog: "
         f"cloud.google.com/sql/pricing)"]


_CONTROL_PLANE = {"eks": ("aws", "eks", "standard"), "gke": ("gcp", "gke", "cluster")}


def _control_plane(i: StandingItem) -> Priced:
    cloud, service, tier = _CONTROL_PLANE[str(i.q("platform"))]
    price = unit_price(cloud, service, tier, i.region)
    notes = ["GKE: the billing account's free tier ($74.40 a month) covers one zonal or Autopilot cluster; "
             "this one counts at list price"] if service == "gke" else \
        ["EKS: a Kubernetes version past standard support bills extended support, $0.60 per hour"]
    return [CostLine(i.item, f"{i.q('platform').upper()} cluster fee", price.usd, price.basis)], notes


def _per_count(service: str, tier: str, unit_word: str) -> Callable[[StandingItem], Priced]:
    def price_it(i: StandingItem) -> Priced:
        count = int(i.q("count", 1))
        price = unit_price(i.cloud, service, tier, i.region)
        return [CostLine(i.item, f"{count} {unit_word}", _per_month(price, count), price.basis)], []
    return price_it


_PER_COUNT = {
    ("secret", "aws"): _per_count("secrets_manager", "secret", "secret(s)"),
    ("secret", "gcp"): _per_count("secret_manager", "version", "active secret version(s)"),
    ("kms_key", "aws"): _per_count("kms", "key", "customer managed key(s)"),
    ("kms_key", "gcp"): _per_count("kms", "software", "key version(s)"),
    ("dns_zone", "aws"): _per_count("route53_zone", "zone", "private hosted zone(s)"),
    ("dns_zone", "gcp"): _per_count("cloud_dns_zone", "zone", "private managed zone(s)"),
}


def _counted(i: StandingItem) -> Priced:
    lines, notes = _PER_COUNT[(i.kind, i.cloud)](i)
    if (i.kind, i.cloud) == ("kms_key", "aws"):    # aws/observability.py turns yearly rotation on
        notes = [*notes, "KMS: each yearly rotation of a key adds $1 a month, for its first two rotations; "
                         "aws.amazon.com/kms/pricing"]
    return lines, notes


# Samples ingested, priced by monthly volume tier: (cumulative upper bound, tier), unit in samples.
_SAMPLE_TIERS = {"aws": ("amp_ingest", ((2e9, "first_2b"), (252e9, "next_250b")), 1e7),
                 "gcp": ("managed_prometheus", ((50e9, "first_50b"),), 1e6)}
_BACKEND = {"aws": "Amazon Managed Service for Prometheus", "gcp": "Managed Service for Prometheus"}


def dcgm_gpus(kubernetes: bool, instance: Any, nodes: int) -> int:
    """GPUs whose DCGM fields the nodes of a pool send: NVIDIA GPUs, except on Slurm nodes of an
    architecture without a pinned enroot (no containers, so no DCGM exporter: design/observability.py)."""
    from aicluster.catalog.node_local import containers
    acc = instance.accelerator
    if acc.kind != "gpu" or acc.vendor != "nvidia":
        return 0
    if not kubernetes and instance.dpkg_arch not in containers().enroot.arches:
        return 0
    return nodes * instance.accelerator_count


def _samples_cost(cloud: str, region: str, samples: float) -> tuple[float | None, list[UnitPrice]]:
    """$/month of `samples` a month through the backend's volume tiers; None past the tiers priced."""
    service, tiers, unit = _SAMPLE_TIERS[cloud]
    usd, below, used = 0.0, 0.0, []
    for upper, tier in tiers:
        price = unit_price(cloud, service, tier, region)
        if price is None:
            return None, used
        used.append(price)
        usd += price.usd * (min(samples, upper) - below) / unit
        if samples <= upper:
            return usd, used
        below = upper
    return None, used


def _metrics(i: StandingItem) -> Priced:
    """The samples the always-on nodes send (head, login, system nodes, pools' min_nodes): their
    series (node_exporter's, estimated per node; DCGM's, one per GPU and field) every scrape."""
    from aicluster.catalog.observability import exporters
    from aicluster.catalog.service_prices import usage_estimate
    nodes, gpus, interval = int(i.q("nodes", 0)), int(i.q("gpus", 0)), int(i.q("scrape_interval_s", 30))
    per_node, fields = usage_estimate("node_exporter_series_per_node"), len(exporters()["dcgm_exporter"].counters)
    series = nodes * per_node.value + gpus * fields
    per_series = HOURS_PER_MONTH * 3600 / interval
    samples = series * per_series
    what = (f"{samples / 1e6:,.0f}M samples a month: {nodes} always-on node(s) x ~{per_node.value:,.0f} series"
            + (f" + {gpus} GPU(s) x {fields} DCGM fields" if gpus else "") + f", every {interval} s")
    usd, prices = _samples_cost(i.cloud, i.region, samples)
    node_month, _ = _samples_cost(i.cloud, i.region, per_node.value * per_series)
    notes = [f"metrics: each compute node that comes up adds ~{per_node.value * per_series / 1e6:,.0f}M samples a "
             f"month (${node_month or 0:,.2f}) plus {fields} series per GPU; the ~{per_node.value:,.0f} series a node "
             f"are an estimate ({per_node.source})"]
    if i.cloud == "aws":
        store = unit_price("aws", "amp_storage", "gb", i.region)
        if store:
            notes.append(f"metrics stored (AMP keeps 150 days): ${store.usd:g} per GB-month at 1-2 bytes a sample; "
                         f"queries $0.10 per billion samples processed; {store.source}")
    if usd is None:
        return _none(i, what, f"{_BACKEND[i.cloud]} samples at this volume in {i.region}")[0], notes
    basis = "; ".join(p.basis for p in prices) + f"; series per node: {per_node.source}"
    return [CostLine(i.item, what, usd / HOURS_PER_MONTH, basis)], notes


def _logs(i: StandingItem) -> Priced:
    days = int(i.q("retention_days", 30))
    if i.cloud == "aws":
        ingest, store = unit_price("aws", "cloudwatch_logs_ingest", "standard", i.region), \
            unit_price("aws", "cloudwatch_logs_storage", "gb", i.region)
        if ingest is None:
            return [], [f"logs (CloudWatch Logs): no catalog price in {i.region}"]
        return [], [f"logs (CloudWatch Logs, kept {days} days; VPC flow logs included): ${ingest.usd:g} per GB "
                    f"ingested, ${store.usd:g} per GB-month stored; {ingest.source}"]
    price = unit_price("gcp", "cloud_logging", "gib", i.region)
    return [], [f"logs (Cloud Logging bucket, kept {days} days: retention included): ${price.usd:g} per GiB "
                f"ingested after the project's first 50 GiB a month; {price.source}"]


PRICERS: dict[str, Callable[[StandingItem], Priced]] = {
    "instance": _instance, "disk": _disk, "fsx_lustre": _fsx, "managed_lustre": _managed_lustre,
    "filestore": _filestore, "efs": _efs, "nat_gateway": _nat_gateway, "cloud_nat": _cloud_nat,
    "public_ipv4": _public_ipv4, "interface_endpoint": _interface_endpoint, "rds": _rds,
    "cloud_sql": _cloud_sql, "control_plane": _control_plane, "secret": _counted, "kms_key": _counted,
    "dns_zone": _counted, "metrics": _metrics, "logs": _logs,
}


def static_pool_notes(pools: Iterable[tuple[str, int, str]]) -> tuple[str, ...]:
    """(pool, min nodes, type): a pool kept up by min_nodes is compute, not standing cost; say so."""
    return tuple(f"pool {name}: {n} x {itype} stay up (min_nodes): compute cost, not in this figure"
                 for name, n, itype in pools if n)


def price_standing(items: Iterable[StandingItem], notes: Iterable[str] = ()) -> StandingCost:
    """The standing cost of the items: one or more lines each, their sum, and the usage notes
    (`notes`: the builder's own, such as compute pools kept up by min_nodes)."""
    lines: list[CostLine] = []
    usage: list[str] = []
    for item in items:
        got, item_notes = PRICERS[item.kind](item)
        lines += got
        usage += [n for n in item_notes if n not in usage]
    usage += [n for n in notes if n not in usage]
    total = sum(ln.usd_per_hour for ln in lines if ln.usd_per_hour is not None)
    unpriced = tuple(f"{ln.item}: {ln.what}" for ln in lines if ln.usd_per_hour is None)
    return StandingCost(tuple(lines), total, unpriced, tuple(usage))


__all__ = ["CostLine", "HOURS_PER_MONTH", "PRICERS", "StandingCost", "StandingItem", "price_standing",
           "standing_item", "static_pool_notes"]
