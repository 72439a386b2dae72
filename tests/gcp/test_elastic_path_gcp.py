"""The whole elastic path on GCP, with real programs end to end: a job submitted to a real slurmctld
(reading the configuration rendered for gcp-a3mega-slurm) makes it call the real ResumeProgram
(aicluster-gcp-power.py), which creates the nodes with one bulkInsert against a fake Compute
Engine, labelled at creation with the cluster and the launch's request id, writes their names into the cluster's Cloud DNS zone
(cloud_dns: node names must resolve) and hands their addresses back to slurmctld."""
from __future__ import annotations

import json

import pytest

from aicluster.design.cluster import design_cluster
from aicluster.gcp.slurm import instance_prefix, published_files
from aicluster.spec.cluster import parse_spec
from tests.support import GCP_PROJECT, stack_spec
from tests.support.fake_gcp import FakeGcp
from tests.support.gcp_head import GcpHeadController
from tests.support.slurmctld import fields, wait_for

TEMPLATE = f"projects/{GCP_PROJECT}/global/instanceTemplates/a3mega-train-gpu-x"
PLACEMENT = f"projects/{GCP_PROJECT}/regions/us-east4/resourcePolicies/a3mega-train-gpu-placement"


@pytest.fixture
def elastic(tmp_path):
    design = design_cluster(parse_spec(stack_spec("gcp-a3mega-slurm")))
    fake = FakeGcp(project=GCP_PROJECT, zone=design.zone, dns_zones={f"{design.name}-nodes"},
                   template_labels={"aicluster-cluster": design.name, "aicluster-pool": "gpu"}).start()
    files = published_files(design, project_id=GCP_PROJECT, controller_addr="127.0.0.1",
                            templates={"gpu": TEMPLATE}, placements={"gpu": PLACEMENT}, accounting_secret=None,
                            lustre_imports=[])
    cluster_json = tmp_path / "cluster.json"
    cluster_json.write_text(files["aicluster/cluster.json"])
    controller = GcpHeadController("gcp-elastic", design, tmp_path / "slurm")
    controller.cluster_json, controller.fake_env = cluster_json, fake.env()
    controller.extra_env = {"AICLUSTER_STATE_DIR": str(tmp_path / "state")}
    try:
        controller.start()
        yield controller, fake
    finally:
        controller.stop()
        fake.stop()


def test_job_creates_labelled_nodes_through_bulk_insert_and_slurm_learns_their_addresses(elastic):
    ctl, fake = elastic
    ctl.run("sbatch", "-N", "2", "-p", "gpu", "-o", str(ctl.root / "job-%j.out"), "--wrap", "hostname")

    def labelled():
        with fake.lock:
            return {n: i for n, i in fake.instances.items() if i["labels"].get("aicluster-resume-id")}

    prefix = instance_prefix(ctl.design)                    # a3mega-train-<digest>-
    wait_for("two labelled instances for gpu-1 and gpu-2",
             lambda: {f"{prefix}gpu-1", f"{prefix}gpu-2"} <= set(labelled()), 60, ctl.diagnostics)
    (bulk,) = fake.requests("/instances/bulkInsert")
    assert bulk.body["sourceInstanceTemplate"] == TEMPLATE
    assert bulk.body["instanceProperties"] == {"resourcePolicies": [PLACEMENT], "labels": {
        "aicluster-cluster": "a3mega-train", "aicluster-pool": "gpu", "aicluster-resume-id": bulk.query["requestId"],
        # the pool's version (cluster.json): the reconcile loop rolls instances of another
        "aicluster-node-version": TEMPLATE.rsplit("/", 1)[1]}}
    assert {i["labels"]["aicluster-resume-id"] for i in labelled().values()} == {bulk.query["requestId"]}
    assert sorted(bulk.body["perInstanceProperties"]) == [f"{prefix}gpu-1", f"{prefix}gpu-2"]
    assert bulk.body["count"] == bulk.body["minCount"] == 2

    def addresses():
        return {n: fields(ctl.run("scontrol", "-o", "show", "node", n)).get("NodeAddr") for n in ("gpu-1", "gpu-2")}

    wait_for("slurmctld to learn the nodes' addresses",
             lambda: addresses() == {n: fake.address(f"{prefix}{n}") for n in ("gpu-1", "gpu-2")},
             60, ctl.diagnostics)
    node = fields(ctl.run("scontrol", "-o", "show", "node", "gpu-1"))
    assert node["NodeHostName"] == f"{prefix}gpu-1"
    # Every node name resolves, to the address slurmctld has: the records of the job's nodes.
    assert fake.addresses_in("a3mega-train-nodes") == {
        f"{n}.a3mega-train.aicluster.internal.": fake.address(f"{prefix}{n}") for n in ("gpu-1", "gpu-2")}
    assert json.loads(ctl.cluster_json.read_text())["pools"]["gpu"]["instance_template"] == TEMPLATE
