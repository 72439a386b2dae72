"""aicluster:aws:ObservabilityBackend - where the cluster's metrics and logs live on AWS: managed
services only, so there is no self-run Prometheus or log store to lose with a node.

- Metrics: an Amazon Managed Service for Prometheus (AMP) workspace, aliased after the cluster.
  It holds the metrics history, so it is stateful (stateful.py, kind "metrics"): `protect` and
  `retain_on_delete`, and its inputs (alias, tags) never change with routine spec edits. AMP
  encrypts workspace data at rest with an AWS owned key by default (AMP user guide, "Encryption at
  rest"); a customer managed key is optional and is not used here: it adds a KMS key to keep alive
  (a stateful resource of its own, and deleting it makes the history unreadable) and buys no
  protection this design needs. Retention is AMP's (150 days by default).
- Logs: one CloudWatch Logs group per stream the nodes ship (`telemetry_backend.log_streams`),
  named /aicluster/<cluster>/<stream>, with one retention for every group aicluster makes
  (telemetry_backend.LOG_RETENTION_DAYS; the EKS control-plane group uses the same constant).
  CloudWatch Logs always encrypts log data at rest (CloudWatch Logs user guide, "Encrypt log data in CloudWatch
  Logs using AWS KMS": a KMS key is optional); none is used, for the reason above.
- Least privilege (`shipping_policy`): whoever ships gets `aps:RemoteWrite` on exactly the workspace
  ARN, and `logs:CreateLogStream`/`logs:PutLogEvents` on exactly the cluster's log groups and their
  streams; no `*` resource, no read or delete. On Slurm the compute and head roles get it
  (`grant_shipping`); on EKS it goes to an IAM role that only EKS Pod Identity assumes, associated
  with the collector's one service account (`CollectorIdentity`), never to the nodes' role.

- Rules: given the rendered alert rules (`rules_yaml`, aicluster.render.alert_rules), a rule groups
  namespace in the workspace, named after the cluster, so AMP evaluates them on the series the
  agents remote-write (EKS: the in-cluster collector; Slurm: each VM's agent, slurm_monitoring).
  Not stateful: it is the rules' text only.
- Alert delivery: AMP's alert manager sends every firing alert to the cluster's SNS topic (the
  only receiver AMP supports), grouped per alert and node; subscribe e-mail, a chat hook or a pager
  to the topic (output `alerts_topic_arn`, docs/operating.md). The topic is encrypted with a key of
  the cluster's own: AMP publishes to an encrypted topic only through a customer managed key whose
  policy lets it (an AWS managed key's policy cannot be changed). Only AMP, for this workspace
  and account, may publish (topic policy with aws:SourceArn and aws:SourceAccount).

The agents themselves (what runs on the nodes and remote-writes) are installed elsewhere
(k8s_metrics.py on EKS, slurm_monitoring.py on Slurm VMs); this
module makes the backends, identities and log groups they use.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Sequence

import pulumi
import pulumi_aws as aws
import yaml

from aicluster.aws.budget import budgets_key_statement, budgets_topic_statement
from aicluster.catalog import dump_yaml
from aicluster.design.model import ClusterContext
from aicluster.design.telemetry_backend import COLLECTOR_NAMESPACE, COLLECTOR_SERVICE_ACCOUNT, LOG_RETENTION_DAYS, log_group_name

REMOTE_WRITE_PATH = "api/v1/remote_write"
# AMP keeps repeat_interval at most 5 days; a firing alert is sent again every 4 hours.
ALERT_REPEAT = "4h"


def _account(arn: str) -> str:
    return arn.split(":")[4]


def alert_manager_definition(topic_arn: str) -> str:
    """AMP's alert manager definition: every alert to the topic (an SNS receiver must name its
    region in sigv4; api_url and http_config are not allowed), grouped per alert and node, with a
    short subject (SNS subjects hold at most 100 ASCII characters; AMP's default can be longer)."""
    region = topic_arn.split(":")[3]
    config = {
        "route": {"receiver": "cluster-topic", "group_by": ["alertname", "cluster", "pool", "node"],
                  "group_wait": "30s", "group_interval": "5m", "repeat_interval": ALERT_REPEAT},
        "receivers": [{"name": "cluster-topic", "sns_configs": [{
            "topic_arn": topic_arn, "sigv4": {"region": region},
            "subject": '[{{ .Status | toUpper }}] {{ .CommonLabels.alertname }} {{ .CommonLabels.cluster }}'}]}],
    }
    # the inner document through libyaml; the outer one is one long quoted scalar, which libyaml folds differently
    return yaml.safe_dump({"alertmanager_config": dump_yaml(config, sort_keys=False)}, sort_keys=False)


def alert_topic_policy(topic_arn: str, workspace_arn: str, budgets: bool = False) -> dict:
    """Only AMP, for this workspace in this account, may publish to the topic; and, with `budgets`
    (spec cost), AWS Budgets for this account's budgets (aws/budget.py)."""
    statements = [{
        "Sid": "AmpPublishesAlerts", "Effect": "Allow", "Principal": {"Service": "aps.amazonaws.com"},
        "Action": ["sns:Publish", "sns:GetTopicAttributes"], "Resource": topic_arn,
        "Condition": {"ArnEquals": {"aws:SourceArn": workspace_arn},
                      "StringEquals": {"aws:SourceAccount": _account(workspace_arn)}}}]
    if budgets:
        statements.append(budgets_topic_statement(topic_arn))
    return {"Version": "2012-10-17", "Statement": statements}


def alert_key_policy(workspace_arn: str) -> dict:
    """The topic's key: administered by the account (IAM decides who), used by AMP and AWS Budgets
    (to publish) and SNS (to deliver) for this account only. The Budgets statement is there with or
    without a budget: the key is stateful and protected, and adding or removing `cost` in the spec
    must not touch it (tests/aws/test_budget.py); who may publish is the topic policy's to decide."""
    account = _account(workspace_arn)
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "AccountAdministersTheKey", "Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{account}:root"},
         "Action": "kms:*", "Resource": "*"},
        {"Sid": "AmpEncryptsAlerts", "Effect": "Allow", "Principal": {"Service": "aps.amazonaws.com"},
         "Action": ["kms:GenerateDataKey*", "kms:Decrypt"], "Resource": "*",
         "Condition": {"StringEquals": {"aws:SourceAccount": account}}},
        budgets_key_statement(workspace_arn),
    ]}


def remote_write_url(prometheus_endpoint: str) -> str:
    """AMP's prometheus_endpoint ends in a slash: .../workspaces/ws-<id>/"""
    return prometheus_endpoint.rstrip("/") + "/" + REMOTE_WRITE_PATH


def shipping_policy(workspace_arn: str, log_group_arns: Sequence[str]) -> dict:
    """Remote write to one workspace, and log events into the cluster's groups only. A log group's
    ARN (the provider strips the API's ":*") is what CreateLogStream acts on; PutLogEvents acts on
    the group's streams (IAM service authorization reference, Amazon CloudWatch Logs). Enough for
    the CloudWatch agent: it calls DescribeLogGroups and PutRetentionPolicy only for a configured
    retention (none: the groups carry aicluster's) and CreateLogGroup only for a missing group
    (github.com/aws/amazon-cloudwatch-agent v1.300071.0 plugins/outputs/cloudwatchlogs/internal/
    pusher/target.go)."""
    groups = sorted(log_group_arns)
    statements = [{"Sid": "RemoteWriteMetrics", "Effect": "Allow", "Action": ["aps:RemoteWrite"],
                   "Resource": [workspace_arn]}]
    if groups:      # none on EKS: its collector ships metrics only
        statements.append({"Sid": "ShipLogs", "Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
                           "Resource": [*groups, *[f"{arn}:log-stream:*" for arn in groups]]})
    return {"Version": "2012-10-17", "Statement": statements}


@dataclass(frozen=True)
class ObservabilityBackendArgs:
    """The metrics workspace and the log groups of a cluster.

    context: the cluster's name (the workspace alias, the log group names) and tags
        (`ClusterDesign.context`, or your own).
    log_streams: what the nodes ship, one log group each (`telemetry_backend.log_streams`).
    rules_yaml: the Prometheus rule groups AMP evaluates (`alert_rules.rules_yaml`). Default None:
        no rule groups namespace.
    alert_emails: addresses subscribed to the alerts topic by e-mail (`ClusterDesign.alert_emails`).
    on_delete: monitoring.on_delete (`ClusterDesign.metrics_on_delete`), retain or delete: whether
        `aicluster destroy` keeps the workspace and the alerts key (both protected either way).
    budget_alerts: AWS Budgets publishes to the alerts topic too (spec cost, aws/budget.py): the topic
        policy lets it (`ClusterDesign.budget is not None`; the key lets it either way).
    """
    context: ClusterContext
    log_streams: Sequence[str]
    rules_yaml: str | None = None
    alert_emails: Sequence[str] = ()
    on_delete: str = "retain"
    budget_alerts: bool = False


class ObservabilityBackend(pulumi.ComponentResource):
    workspace_arn: pulumi.Output[str]
    workspace_id: pulumi.Output[str]
    remote_write_url: pulumi.Output[str]
    log_groups: dict[str, pulumi.Output[str]]         # stream -> log group name
    policy: pulumi.Output[str]                        # shipping_policy, as JSON
    alerts_topic_arn: pulumi.Output[str]              # where AMP sends firing alerts
    alerts_topic_policy: pulumi.Resource              # who may publish: what a budget waits for

    def __init__(self, name: str, args: ObservabilityBackendArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:aws:ObservabilityBackend", name, None, opts)
        context = args.context
        child = pulumi.ResourceOptions(parent=self)
        # Set on the resource itself (mocks and policies see only what is set here).
        keep = pulumi.ResourceOptions(parent=self, protect=True, retain_on_delete=args.on_delete == "retain")
        workspace = aws.amp.Workspace(
            f"{name}-workspace", alias=context.name, tags=context.labels("metrics"), opts=keep)
        groups = {stream: aws.cloudwatch.LogGroup(
            f"{name}-{stream}", name=log_group_name(context.name, stream), retention_in_days=LOG_RETENTION_DAYS,
            tags=context.labels("logs"), opts=child) for stream in args.log_streams}
        if args.rules_yaml:
            aws.amp.RuleGroupNamespace(f"{name}-rules", name=f"aicluster-{context.name}", workspace_id=workspace.id,
                                       data=args.rules_yaml, tags=context.labels("metrics"), opts=child)
        # Stateful (encryption-key): protected and kept, as every key aicluster makes.
        key = aws.kms.Key(
            f"{name}-alerts-key", description=f"aicluster {context.name}: encrypts the alerts topic",
            enable_key_rotation=True, deletion_window_in_days=30,
            policy=workspace.arn.apply(lambda arn: json.dumps(alert_key_policy(arn), sort_keys=True)),
            tags=context.labels("alerts"), opts=keep)
        topic = aws.sns.Topic(f"{name}-alerts", name=f"aicluster-{context.name}-alerts", kms_master_key_id=key.arn,
                              tags=context.labels("alerts"), opts=child)
        topic_policy = aws.sns.TopicPolicy(
            f"{name}-alerts-policy", arn=topic.arn,
            policy=pulumi.Output.all(topic.arn, workspace.arn).apply(
                lambda a: json.dumps(alert_topic_policy(a[0], a[1], args.budget_alerts), sort_keys=True)), opts=child)
        # E-mail subscribers (spec monitoring.alert_emails): SNS mails each a confirmation link, and
        # delivers nothing to an address until it is followed (SNS e-mail subscriptions).
        for index, email in enumerate(args.alert_emails):
            aws.sns.TopicSubscription(f"{name}-alerts-email-{index}", topic=topic.arn, protocol="email",
                                      endpoint=email, opts=child)
        aws.amp.AlertManagerDefinition(f"{name}-alertmanager", workspace_id=workspace.id,
                                       definition=topic.arn.apply(alert_manager_definition),
                                       opts=pulumi.ResourceOptions(parent=self, depends_on=[topic_policy]))
        self.workspace_arn, self.workspace_id = workspace.arn, workspace.id
        self.remote_write_url = workspace.prometheus_endpoint.apply(remote_write_url)
        self.log_groups = {stream: g.name for stream, g in groups.items()}
        self.alerts_topic_arn, self.alerts_topic_policy = topic.arn, topic_policy
        self._workspace_arn, self._group_arns = workspace.arn, {stream: g.arn for stream, g in groups.items()}
        self.policy = self.policy_for(list(groups))
        self.register_outputs({"workspace_arn": workspace.arn, "remote_write_url": self.remote_write_url,
                               "log_groups": self.log_groups, "alerts_topic_arn": topic.arn})

    def policy_for(self, streams: Sequence[str]) -> pulumi.Output[str]:
        """shipping_policy (JSON) on the workspace and the groups of the given streams only."""
        return pulumi.Output.all(self._workspace_arn, *[self._group_arns[s] for s in streams]).apply(
            lambda a: json.dumps(shipping_policy(a[0], a[1:]), sort_keys=True))


def grant_shipping(name: str, backend: ObservabilityBackend, role_name: pulumi.Input[str],
                   parent: pulumi.Resource | None = None, streams: Sequence[str] | None = None) -> aws.iam.RolePolicy:
    """The role may remote-write to the workspace and ship into the cluster's log groups: those of
    `streams` only (what the role's nodes ship, slurm_monitoring.log_streams), every group if None."""
    policy = backend.policy if streams is None else backend.policy_for(streams)
    return aws.iam.RolePolicy(name, role=role_name, policy=policy, opts=pulumi.ResourceOptions(parent=parent or backend))


@dataclass(frozen=True)
class CollectorIdentityArgs:
    """The EKS collector's identity: a role only EKS Pod Identity assumes, with `shipping_policy`,
    given to the one service account COLLECTOR_NAMESPACE/COLLECTOR_SERVICE_ACCOUNT.

    context: the cluster's name and tags.
    backend: the cluster's `ObservabilityBackend`.
    cluster_name: the EKS cluster (`EksCluster.cluster_name`).
    depends_on: what the association waits for (`EksCluster.before_nodes`: the Pod Identity agent).
    """
    context: ClusterContext
    backend: ObservabilityBackend
    cluster_name: pulumi.Input[str]
    depends_on: Sequence[pulumi.Resource] = ()


class CollectorIdentity(pulumi.ComponentResource):
    role_arn: pulumi.Output[str]

    def __init__(self, name: str, args: CollectorIdentityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:aws:CollectorIdentity", name, None, opts)
        from aicluster.aws.pod_identity import pod_identity_trust     # EKS only: a Slurm cluster never loads it

        context = args.context
        account = f"{COLLECTOR_NAMESPACE}/{COLLECTOR_SERVICE_ACCOUNT}"
        tags = {**context.labels("pod-identity"), "aicluster-service-account": account}
        role = aws.iam.Role(f"{name}-role", description=f"aicluster {context.name}: metrics and logs collector ({account})",
                            assume_role_policy=pod_identity_trust(), tags=tags,
                            opts=pulumi.ResourceOptions(parent=self))
        policy = grant_shipping(f"{name}-ship", args.backend, role.id, parent=self)
        aws.eks.PodIdentityAssociation(
            f"{name}-association", cluster_name=args.cluster_name, namespace=COLLECTOR_NAMESPACE,
            service_account=COLLECTOR_SERVICE_ACCOUNT, role_arn=role.arn, tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[policy, *args.depends_on]))
        self.role_arn = role.arn
        self.register_outputs({"role_arn": role.arn})


def observability_outputs(backend: ObservabilityBackend) -> dict[str, pulumi.Output]:
    """What the agents and the plan need: where to remote-write, which groups to ship into."""
    return {"metrics_workspace": backend.workspace_arn, "remote_write_url": backend.remote_write_url,
            "log_groups": backend.log_groups, "alerts_topic_arn": backend.alerts_topic_arn}
