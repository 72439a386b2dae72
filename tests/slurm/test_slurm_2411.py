"""The same rendered configuration on a second Slurm release: 24.11 from Debian trixie (issue 13),
beside the machine's 22.05 (test_real_slurmctld.py, test_sync_slurmctld.py).

.ci/install-slurm-release builds the release in a chroot; tests/support/slurm_release.py runs its
munged, slurmctld and client commands there, with this machine's /tmp bound in at the same path,
so tests/support/slurmctld.py's Controller runs on it unchanged (its programs are the release's
wrappers, first on PATH). Every test checks that the controller it talks to is 24.11.

1. For every Slurm stack in stacks/: slurmctld 24.11 takes the rendered files, logs no error or
   warning about them (a renamed, deprecated or rejected parameter would show there), and reports
   the values that matter (scheduler, health check, requeue, power saving); its partitions carry
   their GRES, and a job powers nodes up through ResumeProgram.
2. aicluster-sync's configuration test with 24.11 as AICLUSTER_SLURMCTLD: a set 24.11 rejects is
   refused (with its error line) and not installed; a good one passes, is installed and reaches the
   running 24.11 slurmctld.

Needs the release (`sudo .ci/install-slurm-release`) and root: without either the tests fail and
say how to get them."""
from __future__ import annotations

import os
import re
import subprocess
import urllib.request

import pytest

from aicluster.design.cluster import design_cluster
from aicluster.spec.cluster import parse_spec
from tests.support import STACK_NAMES, stack_spec
from tests.support.slurm_release import RELEASE, Release, first_on_path
from tests.support.slurmctld import (RESUME_TIMEOUT_S, Controller, assert_rendered_settings, config_complaints, fields,
                                     wait_for)
from tests.support.sync_head import BUCKET, ControllerHead, s3_client

STACKS = sorted(s for s in STACK_NAMES if stack_spec(s).get("scheduler", "slurm") == "slurm")

# Log lines every first start of a private controller writes, on 22.05 as on 24.11: no state yet,
# no mail program in a minimal system, accounting gathered but not stored (no slurmdbd here).

@pytest.fixture(scope="module")
def release_bin(tmp_path_factory):
    """The release's programs as wrappers: fails (with the install command) when it is missing."""
    return Release.installed().wrappers(tmp_path_factory.mktemp("slurm-2411-bin"))


def assert_release(ctl: Controller) -> None:
    """The controller is the release's, not the machine's own Slurm."""
    version = ctl.config()["SLURM_VERSION"]
    assert version.startswith(f"{RELEASE}."), f"expected Slurm {RELEASE}, talking to {version}"


def test_the_release_is_installed_and_runs(release_bin):
    """The chroot's slurmctld answers through its wrapper, and says it is 24.11."""
    done = subprocess.run([str(release_bin / "slurmctld"), "-V"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(rf"slurm(-wlm)? {re.escape(RELEASE)}\.\d+\s*", done.stdout), done.stdout
    assert done.stdout.split()[1] in Release.installed().describe()


# --- 1. every Slurm stack's rendered configuration on 24.11 ---------------------------------------

@pytest.fixture(scope="module", params=STACKS, ids=STACKS)
def ctl(request, tmp_path_factory, release_bin):
    design = design_cluster(parse_spec(stack_spec(request.param)))
    with first_on_path(release_bin):
        controller = Controller(request.param, design, tmp_path_factory.mktemp(f"slurmctld-2411-{request.param}"))
        try:
            controller.start()
            yield controller
        finally:
            controller.stop()


def test_slurm_stacks_are_covered():
    assert {"aws-p5-slurm", "aws-p4d-small", "gcp-a3mega-slurm"} <= set(STACKS)


def test_slurmctld_2411_accepts_the_config(ctl):
    assert_release(ctl)
    assert_rendered_settings(ctl)


def test_slurmctld_2411_says_nothing_against_the_config(ctl):
    """A parameter 24.11 renamed, deprecated or ignores is logged as an error or warning at start
    (power saving disabled for an unusable program, too): none beyond a first start's usual ones."""
    assert_release(ctl)
    said = config_complaints(ctl)
    assert said == [], "\n".join(said)


def test_every_partition_carries_its_gres(ctl):
    assert_release(ctl)
    parts = {f["PartitionName"]: f for f in map(fields, ctl.run("scontrol", "-o", "show", "partition").splitlines())}
    assert list(parts) == [part.name for part in ctl.design.slurm.partitions]
    for part in ctl.design.slurm.partitions:
        rows = [ln.split() for ln in ctl.run("sinfo", "-h", "-p", part.name, "-o", "%D %G").splitlines()]
        assert sum(int(count) for count, _ in rows) == len(ctl.hostnames(part.hostlist))
        assert {gres for _, gres in rows} == {ns.gres or "(null)" for ns in part.nodesets}
    for ns in ctl.design.slurm.nodesets:
        node = fields(ctl.run("scontrol", "-o", "show", "node", ctl.hostnames(ns.hostlist)[0]))
        states = node["State"].split("+")
        assert "CLOUD" in states and "POWERED_DOWN" in states, node["State"]


# Last in this group: it allocates nodes.
def test_jobs_power_up_their_nodes_through_resume_program(ctl):
    assert_release(ctl)
    jobs = {}
    for ns in ctl.design.slurm.nodesets:
        pool_nodes = ctl.hostnames(ns.hostlist)
        count = min(2, len(pool_nodes))
        # -w: the pool's first nodes, which its shared partition (NVL72 domains) would not otherwise pin
        out = ctl.run("sbatch", "-N", str(count), "-p", ns.partition_name, "-w", ",".join(pool_nodes[:count]),
                      "-o", "/dev/null", "--wrap", "hostname")
        jobs[re.search(r"Submitted batch job (\d+)", out).group(1)] = pool_nodes[:count]
    expected = sorted(n for nodes in jobs.values() for n in nodes)

    def resumed() -> list[str]:
        return sorted(n for hostlist in ctl.resume_calls() for n in ctl.hostnames(hostlist))

    wait_for(f"ResumeProgram to be called for {expected}", lambda: len(resumed()) >= len(expected),
             RESUME_TIMEOUT_S, ctl.diagnostics)
    assert resumed() == expected
    for job_id, nodes in jobs.items():
        job = fields(ctl.run("scontrol", "-o", "show", "job", job_id))
        assert ctl.hostnames(job["NodeList"]) == nodes
        assert job["JobState"] == "CONFIGURING", job["JobState"]


# --- 2. the sync's configuration test with 24.11 ---------------------------------------------------

@pytest.fixture
def head(moto_endpoint, tmp_path, release_bin):
    urllib.request.urlopen(urllib.request.Request(f"{moto_endpoint}/moto-api/reset", method="POST")).close()
    s3_client(moto_endpoint).create_bucket(Bucket=BUCKET)
    root = tmp_path / "head"
    with first_on_path(release_bin):
        ctl = Controller("sync-2411", design_cluster(parse_spec(stack_spec("aws-p4d-small"))), root / "ctl")
        try:
            ctl.start()
            assert_release(ctl)
            head = ControllerHead(ctl, root, moto_endpoint)
            assert head.env["AICLUSTER_SLURMCTLD"] == str(release_bin / "slurmctld")
            yield head
        finally:
            ctl.stop()


def test_a_good_set_passes_a_2411_test_slurmctld_and_reaches_the_running_one(head):
    old = head.current("slurm.conf")
    suspend = int(re.search(r"^SuspendTime=(\d+)", old, re.M).group(1))
    head.publish(old.replace(f"SuspendTime={suspend}", f"SuspendTime={suspend + 60}"))
    done = head.sync()
    assert done.returncode == 0, done.stderr + head.ctl.diagnostics()
    assert "passed a test slurmctld" in done.stderr
    assert head.restarts() == 1
    assert head.ctl.config()["SuspendTime"] == f"{suspend + 60} sec"      # `scontrol reconfigure` reached it
    assert_release(head.ctl)
    assert not os.listdir(head.tmp)


BAD = {
    # (what is changed in slurm.conf, what slurmctld 24.11 says about it)
    "a negative count": (lambda conf: conf + "MaxJobCount=-3\n", "MaxJobCount value (-3) is less than zero"),
    "an unknown plugin": (lambda conf: re.sub(r"^SelectType=.*$", "SelectType=select/nope", conf, flags=re.M),
                          "Can't find plugin for select/nope"),
    "an unknown key": (lambda conf: conf + "SuspendTimeout2=60\n", "unrecognized key: SuspendTimeout2"),
}


@pytest.mark.parametrize("bad", sorted(BAD))
def test_a_set_2411_rejects_is_not_installed(head, bad):
    old = head.current("slurm.conf")
    head.publish(old)
    first = head.sync()                                  # the running set, recorded as applied
    assert first.returncode == 0, first.stderr + head.ctl.diagnostics()
    change, said = BAD[bad]
    head.publish(change(old))
    done = head.sync()
    assert done.returncode == 1, done.stderr
    assert "rejected the new configuration" in done.stderr and said in done.stderr, done.stderr
    assert head.current("slurm.conf") == old
    assert head.restarts() == 1                          # the first pass's only
    assert "is UP" in head.ctl.run("scontrol", "ping")
    assert_release(head.ctl)
    assert not os.listdir(head.tmp)                      # no copy left behind
