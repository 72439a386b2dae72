"""AIC-NET-003 efa-security-group-self, over hand-written stacks."""
from __future__ import annotations

import pulumi_aws as aws

from tests.support import handwritten as hw

RULE = "AIC-NET-003"


def _efa_pool(subnet, sg):
    pg = hw.placement_group()
    template = hw.launch_template("lt", subnet, sg, placement_group=pg)
    hw.autoscaling_group("asg", template, subnet, max_size=4, placement=pg)


def test_passes_with_inline_self_rules():
    def program():
        _, subnet, sg = hw.network()
        _efa_pool(subnet, sg)
    assert hw.check(RULE, program).status == "pass"


def test_passes_with_separate_vpc_rules_referencing_the_group_itself():
    def program():
        _, subnet, sg = hw.network(inline=False)
        aws.vpc.SecurityGroupIngressRule("in", security_group_id=sg.id, referenced_security_group_id=sg.id,
                                         ip_protocol="-1")
        aws.vpc.SecurityGroupEgressRule("out", security_group_id=sg.id, referenced_security_group_id=sg.id,
                                        ip_protocol="-1")
        _efa_pool(subnet, sg)
    assert hw.check(RULE, program).status == "pass"


def test_passes_with_classic_security_group_rules_with_self():
    def program():
        _, subnet, sg = hw.network(inline=False)
        for direction in ("ingress", "egress"):
            aws.ec2.SecurityGroupRule(direction, type=direction, security_group_id=sg.id, self=True,
                                      protocol="-1", from_port=0, to_port=0)
        _efa_pool(subnet, sg)
    assert hw.check(RULE, program).status == "pass"


def test_fails_when_egress_to_itself_is_missing():
    def program():
        _, subnet, sg = hw.network(inline=False)
        aws.vpc.SecurityGroupIngressRule("in", security_group_id=sg.id, referenced_security_group_id=sg.id,
                                         ip_protocol="-1")
        aws.vpc.SecurityGroupEgressRule("out", security_group_id=sg.id, cidr_ipv4="0.0.0.0/0", ip_protocol="-1")
        _efa_pool(subnet, sg)
    verdict = hw.check(RULE, program)
    assert verdict.status == "fail"
    assert "all traffic from itself yes, to itself NO" in hw.messages(verdict)


def test_fails_without_any_self_rule():
    def program():
        _, subnet, sg = hw.network(efa_self=False)
        _efa_pool(subnet, sg)
    verdict = hw.check(RULE, program)
    assert verdict.status == "fail" and "from itself NO, to itself NO" in hw.messages(verdict)


def test_a_stack_without_efa_is_not_judged():
    def program():
        _, subnet, sg = hw.network(efa_self=False)
        hw.launch_template("lt", subnet, sg, layout="ena")
    assert hw.check(RULE, program).status == "n/a"
