"""aicluster-sync under faults (issue 13, findings 3 and 4): a pass that cannot read everything,
or whose configuration slurmctld rejects, installs nothing and fails; a pass that fails partway
is finished by the next one; a restart that fails puts the last good set back and raises an
alert. Against moto's S3 with the files the AWS plan publishes; the configuration test's
slurmctld is a stand-in here (tests/support/fake_slurmctld.py), a real one in
tests/slurm/test_sync_slurmctld.py."""
from __future__ import annotations

import hashlib
import importlib
import json
import os
import subprocess
import sys

import pytest
from botocore.exceptions import ClientError

from tests.support import fake_slurmctld, free_port, node_programs, sync_head
from tests.support.fake_gcp import FakeGcp
from tests.support.sync_head import aws_head

CONF = "/etc/slurm/slurm.conf"
RESTARTS = "systemctl restart slurmctld"


@pytest.fixture
def head(moto_endpoint, tmp_path):
    return aws_head(moto_endpoint, tmp_path)


def installed_conf(head) -> str | None:
    path = head.installed(CONF)
    return path.read_text() if path.exists() else None


def edited_conf(head, extra: str = "") -> str:
    return head.files["slurm/slurm.conf"].replace("SuspendTime=600", "SuspendTime=2700") + extra


# --- a set that cannot be read whole installs nothing ---


def test_missing_object_fails_and_installs_nothing(head):
    """Before: slurm.conf (early in the manifest) was installed, then the pass crashed on the
    missing object, leaving a half-new set."""
    head.sync("--bootstrap")
    head.put("slurm/slurm.conf", edited_conf(head))
    head.delete("aicluster/accounting.json")                 # late in the manifest
    done = head.run()
    assert installed_conf(head) == head.files["slurm/slurm.conf"], done.stderr
    assert done.returncode == 1 and RESTARTS not in head.call_lines()
    assert "aicluster/accounting.json" in done.stderr and "missing" in done.stderr


def test_hash_that_does_not_match_the_manifest_installs_nothing(head):
    """A manifest entry's sha256 (when the publisher writes one) must match the object: an object
    replaced while the set was read is not installed. Before: sha256 was ignored."""
    manifest = head.manifest()
    entry = next(e for e in manifest["files"] if e["path"] == CONF)
    entry["sha256"] = hashlib.sha256(head.files["slurm/slurm.conf"].encode()).hexdigest()
    head.put("manifest.json", json.dumps(manifest))
    head.put_raw("slurm/slurm.conf", edited_conf(head))
    done = head.run("--bootstrap")
    assert done.returncode == 1 and "sha256" in done.stderr, done.stderr
    assert installed_conf(head) is None


def test_unreachable_storage_is_a_failure_not_an_empty_bucket(head):
    """Before: any error reading the manifest was "no manifest yet", exit 0."""
    head.env |= {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}", "AWS_MAX_ATTEMPTS": "1"}
    done = head.run("--bootstrap")
    assert done.returncode == 1, done.stderr
    assert "cannot read" in done.stderr and "nothing published" not in done.stderr
    assert installed_conf(head) is None and not head.state("applied.json").exists()


def manifest_with_bad_last_entry(head, change) -> str:
    manifest = head.manifest()
    change(manifest["files"][-1])
    return json.dumps(manifest)


CORRUPT = {
    "not JSON": lambda head: '{"files": [{"key": "slurm/slurm.conf"',
    "an entry without a path": lambda head: manifest_with_bad_last_entry(head, lambda e: e.pop("path")),
    "a mode that is not octal": lambda head: manifest_with_bad_last_entry(head, lambda e: e.update(mode="rw-r--r--")),
    "a relative path": lambda head: manifest_with_bad_last_entry(head, lambda e: e.update(path="etc/x.conf")),
}


@pytest.mark.parametrize("corruption", sorted(CORRUPT))
def test_corrupt_manifest_fails_and_installs_nothing(head, corruption):
    """Before: an unparseable manifest was "no manifest yet" (exit 0); a bad entry late in the
    manifest crashed the pass after the earlier files were installed (or wrote a file outside
    the head's tree)."""
    head.put("manifest.json", CORRUPT[corruption](head))
    done = head.run("--bootstrap")
    # AICLUSTER_ROOT + "etc/x.conf": where a relative path would land, beside the head's tree.
    assert installed_conf(head) is None and not head.tmp.joinpath("rootetc").exists(), done.stderr
    assert done.returncode == 1 and "corrupt manifest" in done.stderr, done.stderr


def test_manifest_gone_after_a_set_was_applied_is_a_failure(head):
    """Only a first boot may find nothing published. Before: "no manifest yet", exit 0."""
    head.sync("--bootstrap")
    head.delete("manifest.json")
    done = head.run()
    assert done.returncode == 1 and "gone" in done.stderr, done.stderr
    assert installed_conf(head) == head.files["slurm/slurm.conf"]


# --- a configuration slurmctld rejects is never installed ---


def test_rejected_configuration_is_not_installed(head):
    """Before: nothing tested the files; the bad slurm.conf was installed and slurmctld restarted on it."""
    head.sync("--bootstrap")
    head.env[fake_slurmctld.REJECT] = "BadKey"
    head.put("slurm/slurm.conf", edited_conf(head, "BadKey=1\n"))
    for _ in range(2):                                          # every pass tries again
        done = head.run()
        assert done.returncode == 1, done.stderr
        assert "Parsing error at unrecognized key: BadKey" in done.stderr      # slurmctld's own line
        assert installed_conf(head) == head.files["slurm/slurm.conf"]
        assert RESTARTS not in head.call_lines()


# --- a pass that fails partway is finished by the next one ---


def test_failing_run_step_is_retried_by_the_next_pass(head):
    """The mount script fails (the filesystem is not there yet), then works. Before: the next
    pass compared with the files on disk, found them installed, said "up to date", and never ran
    the script or restarted slurmctld."""
    head.sync("--bootstrap")
    ready, ran = head.tmp / "filesystem-ready", head.tmp / "mount-ran"
    head.put("bin/aicluster-mount-storage",
             f'#!/bin/sh\n[ -e {ready} ] || {{ echo "no filesystem yet" >&2; exit 1; }}\necho ran >> {ran}\n')
    head.put("slurm/slurm.conf", edited_conf(head))
    failed = head.run()
    assert failed.returncode == 1 and RESTARTS not in head.call_lines(), failed.stderr   # steps come first
    pending = head.state("applied.json").read_text() if head.state("applied.json").exists() else ""
    ready.touch()
    lines = head.sync()
    assert ran.exists() and ran.read_text() == "ran\n"
    assert "retried by the next pass" in failed.stderr
    assert json.loads(pending)["pending"] == ["run:/usr/local/sbin/aicluster-mount-storage", "restart"]
    assert lines.count(RESTARTS) == 1 and lines.count("scontrol reconfigure") == 1
    assert json.loads(head.state("applied.json").read_text())["pending"] == []
    head.sync()
    assert ran.read_text() == "ran\n"                           # done once, not again


def breaking_scontrol(head) -> None:
    """slurmctld dies on a slurm.conf with the marker line: systemd's restart returns (Type=simple),
    `scontrol reconfigure` finds no controller."""
    head.stub("scontrol", f'[ "$1" = reconfigure ] && grep -q "^# breaks slurmctld" {head.installed(CONF)} && exit 1\n'
                          "exit 0")
    head.env["AICLUSTER_SYNC_RESTART_WAIT_S"] = "0"


def test_restart_failure_restores_the_last_good_set_and_alerts(head):
    """Before: the new set stayed installed with slurmctld down, no copy of the old one, and the
    next pass said "up to date"."""
    head.sync("--bootstrap")
    breaking_scontrol(head)
    head.put("slurm/slurm.conf", edited_conf(head, "# breaks slurmctld\n"))
    done = head.run()
    assert installed_conf(head) == head.files["slurm/slurm.conf"], done.stderr    # rolled back
    assert done.returncode == 2
    assert "aicluster-sync: ALERT slurmctld failed on the new configuration" in done.stderr
    assert head.call_lines().count(RESTARTS) == 2                           # on the new set, then the old
    alert = json.loads(head.state("alert.json").read_text())
    assert "restored the last good set" in alert["reason"] and alert["failed_set"]
    # The failed set is not retried every minute (each try takes the controller down).
    again = head.run()
    assert again.returncode == 2 and "ALERT still standing" in again.stderr
    assert head.call_lines().count(RESTARTS) == 2 and installed_conf(head) == head.files["slurm/slurm.conf"]
    # A new publish is tried, and clears the alert once slurmctld runs on it.
    head.put("slurm/slurm.conf", edited_conf(head))
    head.sync()
    assert installed_conf(head) == edited_conf(head) and not head.state("alert.json").exists()


def test_restart_failure_without_a_last_good_set_is_retried(head):
    """Nothing to roll back to (the first set ever, published after boot): the alert is raised and
    the restart stays pending. Before: the next pass said "up to date" and slurmctld stayed down."""
    breaking_scontrol(head)
    head.put("slurm/slurm.conf", edited_conf(head, "# breaks slurmctld\n"))
    done = head.run()
    alerted = head.state("alert.json").exists()
    head.stub("scontrol", "exit 0")                             # whatever was wrong (munge, a disk) healed
    lines = head.sync()
    assert lines.count(RESTARTS) == 2, done.stderr              # the pending restart, retried
    assert done.returncode == 2 and "no last good set to restore" in done.stderr and alerted
    assert not head.state("alert.json").exists()


# --- Cloud Storage: only a 404 of the manifest on a first boot is "nothing published" ---


def test_cloud_storage_404_is_nothing_published_only_before_a_first_set(tmp_path):
    """Over the fake Cloud Storage (aicluster.node.gcp.storage_read, installed with the program as
    on a GCP head). Before: a missing manifest was "no manifest yet" also after a set was applied."""
    programs = tmp_path / "opt" / "bin"
    node_programs.install(programs, ["aicluster-sync"])
    root = tmp_path / "root"
    (root / "etc" / "aicluster").mkdir(parents=True)
    (root / "etc" / "aicluster" / "sync.json").write_text(
        json.dumps({"storage": "gcs", "bucket": "cfg", "prefix": "head/", "region": "us-central1"}))
    fake = FakeGcp().start()
    try:
        env = {**os.environ, **fake.env(), "AICLUSTER_ROOT": str(root)}
        env.pop("JOURNAL_STREAM", None)

        def sync():
            return subprocess.run([str(programs / "aicluster-sync"), "--bootstrap"], env=env,
                                  capture_output=True, text=True, timeout=120)

        first = sync()
        assert first.returncode == 0 and "nothing published" in first.stderr, first.stderr
        fake.objects = {("cfg", "head/etc/motd"): b"hello\n", ("cfg", "head/manifest.json"): json.dumps(
            {"files": [{"key": "etc/motd", "path": "/etc/motd", "mode": "0644"}]}).encode()}
        assert sync().returncode == 0 and (root / "etc" / "motd").read_text() == "hello\n"
        del fake.objects[("cfg", "head/manifest.json")]
        gone = sync()
        assert gone.returncode == 1 and "gone" in gone.stderr, gone.stderr
    finally:
        fake.stop()


# --- S3 without s3:ListBucket answers 403 for a missing key ---


class DeniedGets:
    """S3 as the head's role sees it: ListBucket only under its prefix (a condition a GetObject
    does not carry), so a GetObject of a missing key is refused with 403 AccessDenied
    (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html)."""

    def __init__(self, keys: dict):
        self.keys = keys

    def get_object(self, Bucket, Key):  # noqa: N803 - boto3's names; every key refused, as under a Deny
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, "GetObject")

    def list_objects_v2(self, Bucket, Prefix, MaxKeys):  # noqa: N803
        return {"Contents": [{"Key": k} for k in self.keys if k.startswith(Prefix)]}


def sync_program(root):
    """The program as a module, its local paths under root (AICLUSTER_ROOT is read at import): a
    fresh aicluster.node.sync, the package's own left as it was."""
    os.environ["AICLUSTER_ROOT"] = str(root)
    saved = sys.modules.pop("aicluster.node.sync", None)
    try:
        return importlib.import_module("aicluster.node.sync")
    finally:
        del os.environ["AICLUSTER_ROOT"]
        if saved is not None:
            sys.modules["aicluster.node.sync"] = saved
        else:
            sys.modules.pop("aicluster.node.sync", None)


def test_s3_403_for_a_missing_manifest_is_told_from_a_denied_one(tmp_path):
    """A 403 is "nothing published" only when a listing under the manifest's own name (which the
    head's prefix-conditioned ListBucket allows) shows no manifest; otherwise it is a failure.
    Before: any error was "no manifest yet"."""
    program = sync_program(tmp_path)
    settings = {"bucket": "cfg", "prefix": "head/"}
    assert program.fetch_manifest(DeniedGets({}), settings, {}) is None
    with pytest.raises(program.SyncError, match="AccessDenied"):
        program.fetch_manifest(DeniedGets({"head/manifest.json": b"{}"}), settings, {})
