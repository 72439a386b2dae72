"""The deployer's permissions, derived from what a plan creates (docs/deployer-permissions.md).

Pure over a plan's resource types (and its role names, for scoping): the table in
catalog/deployer_permissions.yaml says what each type needs; this module merges those needs into
least-privilege IAM policy documents (AWS), split so each fits one customer managed policy, or into
the list of predefined roles to bind (GCP). No Pulumi import: a captured Plan is read duck-typed
(`.resources`, each with `.type`, `.name`, `.custom`, `.inputs`).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from aicluster.catalog import load_limits
from aicluster.catalog.deployer_permissions import AwsNeed, DeployerTable, load_deployer_table

POLICY_VERSION = "2012-10-17"
_ROLE_TYPES = ("aws:iam/role:Role", "aws:iam/instanceProfile:InstanceProfile")
_ATTACHMENT_TYPE = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
# Attaching a managed policy to a role the deployer may pass is a way to any permission: these are
# allowed only for the policy ARNs the plan attaches (iam:PolicyARN).
_POLICY_ARN_ACTIONS = frozenset({"iam:AttachRolePolicy", "iam:DetachRolePolicy"})
_EKS_KUBERNETES = "eks"


@dataclass(frozen=True)
class DeployerPermissions:
    """What `pulumi up`, `preview`, `refresh` and `destroy` of one plan need of the deployer."""
    cloud: str
    cluster: str
    region: str
    types: tuple[str, ...]                      # the custom resource types planned
    missing: tuple[str, ...]                    # planned types the table does not know (must be empty)
    actions: tuple[str, ...] = ()               # AWS: every IAM action, sorted
    documents: tuple[dict, ...] = ()            # AWS: the managed policy documents
    document_chars: tuple[int, ...] = ()        # AWS: each document's size as IAM counts it
    limit_chars: int = 0                        # AWS: managed policy size quota
    limit_policies: int = 0                     # AWS: managed policies per role quota
    roles: Mapping[str, tuple[str, ...]] = field(default_factory=dict)   # GCP: role -> the types that need it
    role_scopes: Mapping[str, str] = field(default_factory=dict)         # GCP: role -> where bound, if not the project
    kubernetes: str = ""                        # how the deployer reaches the cluster's API ("" without one)
    kubernetes_summary: str = ""
    wildcards: tuple[str, ...] = ()             # where Resource "*" remains, and why
    role_prefix: str = ""                       # AWS: the role names the policy reaches ("" = every role)

    @property
    def services(self) -> tuple[str, ...]:
        return tuple(sorted({a.split(":")[0] for a in self.actions}))

    def problems(self) -> list[str]:
        """What the cloud would refuse or what is unknown: empty when the permissions can be used."""
        out = [f"resource type {t} is not in catalog/deployer_permissions.yaml" for t in self.missing]
        if self.cloud == "aws":
            out += policy_size_problems(self.documents, self.limit_chars, self.limit_policies)
        return out

    def to_json(self) -> dict[str, Any]:
        base = {"cloud": self.cloud, "missing_types": list(self.missing), "kubernetes": self.kubernetes or None}
        if self.cloud == "aws":
            return {**base, "services": list(self.services), "actions": len(self.actions),
                    "policies": [{"file": "deployer-policy.json", "index": i, "chars": n,
                                  "statements": len(d["Statement"])}
                                 for i, (d, n) in enumerate(zip(self.documents, self.document_chars))],
                    "limits": {"managed_policy_chars": self.limit_chars, "managed_policies_per_role": self.limit_policies},
                    "role_scope": f"{self.role_prefix}*", "wildcards": list(self.wildcards),
                    "problems": self.problems()}
        return {**base, "roles": role_list(self), "problems": self.problems()}


# ---------------------------------------------------------------- sizes


def policy_chars(document: dict) -> int:
    """A policy document's size as IAM counts it: characters, white space not counted."""
    return sum(1 for c in json.dumps(document, separators=(",", ":")) if not c.isspace())


def policy_size_problems(documents: Iterable[dict], limit_chars: int, limit_policies: int) -> list[str]:
    """Each document within the managed policy size, and no more documents than a role may attach."""
    documents = list(documents)
    out = [f"policy document {i} is {policy_chars(d):,} characters (without white space), over IAM's "
           f"{limit_chars:,} for a managed policy" for i, d in enumerate(documents) if policy_chars(d) > limit_chars]
    if len(documents) > limit_policies:
        out.append(f"{len(documents)} managed policies, over the {limit_policies} a role may attach")
    return out


# ---------------------------------------------------------------- from a plan


def planned_types(plan) -> tuple[str, ...]:
    """The custom resource types a captured plan creates or reads, sorted."""
    return tuple(sorted({r.type for r in plan.resources if r.custom}))


def planned_role_names(plan) -> tuple[str, ...]:
    """IAM role and instance profile names: the `name` input, else the logical name Pulumi autonames from."""
    return tuple(sorted(str(r.inputs.get("name") or r.name) for r in plan.resources if r.type in _ROLE_TYPES))


def planned_policy_arns(plan) -> tuple[str, ...] | None:
    """The managed policy ARNs the plan attaches to roles; None when one is not known (an Output)."""
    arns = {r.inputs.get("policyArn") for r in plan.resources if r.type == _ATTACHMENT_TYPE}
    if not all(isinstance(a, str) and a.startswith("arn:") for a in arns):
        return None
    return tuple(sorted(arns))


def for_plan(plan, design, table: DeployerTable | None = None) -> DeployerPermissions:
    """The deployer's permissions for a captured plan of `design` (cloud, name, region)."""
    return derive(design.cloud, design.name, design.region, planned_types(plan), planned_role_names(plan), table,
                  policy_arns=planned_policy_arns(plan))


# ---------------------------------------------------------------- the derivation


def derive(cloud: str, cluster: str, region: str, types: Iterable[str], role_names: Iterable[str] = (),
           table: DeployerTable | None = None, policy_arns: Iterable[str] | None = ()) -> DeployerPermissions:
    """`policy_arns`: the managed policies the plan attaches to its roles (iam:PolicyARN); None: not
    known, so attaching is not limited by policy."""
    table = table or load_deployer_table()
    types = tuple(sorted(set(types)))
    missing = tuple(t for t in types if not table.known(t))
    if cloud == "aws":
        return _aws(table, cluster, region, types, tuple(role_names), missing,
                    None if policy_arns is None else tuple(sorted(set(policy_arns))))
    return _gcp(table, cluster, region, types, missing)


def _gcp(table: DeployerTable, cluster: str, region: str, types: tuple[str, ...],
         missing: tuple[str, ...]) -> DeployerPermissions:
    roles: dict[str, set[str]] = {}
    for key, need in table.gcp_provider.items():
        for role in need.roles:
            roles.setdefault(role, set()).add(f"provider ({key})")
    scopes: dict[str, str] = {}
    for t in types:
        need = table.gcp_types.get(t)
        for role in need.roles if need else ():
            roles.setdefault(role, set()).add(t)
            if need.on != "project":
                scopes[role] = need.on
    kubernetes = ""
    if any(t in table.kubernetes_types for t in types):
        access = table.kubernetes_access["gke"]
        for role in access.roles:
            roles.setdefault(role, set()).add("kubernetes (in-cluster objects)")
        kubernetes = access.note
    return DeployerPermissions("gcp", cluster, region, types, missing,
                               roles={r: tuple(sorted(ts)) for r, ts in sorted(roles.items())}, role_scopes=scopes,
                               kubernetes=kubernetes,
                               kubernetes_summary=table.kubernetes_access["gke"].summary if kubernetes else "")


def _prefix(cluster: str, role_names: tuple[str, ...]) -> str:
    """`<cluster>-` when every planned role and instance profile name starts with it, else ''."""
    prefix = f"{cluster}-"
    return prefix if all(n.startswith(prefix) for n in role_names) else ""


def _sid(*parts: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in re.split(r"[^A-Za-z0-9]+", "-".join(parts)) if p)


def _aws(table: DeployerTable, cluster: str, region: str, types: tuple[str, ...], role_names: tuple[str, ...],
         missing: tuple[str, ...], policy_arns: tuple[str, ...] | None) -> DeployerPermissions:
    limits = load_limits()
    limit_chars = int(limits["iam_managed_policy_chars"].value)
    limit_policies = int(limits["iam_managed_policies_per_role"].value)
    needs: list[AwsNeed] = list(table.aws_provider.values()) + [table.aws_types[t] for t in types if t in table.aws_types]
    kubernetes = ""
    if any(t in table.kubernetes_types for t in types):
        access = table.kubernetes_access[_EKS_KUBERNETES]
        needs.append(AwsNeed(access.actions, source=access.source))
        kubernetes = access.note
    prefix = _prefix(cluster, role_names)
    fill = {"prefix": prefix, "region": region}

    anywhere: dict[str, set[str]] = {}                     # service -> actions on "*"
    scoped: dict[tuple[str, str], set[str]] = {}           # (service, resource) -> actions
    passed_to: set[str] = set()
    linked: set[str] = set()
    attach: dict[str, set[str]] = {}                       # resource -> actions limited by iam:PolicyARN
    for need in needs:
        for action in need.actions:
            anywhere.setdefault(action.split(":")[0], set()).add(action)
        for s in need.scoped:
            for action in s.actions:
                resource = s.resource.format(**fill)
                if policy_arns is not None and action in _POLICY_ARN_ACTIONS and "aws-service-role" not in resource:
                    attach.setdefault(resource, set()).add(action)
                else:
                    scoped.setdefault((action.split(":")[0], resource), set()).add(action)
        passed_to.update(need.pass_role_to)
        linked.update(need.service_linked_roles)

    def condition(service: str) -> dict:
        return {} if table.aws_services[service][1] else \
            {"Condition": {"StringEquals": {"aws:RequestedRegion": [region]}}}

    statements = []
    for service, actions in sorted(anywhere.items()):
        statements.append({"Sid": _sid(service), "Effect": "Allow", "Action": sorted(actions), "Resource": "*",
                           **condition(service)})
    for i, ((service, resource), actions) in enumerate(sorted(scoped.items())):
        actions -= anywhere.get(service, set())
        if actions:
            statements.append({"Sid": _sid(service, "scoped", str(i)), "Effect": "Allow", "Action": sorted(actions),
                               "Resource": resource, **condition(service)})
    for i, (resource, actions) in enumerate(sorted(attach.items())):
        if policy_arns:
            statements.append({"Sid": _sid("iam", "managed", "policies", str(i)), "Effect": "Allow",
                               "Action": sorted(actions), "Resource": resource,
                               "Condition": {"ArnEquals": {"iam:PolicyARN": list(policy_arns)}}})
    if passed_to:
        statements.append({"Sid": "IamPassRole", "Effect": "Allow", "Action": ["iam:PassRole"],
                           "Resource": f"arn:aws:iam::*:role/{prefix}*",
                           "Condition": {"StringEquals": {"iam:PassedToService": sorted(passed_to)}}})
    if linked:
        statements.append({"Sid": "IamServiceLinkedRoles", "Effect": "Allow", "Action": ["iam:CreateServiceLinkedRole"],
                           "Resource": "arn:aws:iam::*:role/aws-service-role/*",
                           "Condition": {"StringEquals": {"iam:AWSServiceName": sorted(linked)}}})
    documents = _pack(statements, limit_chars)
    actions = sorted({a for s in statements for a in s["Action"]})
    wildcards = _wildcards(table, anywhere, prefix, cluster)
    return DeployerPermissions("aws", cluster, region, types, missing, tuple(actions), tuple(documents),
                               tuple(policy_chars(d) for d in documents), limit_chars, limit_policies,
                               kubernetes=kubernetes, wildcards=wildcards, role_prefix=prefix,
                               kubernetes_summary=table.kubernetes_access[_EKS_KUBERNETES].summary if kubernetes else "")


def _wildcards(table: DeployerTable, anywhere: Mapping[str, set[str]], prefix: str, cluster: str) -> tuple[str, ...]:
    regional = sorted(s for s in anywhere if not table.aws_services[s][1])
    global_ = sorted(s for s in anywhere if table.aws_services[s][1])
    out = [f"{', '.join(regional)}: Resource \"*\" within aws:RequestedRegion. Create calls name no ARN before "
           "the resource exists, Describe and List calls take no resource, and Pulumi autonames most resources, "
           "so their ARNs are not known from the plan"]
    if global_:
        out.append(f"{', '.join(global_)}: Resource \"*\" with no region condition (global services: their calls "
                   "go to us-east-1 whatever the stack's region)")
    out.append("iam: roles and instance profiles arn:aws:iam::*:role/" + prefix + "*" +
               ("" if prefix else f" (a planned role name does not start with {cluster}-, so every role)") +
               "; the account is * (the plan is made without one)")
    return tuple(out)


def _pack(statements: list[dict], limit_chars: int) -> list[dict]:
    """First fit of the statements into documents of at most `limit_chars`; a statement too large
    for one document is cut into parts by its actions."""
    def doc(stmts: list[dict]) -> dict:
        return {"Version": POLICY_VERSION, "Statement": stmts}

    parts: list[dict] = []
    for st in statements:
        if policy_chars(doc([st])) <= limit_chars:
            parts.append(st)
            continue
        chunk: list[str] = []
        for action in st["Action"]:
            trial = {**st, "Action": chunk + [action]}
            if chunk and policy_chars(doc([trial])) > limit_chars:
                parts.append({**st, "Sid": f"{st['Sid']}{len(parts)}", "Action": chunk})
                chunk = []
            chunk.append(action)
        parts.append({**st, "Sid": f"{st['Sid']}{len(parts)}", "Action": chunk})
    documents: list[list[dict]] = []
    for st in parts:
        for stmts in documents:
            if policy_chars(doc(stmts + [st])) <= limit_chars:
                stmts.append(st)
                break
        else:
            documents.append([st])
    return [doc(stmts) for stmts in documents]


def policy_file(permissions: DeployerPermissions) -> str:
    """deployer-policy.json: the list of IAM policy documents, one per managed policy."""
    return json.dumps(list(permissions.documents), indent=2) + "\n"


def role_list(permissions: DeployerPermissions) -> list[dict]:
    """Each role with the types that need it and where it is bound (`on`: project, or
    billing-account for a budget's roles/billing.costsManager, which a project binding cannot give)."""
    return [{"role": r, "for": list(ts), "on": permissions.role_scopes.get(r, "project")}
            for r, ts in sorted(permissions.roles.items())]


def roles_file(permissions: DeployerPermissions) -> str:
    """deployer-roles.json: the predefined roles to bind to the deployer, where (`on`), and why."""
    return json.dumps({"roles": role_list(permissions), "kubernetes": permissions.kubernetes or None},
                      indent=2) + "\n"


def summary_lines(p: DeployerPermissions) -> list[str]:
    """The plan's short 'Deployer permissions' section."""
    lines = []
    if p.cloud == "aws":
        sizes = ", ".join(f"{n:,}" for n in p.document_chars)
        lines += [f"{len(p.actions)} IAM actions in {len(p.services)} services: {', '.join(p.services)}",
                  f"{len(p.documents)} managed policy documents (deployer-policy.json), {sizes} characters "
                  f"(limit {p.limit_chars:,} each, {p.limit_policies} per role)",
                  f"regional services bound to aws:RequestedRegion {p.region}; IAM roles scoped to "
                  + (f"{p.role_prefix}*" if p.role_prefix else "every role (a role name lacks the cluster's prefix)")]
    else:
        on_project = [r for r in p.roles if r not in p.role_scopes]
        lines += [f"{len(on_project)} predefined roles on the project (deployer-roles.json): {', '.join(on_project)}"]
        lines += [f"{r} on the {scope.replace('-', ' ')} (deployer-roles.json)" for r, scope in p.role_scopes.items()]
    if p.kubernetes:
        lines.append("Kubernetes: " + (p.kubernetes_summary or p.kubernetes))
    lines += [f"problem: {x}" for x in p.problems()]
    return lines
