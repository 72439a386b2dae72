"""AIC-SEC-003 storage-encrypted, over hand-written stacks."""
from __future__ import annotations

import pulumi_aws as aws
import pytest

from tests.support import handwritten as hw

RULE = "AIC-SEC-003"


def test_encrypted_volumes_pass():
    def program():
        _, subnet, sg = hw.network()
        hw.launch_template("lt", subnet, sg)
        hw.instance("i", subnet, sg)
        aws.ebs.Volume("data", availability_zone=hw.ZONE, size=100, encrypted=True)
    assert hw.check(RULE, program).status == "pass"


@pytest.mark.parametrize("encrypted, shown", [("false", "'false'"), (None, "unset")])
def test_unencrypted_launch_template_volume_fails(encrypted, shown):
    def program():
        _, subnet, sg = hw.network()
        hw.launch_template("lt", subnet, sg, encrypted=encrypted)
    verdict = hw.check(RULE, program)
    assert verdict.status == "fail" and f"blockDeviceMappings[0] /dev/sda1 ({shown})" in hw.messages(verdict)


def test_unencrypted_instance_root_and_volume_fail():
    def program():
        _, subnet, sg = hw.network()
        hw.instance("i", subnet, sg, root_encrypted=False)
        aws.ebs.Volume("data", availability_zone=hw.ZONE, size=100)
    verdict = hw.check(RULE, program)
    assert verdict.status == "fail"
    assert len(verdict.violations) == 2 and "rootBlockDevice (False)" in hw.messages(verdict)


def test_fsx_is_always_encrypted_and_not_judged():
    def program():
        _, subnet, sg = hw.network()
        hw.fsx("fs", subnet, sg)
    assert hw.check(RULE, program).status == "n/a"


def test_encrypted_rds_passes_and_unencrypted_rds_fails():
    def program(encrypted):
        def build():
            _, subnet, sg = hw.network()
            hw.rds_instance("db", subnet, sg, parameter_group=hw.rds_parameter_group(), encrypted=encrypted)
        return build
    assert hw.check(RULE, program(True)).status == "pass"
    for encrypted, shown in ((False, "storageEncrypted (False)"), (None, "storageEncrypted (unset)")):
        verdict = hw.check(RULE, program(encrypted))
        assert verdict.status == "fail" and f"aws:rds/instance 'db' has unencrypted storage: {shown}" in hw.messages(verdict)


def test_an_unencrypted_aurora_cluster_fails_and_a_replica_inherits_its_source():
    def program():
        _, subnet, sg = hw.network()
        source = hw.rds_instance("db", subnet, sg)
        aws.rds.Instance("db-replica", replicate_source_db=source.identifier, instance_class="db.t4g.medium",
                         skip_final_snapshot=True)
        aws.rds.Cluster("aurora", engine="aurora-mysql", master_username="slurm", manage_master_user_password=True)
    verdict = hw.check(RULE, program)
    assert verdict.status == "fail" and len(verdict.violations) == 1
    assert "aws:rds/cluster 'aurora' has unencrypted storage: storageEncrypted (unset)" in hw.messages(verdict)


def test_cloud_sql_is_always_encrypted_and_not_judged():
    def program():
        net, _ = hw.gcp_network()
        hw.cloud_sql("hw-sql", net)
    assert hw.check(RULE, program).status == "n/a"


def _recipe(encrypted):
    aws.imagebuilder.ImageRecipe(
        "recipe", name="node", version="1.0.0", parent_image="ssm:/aws/service/example/ami-id",
        components=[aws.imagebuilder.ImageRecipeComponentArgs(component_arn="arn:aws:imagebuilder:us-east-1:aws:"
                                                                            "component/update-linux/x.x.x")],
        block_device_mappings=[aws.imagebuilder.ImageRecipeBlockDeviceMappingArgs(
            device_name="/dev/sda1", ebs=aws.imagebuilder.ImageRecipeBlockDeviceMappingEbsArgs(
                volume_size=100, volume_type="gp3", encrypted=encrypted))])


def test_encrypted_image_recipe_passes():
    verdict = hw.check(RULE, lambda: _recipe("true"))
    assert verdict.status == "pass" and verdict.judged == 1


@pytest.mark.parametrize("encrypted, shown", [("false", "'false'"), (None, "unset")])
def test_unencrypted_image_recipe_fails(encrypted, shown):
    """A baked image's snapshots are what every node boots: they are judged like a launch template's."""
    verdict = hw.check(RULE, lambda: _recipe(encrypted))
    assert verdict.status == "fail"
    assert f"aws:imagebuilder/imageRecipe 'recipe' has unencrypted storage: blockDeviceMappings[0] /dev/sda1 ({shown})" \
        in hw.messages(verdict)
