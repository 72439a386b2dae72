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

- Rules: given the rendered alert rules (`rules_yaml`, aicluster.alert_rules), a rule groups
  namespace in the workspace, named after the cluster, so AMP evaluates them (EKS clusters: their
  collector remote-writes the series the rules read). Not stateful: it is the rules' text only.

The agents themselves (what runs on the nodes and remote-writes) are installed elsewhere; this
module makes the backends, identities and log groups they use.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Sequence

import pulumi
import pulumi_aws as aws

from ..design import ClusterContext
from ..telemetry_backend import COLLECTOR_NAMESPACE, COLLECTOR_SERVICE_ACCOUNT, LOG_RETENTION_DAYS

REMOTE_WRITE_PATH = "api/v1/remote_write"


def log_group_name(cluster: str, stream: str) -> str:
    return f"/aicluster/{cluster}/{stream}"


def remote_write_url(prometheus_endpoint: str) -> str:
    """AMP's prometheus_endpoint ends in a slash: .../workspaces/ws-<id>/"""
    return prometheus_endpoint.rstrip("/") + "/" + REMOTE_WRITE_PATH


def shipping_policy(workspace_arn: str, log_group_arns: Sequence[str]) -> dict:
    """Remote write to one workspace, and log events into the cluster's groups only. A log group's
    ARN (the provider strips the API's ":*") is what CreateLogStream acts on; PutLogEvents acts on
    the group's streams (IAM service authorization reference, Amazon CloudWatch Logs)."""
    groups = sorted(log_group_arns)
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "RemoteWriteMetrics", "Effect": "Allow", "Action": ["aps:RemoteWrite"], "Resource": [workspace_arn]},
        {"Sid": "ShipLogs", "Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
         "Resource": [*groups, *[f"{arn}:log-stream:*" for arn in groups]]},
    ]}


@dataclass(frozen=True)
class ObservabilityBackendArgs:
    """The metrics workspace and the log groups of a cluster.

    context: the cluster's name (the workspace alias, the log group names) and tags
        (`ClusterDesign.context`, or your own).
    log_streams: what the nodes ship, one log group each (`telemetry_backend.log_streams`).
    rules_yaml: the Prometheus rule groups AMP evaluates (`alert_rules.rules_yaml`). Default None:
        no rule groups namespace.
    """
    context: ClusterContext
    log_streams: Sequence[str]
    rules_yaml: str | None = None


class ObservabilityBackend(pulumi.ComponentResource):
    workspace_arn: pulumi.Output[str]
    workspace_id: pulumi.Output[str]
    remote_write_url: pulumi.Output[str]
    log_groups: dict[str, pulumi.Output[str]]         # stream -> log group name
    policy: pulumi.Output[str]                        # shipping_policy, as JSON

    def __init__(self, name: str, args: ObservabilityBackendArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:aws:ObservabilityBackend", name, None, opts)
        context = args.context
        child = pulumi.ResourceOptions(parent=self)
        workspace = aws.amp.Workspace(
            f"{name}-workspace", alias=context.name, tags=context.labels("metrics"),
            # Set on the resource itself (mocks and policies see only what is set here).
            opts=pulumi.ResourceOptions(parent=self, protect=True, retain_on_delete=True))
        groups = {stream: aws.cloudwatch.LogGroup(
            f"{name}-{stream}", name=log_group_name(context.name, stream), retention_in_days=LOG_RETENTION_DAYS,
            tags=context.labels("logs"), opts=child) for stream in args.log_streams}
        if args.rules_yaml:
            aws.amp.RuleGroupNamespace(f"{name}-rules", name=f"aicluster-{context.name}", workspace_id=workspace.id,
                                       data=args.rules_yaml, tags=context.labels("metrics"), opts=child)
        self.workspace_arn, self.workspace_id = workspace.arn, workspace.id
        self.remote_write_url = workspace.prometheus_endpoint.apply(remote_write_url)
        self.log_groups = {stream: g.name for stream, g in groups.items()}
        self.policy = pulumi.Output.all(workspace.arn, *[g.arn for g in groups.values()]).apply(
            lambda a: json.dumps(shipping_policy(a[0], a[1:]), sort_keys=True))
        self.register_outputs({"workspace_arn": workspace.arn, "remote_write_url": self.remote_write_url,
                               "log_groups": self.log_groups})


def grant_shipping(name: str, backend: ObservabilityBackend, role_name: pulumi.Input[str],
                   parent: pulumi.Resource | None = None) -> aws.iam.RolePolicy:
    """The role may remote-write to the workspace and ship into the cluster's log groups."""
    return aws.iam.RolePolicy(name, role=role_name, policy=backend.policy,
                              opts=pulumi.ResourceOptions(parent=parent or backend))


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
        from .pod_identity import pod_identity_trust     # EKS only: a Slurm cluster never loads it

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
            "log_groups": backend.log_groups}
