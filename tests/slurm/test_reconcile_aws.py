"""The reconcile loop on AWS end to end (issue 13): a real slurmctld (Debian's Slurm 22.05) runs the
real aicluster-power.py as its ResumeProgram, SuspendProgram and ResumeFailProgram, and the test
runs the same program as `aicluster-reconcile`, all through the head's links, against moto's EC2
and Route 53 server behind a fault-injecting proxy on 127.0.0.1 (tests/support/fault_proxy.py).

Each scenario injects one fault sequence, then runs exactly MAX_PASSES passes, and checks the
issue's invariant: every live instance of the pool carries the node tag of a node slurmctld has
powered up (or powering up), no powered-down node has one, no node has two, no name record points
at a machine that is gone, the always-on nodes are back, the head and login nodes run on (they
carry the cluster tag too, no pool and no node, and the head EC2's termination protection, as
SlurmController launches it: issue 24, finding 1), and no job was lost (running, pending or
requeued; never failed, cancelled or held by the machinery).

Time: the loop ends an unowned instance only once it is older than its grace period (ResumeTimeout,
30 minutes). The faults run under a 60 s ResumeTimeout in cluster.json, so the resume programs have
their usual retry budget; before the passes the test lowers it to GRACE_S and waits until every
instance is older than that. That is "30 minutes later" without waiting them, and fair: no resume
program runs during a pass (the test waits for them), so the grace protects nothing here.
"""
from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from aicluster.aws.slurm import published_files
from aicluster.design.cluster import design_cluster
from aicluster.render.slurm_config import node_domain
from aicluster.spec.cluster import parse_spec
from tests.support import node_programs
from tests.support.aws_power import aws_env, moto_cluster
from tests.support.fault_proxy import FaultProxy
from tests.support.power_controller import PowerController
from tests.support.slurmctld import COMMAND_TIMEOUT_S, RESUME_TIMEOUT_S, fields, wait_for

# One Trainium pool (no GRES: a slurmd on this machine can stand in for a node): trn-[1-2] always
# on (min_nodes: SuspendExcNodes, cluster.json static_nodes), trn-[3-4] launched for jobs.
SPEC = {"name": "heal", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
        "pools": [{"name": "trn", "instance_type": "trn1n.32xlarge", "min_nodes": 2, "max_nodes": 4}]}
STATIC = ("trn-1", "trn-2")
MAX_PASSES = 3          # the N: a dead always-on node needs two (power down, power up)
FAULT_RESUME_TIMEOUT_S = 60
GRACE_S = 2
SETTLE_S = 60           # SuspendTimeout (5 s here) plus the power programs' runs
LIVE = ["pending", "running"]
# Node state flags of a power change requested, or on its way (slurmctld 22.05).
PENDING_POWER = {"POWER_DOWN", "POWER_UP", "POWERING_DOWN"}
# Job states that have not lost the job: it runs, waits, or was requeued to wait again.
KEPT_JOB_STATES = {"PENDING", "CONFIGURING", "RUNNING", "REQUEUED", "COMPLETING"}
LINKS = {"aicluster-resume": "resume", "aicluster-suspend": "suspend", "aicluster-resume-fail": "resume-fail",
         "aicluster-reconcile": "reconcile"}


class AwsController(PowerController):
    """slurmctld with the head's four links to the real aicluster-power.py, each wrapped to log
    when it begins and ends (the test waits for slurmctld's power programs to finish)."""

    cluster_json: Path
    state_dir: Path
    endpoint: str

    def _write_recorders(self, bin_dir: Path) -> None:
        super()._write_recorders(bin_dir)          # the prolog (health check) stays a recorder
        scontrol = self.scontrol_here(bin_dir)
        # The head's links: the program reads its action from the name it was started by.
        links = self.root / "links"
        links.mkdir(exist_ok=True)
        node_programs.install(self.root / "opt" / "bin", ["aicluster-power.py"])     # as the head has it
        env = {**aws_env(self.endpoint), "AICLUSTER_CONFIG": str(self.cluster_json),
               "AICLUSTER_SCONTROL": str(scontrol), "AICLUSTER_STATE_DIR": str(self.state_dir)}
        exports = " ".join(f"{k}={v}" for k, v in env.items())
        for link in LINKS:
            (links / link).symlink_to(self.root / "opt" / "bin" / "aicluster-power.py")
            wrapper = bin_dir / link
            wrapper.write_text(
                "#!/bin/sh\n"
                f'echo "begin $$ {link} $*" >> {self.calls}\n'
                f"export {exports}\n"
                f'{links / link} "$@"\n'
                "rc=$?\n"
                f'echo "end $$ $rc" >> {self.calls}\n'
                "exit $rc\n")
            wrapper.chmod(0o755)    # slurmctld refuses programs that group or others may write

    def program(self, link: str, *args: str) -> int:
        done = subprocess.run([str(self.root / "bin" / link), *args], env=self.env, capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT_S * 4)
        return done.returncode

    def running_programs(self) -> list[str]:
        """The power programs that began and have not ended."""
        lines = self.calls.read_text().splitlines() if self.calls.exists() else []
        begun = {ln.split()[1]: ln for ln in lines if ln.startswith("begin ")}
        for ln in lines:
            if ln.startswith("end "):
                begun.pop(ln.split()[1], None)
        return list(begun.values())

    def diagnostics(self) -> str:
        logs = [f"--- {p.name}\n{p.read_text()[-6000:]}" for p in (self.root / "power.log", self.root / "reconcile.log")
                if p.exists()]
        return super().diagnostics() + "\n" + "\n".join(logs)


class Scene:
    """What a scenario works with: the controller, moto (the test's own view, no faults), the proxy
    the programs talk to, and the jobs it submitted."""

    def __init__(self, ctl: AwsController, moto, proxy: FaultProxy):
        self.ctl, self.moto, self.proxy = ctl, moto, proxy
        self.jobs: list[str] = []
        self.head = self.run_instance({"aicluster-role": "head"}, protected=True)
        self.login = self.run_instance({"aicluster-role": "login"})

    def run_instance(self, tags: dict[str, str], protected: bool = False) -> str:
        """An instance of the cluster launched outside the power programs (RunInstances)."""
        iid = self.moto.ec2.run_instances(
            ImageId=self.moto.image, MinCount=1, MaxCount=1, SubnetId=self.moto.subnet,
            TagSpecifications=[{"ResourceType": "instance", "Tags": [
                {"Key": k, "Value": v} for k, v in {"aicluster-cluster": self.ctl.design.name, **tags}.items()]}],
        )["Instances"][0]["InstanceId"]
        if protected:       # moto's RunInstances ignores DisableApiTermination; this call does not
            self.moto.ec2.modify_instance_attribute(InstanceId=iid, DisableApiTermination={"Value": True})
        return iid

    def live(self) -> dict[str, dict]:
        """instance id -> {tags..., "_launched": epoch} of every live instance with the cluster tag."""
        reservations = self.moto.ec2.describe_instances(Filters=[
            {"Name": "tag:aicluster-cluster", "Values": [self.ctl.design.name]},
            {"Name": "instance-state-name", "Values": LIVE}])["Reservations"]
        return {i["InstanceId"]: {**{t["Key"]: t["Value"] for t in i.get("Tags", [])},
                                  "_launched": i["LaunchTime"].timestamp()}
                for r in reservations for i in r["Instances"]}

    def instances_of(self, node: str | None) -> list[str]:
        """The pool's live instances tagged for `node` (None: for no node)."""
        return sorted(iid for iid, tags in self.live().items()
                      if "aicluster-pool" in tags and tags.get("aicluster-node") == node)

    def launched(self, node: str) -> str:
        """The instance the resume program launched for `node`, once it has (and has finished)."""
        self.quiet()
        return wait_for(f"an instance tagged {node}", lambda: (self.instances_of(node) or [None])[-1],
                        RESUME_TIMEOUT_S, self.diagnostics)

    def records(self) -> set[str]:
        """The nodes with an A record in the cluster's zone."""
        sets = self.moto.route53.list_resource_record_sets(HostedZoneId=self.moto.zone_id)["ResourceRecordSets"]
        return {r["Name"].split(".")[0] for r in sets if r["Type"] == "A"}

    def submit(self, node: str) -> str:
        out = self.ctl.run("sbatch", "-N", "1", "-p", "trn", "-w", node, "-o", "/dev/null", "--wrap", "true")
        job = re.search(r"Submitted batch job (\d+)", out).group(1)
        self.jobs.append(job)
        return job

    def job(self, job_id: str) -> dict[str, str]:
        return fields(self.ctl.run("scontrol", "-o", "show", "job", job_id))

    def quiet(self) -> None:
        """Until no power program runs, no power-down or power-up request waits or runs, and every
        node slurmctld is powering up has been handed its instance (or was set DOWN by its resume).
        slurmctld takes `scontrol update state=power_down_force|power_up` as a request (POWER_DOWN,
        POWER_UP) that its power-saving thread carries out a moment later, and starts the program
        then: a check made at once would see nothing under way."""
        def settled() -> bool:
            if self.ctl.running_programs():
                return False
            owned = {tags.get("aicluster-node") for tags in self.live().values()}
            for name, state in self.ctl.states().items():
                if state & PENDING_POWER:
                    return False
                if "POWERING_UP" in state and "DOWN" not in state and name not in owned:
                    return False
            return True
        wait_for("the power programs to finish and the nodes to settle", settled, SETTLE_S, self.diagnostics)

    def diagnostics(self) -> str:
        return self.ctl.diagnostics() + f"\n--- moto\n{json.dumps(self.live(), indent=1)}"

    # --- the invariant --------------------------------------------------------------------------

    def broken(self) -> list[str]:
        """What breaks the issue's invariant now, or []."""
        states, problems = self.ctl.states(), []
        owners: dict[str, list[str]] = {}
        live = self.live()
        problems += [f"the {role} node {iid} is gone" for role, iid in (("head", self.head), ("login", self.login))
                     if iid not in live]
        for iid, tags in sorted(live.items()):
            if "aicluster-pool" not in tags:
                continue                    # the head and login nodes: checked above
            node = tags.get("aicluster-node")
            state = states.get(node or "")
            if node is None:
                problems.append(f"{iid} has no node name")
            elif state is None:
                problems.append(f"{iid} runs for {node}, which slurmctld does not know")
            elif state & {"POWERED_DOWN", "POWERING_DOWN"}:
                problems.append(f"{iid} runs for {node}, which is {'+'.join(sorted(state))}")
            if node:
                owners.setdefault(node, []).append(iid)
        problems += [f"{node} has {len(ids)} instances: {' '.join(ids)}" for node, ids in owners.items() if len(ids) > 1]
        problems += [f"the name {node} points at no live instance" for node in sorted(self.records() - set(owners))]
        for node in STATIC:
            state = states[node]
            if state & {"POWERED_DOWN", "POWERING_DOWN", "DOWN", "DRAIN"} or node not in owners:
                problems.append(f"always-on {node} is not back: {'+'.join(sorted(state))}, instances "
                                f"{owners.get(node, [])}")
        for job_id in self.jobs:
            job = self.job(job_id)
            if job["JobState"] not in KEPT_JOB_STATES or job.get("Priority") == "0":
                problems.append(f"job {job_id} was lost: {job['JobState']} ({job.get('Reason')}, "
                                f"priority {job.get('Priority')})")
        return problems


# --- the fault sequences ------------------------------------------------------------------------
# Each injects its faults and returns a check of its own for after the passes.


def network_lost_after_create_fleet(scene: Scene):
    """A job's resume: CreateFleet launches, its answer never arrives, the retry (same ClientToken,
    which moto ignores) launches again. Termination is refused meanwhile, so the resume program
    cannot end the first fleet's instance itself: it runs on with the cluster and resume-id tags
    and no node name, for the loop to find."""
    scene.proxy.drop_after_forward("CreateFleet", times=1)
    scene.proxy.refuse("TerminateInstances")
    scene.submit("trn-3")
    scene.launched("trn-3")
    assert scene.proxy.calls["CreateFleet"] >= 2, scene.diagnostics()
    (stray,) = scene.instances_of(None)
    assert scene.live()[stray].get("aicluster-resume-id")
    assert scene.broken(), "the fault leaves an instance no node owns"
    scene.proxy.clear()

    def check():
        assert stray not in scene.live()
        assert len(scene.instances_of("trn-3")) == 1
    return check


def terminate_refused_on_suspend(scene: Scene):
    """slurmctld suspends trn-3; EC2 refuses TerminateInstances: the suspend is left in
    pending-suspend.json and the node goes POWERED_DOWN with its instance still running. Then
    termination is allowed again."""
    scene.ctl.run("scontrol", "update", "nodename=trn-3", "state=power_up")
    first = scene.launched("trn-3")
    scene.proxy.refuse("TerminateInstances")
    scene.ctl.run("scontrol", "update", "nodename=trn-3", "state=power_down_force")
    scene.quiet()
    pending = json.loads((scene.ctl.state_dir / "pending-suspend.json").read_text())
    assert pending["trn-3"]["instances"] == [first], pending
    assert scene.broken(), "the refused suspend leaves trn-3 powered down with its instance"
    scene.proxy.clear()

    def check():
        assert first not in scene.live()
        pending_now = json.loads((scene.ctl.state_dir / "pending-suspend.json").read_text())
        assert "trn-3" not in pending_now, pending_now
    return check


def always_on_instance_terminated(scene: Scene):
    """Always-on trn-2 came up (its slurmd registered), then its instance was terminated out of
    band; slurmctld sets it DOWN (Not responding). A job waits for it."""
    ctl = scene.ctl
    first = scene.launched("trn-2")
    ctl.start_slurmd("trn-2")
    wait_for("trn-2 to register", lambda: ctl.node("trn-2")["State"] == "IDLE+CLOUD", RESUME_TIMEOUT_S,
             scene.diagnostics)
    ctl.stop_slurmd()
    scene.moto.ec2.terminate_instances(InstanceIds=[first])
    # What slurmctld does after SlurmdTimeout (300 s), at once.
    ctl.run("scontrol", "update", "nodename=trn-2", "state=down", "reason=Not responding")
    scene.submit("trn-2")
    assert scene.broken(), "trn-2 is DOWN with no instance"

    def check():
        assert first not in scene.instances_of("trn-2")
    return check


def bootstrap_error_while_powering_up(scene: Scene):
    """A job's node (trn-4) fails its set-up: its instance carries the aicluster-bootstrap-error
    tag while the node is POWERING_UP, and its slurmd never starts."""
    scene.submit("trn-4")
    bad = scene.launched("trn-4")
    scene.moto.ec2.create_tags(Resources=[bad], Tags=[{"Key": "aicluster-bootstrap-error",
                                                       "Value": "mount /fsx: timed out"}])

    def check():
        assert bad not in scene.live()
        assert "aicluster-bootstrap: mount /fsx: timed out" in (scene.ctl.root / "reconcile.log").read_text()
    return check


def duplicate_resume(scene: Scene):
    """slurmctld resumes trn-3 for a job; the resume program runs again for the same node (a
    retried or duplicated ResumeProgram call)."""
    scene.submit("trn-3")
    first = scene.launched("trn-3")
    assert scene.ctl.program("aicluster-resume", "trn-3") == 0, scene.diagnostics()

    def check():
        assert scene.instances_of("trn-3") == [first]
    return check


def two_instances_for_one_node(scene: Scene):
    """What two resumes of trn-3 at once leave (issue 24, finding 6): a second instance tagged trn-3,
    launched before the one slurmctld was handed (older, so "keep the first launched" would keep the
    wrong one): the loop keeps the instance at trn-3's NodeAddr, as real scontrol shows it."""
    other = scene.run_instance({"aicluster-pool": "trn", "aicluster-resume-id": "racing-resume"})
    scene.submit("trn-3")
    used = scene.launched("trn-3")
    scene.moto.ec2.create_tags(Resources=[other], Tags=[{"Key": "aicluster-node", "Value": "trn-3"}])
    address = scene.moto.ec2.describe_instances(InstanceIds=[used])["Reservations"][0]["Instances"][0]
    # The resume program tags the instance first and hands slurmctld its address a moment later.
    wait_for("trn-3's NodeAddr to be its instance's address",
             lambda: scene.ctl.node("trn-3")["NodeAddr"] == address["PrivateIpAddress"], RESUME_TIMEOUT_S,
             scene.diagnostics)
    assert scene.broken(), "trn-3 has two instances"

    def check():
        assert scene.instances_of("trn-3") == [used]
    return check


SCENARIOS = [network_lost_after_create_fleet, terminate_refused_on_suspend, always_on_instance_terminated,
             bootstrap_error_while_powering_up, duplicate_resume, two_instances_for_one_node]


@pytest.fixture
def scene(moto_endpoint, tmp_path):
    design = design_cluster(parse_spec(SPEC))
    moto = moto_cluster(moto_endpoint, design.name, {"trn": "trn1n.32xlarge"}, node_domain(design.name))
    with FaultProxy(moto_endpoint) as proxy:
        files = published_files(design, controller_addr="127.0.0.1", subnet_id=moto.subnet,
                                launch_templates=moto.templates, placement_groups={"trn": None},
                                accounting_secret=None, hosted_zone_id=moto.zone_id)
        ctl = AwsController("reconcile-aws", design, tmp_path / "slurm")
        ctl.cluster_json, ctl.state_dir, ctl.endpoint = tmp_path / "cluster.json", tmp_path / "state", proxy.endpoint
        config = json.loads(files["aicluster/cluster.json"])
        config["resume_timeout_s"] = FAULT_RESUME_TIMEOUT_S
        config["log_file"] = str(ctl.root / "power.log")
        # Four nodes: room for two replacements at once (the defaults allow one a pass).
        config["reconcile"].update(log_file=str(ctl.root / "reconcile.log"), grace_s=0, replace_fraction=0.5,
                                   pool_replacing_fraction=0.5)
        ctl.cluster_json.write_text(json.dumps(config))
        try:
            ctl.start()
            yield Scene(ctl, moto, proxy)
        finally:
            ctl.stop()


@pytest.mark.parametrize("fault", SCENARIOS, ids=lambda f: f.__name__)
def test_after_any_fault_and_n_passes_every_instance_belongs_to_a_powered_up_node(scene, fault):
    ctl = scene.ctl
    # What aicluster-sync does for the always-on nodes at boot.
    ctl.run("scontrol", "update", "nodename=trn-[1-2]", "state=power_up")
    for node in STATIC:
        scene.launched(node)
    check = fault(scene)
    scene.quiet()

    # Time passes: every instance is now older than the grace period (module docstring).
    config = json.loads(ctl.cluster_json.read_text())
    config["resume_timeout_s"] = GRACE_S
    ctl.cluster_json.write_text(json.dumps(config))
    wait_for("every instance to be older than the grace period",
             lambda: all(time.time() - t["_launched"] > GRACE_S + 1 for t in scene.live().values()),
             GRACE_S + 10, scene.diagnostics)

    for n in range(1, MAX_PASSES + 1):
        assert ctl.program("aicluster-reconcile") == 0, f"pass {n}\n{scene.diagnostics()}"
        scene.quiet()
    assert scene.broken() == [], scene.diagnostics()
    check()
