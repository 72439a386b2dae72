"""The deployer's permissions per resource type (deployer_permissions.yaml) and their loader.

One entry per custom resource type token the program plans: the IAM actions of its create, read,
update, delete and tagging calls (AWS) or the predefined roles (GCP), plus the roles it hands to a
service (iam:PassRole) and the service-linked roles its service creates on first use. Kubernetes
types need only a way into the cluster (`kubernetes.access`), `random:*` no cloud call at all.
Every entry carries `source:`; the loader refuses one without. Pure: no Pulumi, no spec;
design/deployer_permissions.py turns a plan's types into policy documents.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from aicluster.catalog import CatalogError, load_yaml

_FILE = Path(__file__).parent / "deployer_permissions.yaml"


@dataclass(frozen=True)
class Scoped:
    """Actions allowed on named resources only: `resource` holds {prefix} and {region}."""
    actions: tuple[str, ...]
    resource: str


@dataclass(frozen=True)
class AwsNeed:
    """What one AWS resource type (or the provider itself) needs of the deployer."""
    actions: tuple[str, ...]                       # on "*" (no resource-level permission, or not known before create)
    scoped: tuple[Scoped, ...] = ()
    pass_role_to: tuple[str, ...] = ()             # services the type hands a role (iam:PassedToService)
    service_linked_roles: tuple[str, ...] = ()     # iam:AWSServiceName of the roles its service creates
    source: str = ""
    why: str = ""

    def all_actions(self) -> tuple[str, ...]:
        return self.actions + tuple(a for s in self.scoped for a in s.actions)


@dataclass(frozen=True)
class GcpNeed:
    """The predefined roles one GCP resource type (or the provider) needs of the deployer."""
    roles: tuple[str, ...]
    source: str
    why: str = ""
    on: str = "project"         # where the roles are bound: project, or billing-account (a budget lives there)


GCP_SCOPES = ("project", "billing-account")


@dataclass(frozen=True)
class KubernetesAccess:
    """How the deployer reaches the cluster's API on one platform (eks, gke)."""
    actions: tuple[str, ...]
    roles: tuple[str, ...]
    note: str
    source: str
    summary: str = ""           # one line for the plan


@dataclass(frozen=True)
class DeployerTable:
    checked: str
    aws_services: Mapping[str, tuple[str, bool]]   # IAM prefix -> (reference URL, global service)
    permission_only: Mapping[str, str]             # IAM action that is no API name -> what it authorizes
    aws_provider: Mapping[str, AwsNeed]
    aws_types: Mapping[str, AwsNeed]
    gcp_provider: Mapping[str, GcpNeed]
    gcp_types: Mapping[str, GcpNeed]
    kubernetes_access: Mapping[str, KubernetesAccess]
    kubernetes_types: frozenset[str]
    no_cloud_types: frozenset[str]
    no_cloud_source: str

    def known(self, type_token: str) -> bool:
        return (type_token in self.aws_types or type_token in self.gcp_types
                or type_token in self.kubernetes_types or type_token in self.no_cloud_types)

    def all_types(self) -> frozenset[str]:
        return frozenset(self.aws_types) | frozenset(self.gcp_types) | self.kubernetes_types | self.no_cloud_types


def _sourced(entry: dict, where: str) -> str:
    source = entry.get("source") if isinstance(entry, dict) else None
    if not isinstance(source, str) or not source.strip():
        raise CatalogError(f"deployer_permissions.yaml {where}: every entry needs a non-empty `source:`")
    return source


def _strings(entry: dict, key: str, where: str) -> tuple[str, ...]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise CatalogError(f"deployer_permissions.yaml {where}.{key}: a list of names")
    return tuple(value)


def _action_names(actions: tuple[str, ...], where: str) -> tuple[str, ...]:
    for action in actions:
        prefix, _, name = action.partition(":")
        if not prefix or not name or "*" in action:
            raise CatalogError(f"deployer_permissions.yaml {where}: {action!r} is not one service:Action (no wildcards)")
    return actions


def _aws_need(entry: dict, where: str) -> AwsNeed:
    scoped = []
    for i, s in enumerate(entry.get("scoped", [])):
        if not isinstance(s.get("resource"), str):
            raise CatalogError(f"deployer_permissions.yaml {where}.scoped[{i}]: needs `resource:`")
        scoped.append(Scoped(_action_names(_strings(s, "actions", f"{where}.scoped[{i}]"), where), s["resource"]))
    need = AwsNeed(_action_names(_strings(entry, "actions", where), where), tuple(scoped),
                   _strings(entry, "pass_role_to", where), _strings(entry, "service_linked_roles", where),
                   _sourced(entry, where), str(entry.get("why", "")))
    if not need.all_actions():
        raise CatalogError(f"deployer_permissions.yaml {where}: no action")
    return need


def _gcp_need(entry: dict, where: str) -> GcpNeed:
    roles = _strings(entry, "roles", where)
    if not roles or not all(r.startswith("roles/") for r in roles):
        raise CatalogError(f"deployer_permissions.yaml {where}.roles: predefined roles (roles/...)")
    scope = str(entry.get("scope", "project"))     # `scope`, not `on`: YAML 1.1 reads a bare on as true
    if scope not in GCP_SCOPES:
        raise CatalogError(f"deployer_permissions.yaml {where}.scope: one of {', '.join(GCP_SCOPES)}")
    return GcpNeed(roles, _sourced(entry, where), str(entry.get("why", "")), scope)


def parse_table(doc: dict) -> DeployerTable:
    """The table from its YAML document; CatalogError on an unsourced or malformed entry."""
    aws, gcp, k8s, none = doc["aws"], doc["gcp"], doc["kubernetes"], doc["no_cloud"]
    services = {p: (_need_url(e, f"aws.services.{p}"), bool(e.get("global", False)))
                for p, e in aws["services"].items()}
    access = {platform: KubernetesAccess(_action_names(_strings(e, "actions", f"kubernetes.access.{platform}"), platform),
                                         _strings(e, "roles", f"kubernetes.access.{platform}"), str(e.get("note", "")),
                                         _sourced(e, f"kubernetes.access.{platform}"), str(e.get("summary", "")))
              for platform, e in k8s["access"].items()}
    table = DeployerTable(
        checked=str(doc["checked"]),
        aws_services=services,
        permission_only=dict(aws.get("permission_only", {})),
        aws_provider={k: _aws_need(e, f"aws.provider.{k}") for k, e in aws["provider"].items()},
        aws_types={k: _aws_need(e, f"aws.types.{k}") for k, e in aws["types"].items()},
        gcp_provider={k: _gcp_need(e, f"gcp.provider.{k}") for k, e in gcp["provider"].items()},
        gcp_types={k: _gcp_need(e, f"gcp.types.{k}") for k, e in gcp["types"].items()},
        kubernetes_access=access,
        kubernetes_types=frozenset(k8s["types"]),
        no_cloud_types=frozenset(none["types"]),
        no_cloud_source=_sourced(none, "no_cloud"),
    )
    for need_map, where in ((table.aws_provider, "aws.provider"), (table.aws_types, "aws.types")):
        for key, need in need_map.items():
            unknown = sorted({a.split(":")[0] for a in need.all_actions()} - set(services))
            if unknown:
                raise CatalogError(f"deployer_permissions.yaml {where}.{key}: service {unknown[0]} is not in aws.services")
    return table


def _need_url(entry: dict, where: str) -> str:
    url = entry.get("reference") if isinstance(entry, dict) else None
    if not isinstance(url, str) or not url.startswith("https://"):
        raise CatalogError(f"deployer_permissions.yaml {where}: needs `reference:` (the Service Authorization Reference page)")
    return url


@functools.lru_cache(maxsize=1)
def load_deployer_table() -> DeployerTable:
    with open(_FILE, encoding="utf-8") as fh:
        return parse_table(load_yaml(fh))


__all__ = ["AwsNeed", "DeployerTable", "GcpNeed", "KubernetesAccess", "Scoped", "load_deployer_table", "parse_table"]
