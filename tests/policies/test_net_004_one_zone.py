"""AIC-NET-004 fabric-storage-one-zone, over hand-written stacks."""
from __future__ import annotations

from tests.support import handwritten as hw

RULE = "AIC-NET-004"


def test_passes_when_pool_and_filesystem_share_a_zone():
    assert hw.check(RULE, lambda: hw.efa_cluster()).status == "pass"


def test_fails_when_the_filesystem_is_in_another_zone():
    verdict = hw.check(RULE, lambda: hw.efa_cluster(fs_zone="us-east-1b"))
    assert verdict.status == "fail"
    text = hw.messages(verdict)
    assert "2 zones (us-east-1a, us-east-1b)" in text
    assert "filesystem hw-fsx in us-east-1b" in text and "pool hw-lt (4 x p5.48xlarge) in us-east-1a" in text


def test_fails_a_pool_spread_over_two_zones():
    import pulumi_aws as aws

    def program():
        vpc, subnet, sg = hw.network()
        other = aws.ec2.Subnet("other", vpc_id=vpc.id, cidr_block="10.0.16.0/20", availability_zone="us-east-1c",
                               tags=hw.TAGS)
        pg = hw.placement_group()
        template = hw.launch_template("lt", subnet, sg, placement_group=pg, zone=None)
        aws.autoscaling.Group("asg", max_size=4, min_size=0, vpc_zone_identifiers=[subnet.id, other.id],
                              launch_template=aws.autoscaling.GroupLaunchTemplateArgs(id=template.id))
    verdict = hw.check(RULE, program)
    assert verdict.status == "fail" and "us-east-1a, us-east-1c" in hw.messages(verdict)


def test_gcp_lustre_in_another_zone_fails():
    import pulumi_gcp as gcp

    def program():
        net, sub = hw.gcp_network()
        for i in range(2):
            hw.gce_instance(f"a3-{i}", sub, policy=None, zone="us-central1-a")
        gcp.lustre.Instance("lustre", capacity_gib="36000", per_unit_storage_throughput="250", filesystem="fs",
                            instance_id="lustre", location="us-central1-b", network=net.id)
    verdict = hw.check(RULE, program)
    assert verdict.status == "fail" and "us-central1-a, us-central1-b" in hw.messages(verdict)


def test_no_fabric_pool_is_not_applicable():
    def program():
        _, subnet, sg = hw.network()
        hw.fsx("fs", subnet, sg)
    assert hw.check(RULE, program).status == "n/a"
