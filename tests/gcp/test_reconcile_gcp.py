"""The reconcile loop on GCP, end to end: a real slurmctld (Debian's Slurm) runs the real
aicluster-gcp-power.py as its ResumeProgram, SuspendProgram and ResumeFailProgram, the test runs the
same program as `aicluster-reconcile`, and every one of them talks to the project's fake Compute
Engine and Cloud DNS (tests/support/fake_gcp.py) over loopback HTTP, which injects the fault.

Faults (one a case): a bulkInsert answer lost during a job's resume; a stockout for one job of two;
an always-on node's instance deleted out of band; a node whose set-up failed (the bootstrap-error
guest attribute) while POWERING_UP; a preempted Spot instance under a running job. After at most
MAX_PASSES passes: every instance in the fake belongs to a node slurmctld has powered up or
powering up, no powered-down node has one, no node has two, and no job is lost (each is pending,
starting or running, never failed or cancelled). Issue 13, findings 6, 8, 9, 11 and the loop.

In every case the cluster's head and login VMs stand in the fake too, with the cluster label and
older than the grace period, and every VM of the cluster carries the label aicluster-node=x (a
user's tag `aicluster.node: x` once became it): the loop never deletes the head or login VM, and
the node of an instance is its name's (issue 24).

Slurm 22.05 (Debian bookworm) writes SLURM_RESUME_FILE as {"jobs": [{"job_id": n, "nodes":
hostlist}], "all_nodes": hostlist}, not with the `nodes_resume` keys of later releases: the
stockout case checks that the resume still launches per job on the version CI runs.
"""
from __future__ import annotations

import json
import random
import re
import subprocess
from datetime import datetime, timedelta, timezone

import pytest

from aicluster.design.cluster import design_cluster
from aicluster.gcp.slurm import instance_prefix, published_files
from aicluster.spec.cluster import parse_spec
from tests.support import GCP_PROJECT
from tests.support.fake_gcp import FakeGcp
from tests.support.gcp_head import GcpHeadController
from tests.support.slurmctld import COMMAND_TIMEOUT_S, RESUME_TIMEOUT_S, fields, tool, wait_for

# One H100 pool: gpu-1 always on (min_nodes: SuspendExcNodes, cluster.json static_nodes),
# gpu-[2-4] launched for jobs.
SPEC = {"name": "heal", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a",
        "pools": [{"name": "gpu", "instance_type": "h100", "min_nodes": 1, "max_nodes": 4}]}
TEMPLATE = f"projects/{GCP_PROJECT}/global/instanceTemplates/heal-gpu"
PREFIX = instance_prefix(design_cluster(parse_spec(SPEC)))         # heal-<digest>-
# The VMs of the cluster that are no node's: the head and a login node (slurm_files.head_hostname,
# LoginDesign.names), labelled as aicluster labels them, with the user's tag that once named nodes.
SPOOFED = {"aicluster-node": "x"}
NOT_NODES = {"heal-head": "head", "heal-login-1": "login"}
# The loop's grace period is never shorter than ResumeTimeout as cluster.json gives it
# (resume_timeout_s): the knob that makes a young orphan old enough within the test.
GRACE_S = 20
MAX_PASSES = 4
SETTLE_S = 60               # SuspendTimeout (5 s here) and the power programs' runs
STALL_RETRIES = 4
ENDED = {"FAILED", "CANCELLED", "NODE_FAIL", "BOOT_FAIL", "TIMEOUT", "DEADLINE", "OUT_OF_MEMORY", "PREEMPTED"}


class Head(GcpHeadController):
    """The rendered configuration, cut to what one small machine can stand in for: no GPU GRES
    (a slurmd here has no GPUs), SuspendTimeout 5 s so a powered-down node settles in seconds,
    and job ids of its own (a job's cgroup is named by its id machine-wide)."""

    fake: FakeGcp
    passes: int = 0

    def write_configs(self, design) -> None:
        super().write_configs(design)
        conf = re.sub(r" Gres=\S+", "", self.conf.read_text())
        # SlurmdTimeout 6 s: slurmctld itself finds a node whose machine died not responding
        # within seconds rather than 5 minutes, and sets it DOWN as it would.
        first_job_id = 1000 + random.randrange(1_000_000)
        self.conf.write_text(conf + f"SuspendTimeout=5\nSlurmdTimeout=6\nFirstJobId={first_job_id}\n")
        (self.conf.parent / "gres.conf").write_text("")

    def run(self, *argv: str) -> str:
        """A command, asked again while slurmctld is too busy to answer in MessageTimeout (10 s):
        22.05 blocks its RPCs while it retries, for 10 s a node, to resolve the NodeAddr of nodes
        that never got one (a failed launch's, with cloud_dns), as it will on a real head."""
        for _ in range(STALL_RETRIES):
            self._alive("slurmctld")
            proc = subprocess.run([tool(argv[0]), *argv[1:]], env=self.env, cwd=self.root, capture_output=True,
                                  text=True, timeout=COMMAND_TIMEOUT_S)
            if "Socket timed out on send/recv operation" not in proc.stderr:
                break
        assert proc.returncode == 0, f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr}\n{self.diagnostics()}"
        return proc.stdout

    def reconcile(self) -> None:
        self.passes += 1
        assert self.passes <= MAX_PASSES, f"more than {MAX_PASSES} passes\n{self.diagnostics()}"
        done = subprocess.run([str(self.programs["aicluster-reconcile"])], env=self.env, capture_output=True,
                              text=True, timeout=COMMAND_TIMEOUT_S * 4)
        assert done.returncode == 0, f"pass {self.passes} failed: {done.stderr}\n{self.diagnostics()}"

    def states(self) -> dict[str, set[str]]:
        return {f["NodeName"]: set(f["State"].split("+"))
                for f in map(fields, self.run("scontrol", "-o", "show", "nodes").splitlines())}

    def node(self, name: str) -> dict[str, str]:
        return fields(self.run("scontrol", "-o", "show", "node", name))

    def stop_slurmd(self) -> None:
        """The node's machine is gone: its slurmd with it."""
        self._stop("slurmd")

    def diagnostics(self) -> str:
        with self.fake.lock:
            fleet = {n: (i["status"], i["labels"].get("aicluster-resume-id")) for n, i in self.fake.instances.items()}
        return super().diagnostics() + f"\n--- fake instances\n{json.dumps(fleet, indent=1)}"


@pytest.fixture
def head(tmp_path):
    design = design_cluster(parse_spec(SPEC))
    fake = FakeGcp(project=GCP_PROJECT, zone=design.zone, dns_zones={f"{design.name}-nodes"},
                   template_labels={"aicluster-cluster": design.name, "aicluster-pool": "gpu", **SPOOFED}).start()
    long_ago = (datetime.now(timezone.utc) - timedelta(hours=2)).isoformat(timespec="milliseconds")
    for vm, role in NOT_NODES.items():
        fake.instances[vm] = {"name": vm, "zone": design.zone, "status": "RUNNING", "creationTimestamp": long_ago,
                              "labels": {"aicluster-cluster": design.name, "aicluster-role": role, **SPOOFED},
                              "labelFingerprint": "fp0", "networkInterfaces": [{"networkIP": fake.address(vm)}]}
    files = published_files(design, project_id=GCP_PROJECT, controller_addr="127.0.0.1", templates={"gpu": TEMPLATE},
                            placements={"gpu": ""}, accounting_secret=None, lustre_imports=[])
    config = json.loads(files["aicluster/cluster.json"])
    assert config["static_nodes"] == ["gpu-1"] and config["instance_prefix"] == PREFIX
    # Four nodes: room for two replacements at once, so a case needs few passes.
    config.update(resume_timeout_s=GRACE_S, reconcile={**config["reconcile"], "grace_s": GRACE_S,
                                                       "replace_fraction": 0.5, "pool_replacing_fraction": 0.5})
    (tmp_path / "cluster.json").write_text(json.dumps(config))
    controller = Head("gcp-reconcile", design, tmp_path / "slurm")
    controller.cluster_json, controller.fake_env, controller.fake = tmp_path / "cluster.json", fake.env(), fake
    controller.extra_env = {"AICLUSTER_STATE_DIR": str(tmp_path / "state"), "AICLUSTER_GCP_BACKOFF_S": "0.01"}
    try:
        controller.start()
        yield controller
    finally:
        controller.stop()
        fake.stop()


# --- what the test asks ------------------------------------------------------------------------


def fleet(head: Head) -> dict[str, dict]:
    """The compute instances in the fake (not the head or login VM)."""
    with head.fake.lock:
        return {name: json.loads(json.dumps(i)) for name, i in head.fake.instances.items() if name not in NOT_NODES}


def node_of(instance: str) -> str | None:
    return instance[len(PREFIX):] if instance.startswith(PREFIX) else None


def instance_of(head: Head, node: str) -> dict | None:
    return fleet(head).get(PREFIX + node)


def powered_down(states: set[str]) -> bool:
    return "POWERED_DOWN" in states and not states & {"POWERING_UP", "POWERING_DOWN"}


def submit(head: Head, nodes: str, *extra: str) -> str:
    count = str(len(head.hostnames(nodes)))
    out = head.run("sbatch", "-N", count, "-p", "gpu", "-w", nodes, "-o", "/dev/null", *extra, "--wrap", "sleep 90")
    return re.search(r"Submitted batch job (\d+)", out).group(1)


def reason(head: Head, node: str) -> str:
    """The node's Reason, spaces and all (`fields` stops at the first space)."""
    found = re.search(r"\bReason=(.*?) \[", head.run("scontrol", "-o", "show", "node", node))
    return found.group(1) if found else ""


def job_state(head: Head, job: str) -> str:
    return fields(head.run("scontrol", "-o", "show", "job", job))["JobState"]


def launched(head: Head, node: str, not_this: str | None = None) -> dict:
    """The node's instance once the resume program has created it and slurmctld has its address."""
    def ready():
        instance = instance_of(head, node)
        if not instance or instance["labels"].get("aicluster-resume-id") in (None, not_this):
            return None
        return instance if head.node(node).get("NodeAddr") == head.fake.address(PREFIX + node) else None
    return wait_for(f"the resume program to launch {node}", ready, RESUME_TIMEOUT_S, head.diagnostics)


def settle(head: Head) -> None:
    """No node on its way down: asked to (POWER_DOWN, until slurmctld's power-save thread takes
    it up) or powering down (SuspendTimeout)."""
    wait_for("no node POWER_DOWN or POWERING_DOWN",
             lambda: not any(s & {"POWER_DOWN", "POWERING_DOWN"} for s in head.states().values()),
             SETTLE_S, head.diagnostics)


def broken(head: Head, jobs: list[str]) -> list[str]:
    """The issue's invariant, and no job lost: what breaks it, or []."""
    states, problems, owners = head.states(), [], {}
    for name, instance in fleet(head).items():
        node = node_of(name)
        owners.setdefault(node, []).append(name)
        state = states.get(node or "")
        if state is None or powered_down(state):
            problems.append(f"{name} ({instance['status']}) runs for {node} ({'+'.join(sorted(state or ['unknown']))})")
    problems += [f"{node} has instances {names}" for node, names in owners.items() if len(names) > 1]
    problems += [f"job {job} is {state}" for job in jobs if (state := job_state(head, job)) in ENDED]
    return problems


def healed(head: Head, jobs: list[str]) -> None:
    """Passes (at most MAX_PASSES in all) until the invariant holds after the power programs settle."""
    while True:
        head.reconcile()
        settle(head)
        if not broken(head, jobs):
            return


# --- the faults --------------------------------------------------------------------------------


def lost_bulk_insert_answer(head: Head) -> list[str]:
    """The job's bulkInsert is carried out, its answer lost; the retry carries the same requestId
    and creates nothing twice (before: the retry was refused for the names it had just created
    and the clean-up deleted both new instances)."""
    head.fake.lose = {"/instances/bulkInsert": 1}
    job = submit(head, "gpu-[2-3]")
    for node in ("gpu-2", "gpu-3"):
        launched(head, node)
    first, retry = head.fake.requests("/instances/bulkInsert")
    assert first.query["requestId"] == retry.query["requestId"] and head.fake.bulk_count == 1
    assert not [c for c in head.fake.calls if c.method == "DELETE" and "/instances/" in c.path]
    return [job]


def stockout_for_one_job_of_two(head: Head) -> list[str]:
    """Two jobs resumed together; the zone has no capacity for the second. Its nodes go DOWN and it
    requeues; the first job's node comes up (before: one launch per pool failed both)."""
    head.fake.stockout_names, head.fake.stockout_leaves = {PREFIX + "gpu-4"}, 1
    jobs = [submit(head, "gpu-2", "--hold"), submit(head, "gpu-[3-4]", "--hold")]
    head.run("scontrol", "release", ",".join(jobs))
    launched(head, "gpu-2")
    wait_for("the second job's nodes DOWN", lambda: all("DOWN" in head.states()[n] for n in ("gpu-3", "gpu-4")),
             RESUME_TIMEOUT_S, head.diagnostics)
    assert reason(head, "gpu-4").startswith("ZONE_RESOURCE_POOL_EXHAUSTED"), head.node("gpu-4")
    assert set(fleet(head)) == {PREFIX + "gpu-2"}            # the failed launch's leftover deleted
    head.fake.stockout_names = set()                         # capacity comes back later
    return jobs


def always_on_instance_deleted(head: Head) -> list[str]:
    """gpu-1 is up and registered; its instance is deleted out of band (an operator, a failed
    host) and slurmctld marks it DOWN (Not responding). The loop powers it down, then up: a new
    instance (before: an always-on node that went DOWN was never recovered)."""
    head.reconcile()                                         # powers the always-on gpu-1 up
    first = launched(head, "gpu-1")
    head.start_slurmd("gpu-1")
    wait_for("gpu-1 to register", lambda: not head.states()["gpu-1"] & {"POWERING_UP", "DOWN"},
             RESUME_TIMEOUT_S, head.diagnostics)
    head.stop_slurmd()
    with head.fake.lock:
        del head.fake.instances[PREFIX + "gpu-1"]
    head.run("scontrol", "update", "nodename=gpu-1", "state=down", "reason=Not responding")
    head.reconcile()                                         # powers it down (nothing left to delete)
    settle(head)
    head.reconcile()                                         # powers it up again
    launched(head, "gpu-1", not_this=first["labels"]["aicluster-resume-id"])
    return []


def bootstrap_error_while_powering_up(head: Head) -> list[str]:
    """The job's node reports that its set-up failed (guest attribute aicluster/bootstrap-error)
    and never starts slurmd: the loop sets it DOWN with the reason (its job requeues) and powers
    it down, which deletes the instance (before: it waited out ResumeTimeout)."""
    job = submit(head, "gpu-2")
    launched(head, "gpu-2")
    head.fake.guest_attributes[PREFIX + "gpu-2"] = {"aicluster/bootstrap-error": "mount /fsx: timed out"}
    head.reconcile()
    # DOWN with the reason first (power_down_force then clears it, with idle_on_node_suspend).
    assert "marking it DOWN: aicluster-bootstrap: mount /fsx: timed out" in (head.root / "reconcile.log").read_text()
    # Deleted: gone, or a new instance (the requeued job resumed it again) without the old one's attribute.
    wait_for("the failed node's instance to be deleted", lambda: PREFIX + "gpu-2" not in fleet(head) or
             not head.fake.guest_attributes.get(PREFIX + "gpu-2"), SETTLE_S, head.diagnostics)
    assert (PREFIX + "gpu-2") in [c.path.rsplit("/", 1)[1] for c in head.fake.calls if c.method == "DELETE"]
    return [job]


def preempted_spot_instance(head: Head) -> list[str]:
    """A job holds gpu-2 when Compute Engine preempts its Spot VM (TERMINATED). The loop drains
    the node but leaves the instance while slurmctld still counts the job running; once slurmctld
    gives the node up (SlurmdTimeout: the job requeues) the loop replaces it."""
    head.fake.template_scheduling = {"provisioningModel": "SPOT"}
    job = submit(head, "gpu-2")
    launched(head, "gpu-2")
    head.start_slurmd("gpu-2")
    # Registered and held by the job (slurmctld marks the job RUNNING on its next periodic check,
    # up to 30 s later; for the loop the node has a job either way).
    wait_for("gpu-2 to register under the job", lambda: not head.states()["gpu-2"] & {"POWERING_UP", "IDLE"},
             RESUME_TIMEOUT_S, head.diagnostics)
    assert job_state(head, job) in ("CONFIGURING", "RUNNING")
    head.stop_slurmd()
    with head.fake.lock:
        head.fake.instances[PREFIX + "gpu-2"]["status"] = "TERMINATED"
    head.reconcile()
    assert reason(head, "gpu-2") == "aicluster-event: preempted: SPOT instance TERMINATED", head.node("gpu-2")
    assert PREFIX + "gpu-2" in fleet(head), "the instance of a node with a running job was deleted"
    # slurmctld gives the node up (SlurmdTimeout): DOWN, and the job requeues.
    wait_for("slurmctld to set gpu-2 DOWN", lambda: "DOWN" in head.states()["gpu-2"], SETTLE_S, head.diagnostics)
    return [job]


@pytest.mark.parametrize("fault", [lost_bulk_insert_answer, stockout_for_one_job_of_two, always_on_instance_deleted,
                                   bootstrap_error_while_powering_up, preempted_spot_instance],
                         ids=lambda f: f.__name__)
def test_after_a_fault_and_a_few_passes_every_instance_has_a_powered_up_node(head, fault):
    jobs = fault(head)
    healed(head, jobs)
    # The always-on node is up or on its way up, with its instance.
    wait_for("the always-on gpu-1's instance", lambda: instance_of(head, "gpu-1"), RESUME_TIMEOUT_S, head.diagnostics)
    states = head.states()
    assert not powered_down(states["gpu-1"]), head.diagnostics()
    assert broken(head, jobs) == [], head.diagnostics()
    # Nothing preempted, stopped or terminated is left holding a node's name and disks.
    assert {n: i["status"] for n, i in fleet(head).items() if i["status"] != "RUNNING"} == {}, head.diagnostics()
    # No powered-down node keeps its name in Cloud DNS.
    named = {name.split(".")[0] for name in head.fake.addresses_in("heal-nodes")}
    assert not {n for n in named if powered_down(states[n])}, (named, states)
    log = (head.root / "reconcile.log").read_text()
    assert "reconcile: pass done" in log and "pass failed" not in log, log
    # The head and login VMs, labelled for the cluster and long past the grace period, are untouched.
    with head.fake.lock:
        assert set(NOT_NODES) <= set(head.fake.instances), head.diagnostics()
    assert not {vm for vm in NOT_NODES if vm in [c.path.rsplit("/", 1)[1] for c in head.fake.calls
                                                  if c.method == "DELETE"]}
