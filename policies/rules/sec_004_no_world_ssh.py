"""AIC-SEC-004: no SSH open to the whole internet.

Refused: an ingress rule from 0.0.0.0/0 or ::/0 that covers TCP 22 (protocol tcp with the port in
range, or all protocols; however spelled: tcp, TCP, 6 or the number 6; -1, all, ALL or the number -1) - inline on aws:ec2/securityGroup, aws:vpc/securityGroupIngressRule,
aws:ec2/securityGroupRule of type ingress, and GCP firewalls (direction INGRESS, source 0.0.0.0/0,
tcp 22 or all). Use SSM Session Manager / IAP, or a named CIDR.
"""
from __future__ import annotations

from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, Severity

from ._base import schema
from ._props import get, integer, items, kind, number, plain

ID = "AIC-SEC-004"
SUPPORTED = ("aws:ec2/securityGroup", "aws:vpc/securityGroupIngressRule", "aws:ec2/securityGroupRule",
             "gcp:compute/firewall")
WORLD = ("0.0.0.0/0", "::/0")
SSH = 22


def _protocol(value) -> str:
    """A rule's protocol, one spelling per protocol: "tcp" (tcp, TCP, 6), "all" (-1, all, ALL) or the
    text as given. EC2 takes a name or an IANA number (IpPermission IpProtocol: tcp | udp | icmp |
    icmpv6 | -1 or a number), GCP a name, all or a number (Firewall.allowed[].IPProtocol); a
    hand-written program may pass a number, which reaches the pack as a float (6.0, -1.0)."""
    n = number(value)
    if n is not None and n == int(n):
        text = str(int(n))
    else:
        text = str(value if value is not None else "").strip().lower()
    return {"6": "tcp", "-1": "all"}.get(text, text)


def _covers(protocol, low, high) -> bool:
    protocol = _protocol(protocol)
    if protocol == "all":
        return True
    if protocol != "tcp":
        return False
    low, high = integer(low), integer(high)
    if low is None and high is None:
        return True
    return (low if low is not None else 0) <= SSH <= (high if high is not None else 65535)


def _gcp_ports(allow) -> bool:
    protocol = _protocol(get(allow, "protocol", default=""))
    if protocol == "all":
        return True
    if protocol != "tcp":
        return False
    ports = items(allow, "ports")
    if not ports:
        return True
    for spec in ports:
        text = str(spec)
        low, _, high = text.partition("-")
        if integer(low) is not None and integer(low) <= SSH <= integer(high or low):
            return True
    return False


def _ports(rule, protocol_key: str = "protocol") -> str:
    low, high = integer(get(rule, "fromPort")), integer(get(rule, "toPort"))
    span = "" if low is None and high is None else f" {low}" if low == high else f" {low}-{high}"
    return f"{get(rule, protocol_key)}{span}"


def _world(cidrs) -> list:
    return [c for c in cidrs if c in WORLD]


def _group(p) -> list[str]:
    """aws:ec2/securityGroup: its inline ingress rules."""
    open_rules = []
    for i, rule in enumerate(items(p, "ingress")):
        world = _world(items(rule, "cidrBlocks") + items(rule, "ipv6CidrBlocks"))
        if world and _covers(get(rule, "protocol"), get(rule, "fromPort"), get(rule, "toPort")):
            open_rules.append(f"ingress[{i}] {_ports(rule)} from {', '.join(world)}")
    return open_rules


def _ingress_rule(p) -> list[str]:
    """aws:vpc/securityGroupIngressRule."""
    world = _world((get(p, "cidrIpv4"), get(p, "cidrIpv6")))
    if world and _covers(get(p, "ipProtocol"), get(p, "fromPort"), get(p, "toPort")):
        return [f"{_ports(p, 'ipProtocol')} from {', '.join(world)}"]
    return []


def _group_rule(p) -> list[str]:
    """aws:ec2/securityGroupRule of type ingress."""
    world = _world(items(p, "cidrBlocks") + items(p, "ipv6CidrBlocks"))
    if get(p, "type") == "ingress" and world and _covers(get(p, "protocol"), get(p, "fromPort"), get(p, "toPort")):
        return [f"{_ports(p)} from {', '.join(world)}"]
    return []


def _firewall(p) -> list[str]:
    """gcp:compute/firewall of direction INGRESS."""
    direction = str(get(p, "direction", default="INGRESS")).upper()
    world = _world(items(p, "sourceRanges"))
    if direction == "INGRESS" and world and any(_gcp_ports(a) for a in items(p, "allows")):
        return [f"allows tcp:22 from {', '.join(world)}"]
    return []


OPEN_RULES = dict(zip(SUPPORTED, (_group, _ingress_rule, _group_rule, _firewall)))


def validate(args, report_violation) -> None:
    k = kind(args.resource_type)
    if k not in SUPPORTED:
        return
    open_rules = OPEN_RULES[k](plain(args.props))
    if open_rules:
        report_violation(f"{k} {args.name!r} opens SSH (tcp/22) to the internet: {'; '.join(open_rules)}", None)


POLICY = ResourceValidationPolicy(
    name=ID,
    display_name="no-world-open-ssh",
    description="No security group rule or firewall opens SSH (tcp/22) to 0.0.0.0/0 or ::/0.",
    severity=Severity.CRITICAL,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=(
        "Use SSM Session Manager (AWS) or IAP TCP forwarding (GCP) instead of SSH ingress, or allow only named "
        "CIDRs (the spec's network.ssh_ingress_cidrs)."),
    config_schema=schema(),
    tags=["security", "network", "aws", "gcp"],
    validate=validate,
)
