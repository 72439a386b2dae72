"""aicluster-resume-job (aicluster/node/bin/aicluster-resume-job), run for real against a fake scontrol.

The fake scontrol answers from a JSON file the test writes (the job, its nodes' states, the
partitions) the way Slurm 22.05's `scontrol -o show ...` prints them, records every call, and
applies `requeue` and `update jobid=... ExcNodeList=...` to that state. The step is a small shell
command standing in for `srun python train.py`: it records the environment it was given and exits
with the status the test asks for.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "components" / "aicluster" / "node" / "bin" / "aicluster-resume-job"

FAKE_SCONTROL = r'''#!{python}
import json, os, re, sys
here = os.path.dirname(os.path.abspath(__file__))
path = os.path.join(here, "slurm.json")
state = json.load(open(path))
args = sys.argv[1:]
with open(os.path.join(here, "scontrol.calls"), "a") as log:
    log.write(" ".join(args) + "\n")

def expand(expr):
    out = []
    for group in re.findall(r"[^,\[]+(?:\[[^\]]*\])?", expr):
        m = re.match(r"^(.*)\[(.*)\]$", group)
        if not m:
            out.append(group)
            continue
        for part in m.group(2).split(","):
            lo, _, hi = part.partition("-")
            out += [f"{m.group(1)}{i}" for i in range(int(lo), int(hi or lo) + 1)]
    return out

if args[:2] == ["show", "hostnames"]:
    print("\n".join(expand(args[2])))
elif args[:3] == ["-o", "show", "node"]:
    for name in expand(args[3]):
        print(f"NodeName={name} Arch=x86_64 CoresPerSocket=96 State={state['nodes'][name]} ThreadsPerCore=2")
elif args[:3] == ["-o", "show", "job"]:
    job = state["job"]
    print(f"JobId={args[3]} JobName=train JobState={job['state']} Reason=None Restarts={job['restarts']} "
          f"NodeList={job['nodes']} ReqNodeList={job.get('require') or '(null)'} "
          f"ExcNodeList={job['exclude'] or '(null)'}")
elif args[:3] == ["-o", "show", "partition"]:
    print(f"PartitionName={args[3]} Nodes={state['partitions'][args[3]]} State=UP TotalNodes=0")
elif args[0] == "requeue":
    if state["job"]["state"] != "RUNNING":
        print(f"Requested operation is presently disabled for job {args[1]}", file=sys.stderr)
        sys.exit(1)
    state["job"]["state"] = "PENDING"
    state["job"]["restarts"] += 1
elif args[0] == "update":
    kv = dict(a.split("=", 1) for a in args[1:])
    if state["job"]["state"] != "PENDING":
        print("Job is no longer pending execution", file=sys.stderr)
        sys.exit(1)
    state["job"]["exclude"] = kv["ExcNodeList"]
else:
    print("fake scontrol: unexpected " + " ".join(args), file=sys.stderr)
    sys.exit(2)
json.dump(state, open(path, "w"))
'''


class Job:
    """A temp dir with the fake scontrol, the step and the environment of one batch job."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.bin = tmp / "bin"
        self.bin.mkdir()
        scontrol = self.bin / "scontrol"
        scontrol.write_text(FAKE_SCONTROL.replace("{python}", sys.executable))
        scontrol.chmod(0o755)
        self.ckpt = tmp / "ckpt"
        self.ckpt.mkdir()
        self.state = {"job": {"state": "RUNNING", "restarts": 0, "nodes": "gpu-[1-4]", "exclude": ""},
                      "nodes": {f"gpu-{i}": "ALLOCATED" for i in range(1, 7)},
                      "partitions": {"gpu": "gpu-[1-6]"}}
        self.env = {"PATH": f"{self.bin}:/usr/bin:/bin", "SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "gpu-[1-4]",
                    "SLURM_JOB_NUM_NODES": "4", "SLURM_JOB_PARTITION": "gpu"}

    def node(self, name: str, state: str) -> None:
        self.state["nodes"][name] = state

    def run(self, *options: str, step_rc: int = 1, step: str | None = None,
            env: dict | None = None) -> subprocess.CompletedProcess:
        (self.bin / "slurm.json").write_text(json.dumps(self.state))
        seen = self.tmp / "step.env"
        step = step or (f'echo "from=$AICLUSTER_RESUME_FROM restarts=$AICLUSTER_RESTART_COUNT" > {seen}; '
                        f"exit {step_rc}")
        return subprocess.run([sys.executable, str(SCRIPT), *options, "--", "sh", "-c", step],
                              env={**self.env, **(env or {})}, capture_output=True, text=True, timeout=60)

    def calls(self) -> list[str]:
        log = self.bin / "scontrol.calls"
        return log.read_text().splitlines() if log.exists() else []

    def slurm(self) -> dict:
        return json.loads((self.bin / "slurm.json").read_text())

    def step_saw(self) -> str:
        return (self.tmp / "step.env").read_text().strip()


@pytest.fixture
def job(tmp_path) -> Job:
    return Job(tmp_path)


def checkpoint(job: Job, name: str, mtime: int) -> Path:
    path = job.ckpt / name
    path.mkdir()
    os.utime(path, (mtime, mtime))
    return path


def test_a_step_that_succeeds_asks_slurm_nothing(job):
    run = job.run("--checkpoint-dir", str(job.ckpt), step_rc=0)
    assert run.returncode == 0, run.stderr
    assert job.calls() == []
    assert job.step_saw() == "from= restarts=0"
    assert "no checkpoint, starting from scratch" in run.stderr


def test_the_step_gets_the_newest_complete_checkpoint_and_the_restart_count(job):
    checkpoint(job, "step-1000", 1_000)
    newest = checkpoint(job, "step-2000", 2_000)
    checkpoint(job, "step-3000.tmp", 3_000)       # still being written
    checkpoint(job, ".step-4000", 4_000)          # hidden: a framework's scratch
    run = job.run("--checkpoint-dir", str(job.ckpt), step_rc=0, env={"SLURM_RESTART_COUNT": "2"})
    assert run.returncode == 0, run.stderr
    assert job.step_saw() == f"from={newest} restarts=2"


def test_a_failure_on_healthy_nodes_is_the_jobs_own_error(job):
    run = job.run(step_rc=3)
    assert run.returncode == 3
    assert job.calls() == ["-o show node gpu-[1-4]"]
    assert "every node of the job is up: not a node failure, not requeued" in run.stderr


@pytest.mark.parametrize("state", ["ALLOCATED+DRAIN", "DOWN+NOT_RESPONDING", "ALLOCATED+NOT_RESPONDING", "IDLE*"])
def test_a_failed_node_requeues_the_job_and_excludes_it(job, state):
    job.node("gpu-3", state)
    run = job.run(step_rc=1)
    assert run.returncode == 1
    calls = job.calls()
    # The requeue comes first: Slurm changes ExcNodeList only while the job is pending.
    assert calls.index("requeue 77") < calls.index("update jobid=77 ExcNodeList=gpu-3")
    assert job.slurm()["job"] == {"state": "PENDING", "restarts": 1, "nodes": "gpu-[1-4]", "exclude": "gpu-3"}
    assert "node(s) gpu-3 failed (command exit 1): requeuing job 77, restart 1 of 3" in run.stderr


def test_earlier_exclusions_are_kept(job):
    job.state["job"]["exclude"] = "gpu-5"
    job.node("gpu-1", "ALLOCATED+DRAIN")
    job.run()
    assert job.slurm()["job"]["exclude"] == "gpu-5,gpu-1"


def test_no_more_restarts_than_allowed(job):
    job.node("gpu-2", "DOWN")
    run = job.run("--max-restarts", "2", env={"SLURM_RESTART_COUNT": "2"})
    assert run.returncode == 1
    assert "requeue 77" not in job.calls()
    assert "(--max-restarts 2): not requeued" in run.stderr


def test_a_node_is_not_excluded_when_the_partition_would_be_too_small(job):
    """A 4-node job in a 4-node partition: excluding the drained node would leave it pending
    forever; the reconcile loop replaces the node under the same name, so the job waits for it."""
    job.state["partitions"]["gpu"] = "gpu-[1-4]"
    job.node("gpu-4", "ALLOCATED+DRAIN")
    run = job.run()
    assert "requeue 77" in job.calls()
    assert not any(c.startswith("update") for c in job.calls())
    assert "not excluding gpu-4: 3 node(s) of partition gpu would be left for a job of 4" in run.stderr


def test_a_job_slurm_already_requeued_still_gets_the_exclusion(job):
    """Slurm requeues a batch job itself when one of its nodes dies; the wrapper's own requeue then
    fails, and it still excludes the node."""
    job.state["job"]["state"] = "PENDING"
    job.node("gpu-2", "DOWN+NOT_RESPONDING")
    run = job.run()
    assert "already requeued by Slurm" in run.stderr
    assert job.slurm()["job"]["exclude"] == "gpu-2"


def test_no_exclude(job):
    job.node("gpu-2", "ALLOCATED+DRAIN")
    job.run("--no-exclude")
    assert job.calls()[-1] == "requeue 77"


def test_a_job_slurm_signalled_is_never_requeued(job):
    """scancel or the time limit: Slurm signals every process of the job, the wrapper included."""
    job.node("gpu-2", "ALLOCATED+DRAIN")
    run = job.run(step='kill -TERM "$PPID"; sleep 0.2; exit 143')
    assert run.returncode == 143
    assert job.calls() == []
    assert "after Slurm signalled the job: not requeued" in run.stderr


def test_outside_a_job_it_refuses(job):
    env = {k: v for k, v in job.env.items() if k != "SLURM_JOB_ID"}
    run = subprocess.run([sys.executable, str(SCRIPT), "--", "true"], env=env, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 2
    assert "run it inside an sbatch script" in run.stderr


def test_script_is_executable_python3_standard_library_only():
    assert os.access(SCRIPT, os.X_OK), f"{SCRIPT} must be executable (git update-index --chmod=+x)"
    text = SCRIPT.read_text()
    assert text.startswith("#!/usr/bin/env python3\n")
    imports = set(re.findall(r"^(?:import|from) (\w+)", text, re.M))
    assert imports <= {"__future__", "argparse", "os", "re", "signal", "subprocess", "sys", "pathlib"}, imports


def test_a_node_the_job_asks_for_by_name_is_not_excluded(job):
    """sbatch -w gpu-2 and ExcNodeList=gpu-2 can never run: the job waits for gpu-2's replacement."""
    job.state["job"]["require"] = "gpu-[1-2]"
    job.node("gpu-2", "ALLOCATED+DRAIN")
    run = job.run()
    assert "requeue 77" in job.calls()
    assert not any(c.startswith("update") for c in job.calls())
    assert "not excluding gpu-2: the job asks for it by name" in run.stderr
