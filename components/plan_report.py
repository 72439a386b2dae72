"""The plan as a person reads it (text, markdown) and as tools read it (JSON)."""
from __future__ import annotations

import os
from typing import Any

from .balance import report_lines, to_dict
from .design import ClusterDesign, PoolDesign, StorageDesign
from .offline.report import resource_table_markdown, resource_tree
from .planner import PlanResult

_NOT_YET = {
    "slurm": "the Slurm control plane (head node, slurmctld) is not built yet: this plan holds the fabric, "
             "compute templates and storage it will use",
    "kubernetes": "the Kubernetes control plane is not built yet: this plan holds the fabric, compute "
                  "templates and storage it will use",
}


def _fabric(pool: PoolDesign) -> str:
    if not pool.efa:
        return "ENA only (no EFA)"
    cards = len({nic.network_card_index for nic in pool.interfaces if nic.is_efa})
    return f"1 ENA + {pool.efa_devices} EFA-only on {cards} cards"


def pool_lines(design: ClusterDesign) -> list[str]:
    lines = []
    for pool in design.pools:
        capacity = pool.capacity.type + (f" {pool.capacity.reservation_id}" if pool.capacity.reservation_id else "")
        placement = f"{pool.placement.strategy} placement group" if pool.placement.strategy else \
            f"no placement group ({pool.placement.reason})"
        lines.append(f"  {pool.name}: {pool.instance.name} ({pool.instance.accelerator_count}x "
                     f"{pool.instance.accelerator.model}), nodes {pool.min_nodes}..{pool.max_nodes} "
                     f"as {pool.hostlist}")
        lines.append(f"    fabric {_fabric(pool)}; {placement}; capacity {capacity}")
    return lines


def _storage_line(fs: StorageDesign) -> str:
    kind = f"FSx for Lustre {fs.deployment_type}" if fs.kind == "fsx-lustre" else "Managed Lustre"
    guard = "protected + retained" if fs.protect else "NOT protected"
    return (f"  {fs.name}: {kind}, {fs.capacity_gib} GiB x {fs.throughput_mbps_per_tib} MB/s/TiB = "
            f"{fs.throughput_mbps / 1000:.1f} GB/s, mounted at {fs.mount}; {guard}")


def _shown(path) -> str:
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def text(result: PlanResult) -> list[str]:
    d, plan = result.design, result.plan
    custom = plan.custom_resources()
    lines = [
        f"aicluster plan: stack {result.stack.name} ({_shown(result.stack.path)}), offline with a fake cloud",
        f"cluster {d.name}: {d.cloud} {d.zone}, scheduler {d.scheduler}",
        "",
        "Pools",
        *pool_lines(d),
        "",
        "Storage",
        *([_storage_line(fs) for fs in d.storage] or ["  none"]),
        "",
        f"Resources: {len(custom)} to create, in {len(plan.components())} components",
        *["  " + line for line in resource_tree(plan)],
        "",
        "Balance",
        *["  " + line for line in report_lines(result.balance)],
    ]
    if result.files:
        lines += ["", "Rendered files (written with --out DIR)", *[f"  {name}" for name in sorted(result.files)]]
    lines += ["", f"note: {_NOT_YET[d.scheduler]}."]
    return lines


def markdown(result: PlanResult) -> list[str]:
    d = result.design
    return [
        f"## aicluster plan: `{result.stack.name}`",
        "",
        f"Cluster **{d.name}** on {d.cloud} `{d.zone}`, scheduler {d.scheduler}.",
        "",
        "### Pools",
        "",
        *[line.strip() and f"- {line.strip()}" for line in pool_lines(d)],
        "",
        "### Storage",
        "",
        *([f"- {_storage_line(fs).strip()}" for fs in d.storage] or ["- none"]),
        "",
        f"### Resources ({len(result.plan.custom_resources())})",
        "",
        *resource_table_markdown(result.plan),
        "",
        "### Balance",
        "",
        "```",
        *report_lines(result.balance),
        "```",
        "",
        f"_Note: {_NOT_YET[d.scheduler]}._",
    ]


def to_json(result: PlanResult) -> dict[str, Any]:
    d = result.design
    return {
        "stack": result.stack.name,
        "cluster": {
            "name": d.name, "cloud": d.cloud, "region": d.region, "zone": d.zone, "scheduler": d.scheduler,
            "pools": [{
                "name": p.name, "instance_type": p.instance.name, "min_nodes": p.min_nodes,
                "max_nodes": p.max_nodes, "hostlist": p.hostlist, "efa_devices": p.efa_devices,
                "placement": p.placement.strategy, "capacity": p.capacity.type,
            } for p in d.pools],
            "storage": [{
                "name": s.name, "kind": s.kind, "mount": s.mount, "capacity_gib": s.capacity_gib,
                "throughput_mbps_per_tib": s.throughput_mbps_per_tib, "protect": s.protect,
            } for s in d.storage],
        },
        "plan": result.plan.to_json(),
        "balance": to_dict(result.balance),
        "files": sorted(result.files),
    }
