"""AIC-CST-001 required-tags, over hand-written stacks."""
from __future__ import annotations

from tests.support import handwritten as hw

RULE = "AIC-CST-001"


def test_tagged_resources_pass():
    verdict = hw.check(RULE, lambda: hw.efa_cluster())
    assert verdict.status == "pass" and verdict.judged >= 5


def test_missing_tags_warn_by_default():
    def program():
        _, subnet, sg = hw.network()
        hw.launch_template("lt", subnet, sg, tags={"team": "ml"})
    verdict = hw.check(RULE, program)
    assert verdict.status == "warn"
    assert "aws:ec2/launchTemplate 'lt' lacks the required tags aicluster-cluster, aicluster-role (has: team)" \
        in hw.messages(verdict)


def test_required_tags_are_configurable_and_gcp_uses_labels():
    def program():
        _, sub = hw.gcp_network()
        hw.gce_instance("a3", sub, labels={"team": "ml"})
    verdict = hw.check(RULE, program, {"requiredTags": ["team", "cost-center"], "enforcementLevel": "mandatory"})
    assert verdict.status == "fail" and "lacks the required labels cost-center" in hw.messages(verdict)


def test_autoscaling_group_tag_lists_count():
    def program():
        _, subnet, sg = hw.network()
        lt = hw.launch_template("lt", subnet, sg)
        hw.autoscaling_group("asg", lt, subnet, max_size=2)
    verdict = hw.check(RULE, program)
    assert verdict.status == "pass", hw.messages(verdict)
