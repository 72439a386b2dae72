"""aicluster:gcp:SlurmdbdDatabase - slurmdbd's database in Cloud SQL for MySQL
(`slurm.accounting: managed`), so the accounting history outlives the head node.

What is built (facts and sources: catalog accounting_db.yaml, through accounting_design.py):
- the instance: a private IP in the cluster's VPC through private service access (the same
  peering Managed Lustre and Filestore use) and no public IP; TLS required (ssl_mode
  ENCRYPTED_ONLY; aicluster-accounting checks the server against the instance's own CA, published
  with the settings); encrypted at rest (Google-managed keys, always on in Cloud SQL); daily
  backups with binary logs (point-in-time recovery); deletion protection both in Pulumi and in the
  Cloud SQL API; Slurm's database flags; protected and retained (stateful.py);
- the database slurm_acct_db (protected and retained too: deleting it drops the history) and the
  user slurmdbd connects as, its password the cluster's slurmdbd secret (Secret Manager).

Inputs come from the catalog, the cluster's name and the network only: routine edits never touch
it; a bigger tier is an in-place patch (Cloud SQL restarts the instance).
"""
from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from aicluster.design.accounting import AccountingDatabase
from aicluster.design.model import ClusterContext
from aicluster.gcp.common import labels


# How long Cloud SQL keeps the final backup of a deleted instance (at most 365 days:
# DatabaseInstanceSettingsFinalBackupConfigArgs.retention_days).
FINAL_BACKUP_DAYS = 365


@dataclass(frozen=True)
class SlurmdbdDatabaseArgs:
    """context: the cluster's name, region and labels. database: `SlurmDesign.accounting_settings.database`
    (cloud gcp). network_id: the cluster's VPC (`Network.network_id`). service_access: the private
    service access connection the private IP needs (`Network.service_access`). password: the
    slurmdbd password (`SlurmController.accounting_password`)."""
    context: ClusterContext
    database: AccountingDatabase
    network_id: pulumi.Input[str]
    service_access: pulumi.Resource | None
    password: pulumi.Input[str]


class SlurmdbdDatabase(pulumi.ComponentResource):
    address: pulumi.Output[str]      # the private IP: slurmdbd's StorageHost
    ca_pem: pulumi.Output[str]       # the instance's server CA: slurmdbd verifies the server with it

    def __init__(self, name: str, args: SlurmdbdDatabaseArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:gcp:SlurmdbdDatabase", name, None, opts)
        context, db = args.context, args.database
        # slurm.accounting_on_delete (docs/teardown.md): kept and deletion-protected (in Pulumi and in
        # the Cloud SQL API) only under retain; `snapshot` is Cloud SQL's final backup. All of it
        # is patched in place (settings) or read at deletion (deletion_protection, the description).
        retained = db.on_delete == "retain"
        keep = pulumi.ResourceOptions(parent=self, protect=True, retain_on_delete=retained)
        instance = gcp.sql.DatabaseInstance(
            f"{name}-db",
            name=f"{context.name}-slurmdbd",
            region=context.region,
            database_version=db.engine,
            deletion_protection=retained,
            final_backup_description=f"aicluster {context.name}: slurmdbd's final backup" if db.on_delete == "snapshot" else None,
            settings=gcp.sql.DatabaseInstanceSettingsArgs(
                tier=db.size,
                edition=db.edition,
                availability_type="ZONAL",
                location_preference=gcp.sql.DatabaseInstanceSettingsLocationPreferenceArgs(zone=context.zone),
                disk_type="PD_SSD",
                disk_size=db.storage_gib,
                disk_autoresize=True,
                deletion_protection_enabled=retained,
                final_backup_config=gcp.sql.DatabaseInstanceSettingsFinalBackupConfigArgs(
                    enabled=True, retention_days=FINAL_BACKUP_DAYS) if db.on_delete == "snapshot" else None,
                ip_configuration=gcp.sql.DatabaseInstanceSettingsIpConfigurationArgs(
                    ipv4_enabled=False, private_network=args.network_id, ssl_mode="ENCRYPTED_ONLY"),
                backup_configuration=gcp.sql.DatabaseInstanceSettingsBackupConfigurationArgs(
                    enabled=True, binary_log_enabled=True,
                    backup_retention_settings=gcp.sql.DatabaseInstanceSettingsBackupConfigurationBackupRetentionSettingsArgs(
                        retained_backups=db.backups)),
                database_flags=[gcp.sql.DatabaseInstanceSettingsDatabaseFlagArgs(name=k, value=v)
                                for k, v in db.flags.items()],
                user_labels=labels(context, "accounting"),
            ),
            opts=pulumi.ResourceOptions.merge(keep, pulumi.ResourceOptions(
                depends_on=[args.service_access] if args.service_access else None)),
        )
        gcp.sql.Database(f"{name}-database", name=db.name, instance=instance.name, opts=keep)
        gcp.sql.User(f"{name}-user", name=db.user, instance=instance.name, host="%",
                     password=pulumi.Output.secret(args.password),
                     opts=pulumi.ResourceOptions(parent=self))
        self.address = instance.private_ip_address
        self.ca_pem = instance.server_ca_certs.apply(lambda certs: certs[0].cert if certs else "")
        self.register_outputs({"address": self.address, "connection_name": instance.connection_name})
