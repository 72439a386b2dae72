"""The example GPU job as a JobSet, the same on EKS and GKE (templates/k8s/train-job.yaml.j2): what
makes it restart as a gang and resume from its latest checkpoint.

- Failure policy: every worker's Job fails on its first failed pod (backoffLimit 0), and JobSet then
  recreates all the workers together (restartStrategy Recreate): a collective cannot go on without
  one rank. The trainer's own errors restart it at most MAX_RESTARTS times, the number
  aicluster-resume-job requeues a Slurm job by default; a worker evicted or lost with its node (the
  pod's DisruptionTarget condition: drain, preemption, a node that died) restarts it without using
  one up, as JobSet's own host-maintenance example does.
- Failed nodes stay out: the workers select nodes whose GPU health check passed (k8s_health.py's
  JOB_NODE_SELECTOR), so the restarted gang lands elsewhere.
- Resume: every worker starts through resume.py, which exports AICLUSTER_RESUME_FROM (the newest
  complete checkpoint under AICLUSTER_CHECKPOINT_DIR, by aicluster-resume-job's own rule, shipped
  beside it) and AICLUSTER_RESTART_COUNT (the JobSet's restart attempt), the same contract the
  Slurm wrapper gives a batch job.
- A PodDisruptionBudget over the running workers: a node drain (an upgrade, a scale-down) waits
  instead of evicting one of them.
"""
from __future__ import annotations

from aicluster.design.model import ClusterDesign
from aicluster.design.kubernetes import versions
from aicluster.render.templates import static
from aicluster.render.node_programs import program_text

# Restarts for the job's own failures: aicluster-resume-job's DEFAULT_MAX_RESTARTS on Slurm (a test
# keeps them equal).
MAX_RESTARTS = 3
REPLICATED_JOB = "workers"
# Labels JobSet v1alpha2 puts on every pod it creates (api/jobset/v1alpha2/jobset_types.go JobSetNameKey;
# pkg/constants RestartsKey: the JobSet's restart attempt, 0 for the first run).
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
RESTART_ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"
CHECKPOINTS_DIR = "checkpoints"
# ConfigMap key -> the scripts every GPU example job mounts: the training script and the resume
# launcher (templates), and the newest-checkpoint rule it imports (the Slurm wrapper itself, a node
# program, as a module).
GPU_JOB_TEMPLATES = {"allreduce.py": "k8s/allreduce.py", "resume.py": "k8s/resume.py"}
RESUME_MODULE = "aicluster_resume_job.py"
GPU_JOB_SCRIPTS = (*GPU_JOB_TEMPLATES, RESUME_MODULE)
_SCRATCH = ("SCRATCH",)      # FSx deployment types that keep no second copy of the data


def checkpoint_dir(design: ClusterDesign, job: str) -> str | None:
    """Where the job's checkpoints live: <mount>/checkpoints/<job> on the first filesystem that is
    not scratch (the first one when all are), or None without a filesystem (no resume)."""
    if not design.storage:
        return None
    durable = [fs for fs in design.storage if not (fs.deployment_type or "").upper().startswith(_SCRATCH)]
    fs = (durable or list(design.storage))[0]
    return f"{fs.mount.rstrip('/')}/{CHECKPOINTS_DIR}/{job}"


def jobset_values(design: ClusterDesign, job: str) -> dict:
    """What train-job.yaml.j2 needs beyond the pool and the queue: the JobSet API, the failure
    policy, the checkpoint directory and the scripts the workers mount."""
    return {"jobset_api": versions().charts["jobset"].api_version, "replicated_job": REPLICATED_JOB,
            "max_restarts": MAX_RESTARTS, "checkpoint_dir": checkpoint_dir(design, job),
            "restart_label": RESTART_ATTEMPT_LABEL, "jobset_name_label": JOBSET_NAME_LABEL,
            "scripts": list(GPU_JOB_SCRIPTS)}


def gpu_job_scripts() -> dict[str, str]:
    """ConfigMap entries: the scripts the GPU example jobs run."""
    return {**{key: static(template) for key, template in GPU_JOB_TEMPLATES.items()},
            RESUME_MODULE: program_text("aicluster-resume-job")}
