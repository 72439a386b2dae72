"""aicluster:aws:ObservabilityBackend under mocks, on the Slurm and EKS example stacks: the AMP
workspace is protected and retained, the log groups carry the one retention, and the only
identities that may write are the compute and head roles (Slurm) or the collector's Pod Identity
role (EKS), each on exactly the workspace's and the log groups' ARNs."""
from __future__ import annotations

import json

import pytest

from aicluster.aws.observability import remote_write_url, shipping_policy
from aicluster.offline.capture import reveal
from aicluster.stateful import stateful_kind
from aicluster.telemetry_backend import (COLLECTOR_NAMESPACE, COLLECTOR_SERVICE_ACCOUNT, LOG_RETENTION_DAYS,
                                         SLURM_LOG_STREAMS)
from tests.support.stack_plans import stack_plan

WORKSPACE = "aws:amp/workspace:Workspace"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
ROLE = "aws:iam/role:Role"
POLICY = "aws:iam/rolePolicy:RolePolicy"
ASSOCIATION = "aws:eks/podIdentityAssociation:PodIdentityAssociation"


@pytest.fixture(scope="module")
def slurm():
    return stack_plan("aws-p5-slurm")


@pytest.fixture(scope="module")
def eks():
    return stack_plan("aws-p5-eks")


def _ours(plan):
    (workspace,) = plan.of_type(WORKSPACE)
    groups = [g for g in plan.of_type(LOG_GROUP) if g.inputs["name"].startswith("/aicluster/")]
    return workspace, groups


def _shipping(plan):
    """Role name -> the statements of every policy on it that touch aps: or logs:."""
    out: dict[str, list[dict]] = {}
    for p in plan.of_type(POLICY):
        statements = json.loads(reveal(p.inputs["policy"]))["Statement"]
        touching = [s for s in statements if any(a.startswith(("aps:", "logs:")) for a in s["Action"])]
        if touching:
            out.setdefault(reveal(p.inputs["role"]), []).extend(touching)
    return out


def _role_name(plan, resource_name: str) -> str:
    role = plan.named(resource_name, ROLE)
    return role.outputs.get("name") or role.id


@pytest.mark.parametrize("stack", ["aws-p5-slurm", "aws-p5-eks"])
def test_the_workspace_is_stateful_protected_and_retained(stack):
    plan = stack_plan(stack)
    workspace, _ = _ours(plan)
    cluster = plan.outputs["log_groups"]["kernel"].split("/")[2]
    assert workspace.inputs["alias"] == cluster
    assert stateful_kind(workspace.type, workspace.inputs) == "metrics"
    assert (workspace.protect, workspace.retain_on_delete) == (True, True)
    # No customer key to keep alive: AMP's default AWS owned key encrypts it (module docstring).
    assert "kmsKeyArn" not in workspace.inputs
    assert workspace.inputs["tags"]["aicluster-role"] == "metrics"


def test_slurm_log_groups_one_per_stream_with_the_one_retention(slurm):
    _, groups = _ours(slurm)
    assert sorted(g.inputs["name"] for g in groups) == sorted(f"/aicluster/p5-train/{s}" for s in SLURM_LOG_STREAMS)
    assert {g.inputs["retentionInDays"] for g in groups} == {LOG_RETENTION_DAYS}
    assert slurm.outputs["log_groups"] == {s: f"/aicluster/p5-train/{s}" for s in SLURM_LOG_STREAMS}


def test_eks_ships_kernel_logs_and_its_control_plane_group_keeps_the_same_retention(eks):
    _, groups = _ours(eks)
    assert [g.inputs["name"] for g in groups] == ["/aicluster/p5-eks/kernel"]
    control_plane = [g for g in eks.of_type(LOG_GROUP) if g.inputs["name"].startswith("/aws/eks/")]
    assert control_plane and {g.inputs["retentionInDays"] for g in control_plane + groups} == {LOG_RETENTION_DAYS}


def test_outputs_name_the_remote_write_url_of_the_workspace(slurm):
    workspace, _ = _ours(slurm)
    assert slurm.outputs["metrics_workspace"] == workspace.outputs["arn"]
    assert slurm.outputs["remote_write_url"] == workspace.outputs["prometheusEndpoint"] + "api/v1/remote_write"
    assert remote_write_url("https://x/workspaces/ws-1/") == remote_write_url("https://x/workspaces/ws-1") \
        == "https://x/workspaces/ws-1/api/v1/remote_write"


def test_slurm_compute_and_head_roles_write_to_exactly_the_clusters_stores(slurm):
    workspace, groups = _ours(slurm)
    arns = sorted(g.outputs["arn"] for g in groups)
    expected = shipping_policy(workspace.outputs["arn"], arns)["Statement"]
    shipping = _shipping(slurm)
    compute, head = _role_name(slurm, "p5-train-compute-role"), _role_name(slurm, "p5-train-slurm-head-role")
    assert sorted(shipping) == sorted([compute, head])      # no other role (login nodes included)
    for role in (compute, head):
        assert shipping[role] == expected
    remote, logs = expected
    assert remote["Action"] == ["aps:RemoteWrite"] and remote["Resource"] == [workspace.outputs["arn"]]
    assert logs["Action"] == ["logs:CreateLogStream", "logs:PutLogEvents"]
    assert logs["Resource"] == arns + [f"{a}:log-stream:*" for a in arns]
    assert not any(t == "*" for s in expected for t in s["Resource"])


def test_eks_collector_writes_through_pod_identity_and_the_nodes_do_not(eks):
    workspace, groups = _ours(eks)
    shipping = _shipping(eks)
    collector = _role_name(eks, "p5-eks-collector-role")
    assert sorted(shipping) == [collector]                  # the node role gets nothing
    assert shipping[collector] == shipping_policy(workspace.outputs["arn"], [g.outputs["arn"] for g in groups])["Statement"]
    trust = json.loads(eks.named("p5-eks-collector-role", ROLE).inputs["assumeRolePolicy"])["Statement"]
    assert [s["Principal"] for s in trust] == [{"Service": "pods.eks.amazonaws.com"}]
    association = eks.named("p5-eks-collector-association", ASSOCIATION).inputs
    assert (association["namespace"], association["serviceAccount"]) == (COLLECTOR_NAMESPACE, COLLECTOR_SERVICE_ACCOUNT)
    assert association["roleArn"] == eks.named("p5-eks-collector-role", ROLE).outputs["arn"]
