"""`aicluster diff OLD NEW`: what `pulumi up` would do to go from one plan to the other, offline.

Both sides are planned as `aicluster plan` plans them (a stack name, a stack file or a bare spec
file), then compared resource by resource (aicluster.offline.plan_diff, with the sourced table of
inputs that force a replacement in catalog/replacement.yaml). The report says, per resource,
create / update / replace / delete and the inputs that changed; names loudly every stateful resource
(design/stateful.py) that would be replaced or deleted; and says what happens to running jobs.

Exit codes: 0 nothing stateful is replaced or deleted; 2 bad input; 3 a stateful resource would
be replaced or deleted (docs/diff.md).
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable

EXIT_OK, EXIT_BAD_INPUT, EXIT_STATEFUL = 0, 2, 3
SYMBOL = {"create": "+", "update": "~", "replace": "+-", "delete": "-"}

BUCKET_OBJECTS = {"aws:s3/bucketObjectv2:BucketObjectv2": "key", "gcp:storage/bucketObject:BucketObject": "name"}
ALERT_TYPES = frozenset({"aws:amp/ruleGroupNamespace:RuleGroupNamespace",
                         "aws:amp/alertManagerDefinition:AlertManagerDefinition",
                         "gcp:monitoring/alertPolicy:AlertPolicy"})
NODE_TEMPLATES = frozenset({"aws:ec2/launchTemplate:LaunchTemplate", "gcp:compute/instanceTemplate:InstanceTemplate"})
INSTANCES = frozenset({"aws:ec2/instance:Instance", "gcp:compute/instance:Instance"})
TPU_VMS = frozenset({"gcp:tpu/v2Vm:V2Vm"})
EKS_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
GKE_NODE_POOL = "gcp:container/nodePool:NodePool"
KARPENTER = frozenset({"kubernetes:karpenter.sh/v1:NodePool", "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"})
# EKS node group inputs that roll its nodes (UpdateNodegroupVersion); the others change in place.
EKS_ROLLING = ("launchTemplate", "releaseVersion", "version", "amiType")
# GKE node pool inputs that recreate its nodes (nodeConfig); the others (size, autoscaling) are live.
GKE_ROLLING = ("nodeConfig",)


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "diff", help="what `pulumi up` would do from one plan to another: create/update/replace/delete per "
                     "resource, stateful ones flagged (exit 3), and what happens to running jobs")
    parser.add_argument("old", metavar="OLD", help="a stack name, stack file or bare spec file: the cluster as it is")
    parser.add_argument("new", metavar="NEW", help="a stack name, stack file or bare spec file: the cluster as edited")
    parser.add_argument("--format", "-f", choices=("text", "json"), default="text")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from aicluster.commands.planner import plan_stack
    from aicluster.offline.plan_diff import diff_plans

    old, new = plan_stack(args.old), plan_stack(args.new)
    diff = diff_plans(old.plan, new.plan)
    report = Report(args.old, args.new, diff, impact(diff, new.spec.scheduler, _max_unavailable(new)))
    if args.format == "json":
        print(json.dumps(report.to_json(), indent=2, sort_keys=True))
    else:
        print("\n".join(report.text()))
    return report.exit_code


def _max_unavailable(result: Any) -> dict[str, int]:
    """pool -> nodes the roll may take out at once, from the cluster.json the head reads (Slurm)."""
    text = result.files.get("aicluster/cluster.json")
    try:
        pools = json.loads(text).get("pools", {}) if text else {}
    except ValueError:
        return {}
    return {name: p["max_unavailable"] for name, p in pools.items()
            if isinstance(p, dict) and isinstance(p.get("max_unavailable"), int)}


# ------------------------------------------------------------------------------------ job impact


@dataclass
class Impact:
    """What happens to running jobs, by kind of change."""
    scheduler: str
    live: list[str] = field(default_factory=list)          # applies while jobs run
    new_nodes: list[str] = field(default_factory=list)     # only nodes launched (or rolled) from now on
    restart: list[str] = field(default_factory=list)       # the head / control plane / login restarts
    data: list[str] = field(default_factory=list)          # data, state or secrets lost

    def to_json(self) -> dict:
        return {"scheduler": self.scheduler, "applies_live": self.live, "new_nodes_only": self.new_nodes,
                "restart": self.restart, "data_loss": self.data}


def _tag(resource: Any, key: str) -> str | None:
    if resource is None:
        return None
    for name in ("tags", "labels", "tagSpecifications"):
        found = resource.inputs.get(name)
        if isinstance(found, dict) and isinstance(found.get(key), str):
            return found[key]
    return None


def _pool(change: Any) -> str:
    return _tag(change.resource, "aicluster-pool") or change.name


def _files(changes: Iterable[Any], prefix: str) -> list[str]:
    out = []
    for change in changes:
        key = str(change.resource.inputs.get(BUCKET_OBJECTS[change.type], change.name))
        if key.startswith(prefix):
            path = key[len(prefix):]
            parts = path.split("/")
            # content-addressed objects (<name>/<sha256>): the name is what a reader knows
            if len(parts) >= 2 and len(parts[-1]) == 64 and all(c in "0123456789abcdef" for c in parts[-1]):
                path = "/".join(parts[:-1])
            if path not in out:
                out.append(path)
    return out


def _budget(pool: str, budgets: dict[str, int]) -> str:
    n = budgets.get(pool)
    return f"at most {n} node{'s' if n != 1 else ''} at a time (max_unavailable)" if n else \
        "at most max_unavailable nodes at a time"


def impact(diff: Any, scheduler: str, budgets: dict[str, int] | None = None) -> Impact:
    """What the changes do to running jobs, for a Slurm or a Kubernetes cluster."""
    budgets = budgets or {}
    out = Impact(scheduler)
    changed = [c for c in diff.changes if c.action != "same"]
    objects = [c for c in changed if c.type in BUCKET_OBJECTS]
    head_files = _files(objects, "head/")
    if head_files:
        shown = ", ".join(head_files[:6]) + (f" and {len(head_files) - 6} more" if len(head_files) > 6 else "")
        out.live.append(f"head files {shown}: aicluster-sync installs them within a minute, tests the Slurm files "
                        "with a throwaway slurmctld first and reconfigures slurmctld (docs/config-sync.md); "
                        "running jobs keep running")
    node_files = _files(objects, "compute/")
    if node_files:
        out.new_nodes.append(f"node files {', '.join(node_files[:6])}: nodes read them at boot, so only nodes "
                             "launched from now on use them")
    login_files = _files(objects, "login/")
    if login_files:
        out.new_nodes.append(f"login files {', '.join(login_files[:6])}: login nodes read them at boot")
    alerts = [c for c in changed if c.type in ALERT_TYPES]
    if alerts:
        out.live.append(f"alert rules ({', '.join(sorted({c.name for c in alerts}))}): applied by the metrics "
                        "backend at once; no node or job is touched")
    for change in changed:
        if change.type in NODE_TEMPLATES and (_tag(change.resource, "aicluster-role") or "compute") == "compute":
            if scheduler == "slurm":
                _template_impact(change, out, budgets)
            else:
                _k8s_template_impact(change, out)
        elif change.type in INSTANCES or change.type in TPU_VMS:
            _instance_impact(change, out)
        elif change.type == EKS_NODE_GROUP:
            _eks_impact(change, out)
        elif change.type == GKE_NODE_POOL:
            _gke_impact(change, out)
        elif change.type in KARPENTER and change.action in ("update", "replace"):
            out.new_nodes.append(f"Karpenter {change.name}: its nodes drift and Karpenter replaces them within the "
                                 "NodePool's disruption budgets; pods move as their nodes are drained")
        if change.stateful == "control-plane" and change.action in ("replace", "delete"):
            out.restart.append(f"control plane {change.name} is {change.action}d: every workload on the cluster "
                               "is lost with it")
        elif change.dangerous:
            out.data.append(f"{change.stateful} {change.name} is {change.action}d: "
                            + LOSS.get(change.stateful or "", "its contents are gone"))
    return out


# What is lost with a stateful resource of each kind (design/stateful.py).
LOSS = {
    "filesystem": "jobs reading or writing it fail and its data is gone",
    "volume": "jobs reading or writing it fail and its data is gone",
    "database": "the accounting history (sacct, fairshare, QoS) is gone",
    "head-node": "slurmctld's saved state (the queue, job records, reservations) is gone with it",
    "secret": "the secret is gone: nodes that fetch it at boot fail until a new one is published",
    "secret-material": "a new key: nodes on the old one stop authenticating (munge) until restarted",
    "encryption-key": "what it encrypted can no longer be read",
    "metrics": "the metrics history is gone",
}


def _template_impact(change: Any, out: Impact, budgets: dict[str, int]) -> None:
    pool = _pool(change)
    if change.action == "create":
        out.new_nodes.append(f"pool {pool}: new; its nodes launch when jobs ask for them")
    elif change.action == "delete":
        out.new_nodes.append(f"pool {pool}: removed; its nodes leave slurm.conf at the next sync, so drain it first "
                             f"(`scontrol update partitionname={pool} state=drain`, wait for `squeue -p {pool}` "
                             "to be empty)")
    else:
        what = "a new launch template version" if change.type.startswith("aws:") else "a new instance template"
        out.new_nodes.append(f"pool {pool}: {what} ({', '.join(change.changed)}): new nodes boot it; nodes that "
                             f"are up move as they go idle, through the reconcile loop's roll, {_budget(pool, budgets)}; "
                             "no running job is stopped (docs/operating.md, Rolling updates)")


def _k8s_template_impact(change: Any, out: Impact) -> None:
    pool = _pool(change)
    if change.action in ("update", "replace"):
        out.new_nodes.append(f"pool {pool}: a new node template ({', '.join(change.changed)}): nodes launched from now "
                             "on use it; the nodes that are up move as their node group rolls or Karpenter drifts "
                             "them (see the node group and NodePool lines)")


def _instance_impact(change: Any, out: Impact) -> None:
    role = change.role or "instance"
    if role not in ("head", "login") and change.type not in TPU_VMS:
        return
    label = {"head": "head node", "login": "login node"}.get(role, "TPU slice")
    consequence = {"head": "slurmctld stops while it is down; running jobs keep running on their nodes, but nothing "
                           "is scheduled and job steps cannot start until it is back",
                   "login": "logged-in users' sessions end"}.get(role, "jobs on the slice are lost")
    if change.action == "replace":
        out.restart.append(f"{label} {change.name} is replaced ({'; '.join(change.replaced_by)}): {consequence}")
    elif change.action == "delete":
        out.restart.append(f"{label} {change.name} is deleted: {consequence}")
    elif change.action == "update" and change.restarts:
        out.restart.append(f"{label} {change.name} is stopped and started to change {', '.join(change.restarts)}: "
                           f"{consequence}")
    elif change.action == "update":
        out.live.append(f"{label} {change.name}: {', '.join(change.changed)} updated in place, no restart")


def _eks_impact(change: Any, out: Impact) -> None:
    if change.action == "create":
        out.new_nodes.append(f"node group {change.name}: new; pods are scheduled on it as it comes up")
    elif change.action in ("replace", "delete"):
        out.restart.append(f"node group {change.name} is {change.action}d: every node is drained and terminated, "
                           "pods are evicted (a training job's pods restart from their last checkpoint)")
    elif any(k in EKS_ROLLING for k in change.changed):
        out.new_nodes.append(f"node group {change.name}: a rolling update ({', '.join(change.changed)}): nodes are "
                             "replaced at most updateConfig.maxUnavailable at a time; pods on a drained node are "
                             "evicted and rescheduled")
    else:
        out.live.append(f"node group {change.name}: {', '.join(change.changed)} changed in place; no node replaced")


def _gke_impact(change: Any, out: Impact) -> None:
    if change.action == "create":
        out.new_nodes.append(f"node pool {change.name}: new; pods are scheduled on it as it comes up")
    elif change.action in ("replace", "delete"):
        out.restart.append(f"node pool {change.name} is {change.action}d: every node is deleted and its pods "
                           "evicted (a training job's pods restart from their last checkpoint)")
    elif any(k in GKE_ROLLING for k in change.changed):
        settings = change.resource.inputs.get("upgradeSettings") or {}
        surge = ", ".join(f"{k} {v}" for k, v in sorted(settings.items()) if k in ("maxSurge", "maxUnavailable"))
        out.new_nodes.append(f"node pool {change.name}: nodes are recreated ({', '.join(change.changed)}) by a "
                             f"rolling update ({surge or 'upgradeSettings surge'}); pods on a drained node are "
                             "evicted and rescheduled")
    else:
        out.live.append(f"node pool {change.name}: {', '.join(change.changed)} changed in place; no node replaced")


# ------------------------------------------------------------------------------------ the report


@dataclass
class Report:
    old: str
    new: str
    diff: Any
    impact: Impact

    @property
    def exit_code(self) -> int:
        return EXIT_STATEFUL if self.diff.dangerous else EXIT_OK

    def summary(self) -> str:
        n = self.diff.counts()
        return (f"{n['create']} create, {n['update']} update, {n['replace']} replace, {n['delete']} delete "
                f"({n['same']} unchanged)")

    def text(self) -> list[str]:
        lines = [f"aicluster diff {self.old} -> {self.new}", self.summary(), ""]
        dangerous = self.diff.dangerous
        if dangerous:
            lines.append(f"!! {len(dangerous)} STATEFUL RESOURCE{'S' if len(dangerous) > 1 else ''} WOULD BE "
                         "REPLACED OR DELETED (exit 3):")
            for c in dangerous:
                why = "; ".join(c.replaced_by) if c.action == "replace" else "not in the new plan"
                guard = [o for o in ("protect", "retain_on_delete") if getattr(c.old, o, False)]
                lines.append(f"!!   {c.action.upper()} {c.stateful} {c.name} ({c.type}): {why}")
                if guard:
                    lines.append(f"!!     it has {' and '.join(guard)}: `pulumi up` refuses while protect is set; "
                                 "unprotecting it loses the data")
            lines.append("")
        groups: dict[str, list[Any]] = defaultdict(list)
        for c in self.diff.changes:
            if c.action != "same":
                groups[c.component or "(stack)"].append(c)
        if groups:
            lines.append("Changes, by component:")
        for component, changes in groups.items():
            lines.append(f"  {component}")
            for c in changes:
                lines.append(f"    {SYMBOL[c.action]:>2} {c.action:<7} {c.name} ({c.type})" + self._detail(c))
        unchanged = self.diff.counts()["same"]
        components = len({c.component for c in self.diff.changes if c.action == "same"})
        lines.append(f"  ({unchanged} unchanged resources in {components} components not shown)")
        lines += ["", f"Running jobs ({self.impact.scheduler}):"]
        sections = (("applies live", self.impact.live), ("new nodes only", self.impact.new_nodes),
                    ("head restart" if self.impact.scheduler == "slurm" else "restart or replace", self.impact.restart),
                    ("data lost", self.impact.data))
        for title, items in sections:
            if not items:
                lines.append(f"  {title}: nothing")
            for item in items:
                lines.append(f"  {title}: {item}")
        return lines

    @staticmethod
    def _detail(c: Any) -> str:
        parts = []
        if c.stateful:
            parts.append(f"STATEFUL {c.stateful}" + (" !!" if c.dangerous else ""))
        if c.action == "update" and c.changed:
            parts.append("changed: " + ", ".join(c.changed))
        if c.action == "replace":
            parts.append("replaced because " + "; ".join(c.replaced_by))
            other = [k for k in c.changed if not any(r.startswith(k) for r in c.replaced_by)]
            if other:
                parts.append("also changed: " + ", ".join(other))
        if c.restarts:
            parts.append("restarts it: " + ", ".join(c.restarts))
        if c.unknown_type and c.action in ("update",):
            parts.append("no replacement rules for this type: assumed in place")
        return (": " + "; ".join(parts)) if parts else ""

    def to_json(self) -> dict:
        def entry(c: Any) -> dict:
            return {"action": c.action, "name": c.name, "type": c.type, "urn": c.key, "component": c.component,
                    "changed": list(c.changed), "replaced_by": list(c.replaced_by), "restarts": list(c.restarts),
                    "stateful": c.stateful, "dangerous": c.dangerous}
        return {"old": self.old, "new": self.new, "summary": self.diff.counts(), "exit_code": self.exit_code,
                "dangerous": [entry(c) for c in self.diff.dangerous],
                "resources": [entry(c) for c in self.diff.changes if c.action != "same"],
                "running_jobs": self.impact.to_json()}


__all__ = ["EXIT_STATEFUL", "Impact", "Report", "add_parser", "impact", "run"]

