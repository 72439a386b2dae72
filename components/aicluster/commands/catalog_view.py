"""`aicluster catalog [TYPE]`: the catalog's facts as text or JSON, every one with its source."""
from __future__ import annotations

import dataclasses
from typing import Any

from aicluster.catalog import InstanceType, load_catalog
from aicluster.catalog.pricing import REFERENCE_REGIONS, Quote, price_table, reference_price, tpu_price, tpu_table
from aicluster.errors import SpecError


def _fmt(value: Any) -> str:
    if value is None:
        return "unknown (no primary source)"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def overview() -> list[str]:
    catalog = load_catalog()
    lines = []
    header = f"{'type':<20} {'accelerators':<20} {'vCPU':>5} {'RAM GiB':>8} {'net Gbps':>9} {'fabric':<22} {'$/h':>9}"
    for cloud, types in catalog.instance_types.items():
        lines += [f"{cloud.upper()} instance types", header]
        for t in types.values():
            fabric = (f"{t.max_efa_interfaces} EFA" if cloud == "aws" and t.efa_capable
                      else f"{t.gpu_nics} GPU NICs ({t.gpu_nic_stack})" if t.gpu_nics else "none")
            ref = reference_price(cloud, t.name)
            price = "-" if ref is None else f"{ref.usd_per_hour:.3f}" + ("*" if ref.capacity != "on-demand" else "")
            lines.append(f"{t.name:<20} {f'{t.accelerator_count}x {t.accelerator.model}':<20} "
                         f"{_fmt(t.vcpu) if t.vcpu else '-':>5} {_fmt(t.memory_gib) if t.memory_gib else '-':>8} "
                         f"{_fmt(t.network_gbps):>9} {fabric:<22} {price:>9}")
        aliases = ", ".join(f"{a}={n}" for a, n in sorted(catalog.aliases[cloud].items()))
        lines += [f"aliases: {aliases}",
                  f"$/h: {REFERENCE_REGIONS[cloud]} on-demand (* a capacity block rate: sold only so); every region and capacity "
                  "type: `aicluster catalog TYPE`", ""]
    lines.append("TPU generations (per chip)")
    for tpu in catalog.tpus.values():
        q = tpu_price(tpu.name, REFERENCE_REGIONS["gcp"])
        price = f", ${q.usd_per_hour:g}/chip-h {q.region} on-demand" if q else ""
        lines.append(f"{tpu.name:<5} {tpu.hbm_gib_per_chip:g} GiB HBM, {tpu.bf16_tflops:g} TFLOPS, "
                     f"{tpu.ici_dims}D ICI, up to {tpu.max_chips} chips, {len(tpu.topologies)} slice shapes{price}")
    lines += ["", "FSx for Lustre deployment types"]
    for fsx in catalog.fsx.values():
        tiers = ", ".join(map(str, fsx.throughput_mbps_per_tib)) or f"fixed {fsx.baseline_mbps_per_tib}"
        lines.append(f"{fsx.name:<13} throughput MB/s/TiB: {tiers}; capacity: {fsx.capacity_rule()}")
    lines += ["", "Managed Lustre tiers (GCP)"]
    for tier in catalog.managed_lustre.values():
        lines.append(f"{tier.throughput_mbps_per_tib:>5} MB/s/TiB: at least {tier.min_capacity_gib} GiB")
    lines += ["", "`aicluster catalog TYPE` shows every fact of one entry with its source."]
    return lines


def _instance_facts(t: InstanceType) -> dict[str, Any]:
    facts = {
        "cloud": t.cloud,
        "accelerator": f"{t.accelerator_count}x {t.accelerator.model} ({t.accelerator.memory_gib:g} GiB each)",
        "dense BF16 TFLOPS per accelerator": t.accelerator.bf16_tflops,
        "memory bandwidth GB/s per accelerator": t.accelerator.hbm_bandwidth_gbs,
        "vCPU": t.vcpu,
        "RAM GiB": t.memory_gib,
        "network Gbps": t.network_gbps,
    }
    if t.cloud == "aws":
        facts |= {"network cards": t.network_cards, "max EFA interfaces": t.max_efa_interfaces,
                  "GPUDirect RDMA": t.gpudirect_rdma, "local NVMe GB": t.local_nvme_gb}
    else:
        facts |= {"host NICs": t.host_nics, "GPU NICs": t.gpu_nics, "GPU NIC stack": t.gpu_nic_stack,
                  "GPU network Gbps": t.gpu_network_gbps}
    facts |= _price_facts(price_table(t.cloud, t.name), "no catalog price in any region (prices.yaml)")
    facts |= {"source": t.source, "accelerator source": t.accelerator.source}
    return facts


def _price_facts(table: dict[str, dict[str, Quote]], none: str, unit: str = "/h") -> dict[str, Any]:
    """One line per capacity type: `$/h spot: us-east-1 26.79 (20.99-30.33), ...`, then the sources."""
    if not table:
        return {"$/h": none}
    facts: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for cap in ("on-demand", "spot", "capacity-block", "flex-start"):
        quotes = table.get(cap) or {}
        if not quotes:
            continue
        facts[f"${unit} {cap}"] = ", ".join(
            f"{region} {q.usd_per_hour:,.2f}" + (f" ({q.low:,.2f}-{q.high:,.2f})" if q.low != q.high else "")
            + ("~" if "approximated" in q.basis or " x " in q.basis else "")
            for region, q in sorted(quotes.items()))
        for q in quotes.values():
            sources.setdefault(q.source, q.checked)
    if "on-demand" in table:
        facts[f"${unit} reservation"] = "the on-demand rate (ODCR / GCP reservation) unless a commitment applies"
    facts["price sources"] = "; ".join(f"{s} (checked {d})" for s, d in sources.items()) + \
        " (~: derived or approximated, `aicluster catalog --format json TYPE` gives each basis)"
    return facts


def _lookup(name: str) -> tuple[str, Any]:
    catalog = load_catalog()
    found = catalog.find(name)
    if found is None:
        for cloud in catalog.aliases:
            found = catalog.resolve(cloud, name)
            if found:
                break
    if found:
        return "instance", found
    if name in catalog.tpus:
        return "tpu", catalog.tpus[name]
    if name.upper() in catalog.fsx:
        return "fsx", catalog.fsx[name.upper()]
    choices = [*catalog.names("aws"), *catalog.names("gcp"), *catalog.tpus, *catalog.fsx]
    raise SpecError.one("TYPE", name, "an instance type, alias, TPU generation or FSx deployment type "
                                      "listed by `aicluster catalog`", choices, subject="argument")


def describe(name: str) -> list[str]:
    kind, entry = _lookup(name)
    facts = _instance_facts(entry) if kind == "instance" else dataclasses.asdict(entry)
    if kind == "tpu":
        facts |= _price_facts(tpu_table(entry.name), "no catalog price in any region (prices.yaml)", "/chip-h")
    width = max(len(k) for k in facts)
    title = entry.name
    return [title, *(f"  {k:<{width}}  {_fmt(v)}" for k, v in facts.items())]


def describe_json(name: str | None) -> Any:
    catalog = load_catalog()
    if name is None:
        return {
            "instance_types": {c: {n: dataclasses.asdict(t) for n, t in ts.items()}
                               for c, ts in catalog.instance_types.items()},
            "aliases": catalog.aliases,
            "tpus": {n: dataclasses.asdict(t) for n, t in catalog.tpus.items()},
            "fsx_lustre": {n: dataclasses.asdict(t) for n, t in catalog.fsx.items()},
            "managed_lustre": {str(k): dataclasses.asdict(t) for k, t in catalog.managed_lustre.items()},
        }
    kind, entry = _lookup(name)
    prices = price_table(entry.cloud, entry.name) if kind == "instance" else tpu_table(entry.name) if kind == "tpu" else {}
    return dataclasses.asdict(entry) | ({"prices": {cap: {r: dataclasses.asdict(q) for r, q in quotes.items()}
                                                    for cap, quotes in prices.items()}} if kind in ("instance", "tpu") else {})
