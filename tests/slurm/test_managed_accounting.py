"""`slurm.accounting: managed`: slurmdbd's database in Amazon RDS for MariaDB or Cloud SQL for MySQL,
so the accounting history outlives the head (issue 15 item 9). The spec's errors, the design (the
RDS subnet group's two zones, apart from EKS's), the resources under mocks on both clouds (private,
encrypted, TLS only, protected, password from the secret store), the settings the head's
aicluster-accounting converges on, slurm.conf's fairshare, and the plan. The real slurmdbd and
MariaDB run in tests/slurm/test_real_slurmdbd.py."""
from __future__ import annotations

import ipaddress
import json

import pytest

from aicluster.design.accounting import accounting_plan_lines
from aicluster.catalog.accounting_db import accounting_catalog
from aicluster.design.cluster import design_cluster
from aicluster.errors import SpecError
from aicluster.offline.capture import Secret, reveal
from aicluster.render.slurm_files import accounting_settings
from aicluster.spec.cluster import parse_spec
from tests.support.stack_plans import stack_result, stack_spec_data

RDS = "aws:rds/instance:Instance"
PARAMETERS = "aws:rds/parameterGroup:ParameterGroup"
SUBNETS = "aws:rds/subnetGroup:SubnetGroup"
SUBNET = "aws:ec2/subnet:Subnet"
SG = "aws:ec2/securityGroup:SecurityGroup"
RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
SQL = "gcp:sql/databaseInstance:DatabaseInstance"
SQL_DB = "gcp:sql/database:Database"
SQL_USER = "gcp:sql/user:User"
AWS_STACK, GCP_STACK = "aws-p5-slurm", "gcp-a3ultra-slurm"


def _spec(stack: str, **slurm):
    data = stack_spec_data(stack)
    data.setdefault("slurm", {}).update(slurm)
    return data


def _problems(data) -> str:
    with pytest.raises(SpecError) as err:
        parse_spec(data)
    return str(err.value)


# ---------------------------------------------------------------- the spec


def test_a_misspelled_mode_names_the_path_the_choices_and_the_close_match():
    text = _problems(_spec(AWS_STACK, accounting="manged"))
    assert "slurm.accounting: 'manged' is not valid; allowed: false, true, head, managed (did you mean managed?)" in text


def test_an_existing_aws_network_needs_two_subnets_for_the_rds_subnet_group():
    data = _spec(AWS_STACK, accounting="managed")
    data["network"] = {"existing": {"vpc_id": "vpc-0123456789abcdef0", "subnet_id": "subnet-0123456789abcdef0"}}
    assert "slurm.accounting_subnet_ids: [] is not valid; two or more private subnet ids in two zones" in _problems(data)
    data["slurm"]["accounting_subnet_ids"] = ["subnet-0123456789abcdef1", "subnet-0123456789abcdef2"]
    db = design_cluster(parse_spec(data)).slurm.accounting_settings.database
    assert db.subnet_ids == ("subnet-0123456789abcdef1", "subnet-0123456789abcdef2") and db.subnets == ()


def test_subnet_ids_are_refused_where_aicluster_makes_the_subnets():
    text = _problems(_spec(AWS_STACK, accounting="managed", accounting_subnet_ids=["subnet-0123456789abcdef1"]))
    assert "leave it out unless cloud is aws, accounting is managed and network.existing is set" in text


# ---------------------------------------------------------------- the design


def test_head_mode_keeps_mariadb_on_the_head_and_off_has_no_accounting():
    head = design_cluster(parse_spec(_spec(AWS_STACK, accounting=True))).slurm
    assert head.accounting and head.accounting_settings.database is None and head.accounting_settings.mode == "head"
    off = design_cluster(parse_spec(_spec(AWS_STACK, accounting=False))).slurm
    assert not off.accounting and off.accounting_settings is None


def test_the_rds_subnets_are_in_two_zones_inside_the_vpc_and_apart_from_every_other_subnet():
    design = design_cluster(parse_spec(_spec(AWS_STACK, accounting="managed")))
    db = design.slurm.accounting_settings.database
    (first, zone_a), (second, zone_b) = db.subnets
    assert zone_a == design.zone and zone_b != zone_a and zone_b.startswith(design.region)
    vpc = ipaddress.ip_network(design.network.vpc_cidr)
    nets = [ipaddress.ip_network(first), ipaddress.ip_network(second)]
    assert all(n.subnet_of(vpc) for n in nets)
    # Never on the nodes' or the public subnet, nor on EKS's control-plane subnets (zone_subnets.py).
    others = [ipaddress.ip_network(c) for c in (design.network.private_subnet_cidr, design.network.public_subnet_cidr)]
    eks = design_cluster(parse_spec({**stack_spec_data("aws-p5-eks")})).kubernetes.control_plane_subnets
    others += [ipaddress.ip_network(c) for c, _ in eks]
    assert not any(n.overlaps(o) for n in nets for o in others)


# ---------------------------------------------------------------- AWS: RDS for MariaDB


@pytest.fixture(scope="module")
def aws():
    return stack_result(AWS_STACK)


def test_rds_is_private_encrypted_backed_up_and_never_lost(aws):
    (db,) = aws.plan.of_type(RDS)
    i, aws_db = db.inputs, accounting_catalog().aws
    assert (i["engine"], i["engineVersion"], i["instanceClass"]) == ("mariadb", aws_db["engine_version"],
                                                                     aws_db["instance_class"])
    assert i["publiclyAccessible"] is False and i["storageEncrypted"] is True and i["storageType"] == "gp3"
    assert i["deletionProtection"] is True and i["skipFinalSnapshot"] is False
    assert i["finalSnapshotIdentifier"] == "p5-train-slurmdbd-final"
    assert i["backupRetentionPeriod"] == aws_db["backup_retention_days"] and i["maxAllocatedStorage"] > i["allocatedStorage"]
    assert db.protect and db.retain_on_delete
    assert (i["dbName"], i["username"]) == ("slurm_acct_db", "slurm")


def test_rds_password_is_the_slurmdbd_secret_and_marked_secret(aws):
    (db,) = aws.plan.of_type(RDS)
    assert isinstance(db.inputs["password"], Secret)
    (version,) = [r for r in aws.plan.of_type("aws:secretsmanager/secretVersion:SecretVersion")
                  if r.name.endswith("slurmdbd-value")]
    assert reveal(db.inputs["password"]) == reveal(version.inputs["secretString"])


def test_rds_takes_tls_only_with_slurms_lock_timeout(aws):
    (group,) = aws.plan.of_type(PARAMETERS)
    params = {p["name"]: p["value"] for p in group.inputs["parameters"]}
    # and the slow query log, to files, for its CloudWatch Logs export (tests/aws/test_accounting_db_logs.py)
    assert params == {"require_secure_transport": "1", "innodb_lock_wait_timeout": "900", "slow_query_log": "1",
                      "log_output": "FILE"}
    assert group.inputs["family"] == accounting_catalog().aws["parameter_group_family"]
    (db,) = aws.plan.of_type(RDS)
    assert db.inputs["parameterGroupName"] == group.outputs["name"]


def test_rds_admits_the_head_node_alone_on_its_port(aws):
    (db,) = aws.plan.of_type(RDS)
    (group_id,) = db.inputs["vpcSecurityGroupIds"]
    group = next(r for r in aws.plan.of_type(SG) if r.id == group_id)
    assert not group.inputs.get("ingress")
    rules = [r for r in aws.plan.of_type(RULE) if r.inputs["securityGroupId"] == group_id]
    head = aws.plan.named("p5-train-slurm-head", SG)
    assert [(r.inputs["referencedSecurityGroupId"], r.inputs["fromPort"], r.inputs["toPort"]) for r in rules] == [
        (head.id, 3306, 3306)]
    assert not any(r.inputs.get("cidrIpv4") for r in rules)


def test_rds_subnet_group_spans_two_zones_with_no_public_address(aws):
    (group,) = aws.plan.of_type(SUBNETS)
    subnets = [r for r in aws.plan.of_type(SUBNET) if r.id in group.inputs["subnetIds"]]
    assert len({s.inputs["availabilityZone"] for s in subnets}) == 2
    assert all(s.inputs["mapPublicIpOnLaunch"] is False for s in subnets)


def test_the_head_is_told_the_endpoint_and_amazons_ca_bundle(aws):
    settings = json.loads(aws.files["aicluster/accounting.json"])
    (db,) = aws.plan.of_type(RDS)
    assert settings["database"] == {"host": db.outputs["address"], "port": 3306, "name": "slurm_acct_db",
                                    "user": "slurm", "tls_ca_url": accounting_catalog().aws["ca_bundle_url"]}
    assert settings["enabled"] is True and settings["password_secret"].startswith("arn:aws:secretsmanager:")
    assert [q["name"] for q in settings["qos"]] == ["normal", "high", "low"]


# ---------------------------------------------------------------- GCP: Cloud SQL for MySQL


@pytest.fixture(scope="module")
def gcp():
    return stack_result(GCP_STACK)


def test_cloud_sql_has_a_private_ip_only_tls_only_backups_and_deletion_protection(gcp):
    (db,) = gcp.plan.of_type(SQL)
    i, s = db.inputs, db.inputs["settings"]
    assert i["databaseVersion"] == accounting_catalog().gcp["database_version"] and i["deletionProtection"] is True
    ip = s["ipConfiguration"]
    assert ip["ipv4Enabled"] is False and ip["sslMode"] == "ENCRYPTED_ONLY" and ip["privateNetwork"]
    assert s["deletionProtectionEnabled"] is True
    assert s["backupConfiguration"]["enabled"] is True and s["backupConfiguration"]["binaryLogEnabled"] is True
    assert s["databaseFlags"] == [{"name": "innodb_lock_wait_timeout", "value": "900"}]
    assert db.protect and db.retain_on_delete


def test_cloud_sql_waits_for_private_service_access(gcp):
    (db,) = gcp.plan.of_type(SQL)
    (peering,) = gcp.plan.of_type("gcp:servicenetworking/connection:Connection")
    assert peering.urn in db.dependencies


def test_cloud_sql_database_is_kept_and_the_user_has_the_stored_password(gcp):
    (database,) = gcp.plan.of_type(SQL_DB)
    assert database.inputs["name"] == "slurm_acct_db" and database.protect and database.retain_on_delete
    (user,) = gcp.plan.of_type(SQL_USER)
    assert user.inputs["name"] == "slurm" and isinstance(user.inputs["password"], Secret)
    (version,) = [r for r in gcp.plan.of_type("gcp:secretmanager/secretVersion:SecretVersion")
                  if "slurmdbd" in r.name]
    assert reveal(user.inputs["password"]) == reveal(version.inputs["secretData"])


def test_the_head_is_told_the_private_ip_and_the_instances_own_ca(gcp):
    settings = json.loads(gcp.files["aicluster/accounting.json"])
    (db,) = gcp.plan.of_type(SQL)
    assert settings["database"]["host"] == db.outputs["privateIpAddress"]
    assert settings["database"]["tls_ca_pem"] == reveal(db.outputs["serverCaCerts"])[0]["cert"]
    assert settings["database"]["tls_ca_pem"].startswith("-----BEGIN CERTIFICATE-----")


# ---------------------------------------------------------------- slurm.conf, the settings, the plan


@pytest.mark.parametrize("stack", [AWS_STACK, GCP_STACK])
def test_slurm_conf_points_at_slurmdbd_on_the_head_with_fairshare(stack):
    conf = stack_result(stack).files["slurm/slurm.conf"]
    lines = set(conf.splitlines())
    assert "AccountingStorageType=accounting_storage/slurmdbd" in lines
    assert {"PriorityType=priority/multifactor", "PriorityDecayHalfLife=7-0", "PriorityWeightFairshare=10000",
            "PriorityWeightQOS=5000"} <= lines


def test_without_accounting_slurm_conf_has_no_priority_plugin_that_needs_slurmdbd():
    result = design_cluster(parse_spec(_spec(AWS_STACK, accounting=False)))
    assert accounting_settings(result, None, None) == {"enabled": False, "password_secret": None}
    from aicluster.render.slurm_config import SlurmRuntime, render_slurm_configs
    conf = render_slurm_configs(result, SlurmRuntime(controller_host="h", controller_addr="10.0.0.2"))["slurm.conf"]
    assert "priority/multifactor" not in conf and "accounting_storage" not in conf.replace(
        "accounting_storage/none", "")


def test_head_mode_settings_have_no_database_and_the_same_defaults():
    design = design_cluster(parse_spec(_spec(AWS_STACK, accounting="head")))
    settings = accounting_settings(design, "arn:secret", None)
    assert settings["database"] is None and settings["account"] == accounting_catalog().account
    assert [q["name"] for q in settings["qos"]] == [q.name for q in accounting_catalog().qos]


def test_the_plan_says_where_the_history_lives():
    lines = accounting_plan_lines(design_cluster(parse_spec(_spec(AWS_STACK))).slurm.accounting_settings)
    assert "Amazon RDS for MariaDB 10.11" in lines[2] and "private, TLS only" in lines[2]
    head = accounting_plan_lines(design_cluster(parse_spec(_spec(AWS_STACK, accounting=True))).slurm.accounting_settings)
    assert "MariaDB on the head node: lost with it" in head[2]
    assert accounting_plan_lines(None) == []


# ---------------------------------------------------------------- the catalog


def _catalog_variant(tmp_path, edit):
    """A loader of the shipped accounting_db.yaml with `edit` applied, written under tmp_path."""
    from pathlib import Path

    import yaml

    import aicluster.catalog
    from aicluster.catalog.accounting_db import accounting_catalog_from
    shipped = Path(aicluster.catalog.__file__).parent / "accounting_db.yaml"
    data = yaml.safe_load(shipped.read_text(encoding="utf-8"))
    edit(data)
    variant = tmp_path / "accounting_db.yaml"
    variant.write_text(yaml.safe_dump(data), encoding="utf-8")
    return lambda: accounting_catalog_from(variant)


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["aws"].pop("source"), "aws needs a non-empty `source:`"),
    (lambda d: d["gcp"].update(source="Cloud SQL docs"), "gcp: a version needs its 'checked on' date"),
    (lambda d: d.pop("qos_source"), "qos needs a non-empty `qos_source:`"),
    (lambda d: d["qos"].reverse(), "the first QoS is every job's default and must be Slurm's `normal`"),
])
def test_the_catalog_refuses_an_unsourced_or_inconsistent_entry(tmp_path, edit, message):
    from aicluster.catalog import CatalogError
    load = _catalog_variant(tmp_path, edit)
    with pytest.raises(CatalogError, match=message):
        load()
