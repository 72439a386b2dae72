"""Human-readable views of a Plan: an indented resource tree and a markdown table.

Key settings come from each resource's *inputs* (camelCase wire keys). To summarise another
type, add ``SUMMARIES[type_token] = fn(inputs) -> str``.
"""
from __future__ import annotations

from typing import Any, Callable

from aicluster.offline.capture import STACK_TYPE, CapturedResource, Plan, Secret, redact

INDENT = "  "


def _show(value: Any) -> str:
    return "[secret]" if isinstance(value, Secret) else str(redact(value))


def _launch_template(i: dict) -> str:
    parts = []
    if i.get("instanceType") is not None:
        parts.append(_show(i["instanceType"]))
    nics = i.get("networkInterfaces") or []
    if nics:
        efa = sum(1 for n in nics if isinstance(n, dict) and n.get("interfaceType") in ("efa", "efa-only"))
        parts.append(f"{len(nics)} NICs: {len(nics) - efa} ENA + {efa} EFA")
    tokens = (i.get("metadataOptions") or {}).get("httpTokens")
    if tokens is not None:
        parts.append(f"httpTokens={_show(tokens)}")
    return ", ".join(parts)


def _lustre(i: dict) -> str:
    parts = [
        _show(i["deploymentType"]) if i.get("deploymentType") is not None else None,
        f"{_show(i['storageCapacity'])} GiB" if i.get("storageCapacity") is not None else None,
        f"{_show(i['perUnitStorageThroughput'])} MB/s/TiB" if i.get("perUnitStorageThroughput") is not None else None,
    ]
    return ", ".join(p for p in parts if p)


def _subnet(i: dict) -> str:
    az = i.get("availabilityZone") or i.get("availabilityZoneId")
    return _show(i.get("cidrBlock", "")) + (f" in {_show(az)}" if az else "")


def _key(*keys: str, fmt: str = "{}") -> Callable[[dict], str]:
    def summary(i: dict) -> str:
        for key in keys:
            if i.get(key) not in (None, ""):
                return fmt.format(_show(i[key]))
        return ""
    return summary


def _eks_node_group(i: dict) -> str:
    scaling = i.get("scalingConfig") or {}
    parts = [_show(i.get("amiType", "")), _show(i.get("capacityType", "")),
             f"{_show(scaling.get('minSize', '?'))}..{_show(scaling.get('maxSize', '?'))} nodes" if scaling else "",
             f"types {_show(','.join(i['instanceTypes']))}" if i.get("instanceTypes") else "",
             "taints " + ",".join(_show(t.get("key")) for t in i["taints"]) if i.get("taints") else ""]
    return ", ".join(p for p in parts if p)


def _helm_release(i: dict) -> str:
    return f"{_show(i.get('chart', ''))} {_show(i.get('version', ''))}".strip()


SUMMARIES: dict[str, Callable[[dict], str]] = {
    "aws:ec2/launchTemplate:LaunchTemplate": _launch_template,
    "aws:ec2/placementGroup:PlacementGroup": _key("strategy", fmt="strategy={}"),
    "aws:fsx/lustreFileSystem:LustreFileSystem": _lustre,
    "aws:efs/fileSystem:FileSystem": lambda i: ", ".join(
        p for p in (_show(i.get("throughputMode", "")), "encrypted" if i.get("encrypted") is True else "") if p),
    "aws:rds/instance:Instance": lambda i: ", ".join(p for p in (
        f"{_show(i.get('engine', ''))} {_show(i.get('engineVersion', ''))} {_show(i.get('instanceClass', ''))}".strip(),
        "encrypted" if i.get("storageEncrypted") is True else "",
        "private" if i.get("publiclyAccessible") is False else "") if p),
    "gcp:sql/databaseInstance:DatabaseInstance": lambda i: ", ".join(p for p in (
        _show(i.get("databaseVersion", "")), _show((i.get("settings") or {}).get("tier", "")),
        "private IP only" if ((i.get("settings") or {}).get("ipConfiguration") or {}).get("ipv4Enabled") is False
        else "") if p),
    "aws:ec2/vpc:Vpc": _key("cidrBlock"),
    "aws:ec2/subnet:Subnet": _subnet,
    "aws:ec2/securityGroup:SecurityGroup": _key("description", fmt='"{}"'),
    "aws:ec2/instance:Instance": _key("instanceType"),
    "aws:secretsmanager/secret:Secret": _key("name"),
    "aws:eks/cluster:Cluster": _key("version", fmt="Kubernetes {}"),
    "aws:eks/nodeGroup:NodeGroup": _eks_node_group,
    "aws:eks/addon:Addon": lambda i: f"{_show(i.get('addonName', ''))} {_show(i.get('addonVersion', ''))}".strip(),
    "kubernetes:helm.sh/v3:Release": _helm_release,
    "gcp:compute/instance:Instance": _key("machineType"),
    "gcp:compute/subnetwork:Subnetwork": _key("ipCidrRange"),
    "gcp:secretmanager/secret:Secret": _key("secretId"),
    "aws:amp/workspace:Workspace": _key("alias", fmt="Managed Prometheus {}"),
    "aws:cloudwatch/logGroup:LogGroup": lambda i: f"{_show(i.get('name', ''))}, {_show(i.get('retentionInDays', '?'))} days",
    "gcp:logging/projectBucketConfig:ProjectBucketConfig":
        lambda i: f"{_show(i.get('bucketId', ''))} in {_show(i.get('location', ''))}, {_show(i.get('retentionDays', '?'))} days",
}


def summary(resource: CapturedResource) -> str:
    fn = SUMMARIES.get(resource.type)
    return fn(resource.inputs) if fn else ""


def flags(resource: CapturedResource) -> list[str]:
    out = []
    if resource.protect:
        out.append("[protect]")
    if resource.retain_on_delete:
        out.append("[retain]")
    return out


def _walk(plan: Plan):
    """(resource, depth) depth-first, children in registration order, root stack omitted."""
    by_urn = {r.urn: r for r in plan.resources}
    children: dict[str | None, list[CapturedResource]] = {}
    for r in plan.resources:
        if r.type == STACK_TYPE:
            continue
        parent = r.parent_urn
        if parent not in by_urn or by_urn[parent].type == STACK_TYPE:
            parent = None
        children.setdefault(parent, []).append(r)

    def visit(parent: str | None, depth: int):
        for r in children.get(parent, []):
            yield r, depth
            yield from visit(r.urn, depth + 1)

    yield from visit(None, 0)


def resource_tree(plan: Plan) -> list[str]:
    lines = []
    for r, depth in _walk(plan):
        text = f"{INDENT * depth}{r.type}  {r.name}"
        extra = summary(r)
        if extra:
            text += f"  ({extra})"
        marks = flags(r)
        if marks:
            text += "  " + " ".join(marks)
        lines.append(text)
    return lines


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def resource_table_markdown(plan: Plan) -> list[str]:
    """One row per custom resource; Component is the path of enclosing components."""
    lines = ["| Component | Type | Name | Key settings | Flags |", "|---|---|---|---|---|"]
    by_urn = {r.urn: r for r in plan.resources}
    for r, _depth in _walk(plan):
        if not r.custom:
            continue
        path, parent = [], by_urn.get(r.parent_urn or "")
        while parent is not None and parent.type != STACK_TYPE:
            if not parent.custom:
                path.insert(0, parent.name)
            parent = by_urn.get(parent.parent_urn or "")
        component = "/".join(path) or "-"
        row = [component, f"`{r.type}`", r.name, summary(r), " ".join(flags(r))]
        lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
    return lines
