"""Pools that name the same `partition` share one PartitionName line (the compute resources of one
ParallelCluster queue): how NVL72 domains, one pool each, make one partition a job can span."""
from __future__ import annotations

import copy

import pytest

from aicluster.design.cluster import design_cluster
from aicluster.errors import SpecError
from aicluster.render.slurm_config import SlurmRuntime, render_slurm_configs
from aicluster.spec.cluster import parse_spec
from tests.support import BASE_SPEC

RT = SlurmRuntime(controller_host="head", controller_addr="10.0.0.10")


def _spec(**pool_extra) -> dict:
    spec = copy.deepcopy(BASE_SPEC)
    spec["pools"] = [{"name": "h100a", "instance_type": "p5.48xlarge", "max_nodes": 4, "partition": "gpu"},
                     {"name": "h100b", "instance_type": "p5.48xlarge", "max_nodes": 2, "partition": "gpu",
                      **pool_extra},
                     {"name": "a100", "instance_type": "p4d.24xlarge", "max_nodes": 2}]
    return spec


def _partitions(spec: dict) -> list[str]:
    conf = render_slurm_configs(design_cluster(parse_spec(spec)), RT)["slurm.conf"]
    return [ln for ln in conf.splitlines() if ln.startswith("PartitionName=")]


def test_pools_of_one_partition_share_its_line():
    lines = _partitions(_spec())
    assert len(lines) == 2
    gpu, a100 = lines
    assert gpu.startswith("PartitionName=gpu Nodes=h100a-[1-4],h100b-[1-2] Default=YES ")
    assert "OverSubscribe=EXCLUSIVE" in gpu
    assert a100.startswith("PartitionName=a100 Nodes=a100-[1-2] State=UP")


def test_partition_settings_apply_to_the_shared_line():
    spec = _spec(slurm_settings={"MaxTime": "2-00:00:00"})
    spec["pools"][0]["slurm_settings"] = {"MaxTime": "2-00:00:00"}
    gpu = _partitions(spec)[0]
    assert "MaxTime=2-00:00:00" in gpu and "MaxTime=INFINITE" not in gpu


def test_pools_of_one_partition_give_the_same_settings():
    with pytest.raises(SpecError) as err:
        parse_spec(_spec(slurm_settings={"MaxTime": "1:00:00"}))
    p = next(p for p in err.value.problems if p.path == "pools[1].slurm_settings")
    assert "pools[0].slurm_settings" in p.allowed and "partition gpu" in p.allowed


def test_partition_is_slurm_only():
    spec = _spec()
    spec["scheduler"] = "kubernetes"
    with pytest.raises(SpecError) as err:
        parse_spec(spec)
    assert any(p.path == "pools[0].partition" and "scheduler is slurm" in p.allowed for p in err.value.problems)


def test_a_pool_without_partition_keeps_its_own():
    spec = copy.deepcopy(BASE_SPEC)
    assert [ln.split()[0] for ln in _partitions(spec)] == ["PartitionName=gpu"]


def test_the_estimate_runs_a_job_over_its_partition():
    """One job spans a partition: two pools of one type in it are modelled as one job of both
    pools' nodes, and a pool outside it is named as left out."""
    from aicluster.design.workload import hardware, job_nodes

    design = design_cluster(parse_spec(_spec()))
    hw, warnings = hardware(design)
    assert hw.count == 6 * 8 and job_nodes(design) == 6
    assert any("partition h100a, h100b (48 accelerators)" in w and "a100 not included" in w for w in warnings)
    alone = copy.deepcopy(_spec())
    for pool in alone["pools"]:
        pool.pop("partition", None)
    hw, _ = hardware(design_cluster(parse_spec(alone)))
    assert hw.count == 4 * 8
