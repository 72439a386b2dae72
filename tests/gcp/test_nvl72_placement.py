"""A4X (GB200 NVL72) on GCP: a pool is one NVLink domain, and its placement policy's GPU topology
is what puts its 18 VMs there, even from a reservation (which otherwise brings its own placement).

Slurm (GCE instances): a COLLOCATED group placement policy with gpuTopology 1x72, as slurm-gcp's
resume.py creates for an A4X nodeset (Cluster Toolkit); GKE: a HIGH_THROUGHPUT workload policy
with acceleratorTopology 1x72 that the node pool names (Cluster Toolkit examples/gke-a4x)."""
from __future__ import annotations

import copy

import pytest

from tests.support import GCP_MIN, run_spec

A4X = "a4x-highgpu-4g"
RESERVATION = {"type": "reservation", "reservation_id": "a4x-reservation"}
POLICY = "gcp:compute/resourcePolicy:ResourcePolicy"


def _spec(scheduler: str) -> dict:
    spec = copy.deepcopy(GCP_MIN)
    spec["pools"] = [{"name": "gb200", "instance_type": A4X, "min_nodes": 18, "max_nodes": 18,
                      "capacity": RESERVATION}]
    spec["scheduler"] = scheduler
    if scheduler == "slurm":    # no public arm64 image carries the RDMA stack: the catalog has none
        spec["pools"][0]["image"] = "projects/example-ml-project/global/images/family/a4x-slurm"
    if scheduler == "kubernetes":
        spec["kubernetes"] = {"system_nodes": {"instance_type": "n2-standard-4", "count": 2}}
    return spec


@pytest.fixture(scope="module")
def plans():
    return {s: run_spec(_spec(s)) for s in ("slurm", "kubernetes")}


def test_slurm_pool_has_a_1x72_collocated_policy_beside_its_reservation(plans):
    plan = plans["slurm"]
    (policy,) = [r for r in plan.of_type(POLICY) if r.name.endswith("-placement")]
    assert policy.inputs["groupPlacementPolicy"] == {"collocation": "COLLOCATED", "gpuTopology": "1x72"}
    (template,) = plan.of_type("gcp:compute/instanceTemplate:InstanceTemplate")
    assert template.inputs["resourcePolicies"] == policy.outputs["selfLink"]
    assert template.inputs["reservationAffinity"]["type"] == "SPECIFIC_RESERVATION"


def test_gke_node_pool_names_a_1x72_workload_policy(plans):
    plan = plans["kubernetes"]
    (policy,) = [r for r in plan.of_type(POLICY) if "workloadPolicy" in r.inputs]
    assert policy.inputs["workloadPolicy"] == {"type": "HIGH_THROUGHPUT", "acceleratorTopology": "1x72"}
    (pool,) = [p for p in plan.of_type("gcp:container/nodePool:NodePool") if p.inputs["name"] == "gb200"]
    assert pool.inputs["placementPolicy"] == {"type": "COMPACT", "policyName": policy.inputs["name"]}
    assert pool.inputs["nodeConfig"]["reservationAffinity"]["values"] == ["a4x-reservation"]


def test_hgx_reservations_keep_their_own_placement(plans):
    """Unchanged for 8-GPU types: a reservation brings its placement, no policy is added."""
    spec = copy.deepcopy(GCP_MIN)
    spec["pools"] = [{"name": "h200", "instance_type": "a3-ultragpu-8g", "max_nodes": 4, "capacity": RESERVATION}]
    assert not run_spec(spec).of_type(POLICY)


def test_an_a4x_pool_beside_an_a4_pool_shares_an_rdma_network_wide_enough_for_both():
    """The RDMA VPC gets the most subnets any pool needs (A4: 8 MRDMA NICs, A4X: 4), whichever pool
    comes first: an A4X pool listed first used to leave the A4 pool's last four NICs without one."""
    spec = _spec("kubernetes")
    spec["pools"].append({"name": "b200", "instance_type": "a4-highgpu-8g", "max_nodes": 2})
    plan = run_spec(spec)
    subnets = [r for r in plan.of_type("gcp:compute/subnetwork:Subnetwork") if "-rdma-sub-" in r.name]
    assert len(subnets) == 8
    pools = {p.inputs["name"]: p.inputs for p in plan.of_type("gcp:container/nodePool:NodePool")}
    rdma = {k: [n for n in v["networkConfig"]["additionalNodeNetworkConfigs"] if "rdma" in n["network"]]
            for k, v in pools.items() if k in ("gb200", "b200")}
    assert (len(rdma["gb200"]), len(rdma["b200"])) == (4, 8)
