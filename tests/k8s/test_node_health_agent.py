"""The GPU node health agent's logic (aicluster/node/health_agent.py): the check's output ->
a verdict, flap damping, the Node patches (label, taint, condition) and the repair gate. Plus the
contract with the shared check: the real aicluster/node/bin/aicluster-gpu-healthcheck, run the way
the agent runs it (`bash -c <script>`, expectations on stdin), with stub GPU tools on PATH."""
from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aicluster.kubernetes import health as k8s_health
from aicluster.node import health_agent as agent

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "components" / "aicluster" / "node" / "bin" / "aicluster-gpu-healthcheck"


# The pod runs the module as one file (python3 aicluster_node_health.py): AGENT is that file.
AGENT = Path(agent.__file__)
NOW = 1_800_000_000.0

PASS_OUT = ("gpu-count: ok (8 of 8 x NVIDIA H100 80GB HBM3)\necc: ok (0 uncorrected volatile errors)\n"
            "row-remap: ok (none pending or failed on 8 GPUs)\nnvlink: ok (18 active links on each of 8 GPUs)\n"
            "xid: ok (no Xid needing a reset since boot)\nefa: ok (32 of 32 devices)\n")
XID_OUT = PASS_OUT.replace("xid: ok (no Xid needing a reset since boot)", "xid: FAIL")
XID_ERR = ("aicluster-gpu-healthcheck: xid: since boot: 0000:53:00 Xid 79 (GPU reset or reboot needed)\n"
           "aicluster-gpu-healthcheck: 1 check(s) failed (manual role)\n")
SMI_TIMEOUT_OUT = "gpu-count: FAIL\nefa: ok (32 of 32 devices)\n"
SMI_TIMEOUT_ERR = "aicluster-gpu-healthcheck: gpu-count: nvidia-smi did not answer within 5s (driver or GPU hung)\n"


def node(labels=None, taints=None, conditions=None, name="ip-10-0-1-5", rv="42") -> dict:
    return {"metadata": {"name": name, "resourceVersion": rv, "labels": dict(labels or {})},
            "spec": {"taints": list(taints or [])}, "status": {"conditions": list(conditions or [])}}


def run(state, *results, start=NOW):
    for i, result in enumerate(results):
        state = agent.next_state(state, result, start + 60 * i)
    return state


PASS = agent.parse_check(0, PASS_OUT, "")
XID = agent.parse_check(1, XID_OUT, XID_ERR)
TIMEOUT = agent.parse_check(1, SMI_TIMEOUT_OUT, SMI_TIMEOUT_ERR)
NOT_RUN = agent.parse_check(126, "", "nsenter: cannot open /proc/1/ns/mnt: Permission denied\n")


# ---------------------------------------------------------------- the scheme is one scheme


def test_the_agent_and_the_manifests_name_the_same_condition_label_and_taint():
    assert (agent.CONDITION, agent.LABEL, agent.TAINT_KEY, agent.PASSED) == \
        (k8s_health.CONDITION, k8s_health.HEALTH_LABEL, k8s_health.UNHEALTHY_TAINT_KEY, k8s_health.HEALTH_PASSED)


def test_the_agent_uses_only_the_standard_library():
    import ast
    roots = {a.name.split(".")[0] for n in ast.walk(ast.parse(AGENT.read_text())) if isinstance(n, ast.Import)
             for a in n.names}
    roots |= {n.module.split(".")[0] for n in ast.walk(ast.parse(AGENT.read_text()))
              if isinstance(n, ast.ImportFrom) and n.module}
    assert {r for r in roots if r not in sys.stdlib_module_names} == set()


# ---------------------------------------------------------------- parsing the check


def test_a_clean_run_passes():
    assert PASS.outcome == "pass"
    assert "gpu-count ok (8 of 8" in PASS.note


def test_a_failing_check_fails_with_its_reason():
    assert XID.outcome == "fail"
    assert XID.failures == (("xid", "since boot: 0000:53:00 Xid 79 (GPU reset or reboot needed)"),)
    assert not XID.timeouts_only


def test_a_timeout_is_a_failure_marked_as_a_timeout():
    assert TIMEOUT.outcome == "fail" and TIMEOUT.timeouts_only


@pytest.mark.parametrize("exit_code, out, err", [
    (None, "", ""),                                                 # the agent's own time limit
    (126, "", "nsenter: cannot open /proc/1/ns/mnt: Permission denied"),   # nsenter failed
    (127, "", "/bin/bash: No such file or directory"),
    (1, "", "aicluster-gpu-healthcheck: timeout (coreutils) not found in PATH=/x"),  # stopped before any check
    (1, "config: FAIL\n", "aicluster-gpu-healthcheck: config: cannot read /dev/stdin (expected AICLUSTER_GPUS)"),
    (1, "gpu-count: FAIL\n", "aicluster-gpu-healthcheck: gpu-count: expected 8 GPUs but nvidia-smi is not "
                             "installed (PATH=/usr/bin)"),
    (0, "", ""),                                                    # exit 0 with nothing checked
    (0, "gpu-count: FAIL\n", ""),                                   # inconsistent
])
def test_a_run_that_could_not_look_is_unknown(exit_code, out, err):
    assert agent.parse_check(exit_code, out, err).outcome == "unknown"


def test_a_missing_tool_beside_a_real_failure_still_fails():
    out = "gpu-count: ok (8 of 8)\nxid: FAIL\nefa: FAIL\n"
    err = ("aicluster-gpu-healthcheck: xid: since boot: 0000:53:00 Xid 79 (GPU reset or reboot needed)\n"
           "aicluster-gpu-healthcheck: efa: expected 32 EFA devices but fi_info is not installed (PATH=/x)\n")
    result = agent.parse_check(1, out, err)
    assert result.outcome == "fail" and result.failures[0][0] == "xid"


# ---------------------------------------------------------------- flapping


def test_a_hard_failure_marks_the_node_at_once():
    state = run(agent.HealthState(agent.PASSED), XID)
    assert state.status == agent.FAILED and state.failed_since == NOW and state.check == "xid"


def test_one_timeout_waits_for_a_second():
    once = run(agent.HealthState(agent.PASSED), TIMEOUT)
    assert once.status == agent.PASSED and once.fails_in_row == 1
    assert run(agent.HealthState(agent.PASSED), TIMEOUT, TIMEOUT).status == agent.FAILED
    assert run(agent.HealthState(agent.PASSED), TIMEOUT, PASS, TIMEOUT).status == agent.PASSED


def test_a_failed_node_needs_pass_after_passes_in_a_row():
    failed = run(agent.HealthState(agent.PASSED), XID)
    assert run(failed, *[PASS] * (agent.PASS_AFTER - 1)).status == agent.FAILED
    assert run(failed, *[PASS] * agent.PASS_AFTER).status == agent.PASSED
    # A failure in between starts the count again, and keeps the first failure's time.
    flapping = run(failed, PASS, PASS, XID, PASS, PASS, start=NOW + 600)
    assert flapping.status == agent.FAILED and flapping.failed_since == NOW


def test_a_run_that_could_not_look_changes_no_verdict():
    failed = run(agent.HealthState(agent.PASSED), XID)
    after = run(failed, NOT_RUN, NOT_RUN, NOT_RUN)
    assert after.status == agent.FAILED and after.check == "xid" and "could not run" in after.message
    assert run(agent.HealthState(agent.PASSED), NOT_RUN).status == agent.PASSED
    assert run(agent.HealthState(), NOT_RUN).status == agent.UNDECIDED


def test_a_restarted_agent_keeps_the_node_failed():
    state = agent.initial_state(node(labels={agent.LABEL: agent.FAILED}), NOW)
    assert state.status == agent.FAILED
    assert run(state, PASS).status == agent.FAILED
    assert agent.initial_state(node(), NOW).status == agent.UNDECIDED


# ---------------------------------------------------------------- the Node patches


GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def test_a_failed_node_is_labelled_and_tainted_keeping_other_taints():
    state = run(agent.HealthState(agent.PASSED), XID)
    patch = agent.node_patch(node(labels={agent.LABEL: "passed"}, taints=[GPU_TAINT]), state)
    assert patch == {"metadata": {"resourceVersion": "42", "labels": {agent.LABEL: "failed"}},
                     "spec": {"taints": [GPU_TAINT, {"key": agent.TAINT_KEY, "value": "xid", "effect": "NoSchedule"}]}}


def test_a_node_that_passes_again_loses_only_its_health_taint():
    ours = {"key": agent.TAINT_KEY, "value": "xid", "effect": "NoSchedule", "timeAdded": "2026-12-01T00:00:00Z"}
    state = agent.HealthState(agent.PASSED)
    patch = agent.node_patch(node(labels={agent.LABEL: "failed"}, taints=[GPU_TAINT, ours]), state)
    assert patch["spec"] == {"taints": [GPU_TAINT]} and patch["metadata"]["labels"] == {agent.LABEL: "passed"}


def test_nothing_to_patch_when_the_node_already_matches():
    ours = {"key": agent.TAINT_KEY, "value": "ecc", "effect": "NoSchedule"}
    failed = run(agent.HealthState(agent.PASSED), XID)
    assert agent.node_patch(node(labels={agent.LABEL: "failed"}, taints=[GPU_TAINT, ours]), failed) is None
    passed = agent.HealthState(agent.PASSED)
    assert agent.node_patch(node(labels={agent.LABEL: "passed"}, taints=[GPU_TAINT]), passed) is None


def test_an_undecided_node_is_never_patched():
    ours = {"key": agent.TAINT_KEY, "value": "xid", "effect": "NoSchedule"}
    assert agent.node_patch(node(labels={agent.LABEL: "failed"}, taints=[ours]), agent.HealthState()) is None


def test_the_condition_follows_the_verdict_and_keeps_its_transition_time():
    failed = run(agent.HealthState(agent.PASSED), XID)
    patch = agent.status_patch(node(), failed, NOW)
    [cond] = patch["status"]["conditions"]
    assert cond["type"] == agent.CONDITION and cond["status"] == "False" and cond["reason"] == "GpuCheckFailed"
    assert cond["message"].startswith("xid: since boot")
    earlier = {**cond, "lastTransitionTime": "2026-12-01T00:00:00Z"}
    [again] = agent.status_patch(node(conditions=[earlier]), failed, NOW + 60)["status"]["conditions"]
    assert again["lastTransitionTime"] == "2026-12-01T00:00:00Z"
    assert again["lastHeartbeatTime"] != cond["lastHeartbeatTime"]
    passing = agent.HealthState(agent.PASSED)
    [passed] = agent.status_patch(node(conditions=[earlier]), passing, NOW)["status"]["conditions"]
    assert passed["status"] == "True" and passed["lastTransitionTime"] != "2026-12-01T00:00:00Z"
    assert agent.condition_status(agent.HealthState()) == "Unknown"


# ---------------------------------------------------------------- repair


def ready(name, failed=False, is_ready=True):
    return node(name=name, labels={agent.LABEL: "failed" if failed else "passed"},
                conditions=[{"type": "Ready", "status": "True" if is_ready else "False"}])


def test_repair_waits_for_the_failure_to_last():
    failed = run(agent.HealthState(agent.PASSED), XID)
    assert not agent.repair_due(failed, NOW + 599, 600)
    assert agent.repair_due(failed, NOW + 600, 600)
    assert not agent.repair_due(failed, NOW + 10**6, 0)             # repair off
    assert not agent.repair_due(agent.HealthState(agent.PASSED), NOW + 10**6, 600)


def test_repair_is_capped_per_pool():
    me = "n-0"
    assert agent.repair_allowed([ready(me, failed=True), ready("n-1"), ready("n-2", failed=True)], me, 1)
    # n-2 failed and is already NotReady: it is being repaired, so n-0 waits.
    assert not agent.repair_allowed([ready(me, failed=True), ready("n-2", failed=True, is_ready=False)], me, 1)
    assert agent.repair_allowed([ready(me, failed=True), ready("n-2", failed=True, is_ready=False)], me, 2)
    # A node NotReady for another reason does not count against the check's cap.
    assert agent.repair_allowed([ready(me, failed=True), ready("n-3", is_ready=False)], me, 1)


# ---------------------------------------------------------------- the contract with the real check


STUB_SMI = r'''#!/bin/bash
case "$*" in
  "--query-gpu=index,pci.bus_id,ecc.errors.uncorrected.volatile.total,name --format=csv,noheader")
    for i in 0 1; do echo "$i, 00000000:5$i:00.0, 0, NVIDIA H100 80GB HBM3"; done ;;
  "--query-remapped-rows=gpu_bus_id,remapped_rows.pending,remapped_rows.failure --format=csv,noheader")
    for i in 0 1; do echo "00000000:5$i:00.0, 0, 0"; done ;;
  "nvlink --status")
    for i in 0 1; do echo "GPU $i: NVIDIA H100 80GB HBM3 (UUID: GPU-$i)"; echo "	 Link 0: 26.562 GB/s"; done ;;
  *) echo "stub nvidia-smi: unexpected: $*" >&2; exit 2 ;;
esac
'''


@pytest.fixture
def host(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "timeout").symlink_to(shutil.which("timeout"))
    for name, text in {"nvidia-smi": STUB_SMI,
                       # bash builtins only: PATH holds nothing but these stubs.
                       "journalctl": ('#!/bin/bash\nlog="${0%/*}/kernel.log"\n'
                                      '[ -e "$log" ] && printf "%s\\n" "$(<"$log")"\nexit 0\n')}.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return bin_dir


def run_like_the_agent(bin_dir: Path, expectations: str):
    """What run_check does inside nsenter: the check as `bash -c`, its expectations on stdin."""
    done = subprocess.run(["/bin/bash", "-c", CHECK.read_text(), agent.SCRIPT_NAME], input=expectations,
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": str(bin_dir), "LC_ALL": "C", "AICLUSTER_NODE_ENV": "/dev/stdin"})
    return agent.parse_check(done.returncode, done.stdout, done.stderr)


def test_the_real_check_passes_a_healthy_node_through_the_agent(host):
    result = run_like_the_agent(host, k8s_health.expectations(2, "rdma", 0))
    assert result.outcome == "pass", result
    assert "gpu-count ok (2 of 2" in result.note


def test_the_real_check_fails_a_node_with_a_fatal_xid_through_the_agent(host):
    (host / "kernel.log").write_text(
        "NVRM: Xid (PCI:0000:50:00): 79, pid=1, name=python3, GPU has fallen off the bus.\n")
    result = run_like_the_agent(host, k8s_health.expectations(2, "rdma", 0))
    assert result.outcome == "fail" and result.failures[0][0] == "xid"


def test_the_real_check_fails_a_node_missing_a_gpu_through_the_agent(host):
    result = run_like_the_agent(host, k8s_health.expectations(8, "efa", 0))
    assert result.outcome == "fail" and result.failures[0] == ("gpu-count", "expected 8 GPUs, nvidia-smi lists 2")


def test_the_real_check_without_its_expectations_is_unknown(host):
    assert run_like_the_agent(host, "AICLUSTER_GPUS=2\n").outcome == "unknown"


# ---------------------------------------------------------------- liveness: the heartbeat and its probe


def test_a_fresh_heartbeat_is_alive_and_a_stale_missing_or_garbled_one_is_not(tmp_path):
    beat = tmp_path / "heartbeat"
    assert agent.alive(str(beat), NOW, 600)[0] is False                     # never written
    agent.beat(str(beat), NOW)
    assert agent.alive(str(beat), NOW + 599, 600) == (True, "the loop went round 599s ago")
    ok, why = agent.alive(str(beat), NOW + 601, 600)
    assert ok is False and "stuck" in why
    beat.write_text("half a numb")
    assert agent.alive(str(beat), NOW, 600)[0] is False
    assert not (tmp_path / "heartbeat.tmp").exists()                       # written whole, then renamed


def _daemon_set_probe() -> list[str]:
    pool = _pool()
    settings = k8s_health.NodeHealthSettings("eks", "img@sha256:" + "0" * 64, {pool.name: "AICLUSTER_GPUS=8\n"})
    (container,) = k8s_health.daemon_set("c", pool, settings)["spec"]["template"]["spec"]["containers"]
    return container["livenessProbe"]["exec"]["command"]


def _pool():
    """The GPU pool of a small EKS cluster (the design's KubernetesPool, as the DaemonSet takes it)."""
    from aicluster.design.cluster import design_cluster
    from aicluster.spec.cluster import parse_spec
    from tests.support import BASE_SPEC

    spec = {**BASE_SPEC, "scheduler": "kubernetes", "kubernetes": {"api_access": "vpc"}}
    return design_cluster(parse_spec(spec)).kubernetes.pools[0]


def test_the_daemon_sets_own_probe_command_passes_a_live_agent_and_fails_a_stuck_one(tmp_path):
    """The very exec probe the DaemonSet carries, run against this agent file: exit 0 while the loop
    beats, 1 once the heartbeat is older than the limit or missing."""
    command = _daemon_set_probe()
    assert command[:3] == ["python3", f"{k8s_health.MOUNT_DIR}/{k8s_health.AGENT_FILE}", "--alive"]
    assert command[3:] == [k8s_health.HEARTBEAT_FILE, str(k8s_health.HEARTBEAT_MAX_AGE_S)]
    beat = tmp_path / "heartbeat"

    def run_probe() -> int:
        argv = [sys.executable, str(AGENT), "--alive", str(beat), command[4]]
        return subprocess.run(argv, capture_output=True, text=True, timeout=30).returncode

    assert run_probe() == 1                                                  # no heartbeat yet
    agent.beat(str(beat), time.time())
    assert run_probe() == 0
    agent.beat(str(beat), time.time() - k8s_health.HEARTBEAT_MAX_AGE_S - 5)
    assert run_probe() == 1


def test_the_agent_beats_each_time_round_its_loop_even_while_the_api_is_down(tmp_path, monkeypatch):
    """main() writes the heartbeat the probe reads at the top of every run, before any call that can
    fail, so an API outage (which a restart would not cure) never fails the probe."""
    import urllib.error

    (tmp_path / "check").write_text("exit 0\n")
    (tmp_path / "gpu.env").write_text("AICLUSTER_GPUS=8\n")
    heartbeat = tmp_path / "heartbeat"
    for key, value in {"NODE_NAME": "ip-10-0-1-5", "AICLUSTER_POOL_SELECTOR": "aicluster.io/pool=gpu",
                       "AICLUSTER_HEALTH_SCRIPT": str(tmp_path / "check"), "AICLUSTER_HEALTH_ENV": str(tmp_path / "gpu.env"),
                       "AICLUSTER_HEALTH_INTERVAL": "60", agent.HEARTBEAT_ENV: str(heartbeat)}.items():
        monkeypatch.setenv(key, value)

    class DownApi:
        def node(self, name):
            raise urllib.error.URLError("connection refused")

    class Stop(Exception):
        pass

    rounds = []

    def sleep(seconds):
        rounds.append(agent.alive(str(heartbeat), time.time(), k8s_health.HEARTBEAT_MAX_AGE_S)[0])
        heartbeat.unlink()
        if len(rounds) == 3:
            raise Stop
    monkeypatch.setattr(agent, "Api", DownApi)
    monkeypatch.setattr(agent.time, "sleep", sleep)
    with pytest.raises(Stop):
        agent.main([])
    assert rounds == [True, True, True]


def test_the_probes_limit_exceeds_the_longest_time_round_the_loop():
    """Every call in one run is bounded (the check, the API calls, stopping the kubelet); the probe
    only fails a loop that has overrun all of them, and the interval asleep."""
    assert agent.LOOP_WORST_S + k8s_health.CHECK_INTERVAL_S < k8s_health.HEARTBEAT_MAX_AGE_S
    assert agent.CHECK_TIMEOUT_S + 4 * agent.API_TIMEOUT_S + agent.KUBELET_STOP_TIMEOUT_S == agent.LOOP_WORST_S


def test_the_heartbeat_lives_on_a_small_writable_volume_beside_the_read_only_root():
    pool = _pool()
    pod = k8s_health.daemon_set("c", pool, k8s_health.NodeHealthSettings("eks", "img", {pool.name: ""}))
    spec = pod["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert not mounts[k8s_health.HEARTBEAT_DIR].get("readOnly")
    volume = next(v for v in spec["volumes"] if v["name"] == mounts[k8s_health.HEARTBEAT_DIR]["name"])
    assert volume["emptyDir"]["medium"] == "Memory"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env[agent.HEARTBEAT_ENV] == k8s_health.HEARTBEAT_FILE
    assert k8s_health.HEARTBEAT_FILE.startswith(k8s_health.HEARTBEAT_DIR + "/")
