"""The GPU health check (aicluster/node/bin/aicluster-gpu-healthcheck) as a real slurmd runs it.

A private munged + slurmctld on the rendered configuration and a real slurmd standing in for a
launched node (tests/support/slurmctld.py). slurmd runs the real script, as HealthCheckProgram
when it starts (before it registers: slurm.conf(5), HealthCheckProgram) and as the Prolog when a
job lands on it. The node's tools are stubs: an nvidia-smi that lists fewer GPUs than the node's
env file expects, as on a node whose GPU fell off the bus. slurmd gives the script no environment
but SLURMD_NODENAME (slurmd.c, run_script_health_check), so the installed program is a
two-line wrapper that points it at the stubs, the env file and the test's slurm.conf (what
/etc/aicluster/node.env and the configless cache under /run/slurm/conf are on a real node), then
runs the real script.

Needs root, slurmctld, slurmd and munged: a missing one fails the test (never skips).
"""
from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

from aicluster.design.cluster import design_cluster
from aicluster.spec.cluster import parse_spec
from tests.support import slurmd_spec
from tests.support.slurmctld import PROLOG_TIMEOUT_S, RESUME_TIMEOUT_S, Controller, fields, wait_for

SCRIPT = Path(__file__).resolve().parents[2] / "components" / "aicluster" / "node" / "bin" / "aicluster-gpu-healthcheck"

# The health check's expectations come from the node's env file, not from Slurm.
SPEC = slurmd_spec("health")

NVIDIA_SMI = r'''#!{python}
"""nvidia-smi of a node with {gpus} healthy H100s (of the 8 its env file expects)."""
import sys
gpus = {gpus}
if sys.argv[1:2] == ["nvlink"]:
    for i in range(gpus):
        print("GPU %d: NVIDIA H100 80GB HBM3 (UUID: GPU-%08x)" % (i, i))
        for n in range(18):
            print("\t Link %d: 26.562 GB/s" % n)
elif any(a.startswith("--query-gpu=") for a in sys.argv):
    for i in range(gpus):
        print("%d, 00000000:%02X:00.0, 0, NVIDIA H100 80GB HBM3" % (i, 0x53 + i))
else:
    for i in range(gpus):
        print("00000000:%02X:00.0, 0, 0" % (0x53 + i))
'''


def install_health_check(ctl: Controller, gpus: int) -> Path:
    """Replace the recorder slurmd would run with the real script behind a wrapper; returns the
    file the wrapper logs each run to."""
    node = ctl.root / "node"
    stubs = node / "bin"
    stubs.mkdir(parents=True)
    smi = stubs / "nvidia-smi"
    smi.write_text(NVIDIA_SMI.replace("{python}", sys.executable).replace("{gpus}", str(gpus)))
    smi.chmod(0o755)
    env_file = node / "node.env"
    env_file.write_text("AICLUSTER_GPUS=8\nAICLUSTER_FABRIC_DEVICES=0\n")
    runs = node / "runs.log"
    system_path = ":".join(str(Path(shutil.which(t)).parent) for t in ("scontrol", "timeout", "bash"))
    wrapper = Path(ctl.runtime.bin_dir) / "aicluster-gpu-healthcheck"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'echo "node=$SLURMD_NODENAME job=${{SLURM_JOB_ID:-}}" >> {runs}\n'
        f"PATH={stubs}:{system_path} AICLUSTER_NODE_ENV={env_file} SLURM_CONF={ctl.conf} "
        f"exec {SCRIPT} >> {node / 'output.log'} 2>&1\n")
    wrapper.chmod(0o755)
    return runs


def node_of(ctl: Controller, name: str) -> dict[str, str]:
    line = ctl.run("scontrol", "-o", "show", "node", name)
    node = fields(line)
    reason = re.search(r" Reason=(.*?)(?: \[[^\]]*\])?$", line.strip())
    node["Reason"] = reason.group(1) if reason else ""
    return node


def test_a_failing_health_check_drains_its_node_and_the_job_goes_elsewhere(tmp_path):
    """The real script, run by a real slurmd on a node missing a GPU: the node is drained with
    `aicluster-health: gpu-count: ...` (the reason the reconcile loop replaces nodes for), and the
    job that was meant for it is requeued, not held, and powers up the pool's other node."""
    ctl = Controller("health", design_cluster(parse_spec(SPEC)), tmp_path)
    try:
        ctl.start()
        runs = install_health_check(ctl, gpus=7)
        out = ctl.run("sbatch", "-N", "1", "-p", "trn", "-o", "/dev/null", "--wrap", "true")
        job_id = re.search(r"Submitted batch job (\d+)", out).group(1)
        wait_for("ResumeProgram to be called for trn-1", lambda: "trn-1" in ctl.resume_calls(),
                 RESUME_TIMEOUT_S, ctl.diagnostics)
        ctl.start_slurmd("trn-1")

        def drained():
            node = node_of(ctl, "trn-1")
            return node if "DRAIN" in node["State"] else None

        node = wait_for("trn-1 to be drained by the health check", drained, PROLOG_TIMEOUT_S, ctl.diagnostics)
        assert node["Reason"].startswith("aicluster-health: gpu-count: expected 8 GPUs, nvidia-smi lists 7"), node
        assert "node=trn-1 job=" in runs.read_text().splitlines()[0], runs.read_text()

        job = fields(ctl.run("scontrol", "-o", "show", "job", job_id))
        assert int(job["Restarts"]) >= 1 and job["JobState"] == "PENDING", job
        assert "held" not in job["Reason"].lower() and job["Priority"] != "0", job
        # Slurm delays a requeued job's start until the old launch credential has expired
        # (Reason=BeginTime, about two minutes); an operator's StartTime=now skips the wait here.
        ctl.run("scontrol", "update", f"jobid={job_id}", "StartTime=now")
        wait_for("the job to be started on trn-2", lambda: "trn-2" in ctl.resume_calls(),
                 PROLOG_TIMEOUT_S, ctl.diagnostics)
        job = fields(ctl.run("scontrol", "-o", "show", "job", job_id))
        assert ctl.hostnames(job["NodeList"]) == ["trn-2"], job
    finally:
        ctl.stop()


def test_a_healthy_node_is_left_in_service(tmp_path):
    """All 8 GPUs: the health check runs when slurmd starts and as the prolog, drains nothing, and
    the job runs to completion on the node."""
    ctl = Controller("healthy", design_cluster(parse_spec(SPEC)), tmp_path)
    try:
        ctl.start()
        runs = install_health_check(ctl, gpus=8)
        out = ctl.run("sbatch", "-N", "1", "-p", "trn", "-w", "trn-1", "-o", "/dev/null", "--wrap", "true")
        job_id = re.search(r"Submitted batch job (\d+)", out).group(1)
        wait_for("ResumeProgram to be called for trn-1", lambda: "trn-1" in ctl.resume_calls(),
                 RESUME_TIMEOUT_S, ctl.diagnostics)
        ctl.start_slurmd("trn-1")

        def done():
            job = fields(ctl.run("scontrol", "-o", "show", "job", job_id))
            return job if job["JobState"] in ("COMPLETED", "FAILED", "NODE_FAIL") else None

        job = wait_for("the job to finish", done, PROLOG_TIMEOUT_S, ctl.diagnostics)
        assert job["JobState"] == "COMPLETED", (job, (ctl.root / "node" / "output.log").read_text())
        node = node_of(ctl, "trn-1")
        assert "DRAIN" not in node["State"], node
        log = runs.read_text().splitlines()
        assert f"node=trn-1 job={job_id}" in log, log          # as the prolog
        assert "node=trn-1 job=" in log, log                   # as HealthCheckProgram
        assert json.dumps(node)  # the node answered with a full record
    finally:
        ctl.stop()


RESUME_JOB = Path(__file__).resolve().parents[2] / "components" / "aicluster" / "node" / "bin" / "aicluster-resume-job"


def test_a_job_whose_node_is_drained_under_it_resumes_elsewhere(tmp_path):
    """aicluster-resume-job as the batch script on a real slurmd: the step fails while the health
    check drains its node (here the step drains it itself, as the periodic check would), the
    wrapper requeues the job and excludes the node, and the job powers up the pool's other node.
    Checks on Slurm 22.05 that the exclusion is accepted once the job is requeued."""
    ctl = Controller("resume", design_cluster(parse_spec(SPEC)), tmp_path)
    try:
        ctl.start()
        install_health_check(ctl, gpus=8)
        ckpt = tmp_path / "ckpt"
        (ckpt / "step-100").mkdir(parents=True)
        step = tmp_path / "train.sh"     # stands in for `srun python train.py`
        step.write_text("#!/bin/sh\n"
                        "echo \"resume from $AICLUSTER_RESUME_FROM\"\n"
                        "scontrol update nodename=trn-1 state=drain 'reason=aicluster-health: xid: 0000:53:00 Xid 79'\n"
                        "exit 1\n")
        step.chmod(0o755)
        batch = tmp_path / "job.sh"
        batch.write_text(f"#!/bin/sh\nexec {sys.executable} {RESUME_JOB} --checkpoint-dir {ckpt} -- {step}\n")
        # No -w: a job that names its nodes can never run without them (the lowest-numbered powered
        # down node, trn-1, is the one it gets).
        out = ctl.run("sbatch", "-N", "1", "-p", "trn", "--requeue", "-o", str(tmp_path / "job-%j.out"), str(batch))
        job_id = re.search(r"Submitted batch job (\d+)", out).group(1)
        wait_for("ResumeProgram to be called for trn-1", lambda: "trn-1" in ctl.resume_calls(),
                 RESUME_TIMEOUT_S, ctl.diagnostics)
        ctl.start_slurmd("trn-1")

        def requeued():
            job = fields(ctl.run("scontrol", "-o", "show", "job", job_id))
            done = job.get("ExcNodeList") == "trn-1" and int(job["Restarts"]) >= 1 and job["JobState"] == "PENDING"
            return job if done else None     # COMPLETING first, while the batch script ends

        job = wait_for("the wrapper to requeue the job without trn-1", requeued, PROLOG_TIMEOUT_S,
                       lambda: ctl.diagnostics() + "".join(p.read_text() for p in tmp_path.glob("job-*.out")))
        assert "held" not in job["Reason"].lower() and job["Priority"] != "0", job
        output = (tmp_path / f"job-{job_id}.out").read_text()
        assert f"resume from {ckpt / 'step-100'}" in output, output
        assert "node(s) trn-1 failed (command exit 1): requeuing job" in output, output
        ctl.run("scontrol", "update", f"jobid={job_id}", "StartTime=now")   # skip the credential wait
        wait_for("the job to be started on trn-2", lambda: "trn-2" in ctl.resume_calls(),
                 PROLOG_TIMEOUT_S, ctl.diagnostics)
    finally:
        ctl.stop()
