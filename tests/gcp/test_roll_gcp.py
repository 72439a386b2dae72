"""The roll on GCP (issue 26, item 4): the resume program creates a pool's nodes from the instance
template cluster.json names and labels each with its version (the template's name); after a
`pulumi up` that made a new template (a new name: name_prefix), the reconcile loop powers down the
idle nodes still on the old one, within the pool's max_unavailable, and a node's next resume is on
the new one. In process, against the fake Compute Engine on loopback HTTP
(tests/support/fake_gcp.py), slurmctld a FakeSlurm; tests/slurm/test_reconcile_roll.py runs the
roll against a real slurmctld and slurmd."""
from __future__ import annotations

import io
import json
import time

import pytest

from aicluster.design.cluster import design_cluster
from aicluster.gcp.slurm import published_files, template_version
from aicluster.node import gcp
from aicluster.node import gcp_power as power
from aicluster.node import reconcile
from aicluster.spec.cluster import parse_spec
from tests.support import GCP_PROJECT
from tests.support.fake_gcp import FakeGcp
from tests.support.reconcile_fakes import FakeSlurm, core

SPEC = {"name": "roll", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a",
        "pools": [{"name": "gpu", "instance_type": "h100", "min_nodes": 1, "max_nodes": 4, "max_unavailable": 1}]}
TEMPLATES = f"https://www.googleapis.com/compute/v1/projects/{GCP_PROJECT}/global/instanceTemplates/"
OLD_TEMPLATE = TEMPLATES + "roll-gpu-20261128083000000000000001"
NEW_TEMPLATE = TEMPLATES + "roll-gpu-20261128093000000000000002"
UP, OFF, BUSY = "IDLE+CLOUD", "IDLE+CLOUD+POWERED_DOWN", "ALLOCATED+CLOUD"


def cluster_json(template: str) -> dict:
    design = design_cluster(parse_spec(SPEC))
    files = published_files(design, project_id=GCP_PROJECT, controller_addr="10.0.0.2", templates={"gpu": template},
                            placements={"gpu": ""}, accounting_secret=None, lustre_imports=[])
    return json.loads(files["aicluster/cluster.json"])


@pytest.fixture
def fake(monkeypatch, tmp_path):
    design = design_cluster(parse_spec(SPEC))
    fake = FakeGcp(project=GCP_PROJECT, zone=design.zone,
                   template_labels={"aicluster-cluster": design.name, "aicluster-pool": "gpu",
                                    "aicluster-role": "compute"}).start()
    for key, value in fake.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AICLUSTER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("AICLUSTER_TEXTFILE_DIR", str(tmp_path / "textfile"))
    monkeypatch.setenv("AICLUSTER_GCP_BACKOFF_S", "0.01")
    monkeypatch.setenv("AICLUSTER_SCONTROL", "true")       # the resume program's `scontrol update nodeaddr=`
    yield fake
    fake.stop()


def cloud(config: dict) -> power.Gce:
    return power.Gce(gcp.Compute(config["project"], config["zone"]), config, read_bootstrap_errors=False)


def versions(fake: FakeGcp) -> dict[str, tuple[str, str]]:
    """instance -> (its version label, the template it was made from)."""
    with fake.lock:
        return {name: (i["labels"].get(core.VERSION_TAG), i["sourceInstanceTemplate"])
                for name, i in fake.instances.items()}


def test_cluster_json_names_the_template_as_the_version():
    config = cluster_json(OLD_TEMPLATE)
    assert config["pools"]["gpu"]["version"] == "roll-gpu-20261128083000000000000001"
    assert config["pools"]["gpu"]["max_unavailable"] == 1
    assert template_version(OLD_TEMPLATE) == power.label_value(template_version(OLD_TEMPLATE))   # a label value


def test_idle_old_nodes_are_replaced_from_the_new_template(fake):
    old = cluster_json(OLD_TEMPLATE)
    assert power.core.resume(cloud(old), old, ["gpu-1", "gpu-2", "gpu-3"]) == 0
    first = versions(fake)
    assert {v for v, _ in first.values()} == {old["pools"]["gpu"]["version"]}
    assert {t for _, t in first.values()} == {OLD_TEMPLATE}
    listed = {i.node: i.version for i in cloud(old).list_cluster()}
    assert listed == {n: old["pools"]["gpu"]["version"] for n in ("gpu-1", "gpu-2", "gpu-3")}

    new = cluster_json(NEW_TEMPLATE)                      # `pulumi up` made a new template; the sync pulled it
    new["resume_timeout_s"] = 1
    slurm = FakeSlurm({"gpu-1": UP, "gpu-2": UP, "gpu-3": BUSY, "gpu-4": OFF}, busy={"gpu-3"})
    assert reconcile.run_pass(cloud(new), new, None, slurm, time.time() + 3600) == 0
    # Budget 1: one idle node (gpu-1, the always-on one, comes back through power_up_static).
    assert slurm.actions() == [("gpu-1", "state=power_down_force")]
    assert power.core.suspend(cloud(new), ["gpu-1"]) == 0            # slurmctld's SuspendProgram
    assert power.core.resume(cloud(new), new, ["gpu-1"]) == 0        # its power_up, later
    now = versions(fake)
    assert [v for n, v in now.items() if n.endswith("-gpu-1")] == [(new["pools"]["gpu"]["version"], NEW_TEMPLATE)]
    # The busy node and the idle one past the budget keep their instances.
    assert [n for n in now if n.endswith(("-gpu-2", "-gpu-3"))] == [n for n in first if n.endswith(("-gpu-2", "-gpu-3"))]
    said = io.StringIO()
    assert reconcile.status(cloud(new), new, slurm, said) == 0
    text = said.getvalue()
    assert f"pool gpu: version {new['pools']['gpu']['version']}, rolling; budget 1 of 1 out of service" in text
    assert "old idle: 1 gpu-2" in text and "old busy: 1 gpu-3" in text


def test_an_instance_without_the_label_is_judged_by_the_template_it_came_from(fake):
    """Created by a resume program from before the label: its sourceInstanceTemplate says which."""
    old = cluster_json(OLD_TEMPLATE)
    assert power.core.resume(cloud(old), old, ["gpu-1"]) == 0
    with fake.lock:
        for instance in fake.instances.values():
            instance["labels"].pop(core.VERSION_TAG)
    (listed,) = cloud(old).list_cluster()
    assert listed.version == old["pools"]["gpu"]["version"]
    slurm = FakeSlurm({"gpu-1": UP, "gpu-2": OFF, "gpu-3": OFF, "gpu-4": OFF})
    assert reconcile.run_pass(cloud(old), old, None, slurm, time.time() + 3600) == 0
    assert slurm.actions() == []                # on its pool's version: nothing to roll
