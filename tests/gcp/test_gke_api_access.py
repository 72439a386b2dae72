"""How the `pulumi up` that creates the in-cluster objects reaches the GKE API (issue 11).

Before: a private endpoint, an empty authorized-network list and no DNS endpoint, so the Helm
releases of a `pulumi up` run from outside the VPC could never reach the API. Now
(`kubernetes.api_access`):
- endpoint (default): the DNS-based endpoint takes outside traffic, authorized by IAM, and the
  Kubernetes provider talks to it (no cluster CA: the endpoint's certificate is publicly trusted);
  the IP endpoint stays private;
- vpc: the DNS endpoint is closed to outside traffic, the provider talks to the private IP endpoint;
- private: the same cluster, no Kubernetes provider and no in-cluster object (phase 1).
The plan says which, and how kubectl gets credentials.
"""
from __future__ import annotations

import copy
import json

import pytest

from aicluster.errors import SpecError
from aicluster.offline.capture import reveal
from aicluster.spec.cluster import parse_spec
from tests.support import GCP_MIN

CLUSTER = "gcp:container/cluster:Cluster"
PROVIDER = "pulumi:providers:kubernetes"


def gke_spec(**kubernetes) -> dict:
    spec = copy.deepcopy(GCP_MIN)
    spec.update(scheduler="kubernetes", storage=[{"name": "scratch", "type": "lustre", "mount": "/lustre",
                                                  "capacity_gib": 18000}])
    if kubernetes:
        spec["kubernetes"] = kubernetes
    return spec


def kubeconfig_of(plan) -> dict:
    (provider,) = plan.of_type(PROVIDER)
    return json.loads(reveal(provider.inputs["kubeconfig"]))


def in_cluster(plan) -> list:
    return [r for r in plan.resources if r.type.startswith("kubernetes:")]


@pytest.fixture(scope="module")
def default_plan():
    from tests.support import run_spec

    return run_spec(gke_spec())


def test_default_reaches_the_api_through_the_iam_authorized_dns_endpoint(default_plan):
    (cluster,) = default_plan.of_type(CLUSTER)
    c = cluster.inputs
    assert c["controlPlaneEndpointsConfig"]["dnsEndpointConfig"]["allowExternalTraffic"] is True
    # The IP endpoint stays private and no CIDR is allowed in.
    assert c["privateClusterConfig"]["enablePrivateEndpoint"] is True
    assert c["masterAuthorizedNetworksConfig"].get("cidrBlocks", []) == []
    dns = cluster.outputs["controlPlaneEndpointsConfig"]["dnsEndpointConfig"]["endpoint"]
    assert dns.endswith(".gke.goog")
    config = kubeconfig_of(default_plan)
    server = config["clusters"][0]["cluster"]
    assert server == {"server": f"https://{dns}"}     # publicly trusted certificate: no cluster CA
    assert config["users"][0]["user"]["exec"]["command"] == "gke-gcloud-auth-plugin"
    # ... and that provider is the one the Helm releases and objects use.
    (provider,) = default_plan.of_type(PROVIDER)
    releases = default_plan.of_type("kubernetes:helm.sh/v3:Release")
    assert releases and all(r.provider and r.provider.startswith(provider.urn) for r in releases)


def test_public_ip_endpoint_for_named_cidrs_keeps_the_dns_endpoint(plan_spec):
    plan = plan_spec(gke_spec(api_access_cidrs=["203.0.113.0/24"]))
    (cluster,) = plan.of_type(CLUSTER)
    assert cluster.inputs["privateClusterConfig"]["enablePrivateEndpoint"] is False
    assert cluster.inputs["controlPlaneEndpointsConfig"]["dnsEndpointConfig"]["allowExternalTraffic"] is True
    dns = cluster.outputs["controlPlaneEndpointsConfig"]["dnsEndpointConfig"]["endpoint"]
    assert kubeconfig_of(plan)["clusters"][0]["cluster"]["server"] == f"https://{dns}"


def test_vpc_keeps_every_endpoint_inside_and_talks_to_the_private_one(plan_spec):
    plan = plan_spec(gke_spec(api_access="vpc"))
    (cluster,) = plan.of_type(CLUSTER)
    assert cluster.inputs["controlPlaneEndpointsConfig"]["dnsEndpointConfig"]["allowExternalTraffic"] is False
    assert cluster.inputs["privateClusterConfig"]["enablePrivateEndpoint"] is True
    server = kubeconfig_of(plan)["clusters"][0]["cluster"]
    assert server["server"] == f"https://{cluster.outputs['privateClusterConfig']['privateEndpoint']}"
    assert server["certificate-authority-data"]
    assert in_cluster(plan)


def test_private_is_phase_one_the_same_cluster_and_nothing_inside_it(plan_spec):
    vpc, private = plan_spec(gke_spec(api_access="vpc")), plan_spec(gke_spec(api_access="private"))
    assert private.of_type(PROVIDER) == [] and in_cluster(private) == []

    def cloud(plan):
        return {(r.type, r.name): r.inputs for r in plan.resources
                if r.custom and not r.type.startswith(("kubernetes:", "pulumi:providers:kubernetes"))}
    # Phase 2 (api_access: vpc) changes no cloud resource: it only adds the in-cluster objects.
    assert cloud(private) == cloud(vpc)


@pytest.mark.parametrize("access", ["vpc", "private"])
def test_cidrs_with_a_private_api_are_refused(access):
    with pytest.raises(SpecError) as info:
        parse_spec(gke_spec(api_access=access, api_access_cidrs=["203.0.113.0/24"]))
    (p,) = info.value.problems
    assert p.path == "kubernetes.api_access_cidrs" and f"api_access {access}" in p.allowed


def test_a_misspelt_api_access_gets_a_close_match():
    with pytest.raises(SpecError) as info:
        parse_spec(gke_spec(api_access="privat"))
    (p,) = info.value.problems
    assert p.path == "kubernetes.api_access" and p.suggestion == "private"
    assert "endpoint, vpc, private" in p.allowed


def test_plan_says_how_the_api_is_reached():
    from aicluster.commands.plan_report import text
    from tests.support.stack_plans import stack_result

    out = "\n".join(text(stack_result("gcp-a3ultra-gke")))
    (line,) = [x for x in out.splitlines() if "Kubernetes API:" in x]
    assert "DNS-based endpoint" in line and "IAM" in line and "--dns-endpoint" in line
    assert "the IP endpoint is private" in line


def test_plan_of_phase_one_says_what_phase_two_adds():
    from aicluster.design.cluster import design_cluster
    from aicluster.gcp.gke_report import kubernetes_lines

    lines = kubernetes_lines(design_cluster(parse_spec(gke_spec(api_access="private"))))
    (api,) = [x for x in lines if "Kubernetes API:" in x]
    assert "creates no in-cluster object" in api and "api_access: vpc" in api
    assert any("phase 2" in x for x in lines)
