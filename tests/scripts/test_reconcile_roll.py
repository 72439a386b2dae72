"""The reconcile loop's roll (aicluster/node/reconcile.py, roll_nodes): nodes whose instance runs an
older version than their pool's (cluster.json pools[].version) are replaced as they become idle,
at most max_unavailable of a pool out of service at once, never one with a job. One pass at a time
on a FileCloud and a FakeSlurm (tests/support/reconcile_fakes.py); tests/slurm/test_reconcile_roll.py
runs it against a real slurmctld and slurmd."""
from __future__ import annotations

import io
import logging

import pytest

from aicluster.node import reconcile
from tests.support.reconcile_fakes import FakeSlurm, FileCloud, core

NOW = 1_000_000.0
GRACE = 600
OLD = NOW - GRACE - 1
OFF = "IDLE+CLOUD+POWERED_DOWN"
UP = "IDLE+CLOUD"
BUSY = "ALLOCATED+CLOUD"


def config(budget: int = 1, version: str | None = "2", **reconcile_settings) -> dict:
    pool = {"max_unavailable": budget}
    if version is not None:
        pool["version"] = version
    return {"cluster": "c", "pools": {"gpu": pool}, "static_nodes": ["gpu-[1-2]"], "resume_timeout_s": GRACE,
            "reconcile": {"replace_fraction": 1.0, **reconcile_settings}}


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("AICLUSTER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("AICLUSTER_CONFIG", str(tmp_path / "cluster.json"))
    monkeypatch.setenv("AICLUSTER_LOG", str(tmp_path / "reconcile.log"))
    monkeypatch.setenv("AICLUSTER_TEXTFILE_DIR", str(tmp_path / "textfile"))
    return tmp_path / "state"


@pytest.fixture
def cloud(tmp_path):
    return FileCloud(tmp_path / "cloud.json", "c")


def scene(cloud, versions: dict[str, str | None], **states: str) -> FakeSlurm:
    """gpu-[1-4]: each node in `versions` up with one instance of that version (None: untagged), the
    others powered down; `states` override (gpu_2=BUSY)."""
    nodes = {f"gpu-{i}": OFF for i in range(1, 5)}
    for node, version in versions.items():
        cloud.add(node, launched_at=OLD, version=version)
        nodes[node] = UP
    nodes.update({name.replace("_", "-"): state for name, state in states.items()})
    busy = {name for name, state in nodes.items() if "ALLOCATED" in state}
    return FakeSlurm(nodes, busy=busy)


def run(cloud, slurm, cfg) -> int:
    return reconcile.run_pass(cloud, cfg, None, slurm, NOW)


def roll_reason(old: str, new: str) -> str:
    return f"{core.ROLL_REASON}: version {old} -> {new}"


def test_an_idle_old_node_is_powered_down_and_a_busy_one_is_left_alone(cloud):
    slurm = scene(cloud, {"gpu-1": "1", "gpu-2": "1", "gpu-3": "2"}, gpu_2=BUSY)
    assert run(cloud, slurm, config(budget=1)) == 0
    # The budget (1) goes to the idle node; the busy one is neither drained nor touched.
    assert slurm.actions() == [("gpu-1", "state=power_down_force")]
    assert "DRAIN" not in slurm.states["gpu-2"]


def test_with_room_in_the_budget_a_busy_old_node_is_drained_not_stopped(cloud):
    slurm = scene(cloud, {"gpu-1": "1", "gpu-2": "1", "gpu-3": "2"}, gpu_2=BUSY)
    assert run(cloud, slurm, config(budget=2)) == 0
    assert slurm.actions() == [("gpu-1", "state=power_down_force"), ("gpu-2", "state=drain")]
    assert slurm.reasons["gpu-2"] == roll_reason("1", "2")
    assert reconcile.Node("gpu-2", frozenset({"DRAIN"}), slurm.reasons["gpu-2"]).ours      # its own form
    assert "ALLOCATED" in slurm.states["gpu-2"] and len(cloud.live()) == 3


def test_a_busy_node_is_drained_only_once_no_idle_old_node_is_left(cloud):
    # Budget 2, two idle old nodes: both go down, no room left to drain the busy one.
    slurm = scene(cloud, {"gpu-1": "1", "gpu-2": "1", "gpu-3": "1"}, gpu_3=BUSY)
    assert run(cloud, slurm, config(budget=2)) == 0
    assert slurm.actions() == [("gpu-1", "state=power_down_force"), ("gpu-2", "state=power_down_force")]


def test_a_drained_old_node_is_replaced_once_its_job_ends_whatever_the_budget(cloud):
    slurm = scene(cloud, {"gpu-1": "1", "gpu-3": "1"}, gpu_3=UP + "+DRAIN")
    slurm.reasons["gpu-3"] = roll_reason("1", "2")
    assert run(cloud, slurm, config(budget=1)) == 0
    # gpu-3 already holds the budget: it goes down; gpu-1 waits for a later pass.
    assert ("gpu-3", "state=power_down_force") in slurm.actions()
    assert ("gpu-1", "state=power_down_force") not in slurm.actions()


def test_an_always_on_node_not_back_up_holds_the_budget(cloud):
    slurm = scene(cloud, {"gpu-3": "1"})          # gpu-[1-2] always on and powered down: out of service
    assert run(cloud, slurm, config(budget=2)) == 0
    assert ("gpu-3", "state=power_down_force") not in slurm.actions()
    # They are powered up again (on the new version, at their resume); the roll waits.
    assert ("gpu-1", "state=power_up") in slurm.actions()


def test_an_always_on_old_node_comes_back_through_power_up(cloud):
    slurm = scene(cloud, {"gpu-1": "1", "gpu-2": "2"})
    assert run(cloud, slurm, config(budget=1)) == 0
    assert slurm.actions() == [("gpu-1", "state=power_down_force")]
    # slurmctld's SuspendProgram ends the instance; the node settles powered down.
    cloud.kill(next(iter(cloud.find(["gpu-1"])["gpu-1"])))
    slurm.states["gpu-1"] = set(OFF.split("+"))
    slurm.updates.clear()
    assert run(cloud, slurm, config(budget=1)) == 0
    assert slurm.actions() == [("gpu-1", "state=power_up")]
    launched = cloud.launch("gpu", ["gpu-1"], "r-1")      # what the resume program then does
    assert cloud.live()[launched["gpu-1"]]["version"] is None      # this FileCloud has no config
    versioned = FileCloud(cloud.path, "c", config(budget=1))
    second = versioned.launch("gpu", ["gpu-1"], "r-2")["gpu-1"]
    assert versioned.live()[second]["version"] == "2"


def test_hand_drains_down_nodes_and_new_nodes_are_not_the_rolls(cloud):
    slurm = scene(cloud, {"gpu-1": "1", "gpu-2": "1", "gpu-3": "2"}, gpu_1=UP + "+DRAIN", gpu_2="DOWN+CLOUD")
    slurm.reasons.update({"gpu-1": "investigating xid 48", "gpu-2": "Not responding"})
    assert run(cloud, slurm, config(budget=4)) == 0
    # gpu-2 is DOWN: replaced as a failure (replace_nodes), not drained by the roll; gpu-1 is the operator's.
    assert slurm.actions() == [("gpu-2", "state=power_down_force")]
    assert slurm.reasons["gpu-1"] == "investigating xid 48"


def test_a_node_that_got_a_job_since_the_pass_began_is_not_powered_down(cloud):
    class Racing(FakeSlurm):
        def node(self, name):
            if name == "gpu-3":
                self.states[name] = set(BUSY.split("+"))
            return super().node(name)

    slurm = Racing({"gpu-1": UP, "gpu-2": UP, "gpu-3": UP, "gpu-4": OFF})
    for node in ("gpu-1", "gpu-2"):
        cloud.add(node, launched_at=OLD, version="2")
    cloud.add("gpu-3", launched_at=OLD, version="1")
    assert run(cloud, slurm, config(budget=1)) == 0
    assert ("gpu-3", "state=power_down_force") not in slurm.actions()


def test_an_untagged_instance_counts_as_old_and_a_pool_without_version_rolls_nothing(cloud, tmp_path):
    slurm = scene(cloud, {"gpu-1": "2", "gpu-2": "2", "gpu-3": None})
    assert run(cloud, slurm, config(budget=1)) == 0
    assert slurm.actions() == [("gpu-3", "state=power_down_force")]
    slurm = scene(FileCloud(tmp_path / "other.json", "c"), {"gpu-1": "1", "gpu-2": "1", "gpu-3": "1"})
    (tmp_path / "textfile" / reconcile.ROLL_METRICS_FILE).unlink()
    assert run(FileCloud(tmp_path / "other.json", "c"), slurm, config(version=None)) == 0
    assert slurm.actions() == []
    assert not (tmp_path / "textfile" / reconcile.ROLL_METRICS_FILE).exists()


def test_a_roll_drain_is_cleared_when_the_node_is_on_the_pools_version_again(cloud):
    slurm = scene(cloud, {"gpu-1": "2", "gpu-2": "2", "gpu-3": "1"}, gpu_3=BUSY + "+DRAIN")
    slurm.reasons["gpu-3"] = roll_reason("1", "2")
    assert run(cloud, slurm, config(budget=1, version="1")) == 0      # set back to version 1
    # gpu-3 runs version 1 again: no longer drained; gpu-1 and gpu-2 are now the old ones (idle).
    assert slurm.actions()[0] == ("gpu-3", "state=resume")
    assert "DRAIN" not in slurm.states["gpu-3"]
    assert ("gpu-1", "state=power_down_force") in slurm.actions()


def test_the_per_pass_replacement_cap_holds_the_roll_too(cloud):
    slurm = scene(cloud, {"gpu-1": "2", "gpu-2": "2", "gpu-3": "1", "gpu-4": "1"})
    cfg = config(budget=4, replace_fraction=0.1)          # 4 nodes: one power-down a pass
    assert run(cloud, slurm, cfg) == 0
    assert slurm.actions() == [("gpu-3", "state=power_down_force")]


def test_metrics_and_status_report_each_pool(cloud, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="aicluster-power")
    slurm = scene(cloud, {"gpu-1": "1", "gpu-2": "1", "gpu-3": "2"}, gpu_2=BUSY)
    cfg = config(budget=1)
    assert run(cloud, slurm, cfg) == 0
    metrics = (tmp_path / "textfile" / reconcile.ROLL_METRICS_FILE).read_text()
    rolling = [r.getMessage() for r in caplog.records if "rolling pool" in r.getMessage()]
    assert rolling == ["reconcile: rolling pool gpu to version 2: 1 current, 2 old (1 idle, 1 busy, 0 draining), "
                       "0 of 1 out of service"]
    # After the pass: gpu-1 is on its way down (nothing to count), gpu-3 current, gpu-2 old and busy.
    assert 'aicluster_roll_nodes{pool="gpu",version="current"} 1' in metrics
    assert 'aicluster_roll_nodes{pool="gpu",version="old"} 1' in metrics
    assert "# TYPE aicluster_roll_nodes gauge" in metrics
    assert [p.name for p in (tmp_path / "textfile").iterdir()] == [reconcile.ROLL_METRICS_FILE]   # no temp left
    out = io.StringIO()
    assert reconcile.status(cloud, cfg, slurm, out) == 0
    text = out.getvalue()
    assert "pool gpu: version 2, rolling; budget 1 of 1 out of service" in text
    assert "current: 1 gpu-3" in text and "old busy: 1 gpu-2 (versions 1)" in text
    assert "old idle: 0" in text and "old draining: 0" in text


def test_status_is_an_action_of_the_reconcile_link():
    assert core.parse_args(["/opt/aicluster/bin/aicluster-reconcile", "--status"]) == ("reconcile", "--status")
    assert core.parse_args(["aicluster-power.py", "reconcile", "--status"]) == ("reconcile", "--status")
    assert core.parse_args(["aicluster-reconcile"]) == ("reconcile", "")
    assert core.parse_args(["aicluster-reconcile", "--bogus"]) is None


def test_main_dispatches_status_without_acting(cloud, tmp_path, monkeypatch, capsys):
    import json
    cfg = config(budget=1)
    (tmp_path / "cluster.json").write_text(json.dumps(cfg))
    slurm = scene(cloud, {"gpu-1": "1", "gpu-2": "2"})
    monkeypatch.setattr(reconcile, "Slurm", lambda: slurm)
    seen = {}

    def fake_reconcile(cloud_, config_, dns, show_status=False):
        seen["status"] = show_status
        return reconcile.main(cloud_, config_, dns, show_status=show_status)

    assert core.main(["aicluster-reconcile", "--status"], "p", ("cluster", "pools"),
                     lambda c: (cloud, None), fake_reconcile) == 0
    assert seen == {"status": True} and slurm.actions() == []
    assert "pool gpu: version 2, rolling" in capsys.readouterr().out
