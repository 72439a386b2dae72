"""The GCP power program (aicluster/node/gcp_power.py) under the faults Compute Engine
really shows, against the project's fake GCE on loopback HTTP (tests/support/fake_gcp.py) through
the real REST client (aicluster.node.gcp): lost answers, duplicate resumes, throttling, a stockout
for one job of two, instances whose node label never arrived. Issue 13, findings 6, 7 and 9.

After every scenario no instance runs that no node owns, and no running instance was deleted.
"""
from __future__ import annotations

import copy
import json
import os
import subprocess
import time
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from aicluster.design.cluster import design_cluster
from aicluster.gcp.slurm import instance_prefix, published_files
from aicluster.node import gcp
from aicluster.node import gcp_power as power
from aicluster.node import slurm as core
from aicluster.spec.cluster import parse_spec
from tests.support import GCP_MIN, GCP_PROJECT, node_programs, stack_spec
from tests.support.fake_gcp import FakeGcp

TEMPLATE = f"https://www.googleapis.com/compute/v1/projects/{GCP_PROJECT}/global/instanceTemplates/gpu-tmpl"
CLUSTER = "a3mega-train"
TEMPLATE_LABELS = {"aicluster-cluster": CLUSTER, "aicluster-pool": "gpu"}
PREFIX = instance_prefix(design_cluster(parse_spec(stack_spec("gcp-a3mega-slurm"))))     # a3mega-train-<digest>-




@pytest.fixture(scope="module")
def config() -> dict:
    design = design_cluster(parse_spec(stack_spec("gcp-a3mega-slurm")))
    files = published_files(design, project_id=GCP_PROJECT, controller_addr="10.0.0.2", templates={"gpu": TEMPLATE},
                            placements={"gpu": ""}, accounting_secret=None, lustre_imports=[])
    return json.loads(files["aicluster/cluster.json"])


@pytest.fixture
def fake(config, monkeypatch, tmp_path):
    server = FakeGcp(project=GCP_PROJECT, zone=config["zone"], dns_zones={config["dns_zone"]},
                     template_labels=dict(TEMPLATE_LABELS)).start()
    for key, value in {**server.env(), "AICLUSTER_GCP_BACKOFF_S": "0.001",
                       "AICLUSTER_STATE_DIR": str(tmp_path / "state")}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("SLURM_RESUME_FILE", raising=False)
    yield server
    server.stop()


def updates(calls, key: str) -> dict[str, str]:
    """node -> the value of `key=` (nodeaddr, state) that `scontrol update nodename=...` gave it,
    whether one node a call or several."""
    given = {}
    for call in calls:
        fields = dict(arg.split("=", 1) for arg in call[1:] if "=" in arg)
        if key in fields:
            nodes = core.expand_hostlist(fields["nodename"])
            values = fields[key].split(",") if key == "nodeaddr" else [fields[key]] * len(nodes)
            given.update(zip(nodes, values))
    return given


def down_reasons(calls) -> dict[str, str]:
    reasons = {}
    for call in calls:
        fields = dict(arg.split("=", 1) for arg in call[1:] if "=" in arg)
        if fields.get("state") == "down":
            reasons.update(dict.fromkeys(core.expand_hostlist(fields["nodename"]), fields.get("reason", "")))
    return reasons


def compute(config) -> object:
    return gcp.Compute(config["project"], config["zone"])


def name(node: str) -> str:
    return f"{PREFIX}{node}"


def deletions(fake) -> list[str]:
    return [c.path.rsplit("/", 1)[1] for c in fake.calls if c.method == "DELETE" and "/instances/" in c.path]


def add_instance(fake, node: str | None, *, instance: str | None = None, labels=None, status="RUNNING",
                 age_s: float = 0, **fields) -> dict:
    created = datetime.now(timezone.utc) - timedelta(seconds=age_s)
    doc = {"name": instance or name(node), "status": status, "labels": dict(TEMPLATE_LABELS if labels is None else labels),
           "creationTimestamp": created.isoformat(timespec="milliseconds"), "labelFingerprint": "fp0",
           "networkInterfaces": [{"networkIP": fake.address(instance or name(node))}], **fields}
    fake.instances[doc["name"]] = doc
    return doc


# --- finding 6: a retried or duplicate bulkInsert never deletes healthy instances --------------


def test_a_lost_bulk_insert_answer_is_retried_with_its_request_id_and_creates_nothing_twice(fake, config, scontrol):
    """Before: the retry carried no requestId, Compute Engine refused the names it had just
    created (alreadyExists), and the clean-up deleted both new instances: the nodes went DOWN."""
    fake.lose = {"/instances/bulkInsert": 1}
    assert power.resume(compute(config), config, ["gpu-1", "gpu-2"]) == 0

    first, retry = fake.requests("/instances/bulkInsert")
    assert first.query["requestId"] == retry.query["requestId"]
    assert uuid.UUID(first.query["requestId"])
    assert fake.bulk_count == 1 and deletions(fake) == []
    assert set(fake.instances) == {name("gpu-1"), name("gpu-2")}
    assert {i["labels"]["aicluster-resume-id"] for i in fake.instances.values()} == {first.query["requestId"]}
    assert updates(scontrol(), "nodeaddr") == {n: fake.address(name(n)) for n in ("gpu-1", "gpu-2")}
    assert down_reasons(scontrol()) == {}


def test_a_lost_bulk_insert_answer_through_the_resume_link(fake, config, tmp_path, scontrol):
    """The same fault as slurmctld meets it: the aicluster-resume link in its own process."""
    bin_dir = tmp_path / "opt" / "bin"
    node_programs.install(bin_dir, ["aicluster-gcp-power.py"])      # as the head has it
    (bin_dir / "aicluster-resume").symlink_to("aicluster-gcp-power.py")
    (tmp_path / "cluster.json").write_text(json.dumps(config))
    fake.lose = {"/instances/bulkInsert": 1}
    env = {**os.environ, "AICLUSTER_CONFIG": str(tmp_path / "cluster.json"), "AICLUSTER_LOG": str(tmp_path / "log")}
    done = subprocess.run([str(bin_dir / "aicluster-resume"), "gpu-[1-3]"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert fake.bulk_count == 1 and deletions(fake) == []
    assert set(fake.instances) == {name(f"gpu-{n}") for n in (1, 2, 3)}
    assert not fake.requests("/getGuestAttributes", "GET")       # a resume reads no guest attributes


def test_a_duplicate_resume_while_a_node_runs_keeps_it_and_creates_only_the_others(fake, config, scontrol):
    """Before: the bulkInsert for gpu-[1-3] was refused for gpu-1's name, and the clean-up
    deleted the running gpu-1 (and set all three DOWN)."""
    assert power.resume(compute(config), config, ["gpu-1"]) == 0
    running = dict(fake.instances[name("gpu-1")])

    assert power.resume(compute(config), config, ["gpu-1", "gpu-2", "gpu-3"]) == 0
    assert fake.instances[name("gpu-1")] == running                      # the same instance, untouched
    assert deletions(fake) == []
    second = fake.requests("/instances/bulkInsert")[-1]
    assert sorted(second.body["perInstanceProperties"]) == [name("gpu-2"), name("gpu-3")]
    # Its address is asserted again, as are the new nodes'.
    assert updates(scontrol()[1:], "nodeaddr") == {n: fake.address(name(n)) for n in ("gpu-1", "gpu-2", "gpu-3")}


def test_launch_itself_is_a_no_op_for_a_node_with_a_live_instance(fake, config):
    """The Cloud contract, whoever calls it (the reconcile loop, a core without the live check):
    gpu-1 runs, so launch(gpu-[1-3]) creates gpu-2 and gpu-3 and never touches gpu-1."""
    add_instance(fake, "gpu-1", labels={**TEMPLATE_LABELS, "aicluster-resume-id": "earlier"})
    cloud = power.Gce(compute(config), config)
    request_id = str(uuid.uuid4())
    assert cloud.launch("gpu", ["gpu-1", "gpu-2", "gpu-3"], request_id) == {
        n: name(n) for n in ("gpu-1", "gpu-2", "gpu-3")}
    (bulk,) = fake.requests("/instances/bulkInsert")
    assert sorted(bulk.body["perInstanceProperties"]) == [name("gpu-2"), name("gpu-3")]
    assert fake.instances[name("gpu-1")]["labels"]["aicluster-resume-id"] == "earlier"
    assert deletions(fake) == []


def test_an_instance_that_no_longer_runs_is_replaced_to_free_the_nodes_name(fake, config):
    """A preempted Spot instance left TERMINATED holds gpu-1's name: it is deleted, then the node
    gets a new one."""
    add_instance(fake, "gpu-1", status="TERMINATED", scheduling={"provisioningModel": "SPOT"},
                 labels={**TEMPLATE_LABELS, "aicluster-resume-id": "earlier"})
    cloud = power.Gce(compute(config), config)
    request_id = str(uuid.uuid4())
    cloud.launch("gpu", ["gpu-1"], request_id)
    assert deletions(fake) == [name("gpu-1")]
    assert fake.instances[name("gpu-1")]["labels"]["aicluster-resume-id"] == request_id
    assert fake.instances[name("gpu-1")]["status"] == "RUNNING"


def test_a_failed_launch_deletes_only_what_its_own_request_created(fake, config):
    """The clean-up after a stockout finds instances by the launch's request id, never by name:
    its own leftover goes, another launch's instance of the cluster stays."""
    add_instance(fake, "gpu-9", labels={**TEMPLATE_LABELS, "aicluster-resume-id": "earlier"})
    fake.stockout_names, fake.stockout_leaves = {name("gpu-2")}, 1          # rollback not finished
    cloud = power.Gce(compute(config), config)
    with pytest.raises(core.CloudError) as failed:
        cloud.launch("gpu", ["gpu-1", "gpu-2"], str(uuid.uuid4()))
    assert failed.value.code == "ZONE_RESOURCE_POOL_EXHAUSTED"
    assert deletions(fake) == [name("gpu-1")]                                # the leftover of this launch
    assert set(fake.instances) == {name("gpu-9")}


def test_a_launch_refused_for_a_name_taken_meanwhile_deletes_nothing(fake, config):
    """Another program created gpu-1 between this launch's look-up and its bulkInsert, which
    Compute Engine then refuses whole (alreadyExists). Before: the clean-up deleted every instance
    bearing the launch's names, the other program's running gpu-1 with them."""
    fake.before_bulk_insert = lambda f: f.instances.setdefault(name("gpu-1"), {
        "name": name("gpu-1"), "status": "RUNNING", "labels": {**TEMPLATE_LABELS, "aicluster-resume-id": "other"},
        "networkInterfaces": [{"networkIP": "10.0.0.9"}]})
    cloud = power.Gce(compute(config), config)
    with pytest.raises(core.CloudError) as failed:
        cloud.launch("gpu", ["gpu-1", "gpu-2"], str(uuid.uuid4()))
    assert failed.value.code == "alreadyExists"
    assert deletions(fake) == [] and set(fake.instances) == {name("gpu-1")}


def test_a_lost_set_labels_answer_no_longer_ends_the_node(fake, config, scontrol):
    """Before: the node label came by setLabels; a lost answer was retried with the stale
    fingerprint (412 conditionNotMet) and the node went DOWN, its instance deleted. Now every
    instance is born with its labels and no setLabels is made."""
    fake.lose = {"/setLabels": 1}
    assert power.resume(compute(config), config, ["gpu-4"]) == 0
    assert not fake.requests("/setLabels")
    labels = fake.instances[name("gpu-4")]["labels"]
    assert labels["aicluster-cluster"] == CLUSTER and labels["aicluster-pool"] == "gpu"
    assert uuid.UUID(labels["aicluster-resume-id"])
    assert down_reasons(scontrol()) == {} and deletions(fake) == []


# --- finding 9: one job's stockout fails that job only; batches and backoff -------------------


def test_a_stockout_for_one_job_of_two_fails_that_job_only(fake, config, scontrol, tmp_path, monkeypatch):
    """Before: one all-or-nothing bulkInsert for the pool, so job 2's shortfall set job 1's nodes
    DOWN too. Now one bulkInsert per job (SLURM_RESUME_FILE)."""
    resume_file = tmp_path / "resume.json"
    resume_file.write_text(json.dumps({"all_nodes_resume": "gpu-[1-4]", "jobs": [
        {"job_id": 101, "nodes_resume": "gpu-[1-2]", "nodes_alloc": "gpu-[1-2]", "partition": "gpu"},
        {"job_id": 102, "nodes_resume": "gpu-[3-4]", "nodes_alloc": "gpu-[3-4]", "partition": "gpu"}]}))
    monkeypatch.setenv("SLURM_RESUME_FILE", str(resume_file))
    fake.stockout_names, fake.stockout_leaves = {name("gpu-3")}, 1

    assert power.resume(compute(config), config, core.expand_hostlist("gpu-[1-4]")) == 2

    bulks = fake.requests("/instances/bulkInsert")
    assert sorted(sorted(b.body["perInstanceProperties"]) for b in bulks) == [
        [name("gpu-1"), name("gpu-2")], [name("gpu-3"), name("gpu-4")]]
    assert len({b.query["requestId"] for b in bulks}) == 2
    assert set(fake.instances) == {name("gpu-1"), name("gpu-2")}            # job 2's leftover deleted
    assert deletions(fake) == [name("gpu-3")]
    assert updates(scontrol(), "nodeaddr") == {n: fake.address(name(n)) for n in ("gpu-1", "gpu-2")}
    reasons = down_reasons(scontrol())
    assert sorted(reasons) == ["gpu-3", "gpu-4"]
    assert all("ZONE_RESOURCE_POOL_EXHAUSTED" in r for r in reasons.values())


def test_throttled_calls_are_retried_with_backoff(fake, config, scontrol):
    """Compute Engine refuses a spent rate quota with 403 rateLimitExceeded. Before: not retried
    (only 429 and 5xx were), so every node of the resume went DOWN."""
    fake.throttle = {"/instances/bulkInsert": 2, "/instances": 3, "/wait": 2}
    assert power.resume(compute(config), config, ["gpu-1", "gpu-2"]) == 0
    assert fake.bulk_count == 1 and set(fake.instances) == {name("gpu-1"), name("gpu-2")}
    assert down_reasons(scontrol()) == {}


def test_a_quota_refusal_is_not_retried(fake, config, scontrol):
    fake.fail_bulk_insert = ("http", "QUOTA_EXCEEDED", "Quota 'NVIDIA_H100_GPUS' exceeded. Limit: 0.0 in region.")
    assert power.resume(compute(config), config, ["gpu-1"]) == 1
    assert len(fake.requests("/instances/bulkInsert")) == 1
    assert "QUOTA_EXCEEDED" in down_reasons(scontrol())["gpu-1"]


def test_no_retry_starts_after_the_deadline(fake, config):
    """Throttling that outlasts the resume's budget ends the call instead of outliving
    ResumeTimeout: the core sets the deadline on the cloud, the client honours it."""
    fake.throttle = {"/instances": 100}
    cloud = power.Gce(compute(config), config)
    cloud.deadline = time.monotonic()
    with pytest.raises(core.CloudError) as failed:
        cloud.list_cluster()
    assert failed.value.code == "rateLimitExceeded"
    assert len(fake.requests(f"/zones/{config['zone']}/instances", "GET")) == 1


def test_backoff_is_jittered_and_capped(monkeypatch):
    monkeypatch.setenv("AICLUSTER_GCP_BACKOFF_S", "1")
    waits = [gcp.backoff(attempt) for attempt in range(12) for _ in range(20)]
    assert all(0 <= w <= gcp.BACKOFF_CAP_S for w in waits)
    assert len(set(waits)) > 100                                             # not in step


def test_a_2000_node_resume_under_throttling_makes_a_bounded_number_of_compute_calls(fake, config, scontrol):
    """Before: one GET and one setLabels per node after the bulkInsert (4,000 calls for 2,000
    nodes, each retried under throttling). Now: the bulkInsert, its wait and a few pages of
    listing, whatever the number of nodes; throttling adds only its retries."""
    nodes = [f"gpu-{n}" for n in range(1, 2001)]
    fake.throttle = {"/instances/bulkInsert": 2, "/instances": 2}
    assert power.resume(compute(config), config, nodes) == 0
    compute_calls = [c for c in fake.calls if c.path.startswith("/compute/")]
    assert fake.bulk_count == 1 and len(fake.instances) == 2000
    assert len(compute_calls) <= 2 * (2000 // 500) + 10, [c.path for c in compute_calls]
    assert len(updates(scontrol(), "nodeaddr")) == 2000 and down_reasons(scontrol()) == {}


def test_large_launches_are_split_at_the_bulk_insert_limit(fake, config, scontrol, monkeypatch):
    monkeypatch.setattr(power, "BULK_INSERT_LIMIT", 3)
    assert power.resume(compute(config), config, [f"gpu-{n}" for n in range(1, 8)]) == 0
    assert [b.body["count"] for b in fake.requests("/instances/bulkInsert")] == [3, 3, 1]
    assert len({b.query["requestId"] for b in fake.requests("/instances/bulkInsert")}) == 3


# --- node names in Cloud DNS: changes of up to 1,000 records -----------------------------------


def dns(config):
    return gcp.Dns(config["project"], config["dns_zone"])


def record(config, node: str) -> str:
    return f"{node}.{config['dns_domain']}."


def seed_records(fake, config, nodes) -> None:
    for node in nodes:
        fake.records[(config["dns_zone"], record(config, node), "A")] = {
            "kind": "dns#resourceRecordSet", "name": record(config, node), "type": "A", "ttl": 60,
            "rrdatas": [fake.address(name(node))]}


def test_a_2000_node_resume_writes_its_records_in_two_dns_changes(fake, config, scontrol):
    """Before: one rrsets create per node, one after the other: 2,000 Cloud DNS calls. Now changes
    of up to Cloud DNS's 1,000 additions (the fake refuses a larger one, as Cloud DNS does)."""
    nodes = [f"gpu-{n}" for n in range(1, 2001)]
    assert power.resume(compute(config), config, nodes, dns(config)) == 0
    assert len(fake.dns_calls()) <= -(-2000 // 1000) + 1, len(fake.dns_calls())
    assert all(0 < added <= 1000 and deleted == 0 for added, deleted in fake.dns_changes)
    assert fake.addresses_in(config["dns_zone"]) == {record(config, n): fake.address(name(n)) for n in nodes}
    assert down_reasons(scontrol()) == {}


def test_a_2000_node_suspend_deletes_its_records_in_two_dns_changes(fake, config, scontrol):
    nodes = [f"gpu-{n}" for n in range(1, 2001)]
    seed_records(fake, config, nodes + ["gpu-5000"])
    for node in nodes:
        add_instance(fake, node)
    assert power.suspend(compute(config), config, nodes, dns=dns(config)) == 0
    pages = -(-2001 // fake.dns_page_size)
    assert len(fake.dns_calls()) <= pages + -(-2000 // 1000), len(fake.dns_calls())
    assert all(added == 0 and 0 < deleted <= 1000 for added, deleted in fake.dns_changes)
    assert list(fake.addresses_in(config["dns_zone"])) == [record(config, "gpu-5000")]   # not asked for


def test_a_record_gone_before_its_change_sends_only_its_batch_record_by_record(fake, config, scontrol):
    """A deletion must name a record as it is; one deleted since the zone was read fails its whole
    change (notFound). That batch goes record by record (a missing record is fine); the other
    batch is one change, untouched by it."""
    nodes = [f"gpu-{n}" for n in range(1, 1201)]
    seed_records(fake, config, nodes)
    gone = (config["dns_zone"], record(config, "gpu-7"), "A")
    fake.before_dns_change = lambda f: f.records.pop(gone, None)
    assert power.suspend(compute(config), config, nodes, dns=dns(config)) == 0
    assert fake.addresses_in(config["dns_zone"]) == {}
    one_by_one = [c.path.split("/rrsets/")[1] for c in fake.dns_calls() if c.method == "DELETE"]
    assert len(one_by_one) == 1000 and f"{record(config, 'gpu-7')}/A" in one_by_one
    assert f"{record(config, 'gpu-1200')}/A" not in one_by_one           # the second batch: one change
    assert [deleted for _, deleted in fake.dns_changes] == [1000, 200]


def test_a_refused_record_fails_its_own_node_only(fake, config, scontrol):
    """Cloud DNS refuses the change holding gpu-1100's record: that batch is written record by
    record, so gpu-1100 alone goes DOWN; the first batch's 1,000 records went in one change."""
    nodes = [f"gpu-{n}" for n in range(1, 1201)]
    fake.fail_dns = {record(config, "gpu-1100")}
    assert power.resume(compute(config), config, nodes, dns(config)) == 1
    reasons = down_reasons(scontrol())
    assert list(reasons) == ["gpu-1100"] and "forbidden" in reasons["gpu-1100"]
    written = fake.addresses_in(config["dns_zone"])
    assert len(written) == 1199 and record(config, "gpu-1100") not in written
    assert len([c for c in fake.dns_calls() if c.method == "POST" and c.path.endswith("/rrsets")]) == 200
    assert name("gpu-1100") not in fake.instances                        # its instance deleted, as before


def test_a_change_throttled_past_its_retries_fails_exactly_its_nodes(fake, config, scontrol):
    """The first change is throttled on every one of the client's attempts: its 1,000 nodes go
    DOWN (no record-by-record storm under throttling), the second batch's 500 are written."""
    nodes = [f"gpu-{n}" for n in range(1, 1501)]
    fake.throttle = {"/changes": gcp.ATTEMPTS}
    assert power.resume(compute(config), config, nodes, dns(config)) == 1000
    reasons = down_reasons(scontrol())
    assert sorted(reasons, key=lambda n: int(n.split("-")[1])) == nodes[:1000]
    assert all("rateLimitExceeded" in r for r in reasons.values())
    assert set(fake.addresses_in(config["dns_zone"])) == {record(config, n) for n in nodes[1000:]}
    assert not [c for c in fake.dns_calls() if c.method == "POST" and c.path.endswith("/rrsets")]


def test_a_lost_dns_change_answer_is_not_a_failure(fake, config, scontrol):
    """The change was made, its answer lost; the retry is refused (alreadyExists). The zone is read,
    the records are already right: nothing more to write, no node DOWN."""
    fake.lose = {"/changes": 1}
    nodes = ["gpu-1", "gpu-2", "gpu-3"]
    assert power.resume(compute(config), config, nodes, dns(config)) == 0
    assert down_reasons(scontrol()) == {}
    assert len(fake.dns_changes) == 2                                   # the lost one and its retry
    assert fake.addresses_in(config["dns_zone"]) == {record(config, n): fake.address(name(n)) for n in nodes}


# --- list_cluster: what the reconcile loop sees ----------------------------------------------


def test_list_cluster_finds_every_instance_of_the_clusters_nodes(fake, config):
    """Before: no Gce.list_cluster; suspend found instances only by the node label or a name
    listing. Now every instance labelled for the cluster and named for one of its nodes, all pages,
    with its maintenance, preemption and bootstrap error; not one named for no node (the head,
    a login VM, anything else with the cluster label)."""
    add_instance(fake, "gpu-7")                                              # no resume id
    add_instance(fake, None, instance=f"{PREFIX}stray", labels={"aicluster-cluster": CLUSTER})
    add_instance(fake, "gpu-8", labels={**TEMPLATE_LABELS, "aicluster-resume-id": "r-8"},
                 resourceStatus={"upcomingMaintenance": {"type": "SCHEDULED", "maintenanceStatus": "PENDING",
                                                         "windowStartTime": "2026-11-24T02:00:00Z",
                                                         "windowEndTime": "2026-11-24T06:00:00Z"}})
    add_instance(fake, "gpu-9", status="TERMINATED", scheduling={"provisioningModel": "SPOT"}, age_s=600)
    add_instance(fake, "gpu-10", age_s=60)
    fake.guest_attributes[name("gpu-10")] = {"aicluster/bootstrap-error": "mount /fsx failed: timed out"}
    add_instance(fake, "gpu-11", age_s=7200)                                 # old: not read
    fake.guest_attributes[name("gpu-11")] = {"aicluster/bootstrap-error": "stale"}
    add_instance(fake, "gpu-1", instance="other-gpu-1", labels={"aicluster-cluster": "other"})
    for n in range(100, 620):                                                # more than a page
        add_instance(fake, f"gpu-{n}", age_s=7200)

    listed = {i.id: i for i in power.Gce(compute(config), config).list_cluster()}

    assert len(listed) == 5 + 520 and "other-gpu-1" not in listed and f"{PREFIX}stray" not in listed
    assert len(fake.requests(f"/zones/{config['zone']}/instances", "GET")) == 2       # paged
    plain = listed[name("gpu-7")]
    assert (plain.node, plain.pool, plain.state, plain.resume_id) == ("gpu-7", "gpu", "running", None)
    assert abs(plain.launched_at - time.time()) < 3600
    assert listed[name("gpu-8")].resume_id == "r-8"
    assert listed[name("gpu-8")].events == (
        "maintenance SCHEDULED PENDING from 2026-11-24T02:00:00Z to 2026-11-24T06:00:00Z",)
    assert listed[name("gpu-9")].state == "stopping"
    assert listed[name("gpu-9")].events == ("preempted: SPOT instance TERMINATED",)
    assert listed[name("gpu-10")].bootstrap_error == "mount /fsx failed: timed out"
    assert listed[name("gpu-11")].bootstrap_error is None
    # Guest attributes only for the young running ones (gpu-7, gpu-8, gpu-10).
    assert len(fake.requests("/getGuestAttributes", "GET")) == 3


def test_guest_attribute_reads_are_bounded_per_listing(fake, config, monkeypatch):
    monkeypatch.setattr(power, "GUEST_ATTRIBUTE_READS", 5)
    for n in range(1, 21):
        add_instance(fake, f"gpu-{n}")
    power.Gce(compute(config), config).list_cluster()
    assert len(fake.requests("/getGuestAttributes", "GET")) == 5


def test_suspend_finds_an_instance_whose_node_label_never_arrived(fake, config, scontrol):
    add_instance(fake, "gpu-5")
    add_instance(fake, "gpu-6")
    assert power.suspend(compute(config), config, ["gpu-5"]) == 0
    assert deletions(fake) == [name("gpu-5")] and set(fake.instances) == {name("gpu-6")}


# --- where the bootstrap error comes from: the template and the head's role ---------------------


def test_nodes_may_write_guest_attributes_and_the_head_may_read_them(plan_spec):
    """The node writes aicluster/bootstrap-error through the metadata server, which Compute Engine
    refuses unless the instance enables guest attributes; the head reads it with
    instances.getGuestAttributes. Before: neither."""
    spec = copy.deepcopy(GCP_MIN)
    spec["pools"][0].update(instance_type="a3-megagpu-8g", max_nodes=4)
    plan = plan_spec(spec)
    (template,) = plan.of_type("gcp:compute/instanceTemplate:InstanceTemplate")
    assert template.inputs["metadata"]["enable-guest-attributes"] == "TRUE"
    role = plan.named("test-slurm-config-head-role", "gcp:projects/iAMCustomRole:IAMCustomRole")
    assert "compute.instances.getGuestAttributes" in role.inputs["permissions"]
    assert core.BOOTSTRAP_ERROR_ATTRIBUTE == ("aicluster", "bootstrap-error")
