"""aicluster-sync tests the Slurm files it pulls with a real slurmctld (Debian's 22.05) before
installing them (issue 13, finding 3): a throwaway `slurmctld -D` on a copy, with its own port,
state, pid and log, beside the running controller. A configuration it rejects is never
installed, and the running slurmctld keeps running on the old one.

The head node here is a private munged + slurmctld (tests/support/slurmctld.py) whose Slurm
directory is where the published manifest installs; objects come from moto's S3. The real
scontrol reaches that slurmctld; systemctl is a recorder (the controller is not a systemd unit
here). The Slurm and munge programs are required: a missing one fails the test."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from aicluster.design import design_cluster
from aicluster.slurm_config import SLURM_CONFIG_FILES
from aicluster.spec import parse_spec
from tests.support import stack_spec
from tests.support.slurmctld import Controller, tool
from tests.support.sync_head import BUCKET, SCRIPT, s3_client

PREFIX = "head/"
RESTARTS = "systemctl restart slurmctld"


class Head:
    """The controller, the bucket it syncs from, and one sync pass."""

    def __init__(self, ctl: Controller, root, endpoint: str):
        self.ctl, self.root, self.s3 = ctl, root, s3_client(endpoint)
        self.calls = root / "systemctl.calls"
        systemctl = root / "systemctl"
        systemctl.write_text(f'#!/bin/sh\necho "systemctl $*" >> {self.calls}\nexit 0\n')
        systemctl.chmod(0o755)
        (root / "etc" / "aicluster").mkdir(parents=True)
        (root / "etc" / "aicluster" / "sync.json").write_text(
            json.dumps({"bucket": BUCKET, "prefix": PREFIX, "region": "us-east-1"}))
        self.env = {**ctl.env, "AICLUSTER_ROOT": str(root), "AICLUSTER_SLURMCTLD": tool("slurmctld"),
                    "AICLUSTER_SCONTROL": tool("scontrol"), "AICLUSTER_SYSTEMCTL": str(systemctl),
                    "AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing",
                    "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
        self.env.pop("JOURNAL_STREAM", None)
        self.tmp = root / "tmp"                # where the throwaway's copy goes (tempfile honours TMPDIR)
        self.tmp.mkdir()
        self.env["TMPDIR"] = str(self.tmp)

    def where(self, name: str) -> str:
        """The file's path as the manifest names it (under AICLUSTER_ROOT)."""
        return "/" + str((self.ctl.conf.parent / name).relative_to(self.root))

    def current(self, name: str) -> str:
        return (self.ctl.conf.parent / name).read_text()

    def publish(self, slurm_conf: str) -> None:
        """The controller's own Slurm files, with this slurm.conf."""
        entries = []
        for name in SLURM_CONFIG_FILES:
            body = slurm_conf if name == "slurm.conf" else self.current(name)
            self.s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}slurm/{name}", Body=body.encode())
            entries.append({"key": f"slurm/{name}", "path": self.where(name), "mode": "0644", "reconfigure": True})
        self.s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}manifest.json", Body=json.dumps({"files": entries}).encode())

    def sync(self) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(SCRIPT)], env=self.env, capture_output=True, text=True,
                              timeout=300)

    def restarts(self) -> int:
        return self.calls.read_text().splitlines().count(RESTARTS) if self.calls.exists() else 0


@pytest.fixture
def head(moto_endpoint, tmp_path):
    import urllib.request

    urllib.request.urlopen(urllib.request.Request(f"{moto_endpoint}/moto-api/reset", method="POST")).close()
    s3_client(moto_endpoint).create_bucket(Bucket=BUCKET)
    root = tmp_path / "head"
    ctl = Controller("sync", design_cluster(parse_spec(stack_spec("aws-p4d-small"))), root / "ctl")
    try:
        ctl.start()
        yield Head(ctl, root, moto_endpoint)
    finally:
        ctl.stop()


def test_a_good_set_passes_a_test_slurmctld_beside_the_running_one(head):
    """The throwaway controller shares nothing with the running one (port, state, pid, log): the
    change is tested, installed, and reaches the running slurmctld."""
    old = head.current("slurm.conf")
    suspend = int(re.search(r"^SuspendTime=(\d+)", old, re.M).group(1))
    head.publish(old.replace(f"SuspendTime={suspend}", f"SuspendTime={suspend + 60}"))
    done = head.sync()
    assert done.returncode == 0, done.stderr + head.ctl.diagnostics()
    assert "passed a test slurmctld" in done.stderr
    assert head.restarts() == 1
    assert head.ctl.config()["SuspendTime"] == f"{suspend + 60} sec"       # `scontrol reconfigure` reached it
    assert "is UP" in head.ctl.run("scontrol", "ping")


BAD = {
    # (what is changed in slurm.conf, what slurmctld 22.05 says about it)
    "a negative count": (lambda conf: conf + "MaxJobCount=-3\n", "MaxJobCount value (-3) is less than zero"),
    "an unknown plugin": (lambda conf: re.sub(r"^SelectType=.*$", "SelectType=select/nope", conf, flags=re.M),
                          "Can't find plugin for select/nope"),
    "an unknown key": (lambda conf: conf + "SuspendTimeout2=60\n", "unrecognized key: SuspendTimeout2"),
}


@pytest.mark.parametrize("bad", sorted(BAD))
def test_rejected_configuration_is_not_installed_and_slurmctld_keeps_running(head, bad):
    """Before: the files were installed unseen, and slurmctld restarted on them."""
    old = head.current("slurm.conf")
    head.publish(old)
    first = head.sync()                                  # the running set, recorded as applied
    assert first.returncode == 0, first.stderr + head.ctl.diagnostics()
    recorded = head.root / "var/lib/aicluster/sync/applied.json"
    applied = recorded.read_text() if recorded.exists() else None
    change, said = BAD[bad]
    head.publish(change(old))
    for _ in range(2):                                   # every pass tries again, none installs
        done = head.sync()
        assert head.current("slurm.conf") == old, done.stderr
        assert done.returncode == 1 and said in done.stderr, done.stderr
        assert "rejected the new configuration" in done.stderr
    assert head.restarts() == 1                          # the first pass's only
    assert recorded.read_text() == applied
    assert "is UP" in head.ctl.run("scontrol", "ping")
    assert head.ctl.config()["SelectType"] == "select/cons_tres"
    assert not os.listdir(head.tmp)                      # no copy left behind
