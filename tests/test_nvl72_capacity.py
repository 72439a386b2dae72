"""Capacity in NVLink domains: a pool of a type whose NVLink domain spans nodes (GB200/GB300 NVL72)
holds whole domains, on the capacity type its cloud sells them through.

One domain a pool (a capacity block, a 1x72 placement policy), every node static; more domains
are more pools sharing a `partition`. The rule is exercised with the catalog's GB200 NVL72 types:
p6e-gb200.36xlarge on AWS and a4x-highgpu-4g on GCP, 4 GPUs a node, 72 a domain, 18 nodes; AWS sells
9-node halves (u-p6e-gb200x36)."""
from __future__ import annotations

import copy

import pytest

from aicluster.catalog import CatalogError, load_catalog
from aicluster.errors import SpecError
from aicluster.spec.cluster import parse_spec
from tests.support import AWS_MIN, GCP_MIN

CAT = load_catalog()
NVL = {"aws": "p6e-gb200.36xlarge", "gcp": "a4x-highgpu-4g"}     # the catalog's GB200 NVL72 nodes


@pytest.fixture
def nvl72():
    """The catalog's NVL72 types of both clouds (as the spec checks read them now)."""
    return load_catalog().instance_types


def _spec(base, max_nodes, min_nodes=None, capacity=None, pools=1):
    data = copy.deepcopy(base)
    data["pools"] = [{"name": f"gb200{chr(ord('a') + k)}", "instance_type": NVL[data["cloud"]], "max_nodes": max_nodes,
                      "min_nodes": max_nodes if min_nodes is None else min_nodes, "partition": "gb200"}
                     for k in range(pools)]
    for pool in data["pools"]:
        if capacity is not None:
            pool["capacity"] = dict(capacity)
    return data


AWS_BLOCK = {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"}
GCP_RES = {"type": "reservation", "reservation_id": "a4x-reservation"}


def _problems(data):
    with pytest.raises(SpecError) as info:
        parse_spec(data)
    return info.value.problems


def test_every_catalog_type_has_a_one_node_domain_by_default():
    for cloud in CAT.instance_types.values():
        for it in cloud.values():
            if it.nvlink_domain is None:
                assert it.nvlink_domain_gpus == it.accelerator_count
                assert it.nodes_per_nvlink_domain == it.nvlink_capacity_unit == 1


def test_gb200_types_are_18_nodes_a_domain(nvl72):
    it = nvl72["aws"][NVL["aws"]]
    assert (it.nvlink_domain_gpus, it.nodes_per_nvlink_domain, it.nvlink_capacity_unit) == (72, 18, 9)
    assert nvl72["gcp"][NVL["gcp"]].nvlink_capacity_unit == 18


def test_20_nodes_refused_at_max_nodes(nvl72):
    problems = _problems(_spec(AWS_MIN, 20, capacity=AWS_BLOCK))
    p = next(p for p in problems if p.path == "pools[0].max_nodes")
    assert p.value == 20 and "one NVLink domain: 9 or 18" in p.allowed and "72 GPUs" in p.allowed
    assert "same `partition`" in p.allowed and p.suggestion == "18"


@pytest.mark.parametrize("nodes", [9, 18])
def test_one_ultraserver_a_pool_on_aws_capacity_blocks(nvl72, nodes):
    spec = parse_spec(_spec(AWS_MIN, nodes, capacity=dict(AWS_BLOCK, nodes=nodes)))
    assert spec.pools[0].max_nodes == nodes


def test_36_nodes_are_two_pools_of_one_partition(nvl72):
    """The done-when's 36 GB200 nodes: two UltraServers, two capacity blocks, two pools; one
    partition, so one job can take both (one Slurm block each)."""
    spec = parse_spec(_spec(AWS_MIN, 18, capacity=AWS_BLOCK, pools=2))
    assert [p.partition for p in spec.pools] == ["gb200", "gb200"]
    one = _problems(_spec(AWS_MIN, 36, capacity=AWS_BLOCK))
    p = next(p for p in one if p.path == "pools[0].max_nodes")
    assert "2 pools of 18" in p.allowed and p.suggestion == "18"


def test_every_node_static(nvl72):
    problems = _problems(_spec(AWS_MIN, 18, min_nodes=4, capacity=AWS_BLOCK))
    assert [(p.path, p.suggestion) for p in problems] == [("pools[0].min_nodes", "18")]
    assert "IMEX" in problems[0].allowed


def test_block_is_the_pool(nvl72):
    problems = _problems(_spec(AWS_MIN, 18, capacity=dict(AWS_BLOCK, nodes=10)))
    assert [(p.path, p.suggestion) for p in problems] == [("pools[0].capacity.nodes", "18")]


def test_aws_needs_a_capacity_block(nvl72):
    problems = _problems(_spec(AWS_MIN, 18))
    p = next(p for p in problems if p.path == "pools[0].capacity.type")
    assert "capacity-block" in p.allowed and p.suggestion == "capacity-block"


@pytest.mark.parametrize("nodes, ok", [(9, False), (18, True), (20, False), (36, False)])
def test_gcp_domains_are_18_nodes_by_reservation(nvl72, nodes, ok):
    data = _spec(GCP_MIN, nodes, capacity=GCP_RES)
    for pool in data["pools"]:      # A4X is arm64: Slurm pools name their image (no public default)
        pool["image"] = "projects/my-project/global/images/family/a4x-slurm"
    if ok:
        assert parse_spec(data).pools[0].max_nodes == nodes
    else:
        assert any(p.path == "pools[0].max_nodes" and "one NVLink domain: 18" in p.allowed
                   and "1x72 placement policy" in p.allowed for p in _problems(data))


def test_gcp_a4x_on_slurm_names_its_arm64_image(nvl72):
    p = next(p for p in _problems(_spec(GCP_MIN, 18, capacity=GCP_RES)) if p.path == "pools[0].image")
    assert "arm64" in p.allowed and "TCPX" not in p.allowed


def test_gcp_needs_a_reservation(nvl72):
    problems = _problems(_spec(GCP_MIN, 18))
    assert any(p.path == "pools[0].capacity.type" and "reservation" in p.allowed for p in problems)


@pytest.mark.parametrize("entry, why", [
    ({"nvlink_domain": 70}, "whole multiple"),
    ({"nvlink_domain": 72}, "nvlink_domain_source"),
    ({"nvlink_domain": 72, "nvlink_domain_source": "x", "capacity_unit_nodes": 7}, "must divide"),
])
def test_loader_refuses_a_bad_domain(entry, why):
    from aicluster.catalog import _nvlink_domain
    with pytest.raises(CatalogError, match=why):
        _nvlink_domain(entry, "aws.yaml instance_types.x", 4)
