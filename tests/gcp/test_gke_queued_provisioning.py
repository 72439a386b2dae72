"""GKE gangs are provisioned all-or-nothing (issue 16, capacity): a flex-start pool uses queued
provisioning, and Kueue's ProvisioningRequest admission check, on the flex-start flavors of the
ClusterQueue, admits a job only once GKE has created every node it asked for.

Also: a GKE pool that scales gives the autoscaler a template node the example job can land on
(the health label it requires), and its nodes start tainted until the health agent's first pass."""
from __future__ import annotations

import copy

import jsonschema
import pytest

from aicluster.errors import SpecError
from aicluster.kubernetes.capacity import PROVISIONING_CHECK, PROVISIONING_CONTROLLER, QUEUED_PROVISIONING_CLASS
from aicluster.spec.cluster import parse_spec
from tests.support.kueue_schema import SCHEMAS
from tests.support.manifests import example_jobset, rendered_manifests, validate, worker_pod
from tests.support.stack_plans import result_with_spec, stack_result, stack_spec_data

STACK = "gcp-a3ultra-gke"
NODE_POOL = "gcp:container/nodePool:NodePool"
STARTUP_TAINT = "startup-taint.cluster-autoscaler.kubernetes.io/aicluster-gpu-unchecked"


def flex_spec(**pool) -> dict:
    spec = stack_spec_data(STACK)
    spec["pools"][0].update({"min_nodes": 0, "capacity": "flex-start", **pool})
    return spec


@pytest.fixture(scope="module")
def flex():
    result = result_with_spec(STACK, flex_spec())
    docs = [d for ds in rendered_manifests(result.files).values() for d in ds]
    return result, docs


def _gpu_node_pool(result):
    (pool,) = [r for r in result.plan.of_type(NODE_POOL) if r.inputs["name"] == result.design.kubernetes.gke.node_pool("h200").names[0]]
    return pool.inputs


def test_a_flex_start_pool_is_queued_provisioning_and_starts_empty(flex):
    result, _ = flex
    pool = _gpu_node_pool(result)
    assert pool["queuedProvisioning"] == {"enabled": True}
    assert pool["nodeConfig"]["flexStart"] is True
    assert pool["initialNodeCount"] == 0 and pool["autoscaling"]["minNodeCount"] == 0
    assert pool["autoscaling"]["locationPolicy"] == "ANY"
    assert pool["nodeConfig"]["reservationAffinity"]["consumeReservationType"] == "NO_RESERVATION"
    assert pool["management"]["autoRepair"] is False


def test_the_cluster_queue_checks_provisioning_on_the_flex_flavors(flex):
    _, docs = flex
    by_kind = {}
    for doc in docs:
        by_kind.setdefault(doc["kind"], []).append(doc)
    (config,) = by_kind["ProvisioningRequestConfig"]
    (check,) = by_kind["AdmissionCheck"]
    assert config["spec"]["provisioningClassName"] == QUEUED_PROVISIONING_CLASS == "queued-provisioning.gke.io"
    assert config["spec"]["managedResources"] == ["nvidia.com/gpu"]
    assert check["spec"]["controllerName"] == PROVISIONING_CONTROLLER == "kueue.x-k8s.io/provisioning-request"
    assert check["spec"]["parameters"] == {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig",
                                           "name": config["metadata"]["name"]}
    for queue in by_kind["ClusterQueue"]:
        assert queue["spec"]["admissionChecksStrategy"] == {
            "admissionChecks": [{"name": PROVISIONING_CHECK, "onFlavors": ["h200"]}]}
    for doc in (config, check, *by_kind["ClusterQueue"]):
        validate(doc)


def test_a_pool_without_flex_start_gets_no_admission_check():
    result = stack_result(STACK)                      # the stock stack: a reservation
    docs = [d for ds in rendered_manifests(result.files).values() for d in ds]
    assert not [d for d in docs if d["kind"] in ("AdmissionCheck", "ProvisioningRequestConfig")]
    assert all("admissionChecksStrategy" not in d["spec"] for d in docs if d["kind"] == "ClusterQueue")
    assert "queuedProvisioning" not in _gpu_node_pool(result) or not _gpu_node_pool(result)["queuedProvisioning"]


@pytest.mark.parametrize("breaks", [
    lambda c, a: c["spec"].pop("provisioningClassName"),
    lambda c, a: a["spec"].update(controllerName=""),
    lambda c, a: a["spec"]["parameters"].update(kind="provisioning request config"),
    lambda c, a: c["spec"].update(podSetMergePolicy="Merge"),
], ids=["no-class", "empty-controller", "kind-pattern", "merge-policy"])
def test_a_broken_provisioning_object_fails_its_schema(flex, breaks):
    _, docs = flex
    config = copy.deepcopy(next(d for d in docs if d["kind"] == "ProvisioningRequestConfig"))
    check = copy.deepcopy(next(d for d in docs if d["kind"] == "AdmissionCheck"))
    breaks(config, check)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(config, SCHEMAS["ProvisioningRequestConfig"])
        jsonschema.validate(check, SCHEMAS["AdmissionCheck"])


def test_flex_start_with_always_on_nodes_is_refused():
    with pytest.raises(SpecError, match="queued provisioning"):
        parse_spec(flex_spec(min_nodes=2))


def test_the_autoscaler_can_place_the_example_job_on_a_scaling_pool(flex):
    """The job requires the health label: a template node without it would never be scaled up
    (and a ProvisioningRequest never filled). The pool's nodes carry it, and a startup taint that
    the autoscaler leaves out of its template keeps the pods off until the first health pass."""
    result, _ = flex
    pool = _gpu_node_pool(result)
    job = example_jobset(rendered_manifests({"k8s/j.yaml": result.files["k8s/examples/train-h200.yaml"]})["k8s/j.yaml"])
    pod = worker_pod(job)["spec"]
    template_labels = pool["nodeConfig"]["labels"]
    for term in pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]:
        for expr in term["matchExpressions"]:
            assert template_labels.get(expr["key"]) in expr["values"], expr
    assert pod["nodeSelector"].items() <= template_labels.items()
    taints = {t["key"] for t in pool["nodeConfig"]["taints"]}
    assert STARTUP_TAINT in taints
    assert STARTUP_TAINT not in {t["key"] for t in pod.get("tolerations", [])}
    # Every other taint of the template is tolerated.
    tolerated = {t["key"] for t in pod.get("tolerations", [])}
    assert taints - {STARTUP_TAINT} <= tolerated


def test_a_fixed_pool_keeps_its_labels_and_taints():
    spec = stack_spec_data(STACK)
    spec["pools"][0].update(min_nodes=8, max_nodes=8)
    pool = _gpu_node_pool(result_with_spec(STACK, spec))
    assert "aicluster.io/gpu-health" not in pool["nodeConfig"]["labels"]
    assert STARTUP_TAINT not in {t["key"] for t in pool["nodeConfig"]["taints"]}
