"""Scale from zero on EKS (issue 16, done when): the 16-node p5 stack with min_nodes 0 starts its
nodes when the example JobSet is submitted. Shown on the rendered objects, link by link:

job --queue-name--> LocalQueue --> ClusterQueue --flavor--> ResourceFlavor (nodeLabels, quota)
job pods --nodeSelector, affinity, tolerations, requests--> NodePool (labels, requirements,
taints, limits) --nodeClassRef--> EC2NodeClass, and the requests fit the instance type as
Karpenter models it (its instance-type table plus the NodeOverlay's huge pages).

The checks are plain functions; the last tests break one link each and see them fail."""
from __future__ import annotations

import copy

import pytest

from aicluster.design.kubernetes import PRIORITY_LABEL
from tests.support.manifests import example_jobset, rendered_manifests, worker_job, worker_pod
from tests.support.stack_plans import result_with_spec, stack_spec_data

STACK = "aws-p5-eks"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# Karpenter's model of p5.48xlarge: allocatable cpu, memory and devices (Karpenter docs at v1.14.1,
# website/content/en/docs/reference/instance-types.md, "p5.48xlarge", Resources table). Huge pages
# are not in it: the NodeOverlay adds them. The node's real memory is less by the huge pages it
# pre-allocates, so the check below takes them off.
KARPENTER_P5 = {"cpu": "191450m", "memory": "1938410Mi", "nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"}

_SUFFIX = {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def quantity(text: str | int) -> float:
    text = str(text)
    for suffix, factor in _SUFFIX.items():
        if text.endswith(suffix):
            return float(text[:-len(suffix)]) * factor
    return float(text)


def node_labels(nodepool: dict) -> dict[str, str]:
    """What a node of the NodePool is labelled: the template's labels and every single-valued In
    requirement (Karpenter applies those as labels)."""
    template = nodepool["spec"]["template"]
    labels = dict(template["metadata"]["labels"])
    for req in template["spec"]["requirements"]:
        if req["operator"] == "In" and len(req["values"]) == 1:
            labels[req["key"]] = req["values"][0]
    return labels


def placement_problems(pod: dict, nodepool: dict) -> list[str]:
    """Why Karpenter would not launch a node of `nodepool` for `pod` (empty: it would)."""
    spec, labels = pod["spec"], node_labels(nodepool)
    problems = [f"nodeSelector {k}={v}: the NodePool's nodes have {labels.get(k)!r}"
                for k, v in (spec.get("nodeSelector") or {}).items() if labels.get(k) != v]
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
    for term in required:
        for expr in term.get("matchExpressions", []):
            if expr["operator"] == "In" and labels.get(expr["key"]) not in expr["values"]:
                problems.append(f"affinity {expr['key']} In {expr['values']}: the NodePool's nodes have "
                                f"{labels.get(expr['key'])!r}")
    tolerated = {(t["key"], t.get("effect")) for t in spec.get("tolerations") or [] if t.get("operator") == "Exists"}
    for taint in nodepool["spec"]["template"]["spec"].get("taints", []):
        if (taint["key"], taint["effect"]) not in tolerated:
            problems.append(f"taint {taint['key']}:{taint['effect']} not tolerated")
    return problems


def fit_problems(pod: dict, capacity: dict[str, str]) -> list[str]:
    requests: dict[str, float] = {}
    for container in pod["spec"]["containers"]:
        for key, value in (container.get("resources") or {}).get("requests", {}).items():
            requests[key] = requests.get(key, 0) + quantity(value)
    return [f"{key}: {value:g} requested, {capacity.get(key, '0')} on the node" for key, value in requests.items()
            if quantity(capacity.get(key, "0")) < value]


@pytest.fixture(scope="module")
def rendered():
    spec = stack_spec_data(STACK)
    spec["pools"][0]["min_nodes"] = 0
    result = result_with_spec(STACK, spec)
    docs = [d for ds in rendered_manifests(result.files).values() for d in ds]
    by_kind: dict[str, list[dict]] = {}
    for doc in docs:
        by_kind.setdefault(doc["kind"], []).append(doc)
    return result, by_kind


@pytest.fixture(scope="module")
def job(rendered):
    result, _ = rendered
    return example_jobset(rendered_manifests({"k8s/examples/train-gpu.yaml": result.files["k8s/examples/train-gpu.yaml"]})
                          ["k8s/examples/train-gpu.yaml"])


def test_no_gpu_node_exists_before_the_job(rendered):
    result, _ = rendered
    group = result.plan.named(f"{result.design.name}-gpu-eks-nodegroup", "aws:eks/nodeGroup:NodeGroup")
    assert group.inputs["scalingConfig"]["desiredSize"] == 0 and group.inputs["scalingConfig"]["minSize"] == 0


def test_the_job_reaches_a_cluster_queue_with_the_pools_flavor(rendered, job):
    _, kinds = rendered
    namespace, queue = job["metadata"]["namespace"], job["metadata"]["labels"][QUEUE_LABEL]
    (local,) = [q for q in kinds["LocalQueue"] if (q["metadata"]["namespace"], q["metadata"]["name"]) == (namespace, queue)]
    (cluster_queue,) = [q for q in kinds["ClusterQueue"] if q["metadata"]["name"] == local["spec"]["clusterQueue"]]
    flavors = {f["name"]: f for g in cluster_queue["spec"]["resourceGroups"] for f in g["flavors"]}
    (nodepool,) = kinds["NodePool"]
    (flavor,) = [f for f in kinds["ResourceFlavor"] if f["metadata"]["name"] in flavors]
    # The flavor's node labels are the NodePool's: what Kueue assigns is what Karpenter launches.
    assert flavor["spec"]["nodeLabels"].items() <= node_labels(nodepool).items()
    # The quota takes the whole gang: every worker's requests, times the workers.
    workers = worker_job(job)["parallelism"]
    quota = {r["name"]: quantity(r["nominalQuota"]) for r in flavors[flavor["metadata"]["name"]]["resources"]}
    for container in worker_pod(job)["spec"]["containers"]:
        for key, value in container["resources"]["requests"].items():
            assert quota[key] >= workers * quantity(value), key
    assert job["metadata"]["labels"][PRIORITY_LABEL]


def test_the_workers_are_what_the_nodepool_launches(rendered, job):
    _, kinds = rendered
    (nodepool,) = kinds["NodePool"]
    (nodeclass,) = kinds["EC2NodeClass"]
    assert placement_problems(worker_pod(job), nodepool) == []
    assert nodepool["spec"]["template"]["spec"]["nodeClassRef"]["name"] == nodeclass["metadata"]["name"]
    # The gang fits under the NodePool's limit (the node group keeps none).
    assert nodepool["spec"]["limits"]["nodes"] >= worker_job(job)["parallelism"]
    # No worker tolerates the startup taint: none starts before the node's first health pass.
    startup = nodepool["spec"]["template"]["spec"]["startupTaints"]
    tolerated = {t["key"] for t in worker_pod(job)["spec"].get("tolerations") or []}
    assert not {t["key"] for t in startup} & tolerated


def test_a_worker_fits_one_node_as_karpenter_models_it(rendered, job):
    _, kinds = rendered
    (overlay,) = kinds["NodeOverlay"]
    capacity = {**KARPENTER_P5, **overlay["spec"]["capacity"]}
    assert fit_problems(worker_pod(job), capacity) == []
    # ... and the node's real allocatable memory, once the huge pages are taken.
    real = dict(capacity, memory=f"{quantity(KARPENTER_P5['memory']) - quantity(capacity['hugepages-2Mi']):.0f}")
    assert fit_problems(worker_pod(job), real) == []


@pytest.mark.parametrize("breaks, expect", [
    (lambda pod, np: pod["spec"].setdefault("nodeSelector", {}).update({"aicluster.io/pool": "other"}), "nodeSelector"),
    (lambda pod, np: np["spec"]["template"]["spec"]["requirements"].pop(), "affinity"),
    (lambda pod, np: pod["spec"].update(tolerations=[]), "taint"),
], ids=["pool-label", "health-requirement-missing", "gpu-taint"])
def test_a_broken_link_is_seen(rendered, job, breaks, expect):
    """Before this change the example job required the health label, which no NodePool offered:
    Karpenter would never have launched a node for it (the health-requirement case)."""
    _, kinds = rendered
    pod, nodepool = copy.deepcopy(worker_pod(job)), copy.deepcopy(kinds["NodePool"][0])
    breaks(pod, nodepool)
    assert any(p.startswith(expect) for p in placement_problems(pod, nodepool))


def test_a_worker_larger_than_the_node_is_seen(rendered, job):
    _, kinds = rendered
    pod = copy.deepcopy(worker_pod(job))
    pod["spec"]["containers"][0]["resources"]["requests"]["vpc.amazonaws.com/efa"] = "33"
    (overlay,) = kinds["NodeOverlay"]
    assert fit_problems(pod, {**KARPENTER_P5, **overlay["spec"]["capacity"]}) == \
        ["vpc.amazonaws.com/efa: 33 requested, 32 on the node"]
    # Without the overlay, Karpenter sees no huge pages on any type: the worker would never fit.
    assert any(p.startswith("hugepages-2Mi") for p in fit_problems(worker_pod(job), KARPENTER_P5))
