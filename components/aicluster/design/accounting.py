"""Slurm accounting's design: where slurmdbd's database lives, and the account and QoS it starts
with. Pure.

`slurm.accounting` true/head keeps MariaDB on the head node; `managed` moves the database to
Amazon RDS for MariaDB (aws) or Cloud SQL for MySQL (gcp) so the accounting history (usage that
fairshare decays, QoS, associations) outlives the head. slurmdbd itself always runs on the head:
it is stateless, and the head is the one host every slurmctld RPC already reaches.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Mapping

from aicluster.catalog.accounting_db import Qos, accounting_catalog
from aicluster.design.zone_subnets import two_zone_subnets

if TYPE_CHECKING:
    from aicluster.spec.cluster import ClusterSpec

DATABASE_NAME = "slurm_acct_db"      # slurmdbd's default StorageLoc
DATABASE_USER = "slurm"


@dataclass(frozen=True)
class AccountingDatabase:
    """The managed database of `slurm.accounting: managed`, from the catalog (accounting_db.yaml)."""

    cloud: str
    engine: str                     # "mariadb" (RDS) | "MYSQL_8_0" (Cloud SQL database_version)
    engine_version: str             # "10.11" (RDS engine_version) | "8.0" (for people; `engine` is the API's)
    size: str                       # RDS instance class | Cloud SQL tier
    storage_gib: int
    max_storage_gib: int | None     # RDS storage autoscaling ceiling; Cloud SQL autoresizes
    backups: int                    # days (RDS) | retained backups (Cloud SQL)
    port: int
    flags: Mapping[str, str]        # slurmdbd's recommended server settings
    parameter_group_family: str | None = None     # aws
    edition: str | None = None                    # gcp
    ca_bundle_url: str | None = None              # aws: the CA bundle slurmdbd checks RDS's certificate with
    subnets: tuple[tuple[str, str], ...] = ()     # aws, new VPC: (cidr, zone) of the DB subnet group
    subnet_ids: tuple[str, ...] = ()              # aws, existing network: slurm.accounting_subnet_ids
    name: str = DATABASE_NAME
    user: str = DATABASE_USER
    on_delete: str = "retain"                     # slurm.accounting_on_delete: retain | snapshot | delete


@dataclass(frozen=True)
class AccountingDesign:
    """slurm.accounting when it is on: the database (None: MariaDB on the head) and the defaults
    aicluster-accounting configures through sacctmgr."""

    database: AccountingDatabase | None
    account: str
    qos: tuple[Qos, ...]

    @property
    def mode(self) -> str:
        return "managed" if self.database else "head"


def design_accounting(spec: "ClusterSpec", vpc_cidr: str | None) -> AccountingDesign | None:
    mode = spec.slurm.accounting
    if mode is False or spec.scheduler != "slurm":
        return None
    catalog = accounting_catalog()
    database = None
    if mode == "managed":
        database = replace(_aws(spec, vpc_cidr) if spec.cloud == "aws" else _gcp(),
                           on_delete=spec.slurm.accounting_on_delete)
    return AccountingDesign(database=database, account=catalog.account, qos=catalog.qos)


def _aws(spec: "ClusterSpec", vpc_cidr: str | None) -> AccountingDatabase:
    c = accounting_catalog()
    aws = c.aws
    return AccountingDatabase(
        cloud="aws", engine=str(aws["engine"]), engine_version=str(aws["engine_version"]),
        size=str(aws["instance_class"]), storage_gib=int(aws["storage_gib"]),
        max_storage_gib=int(aws["max_storage_gib"]), backups=int(aws["backup_retention_days"]),
        port=int(aws["port"]), flags=c.flags, parameter_group_family=str(aws["parameter_group_family"]),
        ca_bundle_url=str(aws["ca_bundle_url"]),
        # Parts 2 and 3 of the VPC's free last quarter (EKS takes 0 and 1; zone_subnets.py).
        subnets=two_zone_subnets(vpc_cidr, spec.zone, None, first=2) if vpc_cidr else (),
        subnet_ids=tuple(spec.slurm.accounting_subnet_ids))


def _gcp() -> AccountingDatabase:
    c = accounting_catalog()
    gcp = c.gcp
    return AccountingDatabase(
        # "MYSQL_8_0" -> "8.0": the version as people say it; `engine` is what the API takes.
        cloud="gcp", engine=str(gcp["database_version"]),
        engine_version=".".join(str(gcp["database_version"]).split("_")[1:]),
        size=str(gcp["tier"]), storage_gib=int(gcp["disk_gb"]), max_storage_gib=None,
        backups=int(gcp["backup_retention_count"]), port=int(gcp["port"]), flags=c.flags,
        edition=str(gcp["edition"]))


_ENGINE_NAMES = {"aws": "Amazon RDS for MariaDB", "gcp": "Cloud SQL for MySQL"}


def accounting_facts(accounting: AccountingDesign | None) -> dict | None:
    """What the plan says about Slurm accounting (text through accounting_plan_lines, and JSON);
    None when it is off. What aws/accounting_db.py and gcp/accounting_db.py build."""
    if accounting is None:
        return None
    facts: dict = {"mode": accounting.mode, "slurmdbd": "on the head node",
                   "priority": "priority/multifactor (fairshare, QoS, age)", "default_account": accounting.account,
                   "qos": [{"name": q.name, "priority": q.priority, "usage_factor": q.usage_factor}
                           for q in accounting.qos],
                   "database": None}
    db = accounting.database
    if db is not None:
        facts["database"] = {
            "service": _ENGINE_NAMES[db.cloud], "version": db.engine_version, "size": db.size,
            "storage_gib": db.storage_gib, "name": db.name, "user": db.user, "private": True, "tls": True,
            "encrypted": True, "protected": True, "retained": db.on_delete == "retain", "on_delete": db.on_delete,
            "backups": f"{db.backups} days" if db.cloud == "aws" else f"{db.backups} daily backups",
            "password": "in the secret store (slurmdbd-password)"}
    return facts


def accounting_plan_lines(accounting: AccountingDesign | None) -> list[str]:
    """The plan's "Accounting" section (plan_report.py prints it); none when accounting is off."""
    facts = accounting_facts(accounting)
    if facts is None:
        return []
    qos = ", ".join(f"{q['name']} (priority {q['priority']}, usage x{q['usage_factor']:g})" for q in facts["qos"])
    db = facts["database"]
    where = ("MariaDB on the head node: lost with it (slurm.accounting: managed keeps it)" if db is None else
             f"{db['service']} {db['version']} ({db['size']}, {db['storage_gib']} GiB): private, TLS only, "
             f"encrypted, backups: {db['backups']}, "
             + ("protected + retained" if db["retained"] else f"protected; on destroy: {db['on_delete']}")
             + "; password in the secret store")
    return ["", "Accounting",
            f"  slurmdbd on the head node; database: {where}",
            f"  fairshare (priority/multifactor); QoS {qos}; default account {facts['default_account']}"]
