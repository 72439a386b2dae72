"""Every Kubernetes manifest aicluster renders validates against the OpenAPI schema of the pinned
cluster version: the objects it applies (namespace, volume, claim, ConfigMap) and the example
training job, through kubernetes-validate's offline Kubernetes 1.35 schemas in strict mode
(unknown fields fail). Kueue's objects validate against its CRD schema (tests/support/kueue_schema.py), their
metadata against the Kubernetes ObjectMeta schema."""
from __future__ import annotations

import copy
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.support import BASE_SPEC, FSX, STACK_NAMES, stack_spec
from aicluster.design.kubernetes import versions
from tests.support.manifests import example_jobset, rendered_manifests, validate, worker_job, worker_pod

EKS_STACKS = [s for s in STACK_NAMES if stack_spec(s).get("scheduler") == "kubernetes"]
SCHEMA = versions().schema_version


def test_the_pinned_version_has_its_own_offline_schemas():
    """Validation runs against 1.35 itself, not the nearest older schema set."""
    root = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    assert (root / f"v{SCHEMA}-local-strict" / "job-batch-v1.json").is_file()
    assert SCHEMA.rsplit(".", 1)[0] == versions().kubernetes


@pytest.mark.parametrize("stack", EKS_STACKS)
def test_every_rendered_manifest_of_the_stack_validates(stack):
    from tests.support.stack_plans import stack_result

    manifests = rendered_manifests(stack_result(stack).files)
    kinds = {d["kind"] for docs in manifests.values() for d in docs}
    pools = stack_spec(stack)["pools"]
    expected = {"Namespace", "PersistentVolume", "PersistentVolumeClaim", "ConfigMap", "ResourceFlavor",
                "ClusterQueue", "LocalQueue"}
    if any("tpu" not in p for p in pools):
        expected |= {"JobSet", "PodDisruptionBudget"}
    if any("tpu" in p for p in pools):
        expected |= {"JobSet"}
    assert expected <= kinds
    for name, docs in manifests.items():
        for doc in docs:
            try:
                validate(doc)
            except (kubernetes_validate.ValidationError, jsonschema.ValidationError) as exc:
                pytest.fail(f"{stack} {name}: {doc['kind']} {doc['metadata'].get('name')}: {exc}")


@pytest.mark.parametrize("variant", ["two-pools-two-filesystems", "gpu-operator", "no-efa", "capacity-block"])
def test_manifests_of_other_shapes_validate(plan_spec, variant):
    from aicluster.commands.planner import rendered_files

    spec = copy.deepcopy(BASE_SPEC)
    spec["scheduler"] = "kubernetes"
    spec["kubernetes"] = {"api_access": "vpc"}     # EKS needs a way to its API
    if variant == "two-pools-two-filesystems":
        spec["pools"].append({"name": "a100", "instance_type": "p4d.24xlarge", "max_nodes": 2})
        spec["storage"].append({**FSX, "name": "scratch", "mount": "/scratch", "deployment_type": "SCRATCH_2"})
    elif variant == "gpu-operator":
        spec["kubernetes"] |= {"gpu_devices": "gpu-operator", "namespace": "research"}
    elif variant == "no-efa":
        spec["pools"] = [{"name": "l40s", "instance_type": "g6e.48xlarge", "max_nodes": 4, "efa": False}]
    else:
        spec["pools"][0]["capacity"] = {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"}
    manifests = rendered_manifests(rendered_files(plan_spec(spec)))
    jobs = [n for n in manifests if n.startswith("k8s/examples/")]
    assert len(jobs) == len(spec["pools"])
    for docs in manifests.values():
        for doc in docs:
            validate(doc)


@pytest.fixture(scope="module")
def job_docs():
    from tests.support.stack_plans import stack_result

    files = stack_result(EKS_STACKS[0]).files
    return [d for d in yaml.safe_load_all(files["k8s/examples/train-gpu.yaml"]) if d]


@pytest.mark.parametrize("mutate, error", [
    (lambda js: worker_pod(js)["spec"]["containers"][0].update(resource={}), "resource"),
    (lambda js: worker_pod(js)["spec"].update(tolerations={"key": "nvidia.com/gpu"}), "tolerations"),
    (lambda js: worker_pod(js)["spec"]["volumes"][0]["emptyDir"].update(medium=1), "medium"),
    (lambda js: worker_job(js).update(parallelism="16"), "parallelism"),
    # The JobSet's own fields, against the pinned release's CRD.
    (lambda js: js["spec"]["failurePolicy"].update(maxRestarts="3"), "maxRestarts"),
    (lambda js: js["spec"]["failurePolicy"]["rules"][0].update(action="RestartGang"), "RestartGang"),
    (lambda js: js["spec"]["failurePolicy"]["rules"][0].pop("name"), "name"),
    (lambda js: js["spec"]["failurePolicy"].update(restartStrategy="Rolling"), "Rolling"),
    (lambda js: js["spec"]["network"].update(publishNotReady=True), "publishNotReady"),
    (lambda js: js["spec"]["replicatedJobs"][0].update(replicas="1"), "replicas"),
    (lambda js: js["spec"].update(failurePolicies={}), "failurePolicies"),
    (lambda js: worker_job(js)["podFailurePolicy"]["rules"][0].update(onPodConditions="DisruptionTarget"),
     "DisruptionTarget"),
])
def test_validation_catches_a_broken_jobset(job_docs, mutate, error):
    jobset = copy.deepcopy(example_jobset(job_docs))
    validate(jobset)
    mutate(jobset)
    with pytest.raises((jsonschema.ValidationError, kubernetes_validate.ValidationError)) as info:
        validate(jobset)
    assert error in str(info.value)


@pytest.mark.parametrize("mutate, error", [
    (lambda pdb: pdb["spec"].update(minAvailable=[4]), "minAvailable"),
    (lambda pdb: pdb["spec"].update(unhealthyPodEvictionPolicy=True), "unhealthyPodEvictionPolicy"),
    (lambda pdb: pdb["spec"]["selector"].update(matchLabel={}), "matchLabel"),
])
def test_validation_catches_a_broken_disruption_budget(job_docs, mutate, error):
    pdb = copy.deepcopy(next(d for d in job_docs if d["kind"] == "PodDisruptionBudget"))
    validate(pdb)
    mutate(pdb)
    with pytest.raises(kubernetes_validate.ValidationError) as info:
        validate(pdb)
    assert error in str(info.value)


@pytest.mark.parametrize("mutate", [
    lambda q: q["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0].update(nominalQuote="1"),
    lambda q: q["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0].update(nominalQuota="lots"),
    lambda q: q["spec"].update(queueingStrategy="Fastest"),
    lambda q: q["metadata"].update(labels={"bad key!": "x"}) or q["metadata"].update(name=7),
])
def test_validation_catches_a_broken_cluster_queue(plan_spec, mutate):
    from aicluster.commands.planner import rendered_files

    spec = copy.deepcopy(BASE_SPEC)
    spec["scheduler"] = "kubernetes"
    spec["kubernetes"] = {"api_access": "vpc"}     # EKS needs a way to its API
    files = rendered_files(plan_spec(spec))
    queue = yaml.safe_load(files["k8s/cluster/clusterqueue-demo.yaml"])
    validate(queue)
    mutate(queue)
    with pytest.raises((jsonschema.ValidationError, kubernetes_validate.ValidationError)):
        validate(queue)


def test_example_training_script_compiles():
    from aicluster.render.templates import static

    compile(static("k8s/allreduce.py"), "allreduce.py", "exec")
