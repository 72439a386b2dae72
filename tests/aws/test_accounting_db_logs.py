"""The accounting database's logs (aicluster:aws:SlurmdbdDatabase, `slurm.accounting: managed`):
RDS exports the error and slow query logs to CloudWatch Logs (checkov CKV_AWS_129), the parameter
group turns the slow query log on and writes it to files (RDS publishes only file logs), and the
log groups RDS writes to are aicluster's, with its one retention, made before the instance."""
from __future__ import annotations

import pytest

from aicluster.design.telemetry_backend import LOG_RETENTION_DAYS
from tests.support.stack_plans import stack_spec_data

RDS = "aws:rds/instance:Instance"
PARAMETERS = "aws:rds/parameterGroup:ParameterGroup"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"


@pytest.fixture(scope="module")
def plan():
    """The component on its own, with the aws-p5-slurm stack's design (slurm.accounting: managed)."""
    from aicluster.aws.accounting_db import SlurmdbdDatabase, SlurmdbdDatabaseArgs
    from aicluster.design.cluster import design_cluster
    from aicluster.offline.engine import run_program
    from aicluster.spec.cluster import parse_spec

    design = design_cluster(parse_spec(stack_spec_data("aws-p5-slurm")))
    database = design.slurm.accounting_settings.database
    assert database is not None and database.engine == "mariadb"

    def program():
        SlurmdbdDatabase("p5-train-slurmdbd", SlurmdbdDatabaseArgs(
            context=design.context, database=database, vpc_id="vpc-0123456789abcdef0",
            head_security_group_id="sg-0123456789abcdef0", password="not-a-real-password"))
    return run_program(program, stack="own", config={"aws:region": design.region})


def test_rds_exports_its_error_and_slow_query_logs(plan):
    (db,) = plan.of_type(RDS)
    assert sorted(db.inputs["enabledCloudwatchLogsExports"]) == ["error", "slowquery"]


def test_the_parameter_group_writes_the_slow_query_log_to_files(plan):
    """RDS user guide, "Publishing MariaDB logs to Amazon CloudWatch Logs": the slow query log needs
    slow_query_log = 1 (or log_slow_query = 1), and publishing needs log_output = FILE."""
    (group,) = plan.of_type(PARAMETERS)
    params = {p["name"]: p["value"] for p in group.inputs["parameters"]}
    assert params["slow_query_log"] == "1" and params["log_output"] == "FILE"
    assert params["require_secure_transport"] == "1"       # unchanged beside them


def test_the_log_groups_rds_writes_to_are_made_first_with_a_retention(plan):
    (db,) = plan.of_type(RDS)
    identifier = db.inputs["identifier"]
    groups = {g.inputs["name"]: g for g in plan.of_type(LOG_GROUP) if g.inputs["name"].startswith("/aws/rds/")}
    assert set(groups) == {f"/aws/rds/instance/{identifier}/error", f"/aws/rds/instance/{identifier}/slowquery"}
    for group in groups.values():
        assert group.inputs["retentionInDays"] == LOG_RETENTION_DAYS
        assert group.inputs["tags"]["aicluster-cluster"] == "p5-train"
        assert group.urn in db.dependencies
