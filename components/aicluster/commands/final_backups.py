"""The final backups `aicluster destroy` takes itself, before it deletes anything, under
`on_delete: snapshot`, where the cloud's delete takes none (FSx for Lustre, RDS and Cloud SQL take
their own: spec/teardown.py):

- Amazon EFS: an AWS Backup on-demand job (StartBackupJob) into a backup vault (default:
  `Default`) with an IAM role AWS Backup assumes (default: the account's
  service-role/AWSBackupDefaultServiceRole), waited for with DescribeBackupJob until COMPLETED.
  The recovery point stays in the vault after the filesystem is gone (AWS Backup Developer Guide,
  "Creating an on-demand backup").
- Filestore: backups.create (Filestore API v1, projects.locations.backups.create) of the
  instance's one share into the instance's region, waited for through its long-running
  operation. A backup outlives its instance (Filestore docs, "Backups overview").

Each returns a `BackupResult` (the backup's id, or what went wrong); none raises for a cloud
fault, so the caller stops before deleting anything. Clients are made through `AWS_CLIENT` and
`FILESTORE_API` (tests replace them: moto has no AWS Backup jobs; Filestore has no emulator).
"""
from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Mapping

POLL_S = 20.0                      # between status calls; tests set 0
DEFAULT_VAULT = "Default"
DEFAULT_ROLE = "service-role/AWSBackupDefaultServiceRole"
FILESTORE_ENDPOINT = "https://file.googleapis.com/v1"
_DONE_AWS = {"COMPLETED"}
_FAILED_AWS = {"ABORTED", "FAILED", "EXPIRED", "PARTIAL"}


@dataclass(frozen=True)
class BackupResult:
    urn: str
    what: str                  # "AWS Backup job of fs-..." / "Filestore backup of ..."
    backup_id: str | None      # recovery point ARN / backup name, when it completed
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.backup_id is not None


def _boto3_client(service: str, region: str) -> Any:
    import boto3

    return boto3.client(service, region_name=region)


# (service, region) -> a boto3 client. Tests swap it.
AWS_CLIENT: Callable[[str, str], Any] = _boto3_client


def aws_backup_settings(region: str, vault: str | None, role: str | None) -> tuple[str, str]:
    """The vault and role ARN to use; a SpecError-worthy text when the vault is missing."""
    vault = vault or DEFAULT_VAULT
    if role and role.startswith("arn:"):
        return vault, role
    account = AWS_CLIENT("sts", region).get_caller_identity()["Account"]
    return vault, f"arn:aws:iam::{account}:role/{role or DEFAULT_ROLE}"


def vault_problem(region: str, vault: str) -> str | None:
    """Why the backup vault cannot take the backups, or None."""
    try:
        AWS_CLIENT("backup", region).describe_backup_vault(BackupVaultName=vault)
    except Exception as exc:   # noqa: BLE001 - botocore's ClientError or a connection error: say what
        return f"{type(exc).__name__}: {exc}"
    return None


def efs_backup(urn: str, file_system_arn: str, region: str, vault: str, role_arn: str, cluster: str,
               log: Callable[[str], None] = lambda _: None) -> BackupResult:
    """An on-demand AWS Backup job of one EFS filesystem, waited for."""
    what = f"AWS Backup job of {file_system_arn.rsplit('/', 1)[-1]} into vault {vault}"
    client = AWS_CLIENT("backup", region)
    try:
        job = client.start_backup_job(
            BackupVaultName=vault, ResourceArn=file_system_arn, IamRoleArn=role_arn,
            # one job per filesystem and destroy: a retried start returns the same job
            IdempotencyToken=f"aicluster-destroy-{file_system_arn.rsplit('/', 1)[-1]}",
            RecoveryPointTags={"aicluster-cluster": cluster, "aicluster-final-backup": "true"})
        job_id = job["BackupJobId"]
        log(f"  {what}: job {job_id} started")
        while True:
            state = client.describe_backup_job(BackupJobId=job_id)
            status = state.get("State")
            if status in _DONE_AWS:
                return BackupResult(urn, what, state.get("RecoveryPointArn") or job.get("RecoveryPointArn"))
            if status in _FAILED_AWS:
                return BackupResult(urn, what, None, f"job {job_id} ended {status}: "
                                                     f"{state.get('StatusMessage') or 'no message'}")
            log(f"  {what}: {status} {state.get('PercentDone', '')}".rstrip())
            time.sleep(POLL_S)
    except Exception as exc:   # noqa: BLE001 - a cloud fault stops the destroy, with what it said
        return BackupResult(urn, what, None, f"{type(exc).__name__}: {exc}")


def _gcloud_token() -> str:
    done = subprocess.run(["gcloud", "auth", "print-access-token"], capture_output=True, text=True, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        raise RuntimeError(f"gcloud auth print-access-token failed: {done.stderr.strip() or done.returncode}")
    return done.stdout.strip()


@dataclass
class FilestoreApi:
    """The Filestore REST API: endpoint and a bearer token (gcloud's, by default)."""
    endpoint: str = FILESTORE_ENDPOINT
    token: Callable[[], str] = _gcloud_token

    def call(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> dict:
        request = urllib.request.Request(
            f"{self.endpoint}/{path.lstrip('/')}", method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": f"Bearer {self.token()}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:    # noqa: S310 - https or a test's loopback
            return json.loads(response.read() or b"{}")


# () -> a FilestoreApi. Tests swap it for one pointed at a fake.
FILESTORE_API: Callable[[], FilestoreApi] = FilestoreApi


def filestore_backup_id(instance: str, now: datetime | None = None) -> str:
    """A backup id Filestore takes (a letter first, lowercase letters, digits and -, at most 63)."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%d%H%M")
    base = re.sub(r"[^a-z0-9-]", "-", instance.lower())[:63 - len(stamp) - 7].rstrip("-")
    return f"{base}-final-{stamp}"


def filestore_backup(urn: str, instance_id: str, share: str, cluster: str,
                     log: Callable[[str], None] = lambda _: None) -> BackupResult:
    """A Filestore backup of the instance's share (projects/P/locations/ZONE/instances/NAME),
    into the instance's region, waited for."""
    match = re.fullmatch(r"projects/([^/]+)/locations/([^/]+)/instances/([^/]+)", instance_id or "")
    what = f"Filestore backup of {instance_id}"
    if not match:
        return BackupResult(urn, what, None, f"not a Filestore instance name: {instance_id!r}")
    project, location, name = match.groups()
    region = location.rsplit("-", 1)[0] if re.fullmatch(r"[a-z]+-[a-z]+\d+-[a-z]", location) else location
    backup_id = filestore_backup_id(name)
    api = FILESTORE_API()
    try:
        operation = api.call("POST", f"projects/{project}/locations/{region}/backups?backupId={backup_id}", {
            "sourceInstance": instance_id, "sourceFileShare": share,
            "description": f"aicluster {cluster}: final backup before aicluster destroy",
            "labels": {"aicluster-cluster": cluster, "aicluster-final-backup": "true"}})
        log(f"  {what}: {backup_id} started")
        while not operation.get("done"):
            time.sleep(POLL_S)
            operation = api.call("GET", operation["name"])
        if operation.get("error"):
            return BackupResult(urn, what, None, f"operation {operation.get('name')} failed: "
                                                 f"{operation['error'].get('message', operation['error'])}")
        return BackupResult(urn, what, f"projects/{project}/locations/{region}/backups/{backup_id}")
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")[:500]
        return BackupResult(urn, what, None, f"HTTP {exc.code}: {detail}")
    except Exception as exc:   # noqa: BLE001 - a cloud fault stops the destroy, with what it said
        return BackupResult(urn, what, None, f"{type(exc).__name__}: {exc}")
