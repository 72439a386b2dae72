"""Kueue admits only what capacity can start, and says so when it cannot (issue 16, capacity):
waitForPodsReady with requeue on both clouds, quotas capped at a reservation's size
(`capacity.nodes`), and a plan warning for every queue that can admit a job capacity cannot start."""
from __future__ import annotations

import copy

import pytest
import yaml

from aicluster.design.cluster import design_cluster
from aicluster.errors import SpecError
from aicluster.kubernetes.capacity import POD_READY_TIMEOUT, capacity_warnings
from aicluster.spec.cluster import parse_spec
from tests.support import BASE_SPEC, CR
from tests.support.stack_plans import result_with_spec, stack_result, stack_spec_data

# Kueue v0.19.2 apis/config/v1beta2/configuration_types.go: the json names of WaitForPodsReady and
# RequeuingStrategy. The chart's default controller_manager_config.yaml (charts/kueue/values.yaml,
# managerConfig) has these top-level keys, which a values override must keep.
WAIT_FOR_PODS_READY = {"timeout", "blockAdmission", "requeuingStrategy", "recoveryTimeout"}
REQUEUING_STRATEGY = {"timestamp", "backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds"}
CHART_DEFAULT_KEYS = {"apiVersion", "kind", "health", "metrics", "webhook", "leaderElection", "controller",
                      "clientConnection", "integrations"}


def config_problems(config: dict) -> list[str]:
    problems = [f"missing {k}" for k in sorted(CHART_DEFAULT_KEYS - set(config))]
    wait = config.get("waitForPodsReady")
    if not isinstance(wait, dict):
        return problems + ["waitForPodsReady is off"]
    problems += [f"waitForPodsReady.{k} unknown" for k in sorted(set(wait) - WAIT_FOR_PODS_READY)]
    if "timeout" not in wait:
        problems.append("waitForPodsReady.timeout missing (required)")
    requeue = wait.get("requeuingStrategy") or {}
    problems += [f"requeuingStrategy.{k} unknown" for k in sorted(set(requeue) - REQUEUING_STRATEGY)]
    if requeue.get("timestamp") not in ("Eviction", "Creation"):
        problems.append("requeuingStrategy.timestamp")
    return problems


def kueue_config(result) -> dict:
    release = yaml.safe_load(result.files["k8s/helm/kueue.yaml"])
    return yaml.safe_load(release["values"]["managerConfig"]["controllerManagerConfigYaml"])


@pytest.mark.parametrize("stack", ["aws-p5-eks", "gcp-a3ultra-gke", "gcp-tpu-v5p-gke"])
def test_kueue_waits_for_pods_ready_and_requeues(stack):
    config = kueue_config(stack_result(stack))
    assert config_problems(config) == []
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2" and config["kind"] == "Configuration"
    wait = config["waitForPodsReady"]
    assert wait["timeout"] == POD_READY_TIMEOUT and wait["blockAdmission"] is False
    assert wait["requeuingStrategy"]["timestamp"] == "Eviction"
    assert "backoffLimitCount" not in wait["requeuingStrategy"]             # requeued until capacity comes
    assert "jobset.x-k8s.io/jobset" in config["integrations"]["frameworks"]  # the chart's integrations kept


@pytest.mark.parametrize("breaks, problem", [
    (lambda c: c.pop("waitForPodsReady"), "waitForPodsReady is off"),
    (lambda c: c["waitForPodsReady"].update(enable=True), "waitForPodsReady.enable unknown"),   # v1beta1 only
    (lambda c: c["waitForPodsReady"]["requeuingStrategy"].update(timestamp="Admission"), "requeuingStrategy.timestamp"),
    (lambda c: c.pop("integrations"), "missing integrations"),
])
def test_a_broken_manager_config_is_seen(breaks, problem):
    config = copy.deepcopy(kueue_config(stack_result("aws-p5-eks")))
    breaks(config)
    assert problem in config_problems(config)


def reservation_spec(**capacity) -> dict:
    spec = copy.deepcopy(BASE_SPEC)
    spec.update(scheduler="kubernetes", kubernetes={"api_access": "vpc"})
    spec["pools"][0]["capacity"] = {"type": "reservation", "reservation_id": CR, **capacity}
    return spec


def test_the_quota_stops_at_the_reservations_size():
    kd = design_cluster(parse_spec(reservation_spec(nodes=8))).kubernetes
    pool = kd.pool("gpu")
    assert pool.max_nodes == 16 and pool.quota_nodes == 8
    assert pool.quota["nvidia.com/gpu"] == "64"                 # before: 128, twice what the reservation holds
    assert kd.queues[0].quota(pool)["nvidia.com/gpu"] == "64"


def test_an_undeclared_reservation_size_is_a_plan_warning():
    warnings = capacity_warnings(design_cluster(parse_spec(reservation_spec())))
    assert any("may hold fewer" in w and "capacity.nodes" in w for w in warnings)
    warnings = capacity_warnings(design_cluster(parse_spec(reservation_spec(nodes=8))))
    assert any("holds 8 instances, fewer than max_nodes (16)" in w for w in warnings)
    assert capacity_warnings(design_cluster(parse_spec(reservation_spec(nodes=16)))) == []


def test_the_plan_prints_the_warnings():
    spec = stack_spec_data("gcp-a3ultra-gke")                    # a reservation of undeclared size
    from aicluster.gcp.gke_report import kubernetes_lines
    lines = kubernetes_lines(design_cluster(parse_spec(spec)))
    assert any(line.startswith("  warning: pool h200: Kueue's quota is max_nodes") for line in lines)
    spec["pools"][0]["capacity"]["nodes"] = 8
    assert not [line for line in kubernetes_lines(design_cluster(parse_spec(spec))) if "warning" in line]


def test_a_fixed_on_demand_fleet_has_nothing_to_warn_about():
    result = stack_result("aws-p5-eks")
    assert capacity_warnings(result.design) == []


def test_a_capacity_block_and_spot_are_warned_about():
    spec = reservation_spec()
    spec["pools"][0]["capacity"] = {"type": "capacity-block", "reservation_id": CR, "nodes": 16}
    assert any("only while it is active" in w for w in capacity_warnings(design_cluster(parse_spec(spec))))
    spec["pools"][0]["capacity"] = "spot"
    assert any("Spot capacity may be short" in w for w in capacity_warnings(design_cluster(parse_spec(spec))))


def test_nodes_only_with_a_reservation_and_teams_within_it():
    spec = reservation_spec()
    spec["pools"][0]["capacity"] = {"type": "on-demand", "nodes": 4}
    with pytest.raises(SpecError, match="capacity.nodes"):
        parse_spec(spec)
    spec = reservation_spec(nodes=8)
    spec["kubernetes"]["teams"] = [{"name": "research", "nodes": {"gpu": 12}}]
    with pytest.raises(SpecError, match="instances its reservation holds"):
        parse_spec(spec)


def test_a_reservation_size_reaches_the_rendered_cluster_queue():
    spec = stack_spec_data("gcp-a3ultra-gke")
    spec["pools"][0]["capacity"]["nodes"] = 4
    result = result_with_spec("gcp-a3ultra-gke", spec)
    queue = yaml.safe_load(result.files[f"k8s/cluster/clusterqueue-{result.design.name}.yaml"])
    (flavor,) = queue["spec"]["resourceGroups"][0]["flavors"]
    assert {r["name"]: r["nominalQuota"] for r in flavor["resources"]}["nvidia.com/gpu"] == "32"
