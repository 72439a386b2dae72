"""The NCCL environment in every job (issue 15, item 6): slurm.conf's TaskProlog
(aicluster/node/bin/aicluster-task-prolog) as a real slurmd 22.05 runs it.

A private munged + slurmctld on the rendered configuration and a real slurmd standing in for a
launched node (tests/support/slurmctld.py). The node's env file holds what cloud-init writes on a
p5 (/etc/aicluster/nccl.env); the installed TaskProlog is a one-line wrapper that points the real
script at it. A batch job prints its environment (`sbatch --wrap`) and that of an `srun` step: both
must carry the variables. Without the TaskProlog line (the old configuration) they do not: the
test of the rendered file fails on the old template.

Needs root, slurmctld, slurmd and munged: a missing one fails the test (never skips).
"""
from __future__ import annotations

import re
import subprocess
import socket
from pathlib import Path

from aicluster.design.cluster import design_cluster
from aicluster.spec.cluster import parse_spec
from tests.support import slurmd_spec
from tests.support.slurmctld import (PROLOG_TIMEOUT_S, RESUME_TIMEOUT_S, Controller, booted_just_now, fields, tool,
                                     wait_for)

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "components" / "aicluster" / "node" / "bin" / "aicluster-task-prolog"

# What /etc/aicluster/nccl.env holds on a p5 (templates/cloud-init/compute.yaml.j2), plus a
# library dir prepended the way GCP's stacks write it.
NCCL_ENV = ("# NCCL over EFA\n"
            "export FI_EFA_USE_DEVICE_RDMA=1\n"
            "export NCCL_SOCKET_IFNAME=^lo,docker\n"
            "export LD_LIBRARY_PATH=/opt/aicluster-test/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\n")


def install_task_prolog(ctl: Controller, env_text: str = NCCL_ENV) -> Path:
    node = ctl.root / "node"
    node.mkdir(parents=True, exist_ok=True)
    env_file = node / "nccl.env"
    env_file.write_text(env_text)
    wrapper = Path(ctl.runtime.bin_dir) / "aicluster-task-prolog"
    wrapper.write_text(f"#!/bin/sh\nAICLUSTER_NCCL_ENV={env_file} exec {SCRIPT}\n")
    wrapper.chmod(0o755)
    return env_file


def start_slurmd_resolving(ctl: Controller, node: str) -> None:
    """Controller.start_slurmd, plus a private /etc/hosts in which `node` resolves: with
    SlurmctldParameters=cloud_dns, srun finds a step's nodes by name (the cluster's DNS zone on a
    real node). slurmd runs in its own mount namespace with that file bound over /etc/hosts, so
    the job's srun inherits it and this machine's own file is left alone."""
    ctl.run("scontrol", "update", f"nodename={node}", "nodeaddr=127.0.0.1",
            f"nodehostname={socket.gethostname().split('.')[0]}")
    hosts = ctl.root / "hosts"
    hosts.write_text(Path("/etc/hosts").read_text() + f"\n127.0.0.1 {node}\n")
    script = f'mount --bind "$1" /etc/hosts && shift && exec "$@"'
    ctl._spawn("slurmd", [*booted_just_now(), "--mount", "--propagation", "private",
                          "sh", "-c", script, "sh", str(hosts), tool("slurmd"), "-D", "-N", node, "-f", str(ctl.conf)])


def run_job(ctl: Controller, wrap: str, extra: tuple[str, ...] = ()) -> str:
    """Submit a one-node batch job on trn-1, start its slurmd, wait for it; its output."""
    out_file = ctl.root / "job.out"
    out = ctl.run("sbatch", "-N", "1", "-p", "trn", "-w", "trn-1", "-o", str(out_file), *extra, "--wrap", wrap)
    job_id = re.search(r"Submitted batch job (\d+)", out).group(1)
    wait_for("ResumeProgram to be called for trn-1", lambda: "trn-1" in ctl.resume_calls(),
             RESUME_TIMEOUT_S, ctl.diagnostics)
    start_slurmd_resolving(ctl, "trn-1")

    def done():
        job = fields(ctl.run("scontrol", "-o", "show", "job", job_id))
        return job if job["JobState"] in ("COMPLETED", "FAILED", "NODE_FAIL", "CANCELLED") else None

    job = wait_for("the job to finish", done, PROLOG_TIMEOUT_S, ctl.diagnostics)
    assert job["JobState"] == "COMPLETED", (job, ctl.diagnostics())
    return out_file.read_text()


def env_blocks(output: str) -> dict[str, dict[str, str]]:
    """`echo == name ==; env` sections of a job's output -> {name: {VAR: value}}."""
    blocks: dict[str, dict[str, str]] = {}
    current = None
    for line in output.splitlines():
        m = re.fullmatch(r"== (\w+) ==", line)
        if m:
            current = blocks.setdefault(m.group(1), {})
        elif current is not None and "=" in line:
            key, _, value = line.partition("=")
            current[key] = value
    return blocks


WRAP = "echo == batch ==; env; echo == step ==; srun -N1 -n1 env"


def test_batch_scripts_and_srun_steps_get_the_nccl_environment(tmp_path):
    ctl = Controller("taskprolog", design_cluster(parse_spec(slurmd_spec("taskprolog"))), tmp_path)
    try:
        ctl.start()
        assert ctl.config()["TaskProlog"].endswith("/bin/aicluster-task-prolog")
        install_task_prolog(ctl)
        # The submitter's own value of a variable the file also sets wins (a user's override), while
        # a list the file only extends (LD_LIBRARY_PATH) keeps the submitter's entries after its own.
        blocks = env_blocks(run_job(ctl, WRAP, ("--export=ALL,NCCL_SOCKET_IFNAME=ens5,LD_LIBRARY_PATH=/user/lib",)))
        assert set(blocks) == {"batch", "step"}, blocks
        for name, env in blocks.items():
            assert env.get("FI_EFA_USE_DEVICE_RDMA") == "1", (name, env)
            assert env.get("NCCL_SOCKET_IFNAME") == "ens5", (name, env)
            # Once, in the step too (which inherits the batch script's already extended value).
            assert env.get("LD_LIBRARY_PATH") == "/opt/aicluster-test/lib:/user/lib", (name, env)
    finally:
        ctl.stop()


def test_without_a_submitter_value_the_node_value_is_set(tmp_path):
    ctl = Controller("taskprolog2", design_cluster(parse_spec(slurmd_spec("taskprolog2"))), tmp_path)
    try:
        ctl.start()
        install_task_prolog(ctl)
        blocks = env_blocks(run_job(ctl, WRAP, ("--export=PATH",)))
        for name, env in blocks.items():
            assert env.get("NCCL_SOCKET_IFNAME") == "^lo,docker", (name, env)
            assert env.get("FI_EFA_USE_DEVICE_RDMA") == "1", (name, env)
    finally:
        ctl.stop()


def test_without_the_task_prolog_line_jobs_do_not_see_it(tmp_path):
    """The control: the same node and env file, slurm.conf without TaskProlog (the old template).
    Neither the batch script nor the step sees the variables, so the test above can fail."""
    ctl = Controller("notaskprolog", design_cluster(parse_spec(slurmd_spec("notaskprolog"))), tmp_path)
    try:
        ctl.start()
        ctl.stop_slurmctld()
        text = ctl.conf.read_text()
        assert "\nTaskProlog=" in text
        ctl.conf.write_text(re.sub(r"\nTaskProlog=[^\n]*", "", text))
        ctl.start_slurmctld()
        install_task_prolog(ctl)
        blocks = env_blocks(run_job(ctl, WRAP, ("--export=PATH",)))
        assert set(blocks) == {"batch", "step"}, blocks
        for name, env in blocks.items():
            assert "FI_EFA_USE_DEVICE_RDMA" not in env, (name, env)
    finally:
        ctl.stop()


def test_the_script_never_fails_a_task(tmp_path):
    """No env file (a node of a pool without a fabric, a TPU host) prints nothing and exits 0; a
    file that fails half-way still gives what it set before failing."""
    missing = subprocess.run(["bash", str(SCRIPT)], env={"PATH": "/usr/bin:/bin", "AICLUSTER_NCCL_ENV": str(tmp_path / "none")},
                             capture_output=True, text=True, timeout=30)
    assert (missing.returncode, missing.stdout) == (0, "")
    broken = tmp_path / "broken.env"
    broken.write_text("export A_SET=1\necho chatter\nfalse\nreturn 3\nexport NEVER=1\n")
    run = subprocess.run(["bash", str(SCRIPT)], env={"PATH": "/usr/bin:/bin", "AICLUSTER_NCCL_ENV": str(broken)},
                         capture_output=True, text=True, timeout=30)
    assert run.returncode == 0
    assert run.stdout.splitlines() == ["export A_SET=1"], run.stdout      # chatter went to stderr
