"""Issue 16, "Jobs": JobSet on both clusters, and the example GPU job as a JobSet that restarts as a
gang, keeps off nodes whose GPU health check did not pass, resumes from the newest complete
checkpoint on the shared filesystem, and carries a PodDisruptionBudget (k8s_jobs.py,
templates/k8s/train-job.yaml.j2, templates/k8s/resume.py)."""
from __future__ import annotations

import copy
import importlib.util
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml

from aicluster.kubernetes.jobs import (GPU_JOB_SCRIPTS, JOBSET_NAME_LABEL, MAX_RESTARTS, REPLICATED_JOB,
                                RESTART_ATTEMPT_LABEL, checkpoint_dir, gpu_job_scripts)
from aicluster.design.kubernetes import EXAMPLES_CONFIGMAP, versions
from aicluster.render.templates import static
from tests.support import BASE_SPEC, FSX, GCP_MIN
from tests.support.jobset_schema import crd_file, jobset_schema, rule_name_problems
from tests.support.manifests import example_jobset, validate, worker_job, worker_pod

HELM = "kubernetes:helm.sh/v3:Release"
CONFIGMAP = "kubernetes:core/v1:ConfigMap"
RESUME_JOB = Path(__file__).resolve().parents[2] / "components" / "aicluster" / "node" / "bin" / "aicluster-resume-job"


def eks_spec(**extra) -> dict:
    spec = copy.deepcopy(BASE_SPEC)
    spec.update(scheduler="kubernetes", kubernetes={"api_access": "vpc"}, **extra)
    return spec


def gke_spec() -> dict:
    spec = copy.deepcopy(GCP_MIN)
    spec.update(scheduler="kubernetes", pools=[{"name": "gpu", "instance_type": "a3-ultragpu-8g", "max_nodes": 4}],
                storage=[{"name": "scratch", "type": "lustre", "mount": "/lustre", "capacity_gib": 18000}])
    return spec


@pytest.fixture(scope="module")
def plans():
    from tests.support import run_spec

    return {"eks": run_spec(eks_spec()), "gke": run_spec(gke_spec())}


def examples(plan) -> dict[str, str]:
    (cm,) = [c for c in plan.of_type(CONFIGMAP) if c.inputs["metadata"]["name"] == EXAMPLES_CONFIGMAP]
    return cm.inputs["data"]


def gpu_docs(plan) -> list[dict]:
    return [d for d in yaml.safe_load_all(examples(plan)["train-gpu.yaml"]) if d]


# --- JobSet installed on both clusters, one pinned chart ----------------------------------------


@pytest.mark.parametrize("platform", ["eks", "gke"])
def test_both_clusters_install_the_pinned_jobset_on_the_system_nodes(plans, platform):
    chart = versions().charts["jobset"]
    assert platform in chart.used_by
    (release,) = [r for r in plans[platform].of_type(HELM) if r.inputs["name"] == "jobset"]
    assert release.inputs["version"] == chart.version
    assert release.inputs["chart"] == f"{chart.repo}/{chart.chart}"
    assert release.inputs["namespace"] == chart.namespace
    assert release.inputs["values"] == {"controller": {"nodeSelector": {"aicluster.io/role": "system"}}}


def test_the_vendored_crd_is_the_pinned_release():
    """The schema the tests validate JobSets with is the pinned chart's, at the pinned API version."""
    assert crd_file().parent.name == versions().charts["jobset"].version
    assert jobset_schema()["properties"]["apiVersion"] == {"const": versions().charts["jobset"].api_version}


# --- the example GPU job: a JobSet that restarts as a gang ----------------------------------------


@pytest.mark.parametrize("platform", ["eks", "gke"])
def test_gpu_example_is_a_queued_jobset_that_restarts_as_a_gang(plans, platform):
    docs = gpu_docs(plans[platform])
    assert sorted(d["kind"] for d in docs) == ["JobSet", "PodDisruptionBudget"]
    jobset = example_jobset(docs)
    validate(jobset)
    assert jobset["apiVersion"] == versions().charts["jobset"].api_version
    # Kueue admits it: the queue label on the JobSet, created suspended.
    assert jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"
    assert jobset["spec"]["suspend"] is True
    policy = jobset["spec"]["failurePolicy"]
    assert policy["maxRestarts"] == MAX_RESTARTS and policy["restartStrategy"] == "Recreate"
    # A disruption (DisruptionTarget -> the Job fails by its podFailurePolicy) restarts without
    # counting; any other failure counts; the rules JobSet evaluates in order.
    assert policy["rules"] == [
        {"name": "NodeDisruption", "action": "RestartJobSetAndIgnoreMaxRestarts", "onJobFailureReasons": ["PodFailurePolicy"]},
        {"name": "WorkerFailed", "action": "RestartJobSet"}]
    assert rule_name_problems(jobset) == []
    (replicated,) = jobset["spec"]["replicatedJobs"]
    assert replicated["name"] == REPLICATED_JOB and replicated["replicas"] == 1
    job = worker_job(jobset)
    assert job["backoffLimit"] == 0          # the first failed worker fails the Job, hence the JobSet's policy
    pools = (eks_spec() if platform == "eks" else gke_spec())["pools"]
    assert job["completions"] == job["parallelism"] == pools[0]["max_nodes"]       # one worker per node
    assert job["completionMode"] == "Indexed"
    assert job["podFailurePolicy"] == {"rules": [{"action": "FailJob",
                                                  "onPodConditions": [{"type": "DisruptionTarget"}]}]}
    assert worker_pod(jobset)["spec"]["restartPolicy"] == "Never"     # podFailurePolicy requires it


@pytest.mark.parametrize("platform", ["eks", "gke"])
def test_workers_only_land_on_nodes_whose_gpu_check_passed(plans, platform):
    pod = worker_pod(example_jobset(gpu_docs(plans[platform])))["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "aicluster.io/gpu-health", "operator": "In", "values": ["passed"]}]}]
    assert pod["nodeSelector"] == {"aicluster.io/pool": "gpu"}


def test_rule_names_the_api_server_refuses_are_caught():
    jobset = {"spec": {"failurePolicy": {"rules": [{"name": "node-disruption"}, {"name": "Ok_1"}, {"name": "9x"}]}}}
    assert rule_name_problems(jobset) == ["node-disruption", "9x"]


@pytest.mark.parametrize("platform", ["eks", "gke"])
def test_disruption_budget_covers_every_running_worker(plans, platform):
    docs = gpu_docs(plans[platform])
    jobset, pdb = example_jobset(docs), next(d for d in docs if d["kind"] == "PodDisruptionBudget")
    validate(pdb)
    assert pdb["metadata"]["namespace"] == jobset["metadata"]["namespace"]
    # JobSet labels every pod it creates with its name: the budget selects exactly this gang.
    assert pdb["spec"]["selector"] == {"matchLabels": {JOBSET_NAME_LABEL: jobset["metadata"]["name"]}}
    # A whole number (a Job's pods have no scale subresource) equal to the workers: no voluntary
    # eviction of a running worker; unready workers may go.
    assert pdb["spec"]["minAvailable"] == worker_job(jobset)["parallelism"]
    assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"


# --- resume from the newest checkpoint -------------------------------------------------------------


@pytest.mark.parametrize("platform", ["eks", "gke"])
def test_workers_start_through_the_resume_launcher_with_the_checkpoint_directory(plans, platform):
    jobset = example_jobset(gpu_docs(plans[platform]))
    container = worker_pod(jobset)["spec"]["containers"][0]
    command = container["args"][0]
    assert "exec python3 /opt/aicluster/resume.py -- torchrun" in command
    env = {e["name"]: e for e in container["env"]}
    mount = "/fsx" if platform == "eks" else "/lustre"
    assert env["AICLUSTER_CHECKPOINT_DIR"]["value"] == f"{mount}/checkpoints/train-gpu"
    assert env["JOBSET_RESTART_ATTEMPT"]["valueFrom"] == {
        "fieldRef": {"fieldPath": f"metadata.labels['{RESTART_ATTEMPT_LABEL}']"}}
    # The filesystem the checkpoints go to is mounted in the worker.
    assert mount in {m["mountPath"] for m in container["volumeMounts"]}
    # Every script the launcher needs is in the ConfigMap and mounted beside it.
    data = examples(plans[platform])
    assert data["aicluster_resume_job.py"] == RESUME_JOB.read_text(encoding="utf-8")   # one copy of the rule
    assert data["resume.py"] == static("k8s/resume.py")
    volume = next(v for v in worker_pod(jobset)["spec"]["volumes"] if v["name"] == "scripts")
    assert [i["key"] for i in volume["configMap"]["items"]] == list(GPU_JOB_SCRIPTS)


def test_checkpoints_go_to_a_durable_filesystem_and_without_one_nowhere():
    from aicluster.design.cluster import design_cluster
    from aicluster.spec.cluster import parse_spec

    scratch = {**FSX, "name": "scratch", "mount": "/scratch", "deployment_type": "SCRATCH_2"}
    spec = eks_spec(storage=[scratch, {**FSX, "name": "fsx", "mount": "/fsx/"}])
    assert checkpoint_dir(design_cluster(parse_spec(spec)), "train-gpu") == "/fsx/checkpoints/train-gpu"
    spec = eks_spec(storage=[scratch])
    assert checkpoint_dir(design_cluster(parse_spec(spec)), "train-gpu") == "/scratch/checkpoints/train-gpu"
    spec = eks_spec(storage=[])
    design = design_cluster(parse_spec(spec))
    assert checkpoint_dir(design, "train-gpu") is None
    from aicluster.aws.eks_addons import render_job
    jobset = example_jobset([d for d in yaml.safe_load_all(render_job(design, "gpu")) if d])
    validate(jobset)
    names = {e["name"] for e in worker_pod(jobset)["spec"]["containers"][0]["env"]}
    assert "AICLUSTER_CHECKPOINT_DIR" not in names and "JOBSET_RESTART_ATTEMPT" in names


def test_max_restarts_matches_the_slurm_wrapper():
    spec = importlib.util.spec_from_loader("aicluster_resume_job", loader=None)
    module = importlib.util.module_from_spec(spec)
    exec(compile(RESUME_JOB.read_text(encoding="utf-8"), str(RESUME_JOB), "exec"), module.__dict__)
    assert module.DEFAULT_MAX_RESTARTS == MAX_RESTARTS


@pytest.fixture()
def scripts(tmp_path):
    """The scripts as a worker sees them under /opt/aicluster (the ConfigMap's keys)."""
    folder = tmp_path / "opt"
    folder.mkdir()
    for key, text in gpu_job_scripts().items():
        (folder / key).write_text(text, encoding="utf-8")
    return folder


def launch(scripts: Path, env: dict, *command: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AICLUSTER_", "JOBSET_"))}
    return subprocess.run([sys.executable, str(scripts / "resume.py"), "--", *command], env={**base, **env},
                          capture_output=True, text=True, timeout=60)


PRINT_ENV = (sys.executable, "-c",
             "import os; print(os.environ['AICLUSTER_RESUME_FROM'] + '|' + os.environ['AICLUSTER_RESTART_COUNT'])")


def test_launcher_resumes_from_the_newest_complete_checkpoint(scripts, tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    for name, age in [("round-000001", 300), ("round-000002", 200), ("round-000003.partial", 100), (".tmp-x", 50),
                      ("round-000004.tmp", 10)]:
        (ckpt / name).mkdir()
        when = 1_700_000_000 - age
        os.utime(ckpt / name, (when, when))
    run = launch(scripts, {"AICLUSTER_CHECKPOINT_DIR": str(ckpt), "JOBSET_RESTART_ATTEMPT": "2"}, *PRINT_ENV)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == f"{ckpt / 'round-000002'}|2"
    assert "restart 2: resuming from" in run.stderr


def test_launcher_starts_from_scratch_without_checkpoints(scripts, tmp_path):
    run = launch(scripts, {"AICLUSTER_CHECKPOINT_DIR": str(tmp_path / "none-yet")}, *PRINT_ENV)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "|0" and "starting from scratch" in run.stderr
    run = launch(scripts, {}, *PRINT_ENV)           # no filesystem: no checkpoint directory at all
    assert run.returncode == 0 and run.stdout.strip() == "|0"


def test_launcher_refuses_what_it_cannot_run(scripts):
    assert launch(scripts, {}).returncode == 2                                    # no command
    assert launch(scripts, {"JOBSET_RESTART_ATTEMPT": "x"}, *PRINT_ENV).returncode == 2
    run = launch(scripts, {}, str(scripts / "missing-trainer"))
    assert run.returncode == 127 and "cannot run" in run.stderr


def test_example_trainer_writes_checkpoints_the_launcher_resumes_from(scripts, tmp_path, monkeypatch):
    """allreduce.py's checkpoint half (torch stubbed: its distributed half needs GPUs): round n+1
    after resuming from round n, written under .partial and renamed, so the launcher picks it."""
    torch = types.ModuleType("torch")
    torch.distributed = types.ModuleType("torch.distributed")
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch.distributed", torch.distributed)
    namespace: dict = {"__name__": "allreduce"}
    exec(compile(static("k8s/allreduce.py"), "allreduce.py", "exec"), namespace)
    ckpt = tmp_path / "ckpt"
    assert namespace["resumed_round"]("") == 0
    first = namespace["save_checkpoint"](str(ckpt), {"round": 1, "world": 16})
    assert namespace["resumed_round"](first) == 1
    os.utime(first, (1_600_000_000, 1_600_000_000))
    second = namespace["save_checkpoint"](str(ckpt), {"round": namespace["resumed_round"](first) + 1})
    assert sorted(p.name for p in ckpt.iterdir()) == ["round-000001", "round-000002"]   # nothing .partial left
    run = launch(scripts, {"AICLUSTER_CHECKPOINT_DIR": str(ckpt)}, *PRINT_ENV)
    assert run.stdout.strip() == f"{second}|0"
