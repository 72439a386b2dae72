"""`aicluster destroy` (commands/teardown.py) against a fake automation stack whose state is built
from a real offline plan (tests/support/fake_stack.py: urn, type, parent, dependencies, protect,
retainOnDelete as the program registered them), with the Pulumi engine's rules for a targeted
destroy. AWS Backup's job calls go through botocore's Stubber on a real client (moto has no
StartBackupJob): requests and answers are checked against the service's own model; STS is moto's.
Filestore's backups go to tests/support/fake_filestore.py (there is no Filestore emulator)."""
from __future__ import annotations

import argparse
import io
import json

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from aicluster import cli
from aicluster.commands import automation, final_backups, teardown
from aicluster.commands.teardown_state import urn_name
from aicluster.errors import SpecError
from aicluster.spec.cluster import parse_spec
from tests.support.fake_filestore import FakeFilestore
from tests.support.fake_stack import FakeStack, deployment_from_plan
from tests.support.stack_plans import plan_with_spec, stack_spec_data

AWS, GCP = "aws-p5-slurm", "gcp-a3mega-slurm"


@pytest.fixture(autouse=True)
def _no_waiting(monkeypatch):
    monkeypatch.setattr(final_backups, "POLL_S", 0)


def _spec(stack: str, storage: str | None = None, db: str | None = None, head: str | None = None,
          metrics: str | None = None) -> dict:
    spec = stack_spec_data(stack)
    spec.setdefault("slurm", {})["accounting"] = "managed"
    for fs in spec["storage"]:
        if storage:
            fs["on_delete"] = "delete" if storage == "snapshot" and stack == GCP and fs["type"] == "lustre" else storage
    if db:
        spec["slurm"]["accounting_on_delete"] = db
    if head:
        spec["slurm"].setdefault("head_node", {})["on_delete"] = head
    if metrics:
        spec.setdefault("monitoring", {})["on_delete"] = metrics
    return spec


def _deployed(stack: str, spec: dict, **fake) -> FakeStack:
    """The stack as `up` left it with this spec."""
    return FakeStack(deployment_from_plan(plan_with_spec(stack, spec), stack=stack), **fake)


def _destroy(stack: str, spec: dict, fake: FakeStack, monkeypatch, **kwargs) -> tuple[int, teardown.Report]:
    monkeypatch.setattr(automation, "STACK_OPENER", lambda ref, create: fake)
    report = teardown.Report(stack)
    ref = automation.StackRef(automation.Path("."), stack)
    code = teardown.destroy(ref, parse_spec(spec), list(plan_with_spec(stack, spec).resources), yes=True,
                            report=report, log=lambda _: None, **kwargs)
    return code, report


def _names(urns) -> set[str]:
    return {urn_name(u) for u in urns}


def _only_bucket_objects_forgotten(fake: FakeStack, by_name: dict) -> None:
    """What a destroy drops from the state but leaves in the cloud (retain_on_delete): only the
    boot objects kept when replaced (aws/slurm.py), which go with their bucket (force_destroy)."""
    types = {by_name[urn_name(u)]["type"] for u in fake.retained}
    assert types <= {"aws:s3/bucketObjectv2:BucketObjectv2"}, types


def _left(fake: FakeStack) -> set[str]:
    return {urn_name(r["urn"]) for r in fake.deployment["resources"]
            if r["type"] != "pulumi:pulumi:Stack" and not r["type"].startswith("pulumi:providers:")}


# --- AWS -------------------------------------------------------------------------------------


def test_the_default_policy_keeps_the_data_and_what_it_needs_and_deletes_the_compute(monkeypatch):
    spec = _spec(AWS)
    fake = _deployed(AWS, spec)
    by_name = {urn_name(r["urn"]): r for r in fake.deployment["resources"]}
    code, report = _destroy(AWS, spec, fake, monkeypatch)
    assert code == 0, report.message
    left = _left(fake)
    for kept in ("p5-train-fsx-fs", "p5-train-home-fs", "p5-train-slurmdbd-db", "p5-train-observability-workspace",
                 "p5-train-observability-alerts-key", "p5-train-slurm-head"):
        assert kept in left, kept
    # What the kept ones need stays too: the FSx's subnet and security group, the database's
    # subnets, subnet group, security group and parameter group (pulumi/pulumi#8359).
    fsx = by_name["p5-train-fsx-fs"]
    for need in fsx["dependencies"]:
        assert urn_name(need) in left, f"the FSx needs {need}"
    for need in by_name["p5-train-slurmdbd-db"]["dependencies"]:
        assert urn_name(need) in left
    assert any(by_name[n]["type"] == "aws:ec2/subnet:Subnet" for n in left)
    assert any(by_name[n]["type"] == "aws:ec2/securityGroup:SecurityGroup" for n in left)
    # The compute is gone, really deleted: the GPU pool's launch template and placement group, the
    # login nodes; the head (kept) keeps its own template.
    assert {"p5-train-gpu-template", "p5-train-gpu-placement", "p5-train-login-template"} <= _names(fake.deleted)
    assert "p5-train-slurm-head-template" in left
    _only_bucket_objects_forgotten(fake, by_name)
    # Nothing was unprotected: every protected resource is kept.
    assert [c for c in fake.calls if c[0] == "import_stack"] == []
    assert all(r.get("protect") for r in fake.deployment["resources"] if urn_name(r["urn"]) in
               {"p5-train-fsx-fs", "p5-train-home-fs", "p5-train-slurmdbd-db"})
    remaining = {urn_name(r["urn"]): r for r in report.remaining}
    assert "fsx delete-file-system --file-system-id fs-" in " ".join(remaining["p5-train-fsx-fs"]["commands"])
    assert "rds delete-db-instance --db-instance-identifier p5-train-slurmdbd " in \
        " ".join(remaining["p5-train-slurmdbd-db"]["commands"])
    assert any("set storage[0].on_delete: delete" in c for c in remaining["p5-train-fsx-fs"]["commands"])
    assert remaining["p5-train-fsx-fs"]["why"] == "storage[0].on_delete: retain"
    # Listed to be deleted in order: each before what it needs (the VPC after its subnets and groups).
    by_urn = {r["urn"]: r for r in _deployed(AWS, spec).deployment["resources"]}
    position = {r["urn"]: i for i, r in enumerate(report.remaining)}
    for urn in position:
        for need in by_urn[urn].get("dependencies") or []:
            if need in position:
                assert position[need] > position[urn], f"{urn} needs {need}"


def test_delete_everywhere_leaves_nothing(monkeypatch):
    spec = _spec(AWS, storage="delete", db="delete", head="delete", metrics="delete")
    fake = _deployed(AWS, spec)
    by_name = {urn_name(r["urn"]): r for r in fake.deployment["resources"]}
    code, report = _destroy(AWS, spec, fake, monkeypatch)
    assert code == 0, report.message
    assert _left(fake) == set() and report.remaining == []
    _only_bucket_objects_forgotten(fake, by_name)
    assert {"p5-train-fsx-fs", "p5-train-home-fs", "p5-train-slurmdbd-db", "p5-train-slurm-head",
            "p5-train-observability-workspace"} <= _names(fake.deleted)
    # Exactly the stateful ones were unprotected, in one import before the destroy.
    [(_, unprotected)] = [c for c in fake.calls if c[0] == "import_stack"]
    assert fake.calls.index(next(c for c in fake.calls if c[0] == "import_stack")) < \
        fake.calls.index(next(c for c in fake.calls if c[0] == "destroy"))
    assert {"p5-train-fsx-fs", "p5-train-slurm-munge", "p5-train-slurmdbd-db"} <= _names(unprotected)


def _stubbed_backup(monkeypatch, states: list[str], fail_start: bool = False):
    """AWS_CLIENT: moto's STS, a real AWS Backup client behind a Stubber that checks each request
    against the AWS Backup model and answers the job's `states` in turn."""
    client = boto3.client("backup", region_name="us-east-1")
    stub = Stubber(client)
    stub.add_response("describe_backup_vault", {"BackupVaultName": "Default", "BackupVaultArn":
                                                "arn:aws:backup:us-east-1:123456789012:backup-vault:Default"},
                      {"BackupVaultName": "Default"})
    if fail_start:
        stub.add_client_error("start_backup_job", "AccessDeniedException", "not authorized to assume the role")
    else:
        stub.add_response("start_backup_job", {"BackupJobId": "job-1", "RecoveryPointArn":
                                               "arn:aws:backup:us-east-1:123456789012:recovery-point:rp-1"})
        for state in states:
            answer = {"BackupJobId": "job-1", "State": state}
            if state == "COMPLETED":
                answer["RecoveryPointArn"] = "arn:aws:backup:us-east-1:123456789012:recovery-point:rp-1"
            if state == "FAILED":
                answer["StatusMessage"] = "Backup job failed: the file system is being deleted"
            stub.add_response("describe_backup_job", answer, {"BackupJobId": "job-1"})
    stub.activate()
    sts = boto3.client("sts", region_name="us-east-1")
    monkeypatch.setattr(final_backups, "AWS_CLIENT", lambda service, region: client if service == "backup" else sts)
    return stub


@mock_aws
def test_snapshot_backs_up_efs_first_and_lets_fsx_and_rds_take_their_own(monkeypatch):
    spec = _spec(AWS, storage="snapshot", db="snapshot", head="delete", metrics="delete")
    fake = _deployed(AWS, spec)
    before = {urn_name(r["urn"]): r for r in fake.deployment["resources"]}
    stub = _stubbed_backup(monkeypatch, ["RUNNING", "COMPLETED"])
    code, report = _destroy(AWS, spec, fake, monkeypatch)
    assert code == 0, report.message
    stub.assert_no_pending_responses()
    [backup] = report.backups
    assert backup["backup_id"].endswith("recovery-point:rp-1") and "fs-" in backup["what"]
    assert {"p5-train-fsx-fs", "p5-train-home-fs", "p5-train-slurmdbd-db"} <= _names(fake.deleted)
    # What FSx and RDS read at deletion: a final backup and a final snapshot.
    assert before["p5-train-fsx-fs"]["inputs"]["skipFinalBackup"] is False
    assert before["p5-train-slurmdbd-db"]["inputs"]["skipFinalSnapshot"] is False
    assert before["p5-train-slurmdbd-db"]["inputs"]["deletionProtection"] is False


@mock_aws
@pytest.mark.parametrize("failure", ["job-failed", "start-refused"])
def test_a_failed_backup_deletes_nothing(monkeypatch, failure):
    spec = _spec(AWS, storage="snapshot", db="delete", head="delete", metrics="delete")
    fake = _deployed(AWS, spec)
    state = json.dumps(fake.deployment, sort_keys=True)
    _stubbed_backup(monkeypatch, ["RUNNING", "FAILED"], fail_start=failure == "start-refused")
    code, report = _destroy(AWS, spec, fake, monkeypatch)
    assert code == 1 and report.status == "stopped"
    assert "nothing was deleted" in report.message
    assert [c[0] for c in fake.calls] == ["export_stack"]          # no state edit, no destroy
    assert json.dumps(fake.deployment, sort_keys=True) == state
    assert fake.deleted == [] and fake.retained == []
    assert report.backups[0]["error"]


def test_a_policy_the_state_does_not_carry_yet_is_refused_before_anything(monkeypatch):
    fake = _deployed(AWS, _spec(AWS))                          # deployed with retain
    spec = _spec(AWS, storage="delete")                        # then the spec says delete, no `up`
    with pytest.raises(SpecError) as caught:
        _destroy(AWS, spec, fake, monkeypatch)
    paths = {p.path for p in caught.value.problems}
    assert {"storage[0].on_delete", "storage[1].on_delete"} <= paths
    fsx = [p for p in caught.value.problems if p.path == "storage[0].on_delete"]
    assert any("skipFinalBackup true" in p.allowed for p in fsx)          # FSx would still take a backup
    assert any("retainOnDelete" in p.allowed and "aicluster up" in p.allowed for p in caught.value.problems)
    assert [c[0] for c in fake.calls] == ["export_stack"]


def test_a_destroy_failing_midway_protects_again_what_is_left_and_says_where_things_are(monkeypatch):
    spec = _spec(AWS, storage="delete", db="delete", head="delete", metrics="delete")
    fake = _deployed(AWS, spec, fail_on="p5-train-slurm-head")
    by_name = {urn_name(r["urn"]): r for r in fake.deployment["resources"]}
    code, report = _destroy(AWS, spec, fake, monkeypatch)
    assert code == 1 and report.status == "stopped"
    assert "the destroy failed" in report.message and "still in the stack" in report.message
    left = {urn_name(r["urn"]): r for r in fake.deployment["resources"]}
    assert "p5-train-slurm-head" in left and left["p5-train-slurm-head"].get("protect") is True
    # Every stateful resource still there is protected again; no deleted one was only forgotten.
    for name in ("p5-train-fsx-fs", "p5-train-home-fs", "p5-train-slurmdbd-db"):
        if name in left:
            assert left[name].get("protect") is True, name
    _only_bucket_objects_forgotten(fake, by_name)
    assert [c[0] for c in fake.calls].count("import_stack") == 2


def test_one_retained_database_keeps_its_password_and_network_while_the_rest_goes(monkeypatch):
    spec = _spec(AWS, storage="delete", db="retain", head="delete", metrics="delete")
    fake = _deployed(AWS, spec)
    code, report = _destroy(AWS, spec, fake, monkeypatch)
    assert code == 0, report.message
    left = _left(fake)
    assert {"p5-train-slurmdbd-db", "p5-train-slurm-slurmdbd-password"} <= left
    assert "p5-train-fsx-fs" not in left and "p5-train-slurm-head" not in left


# --- GCP -------------------------------------------------------------------------------------


@pytest.fixture
def filestore(monkeypatch):
    fake = FakeFilestore().start()
    monkeypatch.setattr(final_backups, "FILESTORE_API",
                        lambda: final_backups.FilestoreApi(fake.endpoint, lambda: "test-token"))
    yield fake
    fake.stop()


def test_gcp_snapshot_backs_up_filestore_then_deletes_and_cloud_sql_takes_its_own(monkeypatch, filestore):
    spec = _spec(GCP, storage="snapshot", db="snapshot", head="delete", metrics="delete")
    fake = _deployed(GCP, spec)
    before = {urn_name(r["urn"]): r for r in fake.deployment["resources"]}
    code, report = _destroy(GCP, spec, fake, monkeypatch)
    assert code == 0, report.message
    [(method, path, query, body)] = [r for r in filestore.requests if r[0] == "POST"]
    assert path == "projects/example-ml-project/locations/us-east4/backups"
    assert body["sourceInstance"].endswith("/instances/a3mega-train-home") and body["sourceFileShare"] == "home"
    [backup] = report.backups
    assert backup["backup_id"] == f"{path}/{query['backupId']}"
    assert filestore.backups[backup["backup_id"]]["state"] == "READY"
    assert {"a3mega-train-home-fs", "a3mega-train-scratch-fs", "a3mega-train-slurmdbd-db"} <= _names(fake.deleted)
    assert before["a3mega-train-slurmdbd-db"]["inputs"]["settings"]["finalBackupConfig"]["enabled"] is True
    assert _left(fake) == set()


def test_gcp_a_failed_filestore_backup_deletes_nothing(monkeypatch, filestore):
    filestore.fail = True
    spec = _spec(GCP, storage="snapshot", db="delete", head="delete", metrics="delete")
    fake = _deployed(GCP, spec)
    code, report = _destroy(GCP, spec, fake, monkeypatch)
    assert code == 1 and "another operation is in progress" in report.message
    assert [c[0] for c in fake.calls] == ["export_stack"] and fake.deleted == []


def test_gcp_default_keeps_the_filesystems_and_their_network(monkeypatch):
    spec = _spec(GCP)
    fake = _deployed(GCP, spec)
    code, report = _destroy(GCP, spec, fake, monkeypatch)
    assert code == 0, report.message
    left = _left(fake)
    assert {"a3mega-train-home-fs", "a3mega-train-scratch-fs", "a3mega-train-slurmdbd-db"} <= left
    remaining = {urn_name(r["urn"]): r for r in report.remaining}
    assert "gcloud filestore instances delete a3mega-train-home --location us-east4-a" in \
        remaining["a3mega-train-home-fs"]["commands"]


# --- the command line ------------------------------------------------------------------------


def _cli(monkeypatch, fake: FakeStack, *argv: str, stdin=None) -> int:
    monkeypatch.setattr(automation, "STACK_OPENER", lambda ref, create: fake)
    monkeypatch.setattr("sys.stdin", stdin or io.StringIO(""))
    return cli.main(["destroy", "--stack", AWS, *argv])


def test_without_a_terminal_and_without_yes_it_refuses(monkeypatch, capsys):
    fake = _deployed(AWS, _spec(AWS))
    assert _cli(monkeypatch, fake) == 2
    assert "--yes" in capsys.readouterr().err
    assert not any(c[0] in ("destroy", "import_stack") for c in fake.calls)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_stack_name_confirms_and_anything_else_does_not(monkeypatch, capsys):
    fake = _deployed(AWS, _spec(AWS))
    monkeypatch.setattr(teardown, "CONFIRM", lambda prompt: "aws-p5")
    assert _cli(monkeypatch, fake, stdin=_Tty()) == 2
    assert not any(c[0] == "destroy" for c in fake.calls)
    monkeypatch.setattr(teardown, "CONFIRM", lambda prompt: AWS)
    assert _cli(monkeypatch, fake, stdin=_Tty()) == 0
    assert any(c[0] == "destroy" for c in fake.calls)


def test_json_says_what_remains(monkeypatch, capsys):
    fake = _deployed(AWS, _spec(AWS))
    assert _cli(monkeypatch, fake, "--yes", "--format", "json") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "done"
    assert {"p5-train-fsx-fs", "p5-train-slurmdbd-db"} <= {urn_name(r["urn"]) for r in out["remaining"]}


def test_file_and_stack_together_are_refused(monkeypatch, capsys):
    args = argparse.Namespace(file="stacks/Pulumi.aws-p5-slurm.yaml", stack=AWS, cwd=None)
    with pytest.raises(SpecError):
        teardown._stack_ref(args)


def test_a_stack_never_deployed_is_bad_input_not_a_traceback(monkeypatch, capsys):
    from pulumi.automation import errors
    from pulumi.automation._cmd import CommandResult

    def missing(ref, create):
        raise errors.StackNotFoundError(CommandResult("", f"error: no stack named '{ref.stack}' found", 255))

    monkeypatch.setattr(automation, "STACK_OPENER", missing)
    assert cli.main(["destroy", "--stack", AWS, "--yes"]) == 2
    assert "aicluster up" in capsys.readouterr().err


def test_a_stack_file_names_its_project_and_stack():
    from aicluster.resources import CHECKOUT_DIR

    args = argparse.Namespace(file=str(CHECKOUT_DIR / "stacks" / "Pulumi.aws-p5-slurm.yaml"), stack=None, cwd=None)
    ref = teardown._stack_ref(args)
    assert (ref.project_dir, ref.stack) == (CHECKOUT_DIR, AWS)
    with pytest.raises(SpecError):
        teardown._stack_ref(argparse.Namespace(file=str(CHECKOUT_DIR / "README.md"), stack=None, cwd=None))
