"""The GPU node health objects both clouds apply (components/aicluster/kubernetes/health.py): one agent
DaemonSet per GPU pool running the Slurm nodes' own check, its least-privilege identity, all valid
Kubernetes 1.35 objects (strict); EKS GPU node groups repair nodes under a cap; the example jobs
keep off nodes that did not pass."""
from __future__ import annotations

import copy
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest

from aicluster.kubernetes import health as k8s_health
from aicluster.design.kubernetes import POOL_LABEL, versions
from aicluster.node import health_agent
from aicluster.render.node_programs import program_text
from tests.support import stack_spec
from tests.support.manifests import rendered_manifests, validate

EKS, GKE_GPU, GKE_TPU = "aws-p5-eks", "gcp-a3ultra-gke", "gcp-tpu-v5p-gke"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
ADDON = "aws:eks/addon:Addon"


@pytest.fixture(scope="module")
def stack_docs():
    from aicluster.commands.planner import plan_stack

    cache: dict[str, list[dict]] = {}

    def docs(stack: str) -> list[dict]:
        if stack not in cache:
            cache[stack] = [d for ds in rendered_manifests(plan_stack(stack).files).values() for d in ds]
        return cache[stack]
    return docs


def health_docs(docs: list[dict]) -> dict[tuple[str, str], dict]:
    return {(d["kind"], d["metadata"]["name"]): d for d in docs
            if d["metadata"].get("name", "").startswith(k8s_health.NAME)}


def gpu_pool_names(stack: str) -> set[str]:
    return {pool["name"] for pool in stack_spec(stack)["pools"] if "tpu" not in pool}


@pytest.mark.parametrize("stack", [EKS, GKE_GPU])
def test_every_gpu_pool_runs_the_agent_and_every_object_validates(stack, stack_docs):
    ours = health_docs(stack_docs(stack))
    name = k8s_health.NAME
    assert {("DaemonSet", f"{name}-{p}") for p in gpu_pool_names(stack)} | {
        ("ConfigMap", name), ("ServiceAccount", name), ("ClusterRole", name), ("ClusterRoleBinding", name),
        ("ValidatingAdmissionPolicy", f"{name}-own-node"),
        ("ValidatingAdmissionPolicyBinding", f"{name}-own-node")} == set(ours)
    for doc in ours.values():
        validate(doc)


def test_a_tpu_only_cluster_gets_no_gpu_agent(stack_docs):
    assert health_docs(stack_docs(GKE_TPU)) == {}


@pytest.mark.parametrize("stack, kind, gpus, devices", [(EKS, "efa", 8, 32), (GKE_GPU, "rdma", 8, 0)])
def test_the_configmap_carries_the_slurm_check_itself_and_each_pools_expectations(stack, kind, gpus, devices,
                                                                                  stack_docs):
    data = health_docs(stack_docs(stack))[("ConfigMap", k8s_health.NAME)]["data"]
    assert data[k8s_health.CHECK_FILE] == program_text("aicluster-gpu-healthcheck")
    assert data[k8s_health.AGENT_FILE] == Path(health_agent.__file__).read_text()
    for pool in gpu_pool_names(stack):
        assert data[f"{pool}.env"] == (f"AICLUSTER_GPUS={gpus}\nAICLUSTER_FABRIC_KIND={kind}\n"
                                       f"AICLUSTER_FABRIC_DEVICES={devices}\n")


@pytest.mark.parametrize("stack, platform", [(EKS, "eks"), (GKE_GPU, "gke")])
def test_the_agent_runs_on_its_pool_only_through_the_hosts_namespaces(stack, platform, stack_docs):
    for pool in gpu_pool_names(stack):
        ds = health_docs(stack_docs(stack))[("DaemonSet", f"{k8s_health.NAME}-{pool}")]
        pod = ds["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == {POOL_LABEL: pool}
        assert pod["hostPID"] is True and pod["serviceAccountName"] == k8s_health.NAME
        assert pod["tolerations"] == [{"operator": "Exists"}]      # runs on the node it tainted
        [agent] = pod["containers"]
        assert agent["image"] == versions().images["node-health"]
        env = {e["name"]: e.get("value") for e in agent["env"]}
        assert env["AICLUSTER_HEALTH_ENV"] == f"{k8s_health.MOUNT_DIR}/{pool}.env"
        assert env["AICLUSTER_REPAIR_AFTER"] == str(k8s_health.REPAIR_AFTER_S[platform])
        assert env["AICLUSTER_REPAIR_CAP"] == str(k8s_health.REPAIR_PARALLEL_NODES)
        assert env["AICLUSTER_POOL_SELECTOR"] == f"{POOL_LABEL}={pool}"
        assert (env["AICLUSTER_HOST_PATH"] != "") == (platform == "gke")   # GKE's driver is off the standard path
        assert "AICLUSTER_DCGM_LEVEL" not in env


def test_rbac_is_nodes_only_and_the_policy_pins_the_agent_to_its_own_node(stack_docs):
    ours = health_docs(stack_docs(EKS))
    role = ours[("ClusterRole", k8s_health.NAME)]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]},
                             {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]}]
    binding = ours[("ClusterRoleBinding", k8s_health.NAME)]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": k8s_health.NAME, "namespace": "kube-system"}]
    assert binding["roleRef"]["name"] == k8s_health.NAME
    policy = ours[("ValidatingAdmissionPolicy", f"{k8s_health.NAME}-own-node")]["spec"]
    assert policy["failurePolicy"] == "Fail"
    assert policy["matchConditions"][0]["expression"] == \
        "request.userInfo.username == 'system:serviceaccount:kube-system:aicluster-node-health'"
    assert "authentication.kubernetes.io/node-name" in policy["validations"][0]["expression"]
    assert ours[("ValidatingAdmissionPolicyBinding", f"{k8s_health.NAME}-own-node")]["spec"] == \
        {"policyName": f"{k8s_health.NAME}-own-node", "validationActions": ["Deny"]}


def _broken(doc: dict, path: tuple, value) -> dict:
    bad = copy.deepcopy(doc)
    target = bad
    for key in path[:-1]:
        target = target[key]
    if value is None:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return bad


@pytest.mark.parametrize("kind, name, path, value", [
    ("DaemonSet", "aicluster-node-health-gpu", ("spec", "template", "spec", "hostPid"), True),       # misspelt
    ("DaemonSet", "aicluster-node-health-gpu", ("spec", "template", "spec", "containers", 0, "name"), None),
    ("DaemonSet", "aicluster-node-health-gpu", ("spec", "selector"), None),
    ("ClusterRole", "aicluster-node-health", ("rules", 0, "verbs"), None),
    ("ClusterRoleBinding", "aicluster-node-health", ("roleRef", "kind"), None),
    ("ValidatingAdmissionPolicy", "aicluster-node-health-own-node", ("spec", "validations", 0, "expression"), None),
    ("ValidatingAdmissionPolicyBinding", "aicluster-node-health-own-node", ("spec", "policyRef"), "x"),
])
def test_the_validator_refuses_broken_health_objects(kind, name, path, value, stack_docs):
    doc = health_docs(stack_docs(EKS))[(kind, name)]
    validate(doc)
    with pytest.raises((kubernetes_validate.ValidationError, jsonschema.ValidationError)):
        validate(_broken(doc, path, value))


# ---------------------------------------------------------------- EKS: node auto repair, monitoring agent


@pytest.fixture(scope="module")
def eks_plan():
    from aicluster.commands.planner import plan_stack

    return plan_stack(EKS).plan


def test_gpu_node_groups_repair_nodes_one_at_a_time(eks_plan):
    groups = [g for g in eks_plan.of_type(NODE_GROUP) if not g.name.endswith("-system")]
    assert {g.inputs["nodeGroupName"].rsplit("-", 1)[-1] for g in groups} >= gpu_pool_names(EKS)
    for group in groups:
        assert group.inputs["nodeRepairConfig"] == {
            "enabled": True, "maxParallelNodesRepairedCount": k8s_health.REPAIR_PARALLEL_NODES,
            "maxUnhealthyNodeThresholdPercentage": k8s_health.REPAIR_MAX_UNHEALTHY_PERCENT}, group.name
    assert k8s_health.REPAIR_PARALLEL_NODES == 1 and k8s_health.REPAIR_MAX_UNHEALTHY_PERCENT == 20


def test_the_node_monitoring_agent_addon_is_pinned_and_waits_for_nodes(eks_plan):
    [nma] = [a for a in eks_plan.of_type(ADDON) if a.inputs["addonName"] == "eks-node-monitoring-agent"]
    assert nma.inputs["addonVersion"] == versions().addons["eks-node-monitoring-agent"]
    assert versions().sources["addon:eks-node-monitoring-agent"]
    system = [g for g in eks_plan.of_type(NODE_GROUP) if g.name.endswith("-system")]
    assert system and system[0].urn in nma.dependencies


# ---------------------------------------------------------------- the example jobs keep off failed nodes


def _pod_specs(obj):
    if isinstance(obj, dict):
        if "containers" in obj:
            yield obj
        for value in obj.values():
            yield from _pod_specs(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from _pod_specs(value)


def _requires_passed(pod: dict) -> bool:
    if (pod.get("nodeSelector") or {}).get(k8s_health.HEALTH_LABEL) == k8s_health.HEALTH_PASSED:
        return True
    terms = (((pod.get("affinity") or {}).get("nodeAffinity") or {})
             .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
    return bool(terms) and all(any(e["key"] == k8s_health.HEALTH_LABEL and e["operator"] == "In"
                                   and e["values"] == [k8s_health.HEALTH_PASSED] for e in t.get("matchExpressions", []))
                               for t in terms)


@pytest.mark.parametrize("stack", [EKS, GKE_GPU])
def test_the_example_gpu_jobs_run_only_on_nodes_that_passed(stack, stack_docs):
    jobs = [d for d in stack_docs(stack) if d["kind"] in ("Job", "JobSet")
            and d["metadata"]["name"].startswith("train-")]
    assert jobs
    for job in jobs:
        pods = list(_pod_specs(job["spec"]))
        assert pods and all(_requires_passed(p) for p in pods), job["metadata"]["name"]


def test_flex_start_pools_are_tainted_but_never_taken_down():
    """GKE runs flex-start pools without auto-repair: a node the agent made NotReady would stay so."""
    from aicluster.offline.capture import reveal
    from tests.support import GCP_MIN, run_spec

    spec = copy.deepcopy(GCP_MIN)
    spec.update(scheduler="kubernetes", pools=[{"name": "flex", "instance_type": "a3-ultragpu-8g", "max_nodes": 2,
                                                "capacity": "flex-start"}])
    plan = run_spec(spec)
    [ds] = [d for d in plan.of_type("kubernetes:apps/v1:DaemonSet")
            if (reveal(d.inputs).get("metadata") or {}).get("name") == f"{k8s_health.NAME}-flex"]
    env = {e["name"]: e.get("value") for e in reveal(ds.inputs)["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["AICLUSTER_REPAIR_AFTER"] == "0"
    assert k8s_health.NodeHealthSettings("gke", "img", {}).repair_after_s("flex") == k8s_health.REPAIR_AFTER_S["gke"]
