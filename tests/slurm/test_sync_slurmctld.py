"""aicluster-sync tests the Slurm files it pulls with a real slurmctld (Debian's 22.05) before
installing them (issue 13, finding 3): a throwaway `slurmctld -D` on a copy, with its own port,
state, pid and log, beside the running controller. A configuration it rejects is never
installed, and the running slurmctld keeps running on the old one.

The head node here is a private munged + slurmctld (tests/support/slurmctld.py) whose Slurm
directory is where the published manifest installs; objects come from moto's S3. The real
scontrol reaches that slurmctld; systemctl is a recorder (the controller is not a systemd unit
here). The Slurm and munge programs are required: a missing one fails the test."""
from __future__ import annotations

import os
import re

import pytest

from aicluster.design.cluster import design_cluster
from aicluster.spec.cluster import parse_spec
from tests.support import stack_spec
from tests.support.slurmctld import Controller
from tests.support.sync_head import BUCKET, ControllerHead, s3_client

@pytest.fixture
def head(moto_endpoint, tmp_path):
    import urllib.request

    urllib.request.urlopen(urllib.request.Request(f"{moto_endpoint}/moto-api/reset", method="POST")).close()
    s3_client(moto_endpoint).create_bucket(Bucket=BUCKET)
    root = tmp_path / "head"
    ctl = Controller("sync", design_cluster(parse_spec(stack_spec("aws-p4d-small"))), root / "ctl")
    try:
        ctl.start()
        yield ControllerHead(ctl, root, moto_endpoint)
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
