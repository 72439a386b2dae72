"""check_buildable: every design the spec accepts is one build_cluster builds, and a design outside
that (a hand-edited ClusterDesign) fails before any resource is declared."""
from __future__ import annotations

import copy
import dataclasses

import pytest

from aicluster.cluster import check_buildable
from aicluster.design.model import ClusterDesign
from aicluster.design.parts import StorageDesign
from aicluster.design.cluster import design_cluster
from aicluster.errors import SpecError
from aicluster.spec.cluster import parse_spec
from tests.support import AWS_MIN, FSX, GCP_MIN, STACK_NAMES, stack_spec

FILESTORE = StorageDesign("home", "filestore", "/home", 1024, 0, None, None, True, "ZONAL")


def _design(base: dict, **top) -> ClusterDesign:
    data = copy.deepcopy(base)
    data.update(copy.deepcopy(top))
    return design_cluster(parse_spec(data))


def _paths(design: ClusterDesign) -> list[str]:
    with pytest.raises(SpecError) as exc:
        check_buildable(design)
    return [p.path for p in exc.value.problems]


@pytest.mark.parametrize("name", STACK_NAMES)
def test_every_example_stack_is_buildable(name):
    check_buildable(design_cluster(parse_spec(stack_spec(name))))


def test_a_cloud_without_a_builder_is_refused():
    assert _paths(dataclasses.replace(_design(AWS_MIN), cloud="azure")) == ["cloud"]


def test_an_unknown_scheduler_is_refused():
    assert _paths(dataclasses.replace(_design(AWS_MIN), scheduler="nomad")) == ["scheduler"]


def test_a_scheduler_without_its_design_is_refused():
    slurm = _design(AWS_MIN)
    assert _paths(dataclasses.replace(slurm, slurm=None)) == ["slurm"]
    eks = _design(AWS_MIN, scheduler="kubernetes", kubernetes={"api_access_cidrs": ["203.0.113.0/24"]})
    assert eks.kubernetes is not None and eks.kubernetes.platform == "eks"
    check_buildable(eks)
    assert _paths(dataclasses.replace(eks, kubernetes=None)) == ["kubernetes"]
    assert _paths(dataclasses.replace(eks, slurm=slurm.slurm)) == ["kubernetes"]


def test_the_kubernetes_platform_must_be_the_clouds_own():
    gke = _design(GCP_MIN, scheduler="kubernetes")
    check_buildable(gke)
    on_aws = dataclasses.replace(gke, cloud="aws")   # a GKE design handed to the aws builder
    assert _paths(on_aws) == ["kubernetes"]


def test_filesystems_must_be_kinds_the_clouds_builder_creates():
    aws = _design(AWS_MIN, storage=[FSX])
    check_buildable(aws)
    assert _paths(dataclasses.replace(aws, storage=(*aws.storage, FILESTORE))) == ["storage[1]"]
    gcp = _design(GCP_MIN)
    check_buildable(dataclasses.replace(gcp, storage=(FILESTORE,)))
    assert _paths(dataclasses.replace(gcp, storage=aws.storage)) == ["storage[0]"]


def test_tpu_slices_are_gcp_only():
    tpu = _design(GCP_MIN, pools=[{"name": "tpu", "tpu": {"type": "v5p", "topology": "2x2x1"}, "max_nodes": 1}])
    check_buildable(tpu)
    assert _paths(dataclasses.replace(tpu, cloud="aws")) == ["pools[0].tpu"]
