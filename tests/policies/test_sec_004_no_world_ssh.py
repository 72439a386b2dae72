"""AIC-SEC-004 no-world-open-ssh, over hand-written stacks."""
from __future__ import annotations

import pulumi_aws as aws
import pulumi_gcp as gcp
import pytest

from tests.support import handwritten as hw

RULE = "AIC-SEC-004"


def test_ssh_from_a_named_cidr_passes():
    def program():
        vpc, _, _ = hw.network()
        aws.ec2.SecurityGroup("head", vpc_id=vpc.id, ingress=[aws.ec2.SecurityGroupIngressArgs(
            protocol="tcp", from_port=22, to_port=22, cidr_blocks=["203.0.113.0/24"])])
    assert hw.check(RULE, program).status == "pass"


@pytest.mark.parametrize("protocol, low, high", [("tcp", 22, 22), ("tcp", 0, 65535), ("-1", 0, 0)])
def test_world_open_inline_rule_fails(protocol, low, high):
    def program():
        vpc, _, _ = hw.network()
        aws.ec2.SecurityGroup("head", vpc_id=vpc.id, ingress=[aws.ec2.SecurityGroupIngressArgs(
            protocol=protocol, from_port=low, to_port=high, cidr_blocks=["0.0.0.0/0"])])
    verdict = hw.check(RULE, program)
    assert verdict.status == "fail" and "opens SSH (tcp/22) to the internet" in hw.messages(verdict)
    assert f"ingress[0] {protocol} {low if low == high else f'{low}-{high}'} from 0.0.0.0/0" in hw.messages(verdict)


def test_world_open_separate_rules_fail():
    def program():
        vpc, _, sg = hw.network()
        aws.vpc.SecurityGroupIngressRule("ssh6", security_group_id=sg.id, cidr_ipv6="::/0", ip_protocol="tcp",
                                         from_port=22, to_port=22)
        aws.ec2.SecurityGroupRule("ssh4", type="ingress", security_group_id=sg.id, cidr_blocks=["0.0.0.0/0"],
                                  protocol="tcp", from_port=22, to_port=22)
    verdict = hw.check(RULE, program)
    assert verdict.status == "fail" and len(verdict.violations) == 2


def test_https_from_the_world_is_not_ssh():
    def program():
        vpc, _, sg = hw.network()
        aws.vpc.SecurityGroupIngressRule("https", security_group_id=sg.id, cidr_ipv4="0.0.0.0/0", ip_protocol="tcp",
                                         from_port=443, to_port=443)
    assert hw.check(RULE, program).status == "pass"


def test_gcp_firewall_open_to_the_world_fails():
    def program():
        net, _ = hw.gcp_network()
        gcp.compute.Firewall("ssh", network=net.id, source_ranges=["0.0.0.0/0"],
                             allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=["20-30"])])
    verdict = hw.check(RULE, program)
    assert verdict.status == "fail" and "allows tcp:22 from 0.0.0.0/0" in hw.messages(verdict)


# ---------------------------------------------------------------- every spelling of the protocol
# EC2 IpPermission IpProtocol takes a name or an IANA protocol number: tcp is "tcp" or "6", all
# protocols "-1" (and "all" in the providers); GCP Firewall.allowed[].IPProtocol takes tcp, all or
# a number. Any case, and a number where a hand-written program passes an int (the engine then sends
# a float: 6.0, -1.0).
TCP_SPELLINGS = ["tcp", "TCP", "Tcp", "6", 6]
ALL_SPELLINGS = ["-1", -1, "all", "ALL"]


@pytest.mark.parametrize("protocol", TCP_SPELLINGS + ALL_SPELLINGS, ids=repr)
def test_ssh_open_to_the_world_is_refused_however_the_protocol_is_spelled(protocol):
    def program():
        vpc, _, sg = hw.network()
        aws.ec2.SecurityGroup("inline", vpc_id=vpc.id, ingress=[aws.ec2.SecurityGroupIngressArgs(
            protocol=protocol, from_port=22, to_port=22, cidr_blocks=["0.0.0.0/0"])])
        aws.vpc.SecurityGroupIngressRule("rule", security_group_id=sg.id, cidr_ipv6="::/0", ip_protocol=protocol,
                                         from_port=22, to_port=22)
        aws.ec2.SecurityGroupRule("legacy", type="ingress", security_group_id=sg.id, cidr_blocks=["0.0.0.0/0"],
                                  protocol=protocol, from_port=22, to_port=22)
    verdict = hw.check(RULE, program)
    assert verdict.status == "fail"
    assert sorted(v.resource_name for v in verdict.violations) == ["inline", "legacy", "rule"]


@pytest.mark.parametrize("protocol", ["tcp", "TCP", "6", 6, "all", "ALL"], ids=repr)
def test_gcp_ssh_open_to_the_world_is_refused_however_the_protocol_is_spelled(protocol):
    def program():
        net, _ = hw.gcp_network()
        gcp.compute.Firewall("ssh", network=net.id, source_ranges=["0.0.0.0/0"],
                             allows=[gcp.compute.FirewallAllowArgs(protocol=protocol, ports=["22"])])
    assert hw.check(RULE, program).status == "fail"


@pytest.mark.parametrize("protocol", ["udp", "17", 17, "icmp", "1"], ids=repr)
def test_other_protocols_on_port_22_are_not_ssh(protocol):
    def program():
        vpc, _, sg = hw.network()
        aws.vpc.SecurityGroupIngressRule("rule", security_group_id=sg.id, cidr_ipv4="0.0.0.0/0", ip_protocol=protocol,
                                         from_port=22, to_port=22)
    assert hw.check(RULE, program).status == "pass"
