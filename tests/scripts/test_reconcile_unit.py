"""The reconcile loop's rules (aicluster/node/reconcile.py), one pass at a time, on a
FileCloud and a FakeSlurm (tests/support/reconcile_fakes.py); tests/slurm/test_reconcile.py runs
the same program against a real slurmctld."""
from __future__ import annotations

import fcntl
import io
import json
import zipfile

import pytest

from aicluster.node import reconcile
from tests.support.reconcile_fakes import FakeSlurm, FileCloud, core


NOW = 1_000_000.0
GRACE = 600
OLD = NOW - GRACE - 1            # launched before the grace period
YOUNG = NOW - 60                 # may still be mid-resume
CONFIG = {"cluster": "c", "pools": {"gpu": {}, "cpu": {}}, "static_nodes": ["gpu-[1-2]"], "resume_timeout_s": GRACE}
OFF = "IDLE+CLOUD+POWERED_DOWN"
UP = "IDLE+CLOUD"


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("AICLUSTER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("AICLUSTER_CONFIG", str(tmp_path / "cluster.json"))
    monkeypatch.setenv("AICLUSTER_LOG", str(tmp_path / "reconcile.log"))
    return tmp_path / "state"


@pytest.fixture
def cloud(tmp_path):
    return FileCloud(tmp_path / "cloud.json", CONFIG["cluster"])


def fleet(**states: str) -> dict[str, str]:
    """gpu_3="IDLE+CLOUD" -> {"gpu-3": "IDLE+CLOUD"}; the other nodes of gpu-[1-4] as usual: the
    always-on gpu-[1-2] up, gpu-[3-4] powered down."""
    nodes = {"gpu-1": UP, "gpu-2": UP, "gpu-3": OFF, "gpu-4": OFF}
    nodes.update({name.replace("_", "-"): state for name, state in states.items()})
    return nodes


def run(cloud, slurm, config=CONFIG, now=NOW) -> int:
    return reconcile.run_pass(cloud, config, None, slurm, now)


# --- reading scontrol ------------------------------------------------------------------------

# Lines of `scontrol -o show nodes` from slurmctld 22.05.8 (fields cut for length).
NODE_LINES = (
    "NodeName=trn-1 CoresPerSocket=64  CPUAlloc=0 State=IDLE+CLOUD+DRAIN+POWERED_DOWN ThreadsPerCore=2 "
    "Partitions=trn  BootTime=None ExtSensorsTemp=n/s Reason=aicluster-health: a=b \"q\" x [root@2026-11-23T23:20:54]\n"
    "NodeName=trn-2 CoresPerSocket=64  CPUAlloc=0 State=IDLE+CLOUD+POWERED_DOWN ThreadsPerCore=2 "
    "Partitions=trn  ExtSensorsTemp=n/s Comment=hello world\n"
    "NodeName=trn-3 CPUAlloc=128 State=ALLOCATED+CLOUD+DRAIN Partitions=trn "
    "Reason=Not responding [slurm@2026-11-23T23:20:19] Comment=x\n")


def test_parse_nodes_reads_states_flags_and_reasons():
    nodes = reconcile.parse_nodes(NODE_LINES)
    assert nodes["trn-1"].states == {"IDLE", "CLOUD", "DRAIN", "POWERED_DOWN"}
    assert nodes["trn-1"].reason == 'aicluster-health: a=b "q" x'
    assert nodes["trn-1"].ours and nodes["trn-1"].powered_down
    assert nodes["trn-2"].reason == "" and not nodes["trn-2"].drained
    assert nodes["trn-3"].reason == "Not responding" and nodes["trn-3"].has_job and nodes["trn-3"].by_hand


def test_parse_busy_counts_every_job_that_holds_nodes():
    text = ("JobId=1 JobState=RUNNING Reason=None NodeList=gpu-[1-2] BatchHost=gpu-1\n"
            "JobId=2 JobState=PENDING Reason=Resources NodeList=(null)\n"
            "JobId=3 JobState=COMPLETED NodeList=gpu-3\n"
            "JobId=4 JobState=CONFIGURING NodeList=gpu-4\n"
            "JobId=5 JobState=SOMETHING_NEW NodeList=cpu-1\n")
    assert reconcile.parse_busy(text) == {"gpu-1", "gpu-2", "gpu-4", "cpu-1"}
    assert reconcile.parse_busy("No jobs in the system\n") == set()


# --- instances no powered-up node owns -------------------------------------------------------


def test_an_untagged_instance_is_terminated_after_the_grace_period_only(cloud):
    old, young = cloud.add(None, launched_at=OLD, pool="gpu"), cloud.add(None, launched_at=YOUNG, pool="gpu")
    assert run(cloud, FakeSlurm(fleet())) == 0
    assert set(cloud.live()) == {young}          # the young one may be mid-resume: kept
    assert cloud.deleted() == [old]


def test_instances_of_unknown_and_powered_down_nodes_are_terminated(cloud):
    unknown = cloud.add("gpu-99", launched_at=OLD)
    leftover = cloud.add("gpu-3", launched_at=OLD)
    up = cloud.add("gpu-4", launched_at=OLD)
    assert run(cloud, FakeSlurm(fleet(gpu_4=UP))) == 0
    assert set(cloud.live()) == {up}
    assert sorted(cloud.deleted()) == sorted([unknown, leftover])


def test_never_terminates_the_instance_of_a_node_with_a_job(cloud):
    """Allocated while still powered down (a job waits for its resume), allocated in the job list
    only, draining with a job, DOWN with a job: every instance stays, no node is powered down."""
    ids = [cloud.add(f"gpu-{n}", launched_at=OLD) for n in range(1, 5)]
    slurm = FakeSlurm(fleet(gpu_1="ALLOCATED+CLOUD+POWERED_DOWN", gpu_2=OFF, gpu_3="MIXED+CLOUD+DRAIN",
                            gpu_4="DOWN+CLOUD"),
                      reasons={"gpu-3": "aicluster-health: xid 79", "gpu-4": "Not responding"}, busy={"gpu-2", "gpu-4"})
    assert run(cloud, slurm) == 0
    assert set(cloud.live()) == set(ids)
    assert slurm.updates == []


def test_a_node_that_gets_a_job_during_the_pass_keeps_its_instance(cloud):
    iid = cloud.add("gpu-3", launched_at=OLD)
    slurm = FakeSlurm(fleet())
    real_node = slurm.node

    def node(name):     # between the listing and the action, a job lands on gpu-3
        slurm.states["gpu-3"] = {"ALLOCATED", "CLOUD", "POWERED_DOWN"}
        return real_node(name)

    slurm.node = node
    assert run(cloud, slurm) == 0
    assert iid in cloud.live()


def test_a_node_powered_up_again_during_the_pass_keeps_its_instance(cloud):
    """The last re-check before terminating (terminate_orphans: the node must still be powered
    down): a resume between the listing and the action powers gpu-3 up, with no job yet."""
    iid = cloud.add("gpu-3", launched_at=OLD)
    slurm = FakeSlurm(fleet())
    real_node = slurm.node

    def node(name):     # between the listing and the action, slurmctld powers gpu-3 up
        slurm.states["gpu-3"] = {"IDLE", "CLOUD", "POWERING_UP"}
        return real_node(name)

    slurm.node = node
    assert run(cloud, slurm) == 0
    assert iid in cloud.live() and cloud.deleted() == []


# --- what the loop never touches (issue 24, findings 1 and 3) --------------------------------


def test_head_and_login_instances_are_never_strays(cloud):
    """They carry the cluster tag and a role, no node and no pool: before, the loop terminated them
    after the grace period (and on EC2 the head's termination protection refused the whole batch,
    the real stray with it)."""
    head = cloud.add(None, launched_at=OLD, role="head")
    login = cloud.add(None, launched_at=OLD, role="login")
    untagged = cloud.add(None, launched_at=OLD)            # no pool, no resume-id: not the loop's
    stray = cloud.add(None, launched_at=OLD, pool="gpu", resume_id="r-1")
    removed_pool = cloud.add(None, launched_at=OLD, pool="old", resume_id="r-2")  # a resume launched it
    for _ in range(3):
        assert run(cloud, FakeSlurm(fleet())) == 0
    assert set(cloud.live()) == {head, login, untagged}
    assert sorted(cloud.deleted()) == sorted([stray, removed_pool])


def test_a_compute_role_with_a_pool_is_the_loops(cloud):
    stray = cloud.add(None, launched_at=OLD, pool="gpu", role="compute")
    assert run(cloud, FakeSlurm(fleet())) == 0
    assert cloud.deleted() == [stray]


def test_another_clusters_instance_is_never_touched(cloud):
    """A listing that returns another cluster's instances (a filter lost): its gpu-3 is powered
    down here and its stray has no node; neither is terminated, drained or replaced."""
    theirs = cloud.add("gpu-3", launched_at=OLD, cluster="other")
    stray = cloud.add(None, launched_at=OLD, pool="gpu", resume_id="r-9", cluster="other")
    event = cloud.add("gpu-1", launched_at=OLD, cluster="other", events=["system-reboot: x"])
    slurm = FakeSlurm(fleet())
    for _ in range(2):
        assert run(cloud, slurm) == 0
    assert {theirs, stray, event} <= set(cloud.live()) and cloud.deleted() == []
    assert slurm.updates == []


# --- two instances of one node (issue 24, finding 6) -----------------------------------------


def test_the_extra_instance_of_a_node_is_ended_never_the_one_slurm_uses(cloud):
    """Two resumes of gpu-1 at once each launched one; slurmctld took the second's address."""
    first, second = cloud.add("gpu-1", launched_at=OLD - 5), cloud.add("gpu-1", launched_at=OLD)
    addrs = {"gpu-1": cloud.list_cluster()[1].address}
    slurm = FakeSlurm(fleet(gpu_1="ALLOCATED+CLOUD"), busy={"gpu-1"}, addrs=addrs)
    assert run(cloud, slurm) == 0
    assert set(cloud.live()) == {second} and cloud.deleted() == [first]
    assert slurm.updates == []                      # its job runs on: slurmctld uses the one kept
    assert run(cloud, slurm) == 0 and set(cloud.live()) == {second}


def test_without_a_matching_address_the_first_launched_is_kept(cloud):
    later, first = cloud.add("gpu-1", launched_at=OLD), cloud.add("gpu-1", launched_at=OLD - 5)
    assert run(cloud, FakeSlurm(fleet(gpu_1="IDLE+CLOUD+POWERING_UP"))) == 0
    assert set(cloud.live()) == {first} and cloud.deleted() == [later]


def test_duplicates_wait_while_one_is_young_or_a_job_holds_an_unknown_one(cloud):
    a, b = cloud.add("gpu-1", launched_at=OLD), cloud.add("gpu-1", launched_at=YOUNG)
    assert run(cloud, FakeSlurm(fleet(), addrs={"gpu-1": cloud.list_cluster()[0].address})) == 0
    assert set(cloud.live()) == {a, b}              # b may be mid-resume: its address may come yet
    cloud.set(b, launched_at=OLD)
    assert run(cloud, FakeSlurm(fleet(gpu_1="ALLOCATED+CLOUD"), busy={"gpu-1"})) == 0
    assert set(cloud.live()) == {a, b}              # a job runs on one, slurmctld says neither
    assert run(cloud, FakeSlurm(fleet(), addrs={"gpu-1": cloud.list_cluster()[1].address})) == 0
    assert set(cloud.live()) == {b}


def test_duplicates_are_checked_again_just_before(cloud):
    a, b = cloud.add("gpu-1", launched_at=OLD), cloud.add("gpu-1", launched_at=OLD)
    address_a, address_b = (i.address for i in cloud.list_cluster())
    slurm = FakeSlurm(fleet(), addrs={"gpu-1": address_a})
    real_node = slurm.node

    def node(name):     # a resume hands slurmctld b's address between the listing and the action
        slurm.addrs["gpu-1"] = address_b
        return real_node(name)

    slurm.node = node
    assert run(cloud, slurm) == 0
    assert set(cloud.live()) == {a, b}


# --- suspends that did not finish ------------------------------------------------------------


def pending(state_dir) -> dict:
    path = state_dir / core.PENDING_SUSPEND
    return json.loads(path.read_text()) if path.exists() else {}


def test_a_failed_suspend_is_retried_and_cleared(cloud, state_dir):
    iid = cloud.add("gpu-3", launched_at=YOUNG)        # inside the grace: only the retry deletes it
    core.update_state(core.PENDING_SUSPEND, lambda d: d.update(
        {"gpu-3": {"since": NOW - 30, "instances": [iid], "action": "suspend", "error": "Throttling"}}))
    cloud.refuse_deletes(True)
    assert run(cloud, FakeSlurm(fleet())) == 1         # refused again: kept, the pass says so
    assert iid in cloud.live() and "gpu-3" in pending(state_dir)
    cloud.refuse_deletes(False)
    assert run(cloud, FakeSlurm(fleet())) == 0
    assert iid not in cloud.live() and pending(state_dir) == {}


def test_a_pending_suspend_of_a_node_up_again_never_deletes_its_instance(cloud, state_dir):
    iid = cloud.add("gpu-3", launched_at=OLD)
    entry = {"since": NOW - 30, "instances": [iid], "action": "suspend", "error": "Throttling"}
    core.update_state(core.PENDING_SUSPEND, lambda d: d.update({"gpu-3": entry}))
    assert run(cloud, FakeSlurm(fleet(gpu_3="ALLOCATED+CLOUD"), busy={"gpu-3"})) == 0
    assert iid in cloud.live() and pending(state_dir) == {"gpu-3": entry}


def write_pending(state_dir, data) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / core.PENDING_SUSPEND).write_text(json.dumps(data))


def rejected(state_dir) -> dict:
    path = state_dir / core.PENDING_REJECTED
    return json.loads(path.read_text()) if path.exists() else {}


def test_entries_of_the_wrong_shape_are_set_aside_and_the_rest_go_on(cloud, state_dir, caplog, monkeypatch):
    """Valid JSON, wrong shapes (issue 24, finding 5): before, the first bad entry stopped the step
    (exit 1) and every entry after it waited for ever."""
    monkeypatch.setattr(core.log, "propagate", True)        # to caplog, whatever set_up_logging did
    iid = cloud.add("gpu-4", launched_at=YOUNG)        # inside the grace: only the retry ends it
    good = {"since": NOW - 30, "instances": [iid], "action": "suspend", "error": "Throttling"}
    bad = {"gpu-3": "gpu-3 i-0009", "cpu-1": {"instances": "i-0007", "action": "suspend"},
           "cpu-2": ["i-0008"], "cpu-3": {"since": "yesterday", "instances": []}}
    write_pending(state_dir, {**bad, "gpu-4": good})
    assert run(cloud, FakeSlurm(fleet())) == 0
    assert iid not in cloud.live() and pending(state_dir) == {}
    kept = rejected(state_dir)
    assert {node: [r["entry"] for r in records] for node, records in kept.items()} == {
        node: [entry] for node, entry in bad.items()}
    assert "not a list of names" in kept["cpu-1"][0]["why"]
    assert "the entry of gpu-3 is unusable" in caplog.text and core.PENDING_REJECTED in caplog.text


def test_a_bad_entry_never_poisons_a_new_record_of_its_node(state_dir):
    write_pending(state_dir, {"gpu-3": {"instances": "i-0001"}})
    core.record_pending_suspend({"gpu-3": ["i-0002"]}, "suspend", "Throttling")
    assert pending(state_dir)["gpu-3"]["instances"] == ["i-0002"]     # before: ["0", "1", "2", "i", "-", ...]
    assert rejected(state_dir)["gpu-3"][0]["entry"] == {"instances": "i-0001"}


@pytest.mark.parametrize("content", [json.dumps([{"gpu-3": {"instances": ["i-0001"]}}]), json.dumps("gpu-3"),
                                     "{not json"])
def test_a_state_file_of_the_wrong_shape_is_moved_aside_never_dropped(cloud, state_dir, content):
    """Before, a list (or a string) read as {} without a word, and the next write replaced it."""
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / core.PENDING_SUSPEND).write_text(content)
    assert core.read_state(core.PENDING_SUSPEND) == {}
    (aside,) = state_dir.glob(f"{core.PENDING_SUSPEND}.invalid-*")
    assert aside.read_text() == content
    assert pending(state_dir) == {}                    # started afresh
    core.record_pending_suspend({"gpu-3": ["i-0002"]}, "suspend", "x")
    assert list(pending(state_dir)) == ["gpu-3"]
    assert len(list(state_dir.glob(f"{core.PENDING_SUSPEND}.invalid-*"))) == 1


# --- always-on nodes -------------------------------------------------------------------------


def test_a_down_always_on_node_is_powered_down_then_up(cloud):
    slurm = FakeSlurm(fleet(gpu_1="DOWN+CLOUD", gpu_2=UP), reasons={"gpu-1": "Not responding"})
    cloud.add("gpu-2", launched_at=OLD)
    assert run(cloud, slurm) == 0
    assert slurm.actions() == [("gpu-1", "state=power_down_force")]
    slurm.states["gpu-1"] = {"IDLE", "CLOUD", "POWERED_DOWN"}      # SuspendTimeout later
    assert run(cloud, slurm) == 0
    assert slurm.actions()[1:] == [("gpu-1", "state=power_up")]


def test_a_down_powered_down_always_on_node_is_cleared_then_powered_up(cloud):
    slurm = FakeSlurm(fleet(gpu_1="DOWN+CLOUD+POWERED_DOWN", gpu_2=UP),
                      reasons={"gpu-1": "InsufficientInstanceCapacity: no p5"})
    cloud.add("gpu-2", launched_at=OLD)
    assert run(cloud, slurm) == 0
    assert slurm.actions() == [("gpu-1", "state=resume"), ("gpu-1", "state=power_up")]


def test_nodes_drained_by_hand_are_never_touched(cloud):
    cloud.add("gpu-1", launched_at=OLD)
    slurm = FakeSlurm(fleet(gpu_1="IDLE+CLOUD+DRAIN", gpu_2="DOWN+CLOUD+DRAIN+POWERED_DOWN", gpu_3="IDLE+CLOUD+DRAIN"),
                      reasons={"gpu-1": "investigating xid 48", "gpu-2": "rma", "gpu-3": "bios update"})
    cloud.add("gpu-3", launched_at=OLD)
    assert run(cloud, slurm) == 0
    assert slurm.updates == []


@pytest.mark.parametrize("reason", ["aicluster-healthy-maintenance", "aicluster-event", "aicluster-events: mine",
                                    "aicluster-bootstrapping", "aicluster-health:check later", "Aicluster-health: x"])
def test_a_hand_drain_that_only_looks_like_ours_is_never_replaced(cloud, reason):
    """Only the exact `<code>: ` form aicluster writes (core.reason_text) is aicluster's: before,
    any reason starting with the code was (issue 24, finding 4)."""
    cloud.add("gpu-3", launched_at=OLD)
    slurm = FakeSlurm(fleet(gpu_3="IDLE+CLOUD+DRAIN"), reasons={"gpu-3": reason})
    assert run(cloud, slurm) == 0
    assert slurm.updates == []


@pytest.mark.parametrize("reason", ["aicluster-health: xid 79", "aicluster-event: system-reboot",
                                    "aicluster-bootstrap: mount /fsx: timed out", "aicluster-health:"])
def test_the_reasons_aicluster_writes_are_its_own(reason):
    assert reconcile.Node("gpu-1", frozenset({"IDLE", "DRAIN"}), reason).ours
    code = reason.split(":")[0]
    assert reconcile.Node("gpu-1", frozenset(), core.reason_text(code, reason.partition(": ")[2])).ours


def test_parse_nodes_reads_the_node_address():
    nodes = reconcile.parse_nodes("NodeName=trn-1 NodeAddr=10.0.0.7 NodeHostName=ip-10-0-0-7 State=IDLE+CLOUD\n"
                                  "NodeName=trn-2 NodeAddr=trn-2 State=IDLE+CLOUD+POWERED_DOWN\n")
    assert (nodes["trn-1"].addr, nodes["trn-2"].addr) == ("10.0.0.7", "trn-2")


# --- health-check drains, events, failed set-ups ---------------------------------------------


def test_a_health_drained_node_is_replaced_once_idle(cloud):
    cloud.add("gpu-3", launched_at=OLD)
    reasons = {"gpu-3": "aicluster-health: gpu-count: 7 of 8 GPUs"}
    draining = FakeSlurm(fleet(gpu_3="MIXED+CLOUD+DRAIN"), reasons=reasons)
    assert run(cloud, draining) == 0 and draining.updates == []
    drained = FakeSlurm(fleet(gpu_3="IDLE+CLOUD+DRAIN"), reasons=reasons)
    assert run(cloud, drained) == 0
    assert drained.actions() == [("gpu-3", "state=power_down_force")]


def test_an_instance_event_drains_its_node(cloud):
    cloud.add("gpu-3", launched_at=OLD, events=["instance-retirement: degraded hardware (2026-12-01T00:00Z)"])
    cloud.add("gpu-4", launched_at=OLD, events=["spot-interruption"])
    slurm = FakeSlurm(fleet(gpu_3="ALLOCATED+CLOUD", gpu_4="IDLE+CLOUD+DRAIN"), busy={"gpu-3"},
                      reasons={"gpu-4": "operator"})
    assert run(cloud, slurm) == 0
    assert slurm.updates == [("gpu-3", "state=drain",
                              'reason="aicluster-event: instance-retirement: degraded hardware (2026-12-01T00:00Z)"')]
    assert len(cloud.live()) == 2               # the job on gpu-3 runs on; gpu-4 is the operator's


def test_a_failed_set_up_sets_the_node_down_and_powers_it_down(cloud):
    cloud.add("gpu-3", launched_at=YOUNG, bootstrap_error="mount /fsx: timed out")
    slurm = FakeSlurm(fleet(gpu_3="ALLOCATED+CLOUD+NOT_RESPONDING+POWERING_UP"))
    assert run(cloud, slurm) == 0
    assert slurm.updates[0] == ("gpu-3", "state=down", 'reason="aicluster-bootstrap: mount /fsx: timed out"')
    assert slurm.actions()[1] == ("gpu-3", "state=power_down_force")


# --- the replacement cap ---------------------------------------------------------------------


def test_replacement_is_capped_per_pass_and_per_pool(cloud):
    """40 nodes drained by a bad health check: 10 % (4) a pass, and never more than a quarter of a pool
    on its way down at once (gpu: 8 nodes, 2 at once, one already POWERING_DOWN)."""
    nodes = {f"cpu-{n}": "IDLE+CLOUD+DRAIN" for n in range(1, 33)}
    nodes.update({f"gpu-{n}": "IDLE+CLOUD+DRAIN" for n in range(1, 8)})
    nodes["gpu-8"] = "IDLE+CLOUD+POWERING_DOWN"
    reasons = {name: "aicluster-health: xid 79" for name in nodes}
    slurm = FakeSlurm(nodes, reasons)
    config = {**CONFIG, "static_nodes": []}
    assert run(cloud, slurm, config) == 0
    powered = [n for n, a in slurm.actions() if a == "state=power_down_force"]
    assert len(powered) == 4
    assert [n for n in powered if n.startswith("gpu-")] == ["gpu-1"]



def test_an_always_on_node_not_back_up_holds_its_pools_cap_unless_drained_by_hand(cloud):
    """gpu (4 nodes, one at a time): gpu-1 is still POWERING_UP after its replacement, so health-drained
    gpu-3 waits; an operator's powered-down gpu-2 never holds the cap."""
    reasons = {"gpu-2": "rma", "gpu-3": "aicluster-health: ecc"}
    waiting = FakeSlurm(fleet(gpu_1="IDLE+CLOUD+POWERING_UP", gpu_3="IDLE+CLOUD+DRAIN"), reasons)
    assert run(cloud, waiting) == 0 and waiting.updates == []
    by_hand = FakeSlurm(fleet(gpu_2="IDLE+CLOUD+DRAIN+POWERED_DOWN", gpu_3="IDLE+CLOUD+DRAIN"), reasons)
    assert run(cloud, by_hand) == 0
    assert by_hand.actions() == [("gpu-3", "state=power_down_force")]


def test_one_failing_step_never_stops_the_others(cloud, monkeypatch):
    orphan = cloud.add(None, launched_at=OLD, pool="gpu")

    def broken(run):
        raise KeyError("a bug")

    monkeypatch.setattr(reconcile, "drain_for_events", broken)
    assert run(cloud, FakeSlurm(fleet())) == 1
    assert orphan not in cloud.live()

# --- the program: pause, lock, failures ------------------------------------------------------


def test_a_pass_that_cannot_list_the_cloud_acts_on_nothing(cloud, monkeypatch):
    def refused():
        raise core.CloudError("RequestLimitExceeded", "slow down")

    monkeypatch.setattr(cloud, "list_cluster", refused)
    slurm = FakeSlurm(fleet(gpu_1="DOWN+CLOUD"))
    assert run(cloud, slurm) == 1 and slurm.updates == []


def test_a_slurmctld_with_no_nodes_never_reads_as_an_empty_fleet(cloud):
    iid = cloud.add("gpu-1", launched_at=OLD)
    assert run(cloud, FakeSlurm({})) == 1
    assert iid in cloud.live()


def test_paused_and_locked_passes_do_nothing(cloud, tmp_path, state_dir, monkeypatch):
    iid = cloud.add(None, launched_at=0)
    (tmp_path / reconcile.PAUSE_FILE).write_text("")
    assert reconcile.main(cloud, CONFIG) == 0 and iid in cloud.live()
    (tmp_path / reconcile.PAUSE_FILE).unlink()
    state_dir.mkdir(parents=True, exist_ok=True)
    with open(state_dir / reconcile.LOCK_FILE, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        assert reconcile.main(cloud, CONFIG) == 0 and iid in cloud.live()


# --- the file and how the head runs it -------------------------------------------------------

SCRIPT = reconcile.__file__


def test_runs_on_the_heads_python3_with_the_standard_library_only(tmp_path):
    import ast
    import os
    import shutil
    import subprocess
    import sys

    python = shutil.which("python3") or sys.executable
    subprocess.run([python, "-m", "py_compile", SCRIPT], check=True,
                   env={**os.environ, "PYTHONPYCACHEPREFIX": str(tmp_path)})
    tree = ast.parse(open(SCRIPT, encoding="utf-8").read())
    roots = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    roots |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert {r for r in roots if r not in sys.stdlib_module_names} - {"__future__"} == {"aicluster"}
    assert {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
            and n.module.startswith("aicluster")} == {"aicluster.node", "aicluster.node.slurm"}


@pytest.fixture(scope="module")
def head_files():
    """The AWS head's published files and user data, as aicluster renders them."""
    from aicluster.aws.slurm import head_user_data, published_files
    from aicluster.design.cluster import design_cluster
    from aicluster.spec.cluster import parse_spec
    from tests.support import BASE_SPEC

    spec = {**BASE_SPEC, "pools": [{**BASE_SPEC["pools"][0], "min_nodes": 2}]}
    design = design_cluster(parse_spec(spec))
    files = published_files(design, controller_addr="10.0.0.10", subnet_id="subnet-1",
                            launch_templates={"gpu": "lt-1"}, placement_groups={"gpu": None},
                            accounting_secret=None, hosted_zone_id="Z1")
    return design, files, head_user_data(design.context, bucket="b", munge_secret="arn:aws:secret")


def test_the_head_installs_the_loop_with_its_settings(head_files):
    design, files, _ = head_files
    manifest = json.loads(files["manifest.json"])
    assert {"path": "/opt/aicluster/bin/aicluster-reconcile", "target": "aicluster-power.py"} in [
        {"path": link["path"], "target": link["target"].rsplit("/", 1)[-1]} for link in manifest["links"]]
    # The loop ships in the archive of aicluster.node, this checkout's module byte for byte.
    from aicluster.render.slurm_files import ARTIFACT_KEY, published_archive
    entry = next(e for e in manifest["files"] if e["key"] == ARTIFACT_KEY)
    assert (entry["path"], entry["mode"]) == (f"/opt/aicluster/lib/{published_archive(['aicluster-power.py']).name}", "0644")
    with zipfile.ZipFile(io.BytesIO(files[ARTIFACT_KEY])) as archive:
        assert archive.read("aicluster/node/reconcile.py") == open(SCRIPT, "rb").read()
    cluster = json.loads(files["aicluster/cluster.json"])
    assert cluster["static_nodes"] == ["gpu-[1-2]"]
    assert cluster["reconcile"] == {"grace_s": design.slurm.resume_timeout_s, "replace_fraction": 0.1,
                                    "pool_replacing_fraction": 0.25, "log_file": "/var/log/aicluster/reconcile.log"}


def test_a_timer_runs_one_pass_a_minute_and_a_file_pauses_it(head_files):
    import yaml

    head = yaml.safe_load(head_files[2])
    units = {f["path"].rsplit("/", 1)[-1]: f["content"] for f in head["write_files"]}
    service, timer = units["aicluster-reconcile.service"], units["aicluster-reconcile.timer"]
    assert "Type=oneshot" in service and "ExecStart=/opt/aicluster/bin/aicluster-reconcile" in service
    assert "ConditionPathExists=!/etc/aicluster/reconcile.paused" in service
    assert "OnUnitActiveSec=1min" in timer
    assert ["systemctl", "enable", "--now", "aicluster-reconcile.timer"] in head["runcmd"]
    assert reconcile.PAUSE_FILE == "reconcile.paused"    # the program's own check, beside cluster.json
