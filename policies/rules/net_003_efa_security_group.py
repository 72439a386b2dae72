"""AIC-NET-003: the security group on EFA interfaces allows all traffic from and to itself.

EFA's SRD traffic is dropped unless a security group on the interfaces allows all protocols in
from itself and out to itself (ParallelCluster's EfaSecurityGroupValidator; EKS docs). Accepted
forms: inline ingress/egress with `self: true` and protocol -1; separate
aws:vpc/securityGroupIngressRule / EgressRule with referencedSecurityGroupId = the group itself;
aws:ec2/securityGroupRule with `self` or sourceSecurityGroupId = the group itself.
"""
from __future__ import annotations

from pulumi_policy import EnforcementLevel, Severity, StackValidationPolicy

from . import model
from ._base import cluster, not_applicable, schema
from ._props import get, items, kind, truthy

ID = "AIC-NET-003"
SUPPORTED = ("aws:ec2/launchTemplate", "aws:ec2/instance", "aws:ec2/networkInterface", "aws:ec2/securityGroup",
             "aws:vpc/securityGroupIngressRule", "aws:vpc/securityGroupEgressRule", "aws:ec2/securityGroupRule")
_ALL = ("-1", "all")


def _inline(ix: model.Index, sg, direction: str) -> bool:
    for rule in items(ix.props(sg), direction):
        if str(get(rule, "protocol", default="")).lower() not in _ALL:
            continue
        if truthy(get(rule, "self")) or sg in ix.refs(sg, direction, {model.SG}, value=get(rule, "securityGroups")):
            return True
    return False


def _separate(ix: model.Index, sg, direction: str) -> bool:
    token = "aws:vpc/securityGroupIngressRule" if direction == "ingress" else "aws:vpc/securityGroupEgressRule"
    for rule in ix.of(token):
        p = ix.props(rule)
        if str(get(p, "ipProtocol", default="")).lower() in _ALL and ix.refers(rule, "securityGroupId", sg) \
                and ix.refers(rule, "referencedSecurityGroupId", sg):
            return True
    for rule in ix.of("aws:ec2/securityGroupRule"):
        p = ix.props(rule)
        if get(p, "type") != direction or str(get(p, "protocol", default="")).lower() not in _ALL:
            continue
        if ix.refers(rule, "securityGroupId", sg) and (
                truthy(get(p, "self")) or ix.refers(rule, "sourceSecurityGroupId", sg)):
            return True
    return False


def allows_self(ix: model.Index, sg) -> tuple[bool, bool]:
    return (_inline(ix, sg, "ingress") or _separate(ix, sg, "ingress"),
            _inline(ix, sg, "egress") or _separate(ix, sg, "egress"))


def validate(args, report_violation) -> None:
    c = cluster(args)
    judged = [p for p in c.pools if p.cloud == "aws" and p.fabric.layout != "none"]
    if not judged:
        not_applicable(args, "no EFA interface in this stack")
        return
    for pool in judged:
        problem = _problem(c.index, pool)
        if problem:
            report_violation(problem, pool.anchor.urn)


def _problem(ix: model.Index, pool: model.Pool) -> str | None:
    """Why the pool's EFA security groups fail; None when one passes or they cannot be read."""
    groups = pool.fabric.security_groups
    if groups is None:
        return None   # security groups that live outside this stack cannot be read
    if not groups:
        return (f"{pool.label()}: its EFA interfaces carry no security group of this stack; EFA needs "
                "one that allows all traffic from and to itself")
    verdicts = {g.name: allows_self(ix, g) for g in groups if kind(g.resource_type) == model.SG}
    if any(i and e for i, e in verdicts.values()):
        return None
    detail = "; ".join(f"{name}: all traffic from itself {'yes' if i else 'NO'}, to itself {'yes' if e else 'NO'}"
                       for name, (i, e) in verdicts.items())
    return (f"{pool.label()}: no security group on its EFA interfaces allows all traffic from and to "
            f"itself ({detail})")


POLICY = StackValidationPolicy(
    name=ID,
    display_name="efa-security-group-self",
    description="The security group of EFA interfaces allows all traffic in from itself and out to itself.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=(
        "Give the EFA interfaces a security group with ingress and egress rules protocol '-1', self=True "
        "(inline), or aws.vpc.SecurityGroupIngressRule and SecurityGroupEgressRule with ip_protocol='-1' and "
        "referenced_security_group_id set to the group's own id."),
    config_schema=schema(),
    tags=["network", "fabric", "aws"],
    validate=validate,
)
