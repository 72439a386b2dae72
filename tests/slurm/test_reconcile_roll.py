"""The roll (issue 26, item 4) against a real slurmctld and slurmd (Debian's Slurm 22.05): a job runs
on a node of the pool's old version while `pulumi up` gives the pool a new one; the reconcile loop
replaces the idle old node at once, drains the busy one (the budget has room) without touching its
job, and replaces it only once the job has finished. The job completes where it ran (COMPLETED, never
requeued or cancelled), both always-on nodes come back on the new version, and no instance leaks.

As in test_reconcile.py, slurmctld runs the real power core as its ResumeProgram and SuspendProgram,
the test runs the real `aicluster-reconcile`, all on one FileCloud whose launches carry the pool's
version from cluster.json; a real slurmd stands in for one node's machine at a time.
"""
from __future__ import annotations

import json
import re
import subprocess

import pytest

from aicluster.design.cluster import design_cluster
from aicluster.spec.cluster import parse_spec
from tests.support.reconcile_controller import (ReconcileController, consistent, instances_of, job_state, launched,
                                                settle, submit, up)
from tests.support.slurmctld import COMMAND_TIMEOUT_S, JOB_START_TIMEOUT_S, RESUME_TIMEOUT_S, fields, wait_for

# trn-[1-2] always on (min_nodes), trn-3 launched for jobs; two of three may be out at once.
SPEC = {"name": "roll", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
        "pools": [{"name": "trn", "instance_type": "trn1n.32xlarge", "min_nodes": 2, "max_nodes": 3,
                   "max_unavailable": 2}]}
GRACE_S = 60
SETTLE_S = 60


@pytest.fixture
def ctl(tmp_path):
    spec = parse_spec(SPEC)
    design = design_cluster(spec)
    controller = ReconcileController("roll", design, tmp_path / "slurm")
    controller.cloud_file, controller.cluster_json = tmp_path / "cloud.json", tmp_path / "cluster.json"
    controller.state_dir = tmp_path / "state"
    controller.config = {
        "cluster": design.name, "static_nodes": list(design.slurm.suspend_exc_nodes), "resume_timeout_s": GRACE_S,
        "pools": {"trn": {"instance_type": "trn1n.32xlarge", "version": "1",
                          "max_unavailable": spec.pools[0].unavailable_budget()}},
        "log_file": str(controller.root / "power.log"),
        "reconcile": {"log_file": str(controller.root / "reconcile.log"), "replace_fraction": 1.0,
                      "textfile_dir": str(tmp_path / "textfile")}}
    controller.cluster_json.write_text(json.dumps(controller.config))
    try:
        controller.start()
        yield controller
    finally:
        controller.stop()


def set_version(ctl, version: str) -> None:
    """What `pulumi up` and the head's aicluster-sync do: cluster.json names the new version."""
    ctl.config["pools"]["trn"]["version"] = version
    ctl.cluster_json.write_text(json.dumps(ctl.config))


def version_of(ctl, iid: str) -> str | None:
    return ctl.cloud.live()[iid]["version"]


def reason(ctl, node: str) -> str:
    found = re.search(r"\bReason=(.*?) \[", ctl.run("scontrol", "-o", "show", "node", node))
    return found.group(1) if found else ""


def status(ctl) -> str:
    done = subprocess.run([str(ctl.programs["aicluster-reconcile"]), "--status"], env=ctl.env, capture_output=True,
                          text=True, timeout=COMMAND_TIMEOUT_S * 4)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_roll_replaces_idle_nodes_and_lets_the_running_job_finish(ctl, tmp_path):
    assert ctl.config["pools"]["trn"]["max_unavailable"] == 2
    ctl.run("scontrol", "update", "nodename=trn-[1-2]", "state=power_up")     # aicluster-sync at boot
    old_trn1, old_trn2 = launched(ctl, "trn-1"), launched(ctl, "trn-2")
    assert version_of(ctl, old_trn1) == version_of(ctl, old_trn2) == "1"
    # trn-2 registers, then its slurmd makes way for trn-1's (one slurmd on this machine): it stays IDLE.
    ctl.start_slurmd("trn-2")
    wait_for("trn-2 to register", lambda: up(ctl, "trn-2"), RESUME_TIMEOUT_S, ctl.diagnostics)
    ctl.stop_slurmd()
    ctl.start_slurmd("trn-1")
    wait_for("trn-1 to register", lambda: up(ctl, "trn-1"), RESUME_TIMEOUT_S, ctl.diagnostics)
    done = tmp_path / "job-may-end"
    job = submit(ctl, "trn-1", f"while [ ! -e {done} ]; do sleep 1; done")
    wait_for("the job to run on trn-1", lambda: job_state(ctl, job) == "RUNNING", JOB_START_TIMEOUT_S,
             ctl.diagnostics)

    # trn-2 is idle, neither DOWN nor drained: what follows is the roll's, not a failure's replacement.
    assert not {"DOWN", "DRAIN"} & set(ctl.node("trn-2")["State"].split("+")), ctl.node("trn-2")
    # `pulumi up` made launch template version 2.
    set_version(ctl, "2")
    assert ctl.reconcile() == 0, ctl.diagnostics()
    # The idle old node goes at once; the busy one is drained (the budget of 2 has room), its job untouched.
    assert {"POWER_DOWN", "POWERING_DOWN", "POWERED_DOWN"} & set(ctl.node("trn-2")["State"].split("+")), \
        ctl.diagnostics()
    assert reason(ctl, "trn-1") == "aicluster-roll: version 1 -> 2", ctl.diagnostics()
    assert "DRAIN" in ctl.node("trn-1")["State"] and job_state(ctl, job) == "RUNNING"
    assert old_trn1 in ctl.cloud.live()
    wait_for("trn-2's old instance to end", lambda: old_trn2 not in ctl.cloud.live(), SETTLE_S, ctl.diagnostics)
    said = status(ctl)
    assert "pool trn: version 2, rolling; budget 2 of 2 out of service" in said, said
    assert "old draining: 1 trn-1 (versions 1)" in said, said
    metrics = (tmp_path / "textfile" / "aicluster-roll.prom").read_text()
    assert 'aicluster_roll_nodes{pool="trn",version="old"} 1' in metrics
    settle(ctl)

    # The job ends on its node, of its own accord.
    done.touch()
    wait_for("the job to complete", lambda: job_state(ctl, job) == "COMPLETED", JOB_START_TIMEOUT_S,
             ctl.diagnostics)
    wait_for("trn-1 to be idle and drained", lambda: ctl.node("trn-1")["State"] == "IDLE+CLOUD+DRAIN",
             RESUME_TIMEOUT_S, ctl.diagnostics)
    assert ctl.reconcile() == 0, ctl.diagnostics()
    # trn-1 goes now; trn-2, always on, comes back on version 2.
    new_trn2 = launched(ctl, "trn-2")
    assert version_of(ctl, new_trn2) == "2"
    wait_for("trn-1's old instance to end", lambda: old_trn1 not in ctl.cloud.live(), SETTLE_S, ctl.diagnostics)
    ctl.stop_slurmd()                   # its machine is gone
    settle(ctl)
    assert ctl.reconcile() == 0, ctl.diagnostics()
    new_trn1 = launched(ctl, "trn-1")
    assert version_of(ctl, new_trn1) == "2"
    ctl.start_slurmd("trn-1")           # the new machine registers, not drained
    wait_for("the new trn-1 to register", lambda: up(ctl, "trn-1"), RESUME_TIMEOUT_S, ctl.diagnostics)

    job_fields = fields(ctl.run("scontrol", "-o", "show", "job", job))
    assert job_fields["JobState"] == "COMPLETED" and job_fields["Restarts"] == "0", job_fields
    assert job_fields["NodeList"] == "trn-1" and job_fields["ExitCode"] == "0:0", job_fields
    # No instance leaks, no node is lost: one instance per always-on node, on version 2.
    assert {n: instances_of(ctl, n) for n in ("trn-1", "trn-2", "trn-3")} == {
        "trn-1": [new_trn1], "trn-2": [new_trn2], "trn-3": []}
    assert {item["version"] for item in ctl.cloud.live().values()} == {"2"}
    assert consistent(ctl) == [], ctl.diagnostics()
    states = ctl.states()
    assert not {"DOWN", "DRAIN"} & (states["trn-1"] | states["trn-2"]), states
    log = (ctl.root / "reconcile.log").read_text()
    assert "rolling pool trn to version 2" in log and "draining trn-1 for the roll" in log, log
    assert "powering down trn-2 to replace it: aicluster-roll: version 1 -> 2" in log, log
