"""The GPU health-check prolog (aicluster/node/bin/aicluster-gpu-healthcheck), run for real.

Each test runs the script as a subprocess with PATH holding only stub nvidia-smi / fi_info / dcgmi
programs and a `timeout` link, so the result never depends on the machine's own GPUs or EFA
devices. The stubs print what the real tools print:

- nvidia-smi --query-gpu=... --format=csv,noheader: one "v1, v2, ..." line per GPU, in the
  order of the requested fields; unknown field names are rejected the way nvidia-smi does
  ('Field "x" is not a valid field to query.', exit 2), so a typo in the script fails here.
- nvidia-smi --query-remapped-rows=gpu_bus_id,remapped_rows.pending,remapped_rows.failure.
- nvidia-smi nvlink --status: "GPU <i>: <name> (UUID: ...)" then one tab-indented
  "Link <n>: 26.562 GB/s" line per link, "Link <n>: <inactive>" for a link that is down.
- fi_info -p efa -t FI_EP_RDM: one indented block per endpoint (provider / fabric / domain /
  version / type / protocol), or "fi_getinfo: -61 (No data available)" when there is none.
- journalctl -k -b 0 --no-pager -o cat: the kernel log since boot, with the driver's
  "NVRM: Xid (PCI:0000:53:00): 79, pid=..., ..." lines.
- scontrol: records its arguments; `-o show node` prints the line in scontrol.node.

shellcheck is required (CI installs it): without it the lint test fails, it does not skip.
"""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.support.gpu_healthcheck import (BOOT_LOG, H100, P5_BUS_IDS, SCRIPT, Node, check_lines, efa_blocks,
                                          gpu, p5_domains, xid_line)


@pytest.fixture
def node(tmp_path) -> Node:
    return Node(tmp_path)


def test_script_is_executable_and_passes_shellcheck():
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck is required for this test: apt-get install shellcheck (.ci/run installs it)"
    assert os.access(SCRIPT, os.X_OK), f"{SCRIPT} must be executable (git update-index --chmod=+x)"
    assert SCRIPT.read_text().startswith("#!/bin/bash\n")
    run = subprocess.run([shellcheck, "--severity=style", str(SCRIPT)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_healthy_p5_passes(node):
    node.healthy()
    run = node.run()
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
    lines = check_lines(run.stdout)
    assert list(lines) == ["gpu-count", "ecc", "row-remap", "nvlink", "xid", "efa"]
    assert lines["gpu-count"] == f"ok (8 of 8 x {H100})"
    assert lines["ecc"].startswith("ok")
    assert lines["row-remap"] == "ok (none pending or failed on 8 GPUs)"
    assert lines["nvlink"] == "ok (18 active links on each of 8 GPUs)"
    assert lines["xid"] == "ok (no Xid needing a reset since boot)"
    assert lines["efa"] == "ok (32 of 32 devices)"
    queries = node.calls("nvidia-smi")
    assert len(queries) == 3 and all(q.endswith("--format=csv,noheader") for q in queries[:2])
    assert "ecc.errors.uncorrected.volatile.total" in queries[0]
    assert queries[2] == "nvlink --status"
    assert node.calls("fi_info") == ["-p efa -t FI_EP_RDM"]
    assert node.calls("scontrol") == []     # nothing to drain


@pytest.mark.parametrize("text", [
    "# written by cloud-init\nAICLUSTER_CLUSTER=demo\nAICLUSTER_GPUS=8\n\nAICLUSTER_FABRIC_DEVICES=32\n",
    'export AICLUSTER_GPUS="8"\r\nAICLUSTER_FABRIC_DEVICES=\'32\'\r\n',
    "  AICLUSTER_GPUS = 8\nAICLUSTER_FABRIC_DEVICES=032",  # spaces, leading zero, no final newline
])
def test_env_file_formats(node, text):
    node.healthy()
    node.write_env(text)
    run = node.run()
    assert run.returncode == 0, run.stdout + run.stderr


def test_missing_gpu_fails(node):
    node.nvidia_smi([gpu(i) for i in range(7)])
    node.fi_info(p5_domains())
    run = node.run()
    assert run.returncode == 1
    assert "gpu-count: FAIL" in run.stdout
    assert "gpu-count: expected 8 GPUs, nvidia-smi lists 7" in run.stderr


def test_uncorrected_ecc_errors_fail(node):
    node.nvidia_smi([gpu(i, ecc="2" if i == 3 else "0") for i in range(8)])
    node.fi_info(p5_domains())
    run = node.run()
    assert run.returncode == 1
    assert check_lines(run.stdout)["ecc"] == "FAIL"
    assert f"uncorrected volatile ECC errors: GPU 3 ({P5_BUS_IDS[3]}): 2" in run.stderr
    assert "gpu-count" not in run.stderr  # the count itself was right


def test_ecc_not_available_is_a_note(node):
    node.nvidia_smi([gpu(i, ecc="[N/A]", pending="[N/A]", failure="[N/A]") for i in range(8)])
    node.fi_info(p5_domains())
    run = node.run()
    assert run.returncode == 0, run.stderr
    lines = check_lines(run.stdout)
    assert lines["ecc"].startswith("note: not reported on GPU(s) 0,1,2,3,4,5,6,7")
    assert lines["row-remap"].startswith("note: not reported")


def test_unreadable_ecc_counter_fails(node):
    node.nvidia_smi([gpu(i, ecc="[Unknown Error]" if i == 5 else "0") for i in range(8)])
    node.fi_info(p5_domains())
    run = node.run()
    assert run.returncode == 1
    assert "cannot read ECC counters: GPU 5" in run.stderr


@pytest.mark.parametrize("pending,failure,reason", [
    ("1", "0", "remap pending (reset needed)"),
    ("0", "1", "remap failed (replace GPU)"),
])
def test_row_remapping_fails(node, pending, failure, reason):
    node.nvidia_smi([gpu(i, pending=pending if i == 6 else "0", failure=failure if i == 6 else "0")
                     for i in range(8)])
    node.fi_info(p5_domains())
    run = node.run()
    assert run.returncode == 1
    assert f"row-remap: {P5_BUS_IDS[6]}: {reason}" in run.stderr


def test_row_remap_query_unsupported_is_a_note(node):
    """Pre-Ampere GPUs / old drivers reject --query-remapped-rows: not a reason to drain."""
    node.nvidia_smi([gpu(i) for i in range(8)], remap_rc=2, error="Not supported")
    node.fi_info(p5_domains())
    run = node.run()
    assert run.returncode == 0, run.stderr
    assert check_lines(run.stdout)["row-remap"].startswith("note: not queried (nvidia-smi exit 2")


def test_efa_device_missing_fails(node):
    node.nvidia_smi([gpu(i) for i in range(8)])
    node.fi_info(p5_domains(31))
    run = node.run()
    assert run.returncode == 1
    assert check_lines(run.stdout)["efa"] == "FAIL"
    assert "efa: expected 32 EFA devices, fi_info lists 31" in run.stderr


def test_efa_domains_counted_once(node):
    """A domain listed by several endpoint blocks is one device."""
    node.healthy()
    (node.bin / "fi_info.out").write_text(efa_blocks(p5_domains() * 2))
    run = node.run()
    assert run.returncode == 0, run.stderr
    assert check_lines(run.stdout)["efa"] == "ok (32 of 32 devices)"


def test_no_efa_provider_fails(node):
    node.nvidia_smi([gpu(i) for i in range(8)])
    node.fi_info([])
    run = node.run()
    assert run.returncode == 1
    assert "expected 32 EFA devices, fi_info found none (exit 1: fi_getinfo: -61 (No data available))" in run.stderr


def test_fi_info_missing_fails(node):
    node.nvidia_smi([gpu(i) for i in range(8)])
    run = node.run()
    assert run.returncode == 1
    assert "efa: expected 32 EFA devices but fi_info is not installed" in run.stderr


def test_nvidia_smi_missing_fails(node):
    node.fi_info(p5_domains())
    run = node.run()
    assert run.returncode == 1
    assert "gpu-count: expected 8 GPUs but nvidia-smi is not installed" in run.stderr
    assert check_lines(run.stdout)["efa"].startswith("ok")  # the other checks still ran


def test_nvidia_smi_failing_fails(node):
    node.nvidia_smi([gpu(i) for i in range(8)], gpu_rc=9)
    node.fi_info(p5_domains())
    run = node.run()
    assert run.returncode == 1
    assert "nvidia-smi failed (exit 9): NVIDIA-SMI has failed because it couldn't communicate" in run.stderr


def test_non_gpu_node_skips_gpu_and_efa_checks(node):
    node.healthy()  # present but must not be called
    node.write_env("AICLUSTER_GPUS=0\nAICLUSTER_FABRIC_DEVICES=0\n")
    run = node.run()
    assert run.returncode == 0, run.stderr
    lines = check_lines(run.stdout)
    assert lines["gpu-count"].startswith("skipped") and lines["efa"].startswith("skipped")
    assert node.calls("nvidia-smi") == [] and node.calls("fi_info") == []


def test_hanging_nvidia_smi_is_cut_off(node):
    node.hanging_nvidia_smi()
    node.fi_info(p5_domains())
    run = node.run(timeout=60)     # a hang would raise TimeoutExpired here
    assert run.returncode == 1
    assert "nvidia-smi did not answer within 5s" in run.stderr


@pytest.mark.parametrize("text", [
    "AICLUSTER_GPUS=$(touch {marker})\nAICLUSTER_FABRIC_DEVICES=0\n",
    "AICLUSTER_GPUS=`touch {marker}`\nAICLUSTER_FABRIC_DEVICES=0\n",
    "AICLUSTER_GPUS=0; touch {marker}\nAICLUSTER_FABRIC_DEVICES=0\n",
    "AICLUSTER_GPUS=0\nAICLUSTER_FABRIC_DEVICES=0 && touch {marker}\n",
])
def test_malicious_values_are_rejected_not_executed(node, text):
    marker = node.tmp / "pwned"
    node.write_env(text.format(marker=marker))
    run = node.run()
    assert not marker.exists(), "the env file was executed"
    assert run.returncode == 1
    assert "must be a number" in run.stderr


def test_other_lines_are_never_executed(node):
    marker = node.tmp / "pwned"
    node.write_env(f"$(touch {marker})\n`touch {marker}`\nAICLUSTER_POOL=$(touch {marker})\n"
                   f"touch {marker}\nAICLUSTER_GPUS=0\nAICLUSTER_FABRIC_DEVICES=0\n")
    run = node.run()
    assert not marker.exists(), "the env file was executed"
    assert run.returncode == 0, run.stderr


@pytest.mark.parametrize("text,reason", [
    (None, "cannot read"),
    ("AICLUSTER_FABRIC_DEVICES=32\n", "does not set: AICLUSTER_GPUS"),
    ("AICLUSTER_GPUS=8\nAICLUSTER_FABRIC_DEVICES=\n", "AICLUSTER_FABRIC_DEVICES must be a number"),
    ("AICLUSTER_GPUS=-1\nAICLUSTER_FABRIC_DEVICES=0\n", "AICLUSTER_GPUS must be a number"),
])
def test_bad_env_file_fails(node, text, reason):
    node.healthy()
    if text is None:
        node.env_file.unlink()
    else:
        node.write_env(text)
    run = node.run()
    assert run.returncode == 1
    assert reason in run.stderr
    assert node.calls("nvidia-smi") == []


def test_prolog_without_path_ignores_the_current_directory(node):
    """slurmd runs prologs with no PATH; bash's fallback ends in '.', which must not be searched."""
    marker = node.tmp / "pwned"
    trap = node.tmp / "nvidia-smi"
    trap.write_text(f"#!/bin/bash\n: > {marker}\n")
    trap.chmod(0o755)
    node.write_env("AICLUSTER_GPUS=1\nAICLUSTER_FABRIC_DEVICES=0\n")
    run = subprocess.run([str(SCRIPT)], env={"AICLUSTER_NODE_ENV": str(node.env_file)}, cwd=node.tmp,
                         capture_output=True, text=True, timeout=30)
    assert not marker.exists(), "nvidia-smi was run from the current directory"
    assert "gpu-count" in run.stdout


def test_dcgm_diag_opt_in(node):
    node.healthy()
    node.dcgmi()
    assert node.run().returncode == 0
    assert node.calls("dcgmi") == []  # off by default
    run = node.run({"AICLUSTER_DCGM_LEVEL": "1"})
    assert run.returncode == 0, run.stderr
    assert check_lines(run.stdout)["dcgm"] == "ok (dcgmi diag -r 1)"
    assert node.calls("dcgmi") == ["diag -r 1"]


def test_dcgm_level_from_env_file(node):
    node.healthy()
    node.dcgmi()
    node.write_env("AICLUSTER_GPUS=8\nAICLUSTER_FABRIC_DEVICES=32\nAICLUSTER_DCGM_LEVEL=2\n")
    assert node.run().returncode == 0
    assert node.calls("dcgmi") == ["diag -r 2"]


def test_dcgm_diag_failure_fails(node):
    node.healthy()
    node.dcgmi(rc=226, output="+---------------------------+\n| Diagnostic | Result |\n"
                              "| Memory | Fail - GPU: 2 |\n+---------------------------+\n")
    run = node.run({"AICLUSTER_DCGM_LEVEL": "1"})
    assert run.returncode == 1
    assert "dcgm: dcgmi diag -r 1 failed (exit 226): | Memory | Fail - GPU: 2 |" in run.stderr


def test_dcgm_hang_is_cut_off(node):
    node.healthy()
    node._stub("dcgmi", f"#!/bin/bash\n{shutil.which('sleep')} 60\n")
    run = node.run({"AICLUSTER_DCGM_LEVEL": "1", "AICLUSTER_DCGM_TIMEOUT": "2"}, timeout=60)
    assert run.returncode == 1
    assert "dcgmi diag -r 1 did not finish within 2s" in run.stderr


def test_dcgm_requested_but_not_installed_is_a_note(node):
    node.healthy()
    run = node.run({"AICLUSTER_DCGM_LEVEL": "2"})
    assert run.returncode == 0, run.stderr
    assert "dcgmi is not installed" in check_lines(run.stdout)["dcgm"]


# --- NVLink and Xid ---------------------------------------------------------------------------


def test_a_link_down_fails_nvlink(node):
    node.healthy()
    node.nvidia_smi([gpu(i) | ({"links_down": 2} if i == 4 else {}) for i in range(8)])
    run = node.run()
    assert run.returncode == 1
    assert check_lines(run.stdout)["nvlink"] == "FAIL"
    assert "nvlink: links down (18 active on the best GPU): GPU 4: 16 of 18 links active" in run.stderr


def test_gpus_without_nvlink_are_a_note(node):
    node.healthy()
    node.nvidia_smi([gpu(i) | {"links": 0} for i in range(8)])
    run = node.run()
    assert run.returncode == 0, run.stderr
    assert check_lines(run.stdout)["nvlink"] == "note: no active NVLink (GPUs without NVLink)"


def test_a_fatal_xid_since_boot_fails(node):
    node.healthy()
    node.kernel_log(BOOT_LOG + xid_line(P5_BUS_IDS[2], 79) + xid_line(P5_BUS_IDS[2], 79)
                    + xid_line(P5_BUS_IDS[5], 48, "An uncorrectable double bit error (DBE) has been detected."))
    run = node.run()
    assert run.returncode == 1
    assert check_lines(run.stdout)["xid"] == "FAIL"
    assert ("xid: since boot: 0000:75:00 Xid 79, 0000:A8:00 Xid 48 (GPU reset or reboot needed)"
            in run.stderr)
    assert node.calls("journalctl") == ["-k -b 0 --no-pager -o cat"]


def test_application_xids_never_fail(node):
    """Xid 13 (graphics engine exception), 31 (MMU fault), 43 and 94 (contained ECC): NVIDIA's
    catalog resolves them by restarting the application, not the GPU."""
    node.healthy()
    node.kernel_log(BOOT_LOG + "".join(xid_line(P5_BUS_IDS[0], x, "app error") for x in (13, 31, 43, 94)))
    run = node.run()
    assert run.returncode == 0, run.stderr
    assert check_lines(run.stdout)["xid"].startswith("ok")


# --- the two roles: prolog and HealthCheckProgram drain the node themselves --------------------


def test_health_check_role_drains_the_node_with_the_reason(node):
    """Slurm ignores a HealthCheckProgram's exit status: the script drains the node itself, with
    the reason the reconcile loop looks for (aicluster-health: <check>: <detail>)."""
    node.healthy()
    node.nvidia_smi([gpu(i) for i in range(7)])
    run = node.run({"SLURMD_NODENAME": "gpu-3"})
    assert run.returncode == 1
    assert node.calls("scontrol") == [
        "-o show node gpu-3",
        "update nodename=gpu-3 state=drain reason=aicluster-health: gpu-count: expected 8 GPUs, nvidia-smi lists 7"]
    assert "drained gpu-3: aicluster-health: gpu-count" in run.stderr


def test_prolog_role_drains_with_the_reason_and_fails(node):
    node.healthy()
    node.fi_info(p5_domains(31))
    run = node.run({"SLURMD_NODENAME": "gpu-1", "SLURM_JOB_ID": "42"})
    assert run.returncode == 1
    assert node.calls("scontrol")[-1] == ("update nodename=gpu-1 state=drain "
                                          "reason=aicluster-health: efa: expected 32 EFA devices, fi_info lists 31")


def test_a_bad_env_file_drains_too(node):
    node.healthy()
    node.env_file.unlink()
    run = node.run({"SLURMD_NODENAME": "gpu-1"})
    assert run.returncode == 1
    assert node.calls("scontrol")[-1].startswith(
        "update nodename=gpu-1 state=drain reason=aicluster-health: config: cannot read")


def test_manual_run_never_drains(node):
    node.healthy()
    node.nvidia_smi([gpu(i) for i in range(7)])
    run = node.run()
    assert run.returncode == 1
    assert node.calls("scontrol") == []


def test_a_drain_by_a_person_keeps_its_reason(node):
    node.healthy()
    node.nvidia_smi([gpu(i) for i in range(7)])
    node.scontrol("NodeName=gpu-3 Arch=x86_64 State=IDLE+DRAIN ThreadsPerCore=2 "
                  "Reason=swapping the NIC [root@2026-11-23T10:00:00]")
    run = node.run({"SLURMD_NODENAME": "gpu-3"})
    assert run.returncode == 1
    assert node.calls("scontrol") == ["-o show node gpu-3"]
    assert "already drained by someone else" in run.stderr


def test_an_older_aicluster_reason_is_replaced(node):
    node.healthy()
    node.nvidia_smi([gpu(i) for i in range(7)])
    node.scontrol("NodeName=gpu-3 State=IDLE+DRAIN Reason=aicluster-health: xid: old [root@2026-11-23T10:00:00]")
    node.run({"SLURMD_NODENAME": "gpu-3"})
    assert node.calls("scontrol")[-1].startswith(
        "update nodename=gpu-3 state=drain reason=aicluster-health: gpu-count")


def test_a_failed_drain_is_reported(node):
    node.healthy()
    node.nvidia_smi([gpu(i) for i in range(7)])
    node.scontrol(rc=1)
    run = node.run({"SLURMD_NODENAME": "gpu-3"})
    assert run.returncode == 1
    assert "scontrol could not drain gpu-3 (exit 1)" in run.stderr


def test_health_check_role_never_runs_dcgm(node):
    """slurmd kills a HealthCheckProgram after 60 s, and it also runs on nodes busy with a job."""
    node.healthy()
    node.dcgmi()
    run = node.run({"SLURMD_NODENAME": "gpu-1", "AICLUSTER_DCGM_LEVEL": "2"})
    assert run.returncode == 0, run.stderr
    assert node.calls("dcgmi") == []
    assert check_lines(run.stdout)["dcgm"].startswith("skipped (periodic health check")


def test_dcgm_timeout_is_capped_to_what_batch_start_timeout_covers(node):
    node.healthy()
    node.dcgmi()
    node.recording_timeout()
    run = node.run({"SLURM_JOB_ID": "7", "SLURMD_NODENAME": "gpu-1", "AICLUSTER_DCGM_LEVEL": "2",
                    "AICLUSTER_DCGM_TIMEOUT": "9000"})
    assert run.returncode == 0, run.stderr
    assert "-k 1 300 dcgmi diag -r 2" in node.calls("timeout")
