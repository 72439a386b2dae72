"""aicluster-sync, run as the head node's timer runs it, against moto's S3 with the files the
plan publishes: installs them, links the power programs, reconfigures only on change, tests the
Slurm files before installing them. Faults (storage, manifest, steps, restarts) are in
test_sync_faults.py; the configuration test against a real slurmctld in tests/slurm/test_sync_slurmctld.py."""
from __future__ import annotations

import json
import os

import pytest

from tests.support.sync_head import BUCKET, aws_head


@pytest.fixture
def head(moto_endpoint, tmp_path):
    return aws_head(moto_endpoint, tmp_path)


def test_bootstrap_installs_every_published_file(head):
    head.sync("--bootstrap")
    conf = head.installed("/etc/slurm/slurm.conf")
    assert conf.read_text() == head.files["slurm/slurm.conf"]
    assert oct(conf.stat().st_mode & 0o777) == "0o644"
    power = head.installed("/opt/aicluster/bin/aicluster-power.py")
    assert power.read_text() == head.files["bin/aicluster-power.py"] and os.access(power, os.X_OK)
    for link in ("aicluster-resume", "aicluster-suspend", "aicluster-resume-fail"):
        assert os.readlink(head.installed(f"/opt/aicluster/bin/{link}")) == "aicluster-power.py"
    assert json.loads(head.installed("/etc/aicluster/cluster.json").read_text())["cluster"] == "p5-train"
    # Bootstrap never reconfigures: slurmctld is not running yet.
    assert not any(c.startswith("scontrol") for c in head.call_lines())


def test_changes_reconfigure_once_and_only_on_change(head):
    head.sync("--bootstrap")
    assert not any(c.startswith("scontrol") for c in head.sync())          # nothing changed
    changed = head.files["slurm/slurm.conf"].replace("SuspendTime=600", "SuspendTime=2700")
    assert changed != head.files["slurm/slurm.conf"]
    head.put("slurm/slurm.conf", changed)
    lines = head.sync()  # every call so far, across the runs of this test
    assert lines.count("scontrol reconfigure") == 1
    # Slurm 22.05 dies on a reconfigure that changes nodes: restart first, then push to slurmd.
    assert lines.index("systemctl restart slurmctld") < lines.index("scontrol reconfigure")
    assert head.installed("/etc/slurm/slurm.conf").read_text() == changed


def test_slurm_files_are_tested_before_they_are_installed(head):
    """A changed Slurm file starts a test slurmctld on a copy of the directory as it will be,
    with its own port, state, pid and log, and no accounting or power programs (failed before:
    nothing was tested)."""
    head.sync("--bootstrap")
    tested = head.tmp / "slurmctld-tests"
    assert len(tested.read_text().splitlines()) == 1
    head.sync()                                                          # nothing changed: no test
    assert len(tested.read_text().splitlines()) == 1
    head.put("slurm/slurm.conf", head.files["slurm/slurm.conf"].replace("SuspendTime=600", "SuspendTime=2700"))
    head.sync()
    assert len(tested.read_text().splitlines()) == 2


def test_applied_state_is_recorded_apart_from_the_files(head):
    head.sync("--bootstrap")
    applied = json.loads(head.state("applied.json").read_text())
    assert applied["pending"] == []
    conf = applied["files"]["/etc/slurm/slurm.conf"]
    assert conf["mode"] == "0644" and len(conf["sha256"]) == 64
    good = json.loads(head.state("last-good/manifest.json").read_text())
    assert {f["path"] for f in good["files"]} == set(applied["files"])
    for entry in good["files"]:
        assert head.state(f"last-good/files/{entry['sha256']}").exists()


def test_static_nodes_are_powered_up(head):
    cluster = json.loads(head.files["aicluster/cluster.json"])
    cluster["static_nodes"] = ["gpu-[1-2]"]
    head.put("aicluster/cluster.json", json.dumps(cluster))
    lines = head.sync()
    assert "scontrol -o show node gpu-[1-2]" in lines
    assert "scontrol update nodename=gpu-[1-2] state=power_up" in lines


def test_head_up_before_the_configuration_waits_then_starts_slurmctld(head):
    """The head node is created while the filesystems still are, so at boot nothing may be
    published yet: bootstrap succeeds with nothing to do. Once `pulumi up` publishes, the timer
    installs the files, runs the mount script, and starts slurmctld although it was not running."""
    published = {o["Key"]: head.s3.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read()
                 for o in head.s3.list_objects_v2(Bucket=BUCKET)["Contents"]}
    for key in published:
        head.s3.delete_object(Bucket=BUCKET, Key=key)
    assert head.sync("--bootstrap") == []
    assert not head.installed("/etc/slurm/slurm.conf").exists()
    assert not [c for c in head.sync() if "restart" in c or c.startswith("scontrol")]   # the timer: still nothing
    head.stub("systemctl", '[ "$1" = "is-active" ] && exit 3\nexit 0')   # slurmctld could not start without a config
    for key, body in published.items():
        head.s3.put_object(Bucket=BUCKET, Key=key, Body=body)
    lines = head.sync()
    assert head.installed("/etc/slurm/slurm.conf").read_text() == head.files["slurm/slurm.conf"]
    assert head.installed("/usr/local/sbin/aicluster-mount-storage").read_text() == head.files["bin/aicluster-mount-storage"]
    assert lines.index("systemctl restart slurmctld") < lines.index("scontrol reconfigure")
