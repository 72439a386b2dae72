"""The `kubernetes` spec section: every misconfiguration is a SpecError that names the path."""
from __future__ import annotations

import copy

import pytest

from tests.support import AWS_MIN
from aicluster.design.cluster import design_cluster
from aicluster.errors import SpecError
from aicluster.spec.cluster import parse_spec


def spec_with(kubernetes=None, **top) -> dict:
    """EKS needs a way to its API: the named CIDRs, else `pulumi up` from inside the VPC."""
    spec = copy.deepcopy(AWS_MIN)
    spec["scheduler"] = "kubernetes"
    kubernetes = dict(kubernetes or {})
    kubernetes.setdefault("api_access", "endpoint" if kubernetes.get("api_access_cidrs") else "vpc")
    spec["kubernetes"] = kubernetes
    spec.update(top)
    return spec


def problems(data) -> list:
    with pytest.raises(SpecError) as info:
        parse_spec(data)
    return info.value.problems


def test_defaults():
    k8s = parse_spec(spec_with()).kubernetes
    assert k8s.gpu_devices == "nvidia-device-plugin"
    assert k8s.api_access_cidrs == () and k8s.admins == ()
    assert (k8s.system_nodes.instance_type, k8s.system_nodes.count) == (None, 2)   # per cloud, in the design
    assert design_cluster(parse_spec(spec_with())).kubernetes.system_instance_type == "m7i.xlarge"
    assert k8s.namespace == "training"


@pytest.mark.parametrize("value, suggestion", [("both", None), ("gpu-operater", "gpu-operator"),
                                               ("device-plugin", "nvidia-device-plugin")])
def test_gpu_devices_is_one_choice_never_both(value, suggestion):
    (p,) = problems(spec_with({"gpu_devices": value}))
    assert p.path == "kubernetes.gpu_devices" and "nvidia-device-plugin, gpu-operator" in p.allowed
    if suggestion:
        assert p.suggestion == suggestion


def test_gpu_devices_as_a_list_is_refused():
    (p,) = problems(spec_with({"gpu_devices": ["nvidia-device-plugin", "gpu-operator"]}))
    assert p.path == "kubernetes.gpu_devices"


def test_kubernetes_section_only_with_the_kubernetes_scheduler():
    data = spec_with({"namespace": "jobs"}, scheduler="slurm")
    (p,) = problems(data)
    assert p.path == "kubernetes" and "unless scheduler is kubernetes" in p.allowed


def test_trainium_pools_are_refused_on_eks():
    data = spec_with(pools=[{"name": "trn", "instance_type": "trn1n.32xlarge", "max_nodes": 2}])
    (p,) = problems(data)
    assert p.path == "pools[0].instance_type" and "Neuron" in p.allowed


def test_image_override_is_refused_on_eks():
    data = spec_with()
    data["pools"][0]["image"] = "ami-0123456789abcdef0"
    (p,) = problems(data)
    assert p.path == "pools[0].image" and "AL2023_x86_64_NVIDIA" in p.allowed


@pytest.mark.parametrize("cidr, path_fragment", [
    ("0.0.0.0/0", "whole internet"),
    ("10.1.2.3/16", "no host bits"),
    ("not-a-cidr", "IPv4 CIDR"),
])
def test_api_access_cidrs_are_named_networks(cidr, path_fragment):
    (p,) = problems(spec_with({"api_access_cidrs": [cidr]}))
    assert p.path == "kubernetes.api_access_cidrs[0]" and path_fragment in p.allowed


def test_overlapping_api_cidrs_are_refused():
    (p,) = problems(spec_with({"api_access_cidrs": ["198.51.100.0/24", "198.51.100.128/25"]}))
    assert p.path == "kubernetes.api_access_cidrs[1]" and "overlap" in p.allowed


@pytest.mark.parametrize("arn", ["admin", "arn:aws:iam::123:role/x", "arn:aws:s3:::bucket"])
def test_admins_are_iam_principal_arns(arn):
    (p,) = problems(spec_with({"admins": [arn]}))
    assert p.path == "kubernetes.admins[0]"


def test_admin_arns_in_other_partitions_are_fine():
    spec = parse_spec(spec_with({"admins": ["arn:aws-us-gov:iam::123456789012:user/ops",
                                            "arn:aws:iam::123456789012:role/team/ml-admins"]}))
    assert len(spec.kubernetes.admins) == 2


def test_system_nodes_use_a_catalog_controller_type():
    (p,) = problems(spec_with({"system_nodes": {"instance_type": "m7i.xlarg"}}))
    assert p.path == "kubernetes.system_nodes.instance_type" and p.suggestion == "m7i.xlarge"
    (p,) = problems(spec_with({"system_nodes": {"count": 0}}))
    assert p.path == "kubernetes.system_nodes.count"


@pytest.mark.parametrize("zone", ["us-east-1a", "us-west-2b", "us-east-1"])
def test_control_plane_zone_is_another_zone_of_the_region(zone):
    (p,) = problems(spec_with({"control_plane_zone": zone}))
    assert p.path == "kubernetes.control_plane_zone" and p.suggestion == "us-east-1b"


def test_control_plane_zone_default_and_override():
    design = design_cluster(parse_spec(spec_with()))
    assert [z for _, z in design.kubernetes.control_plane_subnets] == ["us-east-1a", "us-east-1b"]
    design = design_cluster(parse_spec(spec_with({"control_plane_zone": "us-east-1c"}, zone="us-east-1b")))
    assert [z for _, z in design.kubernetes.control_plane_subnets] == ["us-east-1b", "us-east-1c"]


def test_existing_network_needs_control_plane_subnets():
    existing = {"existing": {"vpc_id": "vpc-0123456789abcdef0", "subnet_id": "subnet-0123456789abcdef0"}}
    (p,) = problems(spec_with(network=existing))
    assert p.path == "kubernetes.control_plane_subnet_ids"
    ids = ["subnet-0123456789abcdef1", "subnet-0123456789abcdef2"]
    design = design_cluster(parse_spec(spec_with({"control_plane_subnet_ids": ids}, network=existing)))
    assert design.kubernetes.control_plane_subnet_ids == tuple(ids) and design.kubernetes.control_plane_subnets == ()
    (p,) = problems(spec_with({"control_plane_subnet_ids": ids}))
    assert p.path == "kubernetes.control_plane_subnet_ids" and "network.existing" in p.allowed


def test_every_problem_at_once():
    data = spec_with({"admins": ["nope"], "api_access_cidrs": ["0.0.0.0/0"], "system_nodes": {"instance_type": "x"}})
    data["pools"][0]["image"] = "ami-0123456789abcdef0"
    assert sorted(p.path for p in problems(data)) == [
        "kubernetes.admins[0]", "kubernetes.api_access_cidrs[0]", "kubernetes.system_nodes.instance_type",
        "pools[0].image"]
