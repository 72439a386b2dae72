"""How the `pulumi up` that creates the in-cluster objects reaches the EKS API (issue 11).

Before: with no `api_access_cidrs` the endpoint was private-only, in a new VPC nothing had a route
to it, and the Helm releases of the same `pulumi up` could never be created. EKS has no IAM-gated
endpoint, so now the spec must say how (`kubernetes.api_access`):
- endpoint (default): the public endpoint, open to `api_access_cidrs` only, which are required;
- vpc: private endpoint only, `pulumi up` runs inside the VPC (or a network routed to it);
- private: private endpoint only, and `pulumi up` creates nothing inside the cluster (phase 1);
  phase 2 is `vpc` from inside the VPC and changes no cloud resource.
"""
from __future__ import annotations

import contextlib
import copy
import io
import json

import pytest
import yaml

from aicluster.errors import SpecError
from aicluster.offline.capture import reveal
from aicluster.spec.cluster import parse_spec
from tests.support import BASE_SPEC

CLUSTER = "aws:eks/cluster:Cluster"
PROVIDER = "pulumi:providers:kubernetes"


def eks_spec(**kubernetes) -> dict:
    spec = copy.deepcopy(BASE_SPEC)
    spec["scheduler"] = "kubernetes"
    if kubernetes:
        spec["kubernetes"] = kubernetes
    return spec


def in_cluster(plan) -> list:
    return [r for r in plan.resources if r.type.startswith("kubernetes:")]


def test_no_way_to_the_api_is_refused_at_api_access_cidrs():
    with pytest.raises(SpecError) as info:
        parse_spec(eks_spec())
    (p,) = info.value.problems
    assert p.path == "kubernetes.api_access_cidrs" and p.value == []
    assert "pulumi up" in p.allowed and "/32" in p.allowed
    assert "api_access: vpc" in p.allowed and "private" in p.allowed


def test_the_cli_exits_2_naming_the_path(tmp_path):
    from aicluster.cli import main

    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(eks_spec()))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["plan", str(path)])
    assert code == 2 and out.getvalue() == ""
    assert "  - kubernetes.api_access_cidrs: [] is not valid;" in err.getvalue()
    assert "Traceback" not in err.getvalue()


@pytest.mark.parametrize("access", ["vpc", "private"])
def test_cidrs_with_a_private_api_are_refused(access):
    with pytest.raises(SpecError) as info:
        parse_spec(eks_spec(api_access=access, api_access_cidrs=["198.51.100.0/24"]))
    (p,) = info.value.problems
    assert p.path == "kubernetes.api_access_cidrs" and "stays private" in p.allowed


def test_endpoint_opens_the_public_endpoint_to_the_cidrs_and_the_provider_uses_it(plan_spec):
    plan = plan_spec(eks_spec(api_access_cidrs=["198.51.100.0/24"]))
    (cluster,) = plan.of_type(CLUSTER)
    vpc = cluster.inputs["vpcConfig"]
    assert vpc["endpointPublicAccess"] is True and vpc["publicAccessCidrs"] == ["198.51.100.0/24"]
    assert vpc["endpointPrivateAccess"] is True
    (provider,) = plan.of_type(PROVIDER)
    config = json.loads(reveal(provider.inputs["kubeconfig"]))
    assert config["clusters"][0]["cluster"]["server"] == cluster.outputs["endpoint"]
    assert plan.of_type("kubernetes:helm.sh/v3:Release")


def test_vpc_is_private_and_installs_everything(plan_spec):
    plan = plan_spec(eks_spec(api_access="vpc"))
    (cluster,) = plan.of_type(CLUSTER)
    assert cluster.inputs["vpcConfig"]["endpointPublicAccess"] is False
    assert plan.of_type(PROVIDER) and plan.of_type("kubernetes:helm.sh/v3:Release")


def test_private_is_phase_one_the_same_cloud_resources_and_nothing_inside(plan_spec):
    vpc, private = plan_spec(eks_spec(api_access="vpc")), plan_spec(eks_spec(api_access="private"))
    assert private.of_type(PROVIDER) == [] and in_cluster(private) == []
    assert private.of_type(CLUSTER)[0].inputs["vpcConfig"]["endpointPublicAccess"] is False

    def cloud(plan):
        return {(r.type, r.name): r.inputs for r in plan.resources
                if r.custom and not r.type.startswith(("kubernetes:", PROVIDER))}
    assert cloud(private) == cloud(vpc)


def test_example_stack_reaches_its_api_and_the_plan_says_how():
    from aicluster.commands.plan_report import text
    from tests.support.stack_plans import stack_result

    result = stack_result("aws-p5-eks")
    (cluster,) = result.plan.of_type(CLUSTER)
    assert cluster.inputs["vpcConfig"]["endpointPublicAccess"] is True
    assert cluster.inputs["vpcConfig"]["publicAccessCidrs"]
    out = "\n".join(text(result))
    (line,) = [x for x in out.splitlines() if "Kubernetes API:" in x]
    assert "public endpoint, open to" in line and "aws eks update-kubeconfig" in line


def test_plan_of_phase_one_says_what_phase_two_adds():
    from aicluster.aws.eks_report import kubernetes_lines
    from aicluster.design.cluster import design_cluster

    lines = kubernetes_lines(design_cluster(parse_spec(eks_spec(api_access="private"))))
    (api,) = [x for x in lines if "Kubernetes API:" in x]
    assert "creates no in-cluster object" in api and "api_access: vpc" in api
    assert any("phase 2" in x for x in lines)
