"""aicluster:aws:SlurmdbdDatabase - slurmdbd's database in Amazon RDS for MariaDB
(`slurm.accounting: managed`), so the accounting history outlives the head node.

What is built (facts and sources: catalog accounting_db.yaml, through accounting_design.py):
- a DB subnet group of two private subnets in two zones (RDS refuses one zone): aicluster makes
  them in the VPC's free last quarter, or takes `slurm.accounting_subnet_ids` in an existing VPC;
  no route to an internet gateway is ever attached to them;
- a security group open on the database port to the head node's group only (slurmdbd runs there);
- a parameter group with Slurm's database settings and `require_secure_transport`, so every
  connection is TLS (aicluster-accounting checks the server against Amazon's CA bundle), and the
  slow query log on, written to files (LOG_PARAMETERS);
- the error and slow query logs exported to CloudWatch Logs (LOG_EXPORTS), into groups made here
  first (/aws/rds/instance/<identifier>/<log>, the names RDS writes to) with aicluster's one log
  retention: left to RDS, the groups would be created never expiring;
- the instance: private (never publicly accessible), encrypted at rest (the account's aws/rds KMS
  key), automated backups, deletion protection, a final snapshot on delete, storage autoscaling;
  protected and retained like every stateful resource (stateful.py). Its master user is slurmdbd's
  user; the password is the cluster's slurmdbd secret (Secrets Manager), secret in Pulumi's state.

The instance's inputs come from the catalog, the cluster's name and the network only, so routine
edits (pools, idle time, login nodes) never touch it; a bigger class or a minor version is an
in-place modify applied in the maintenance window (apply_immediately off).
"""
from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from aicluster.design.accounting import AccountingDatabase
from aicluster.design.model import ClusterContext
from aicluster.design.telemetry_backend import LOG_RETENTION_DAYS

# What RDS publishes to CloudWatch Logs (checkov CKV_AWS_129): the error log (on by default: startup,
# shutdown, crashes, failed connections) and the slow query log (slurmdbd's rollups and sacct's long
# queries). RDS for MariaDB takes audit | error | general | slowquery | iam-db-auth-error (RDS API
# Reference, CreateDBInstance EnableCloudwatchLogsExports; tests/contracts/test_enums.py). Not audit
# (it needs an option group with MARIADB_AUDIT_PLUGIN) nor general (every statement: slurmdbd's
# inserts, at a cost, with no finding in them).
LOG_EXPORTS = ("error", "slowquery")
# The slow query log is off by default and RDS publishes a log only from files: "Slow query log: a
# custom parameter group with slow_query_log = 1 or log_slow_query = 1"; "Log output: a custom
# parameter group with log_output = FILE" (RDS user guide, "Publishing MariaDB logs to Amazon
# CloudWatch Logs"). Both are dynamic parameters: set without a restart. long_query_time stays at
# its default (10 s): slurmdbd's normal queries take milliseconds.
LOG_PARAMETERS = {"slow_query_log": "1", "log_output": "FILE"}


def rds_log_group_name(identifier: str, log: str) -> str:
    """The group RDS publishes an instance's log to (RDS user guide: /aws/rds/instance/<name>/<log>)."""
    return f"/aws/rds/instance/{identifier}/{log}"


@dataclass(frozen=True)
class SlurmdbdDatabaseArgs:
    """context: the cluster's name and tags. database: `SlurmDesign.accounting_settings.database`
    (cloud aws). vpc_id: the cluster's VPC. head_security_group_id: the head node's own group
    (`SlurmController.head_security_group_id`), the only client. password: the slurmdbd password
    (`SlurmController.accounting_password`)."""
    context: ClusterContext
    database: AccountingDatabase
    vpc_id: pulumi.Input[str]
    head_security_group_id: pulumi.Input[str]
    password: pulumi.Input[str]


class SlurmdbdDatabase(pulumi.ComponentResource):
    address: pulumi.Output[str]      # the instance's private DNS name: slurmdbd's StorageHost

    def __init__(self, name: str, args: SlurmdbdDatabaseArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:aws:SlurmdbdDatabase", name, None, opts)
        context, db = args.context, args.database
        child = pulumi.ResourceOptions(parent=self)
        tags = context.labels("accounting")

        subnet_ids = list(db.subnet_ids) or [
            aws.ec2.Subnet(f"{name}-subnet-{i}", vpc_id=args.vpc_id, cidr_block=cidr, availability_zone=zone,
                           map_public_ip_on_launch=False,
                           tags={**tags, "Name": f"{context.name}-accounting-{zone}"}, opts=child).id
            for i, (cidr, zone) in enumerate(db.subnets)]
        subnets = aws.rds.SubnetGroup(
            f"{name}-subnets", name=f"{context.name}-slurmdbd", subnet_ids=subnet_ids,
            description=f"aicluster {context.name}: slurmdbd database (two zones, private)", tags=tags, opts=child)
        group = aws.ec2.SecurityGroup(
            f"{name}-sg", vpc_id=args.vpc_id, tags=tags, opts=child,
            description=f"aicluster {context.name}: slurmdbd database ({db.port} from the head node only)")
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-in-head", security_group_id=group.id, referenced_security_group_id=args.head_security_group_id,
            ip_protocol="tcp", from_port=db.port, to_port=db.port,
            description="slurmdbd on the head node", opts=child)
        parameters = aws.rds.ParameterGroup(
            f"{name}-parameters", name=f"{context.name}-slurmdbd", family=db.parameter_group_family,
            description=f"aicluster {context.name}: slurmdbd (Slurm's settings, TLS only)",
            parameters=[aws.rds.ParameterGroupParameterArgs(name=k, value=v) for k, v in
                        {**db.flags, **LOG_PARAMETERS, "require_secure_transport": "1"}.items()],
            tags=tags, opts=child)
        identifier = f"{context.name}-slurmdbd"
        log_groups = [aws.cloudwatch.LogGroup(
            f"{name}-log-{log}", name=rds_log_group_name(identifier, log), retention_in_days=LOG_RETENTION_DAYS,
            tags=tags, opts=child) for log in LOG_EXPORTS]

        instance = aws.rds.Instance(
            f"{name}-db",
            identifier=identifier,
            engine=db.engine,
            engine_version=db.engine_version,
            instance_class=db.size,
            allocated_storage=db.storage_gib,
            max_allocated_storage=db.max_storage_gib,
            storage_type="gp3",
            storage_encrypted=True,
            db_name=db.name,
            username=db.user,
            password=pulumi.Output.secret(args.password),
            port=db.port,
            db_subnet_group_name=subnets.name,
            vpc_security_group_ids=[group.id],
            parameter_group_name=parameters.name,
            publicly_accessible=False,
            multi_az=False,
            backup_retention_period=db.backups,
            copy_tags_to_snapshot=True,
            # slurm.accounting_on_delete (docs/teardown.md): RDS's own deletion protection only under
            # retain (else `aicluster destroy` could not delete it); a final snapshot unless delete.
            # All three are ModifyDBInstance / delete-time fields: changed in place.
            deletion_protection=db.on_delete == "retain",
            skip_final_snapshot=db.on_delete == "delete",
            final_snapshot_identifier=f"{context.name}-slurmdbd-final",
            auto_minor_version_upgrade=True,
            apply_immediately=False,
            # Applied at once whatever apply_immediately says (RDS API Reference, ModifyDBInstance
            # CloudwatchLogsExportConfiguration).
            enabled_cloudwatch_logs_exports=list(LOG_EXPORTS),
            tags=tags,
            # A later password is set in place; the database itself is never replaced by an edit.
            # The log groups first: RDS would otherwise create them, never expiring.
            opts=pulumi.ResourceOptions(parent=self, protect=True, retain_on_delete=db.on_delete == "retain",
                                        depends_on=log_groups),
        )
        self.address = instance.address
        self.register_outputs({"address": instance.address, "identifier": instance.identifier})
