"""The real GB200 NVL72 node types of the catalog (issue 28 item 1) through the spec and the plan:
an example stack switched to one plans, its pool holding one NVLink domain on the capacity its cloud
sells domains through; 20 GB200 nodes are refused, 18 accepted, and 36 are two pools (two
UltraServers) of one partition. tests/test_nvl72_capacity.py holds the rule itself."""
from __future__ import annotations

import pytest

from aicluster.catalog import load_catalog
from aicluster.errors import SpecError
from aicluster.spec.cluster import parse_spec
from tests.support.stack_plans import result_with_spec, stack_spec_data

GB200 = "p6e-gb200.36xlarge"
BLOCK = {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"}


def _aws_gb200(nodes: int, pools: int = 1) -> dict:
    """aws-p5-slurm with its GPU pool(s) made GB200 UltraServers, each on its own capacity block."""
    spec = stack_spec_data("aws-p5-slurm")
    spec["pools"] = [{"name": f"gb200{'abcd'[k]}", "instance_type": GB200, "min_nodes": nodes, "max_nodes": nodes,
                      "partition": "gb200", "capacity": dict(BLOCK, reservation_id=f"cr-0123456789abcdef{k}")}
                     for k in range(pools)]
    return spec


def _problems(spec: dict):
    with pytest.raises(SpecError) as info:
        parse_spec(spec)
    return info.value.problems


def test_aws_p5_slurm_on_18_gb200_nodes_plans():
    """One u-p6e-gb200x72 UltraServer: 18 nodes, the arm64 GPU image, an ENA primary and one EFA
    device on each of cards 1-16, Slurm told 4 GB200 GPUs a node."""
    result = result_with_spec("aws-p5-slurm", _aws_gb200(18))
    pool = result.design.pools[0]
    assert (pool.instance.name, pool.min_nodes, pool.max_nodes, pool.capacity.type) == (GB200, 18, 18, "capacity-block")
    assert pool.image == f"resolve:ssm:{load_catalog().images['gpu-arm64']['ssm_parameter']}"
    assert "/arm64/" in pool.image
    assert [(n.network_card_index, n.interface_type) for n in pool.interfaces] == \
        [(0, "interface")] + [(card, "efa-only") for card in range(1, 17)]
    slurm_conf = result.files["slurm/slurm.conf"]
    assert "Gres=gpu:gb200:4" in slurm_conf
    assert "Type=gb200" in result.files["slurm/gres.conf"]


def test_20_gb200_nodes_are_refused():
    p = next(p for p in _problems(_aws_gb200(20)) if p.path == "pools[0].max_nodes")
    assert p.value == 20 and "72 GPUs" in p.allowed and p.suggestion == "18"


@pytest.mark.parametrize("nodes", [9, 18])
def test_one_ultraserver_a_pool_is_accepted(nodes):
    assert parse_spec(_aws_gb200(nodes)).pools[0].max_nodes == nodes


def test_36_gb200_nodes_are_two_ultraservers_of_one_partition():
    spec = parse_spec(_aws_gb200(18, pools=2))
    assert [(p.max_nodes, p.partition) for p in spec.pools] == [(18, "gb200"), (18, "gb200")]
    assert sum(p.max_nodes for p in spec.pools) == 36


def test_gb200_needs_a_capacity_block():
    spec = _aws_gb200(18)
    spec["pools"][0]["capacity"] = "on-demand"
    assert any(p.path == "pools[0].capacity.type" and p.suggestion == "capacity-block" for p in _problems(spec))


def test_eks_takes_gb200_on_the_arm64_nvidia_ami():
    """p6e-gb200 is arm64 (Grace): EKS boots it on AL2023_ARM_64_NVIDIA (kubernetes.yaml
    ami_types.gpu-arm64, named by the type's image role), not the x86_64 NVIDIA AMI."""
    from aicluster.design.cluster import design_cluster

    spec = stack_spec_data("aws-p5-eks")
    spec["pools"][0].update(instance_type=GB200, min_nodes=0, max_nodes=18, capacity=dict(BLOCK))
    pool = design_cluster(parse_spec(spec)).kubernetes.pools[0]
    assert pool.ami_role == "gpu-arm64" and pool.multi_node_nvlink


# --- GCP: A4X -----------------------------------------------------------------------------------

A4X = "a4x-highgpu-4g"


def _gke_a4x(nodes: int) -> dict:
    """gcp-a3ultra-gke with its GPU pool made one A4X NVLink domain from a reservation."""
    spec = stack_spec_data("gcp-a3ultra-gke")
    spec["pools"][0].update(instance_type=A4X, min_nodes=nodes, max_nodes=nodes,
                            capacity={"type": "reservation", "reservation_id": "a4x-reservation"})
    return spec


def test_gcp_a3ultra_gke_on_18_a4x_nodes_plans():
    """One sub-block: 18 VMs, nvidia-gb200 x 4 on each node, the 4 bundled Titanium SSDs, 2 host and
    4 RDMA NICs, a 1x72 placement."""
    result = result_with_spec("gcp-a3ultra-gke", _gke_a4x(18))
    pool = result.design.pools[0]
    assert (pool.instance.name, pool.max_nodes, pool.capacity.type, pool.placement.gpu_topology) == \
        (A4X, 18, "reservation", "1x72")
    assert [n.role for n in pool.nics] == ["host", "host", "gpu", "gpu", "gpu", "gpu"]
    node_pool = next(r for r in result.plan.resources if r.type == "gcp:container/nodePool:NodePool"
                     and r.inputs["nodeConfig"]["machineType"] == A4X)
    config = node_pool.inputs["nodeConfig"]
    assert [(g["type"], g["count"]) for g in config["guestAccelerators"]] == [("nvidia-gb200", 4)]
    assert config["ephemeralStorageLocalSsdConfig"] == {"localSsdCount": 4}
    assert config["diskType"] == "hyperdisk-balanced"


@pytest.mark.parametrize("nodes", [9, 20])
def test_a4x_pools_that_are_not_one_domain_are_refused(nodes):
    """GCP sells no half domain: 18 VMs a pool, nothing else."""
    p = next(p for p in _problems(_gke_a4x(nodes)) if p.path == "pools[0].max_nodes")
    assert p.value == nodes and p.suggestion == "18"
