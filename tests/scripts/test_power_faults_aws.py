"""The AWS power program under faults (issue 13, findings 1, 2, 5, 7, 9): moto's EC2 and Route 53
server on 127.0.0.1 behind a fault-injecting proxy (tests/support/fault_proxy.py), the program's
own main() as slurmctld calls it through its links, a recording `scontrol`.

After every scenario the invariant holds: each live instance with the cluster tag carries a node
name of a node that is up, or a record in pending-suspend.json, never neither. moto tags the
instances of a CreateFleet with its TagSpecifications (checked below); it ignores ClientToken (a
retried CreateFleet launches again), which the program must survive as well.

Backoff: the program's base and cap are scaled down 100x here (0.5 s -> 5 ms, 20 s -> 0.2 s) so a
test sits out ten throttled calls in well under a second; the deadline they retry against is the
real one of the config's resume_timeout_s, shortened only where a scenario waits for it to pass.
The 2,000-node resume runs on a virtual clock instead; no test here asserts how long anything took
(bench/power_resume.py measures that).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.aws_power import REGION, aws_env, load_power, moto_cluster
from tests.support.fault_proxy import FaultProxy
from tests.support.scontrol_recorder import recorder

CLUSTER = "p5-train"
DOMAIN = "p5-train.aicluster.internal"
LIVE = ["pending", "running", "stopping", "stopped"]
SCALE = 100          # backoff base and cap divided by this


power = load_power()


class Cluster:
    """moto's EC2 and Route 53 with the cluster's network, launch template and zone; the program's
    environment, pointed at the proxy."""

    def __init__(self, moto: str, proxy: FaultProxy, tmp_path: Path, monkeypatch):
        # A template without the cluster's tags: what the instances carry, CreateFleet put on them.
        aws = moto_cluster(moto, CLUSTER, {"gpu": "p5.48xlarge"}, DOMAIN, template_tags=False)
        self.ec2, self.route53 = aws.ec2, aws.route53                       # the test's view: no faults
        self.proxy, self.tmp = proxy, tmp_path
        subnet, self.zone, template = aws.subnet, aws.zone_id, aws.templates["gpu"]
        self.config = {
            "cluster": CLUSTER, "region": REGION, "cluster_tag": "aicluster-cluster", "node_tag": "aicluster-node",
            "pool_tag": "aicluster-pool", "log_file": str(tmp_path / "power.log"), "resume_timeout_s": 1800,
            "hosted_zone_id": self.zone, "dns_domain": DOMAIN,
            "pools": {"gpu": {"launch_template_id": template, "instance_type": "p5.48xlarge", "subnet_id": subnet,
                              "placement_group": None, "capacity": "on-demand", "reservation_id": None,
                              "min_nodes": 0, "max_nodes": 64}},
        }
        self.write_config()
        scontrol, self.record = recorder(tmp_path)
        for key, value in {**aws_env(proxy.endpoint), "AICLUSTER_CONFIG": str(tmp_path / "cluster.json"),
                           "AICLUSTER_SCONTROL": str(scontrol), "AICLUSTER_STATE_DIR": str(tmp_path / "state"),
                           "AICLUSTER_LOG": str(tmp_path / "power.log")}.items():
            monkeypatch.setenv(key, value)
        monkeypatch.delenv("SLURM_RESUME_FILE", raising=False)
        monkeypatch.setattr(power.core, "BACKOFF_BASE_S", power.core.BACKOFF_BASE_S / SCALE)
        monkeypatch.setattr(power.core, "BACKOFF_CAP_S", power.core.BACKOFF_CAP_S / SCALE)

    def write_config(self) -> None:
        (self.tmp / "cluster.json").write_text(json.dumps(self.config))

    def run(self, action: str, hostlist: str) -> int:
        return power.main([f"/opt/aicluster/bin/aicluster-{action}", hostlist])

    def live(self) -> dict[str, dict]:
        """instance id -> its tags, of every live instance with the cluster tag (the test's own view)."""
        reservations = self.ec2.describe_instances(Filters=[
            {"Name": "tag:aicluster-cluster", "Values": [CLUSTER]},
            {"Name": "instance-state-name", "Values": LIVE}])["Reservations"]
        return {i["InstanceId"]: {t["Key"]: t["Value"] for t in i.get("Tags", [])}
                for r in reservations for i in r["Instances"]}

    def nodes(self) -> dict[str, list[str]]:
        named: dict[str, list[str]] = {}
        for iid, tags in self.live().items():
            named.setdefault(tags.get("aicluster-node"), []).append(iid)
        return named

    def down(self) -> set[str]:
        """Nodes the program set DOWN."""
        lines = self.record.read_text().splitlines() if self.record.exists() else []
        return {n for line in lines if "state=down" in line
                for n in power.expand_hostlist(line.split("\t")[1].removeprefix("nodename="))}

    def addressed(self) -> set[str]:
        lines = self.record.read_text().splitlines() if self.record.exists() else []
        return {n for line in lines if "\tnodeaddr=" in line
                for n in line.split("\t")[1].removeprefix("nodename=").split(",")}

    def records(self) -> set[str]:
        sets = self.route53.list_resource_record_sets(HostedZoneId=self.zone)["ResourceRecordSets"]
        return {r["Name"].split(".")[0] for r in sets if r["Type"] == "A"}

    def pending(self) -> dict:
        path = self.tmp / "state" / "pending-suspend.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def assert_nothing_unowned(self) -> None:
        """Every live instance is named for a node, or its node's deletion waits in pending-suspend."""
        pending_ids = {i for entry in self.pending().values() for i in entry["instances"]}
        for iid, tags in self.live().items():
            assert tags.get("aicluster-node") or iid in pending_ids, (iid, tags)


@pytest.fixture
def cluster(moto_endpoint, tmp_path, monkeypatch):
    with FaultProxy(moto_endpoint) as proxy:
        yield Cluster(moto_endpoint, proxy, tmp_path, monkeypatch)


# --- instances born identifiable (findings 1) -----------------------------------------------


def test_instances_are_tagged_at_launch_with_cluster_pool_and_request(cluster):
    """moto honours CreateFleet TagSpecifications: every instance carries the cluster, pool and
    resume-request tags from its first moment, before any CreateTags."""
    cluster.proxy.refuse("CreateTags")                    # no node-name tag can arrive
    assert cluster.run("resume", "gpu-[1-2]") == 1
    assert cluster.down() == {"gpu-1", "gpu-2"}
    assert cluster.live() == {}                           # both terminated by resume
    everything = cluster.ec2.describe_instances(Filters=[{"Name": "tag:aicluster-cluster", "Values": [CLUSTER]}])
    tags = [{t["Key"]: t["Value"] for t in i["Tags"]} for r in everything["Reservations"] for i in r["Instances"]]
    assert len(tags) == 2 and {t["aicluster-pool"] for t in tags} == {"gpu"}
    assert len({t["aicluster-resume-id"] for t in tags}) == 1


def test_network_lost_after_create_fleet_leaves_no_instance_behind(cluster):
    """CreateFleet launches, its answer never arrives; the retry (same ClientToken) launches again
    on moto. Before: the first fleet's instances ran on untagged and unseen, forever."""
    cluster.proxy.drop_after_forward("CreateFleet", times=1)
    assert cluster.run("resume", "gpu-[1-2]") == 0
    assert cluster.proxy.calls["CreateFleet"] == 2
    assert sorted(cluster.nodes()) == ["gpu-1", "gpu-2"]
    assert all(len(ids) == 1 for ids in cluster.nodes().values())
    cluster.assert_nothing_unowned()
    listed = power.Ec2(cluster.ec2, cluster.config).list_cluster()
    assert sorted(i.node for i in listed) == ["gpu-1", "gpu-2"] and all(i.resume_id for i in listed)

    assert cluster.run("suspend", "gpu-[1-2]") == 0
    assert cluster.live() == {} and cluster.records() == set()


def test_create_fleet_answer_lost_every_time_terminates_what_it_launched(cluster):
    """Every CreateFleet launches and is never answered, until the resume's deadline: the nodes go
    DOWN and every instance any attempt launched is found by its request tag and terminated."""
    cluster.config["resume_timeout_s"] = 6            # a 2 s budget, so the test sees the deadline pass
    cluster.write_config()
    cluster.proxy.drop_after_forward("CreateFleet", times=None)
    assert cluster.run("resume", "gpu-[1-2]") == 1
    assert cluster.down() == {"gpu-1", "gpu-2"}
    assert cluster.proxy.calls["CreateFleet"] >= 2
    assert cluster.live() == {}


# --- throttling (finding 5) ----------------------------------------------------------------


@pytest.mark.parametrize("action", ["CreateFleet", "CreateTags"])
def test_resume_rides_out_throttling(cluster, action):
    """Ten throttled calls in a row (botocore's own retries gave up after 8, and the nodes went DOWN).
    A throttled DescribeInstances: the suspend test below (resume's address wait always retried)."""
    cluster.proxy.throttle(action, times=10)
    assert cluster.run("resume", "gpu-[1-3]") == 0
    assert cluster.down() == set() and cluster.addressed() == {"gpu-1", "gpu-2", "gpu-3"}
    assert sorted(cluster.nodes()) == ["gpu-1", "gpu-2", "gpu-3"]
    assert cluster.records() == {"gpu-1", "gpu-2", "gpu-3"}


@pytest.mark.parametrize("action", ["DescribeInstances", "TerminateInstances"])
def test_suspend_rides_out_throttling(cluster, action):
    """Before: exit 1 after botocore's 8 attempts, the instances left running."""
    assert cluster.run("resume", "gpu-[1-2]") == 0
    cluster.proxy.throttle(action, times=10)
    assert cluster.run("suspend", "gpu-[1-2]") == 0
    assert cluster.live() == {} and cluster.pending() == {} and cluster.records() == set()


# --- suspend that never leaks (finding 2) ----------------------------------------------------


@pytest.mark.parametrize("action", ["suspend", "resume-fail"])
def test_refused_terminate_is_recorded_and_the_names_kept(cluster, action):
    """Before: exit 1, nothing retried it, and the DNS records of the still-running nodes were
    deleted."""
    assert cluster.run("resume", "gpu-[1-2]") == 0
    before = cluster.nodes()
    cluster.proxy.refuse("TerminateInstances")
    assert cluster.run(action, "gpu-[1-2]") == 1
    pending = cluster.pending()
    assert sorted(pending) == ["gpu-1", "gpu-2"]
    for node in ("gpu-1", "gpu-2"):
        assert pending[node]["instances"] == before[node] and pending[node]["action"] == action
        assert "UnauthorizedOperation" in pending[node]["error"] or "refused" in pending[node]["error"]
    assert cluster.records() == {"gpu-1", "gpu-2"}         # their instances still run: names kept
    cluster.assert_nothing_unowned()

    cluster.proxy.clear()                                   # the next try (the loop's, or Slurm's) works
    assert cluster.run(action, "gpu-[1-2]") == 0
    assert cluster.live() == {} and cluster.pending() == {} and cluster.records() == set()


def test_suspend_that_cannot_list_is_recorded_and_the_names_kept(cluster):
    assert cluster.run("resume", "gpu-1") == 0
    cluster.proxy.refuse("DescribeInstances")
    assert cluster.run("suspend", "gpu-1") == 1
    assert cluster.pending()["gpu-1"]["instances"] == []
    assert "UnauthorizedOperation" in cluster.pending()["gpu-1"]["error"]
    assert cluster.records() == {"gpu-1"} and len(cluster.live()) == 1


def test_resume_of_a_node_whose_suspend_failed_keeps_its_instance(cluster):
    """The node comes back on the instance a refused suspend left: it leaves pending-suspend.json,
    so the reconcile loop does not end an instance that is in use again."""
    assert cluster.run("resume", "gpu-1") == 0
    (first,) = cluster.live()
    cluster.proxy.refuse("TerminateInstances")
    assert cluster.run("suspend", "gpu-1") == 1
    cluster.proxy.clear()
    assert cluster.run("resume", "gpu-1") == 0
    assert list(cluster.live()) == [first] and cluster.pending() == {}


# --- duplicate resume (finding 7) --------------------------------------------------------------


def test_duplicate_resume_launches_no_second_instance(cluster):
    assert cluster.run("resume", "gpu-1") == 0
    (first,) = cluster.live()
    record_calls = len(cluster.record.read_text().splitlines())
    assert cluster.run("resume", "gpu-[1-2]") == 0
    assert cluster.nodes()["gpu-1"] == [first]              # the same instance, never a second
    assert len(cluster.nodes()["gpu-2"]) == 1
    later = cluster.record.read_text().splitlines()[record_calls:]
    assert any(line.startswith("update\tnodename=gpu-1") and "nodeaddr=" in line for line in later)  # re-asserted
    assert cluster.down() == set()


# --- per job, all or nothing (finding 9) -------------------------------------------------------


def test_one_jobs_shortfall_does_not_fail_another(cluster, monkeypatch):
    """slurmctld's SLURM_RESUME_FILE names two jobs; the fleet for the three nodes of job 11 comes
    back one short. Before: one all-or-nothing CreateFleet for all five, and job 12 failed too."""
    resume_file = cluster.tmp / "resume.json"
    resume_file.write_text(json.dumps({"all_nodes_resume": "gpu-[1-5]", "jobs": [
        {"job_id": 11, "nodes_alloc": "gpu-[1-3]", "nodes_resume": "gpu-[1-3]", "partition": "gpu"},
        {"job_id": 12, "nodes_alloc": "gpu-[4-5]", "nodes_resume": "gpu-[4-5]", "partition": "gpu"}]}))
    monkeypatch.setenv("SLURM_RESUME_FILE", str(resume_file))
    cluster.proxy.shrink_fleet(capacity=3, to=2)
    assert cluster.run("resume", "gpu-[1-5]") == 1
    assert cluster.down() == {"gpu-1", "gpu-2", "gpu-3"}
    assert cluster.addressed() == {"gpu-4", "gpu-5"}
    assert sorted(cluster.nodes()) == ["gpu-4", "gpu-5"]    # the partial fleet's two are gone
    cluster.assert_nothing_unowned()


def test_partial_fleet_is_terminated(cluster):
    """Kept from before (the old program did this too): a short fleet launches nothing that stays."""
    cluster.proxy.shrink_fleet(capacity=3, to=1)
    assert cluster.run("resume", "gpu-[1-3]") == 1
    assert cluster.down() == {"gpu-1", "gpu-2", "gpu-3"} and cluster.live() == {}


# --- 2,000 nodes under throttling, inside ResumeTimeout (finding 5, deliverable 3) ----------------

NODES = 2000
JOB_SIZE = 8


class VirtualClock:
    """The program's time.monotonic and time.sleep: a sleep advances the clock at once and waits for
    nothing. Every thread's sleeps add up, as if the threads slept one after another, so the clock
    is an upper bound of the time the backoff takes on a real clock. EC2's token buckets refill by
    it too. How long a real resume takes, call latencies and all, is bench/power_resume.py's to
    measure: a test asserts behaviour only."""

    def __init__(self):
        import threading
        import time as real_time

        self.real, self.now, self.lock = real_time, 0.0, threading.Lock()

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        with self.lock:
            self.now += max(seconds, 0.0)

    def __getattr__(self, name):        # time.time, strftime, gmtime: the real ones
        return getattr(self.real, name)


def throttled_ec2(clock: VirtualClock, throttle_first: int):
    """ThrottledEc2 (tests/support/fault_proxy.py) at EC2's documented example rates, a bucket of 100
    tokens refilled at 20 a second per action, refilled by `clock`; the first `throttle_first` calls
    of every action refused outright (a bucket another caller drained)."""
    from tests.support.fault_proxy import ThrottledEc2, TokenBucket

    ec2 = ThrottledEc2(capacity=100, refill=20, throttle_first=throttle_first)
    for action in ("CreateFleet", "CreateTags", "DescribeInstances", "DescribeInstanceStatus", "TerminateInstances"):
        bucket = ec2.buckets[action] = TokenBucket(ec2.capacity, ec2.refill)
        bucket.clock, bucket.at = clock.monotonic, clock.monotonic()
    return ec2


@pytest.fixture
def virtual(tmp_path, monkeypatch):
    """The program on a VirtualClock, one call at a time (so the clock is exactly its backoff time,
    and the run is the same every time: seeded jitter, no threads), with a recording scontrol.
    Yields (clock, scontrol record, the errors it logged)."""
    import random

    scontrol, record = recorder(tmp_path)
    monkeypatch.setenv("AICLUSTER_SCONTROL", str(scontrol))
    monkeypatch.setenv("AICLUSTER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("SLURM_RESUME_FILE", raising=False)
    clock = VirtualClock()
    monkeypatch.setattr(power.core, "time", clock)
    monkeypatch.setattr(power, "time", clock)
    monkeypatch.setattr(power.core, "random", random.Random(24))
    monkeypatch.setattr(power.core, "LAUNCH_PARALLELISM", 1)
    monkeypatch.setattr(power, "TAG_PARALLELISM", 1)
    errors: list[str] = []
    monkeypatch.setattr(power.core.log, "error", lambda message, *args: errors.append(message % args))
    yield clock, record, errors


def virtual_config(nodes: int) -> dict:
    return {"cluster": CLUSTER, "region": REGION, "cluster_tag": "aicluster-cluster", "node_tag": "aicluster-node",
            "pool_tag": "aicluster-pool", "resume_timeout_s": 1800,
            "pools": {"gpu": {"launch_template_id": "lt-0abc", "instance_type": "p5.48xlarge",
                              "capacity": "on-demand", "min_nodes": 0, "max_nodes": nodes}}}


def test_two_thousand_node_resume_under_throttling_finishes_inside_resume_timeout(tmp_path, monkeypatch, virtual):
    """Before: one unbatched CreateFleet of 2,000 and 2,000 CreateTags one after another; the first
    refusal set the nodes DOWN. Under EC2's throttling every node comes up, one fleet per job, and
    the backoff ends well inside the program's deadline (a third of ResumeTimeout; the rest is the
    nodes' boot): on the virtual clock, an upper bound of the real backoff time."""
    clock, record, errors = virtual
    config = virtual_config(NODES)
    nodes = [f"gpu-{n}" for n in range(1, NODES + 1)]
    resume_file = tmp_path / "resume.json"
    resume_file.write_text(json.dumps({"all_nodes_resume": f"gpu-[1-{NODES}]", "jobs": [
        {"job_id": 1000 + j, "nodes_resume": power.compress_hostlist(nodes[j * JOB_SIZE:(j + 1) * JOB_SIZE])}
        for j in range(NODES // JOB_SIZE)]}))
    monkeypatch.setenv("SLURM_RESUME_FILE", str(resume_file))
    ec2 = throttled_ec2(clock, throttle_first=5)

    failed = power.resume(ec2, config, power.expand_hostlist(f"gpu-[1-{NODES}]"))

    assert errors == [] and failed == 0
    assert ec2.throttled["CreateFleet"] >= 5 and ec2.throttled["CreateTags"] >= 5
    assert ec2.calls["CreateFleet"] - ec2.throttled["CreateFleet"] == NODES // JOB_SIZE   # one fleet per job
    assert ec2.calls["CreateTags"] - ec2.throttled["CreateTags"] == NODES                # one tag call a node
    named = {i["Tags"].get("aicluster-node") for i in ec2.live()}
    assert len(ec2.live()) == NODES and named == set(nodes)
    lines = record.read_text().splitlines()
    assert len(lines) == NODES // power.core.SCONTROL_BATCH                  # batched scontrol updates
    assert sum(len(line.split("\t")[1].split(",")) for line in lines) == NODES
    # Throttled for real: refilling 1,900 CreateTags tokens at 20 a second takes 95 s of the clock.
    assert (NODES - 100) / 20 <= clock.now <= power.core.resume_budget_s(config) / 2, clock.now


def test_a_resume_throttled_for_ever_gives_up_at_its_deadline_and_sets_the_nodes_down(virtual, monkeypatch):
    """Every CreateFleet refused: each job's launch is retried until the deadline, never past it,
    and then its nodes go DOWN with the error (slurmctld never waits out ResumeTimeout on them)."""
    clock, record, errors = virtual
    config = virtual_config(16)
    ec2 = throttled_ec2(clock, throttle_first=10**9)
    monkeypatch.setattr(ec2, "describe_instances", lambda **kwargs: {"Reservations": []})   # listing answers

    failed = power.resume(ec2, config, power.expand_hostlist("gpu-[1-16]"))

    budget = power.core.resume_budget_s(config)
    assert failed == 16 and ec2.live() == []
    assert budget - power.core.BACKOFF_CAP_S <= clock.now <= budget       # retried up to the deadline, not past it
    assert 20 <= ec2.calls["CreateFleet"] <= budget / power.core.BACKOFF_BASE_S
    assert [line.split("\t")[:3] for line in record.read_text().splitlines()] == [
        ["update", "nodename=gpu-[1-16]", "state=down"]]
    assert any("create_fleet: giving up after" in e for e in errors)
