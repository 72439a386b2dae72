"""A real slurmctld (Debian's Slurm 22.05) reads the configuration aicluster renders.

For every Slurm stack in stacks/ (and one extra spec with mixed pools) the test writes the
rendered files into a temp dir, starts a private munged and `slurmctld -D` on free loopback
ports, and asks the controller through scontrol/sinfo/sbatch what it made of them: partitions,
node GRES/features/states, topology, and that a job powers nodes up through ResumeProgram with
the job's hostlist. The resume, suspend, resume-fail and prolog programs are recorders that
append their argv to a file.

The Slurm and munge programs are required: a missing one fails the test with an install hint.
"""
from __future__ import annotations

import copy
import re

import pytest

from aicluster.design.cluster import design_cluster
from aicluster.design.slurm_blocks import slurm_topology
from aicluster.spec.cluster import parse_spec
from tests.support import STACK_NAMES, slurmd_spec, stack_spec
from tests.support.slurmctld import (PROLOG_TIMEOUT_S, RESUME_TIMEOUT_S, START_TIMEOUT_S, Controller,
                                       assert_rendered_settings, fields, wait_for)

# Mixed pools beyond the example stacks: a Trainium pool (no GRES), a single-node GPU pool (not
# exclusive) and a pool with always-on nodes, which makes a topology with a top switch.
MIXED_POOLS = {
    "name": "mixed",
    "cloud": "aws",
    "region": "us-east-1",
    "zone": "us-east-1a",
    "pools": [
        {"name": "trn", "instance_type": "trn1n.32xlarge", "max_nodes": 2},
        {"name": "a100", "instance_type": "p4d.24xlarge", "min_nodes": 1, "max_nodes": 3},
        {"name": "solo", "instance_type": "p5.48xlarge", "max_nodes": 1},
    ],
}


def _slurm_stacks() -> list[str]:
    """The Slurm stacks whose configuration 22.05 can read: a stack with an NVL72 pool needs
    topology/block and switch/nvidia_imex (Slurm 24.05+), which the nodes' 24.11 runs and
    test_slurm_2411.py and test_nvl72_slurmctld.py prove on the real 24.11 daemons."""
    return [s for s in STACK_NAMES if stack_spec(s).get("scheduler", "slurm") == "slurm"
            and not slurm_topology(design_cluster(parse_spec(stack_spec(s)))).blocks]


CASES = {f"stack-{s}": stack_spec(s) for s in _slurm_stacks()} | {"spec-mixed-pools": MIXED_POOLS}


@pytest.fixture(scope="module", params=sorted(CASES), ids=sorted(CASES))
def ctl(request, tmp_path_factory):
    design = design_cluster(parse_spec(CASES[request.param]))
    controller = Controller(request.param, design, tmp_path_factory.mktemp(f"slurmctld-{request.param}"))
    try:
        controller.start()
        yield controller
    finally:
        controller.stop()


def test_spec_edits_reach_a_running_slurmctld(tmp_path):
    """What the head node's sync does after a spec edit, on a real slurmctld.

    An idle-time edit: `scontrol reconfigure` applies it in place. More nodes and a new pool:
    Slurm before 23.11 cannot take a node-count change on reconfigure (22.05 logs "node count
    has changed before reconfiguration ... You have to restart slurmctld" and exits), so the sync
    must restart slurmctld then; the restart keeps the queue and shows the new nodes."""
    spec = copy.deepcopy(stack_spec("aws-p4d-small"))
    ctl = Controller("edits", design_cluster(parse_spec(spec)), tmp_path)
    try:
        ctl.start()
        out = ctl.run("sbatch", "-H", "-N", "1", "-p", "a100", "-o", "/dev/null", "--wrap", "hostname")
        job_id = re.search(r"Submitted batch job (\d+)", out).group(1)

        spec["slurm"] = {"suspend_idle_min": 30}
        ctl.write_configs(design_cluster(parse_spec(spec)))
        ctl.run("scontrol", "reconfigure")
        wait_for("SuspendTime 1800 after reconfigure", lambda: ctl.config()["SuspendTime"] == "1800 sec",
                 START_TIMEOUT_S, ctl.diagnostics)

        spec["pools"][0]["max_nodes"] = 4
        spec["pools"].append({"name": "h100", "instance_type": "p5.48xlarge", "max_nodes": 2})
        ctl.write_configs(design_cluster(parse_spec(spec)))
        ctl.stop_slurmctld()
        ctl.start_slurmctld()
        rows = {tuple(ln.split()) for ln in ctl.run("sinfo", "-h", "-o", "%R %D %G").splitlines()}
        assert rows == {("a100", "4", "gpu:a100:8"), ("h100", "2", "gpu:h100:8")}
        assert fields(ctl.run("scontrol", "-o", "show", "job", job_id))["JobState"] == "PENDING"
        assert fields(ctl.run("scontrol", "-o", "show", "node", "a100-4"))["AvailableFeatures"].endswith(",dynamic")
    finally:
        ctl.stop()


def test_slurm_stacks_are_covered():
    assert "stack-aws-p5-slurm" in CASES and "stack-aws-p4d-small" in CASES


def test_slurmctld_accepts_the_config(ctl):
    assert_rendered_settings(ctl)
    log = (ctl.root / "log" / "slurmctld.log").read_text()
    assert "fatal" not in log.lower(), ctl.diagnostics()
    # Power saving is on: slurmctld disables it (and says so) when a program is unusable.
    assert "power_save module disabled" not in log, ctl.diagnostics()


def test_partitions(ctl):
    spec = CASES[ctl.case]
    parts = {f["PartitionName"]: f for f in map(fields, ctl.run("scontrol", "-o", "show", "partition").splitlines())}
    assert list(parts) == [p["name"] for p in spec["pools"]]
    for i, pool in enumerate(spec["pools"]):
        part = parts[pool["name"]]
        assert part["State"] == "UP"
        assert part["TotalNodes"] == str(pool["max_nodes"])
        assert part["Default"] == ("YES" if i == 0 else "NO")
        # Multi-node partitions are exclusive, single nodes are shared.
        assert part["OverSubscribe"] == ("EXCLUSIVE" if pool["max_nodes"] >= 2 else "NO")


def test_nodes(ctl):
    for ns in ctl.design.slurm.nodesets:
        for hostlist, kind in ((ns.static_hostlist, "static"), (ns.dynamic_hostlist, "dynamic")):
            if not hostlist:
                continue
            name = ctl.hostnames(hostlist)[0]
            node = fields(ctl.run("scontrol", "-o", "show", "node", name))
            assert node["NodeName"] == name
            assert node["Gres"] == (ns.gres or "(null)")
            assert node["AvailableFeatures"].split(",") == [*ns.features, kind]
            assert node["CPUTot"] == str(ns.cpus)
            assert node["RealMemory"] == str(ns.real_memory_mib)
            assert node["Partitions"] == ns.pool
            # Slurm 22.05 and later name it IDLE+CLOUD+POWERED_DOWN (`idle~` in sinfo).
            states = node["State"].split("+")
            assert "CLOUD" in states and "POWERED_DOWN" in states, node["State"]


def test_topology_has_one_switch_per_pool(ctl):
    switches = [fields(ln) for ln in ctl.run("scontrol", "show", "topology").splitlines() if ln.strip()]
    leaves = {s["SwitchName"]: s for s in switches if s["Level"] == "0"}
    pools = [ns.pool for ns in ctl.design.slurm.nodesets]
    assert sorted(leaves) == sorted(pools)
    for ns in ctl.design.slurm.nodesets:
        assert ctl.hostnames(leaves[ns.pool]["Nodes"]) == ctl.hostnames(ns.hostlist)
    tops = [s for s in switches if s["Level"] != "0"]
    if len(pools) > 1:
        assert len(tops) == 1
        assert sorted(tops[0]["Switches"].split(",")) == sorted(pools)
    else:
        assert tops == []


def test_every_partition_carries_its_gres(ctl):
    """sinfo per partition: node count and GRES. For aws-p5-slurm this is the issue's Done-when:
    a partition of 16 nodes carrying gres/gpu:h100:8."""
    for ns in ctl.design.slurm.nodesets:
        rows = [ln.split() for ln in ctl.run("sinfo", "-h", "-p", ns.pool, "-o", "%D %G").splitlines()]
        assert sum(int(count) for count, _ in rows) == len(ctl.hostnames(ns.hostlist))
        assert {gres for _, gres in rows} == {ns.gres or "(null)"}
    if ctl.case == "stack-aws-p5-slurm":
        assert ctl.run("sinfo", "-h", "-p", "gpu", "-o", "%D %G").split() == ["16", "gpu:h100:8"]
        part = fields(ctl.run("scontrol", "-o", "show", "partition", "gpu"))
        assert (part["TotalNodes"], part["OverSubscribe"]) == ("16", "EXCLUSIVE")
        nodes = [fields(ln) for ln in ctl.run("scontrol", "-o", "show", "node", "gpu-[1-16]").splitlines()]
        assert len(nodes) == 16 and {n["Gres"] for n in nodes} == {"gpu:h100:8"}


# Last: it allocates nodes, which changes their state for any test after it.
def test_jobs_power_up_their_nodes_through_resume_program(ctl):
    """sbatch -N 2 on each pool -> slurmctld calls ResumeProgram with exactly the jobs' nodes."""
    jobs = {}
    for ns in ctl.design.slurm.nodesets:
        pool_nodes = ctl.hostnames(ns.hostlist)
        count = min(2, len(pool_nodes))
        out = ctl.run("sbatch", "-N", str(count), "-p", ns.pool, "-o", str(ctl.root / "job-%j.out"),
                      "--wrap", "hostname")
        jobs[re.search(r"Submitted batch job (\d+)", out).group(1)] = pool_nodes[:count]

    expected = sorted(n for nodes in jobs.values() for n in nodes)

    def resumed() -> list[str]:
        # slurmctld may resume the nodes of several jobs in one call.
        return sorted(n for hostlist in ctl.resume_calls() for n in ctl.hostnames(hostlist))

    wait_for(f"ResumeProgram to be called for {expected}", lambda: len(resumed()) >= len(expected),
             RESUME_TIMEOUT_S, ctl.diagnostics)
    assert resumed() == expected
    for job_id, nodes in jobs.items():
        job = fields(ctl.run("scontrol", "-o", "show", "job", job_id))
        # The lowest-numbered powered-down nodes of the pool, now powering up for the job.
        assert ctl.hostnames(job["NodeList"]) == nodes
        assert job["JobState"] == "CONFIGURING", job["JobState"]
    if ctl.case == "stack-aws-p5-slurm":
        assert ctl.resume_calls() == ["gpu-[1-2]"]
    # Suspend and resume-fail are not due yet (SuspendTime, ResumeTimeout): only resume ran.
    assert {ln.split()[0] for ln in ctl.calls.read_text().splitlines()} == {"aicluster-resume"}


# --- a failing prolog (the GPU health check) on a real slurmd -------------------------------------

PROLOG_SPEC = slurmd_spec("prolog")


def test_a_failing_health_check_requeues_the_job_without_holding_it(tmp_path):
    """The rendered config on a real slurmctld and a real slurmd: the prolog (the GPU health
    check) fails on the node the job got, slurmd reports it, slurmctld drains that node and
    requeues the job, and the job is NOT held (SchedulerParameters=nohold_on_prolog_fail, as
    ParallelCluster sets it), so it can run on another node without an operator releasing it.
    Without the option, Slurm leaves it `PENDING (launch failed requeued held)` (slurm.conf man
    page, Prolog)."""
    ctl = Controller("prolog", design_cluster(parse_spec(PROLOG_SPEC)), tmp_path)
    try:
        ctl.start(failing_prolog=True)
        out = ctl.run("sbatch", "-N", "1", "-p", "trn", "-w", "trn-1", "-o", "/dev/null", "--wrap", "true")
        job_id = re.search(r"Submitted batch job (\d+)", out).group(1)
        wait_for("ResumeProgram to be called for trn-1", lambda: "trn-1" in ctl.resume_calls(),
                 RESUME_TIMEOUT_S, ctl.diagnostics)
        ctl.start_slurmd("trn-1")      # what a launched node does: it registers with slurmctld

        def requeued():
            # Requeued, and done with the failed launch: the job passes through COMPLETING (its
            # epilog on the node) before it waits again, longer on a loaded machine.
            job = fields(ctl.run("scontrol", "-o", "show", "job", job_id))
            return job if int(job.get("Restarts", "0")) >= 1 and job["JobState"] != "COMPLETING" else None

        job = wait_for("the job to be requeued after the prolog failed", requeued, PROLOG_TIMEOUT_S,
                       ctl.diagnostics)
        assert "aicluster-gpu-healthcheck" in ctl.calls.read_text(), ctl.diagnostics()
        node = fields(ctl.run("scontrol", "-o", "show", "node", "trn-1"))
        assert "DRAIN" in node["State"], node            # the failed node takes no more jobs
        assert job["JobState"] == "PENDING", job
        assert "held" not in job["Reason"].lower(), job   # not "launch_failed_requeued_held"
        assert job["Priority"] != "0", job               # a held job has priority 0
    finally:
        ctl.stop()
