"""The power programs' shared core (aicluster/node/slurm.py) on a FileCloud
(tests/support/reconcile_fakes.py), in process: what resume adopts, and its all-or-nothing per
job. The clouds' own programs are tested against moto (AWS) and the fake Compute API (GCP)."""
from __future__ import annotations

import json

import pytest

from tests.support.reconcile_fakes import FileCloud, address_of, core
from tests.support.scontrol_recorder import calls, recorder

CONFIG = {"cluster": "c", "pools": {"gpu": {}, "cpu": {}}, "resume_timeout_s": 600}


@pytest.fixture(autouse=True)
def scontrol(tmp_path, monkeypatch):
    stub, record = recorder(tmp_path)
    monkeypatch.setenv("AICLUSTER_SCONTROL", str(stub))
    monkeypatch.setenv("AICLUSTER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("SLURM_RESUME_FILE", raising=False)
    monkeypatch.setattr(core, "LAUNCH_PARALLELISM", 1)
    return record


@pytest.fixture
def cloud(tmp_path):
    return FileCloud(tmp_path / "cloud.json", CONFIG["cluster"])


def addresses(record) -> dict[str, str]:
    """node -> the NodeAddr resume handed slurmctld."""
    handed = {}
    for call in calls(record):
        if len(call) > 2 and call[2].startswith("nodeaddr="):
            names, addrs = call[1].removeprefix("nodename="), call[2].removeprefix("nodeaddr=")
            handed.update(zip(names.split(","), addrs.split(",")))
    return handed


# --- what resume adopts (issue 24, finding 3) --------------------------------------------------


def test_resume_never_adopts_another_clusters_instance(cloud, scontrol):
    """A listing that returns another cluster's gpu-1 (a filter lost): before, resume took it for
    gpu-1's live instance and handed slurmctld its address."""
    theirs = cloud.add("gpu-1", cluster="other", resume_id="r-other")
    head = cloud.add("gpu-2", role="head")                 # a head node tagged with a node name: never ours
    assert core.resume(cloud, CONFIG, ["gpu-1", "gpu-2"]) == 0
    mine = {item["node"]: iid for iid, item in cloud.live().items() if iid not in (theirs, head)}
    assert sorted(mine) == ["gpu-1", "gpu-2"]
    assert addresses(scontrol) == {node: address_of(iid) for node, iid in mine.items()}
    assert theirs in cloud.live() and head in cloud.live()


def test_resume_adopts_its_own_live_instance(cloud, scontrol):
    mine = cloud.add("gpu-1", resume_id="r-1")
    assert core.resume(cloud, CONFIG, ["gpu-1"]) == 0
    assert list(cloud.live()) == [mine]
    assert addresses(scontrol) == {"gpu-1": address_of(mine)}


# --- all or nothing per job ------------------------------------------------------------------


class OneAtATime(FileCloud):
    """Launches of one node each (chunk 1), the launch of `refused` refused with a capacity error."""

    chunk = 1

    def __init__(self, path, cluster, refused: str):
        super().__init__(path, cluster)
        self.refused = refused

    def launch(self, pool, nodes, request_id=""):
        if self.refused in nodes:
            raise core.CloudError("InsufficientInstanceCapacity", "no more")
        return super().launch(pool, nodes, request_id)


def test_a_jobs_later_launch_failing_ends_what_its_earlier_launches_started(tmp_path, scontrol, monkeypatch):
    """Job 7 needs gpu-[1-3], launched one at a time; gpu-3's launch fails: gpu-1 and gpu-2, already
    running, must not stay (launch_group's delete_or_record), and all three go DOWN. Job 8 is whole."""
    resume_file = tmp_path / "resume.json"
    resume_file.write_text(json.dumps({"all_nodes_resume": "gpu-[1-4]", "jobs": [
        {"job_id": 7, "nodes_resume": "gpu-[1-3]"}, {"job_id": 8, "nodes_resume": "gpu-4"}]}))
    monkeypatch.setenv("SLURM_RESUME_FILE", str(resume_file))
    cloud = OneAtATime(tmp_path / "cloud.json", CONFIG["cluster"], refused="gpu-3")
    assert core.resume(cloud, CONFIG, core.expand_hostlist("gpu-[1-4]")) == 3
    assert [item["node"] for item in cloud.live().values()] == ["gpu-4"]
    assert len(cloud.deleted()) == 2
    down = [c for c in calls(scontrol) if "state=down" in c]
    assert down == [["update", "nodename=gpu-[1-3]", "state=down", 'reason="InsufficientInstanceCapacity: no more"']]


def test_what_a_failed_job_launched_and_the_cloud_would_not_delete_waits_for_the_loop(tmp_path, scontrol):
    cloud = OneAtATime(tmp_path / "cloud.json", CONFIG["cluster"], refused="gpu-2")
    cloud.refuse_deletes(True)
    assert core.resume(cloud, CONFIG, ["gpu-1", "gpu-2"]) == 2
    (left,) = cloud.live()
    pending = json.loads((tmp_path / "state" / core.PENDING_SUSPEND).read_text())
    assert pending["gpu-1"]["instances"] == [left] and pending["gpu-1"]["action"] == "resume-fail"


# --- the instances the programs may act on ---------------------------------------------------


@pytest.mark.parametrize("fields, why", [
    ({"cluster": "other"}, "carries cluster 'other'"),
    ({"role": "head"}, "head instance"),
    ({"role": "login", "pool": None}, "login instance"),
    ({"pool": None}, "no Slurm pool"),
    ({"pool": "removed"}, "no Slurm pool"),
])
def test_not_ours(fields, why):
    instance = core.Instance(**{"id": "i-1", "node": None, "pool": "gpu", "state": "running", "launched_at": 0,
                                "cluster": "c", **fields})
    assert why in core.not_ours(instance, CONFIG)


@pytest.mark.parametrize("fields", [{}, {"cluster": None}, {"role": "compute"}, {"pool": "removed", "resume_id": "r"},
                                    {"pool": None, "resume_id": "r"}])
def test_ours(fields):
    instance = core.Instance(**{"id": "i-1", "node": "gpu-1", "pool": "gpu", "state": "running", "launched_at": 0,
                                "cluster": "c", **fields})
    assert core.not_ours(instance, CONFIG) is None
