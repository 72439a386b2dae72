"""The GCP Slurm power programs (aicluster/node/gcp_power.py).

In process against a stubbed Compute client that records every request (bulkInsert bodies with
their placement, reservation and per-node names, labels, deletions), with a recording `scontrol`;
then as slurmctld runs them, through the aicluster-resume/-suspend links in a subprocess, against
a fake Compute Engine on loopback HTTP (tests/support/fake_gcp.py). The cluster's config is the one
aicluster publishes for the example stacks.
"""
from __future__ import annotations

import ast
import copy
import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from aicluster.design.cluster import design_cluster
from aicluster.gcp.slurm import instance_prefix, published_files
from aicluster.node import aws_power, gcp
from aicluster.node import gcp_power as power
from aicluster.node import slurm as core
from aicluster.spec.cluster import parse_spec
from tests.support import GCP_PROJECT, node_programs, stack_spec
from tests.support.fake_gcp import FakeGcp

SCRIPT = Path(power.__file__)
TEMPLATE = f"https://www.googleapis.com/compute/v1/projects/{GCP_PROJECT}/global/instanceTemplates/gpu-tmpl"
PLACEMENT = f"https://www.googleapis.com/compute/v1/projects/{GCP_PROJECT}/regions/us-east4/resourcePolicies/gpu-placement"


ApiError = gcp.ApiError


def prefix_of(stack: str) -> str:
    return instance_prefix(design_cluster(parse_spec(stack_spec(stack))))


A3MEGA, A3ULTRA = prefix_of("gcp-a3mega-slurm"), prefix_of("gcp-a3ultra-slurm")     # a3mega-train-<digest>-


def config_for(stack: str = "gcp-a3mega-slurm", **pool_edits) -> dict:
    spec = copy.deepcopy(stack_spec(stack))
    for key, value in pool_edits.items():
        spec["pools"][0][key] = value
    design = design_cluster(parse_spec(spec))
    pool = design.pools[0].name
    files = published_files(design, project_id=GCP_PROJECT, controller_addr="10.0.0.2",
                            templates={pool: TEMPLATE},
                            placements={pool: PLACEMENT if design.pools[0].placement.strategy else ""},
                            accounting_secret=None, lustre_imports=[])
    return json.loads(files["aicluster/cluster.json"])


class StubCompute:
    """What aicluster.node.gcp.Compute offers, in memory; every call recorded as (method, args)."""

    def __init__(self, template_labels=None, stockout=None, refuse=None, no_address=()):
        self.calls: list[tuple] = []
        self.instances: dict[str, dict] = {}
        self.template_labels = template_labels or {}
        self.stockout, self.refuse, self.no_address = stockout, refuse, set(no_address)

    def bulk_insert(self, body, request_id):
        self.calls.append(("bulk_insert", copy.deepcopy(body), request_id))
        if self.refuse:
            raise ApiError(403, *self.refuse)
        if not self.stockout:
            for i, name in enumerate(body["perInstanceProperties"]):
                nics = [] if name in self.no_address else [{"networkIP": f"10.0.7.{i + 10}"}]
                self.instances[name] = {"name": name, "status": "RUNNING", "networkInterfaces": nics,
                                        "labels": {**self.template_labels, **body["instanceProperties"]["labels"]}}
        return {"name": "op-bulk", "status": "RUNNING"}

    def wait(self, operation):
        self.calls.append(("wait", operation["name"]))
        done = {"name": operation["name"], "status": "DONE"}
        if self.stockout and operation["name"] == "op-bulk":
            done["error"] = {"errors": [{"code": self.stockout[0], "message": self.stockout[1]}]}
        return done

    def get(self, name):
        self.calls.append(("get", name))
        if name not in self.instances:
            raise ApiError(404, "notFound", f"instance {name} not found")
        return copy.deepcopy(self.instances[name])

    def list(self, filter_):
        self.calls.append(("list", filter_))
        wanted = re.findall(r'labels\.([a-z0-9_-]+) = "([^"]*)"', filter_)
        return [copy.deepcopy(i) for i in self.instances.values()
                if all(i.get("labels", {}).get(k) == v for k, v in wanted)]

    def delete(self, name):
        self.calls.append(("delete", name))
        if name not in self.instances:
            raise ApiError(404, "notFound", name)
        del self.instances[name]
        return {"name": f"op-delete-{name}", "status": "RUNNING"}

    def guest_attribute(self, name, namespace, key):
        self.calls.append(("guest_attribute", name, namespace, key))
        return self.instances[name].get("guest", {}).get(f"{namespace}/{key}")

    def made(self, kind):
        return [c for c in self.calls if c[0] == kind]


class StubDns:
    """What aicluster.node.gcp.Dns offers, in memory: name -> address (and its TTL), with the `scontrol`
    calls made before each write (the record must exist before slurmctld gets the address). A
    change is all or nothing, as Cloud DNS's; a name in `refuse` refuses any call that touches it."""

    def __init__(self, refuse=(), scontrol=lambda: []):
        self.records: dict[str, str] = {}
        self.ttls: dict[str, int] = {}
        self.calls: list[tuple] = []
        self.refuse, self.scontrol = set(refuse), scontrol
        self.before_write: dict[str, list] = {}

    def change(self, additions=(), deletions=()):
        self.calls.append(("change", [r["name"] for r in additions], [r["name"] for r in deletions]))
        if refused := {r["name"] for r in [*additions, *deletions]} & self.refuse:
            raise ApiError(403, "forbidden", f"Forbidden: dns.changes.create on {sorted(refused)[0]}")
        for r in deletions:
            if self.records.get(r["name"]) != r["rrdatas"][0] or self.ttls.get(r["name"], 60) != r["ttl"]:
                raise ApiError(404, "notFound", f"The 'entity.change.deletions' resource named '{r['name']} (A)' "
                                                "does not exist.")
        gone = {r["name"] for r in deletions}
        if taken := [r["name"] for r in additions if r["name"] in self.records and r["name"] not in gone]:
            raise ApiError(409, "alreadyExists", f"'{taken[0]} (A)' already exists")
        for name in gone:
            self.records.pop(name)
        for r in additions:
            self.before_write[r["name"]] = self.scontrol()
            self.records[r["name"]], self.ttls[r["name"]] = r["rrdatas"][0], r["ttl"]
        return {"status": "pending"}

    def list_a(self):
        self.calls.append(("list_a",))
        return {n: {"name": n, "type": "A", "ttl": self.ttls.get(n, 60), "rrdatas": [a]} for n, a in self.records.items()}

    def upsert_a(self, name, address, ttl):
        self.calls.append(("upsert_a", name, address, ttl))
        if name in self.refuse:
            raise ApiError(403, "forbidden", f"Forbidden: dns.resourceRecordSets.create on {name}")
        self.before_write[name] = self.scontrol()
        self.records[name], self.ttls[name] = address, ttl
        return {}

    def delete_a(self, name):
        self.calls.append(("delete_a", name))
        if name in self.refuse:
            raise ApiError(503, "backendError", "try again")
        return self.records.pop(name, None) is not None


def addressed(calls) -> dict[str, tuple[str, str]]:
    """node -> (address, host name) that `scontrol update ... nodeaddr=` calls gave, one node a call
    or several (the lists in the same order)."""
    given = {}
    for call in calls:
        fields = dict(arg.split("=", 1) for arg in call[1:] if "=" in arg)
        if "nodeaddr" in fields:
            given.update(zip(core.expand_hostlist(fields["nodename"]), zip(fields["nodeaddr"].split(","),
                                                                            fields["nodehostname"].split(","))))
    return given


# --- the file itself --------------------------------------------------------------------------


def test_uses_only_the_standard_library_and_the_shared_modules():
    tree = ast.parse(SCRIPT.read_text())
    roots = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    roots |= {node.module.split(".")[0] for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}
    assert {r for r in roots if r not in sys.stdlib_module_names} - {"__future__"} == {"aicluster"}
    assert {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
            and node.module.startswith("aicluster")} == {"aicluster.node", "aicluster.node.gcp", "aicluster.node.slurm"}


def test_shares_one_resume_suspend_core_with_the_aws_program():
    """One implementation of resume, suspend, hostlists, scontrol and DOWN reasons for both clouds:
    each cloud's program holds only its cloud calls (a Cloud and its NodeRecords)."""
    assert aws_power.core is power.core is core
    assert aws_power.expand_hostlist is core.expand_hostlist
    assert issubclass(aws_power.Ec2, core.Cloud) and issubclass(power.Gce, core.Cloud)
    assert issubclass(aws_power.NodeRecords, core.NodeRecords) and issubclass(power.NodeRecords, core.NodeRecords)
    for program in (aws_power, power):
        defined = {name for name, value in vars(program).items()
                   if callable(value) and getattr(value, "__module__", None) == program.__name__}
        assert not defined & {"expand_hostlist", "mark_down", "scontrol", "start", "run_action", "read_config",
                              "resume_nodes"}, defined


# --- resume: bulkInsert ---------------------------------------------------------------------


def test_resume_bulk_inserts_the_pool_from_its_template_into_its_placement(scontrol):
    config = config_for()
    compute = StubCompute(template_labels={"aicluster-cluster": "a3mega-train", "aicluster-pool": "gpu"})

    assert power.resume(compute, config, core.expand_hostlist("gpu-[3-5]")) == 0

    (bulk,) = compute.made("bulk_insert")
    body, request_id = bulk[1], bulk[2]
    assert str(uuid.UUID(request_id)) == request_id                         # GCE's requestId: a UUID
    assert body["count"] == body["minCount"] == 3                           # all or nothing
    assert body["sourceInstanceTemplate"] == TEMPLATE
    assert list(body["perInstanceProperties"]) == [f"{A3MEGA}gpu-3", f"{A3MEGA}gpu-4", f"{A3MEGA}gpu-5"]
    assert body["perInstanceProperties"][f"{A3MEGA}gpu-4"] == {"name": f"{A3MEGA}gpu-4"}
    # The compact placement policy, and the labels every instance is born with: no setLabels.
    assert body["instanceProperties"] == {"resourcePolicies": [PLACEMENT], "labels": {
        "aicluster-cluster": "a3mega-train", "aicluster-pool": "gpu", "aicluster-resume-id": request_id,
        # The pool's version (cluster.json: the template's name), for the reconcile loop's roll.
        "aicluster-node-version": "gpu-tmpl"}}
    assert not compute.made("set_labels") and not compute.made("get")
    assert addressed(scontrol()) == {f"gpu-{n}": (f"10.0.7.{n + 7}", f"{A3MEGA}gpu-{n}") for n in (3, 4, 5)}


def test_reservation_pool_goes_into_its_reservation_without_a_placement_policy(scontrol):
    config = config_for("gcp-a3ultra-slurm")
    compute = StubCompute()
    assert power.resume(compute, config, ["h200-1", "h200-2"]) == 0
    body = compute.made("bulk_insert")[0][1]
    assert body["instanceProperties"]["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION", "key": "compute.googleapis.com/reservation-name",
        "values": ["a3u-dense-reservation"]}
    assert "resourcePolicies" not in body["instanceProperties"]
    assert list(body["perInstanceProperties"]) == [f"{A3ULTRA}h200-1", f"{A3ULTRA}h200-2"]


STOCKOUT = ("ZONE_RESOURCE_POOL_EXHAUSTED",
            "The zone 'projects/p/zones/us-east4-a' does not have enough resources available to fulfill the request.")


def test_stockout_sets_every_node_down_with_the_compute_error(scontrol):
    compute = StubCompute(stockout=STOCKOUT)
    assert power.resume(compute, config_for(), ["gpu-1", "gpu-2"]) == 2
    assert scontrol() == [["update", "nodename=gpu-[1-2]", "state=down",
                           f'reason="{STOCKOUT[0]}: {STOCKOUT[1]}"']]
    assert compute.made("set_labels") == [] and compute.instances == {}


def test_quota_refusal_sets_the_nodes_down(scontrol):
    compute = StubCompute(refuse=("QUOTA_EXCEEDED", "Quota 'GPUS_ALL_REGIONS' exceeded. Limit: 8.0 globally."))
    assert power.resume(compute, config_for(), ["gpu-7"]) == 1
    assert scontrol() == [["update", "nodename=gpu-7", "state=down",
                           "reason=\"QUOTA_EXCEEDED: Quota 'GPUS_ALL_REGIONS' exceeded. Limit: 8.0 globally.\""]]


def test_a_node_whose_instance_has_no_address_goes_down_and_its_instance_is_deleted(scontrol):
    compute = StubCompute(no_address={f"{A3MEGA}gpu-2"})
    assert power.resume(compute, config_for(), ["gpu-1", "gpu-2"]) == 1
    assert ("delete", f"{A3MEGA}gpu-2") in compute.calls
    assert set(compute.instances) == {f"{A3MEGA}gpu-1"}
    # DOWN as soon as its failure is known, before the others get their addresses (as on AWS).
    assert [c[:3] for c in scontrol()] == [["update", "nodename=gpu-2", "state=down"],
                                           ["update", "nodename=gpu-1", "nodeaddr=10.0.7.10"]]
    assert "BadInstance" in scontrol()[0][3]


def test_unknown_pool_and_bad_names_go_down_without_a_call(scontrol):
    compute = StubCompute()
    assert power.resume(compute, config_for(), ["cpu-1", "gpu"]) == 2
    assert compute.calls == []
    reasons = [c[3] for c in scontrol()]
    assert "no pool 'cpu' in cluster a3mega-train" in reasons[0] and "not a <pool>-<n> name" in reasons[1]


def test_large_resumes_are_split_into_bulk_inserts(scontrol, monkeypatch):
    monkeypatch.setattr(power, "BULK_INSERT_LIMIT", 2)
    compute = StubCompute()
    assert power.resume(compute, config_for(), [f"gpu-{n}" for n in range(1, 6)]) == 0
    assert [b[1]["count"] for b in compute.made("bulk_insert")] == [2, 2, 1]


# --- node names in Cloud DNS (SlurmctldParameters=cloud_dns) ----------------------------------


def test_resume_writes_each_nodes_record_before_slurm_gets_its_address(scontrol):
    config = config_for()
    assert (config["dns_zone"], config["dns_domain"]) == ("a3mega-train-nodes", "a3mega-train.aicluster.internal")
    dns = StubDns(scontrol=scontrol)
    assert power.resume(StubCompute(), config, ["gpu-3", "gpu-4"], dns) == 0
    assert dns.records == {"gpu-3.a3mega-train.aicluster.internal.": "10.0.7.10",
                           "gpu-4.a3mega-train.aicluster.internal.": "10.0.7.11"}
    assert set(dns.ttls.values()) == {60}                                      # well under SuspendTimeout
    assert dns.calls == [("change", ["gpu-3.a3mega-train.aicluster.internal.",
                                     "gpu-4.a3mega-train.aicluster.internal."], [])]       # one call for both
    # Each node's record is written before slurmctld learns its address.
    assert not any("nodename=gpu-3" in call for call in dns.before_write["gpu-3.a3mega-train.aicluster.internal."])
    assert addressed(scontrol()) == {"gpu-3": ("10.0.7.10", f"{A3MEGA}gpu-3"),
                                     "gpu-4": ("10.0.7.11", f"{A3MEGA}gpu-4")}


def test_a_node_whose_record_is_refused_goes_down_and_its_instance_is_deleted(scontrol):
    compute = StubCompute()
    dns = StubDns(refuse={"gpu-2.a3mega-train.aicluster.internal."})
    assert power.resume(compute, config_for(), ["gpu-1", "gpu-2"], dns) == 1
    assert set(compute.instances) == {f"{A3MEGA}gpu-1"}
    assert ("delete", f"{A3MEGA}gpu-2") in compute.calls
    assert [c[:3] for c in scontrol()] == [["update", "nodename=gpu-2", "state=down"],
                                           ["update", "nodename=gpu-1", "nodeaddr=10.0.7.10"]]
    assert scontrol()[0][3].startswith('reason="forbidden: Forbidden: dns.resourceRecordSets.create')
    assert list(dns.records) == ["gpu-1.a3mega-train.aicluster.internal."]


def test_a_node_that_fails_after_its_record_was_written_loses_the_record(tmp_path, monkeypatch):
    stub = tmp_path / "scontrol"
    stub.write_text("#!/bin/sh\nexit 1\n")          # slurmctld refuses every update
    stub.chmod(0o755)
    monkeypatch.setenv("AICLUSTER_SCONTROL", str(stub))
    dns = StubDns()
    assert power.resume(StubCompute(), config_for(), ["gpu-1"], dns) == 1
    assert dns.records == {}
    assert ("change", [], ["gpu-1.a3mega-train.aicluster.internal."]) in dns.calls


def test_suspend_deletes_the_records_and_tolerates_missing_ones(scontrol):
    dns = StubDns()
    dns.records = {"gpu-1.a3mega-train.aicluster.internal.": "10.0.7.10",
                   "gpu-9.a3mega-train.aicluster.internal.": "10.0.7.19"}
    assert power.suspend(StubCompute(), config_for(), ["gpu-1", "gpu-2"], dns=dns) == 0   # gpu-2 had none
    assert dns.records == {"gpu-9.a3mega-train.aicluster.internal.": "10.0.7.19"}
    # The zone read once (a deletion names the record as it is), then one change for the records there.
    assert dns.calls == [("list_a",), ("change", [], ["gpu-1.a3mega-train.aicluster.internal."])]


def test_suspend_reports_a_refused_record_deletion():
    dns = StubDns(refuse={"gpu-1.a3mega-train.aicluster.internal."})
    dns.records = {"gpu-1.a3mega-train.aicluster.internal.": "10.0.7.10"}
    assert power.suspend(StubCompute(), config_for(), ["gpu-1"], "resume-fail", dns) == 1
    assert dns.records == {"gpu-1.a3mega-train.aicluster.internal.": "10.0.7.10"}


# --- suspend: deletion by instance name --------------------------------------------------------


def test_suspend_deletes_the_instances_named_for_the_nodes(scontrol):
    """By instance name (the prefix and the node), checked against the cluster label; a node label
    (a user's tag can set one) says nothing."""
    config = config_for()
    compute = StubCompute()
    ours = {"aicluster-cluster": "a3mega-train", "aicluster-pool": "gpu"}
    compute.instances = {
        f"{A3MEGA}gpu-1": {"name": f"{A3MEGA}gpu-1", "labels": {**ours, "aicluster-node": "gpu-9"}},
        f"{A3MEGA}gpu-2": {"name": f"{A3MEGA}gpu-2", "labels": {**ours}},
        f"{A3MEGA}gpu-3": {"name": f"{A3MEGA}gpu-3", "labels": {**ours}},
        f"{A3MEGA}gpu-9": {"name": f"{A3MEGA}gpu-9", "labels": {**ours}},
        "other-gpu-4": {"name": "other-gpu-4", "labels": {"aicluster-cluster": "other", "aicluster-pool": "gpu"}},
    }
    assert power.suspend(compute, config, ["gpu-1", "gpu-2", "gpu-3", "gpu-4"]) == 0
    assert compute.made("list") == [("list", '(labels.aicluster-cluster = "a3mega-train")')]
    assert sorted(c[1] for c in compute.made("delete")) == [f"{A3MEGA}gpu-1", f"{A3MEGA}gpu-2",
                                                             f"{A3MEGA}gpu-3"]
    assert set(compute.instances) == {f"{A3MEGA}gpu-9", "other-gpu-4"}   # not asked for / not ours
    assert scontrol() == []


def test_suspend_reports_a_failed_listing():
    class Broken(StubCompute):
        def list(self, filter_):
            raise ApiError(503, "backendError", "try again")
    assert power.suspend(Broken(), config_for(), ["gpu-1"]) == 1


# --- as slurmctld runs it: links, real REST, fake Compute Engine --------------------------------


@pytest.fixture
def fake():
    server = FakeGcp(project=GCP_PROJECT, zone="us-east4-a", dns_zones={"a3mega-train-nodes"},
                     template_labels={"aicluster-cluster": "a3mega-train", "aicluster-pool": "gpu"}).start()
    yield server
    server.stop()


def run_link(tmp_path, fake, link, hostlist, config):
    bin_dir = tmp_path / "opt" / "bin"
    node_programs.install(bin_dir, ["aicluster-gcp-power.py"])      # as the head has it
    target = bin_dir / link
    if not target.exists():
        target.symlink_to("aicluster-gcp-power.py")
    (tmp_path / "cluster.json").write_text(json.dumps(config))
    env = {**os.environ, **fake.env(), "AICLUSTER_CONFIG": str(tmp_path / "cluster.json"),
           "AICLUSTER_LOG": str(tmp_path / "power.log")}
    return subprocess.run([str(target), hostlist], env=env, capture_output=True, text=True, timeout=120)


def test_resume_and_suspend_links_over_rest(tmp_path, fake, scontrol):
    config = config_for()
    done = run_link(tmp_path, fake, "aicluster-resume", "gpu-[1-2]", config)
    assert done.returncode == 0, done.stderr

    (bulk,) = fake.requests("/zones/us-east4-a/instances/bulkInsert")
    assert bulk.path == f"/compute/v1/projects/{GCP_PROJECT}/zones/us-east4-a/instances/bulkInsert"
    assert bulk.body["minCount"] == 2 and bulk.body["instanceProperties"]["resourcePolicies"] == [PLACEMENT]
    assert fake.requests("/operations/op-bulk-1/wait")
    assert bulk.query["requestId"] == bulk.body["instanceProperties"]["labels"]["aicluster-resume-id"]
    assert {n: i["labels"]["aicluster-resume-id"] for n, i in fake.instances.items()} == {
        f"{A3MEGA}gpu-1": bulk.query["requestId"], f"{A3MEGA}gpu-2": bulk.query["requestId"]}
    assert not fake.requests("/setLabels")
    assert addressed(scontrol()) == {f"gpu-{n}": (fake.address(f"{A3MEGA}gpu-{n}"), f"{A3MEGA}gpu-{n}")
                                     for n in (1, 2)}
    (change,) = fake.dns_calls()                   # both records in one Cloud DNS change
    assert change.path == f"/dns/v1/projects/{GCP_PROJECT}/managedZones/a3mega-train-nodes/changes"
    assert change.body["additions"][0] == {"name": "gpu-1.a3mega-train.aicluster.internal.", "type": "A", "ttl": 60,
                                           "rrdatas": [fake.address(f"{A3MEGA}gpu-1")]}
    assert len(change.body["additions"]) == 2 and change.body["deletions"] == []
    assert fake.addresses_in("a3mega-train-nodes") == {
        f"gpu-{n}.a3mega-train.aicluster.internal.": fake.address(f"{A3MEGA}gpu-{n}") for n in (1, 2)}

    # Launched again (a record left behind): the record is replaced, not refused.
    fake.records[("a3mega-train-nodes", "gpu-3.a3mega-train.aicluster.internal.", "A")] = {
        "name": "gpu-3.a3mega-train.aicluster.internal.", "type": "A", "ttl": 60, "rrdatas": ["10.9.9.9"]}
    assert run_link(tmp_path, fake, "aicluster-resume", "gpu-3", config).returncode == 0
    assert fake.addresses_in("a3mega-train-nodes")["gpu-3.a3mega-train.aicluster.internal."] == \
        fake.address(f"{A3MEGA}gpu-3")
    # Refused as a plain addition (alreadyExists), then replaced: the zone read, the old record
    # deleted and the new one added in one change.
    replaced = fake.requests("/managedZones/a3mega-train-nodes/changes")[-1].body
    assert [r["rrdatas"] for r in replaced["deletions"]] == [["10.9.9.9"]]
    assert [r["name"] for r in replaced["additions"]] == ["gpu-3.a3mega-train.aicluster.internal."]

    done = run_link(tmp_path, fake, "aicluster-suspend", "gpu-[1,3]", config)
    assert done.returncode == 0, done.stderr
    assert sorted(c.path.rsplit("/", 1)[1] for c in fake.calls
                  if c.method == "DELETE" and "/instances/" in c.path) == [f"{A3MEGA}gpu-1", f"{A3MEGA}gpu-3"]
    assert set(fake.instances) == {f"{A3MEGA}gpu-2"}
    assert list(fake.addresses_in("a3mega-train-nodes")) == ["gpu-2.a3mega-train.aicluster.internal."]
    assert f"deleting gpu-1 ({A3MEGA}gpu-1)" in (tmp_path / "power.log").read_text()
    # A node with no record (already deleted) is fine.
    assert run_link(tmp_path, fake, "aicluster-resume-fail", "gpu-1", config).returncode == 0


@pytest.mark.parametrize("failure, reason", [
    (("operation", *STOCKOUT), f"{STOCKOUT[0]}: {STOCKOUT[1]}"),
    (("http", "QUOTA_EXCEEDED", "Quota 'NVIDIA_H100_GPUS' exceeded. Limit: 0.0 in region us-east4."),
     "QUOTA_EXCEEDED: Quota 'NVIDIA_H100_GPUS' exceeded. Limit: 0.0 in region us-east4."),
])
def test_resume_failures_over_rest_set_nodes_down_and_exit_1(tmp_path, fake, scontrol, failure, reason):
    fake.fail_bulk_insert = failure
    done = run_link(tmp_path, fake, "aicluster-resume", "gpu-[3-4]", config_for())
    assert done.returncode == 1
    assert scontrol() == [["update", "nodename=gpu-[3-4]", "state=down", f'reason="{reason}"']]
    assert fake.instances == {} and fake.records == {}


def test_a_refused_record_over_rest_sets_the_node_down(tmp_path, fake, scontrol):
    fake.fail_dns = {"gpu-2.a3mega-train.aicluster.internal."}
    done = run_link(tmp_path, fake, "aicluster-resume", "gpu-[1-2]", config_for())
    assert done.returncode == 1
    assert scontrol()[0][:3] == ["update", "nodename=gpu-2", "state=down"]
    assert "forbidden" in scontrol()[0][3]
    assert scontrol()[1][:2] == ["update", "nodename=gpu-1"]
    assert set(fake.instances) == {f"{A3MEGA}gpu-1"}
    assert list(fake.addresses_in("a3mega-train-nodes")) == ["gpu-1.a3mega-train.aicluster.internal."]


def test_unreadable_config_sets_the_nodes_down(tmp_path, fake, scontrol):
    done = run_link(tmp_path, fake, "aicluster-resume", "gpu-1", {"cluster": "x"})
    assert done.returncode == 1
    assert scontrol()[0][:3] == ["update", "nodename=gpu-1", "state=down"]
    assert "ConfigError" in scontrol()[0][3] and "missing 'project'" in scontrol()[0][3]
    assert fake.calls == []
