"""The reconcile loop and the AWS power program on moto's EC2 and Route 53 server (loopback), with
the head and login nodes in the fleet as aicluster launches them, in process, slurmctld as a
FakeSlurm (tests/support/reconcile_fakes.py): what the loop and the programs may end (issue 24,
findings 1, 3 and 6). tests/slurm/test_reconcile_aws.py runs the same against a real slurmctld.

The invariant after every scenario: each live instance of a pool belongs to a powered-up node, the
head and login nodes run on, and another cluster's instances are never touched.
"""
from __future__ import annotations

import logging
import time

import pytest

from tests.support.aws_power import REGION, load_power, moto_cluster
from aicluster.node import reconcile
from tests.support.reconcile_fakes import FakeSlurm
from tests.support.scontrol_recorder import calls, recorder

CLUSTER = "p5-train"
DOMAIN = "p5-train.aicluster.internal"
LIVE = ["pending", "running", "stopping", "stopped"]
UP, OFF = "IDLE+CLOUD", "IDLE+CLOUD+POWERED_DOWN"

power = load_power()


class Fleet:
    """moto with the cluster's network, gpu pool template and zone; the head (termination
    protection on, as SlurmController creates it) and a login node, tagged as aicluster tags them:
    the cluster and their role, no pool, no node."""

    def __init__(self, endpoint: str, tmp_path, monkeypatch):
        aws = moto_cluster(endpoint, CLUSTER, {"gpu": "p5.48xlarge"}, DOMAIN)
        self.ec2, self.route53, self.aws = aws.ec2, aws.route53, aws
        self.config = {
            "cluster": CLUSTER, "region": REGION, "cluster_tag": "aicluster-cluster", "node_tag": "aicluster-node",
            "pool_tag": "aicluster-pool", "resume_timeout_s": 600, "hosted_zone_id": aws.zone_id, "dns_domain": DOMAIN,
            "pools": {"gpu": {"launch_template_id": aws.templates["gpu"], "instance_type": "p5.48xlarge",
                              "capacity": "on-demand", "min_nodes": 0, "max_nodes": 8}},
        }
        stub, self.record = recorder(tmp_path)
        monkeypatch.setenv("AICLUSTER_SCONTROL", str(stub))
        monkeypatch.setenv("AICLUSTER_STATE_DIR", str(tmp_path / "state"))
        monkeypatch.delenv("SLURM_RESUME_FILE", raising=False)
        self.head = self.run_instance({"aicluster-role": "head", "Name": f"{CLUSTER}-head"}, protected=True)
        self.login = self.run_instance({"aicluster-role": "login", "Name": f"{CLUSTER}-login-1"})

    def run_instance(self, tags: dict[str, str], *, cluster: str = CLUSTER, protected: bool = False) -> str:
        iid = self.ec2.run_instances(
            ImageId=self.aws.image, MinCount=1, MaxCount=1, SubnetId=self.aws.subnet,
            TagSpecifications=[{"ResourceType": "instance", "Tags": [
                {"Key": k, "Value": v} for k, v in {"aicluster-cluster": cluster, **tags}.items()]}],
        )["Instances"][0]["InstanceId"]
        if protected:       # moto's RunInstances ignores DisableApiTermination; its attribute call does not
            self.ec2.modify_instance_attribute(InstanceId=iid, DisableApiTermination={"Value": True})
            with pytest.raises(Exception, match="OperationNotPermitted"):
                self.ec2.terminate_instances(InstanceIds=[iid])
        return iid

    def stray(self, cluster: str = CLUSTER, **tags: str) -> str:
        """An instance a resume launched (CreateFleet's tags) whose node-name tag never came."""
        return self.run_instance({"aicluster-pool": "gpu", "aicluster-resume-id": "r-lost", **tags}, cluster=cluster)

    def live(self) -> dict[str, dict[str, str]]:
        """instance id -> tags, of every live instance (any cluster)."""
        reservations = self.ec2.describe_instances(Filters=[{"Name": "instance-state-name", "Values": LIVE}])
        return {i["InstanceId"]: {t["Key"]: t["Value"] for t in i.get("Tags", [])}
                for r in reservations["Reservations"] for i in r["Instances"]}

    def address(self, iid: str) -> str:
        return self.ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]["PrivateIpAddress"]

    def cloud(self, ec2=None):
        return power.Ec2(ec2 or self.ec2, self.config)

    def records(self) -> dict[str, list[str]]:
        sets = self.route53.list_resource_record_sets(HostedZoneId=self.aws.zone_id)["ResourceRecordSets"]
        return {r["Name"].split(".")[0]: [v["Value"] for v in r["ResourceRecords"]] for r in sets if r["Type"] == "A"}

    def dns(self):
        return power.NodeRecords(self.route53, self.aws.zone_id, DOMAIN)

    def reconcile(self, slurm: FakeSlurm, ec2=None, dns=None) -> int:
        """One pass, an hour from now: every instance is past the grace period."""
        return reconcile.run_pass(self.cloud(ec2), self.config, dns, slurm, time.time() + 3600)

    def broken(self, slurm: FakeSlurm, untouchable=()) -> list[str]:
        """The invariant: what breaks it, or []."""
        live, problems = self.live(), []
        for iid in (self.head, self.login, *untouchable):
            if iid not in live:
                problems.append(f"{iid} ({live.get(iid)}) was ended")
        for iid, tags in live.items():
            if tags.get("aicluster-cluster") != CLUSTER or "aicluster-pool" not in tags:
                continue
            node = slurm.node(tags.get("aicluster-node", ""))
            if node is None or "POWERED_DOWN" in node.states:
                problems.append(f"{iid} runs for {tags.get('aicluster-node')} ({node and node.describe()})")
        return problems


class FilterLost:
    """The EC2 client with DescribeInstances' cluster-tag filter dropped: a listing that returns every
    cluster's instances (a bug, a changed tag key), which the programs must not trust."""

    def __init__(self, ec2):
        self.ec2 = ec2

    def __getattr__(self, name):
        return getattr(self.ec2, name)

    def describe_instances(self, Filters=(), **kwargs):
        kept = [f for f in Filters if not f["Name"].startswith("tag:aicluster-cluster")]
        return self.ec2.describe_instances(Filters=kept, **kwargs)


@pytest.fixture
def fleet(moto_endpoint, tmp_path, monkeypatch):
    return Fleet(moto_endpoint, tmp_path, monkeypatch)


# --- the head and login nodes are never strays (finding 1) -------------------------------------


def test_head_and_login_survive_every_pass_and_the_real_stray_is_ended(fleet):
    """Before, the head and login nodes (cluster tag, no node name) were strays: the pass put them
    in one TerminateInstances with the real stray, EC2 refused the batch for the head's termination
    protection, the stray ran on and every pass exited 1."""
    stray = fleet.stray()
    assert power.core.resume(fleet.cloud(), fleet.config, ["gpu-1"]) == 0
    slurm = FakeSlurm({"gpu-1": UP, "gpu-2": OFF})
    for _ in range(3):
        assert fleet.reconcile(slurm) == 0
    live = fleet.live()
    assert fleet.head in live and fleet.login in live and stray not in live
    assert [t.get("aicluster-node") for t in live.values() if "aicluster-pool" in t] == ["gpu-1"]
    assert fleet.broken(slurm) == []


def test_one_instance_ec2_may_not_end_keeps_no_other_running(fleet):
    """A TerminateInstances batch that holds one protected instance: EC2 (and moto) refuse all of
    it; the batch is tried again one by one, so only the protected one is refused."""
    strays = [fleet.stray(), fleet.stray()]
    cloud = fleet.cloud()
    assert cloud.delete_refused([strays[0], fleet.head, strays[1]]) == [fleet.head]
    assert set(fleet.live()) == {fleet.head, fleet.login}
    assert cloud.delete_refused(strays) == []           # terminating again is fine


# --- another cluster's instances (finding 3) ---------------------------------------------------


def test_a_listing_that_returns_another_clusters_instances_never_ends_or_adopts_them(fleet):
    """Their gpu-1 and their stray come back from every listing. Resume must launch our own gpu-1
    (before, it adopted theirs and handed slurmctld its address), suspend must end only ours, and
    the loop must leave theirs alone while our gpu-1 is powered down."""
    theirs = fleet.stray(cluster="other", **{"aicluster-node": "gpu-1"})
    their_stray = fleet.stray(cluster="other")
    lost = FilterLost(fleet.ec2)
    assert power.core.resume(fleet.cloud(lost), fleet.config, ["gpu-1"]) == 0
    (ours,) = [iid for iid, t in fleet.live().items() if t.get("aicluster-node") == "gpu-1" and iid != theirs]
    assert [c[2] for c in calls(fleet.record)] == [f"nodeaddr={fleet.address(ours)}"]

    assert power.core.suspend(fleet.cloud(lost), ["gpu-1"]) == 0
    assert ours not in fleet.live()
    slurm = FakeSlurm({"gpu-1": OFF})
    for _ in range(2):
        assert fleet.reconcile(slurm, ec2=lost) == 0
    assert fleet.broken(slurm, untouchable=(theirs, their_stray)) == []


# --- two instances of one node (finding 6) -----------------------------------------------------


def test_two_resumes_of_one_node_at_once_leave_it_one_instance(fleet, monkeypatch):
    """Both resumes list the cluster before either has launched, so each launches gpu-1; the second
    hands slurmctld its address last, the first writes the node's name last. The loop ends the
    first's instance (never the one at NodeAddr) and points the name at the one kept."""
    real_live = power.core.live_instances
    monkeypatch.setattr(power.core, "live_instances", lambda *args, **kwargs: {})
    dns = fleet.dns()
    assert power.core.resume(fleet.cloud(), fleet.config, ["gpu-1"], dns) == 0
    (first,) = [iid for iid, t in fleet.live().items() if t.get("aicluster-node") == "gpu-1"]
    assert power.core.resume(fleet.cloud(), fleet.config, ["gpu-1"], dns) == 0
    (second,) = [iid for iid, t in fleet.live().items() if t.get("aicluster-node") == "gpu-1" and iid != first]
    dns.upsert({"gpu-1": fleet.address(first)})
    monkeypatch.setattr(power.core, "live_instances", real_live)
    node_addr = calls(fleet.record)[-1][2].removeprefix("nodeaddr=")
    assert node_addr == fleet.address(second)

    slurm = FakeSlurm({"gpu-1": "ALLOCATED+CLOUD"}, busy={"gpu-1"}, addrs={"gpu-1": node_addr})
    for _ in range(2):
        assert fleet.reconcile(slurm, dns=dns) == 0
    named = [iid for iid, t in fleet.live().items() if t.get("aicluster-node") == "gpu-1"]
    assert named == [second]
    assert fleet.records() == {"gpu-1": [node_addr]}
    assert slurm.updates == [] and fleet.broken(slurm) == []


def test_the_loop_says_what_it_leaves_alone(fleet, caplog, monkeypatch):
    monkeypatch.setattr(power.core.log, "propagate", True)
    caplog.set_level(logging.INFO, logger=power.core.log.name)
    theirs = fleet.stray(cluster="other")
    assert fleet.reconcile(FakeSlurm({"gpu-1": OFF}), ec2=FilterLost(fleet.ec2)) == 0
    assert f"{fleet.head} (it is a head instance)" in caplog.text
    assert f"{fleet.login} (it is a login instance)" in caplog.text
    errors = {r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR}
    assert errors == {f"reconcile: the listing returned {theirs}, which is not this cluster's: it carries cluster "
                      f"'other', not '{CLUSTER}'; never touched"}


# --- the roll: launch the pool's version exactly, tagged (issue 26, item 4) ---------------------


def new_version(fleet, image: str) -> str:
    """A new version of the gpu template, booting `image` (what `pulumi up` makes of an image edit)."""
    return str(fleet.ec2.create_launch_template_version(
        LaunchTemplateId=fleet.aws.templates["gpu"], SourceVersion="1",
        LaunchTemplateData={"ImageId": image})["LaunchTemplateVersion"]["VersionNumber"])


def image_of(fleet, iid: str) -> str:
    return fleet.ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]["ImageId"]


def test_resume_launches_the_pools_version_not_the_latest_and_tags_it(fleet):
    images = [i["ImageId"] for i in fleet.ec2.describe_images(Owners=["amazon"])["Images"]]
    second, third = [i for i in images if i != fleet.aws.image][:2]     # moto has dozens
    assert new_version(fleet, second) == "2"
    new_version(fleet, third)           # a version `pulumi up` made that cluster.json does not name yet
    fleet.config["pools"]["gpu"]["version"] = "2"
    assert power.fleet_request(fleet.config, "gpu", 1, "r-1")["LaunchTemplateConfigs"][0][
        "LaunchTemplateSpecification"]["Version"] == "2"
    assert power.core.resume(fleet.cloud(), fleet.config, ["gpu-1"]) == 0
    (iid,) = [iid for iid, t in fleet.live().items() if t.get("aicluster-node") == "gpu-1"]
    assert image_of(fleet, iid) == second
    assert fleet.live()[iid]["aicluster-node-version"] == "2"
    (listed,) = [i for i in fleet.cloud().list_cluster() if i.node == "gpu-1"]
    assert listed.version == "2"


def test_a_cluster_json_without_versions_launches_latest_untagged(fleet):
    assert power.fleet_request(fleet.config, "gpu", 1)["LaunchTemplateConfigs"][0][
        "LaunchTemplateSpecification"]["Version"] == "$Latest"
    assert power.core.resume(fleet.cloud(), fleet.config, ["gpu-1"]) == 0
    (tags,) = [t for t in fleet.live().values() if t.get("aicluster-node") == "gpu-1"]
    assert "aicluster-node-version" not in tags


def test_an_idle_node_on_the_old_version_is_replaced_by_one_on_the_new(fleet):
    fleet.config["pools"]["gpu"].update(version="1", max_unavailable=1)
    assert power.core.resume(fleet.cloud(), fleet.config, ["gpu-1", "gpu-2"]) == 0
    old = {t["aicluster-node"]: iid for iid, t in fleet.live().items() if "aicluster-node" in t}
    images = [i["ImageId"] for i in fleet.ec2.describe_images(Owners=["amazon"])["Images"]]
    fleet.config["pools"]["gpu"]["version"] = new_version(fleet, next(i for i in images if i != fleet.aws.image))
    slurm = FakeSlurm({"gpu-1": UP, "gpu-2": "ALLOCATED+CLOUD"}, busy={"gpu-2"})
    assert fleet.reconcile(slurm) == 0
    assert slurm.actions() == [("gpu-1", "state=power_down_force")]      # budget 1: gpu-2's job runs on
    # slurmctld's SuspendProgram, then the node's next resume.
    assert power.core.suspend(fleet.cloud(), ["gpu-1"]) == 0
    assert power.core.resume(fleet.cloud(), fleet.config, ["gpu-1"]) == 0
    live = fleet.live()
    (new,) = [iid for iid, t in live.items() if t.get("aicluster-node") == "gpu-1"]
    assert old["gpu-1"] not in live and old["gpu-2"] in live
    assert live[new]["aicluster-node-version"] == "2" and live[old["gpu-2"]]["aicluster-node-version"] == "1"
    assert fleet.broken(FakeSlurm({"gpu-1": UP, "gpu-2": "ALLOCATED+CLOUD"})) == []


def test_an_instance_without_the_version_tag_is_judged_by_ec2s_launch_template_tag():
    """Launched by a resume program from before the tag: EC2's own aws:ec2launchtemplate:version says which."""
    config = {"node_tag": "aicluster-node", "pool_tag": "aicluster-pool", "cluster_tag": "aicluster-cluster"}
    tags = [{"Key": "aicluster-node", "Value": "gpu-1"}, {"Key": "aws:ec2launchtemplate:version", "Value": "3"}]
    assert power.Ec2(None, config).instance_of({"InstanceId": "i-1", "Tags": tags}).version == "3"
    tags.append({"Key": "aicluster-node-version", "Value": "4"})
    assert power.Ec2(None, config).instance_of({"InstanceId": "i-1", "Tags": tags}).version == "4"
