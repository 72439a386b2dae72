"""Whose instance is it? The GCP power programs (aicluster/node/gcp_power.py) against the
project's fake Compute Engine (tests/support/fake_gcp.py) through the real REST client. Issue 24.

- A node's name comes from its instance's name (the cluster's instance_prefix + the node), never
  from a label: a user tag `aicluster.node: x` became the label aicluster-node=x on every VM of the
  cluster; suspend then found no instance (it left the VM running and deleted its DNS record) and
  the reconcile loop, seeing only nodes named `x`, deleted every compute VM.
- Two clusters never share an instance name: cluster a3mega-train's pool b-gpu and cluster
  a3mega-train-b's pool gpu were both named a3mega-train-b-gpu-<n>, and a resume of one deleted the
  other's stopped VM or took its running VM's address. The prefix now carries a digest of the
  cluster name, and before any deletion or adoption the instance's cluster label is checked.
- The head and login VMs carry the cluster label but are no pool's instances: the reconcile loop
  never sees them, so never deletes them.
"""
from __future__ import annotations

import copy
import json
import re
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from aicluster.design.cluster import design_cluster
from aicluster.gcp.slurm import instance_prefix, published_files
from aicluster.node import gcp, reconcile
from aicluster.node import gcp_power as power
from aicluster.node import slurm as core
from aicluster.spec.cluster import PoolSpec, parse_spec
from tests.support import GCP_MIN, GCP_PROJECT
from tests.support.contract_plans import NAME_MAX, POOL_MAX
from tests.support.fake_gcp import FakeGcp
from tests.support.reconcile_fakes import FakeSlurm

TEMPLATE = f"https://www.googleapis.com/compute/v1/projects/{GCP_PROJECT}/global/instanceTemplates/gpu-tmpl"
ZONE = GCP_MIN["zone"]
# https://cloud.google.com/compute/docs/naming-resources#resource-name-format
GCE_NAME = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")




def spec_for(name: str, pool: str = "gpu", max_nodes: int = 4) -> dict:
    return {**GCP_MIN, "name": name, "pools": [{**GCP_MIN["pools"][0], "name": pool, "max_nodes": max_nodes}]}


def config_for(name: str, pool: str = "gpu") -> dict:
    """cluster.json as aicluster publishes it for a one-pool cluster."""
    design = design_cluster(parse_spec(spec_for(name, pool)))
    files = published_files(design, project_id=GCP_PROJECT, controller_addr="10.0.0.2", templates={pool: TEMPLATE},
                            placements={pool: ""}, accounting_secret=None, lustre_imports=[])
    return json.loads(files["aicluster/cluster.json"])


CONFIG = config_for("a3mega-train")
OURS = {"aicluster-cluster": "a3mega-train", "aicluster-pool": "gpu"}


@pytest.fixture
def fake(monkeypatch, tmp_path):
    server = FakeGcp(project=GCP_PROJECT, zone=ZONE, dns_zones={CONFIG["dns_zone"]}).start()
    for key, value in {**server.env(), "AICLUSTER_GCP_BACKOFF_S": "0.001",
                       "AICLUSTER_STATE_DIR": str(tmp_path / "state"), "AICLUSTER_LOG": str(tmp_path / "log")}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("SLURM_RESUME_FILE", raising=False)
    yield server
    server.stop()


def compute(config: dict):
    return gcp.Compute(config["project"], config["zone"])


def dns(config: dict):
    return gcp.Dns(config["project"], config["dns_zone"])


def name(config: dict, node: str) -> str:
    return config["instance_prefix"] + node


def add(fake, instance: str, labels: dict, status: str = "RUNNING", age_s: float = 0) -> dict:
    created = datetime.now(timezone.utc) - timedelta(seconds=age_s)
    fake.instances[instance] = {
        "name": instance, "status": status, "labels": dict(labels), "labelFingerprint": "fp0",
        "creationTimestamp": created.isoformat(timespec="milliseconds"),
        "networkInterfaces": [{"networkIP": fake.address(instance)}]}
    return fake.instances[instance]


def deletions(fake) -> list[str]:
    return [c.path.rsplit("/", 1)[1] for c in fake.calls if c.method == "DELETE" and "/instances/" in c.path]


def addresses(calls) -> dict[str, str]:
    """node -> the address `scontrol update nodename=... nodeaddr=...` gave it."""
    given = {}
    for call in calls:
        fields = dict(arg.split("=", 1) for arg in call[1:] if "=" in arg)
        if "nodeaddr" in fields:
            given.update(zip(core.expand_hostlist(fields["nodename"]), fields["nodeaddr"].split(",")))
    return given


def down(calls) -> dict[str, str]:
    """node -> the reason it was set DOWN with."""
    reasons = {}
    for call in calls:
        fields = dict(arg.split("=", 1) for arg in call[1:] if "=" in arg)
        if fields.get("state") == "down":
            reasons.update(dict.fromkeys(core.expand_hostlist(fields["nodename"]), fields.get("reason", "")))
    return reasons


def one_pass(config: dict, nodes: dict[str, str], now: float | None = None) -> int:
    """One reconcile pass over the fake GCE, with slurmctld's nodes as given (FakeSlurm)."""
    cloud = power.Gce(compute(config), config)
    return reconcile.run_pass(cloud, config, None, FakeSlurm(nodes), now)


# --- the names ------------------------------------------------------------------------------


def test_two_clusters_never_name_an_instance_alike():
    """Before: <cluster>-<node>, so a3mega-train's b-gpu-1 and a3mega-train-b's gpu-1 were both
    a3mega-train-b-gpu-1."""
    a, b = config_for("a3mega-train", "b-gpu"), config_for("a3mega-train-b", "gpu")
    assert name(a, "b-gpu-1") != name(b, "gpu-1")
    # Neither prefix starts the other's names, so no node name of one is a name of the other.
    assert not a["instance_prefix"].startswith(b["instance_prefix"])
    assert not b["instance_prefix"].startswith(a["instance_prefix"])


def test_the_prefix_keeps_the_cluster_name_readable_and_the_node_name_whole():
    prefix = CONFIG["instance_prefix"]
    assert re.fullmatch(r"a3mega-train-[0-9a-f]{4}-", prefix), prefix
    assert name(CONFIG, "gpu-12")[len(prefix):] == "gpu-12"         # what the node reads its Slurm name from


def test_the_longest_node_name_is_the_specs():
    """LONGEST_NODE_NAME: a pool name at the spec's cap, '-', and max_nodes at its cap."""
    from aicluster.gcp.slurm import LONGEST_NODE_NAME
    most_nodes = next(m.le for m in PoolSpec.model_fields["max_nodes"].metadata if hasattr(m, "le"))
    assert LONGEST_NODE_NAME == POOL_MAX + 1 + len(str(most_nodes))


@pytest.mark.parametrize("length", range(2, NAME_MAX + 1))
def test_every_name_the_spec_accepts_is_a_compute_engine_name(length):
    """Whatever the cluster name's length, the instance of the longest node the spec accepts for it
    fits Compute Engine's 63 characters: the digest costs no room the spec's own check
    (<cluster>-<pool>-<max_nodes> within 63) did not leave."""
    cluster = ("a" + "b-c" * 20)[:length - 1] + "9"
    for pool_len, digits in ((POOL_MAX, 6), (POOL_MAX, 1), (1, 6), (12, 3)):
        pool = ("p" + "q" * 30)[:pool_len]
        max_nodes = min(10 ** digits - 1, 100_000)
        if len(f"{cluster}-{pool}-{max_nodes}") > 63:
            continue                                    # the spec refuses it
        design = design_cluster(parse_spec(spec_for(cluster, pool, max_nodes)))
        longest = instance_prefix(design) + f"{pool}-{max_nodes}"
        assert len(longest) <= 63 and GCE_NAME.fullmatch(longest), longest


# --- item 2: the node comes from the instance name, whatever the labels say ------------------


def test_a_spoofed_node_label_changes_nothing(fake, scontrol):
    """A user tag aicluster.node: x reached every VM as the label aicluster-node=x. Before: suspend
    found no instance of gpu-1 (its VM kept running, its DNS record was deleted), and the loop saw
    only instances of a node `x`, which slurmctld does not know: it deleted every compute VM."""
    fake.template_labels = {**OURS, "aicluster-node": "x"}
    assert power.resume(compute(CONFIG), CONFIG, ["gpu-1", "gpu-2", "gpu-3"], dns(CONFIG)) == 0
    assert {i["labels"]["aicluster-node"] for i in fake.instances.values()} == {"x"}
    for n in ("head", "login-1"):       # the head and login VMs got the label too
        add(fake, f"a3mega-train-{n}", {"aicluster-cluster": "a3mega-train", "aicluster-role": n.split("-")[0],
                                        "aicluster-node": "x"}, age_s=7200)

    listed = power.Gce(compute(CONFIG), CONFIG).list_cluster()
    assert sorted(i.node for i in listed) == ["gpu-1", "gpu-2", "gpu-3"]

    assert power.suspend(compute(CONFIG), CONFIG, ["gpu-1"], dns=dns(CONFIG)) == 0
    assert deletions(fake) == [name(CONFIG, "gpu-1")]
    assert sorted(fake.addresses_in(CONFIG["dns_zone"])) == [f"gpu-{n}.{CONFIG['dns_domain']}." for n in (2, 3)]

    # A pass long after the grace period: gpu-2 and gpu-3 are up, gpu-1 powered down.
    later = datetime.now(timezone.utc).timestamp() + 7200
    assert one_pass(CONFIG, {"gpu-1": "IDLE+CLOUD+POWERED_DOWN", "gpu-2": "IDLE+CLOUD", "gpu-3": "IDLE+CLOUD"},
                    later) == 0
    assert deletions(fake) == [name(CONFIG, "gpu-1")]
    assert set(fake.instances) == {name(CONFIG, "gpu-2"), name(CONFIG, "gpu-3"), "a3mega-train-head",
                                   "a3mega-train-login-1"}


# --- the head and login VMs are not the loop's ---------------------------------------------------


def test_the_loop_never_deletes_the_head_or_a_login_vm(fake):
    """They carry the cluster label, so a listing by it returns them. Before: the head's name read
    as node `head` and the login VM's as node `login-1`, neither known to slurmctld: orphans,
    deleted once older than the grace period."""
    add(fake, "a3mega-train-head", {"aicluster-cluster": "a3mega-train", "aicluster-role": "head"}, age_s=7200)
    add(fake, "a3mega-train-login-1", {"aicluster-cluster": "a3mega-train", "aicluster-role": "login"}, age_s=7200)
    add(fake, name(CONFIG, "gpu-2"), {**OURS, "aicluster-resume-id": "r-2"}, age_s=7200)
    nodes = {"gpu-1": "IDLE+CLOUD+POWERED_DOWN", "gpu-2": "IDLE+CLOUD+POWERED_DOWN"}
    later = datetime.now(timezone.utc).timestamp() + 7200
    for _ in range(3):
        assert one_pass(CONFIG, nodes, later) == 0
    assert set(fake.instances) == {"a3mega-train-head", "a3mega-train-login-1"}    # gpu-2's orphan went
    assert deletions(fake) == [name(CONFIG, "gpu-2")]
    assert {i.id for i in power.Gce(compute(CONFIG), CONFIG).list_cluster()} == set()


# --- item 3: another cluster's instances are never deleted nor adopted -------------------------


def test_a_resume_leaves_the_instances_of_a_cluster_with_a_similar_name_alone(fake, scontrol):
    """Cluster a3mega-train-b's gpu-1 is stopped (preempted) and its gpu-2 runs. Before: a resume
    of a3mega-train's b-gpu-[1-2] found them under its own names: it deleted the stopped one and
    gave b-gpu-2 the running one's address."""
    a, b = config_for("a3mega-train", "b-gpu"), config_for("a3mega-train-b", "gpu")
    theirs = {"aicluster-cluster": "a3mega-train-b", "aicluster-pool": "gpu"}
    add(fake, name(b, "gpu-1"), theirs, status="TERMINATED")
    add(fake, name(b, "gpu-2"), theirs)
    before = copy.deepcopy(fake.instances)

    assert power.resume(compute(a), a, ["b-gpu-1", "b-gpu-2"]) == 0
    assert deletions(fake) == [] and {n: fake.instances[n] for n in before} == before
    assert addresses(scontrol()) == {n: fake.address(name(a, n)) for n in ("b-gpu-1", "b-gpu-2")}
    assert not set(addresses(scontrol()).values()) & {fake.address(n) for n in before}

    assert power.suspend(compute(a), a, ["b-gpu-1", "b-gpu-2"]) == 0
    assert fake.instances == before


@pytest.mark.parametrize("status", ["RUNNING", "TERMINATED"])
def test_an_instance_of_another_cluster_under_a_nodes_name_is_refused(fake, scontrol, status):
    """Whoever made it (by hand, another tool), an instance named for gpu-1 whose cluster label is
    not this cluster's is neither adopted (running) nor deleted to free the name (stopped): gpu-1
    goes DOWN with the reason, the instance is left as it is."""
    foreign = add(fake, name(CONFIG, "gpu-1"), {"aicluster-cluster": "other", "aicluster-pool": "gpu"}, status=status)
    kept = copy.deepcopy(foreign)

    assert power.resume(compute(CONFIG), CONFIG, ["gpu-1"]) == 1
    assert fake.instances == {name(CONFIG, "gpu-1"): kept} and deletions(fake) == []
    assert addresses(scontrol()) == {}
    reason = down(scontrol())["gpu-1"]
    assert "aicluster-cluster=other" in reason and name(CONFIG, "gpu-1") in reason, reason


def test_a_listing_that_returns_another_clusters_instance_acts_on_nothing_of_it(fake, scontrol):
    """The label filter is the server's; the program checks the label itself. A listing that
    returns an instance of cluster `other` under this cluster's name of gpu-5: suspend does not
    delete it, the loop does not list it, a deletion asked for by name refuses it."""
    fake.list_ignores_labels = True
    foreign = name(CONFIG, "gpu-5")
    add(fake, foreign, {"aicluster-cluster": "other", "aicluster-pool": "gpu"}, age_s=7200)
    add(fake, name(CONFIG, "gpu-6"), OURS, age_s=7200)

    cloud = power.Gce(compute(CONFIG), CONFIG)
    assert [i.id for i in cloud.list_cluster()] == [name(CONFIG, "gpu-6")]
    assert cloud.find(["gpu-5", "gpu-6"]) == {"gpu-6": [name(CONFIG, "gpu-6")]}

    assert power.suspend(compute(CONFIG), CONFIG, ["gpu-5"]) == 0
    later = datetime.now(timezone.utc).timestamp() + 7200
    assert one_pass(CONFIG, {"gpu-5": "IDLE+CLOUD+POWERED_DOWN", "gpu-6": "IDLE+CLOUD"}, later) == 0
    assert power.Gce(compute(CONFIG), CONFIG).delete([foreign]) is True       # nothing of ours to delete
    assert deletions(fake) == [] and set(fake.instances) == {foreign, name(CONFIG, "gpu-6")}


def test_the_instances_listed_are_filled_in_from_their_labels(fake):
    """What core.not_ours and the loop read: the cluster, role and pool labels, the resume id, the
    private address (a node's NodeAddr)."""
    add(fake, name(CONFIG, "gpu-3"), {**OURS, "aicluster-role": "compute", "aicluster-resume-id": "r-3"})
    (listed,) = power.Gce(compute(CONFIG), CONFIG, read_bootstrap_errors=False).list_cluster()
    assert (listed.id, listed.node, listed.pool, listed.resume_id, listed.state) == (
        name(CONFIG, "gpu-3"), "gpu-3", "gpu", "r-3", "running")
    assert (listed.cluster, listed.role, listed.address) == (
        "a3mega-train", "compute", fake.address(name(CONFIG, "gpu-3")))


def test_an_instance_whose_pool_label_disagrees_with_its_name_is_not_the_loops(fake):
    """A node's instance is named <prefix><pool>-<n> and labelled with that pool at creation; one
    whose label names another pool is no node's: left alone. (Which pools the loop acts on is the
    core's rule, core.not_ours.)"""
    add(fake, name(CONFIG, "gpu-3"), {**OURS, "aicluster-pool": "cpu"}, age_s=7200)
    assert power.Gce(compute(CONFIG), CONFIG).list_cluster() == []
    later = datetime.now(timezone.utc).timestamp() + 7200
    assert one_pass(CONFIG, {"gpu-3": "IDLE+CLOUD+POWERED_DOWN"}, later) == 0
    assert power.suspend(compute(CONFIG), CONFIG, ["gpu-3"]) == 0
    assert deletions(fake) == []


# --- clusters created before the digest: their running nodes are still theirs --------------------


def test_instances_named_before_the_digest_are_still_found_and_deleted(fake, scontrol):
    """A cluster upgraded while its nodes run: their instances are named <cluster>-<node>. They
    are still its nodes (cluster and pool labels agree with the name): suspend deletes them and
    the loop does not take them for orphans; a resume names new ones the new way."""
    old = "a3mega-train-gpu-1"
    add(fake, old, {**OURS, "aicluster-resume-id": str(uuid.uuid4())}, age_s=7200)
    add(fake, "a3mega-train-head", {"aicluster-cluster": "a3mega-train", "aicluster-role": "head"}, age_s=7200)
    later = datetime.now(timezone.utc).timestamp() + 7200
    assert one_pass(CONFIG, {"gpu-1": "IDLE+CLOUD", "gpu-2": "IDLE+CLOUD+POWERED_DOWN"}, later) == 0
    assert deletions(fake) == []
    assert {i.id: i.node for i in power.Gce(compute(CONFIG), CONFIG).list_cluster()} == {old: "gpu-1"}
    assert power.suspend(compute(CONFIG), CONFIG, ["gpu-1"]) == 0
    assert deletions(fake) == [old]
    assert power.resume(compute(CONFIG), CONFIG, ["gpu-1"]) == 0
    assert set(fake.instances) == {name(CONFIG, "gpu-1"), "a3mega-train-head"}
