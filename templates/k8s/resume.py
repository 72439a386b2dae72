"""resume.py: start a worker of an aicluster example JobSet from the job's newest checkpoint.

    python3 /opt/aicluster/resume.py -- torchrun ... train.py

JobSet restarts every worker of the gang when one fails (templates/k8s/train-job.yaml.j2). Each start,
the first and every restart, runs the command with, in its environment:
    AICLUSTER_RESUME_FROM    the newest complete entry of $AICLUSTER_CHECKPOINT_DIR (empty: start from
                             scratch, or no checkpoint directory)
    AICLUSTER_RESTART_COUNT  how many times JobSet has restarted the gang ($JOBSET_RESTART_ATTEMPT, the
                             pod's jobset.sigs.k8s.io/restart-attempt label)
the same contract aicluster-resume-job gives a Slurm batch job. "Newest complete" is that wrapper's
own rule (latest_checkpoint: newest by modification time, skipping hidden names and names ending in
.tmp, .partial or .incomplete), imported from the copy of it beside this file
(aicluster_resume_job.py): write a checkpoint under such a name and rename it when complete.

Every worker looks for itself: on the shared filesystem they all see the same newest entry. The
command replaces this process (exec), so signals and the exit status are the trainer's own.
Standard library only.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from aicluster_resume_job import latest_checkpoint  # noqa: E402 - the module sits beside this file

PROG = "resume.py"


def resume_environment(environ: dict[str, str]) -> dict[str, str]:
    """The command's environment: `environ` plus AICLUSTER_RESUME_FROM and AICLUSTER_RESTART_COUNT."""
    restarts = environ.get("JOBSET_RESTART_ATTEMPT") or "0"
    if not restarts.isdigit():
        raise ValueError(f"JOBSET_RESTART_ATTEMPT={restarts!r} is not a restart count")
    return {**environ, "AICLUSTER_RESUME_FROM": latest_checkpoint(environ.get("AICLUSTER_CHECKPOINT_DIR") or None),
            "AICLUSTER_RESTART_COUNT": restarts}


def main(argv: list[str]) -> int:
    command = argv[1:] if argv[:1] == ["--"] else argv
    if not command:
        print(f"usage: {PROG} -- COMMAND [ARG...]", file=sys.stderr)
        return 2
    try:
        env = resume_environment(dict(os.environ))
    except ValueError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    where = env["AICLUSTER_RESUME_FROM"]
    print(f"{PROG}: restart {env['AICLUSTER_RESTART_COUNT']}: "
          + (f"resuming from {where}" if where else "no checkpoint, starting from scratch"), file=sys.stderr, flush=True)
    try:
        os.execvpe(command[0], command, env)
    except OSError as exc:
        print(f"{PROG}: cannot run {command[0]}: {exc}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
