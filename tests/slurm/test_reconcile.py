"""The reconcile loop (aicluster-reconcile) against a real slurmctld (Debian's Slurm 22.05).

slurmctld runs the real power core (aicluster.node.slurm.main) as its ResumeProgram, SuspendProgram and
ResumeFailProgram, and the test runs the real `aicluster-reconcile` through the same program, all
on one FileCloud (tests/support/reconcile_fakes.py): a fleet in a JSON file that every process
sees. A real slurmd stands in for the machine of one node at a time.

After a fault sequence (an untagged instance a launch left, a suspend the cloud refused, an
always-on node whose machine died, a health-check drain on a node running a job, a node whose
set-up failed under a waiting job) and a bounded number of passes, every live instance belongs to
a powered-up node, every powered-down node has none, no instance of the node running a job was
touched while the job ran, and both always-on nodes are back (issue 13, findings 1, 2, 8, 10, 11).
Before the loop existed, the first pass already failed (no aicluster reconcile module).
"""
from __future__ import annotations

import json
import time

import pytest

from aicluster.design.cluster import design_cluster
from aicluster.spec.cluster import parse_spec
from tests.support.reconcile_controller import (SETTLE_S, ReconcileController, consistent, job_state, launched,
                                                pending, settle, submit, up)
from tests.support.reconcile_fakes import core
from tests.support.slurmctld import JOB_START_TIMEOUT_S, RESUME_TIMEOUT_S, wait_for

# One Trainium pool (no GRES: a slurmd on this machine can be its node): trn-[1-2] always on
# (min_nodes, SuspendExcNodes), trn-[3-4] launched on demand.
SPEC = {"name": "heal", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
        "pools": [{"name": "trn", "instance_type": "trn1n.32xlarge", "min_nodes": 2, "max_nodes": 4}]}
GRACE_S = 60


@pytest.fixture
def ctl(tmp_path):
    design = design_cluster(parse_spec(SPEC))
    controller = ReconcileController("reconcile", design, tmp_path / "slurm")
    controller.cloud_file, controller.cluster_json = tmp_path / "cloud.json", tmp_path / "cluster.json"
    controller.state_dir = tmp_path / "state"
    controller.cluster_json.write_text(json.dumps({
        "cluster": design.name, "pools": {"trn": {"instance_type": "trn1n.32xlarge"}},
        "static_nodes": list(design.slurm.suspend_exc_nodes), "resume_timeout_s": GRACE_S,
        "log_file": str(controller.root / "power.log"),
        # Four nodes: room for two replacements at once, so the scene needs few passes.
        "reconcile": {"log_file": str(controller.root / "reconcile.log"), "replace_fraction": 0.5,
                      "pool_replacing_fraction": 0.5}}))
    try:
        controller.start()
        yield controller
    finally:
        controller.stop()


def test_faults_heal_within_a_few_passes_and_no_job_loses_its_node(ctl):
    cloud = ctl.cloud
    # What aicluster-sync does for the always-on nodes at boot.
    ctl.run("scontrol", "update", "nodename=trn-[1-2]", "state=power_up")
    first_trn2 = launched(ctl, "trn-2")
    first_trn1 = launched(ctl, "trn-1")

    # Fault: trn-2 came up, then its machine died; slurmctld set it DOWN (after SlurmdTimeout).
    ctl.start_slurmd("trn-2")
    wait_for("trn-2 to register", lambda: up(ctl, "trn-2"), RESUME_TIMEOUT_S, ctl.diagnostics)
    ctl.stop_slurmd()
    cloud.kill(first_trn2)
    ctl.run("scontrol", "update", "nodename=trn-2", "state=down", "reason=Not responding")

    # Fault: the health check drains trn-1 while a job runs on it.
    ctl.start_slurmd("trn-1")
    wait_for("trn-1 to register", lambda: up(ctl, "trn-1"), RESUME_TIMEOUT_S, ctl.diagnostics)
    long_job = submit(ctl, "trn-1", "sleep 600")
    wait_for("the job to run on trn-1", lambda: job_state(ctl, long_job) == "RUNNING", JOB_START_TIMEOUT_S,
             ctl.diagnostics)
    ctl.run("scontrol", "update", "nodename=trn-1", "state=drain",
            f"reason={core.HEALTH_REASON}: gpu-count: 7 of 8 GPUs")

    # Fault: slurmctld suspends trn-3 and the cloud refuses the termination.
    ctl.run("scontrol", "update", "nodename=trn-3", "state=power_up")
    stuck = launched(ctl, "trn-3")
    cloud.refuse_deletes(True)
    ctl.run("scontrol", "update", "nodename=trn-3", "state=power_down_force")
    wait_for("the refused suspend in pending-suspend.json", lambda: "trn-3" in pending(ctl), SETTLE_S,
             ctl.diagnostics)
    settle(ctl)
    cloud.refuse_deletes(False)

    # Fault: a job's node (trn-4) fails its set-up: its instance reports why, slurmd never starts.
    waiting_job = submit(ctl, "trn-4", "true")
    bad = launched(ctl, "trn-4")
    cloud.set(bad, bootstrap_error="mount /fsx: timed out")

    # Fault: a launch whose node-name tag never arrived left an untagged instance an hour ago.
    orphan = cloud.add(None, pool="trn", launched_at=time.time() - 3600)
    assert consistent(ctl), "the faults leave instances no powered-up node owns"

    # Pass 1: the orphan and the refused suspend go; trn-4 is set DOWN (its job requeued) and
    # powered down; dead trn-2 is powered down; trn-1 keeps its instance: its job runs.
    assert ctl.reconcile() == 0, ctl.diagnostics()
    live = cloud.live()
    assert orphan not in live and stuck not in live
    assert "trn-3" not in pending(ctl)
    assert ctl.node("trn-4")["Reason"].startswith(core.BOOTSTRAP_REASON), ctl.node("trn-4")
    assert job_state(ctl, waiting_job) != "RUNNING"
    ctl.run("scancel", waiting_job)
    assert first_trn1 in live and job_state(ctl, long_job) == "RUNNING"
    wait_for("the failed node's instance to be terminated", lambda: bad not in cloud.live(), SETTLE_S,
             ctl.diagnostics)
    settle(ctl)

    # Pass 2: the always-on trn-2, powered down, is powered up again: a new instance.
    assert ctl.reconcile() == 0, ctl.diagnostics()
    second_trn2 = launched(ctl, "trn-2")
    assert second_trn2 != first_trn2
    assert first_trn1 in cloud.live() and job_state(ctl, long_job) == "RUNNING"
    assert "DRAIN" in ctl.node("trn-1")["State"]

    # The job ends: only now is trn-1 replaced.
    ctl.run("scancel", long_job)
    wait_for("trn-1 to be idle and drained", lambda: ctl.node("trn-1")["State"] == "IDLE+CLOUD+DRAIN",
             RESUME_TIMEOUT_S, ctl.diagnostics)
    assert ctl.reconcile() == 0, ctl.diagnostics()
    wait_for("trn-1's instance to be terminated", lambda: first_trn1 not in cloud.live(), SETTLE_S,
             ctl.diagnostics)
    ctl.stop_slurmd()                   # its machine is gone
    settle(ctl)
    assert ctl.reconcile() == 0, ctl.diagnostics()
    second_trn1 = launched(ctl, "trn-1")
    assert second_trn1 != first_trn1
    ctl.start_slurmd("trn-1")           # the new machine registers, healthy and not drained
    wait_for("the new trn-1 to register", lambda: up(ctl, "trn-1"), RESUME_TIMEOUT_S, ctl.diagnostics)

    # A pass over a healed cluster changes nothing.
    before = cloud.live()
    assert ctl.reconcile() == 0, ctl.diagnostics()
    assert cloud.live() == before
    assert consistent(ctl) == [], ctl.diagnostics()
    states = ctl.states()
    assert "POWERED_DOWN" not in states["trn-1"] and "POWERED_DOWN" not in states["trn-2"]
    assert not {"DOWN", "DRAIN"} & (states["trn-1"] | states["trn-2"]), states
    log = (ctl.root / "reconcile.log").read_text()
    for said in ("terminating", "retrying the suspend of trn-3", "powering down trn-2", "powering up always-on node trn-2",
                 "powering down trn-1", "failed its set-up"):
        assert said in log, log
