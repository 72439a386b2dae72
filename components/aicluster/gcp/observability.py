"""aicluster:gcp:ObservabilityBackend - where the cluster's metrics and logs live on Google Cloud:
managed services only, so there is no self-run Prometheus or log store to lose with a node.

- Metrics: Google Cloud Managed Service for Prometheus stores them in Cloud Monitoring, in the
  project itself: there is no workspace to create (nothing stateful here to protect). On GKE the
  cluster turns on managed collection (gcp/gke.py, monitoring_config.managed_prometheus); on Slurm
  VMs the Ops Agent writes as the node's service account, which NodeIdentity (gcp/identity.py)
  grants `roles/monitoring.metricWriter` and `roles/logging.logWriter`. These are project-level
  roles: Cloud Monitoring and Cloud Logging have no per-metric or per-log resource to grant a
  writer on, so the project is the narrowest scope Google Cloud offers for them. They are writer
  roles only (no read, no configuration).
- The Cloud Monitoring and Cloud Logging APIs are enabled (and left on when the stack goes, as the
  image streaming API in gcp/gke.py): a fresh project can take the bucket and the agents' writes.
- Logs: a log bucket of the cluster's own, in its region, with one retention for every log store
  aicluster makes (telemetry_backend.LOG_RETENTION_DAYS), and a sink that routes the cluster's logs
  into it: the nodes' streams (`log_ids`: slurmctld, slurmd, health-check, reconcile, kernel on
  Slurm; kernel on GKE) and, on GKE, everything the cluster's containers, pods and nodes log. A
  bucket receives nothing without a sink. The sink's destination is a bucket in the same project,
  so its writer identity needs no grant (Cloud Logging, "Route logs to supported destinations").
  The project's _Default sink still keeps its own copy for _Default's retention (30 days): no
  exclusion is added, as that sink belongs to the project, not to this cluster. Cloud Logging
  encrypts every bucket at rest; a customer-managed key is optional and not used (it is a
  project-wide Cloud Logging setting, and a key to keep alive).

- Alerts: Cloud Monitoring evaluates the cluster's alert rules (aicluster.render.alert_rules, the same
  groups `plan --out` writes and AMP evaluates on AWS) as PromQL alerting policies, one per rule,
  over what Managed Service for Prometheus holds, on both schedulers: Slurm VMs have no in-cluster
  rule evaluator, and on GKE it spares a self-run Alertmanager. An open incident shows in Cloud
  Monitoring and is e-mailed to the spec's `monitoring.alert_emails` (one e-mail notification
  channel each, on every policy); add other channels to the policies to be paged elsewhere. Metric
  validation is off: at `pulumi up` no node has written a series yet, and Cloud Monitoring would
  refuse a policy on a metric it has not seen.

The agents themselves are installed elsewhere; this module makes the backends they write to.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

import pulumi
import pulumi_gcp as gcp

from aicluster.design.model import ClusterContext
from aicluster.design.telemetry_backend import LOG_RETENTION_DAYS, log_id
from aicluster.gcp.common import project, short_name

SERVICES = ("monitoring.googleapis.com", "logging.googleapis.com")
# What GKE logs under a cluster's name (Cloud Logging monitored resource types).
GKE_RESOURCE_TYPES = ("k8s_container", "k8s_pod", "k8s_node", "k8s_cluster")


def bucket_id(cluster: str) -> str:
    """Log bucket ids: up to 100 letters, digits, hyphens, underscores and periods."""
    return short_name(f"aicluster-{cluster}", 100)


def sink_filter(cluster: str, streams: Sequence[str], gke_cluster: str | None = None) -> str:
    """The Logging query language filter of the cluster's logs."""
    logs = [f'log_id("{log_id(cluster, s)}")' for s in streams]
    if gke_cluster:
        kinds = " OR ".join(f'"{t}"' for t in GKE_RESOURCE_TYPES)
        logs.append(f'(resource.type=({kinds}) AND resource.labels.cluster_name="{gke_cluster}")')
    if not logs:
        raise ValueError("a sink needs a stream or a GKE cluster to route")
    return " OR ".join(logs)


_SEVERITY = {"critical": "CRITICAL", "warning": "WARNING"}
_DURATION = re.compile(r"^(\d+)([smh])$")


def _seconds(duration: str) -> int:
    """A Prometheus `for:` duration of one unit ("5m") in seconds."""
    match = _DURATION.match(duration)
    if not match:
        raise ValueError(f"not a duration of one unit: {duration!r}")
    return int(match[1]) * {"s": 1, "m": 60, "h": 3600}[match[2]]


def alert_policies(cluster: str, rule_groups: dict, evaluation_interval_s: int) -> dict[str, dict[str, Any]]:
    """resource-name key -> AlertPolicy arguments, one per alerting rule: its PromQL as the
    condition, its `for:` as the duration, its severity, and its threshold's origin as the
    documentation. The key is the group and the rule's place in it (group names carry the cluster)."""
    out = {}
    for group in rule_groups.get("groups", []):
        short = group["name"].removeprefix(f"aicluster-{cluster}-")
        for index, rule in enumerate(r for r in group["rules"] if "alert" in r):
            notes = rule["annotations"]
            out[f"{short}-{index}"] = {
                "display_name": f"aicluster {cluster}: {rule['alert']}",
                "combiner": "OR",
                "severity": _SEVERITY[rule["labels"]["severity"]],
                "user_labels": {"aicluster-cluster": cluster, "aicluster-rule-group": short},
                "documentation": {"mime_type": "text/markdown", "content": (
                    f"**{rule['alert']}** (aicluster, cluster {cluster}): threshold {notes['threshold']}.\n\n"
                    f"Where the threshold comes from: {notes['threshold_origin']}.\n\nSee docs/operating.md.")},
                "conditions": [{"display_name": rule["alert"], "condition_prometheus_query_language": {
                    "query": rule["expr"], "duration": f"{_seconds(rule['for'])}s",
                    "evaluation_interval": f"{evaluation_interval_s}s", "rule_group": group["name"],
                    "alert_rule": rule["alert"], "labels": dict(rule["labels"]),
                    "disable_metric_validation": True}}],
            }
    return out


def prometheus_query_url(project_id: str) -> str:
    """Managed Service for Prometheus's Prometheus HTTP API (what Grafana's data source names)."""
    return f"https://monitoring.googleapis.com/v1/projects/{project_id}/location/global/prometheus"


@dataclass(frozen=True)
class ObservabilityBackendArgs:
    """The cluster's log bucket and sink, and the APIs its agents write through.

    context: the cluster's name (bucket, sink and log names), region (the bucket's location) and
        labels (`ClusterDesign.context`, or your own).
    log_streams: what the nodes ship, one log each (`telemetry_backend.log_streams`).
    gke_cluster: the GKE cluster's name, whose container, pod and node logs the sink routes too
        (`ClusterDesign.kubernetes.gke.cluster_name`); None on Slurm.
    alert_rules: the Prometheus rule groups Cloud Monitoring evaluates (`alert_rules.rule_groups`);
        None makes no alerting policy.
    evaluation_interval_s: how often each policy evaluates its query (the catalog's rule interval).
    alert_emails: addresses every policy notifies, one e-mail notification channel each
        (`ClusterDesign.alert_emails`).
    """
    context: ClusterContext
    log_streams: Sequence[str]
    gke_cluster: str | None = None
    alert_rules: dict | None = None
    evaluation_interval_s: int = 30
    alert_emails: Sequence[str] = ()


class ObservabilityBackend(pulumi.ComponentResource):
    log_bucket: pulumi.Output[str]            # projects/<p>/locations/<region>/buckets/<id>
    log_ids: dict[str, str]                   # stream -> log id
    metrics_project: str
    query_url: str
    services: list[pulumi.Resource]           # what writers and GKE's managed collection wait for
    alert_policies: list[pulumi.Resource]
    alert_channels: list[pulumi.Output[str]]  # the e-mail channels' names: a budget notifies them too

    def __init__(self, name: str, args: ObservabilityBackendArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:gcp:ObservabilityBackend", name, None, opts)
        context = args.context
        project_id = project()
        child = pulumi.ResourceOptions(parent=self)
        self.services = [gcp.projects.Service(
            f"{name}-{service.split('.')[0]}", project=project_id, service=service, disable_on_destroy=False,
            disable_dependent_services=False, opts=child) for service in SERVICES]
        bucket = gcp.logging.ProjectBucketConfig(
            f"{name}-logs", project=project_id, location=context.region, bucket_id=bucket_id(context.name),
            retention_days=LOG_RETENTION_DAYS, locked=False,
            description=f"aicluster {context.name}: the cluster's logs",
            opts=pulumi.ResourceOptions(parent=self, depends_on=self.services))
        gcp.logging.ProjectSink(
            f"{name}-sink", project=project_id, name=short_name(f"aicluster-{context.name}-logs", 100),
            description=f"aicluster {context.name}: the cluster's logs into its own bucket",
            destination=bucket.id.apply(lambda b: f"logging.googleapis.com/{b}"),
            filter=sink_filter(context.name, args.log_streams, args.gke_cluster),
            unique_writer_identity=True, opts=child)
        channels = [gcp.monitoring.NotificationChannel(
            f"{name}-alerts-email-{index}", project=project_id, type="email", labels={"email_address": email},
            display_name=f"aicluster {context.name}: {email}",
            opts=pulumi.ResourceOptions(parent=self, depends_on=self.services))
            for index, email in enumerate(args.alert_emails)]
        self.alert_policies = [
            gcp.monitoring.AlertPolicy(f"{name}-alert-{key}", project=project_id, **policy,
                                       notification_channels=[c.name for c in channels],
                                       opts=pulumi.ResourceOptions(parent=self, depends_on=self.services))
            for key, policy in alert_policies(context.name, args.alert_rules or {}, args.evaluation_interval_s).items()]
        self.alert_channels = [c.name for c in channels]
        self.log_bucket = bucket.id
        self.log_ids = {stream: log_id(context.name, stream) for stream in args.log_streams}
        self.metrics_project = project_id
        self.query_url = prometheus_query_url(project_id)
        self.register_outputs({"log_bucket": bucket.id, "log_ids": self.log_ids})


def observability_outputs(backend: ObservabilityBackend) -> dict[str, pulumi.Output | str | dict]:
    """What the agents and the plan need: where metrics are queried, where logs land."""
    return {"metrics_workspace": f"projects/{backend.metrics_project}", "prometheus_query_url": backend.query_url,
            "log_bucket": backend.log_bucket, "log_names": backend.log_ids}
