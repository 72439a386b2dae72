"""aicluster:aws:ObservabilityBackend under mocks, on the Slurm and EKS example stacks: the AMP
workspace is protected and retained, the log groups carry the one retention, and the only
identities that may write are the compute and head roles (Slurm) or the collector's Pod Identity
role (EKS), each on exactly the workspace's and the log groups' ARNs."""
from __future__ import annotations

import base64
import json
import subprocess

import pytest
import yaml

from aicluster.aws.observability import remote_write_url, shipping_policy
from aicluster.offline.capture import reveal
from aicluster.design.stateful import stateful_kind
from aicluster.design.telemetry_backend import (COLLECTOR_NAMESPACE, COLLECTOR_SERVICE_ACCOUNT, LOG_RETENTION_DAYS,
                                         SLURM_LOG_STREAMS)
from tests.support.prometheus import program
from tests.support import stack_spec
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
    # The backend's groups (the network's VPC flow log group is the network component's own:
    # tests/aws/test_network.py).
    groups = [g for g in plan.of_type(LOG_GROUP) if g.inputs["name"].startswith("/aicluster/")
              and "aicluster:aws:ObservabilityBackend" in (g.parent_urn or "")]
    return workspace, groups


def _shipping(plan):
    """Role name -> the statements of every policy on it that touch aps: or logs:. Not the network's
    VPC flow log role, which delivers flow logs into its own group only (tests/aws/test_network.py)."""
    out: dict[str, list[dict]] = {}
    for p in plan.of_type(POLICY):
        if "aicluster:aws:Network" in (p.parent_urn or ""):
            continue
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
    assert workspace.inputs["alias"] == stack_spec(stack)["name"]
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


def test_eks_makes_no_group_nothing_writes_and_its_control_plane_group_keeps_the_one_retention(eks):
    _, groups = _ours(eks)
    assert groups == []             # KUBERNETES_LOG_STREAMS: no node agent of aicluster's ships logs there
    control_plane = [g for g in eks.of_type(LOG_GROUP) if g.inputs["name"].startswith("/aws/eks/")]
    assert control_plane and {g.inputs["retentionInDays"] for g in control_plane} == {LOG_RETENTION_DAYS}


def test_outputs_name_the_remote_write_url_of_the_workspace(slurm):
    workspace, _ = _ours(slurm)
    assert slurm.outputs["metrics_workspace"] == workspace.outputs["arn"]
    assert slurm.outputs["remote_write_url"] == workspace.outputs["prometheusEndpoint"] + "api/v1/remote_write"
    assert remote_write_url("https://x/workspaces/ws-1/") == remote_write_url("https://x/workspaces/ws-1") \
        == "https://x/workspaces/ws-1/api/v1/remote_write"


def test_slurm_roles_write_to_exactly_the_stores_their_nodes_ship_to(slurm):
    """Compute, head and login roles may remote-write to the workspace and put events into the log
    groups of what their own nodes ship (slurm_monitoring.log_streams), and nothing else."""
    from aicluster.render.slurm_monitoring import role_streams

    workspace, groups = _ours(slurm)
    arn_of = {g.inputs["name"].rsplit("/", 1)[1]: g.outputs["arn"] for g in groups}
    shipping = _shipping(slurm)
    roles = {role: _role_name(slurm, f"p5-train-{name}-role")
             for role, name in (("compute", "compute"), ("head", "slurm-head"), ("login", "login"))}
    assert sorted(shipping) == sorted(roles.values())       # no other role
    for role, role_name in roles.items():
        arns = sorted(arn_of[s] for s in role_streams(role))
        expected = shipping_policy(workspace.outputs["arn"], arns)["Statement"]
        assert shipping[role_name] == expected
        remote, logs = expected
        assert remote["Action"] == ["aps:RemoteWrite"] and remote["Resource"] == [workspace.outputs["arn"]]
        assert logs["Action"] == ["logs:CreateLogStream", "logs:PutLogEvents"]
        assert logs["Resource"] == arns + [f"{a}:log-stream:*" for a in arns]
        assert not any(t == "*" for s in expected for t in s["Resource"])
    assert role_streams("login") == ["kernel"]
    assert "slurmctld" in role_streams("head") and "slurmctld" not in role_streams("compute")


def test_eks_collector_writes_through_pod_identity_and_the_nodes_do_not(eks):
    workspace, groups = _ours(eks)
    shipping = _shipping(eks)
    collector = _role_name(eks, "p5-eks-collector-role")
    assert sorted(shipping) == [collector]                  # the node role gets nothing
    # Metrics only: no log group, no logs: action.
    assert shipping[collector] == shipping_policy(workspace.outputs["arn"], [])["Statement"]
    assert [s["Action"] for s in shipping[collector]] == [["aps:RemoteWrite"]]
    trust = json.loads(eks.named("p5-eks-collector-role", ROLE).inputs["assumeRolePolicy"])["Statement"]
    assert [s["Principal"] for s in trust] == [{"Service": "pods.eks.amazonaws.com"}]
    association = eks.named("p5-eks-collector-association", ASSOCIATION).inputs
    assert (association["namespace"], association["serviceAccount"]) == (COLLECTOR_NAMESPACE, COLLECTOR_SERVICE_ACCOUNT)
    assert association["roleArn"] == eks.named("p5-eks-collector-role", ROLE).outputs["arn"]


def test_slurm_nodes_and_head_write_to_the_clusters_workspace(slurm):
    """The agents on the Slurm VMs (aicluster-monitoring) are told the workspace's remote-write URL:
    every compute launch template's node.env, and the head's published monitoring.env."""
    url = slurm.outputs["remote_write_url"]
    # The compute pools' templates (the head's and login's carry no user data: their instances do).
    templates = [t for t in slurm.of_type("aws:ec2/launchTemplate:LaunchTemplate") if "userData" in t.inputs]
    assert templates
    for template in templates:
        text = base64.b64decode(reveal(template.inputs["userData"])).decode()
        assert f"AICLUSTER_METRICS_WRITE_URL={url}\n" in text
    (env,) = [o for o in slurm.of_type("aws:s3/bucketObjectv2:BucketObjectv2")
              if reveal(o.inputs["key"]).endswith("aicluster/monitoring.env")]
    assert f"AICLUSTER_METRICS_WRITE_URL={url}\n" in reveal(env.inputs["content"])


TOPIC = "aws:sns/topic:Topic"
TOPIC_POLICY = "aws:sns/topicPolicy:TopicPolicy"
KEY = "aws:kms/key:Key"
ALERT_MANAGER = "aws:amp/alertManagerDefinition:AlertManagerDefinition"


@pytest.mark.parametrize("stack", ["aws-p5-slurm", "aws-p5-eks"])
def test_firing_alerts_reach_the_clusters_encrypted_topic(stack):
    """AMP's alert manager sends to the cluster's SNS topic; the topic is encrypted with the
    cluster's own key (protected, rotated), which AMP may use; only AMP, for this workspace, may
    publish."""
    plan = stack_plan(stack)
    workspace, _ = _ours(plan)
    (topic,) = plan.of_type(TOPIC)
    (key,) = [k for k in plan.of_type(KEY) if "alerts" in k.name]
    assert topic.inputs["kmsMasterKeyId"] == key.outputs["arn"]
    assert key.inputs["enableKeyRotation"] is True and key.protect and stateful_kind(key.type) == "encryption-key"
    key_statements = {s["Sid"]: s for s in json.loads(reveal(key.inputs["policy"]))["Statement"]}
    assert key_statements["AmpEncryptsAlerts"]["Principal"] == {"Service": "aps.amazonaws.com"}
    (policy,) = plan.of_type(TOPIC_POLICY)
    (statement,) = json.loads(reveal(policy.inputs["policy"]))["Statement"]
    assert statement["Principal"] == {"Service": "aps.amazonaws.com"}
    assert set(statement["Action"]) == {"sns:Publish", "sns:GetTopicAttributes"}
    assert statement["Resource"] == topic.outputs["arn"]
    assert statement["Condition"]["ArnEquals"]["aws:SourceArn"] == workspace.outputs["arn"]
    (definition,) = plan.of_type(ALERT_MANAGER)
    assert definition.inputs["workspaceId"] == workspace.id
    config = yaml.safe_load(yaml.safe_load(reveal(definition.inputs["definition"]))["alertmanager_config"])
    (receiver,) = config["receivers"]
    (sns,) = receiver["sns_configs"]
    assert sns["topic_arn"] == topic.outputs["arn"] and sns["sigv4"]["region"] == topic.outputs["arn"].split(":")[3]
    assert config["route"]["receiver"] == receiver["name"]
    assert plan.outputs["alerts_topic_arn"] == topic.outputs["arn"]


def test_the_alert_manager_definition_is_what_alertmanager_accepts(tmp_path):
    """The config inside AMP's definition passes Alertmanager's own check (Debian's amtool), and
    keeps to AMP's constraints: an SNS receiver with a sigv4 region, no api_url or http_config, a
    repeat interval within 5 days."""
    from aicluster.aws.observability import alert_manager_definition

    definition = yaml.safe_load(alert_manager_definition("arn:aws:sns:us-east-2:123456789012:aicluster-c1-alerts"))
    assert set(definition) == {"alertmanager_config"}
    path = tmp_path / "alertmanager.yml"
    path.write_text(definition["alertmanager_config"])
    done = subprocess.run([program("amtool"), "check-config", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    config = yaml.safe_load(definition["alertmanager_config"])
    text = json.dumps(config)
    assert "api_url" not in text and "http_config" not in text
    assert config["receivers"][0]["sns_configs"][0]["sigv4"] == {"region": "us-east-2"}
    assert config["route"]["repeat_interval"].endswith("h") and int(config["route"]["repeat_interval"][:-1]) <= 120
    path.write_text(definition["alertmanager_config"].replace("receiver: cluster-topic", "receiver: nobody"))
    assert subprocess.run([program("amtool"), "check-config", str(path)], capture_output=True, timeout=60).returncode != 0


def test_alert_emails_subscribe_to_the_topic():
    from tests.support import stack_spec
    from tests.support.stack_plans import plan_with_spec

    spec = stack_spec("aws-p5-slurm")
    spec["monitoring"] = {"alert_emails": ["oncall@example.com", "ml-infra@example.org"]}
    plan = plan_with_spec("aws-p5-slurm", spec)
    (topic,) = plan.of_type(TOPIC)
    subscriptions = plan.of_type("aws:sns/topicSubscription:TopicSubscription")
    assert sorted(s.inputs["endpoint"] for s in subscriptions) == ["ml-infra@example.org", "oncall@example.com"]
    assert {(s.inputs["protocol"], s.inputs["topic"]) for s in subscriptions} == {("email", topic.outputs["arn"])}
