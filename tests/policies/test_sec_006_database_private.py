"""AIC-SEC-006 database-private, over hand-written stacks."""
from __future__ import annotations

import pulumi_aws as aws
import pytest

from tests.support import handwritten as hw

RULE = "AIC-SEC-006"


def _rds(**kwargs):
    def program():
        _, subnet, sg = hw.network()
        hw.rds_instance("db", subnet, sg, **kwargs)
    return program


def _rds_with_group(tls: str | None, **kwargs):
    def program():
        _, subnet, sg = hw.network()
        hw.rds_instance("db", subnet, sg, parameter_group=hw.rds_parameter_group(tls=tls), **kwargs)
    return program


def _cloud_sql(**kwargs):
    def program():
        net, _ = hw.gcp_network()
        hw.cloud_sql("hw-sql", net, **kwargs)
    return program


def test_private_rds_with_a_tls_only_parameter_group_passes():
    assert hw.check(RULE, _rds_with_group("1")).status == "pass"
    assert hw.check(RULE, _rds_with_group("ON")).status == "pass"


def test_public_rds_fails():
    verdict = hw.check(RULE, _rds_with_group("1", public=True))
    assert verdict.status == "fail"
    assert "aws:rds/instance 'db'" in hw.messages(verdict) and "publiclyAccessible is true" in hw.messages(verdict)


@pytest.mark.parametrize("tls", [None, "0", "OFF"])
def test_rds_whose_parameter_group_allows_plaintext_fails(tls):
    verdict = hw.check(RULE, _rds_with_group(tls))
    assert verdict.status == "fail"
    assert "its parameter group hw-db-params does not set require_secure_transport=1" in hw.messages(verdict)


@pytest.mark.parametrize("group", [None, "default.mariadb10.11"])
def test_mariadb_on_a_default_parameter_group_fails(group):
    verdict = hw.check(RULE, _rds(parameter_group=group))
    assert verdict.status == "fail" and "require_secure_transport is OFF" in hw.messages(verdict)


def test_a_parameter_group_outside_the_stack_is_not_judged_and_other_engines_pass_on_privacy():
    assert hw.check(RULE, _rds(parameter_group="team-shared-mariadb")).status == "pass"
    assert hw.check(RULE, _rds(engine="postgres", engine_version="16.4")).status == "pass"
    assert hw.check(RULE, _rds(engine="postgres", engine_version="16.4", public=True)).status == "fail"


def test_private_tls_only_cloud_sql_passes():
    assert hw.check(RULE, _cloud_sql()).status == "pass"
    assert hw.check(RULE, _cloud_sql(ssl_mode="TRUSTED_CLIENT_CERTIFICATE_REQUIRED")).status == "pass"


@pytest.mark.parametrize("ipv4, shown", [(True, "ipv4Enabled is True"), (None, "ipv4Enabled is unset")])
def test_cloud_sql_with_a_public_ipv4_fails(ipv4, shown):
    verdict = hw.check(RULE, _cloud_sql(ipv4=ipv4))
    assert verdict.status == "fail"
    assert "gcp:sql/databaseInstance 'hw-sql'" in hw.messages(verdict) and shown in hw.messages(verdict)


@pytest.mark.parametrize("mode", ["ALLOW_UNENCRYPTED_AND_ENCRYPTED", None])
def test_cloud_sql_without_encrypted_only_fails(mode):
    verdict = hw.check(RULE, _cloud_sql(ssl_mode=mode))
    assert verdict.status == "fail"
    assert f"sslMode is {mode or 'unset'}: unencrypted connections are accepted" in hw.messages(verdict)


def test_a_stack_without_a_database_is_not_applicable():
    def program():
        _, subnet, sg = hw.network()
        hw.instance("i", subnet, sg)
    assert hw.check(RULE, program).status == "n/a"


def test_aurora_and_multi_az_clusters_fail_on_plaintext_and_public_defaults():
    def program():
        pg = aws.rds.ClusterParameterGroup(
            "aurora-params", name="aurora-params", family="aurora-mysql8.0",
            parameters=[aws.rds.ClusterParameterGroupParameterArgs(name="require_secure_transport", value="0")])
        aurora = aws.rds.Cluster("aurora", engine="aurora-mysql", engine_version="8.0.mysql_aurora.3.08.0",
                                 db_cluster_parameter_group_name=pg.name, master_username="slurm",
                                 manage_master_user_password=True, storage_encrypted=True)
        aws.rds.ClusterInstance("aurora-1", cluster_identifier=aurora.id, instance_class="db.r6g.large",
                                engine="aurora-mysql", publicly_accessible=True)
        aws.rds.Cluster("multi-az", engine="postgres", db_cluster_instance_class="db.m6gd.large", storage_type="io1",
                        allocated_storage=100, iops=1000, master_username="slurm", manage_master_user_password=True,
                        storage_encrypted=True)
    text = hw.messages(hw.check(RULE, program))
    assert "aws:rds/cluster 'aurora' is not a private, TLS-only database: its parameter group aurora-params" in text
    assert "aws:rds/clusterInstance 'aurora-1' is not a private, TLS-only database: publiclyAccessible is true" in text
    assert "aws:rds/cluster 'multi-az' is not a private, TLS-only database: publiclyAccessible unset" in text
