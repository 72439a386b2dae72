"""TPU7x (Ironwood) on GKE (issue 28 item 1): its slices are placed by a HIGH_THROUGHPUT workload
policy of the slice's topology that each node pool names (Cluster Toolkit examples/gke-tpu-7x, xpk),
not by placement_policy.tpu_topology as v4-v6e are; Slurm refuses it (no sourced host facts)."""
from __future__ import annotations

import pytest

from aicluster.errors import SpecError
from aicluster.spec.cluster import parse_spec
from tests.support.stack_plans import result_with_spec, stack_spec_data


def _tpu_spec(gen: str, topology: str, hosts: int, stack: str = "gcp-tpu-v5p-gke") -> dict:
    spec = stack_spec_data(stack)
    spec["pools"] = [{"name": "slice", "tpu": {"type": gen, "topology": topology}, "max_nodes": hosts,
                      "capacity": {"type": "reservation", "reservation_id": "tpu-reservation"}}]
    return spec


def _resources(spec: dict, rtype: str) -> list:
    return [r for r in result_with_spec("gcp-tpu-v5p-gke", spec).plan.resources if r.type == rtype]


def test_tpu7x_slice_names_a_workload_policy_of_its_topology():
    policies = _resources(_tpu_spec("tpu7x", "4x4x4", 16), "gcp:compute/resourcePolicy:ResourcePolicy")
    assert [p.inputs["workloadPolicy"] for p in policies] == [{"type": "HIGH_THROUGHPUT", "acceleratorTopology": "4x4x4"}]
    pools = [p for p in _resources(_tpu_spec("tpu7x", "4x4x4", 16), "gcp:container/nodePool:NodePool")
             if p.inputs["nodeConfig"]["machineType"] == "tpu7x-standard-4t"]
    assert len(pools) == 1
    assert pools[0].inputs["placementPolicy"] == {"type": "COMPACT", "policyName": policies[0].inputs["name"]}
    assert pools[0].inputs["nodeConfig"]["diskType"] == "hyperdisk-balanced"


def test_v5p_keeps_its_tpu_topology_placement():
    assert not _resources(_tpu_spec("v5p", "4x4x4", 16), "gcp:compute/resourcePolicy:ResourcePolicy")
    pool = next(p for p in _resources(_tpu_spec("v5p", "4x4x4", 16), "gcp:container/nodePool:NodePool")
                if p.inputs["nodeConfig"]["machineType"] == "ct5p-hightpu-4t")
    assert pool.inputs["placementPolicy"] == {"type": "COMPACT", "tpuTopology": "4x4x4"}


def test_slurm_refuses_tpu7x_without_host_facts():
    spec = _tpu_spec("tpu7x", "2x2x2", 2, stack="gcp-a3mega-slurm")
    spec["pools"][0]["min_nodes"] = 2
    with pytest.raises(SpecError) as info:
        parse_spec(spec)
    assert any(p.path == "pools[0].tpu.type" and "Slurm's node lines" in p.allowed for p in info.value.problems)
