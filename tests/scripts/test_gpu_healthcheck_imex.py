"""The GPU health check on a node of a multi-node NVLink domain (GB200/GB300 NVL72), run for real.

AICLUSTER_NVLINK_DOMAIN_NODES > 1 in the node's env file adds two checks (aicluster-gpu-healthcheck):
nvlink-fabric (every GPU registered with the NVLink fabric) and imex (the IMEX domain whole). The
stubs print what the real tools print:

- nvidia-imex-ctl -q: this node's daemon state (READY, WAITING_FOR_PEERS, ...);
- nvidia-imex-ctl -N: the domain's status as the IMEX guide and the AWS PCS user guide
  ("capacity-blocks-nvidia-imex", validate step) show it: the legend, a time stamp, "Nodes:" with
  one "Node #i - <ip> - <STATE> - Version: <driver>" line per node, the "Nodes From\\To" matrix of
  connection states (C connected, D disconnected, N never connected, ...) and "Domain State: UP";
- systemctl is-active nvidia-imex: active (exit 0) or inactive / failed (exit 3);
- hostname -I: the node's addresses;
- nvidia-smi --query-gpu=index,fabric.state,fabric.status: "0, Completed, Success" per GPU.

Nodes of HGX types (no multi-node domain) are unchanged: tests/scripts/test_gpu_healthcheck.py.
"""
from __future__ import annotations

import pytest

from tests.support.gpu_healthcheck import check_lines
from tests.support.imex import ADDRS, DOMAIN, Nvl72Node, domain_status, down


@pytest.fixture
def nvl(tmp_path) -> Nvl72Node:
    return Nvl72Node(tmp_path)


def drain_of(node: Nvl72Node) -> str:
    drains = [c for c in node.calls("scontrol") if c.startswith("update ")]
    assert len(drains) == 1, node.calls("scontrol")
    return drains[0]


def test_domain_up_is_healthy(nvl):
    run, lines = nvl.health()
    assert run.returncode == 0, run.stdout + run.stderr
    assert lines["nvlink-fabric"] == "ok (4 GPUs registered with the NVLink fabric)"
    assert lines["imex"] == f"ok (domain UP, {DOMAIN} of {DOMAIN} nodes connected)"
    assert nvl.calls("nvidia-imex-ctl") == ["-q", "-N"]
    assert nvl.calls("systemctl") == ["is-active nvidia-imex"]
    assert "index,fabric.state,fabric.status" in nvl.calls("nvidia-smi")[-1]
    # Healthy, not drained: only the look at whether a domain drain is to be lifted.
    assert nvl.calls("scontrol") == ["-o show node gpu-3"]


def test_one_node_down_drains_with_the_domain_reason(nvl):
    """Node #10 gone (its daemon UNAVAILABLE, nobody reaches it): every other node of the domain is
    drained, with the reason the reconcile loop leaves alone (it is not this node's fault)."""
    states = ["READY"] * DOMAIN
    states[10] = "UNAVAILABLE"
    nvl.imex(n=domain_status(states, down(10, "I"), domain="DEGRADED"))
    run, lines = nvl.health()
    assert run.returncode == 1
    assert lines["imex"] == "FAIL"
    detail = f"IMEX domain DEGRADED: 17/18 nodes connected (not connected: #10 {ADDRS[10]} UNAVAILABLE)"
    assert f"imex: {detail}" in run.stderr
    assert drain_of(nvl) == f"update nodename=gpu-3 state=drain reason=aicluster-imex-domain: imex: {detail}"


def test_a_peer_cut_off_while_ready_is_the_domain_too(nvl):
    nvl.imex(n=domain_status(links=down(7), domain="DEGRADED"))
    run, _ = nvl.health()
    assert run.returncode == 1
    assert drain_of(nvl).endswith(
        f"reason=aicluster-imex-domain: imex: IMEX domain DEGRADED: 17/18 nodes connected "
        f"(not connected: #7 {ADDRS[7]} READY)")


def test_this_node_cut_off_is_its_own_fault(nvl):
    """The others cannot reach this node (#3, by its address): an ordinary health drain, which the
    reconcile loop replaces once the node is idle."""
    nvl.imex(n=domain_status(links=down(3), domain="DEGRADED"))
    run, _ = nvl.health()
    assert run.returncode == 1
    assert drain_of(nvl).startswith(
        f"update nodename=gpu-3 state=drain reason=aicluster-health: imex: this node ({ADDRS[3]}) is cut off: "
        "IMEX domain DEGRADED: 17/18 nodes connected")


def test_a_link_down_between_connected_nodes_is_named(nvl):
    nvl.imex(n=domain_status(links={(4, 9): "D", (9, 4): "D"}, domain="DEGRADED"))
    run, _ = nvl.health()
    assert run.returncode == 1
    assert "IMEX domain DEGRADED: 18/18 nodes connected; links down: #4->#9 D, #9->#4 D" in run.stderr


def test_domain_down_with_every_node_listed_fails(nvl):
    nvl.imex(n=domain_status(domain="DOWN"))
    run, lines = nvl.health()
    assert run.returncode == 1 and lines["imex"] == "FAIL"
    assert "IMEX domain DOWN: 18/18 nodes connected" in run.stderr


def test_imex_told_of_fewer_nodes_than_the_domain_has_fails(nvl):
    nvl.imex(n=domain_status(nodes=17))
    run, _ = nvl.health()
    assert run.returncode == 1
    assert "IMEX domain UP: 17/18 nodes connected; IMEX knows 17 of the domain's 18 nodes" in run.stderr


def test_waiting_for_peers_is_the_domain_not_this_node(nvl):
    states = ["READY"] * DOMAIN
    states[3] = "WAITING_FOR_PEERS"
    states[12] = "UNAVAILABLE"
    nvl.imex(q="WAITING_FOR_PEERS", n=domain_status(states, down(12, "N"), domain="DEGRADED"))
    nvl.health()
    assert "reason=aicluster-imex-domain: imex: IMEX domain DEGRADED: 16/18 nodes connected" in drain_of(nvl)


def test_imex_ctl_missing_drains(nvl):
    (nvl.bin / "nvidia-imex-ctl").unlink()
    run, lines = nvl.health()
    assert run.returncode == 1 and lines["imex"] == "FAIL"
    assert drain_of(nvl).startswith(
        "update nodename=gpu-3 state=drain reason=aicluster-health: imex: nvidia-imex-ctl not found")


@pytest.mark.parametrize("service", ["inactive", "failed"])
def test_imex_service_not_active_drains(nvl, service):
    nvl.imex(service=service)
    run, _ = nvl.health()
    assert run.returncode == 1
    assert drain_of(nvl).endswith(f"reason=aicluster-health: imex: the nvidia-imex service is {service}, not active")
    assert nvl.calls("nvidia-imex-ctl") == []


def test_own_daemon_not_ready_drains(nvl):
    nvl.imex(q="INIT_GPU")
    run, _ = nvl.health()
    assert run.returncode == 1
    assert drain_of(nvl).endswith("reason=aicluster-health: imex: this node's IMEX daemon is INIT_GPU, not READY")


def test_imex_ctl_that_cannot_reach_its_daemon_fails(nvl):
    nvl.imex(q="Failed to connect to IMEX command service", rc=1)
    run, _ = nvl.health()
    assert run.returncode == 1
    assert "imex: nvidia-imex-ctl -q gave no daemon state (exit 1: Failed to connect" in run.stderr


def test_hanging_imex_ctl_is_cut_off(nvl):
    nvl.imex()
    nvl._stub("nvidia-imex-ctl", "#!/bin/bash\nexec sleep 60\n")
    (nvl.bin / "sleep").symlink_to("/bin/sleep")
    run, _ = nvl.health()
    assert run.returncode == 1
    assert "nvidia-imex-ctl -q did not answer within 3s" in run.stderr


def test_a_gpu_off_the_fabric_fails(nvl):
    nvl.gpus(state="Completed", status="Failure", bad=2)
    run, lines = nvl.health()
    assert run.returncode == 1 and lines["nvlink-fabric"] == "FAIL"
    assert drain_of(nvl).endswith(
        "reason=aicluster-health: nvlink-fabric: GPU(s) not on the NVLink fabric: GPU 2: Completed, Failure")


def test_own_failure_outranks_the_domain_in_the_reason(nvl):
    """A node with a fault of its own is replaced, whatever its domain says."""
    nvl.gpus(state="In Progress", status="In Progress", bad=0)
    nvl.imex(n=domain_status(links=down(7), domain="DEGRADED"))
    nvl.health()
    assert ("reason=aicluster-health: nvlink-fabric: GPU(s) not on the NVLink fabric: GPU 0: registration did "
            "not finish (In Progress)") in drain_of(nvl)


def test_domain_whole_again_resumes_a_domain_drain(nvl):
    nvl.scontrol("NodeName=gpu-3 State=IDLE+DRAIN Reason=aicluster-imex-domain: imex: IMEX domain DEGRADED: "
                 "17/18 nodes connected [root@2026-11-28T14:00:00]")
    run, _ = nvl.health()
    assert run.returncode == 0, run.stderr
    assert nvl.calls("scontrol") == ["-o show node gpu-3", "update nodename=gpu-3 state=resume"]
    assert "resumed gpu-3: its NVLink domain is whole again" in run.stderr


@pytest.mark.parametrize("reason", ["aicluster-health: imex: this node is cut off", "replacing a tray"])
def test_other_drains_are_never_resumed(nvl, reason):
    nvl.scontrol(f"NodeName=gpu-3 State=IDLE+DRAIN Reason={reason} [root@2026-11-28T14:00:00]")
    assert nvl.health()[0].returncode == 0
    assert nvl.calls("scontrol") == ["-o show node gpu-3"]


def test_manual_run_only_reports(nvl):
    nvl.imex(n=domain_status(links=down(7), domain="DEGRADED"))
    run = nvl.run()
    assert run.returncode == 1
    assert nvl.calls("scontrol") == []


def test_dra_mode_needs_the_host_service_off(nvl):
    """Kubernetes: the DRA driver runs IMEX per ComputeDomain; the host's own service must be off."""
    nvl.write_env(f"AICLUSTER_GPUS=4\nAICLUSTER_FABRIC_DEVICES=2\nAICLUSTER_NVLINK_DOMAIN_NODES={DOMAIN}\n"
                  "AICLUSTER_IMEX=dra\n")
    nvl.imex(service="inactive")
    run = nvl.run()
    assert run.returncode == 0, run.stderr
    lines = check_lines(run.stdout)
    assert lines["imex"].startswith("note: IMEX runs per ComputeDomain")
    assert lines["nvlink-fabric"].startswith("ok")
    assert nvl.calls("nvidia-imex-ctl") == []
    nvl.imex(service="active")
    run = nvl.run()
    assert run.returncode == 1
    assert "imex: the host nvidia-imex service is active" in run.stderr


def test_bad_imex_mode_is_a_config_failure(nvl):
    nvl.write_env("AICLUSTER_GPUS=4\nAICLUSTER_FABRIC_DEVICES=2\nAICLUSTER_NVLINK_DOMAIN_NODES=18\nAICLUSTER_IMEX=both\n")
    run = nvl.run()
    assert run.returncode == 1
    assert "AICLUSTER_IMEX must be host or dra" in run.stderr


def test_single_node_domain_runs_no_domain_check(nvl):
    """HGX-style nodes (no AICLUSTER_NVLINK_DOMAIN_NODES, or 1): no fabric or IMEX check at all."""
    for env in ("", "AICLUSTER_NVLINK_DOMAIN_NODES=1\n"):
        nvl.write_env("AICLUSTER_GPUS=4\nAICLUSTER_FABRIC_DEVICES=2\n" + env)
        run, lines = nvl.health()
        assert run.returncode == 0, run.stderr
        assert "imex" not in lines and "nvlink-fabric" not in lines
    assert nvl.calls("nvidia-imex-ctl") == [] and nvl.calls("systemctl") == []
    assert nvl.calls("scontrol") == []


def _wait_for_calls(node: Nvl72Node, tool: str, seconds: float = 10) -> list[str]:
    """The calls of a tool the check started in the background."""
    import time
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not node.calls(tool):
        time.sleep(0.05)
    return node.calls(tool)


def test_an_idle_node_refreshes_the_imex_node_list_in_the_background(nvl):
    """A node drained for its domain takes no job, so no prolog rewrites IMEX's node list: the
    periodic check runs aicluster-imex-config itself, detached, and reports the domain as it is."""
    nvl.imex_config()
    nvl.scontrol("NodeName=gpu-3 State=IDLE+DRAIN Reason=aicluster-imex-domain: imex: old [root@2026-11-28T14:00:00]")
    nvl.imex(n=domain_status(links=down(7), domain="DEGRADED"))
    run, lines = nvl.health()
    assert run.returncode == 1
    assert lines["imex-config"].startswith("started ")
    assert _wait_for_calls(nvl, "aicluster-imex-config") == ["node=gpu-3"]


@pytest.mark.parametrize("state", ["ALLOCATED", "MIXED+DRAIN", "IDLE+COMPLETING"])
def test_a_node_with_a_job_never_has_its_imex_restarted(nvl, state):
    nvl.imex_config()
    nvl.scontrol(f"NodeName=gpu-3 State={state} ThreadsPerCore=1")
    run, lines = nvl.health()
    assert run.returncode == 0, run.stderr
    assert "imex-config" not in lines and nvl.calls("aicluster-imex-config") == []


def test_the_prolog_never_runs_the_imex_config_itself(nvl):
    """In a job's prolog slurm.conf's own IMEX prolog does it; the check only looks."""
    nvl.imex_config()
    run = nvl.run({"SLURMD_NODENAME": "gpu-3", "SLURM_JOB_ID": "9"})
    assert run.returncode == 0, run.stderr
    assert "imex-config" not in check_lines(run.stdout)


def test_a_service_never_started_waits_for_the_domain_not_replaced(nvl):
    """With aicluster-imex-config installed, an inactive (never started) service means the domain's
    addresses are not all known yet: the domain's reason, never a replacement."""
    nvl.imex_config()
    nvl.imex(service="inactive")
    nvl.health()
    assert "reason=aicluster-imex-domain: imex: the nvidia-imex service is not started yet" in drain_of(nvl)
    nvl.imex(service="failed")
    (nvl.bin / "scontrol.calls").unlink()
    nvl.health()
    assert drain_of(nvl).endswith("reason=aicluster-health: imex: the nvidia-imex service is failed, not active")
