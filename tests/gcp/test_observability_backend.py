"""aicluster:gcp:ObservabilityBackend under mocks, on the Slurm and GKE example stacks: Managed
Service for Prometheus (GKE's managed collection on; the node accounts may write metrics and logs,
nothing more), the Monitoring and Logging APIs on, and the cluster's logs routed into its own log
bucket with the one retention."""
from __future__ import annotations

import pytest

from aicluster.gcp.observability import GKE_RESOURCE_TYPES, log_id, sink_filter
from aicluster.offline.capture import reveal
from aicluster.design.stateful import stateful_kind
from aicluster.design.telemetry_backend import KUBERNETES_LOG_STREAMS, LOG_RETENTION_DAYS, SLURM_LOG_STREAMS
from tests.support.stack_plans import stack_plan, stack_result

BUCKET = "gcp:logging/projectBucketConfig:ProjectBucketConfig"
SINK = "gcp:logging/projectSink:ProjectSink"
SERVICE = "gcp:projects/service:Service"
MEMBER = "gcp:projects/iAMMember:IAMMember"
ACCOUNT = "gcp:serviceaccount/account:Account"
GKE = "gcp:container/cluster:Cluster"
WRITERS = {"roles/logging.logWriter", "roles/monitoring.metricWriter"}


@pytest.fixture(scope="module")
def slurm():
    return stack_plan("gcp-a3ultra-slurm")


@pytest.fixture(scope="module")
def gke():
    return stack_plan("gcp-a3ultra-gke")


def _telemetry_roles(plan) -> dict[str, set[str]]:
    """Member -> the monitoring and logging roles it holds on the project."""
    out: dict[str, set[str]] = {}
    for m in plan.of_type(MEMBER):
        role = m.inputs["role"]
        if role.startswith(("roles/monitoring.", "roles/logging.")):
            out.setdefault(reveal(m.inputs["member"]), set()).add(role)
    return out


def test_gke_turns_on_managed_collection(gke):
    (cluster,) = gke.of_type(GKE)
    assert cluster.inputs["monitoringConfig"]["managedPrometheus"]["enabled"] is True


def test_slurm_compute_and_head_accounts_hold_the_writer_roles_only(slurm):
    roles = _telemetry_roles(slurm)
    accounts = {a.inputs["accountId"]: a.outputs["member"] for a in slurm.of_type(ACCOUNT)}
    compute, head = accounts["a3ultra-train-compute"], accounts["a3ultra-train-head"]
    assert roles[compute] == WRITERS and roles[head] == WRITERS
    assert all(granted <= WRITERS for granted in roles.values())


@pytest.mark.parametrize("stack", ["gcp-a3ultra-slurm", "gcp-a3ultra-gke"])
def test_monitoring_and_logging_apis_stay_on(stack):
    plan = stack_plan(stack)
    services = {s.inputs["service"]: s.inputs for s in plan.of_type(SERVICE)}
    for api in ("monitoring.googleapis.com", "logging.googleapis.com"):
        assert services[api]["disableOnDestroy"] is False


@pytest.mark.parametrize("stack, streams", [("gcp-a3ultra-slurm", SLURM_LOG_STREAMS),
                                            ("gcp-a3ultra-gke", KUBERNETES_LOG_STREAMS)])
def test_logs_go_to_the_clusters_bucket_with_the_one_retention(stack, streams):
    plan = stack_plan(stack)
    (bucket,), (sink,) = plan.of_type(BUCKET), plan.of_type(SINK)
    cluster = plan.outputs["log_bucket"].rsplit("/", 1)[1].removeprefix("aicluster-")
    assert bucket.inputs["retentionDays"] == LOG_RETENTION_DAYS and bucket.inputs["locked"] is False
    assert bucket.inputs["location"] == plan.outputs["log_bucket"].split("/")[3] != "global"
    assert stateful_kind(bucket.type, bucket.inputs) is None    # retention-bounded logs, as CloudWatch's groups
    assert sink.inputs["destination"] == f"logging.googleapis.com/{bucket.id}"
    for stream in streams:
        assert f'log_id("{log_id(cluster, stream)}")' in sink.inputs["filter"]
    assert plan.outputs["log_names"] == {s: log_id(cluster, s) for s in streams}
    assert plan.outputs["metrics_workspace"] == f"projects/{bucket.inputs['project']}"


def test_the_gke_sink_takes_the_clusters_kubernetes_logs_and_no_other_clusters(gke):
    (cluster,), (sink,) = gke.of_type(GKE), gke.of_type(SINK)
    assert f'resource.labels.cluster_name="{cluster.inputs["name"]}"' in sink.inputs["filter"]
    assert all(f'"{t}"' in sink.inputs["filter"] for t in GKE_RESOURCE_TYPES)
    assert sink_filter("a", ["kernel"]) == 'log_id("aicluster-a-kernel")'      # Slurm: the nodes' logs only
    assert sink.inputs["filter"].startswith("(resource.type=")                 # GKE: no node stream of ours
    with pytest.raises(ValueError):
        sink_filter("a", [])                                                     # a sink that routes nothing


POLICY = "gcp:monitoring/alertPolicy:AlertPolicy"


@pytest.mark.parametrize("stack", ["gcp-a3ultra-slurm", "gcp-a3ultra-gke"])
def test_cloud_monitoring_evaluates_every_alert_rule(stack):
    """One PromQL alerting policy per alerting rule, on both schedulers: the rule's expression,
    its `for:` as the duration, its severity, the rule group and name, its threshold's origin in the
    documentation; metric validation off (no series exists when the stack is created)."""
    from aicluster.render.alert_rules import rule_groups
    from aicluster.catalog.observability import scrape
    from aicluster.design.observability import monitoring_design

    result = stack_result(stack)
    plan = result.plan
    rules = [(g["name"], r) for g in rule_groups(monitoring_design(result.design))["groups"] for r in g["rules"]]
    policies = [p.inputs for p in plan.of_type(POLICY)]
    assert len(policies) == len(rules) > 0
    by_query = {p["conditions"][0]["conditionPrometheusQueryLanguage"]["query"]: p for p in policies}
    for group, rule in rules:
        policy = by_query[rule["expr"]]
        promql = policy["conditions"][0]["conditionPrometheusQueryLanguage"]
        assert (promql["ruleGroup"], promql["alertRule"]) == (group, rule["alert"])
        minutes = int(rule["for"].rstrip("m")) if rule["for"].endswith("m") else None
        if minutes is not None:
            assert promql["duration"] == f"{minutes * 60}s"
        assert promql["evaluationInterval"] == f"{scrape().evaluation_interval_s}s"
        assert promql["disableMetricValidation"] is True
        assert policy["severity"] == rule["labels"]["severity"].upper()
        assert rule["annotations"]["threshold_origin"] in policy["documentation"]["content"]


def test_policy_durations_are_converted_exactly():
    from aicluster.gcp.observability import _seconds

    assert [_seconds(d) for d in ("30s", "5m", "2h")] == [30, 300, 7200]
    with pytest.raises(ValueError):
        _seconds("1h30m")


def test_alert_emails_are_a_channel_on_every_policy():
    from tests.support import stack_spec
    from tests.support.stack_plans import plan_with_spec

    spec = stack_spec("gcp-a3ultra-slurm")
    spec["monitoring"] = {"alert_emails": ["oncall@example.com"]}
    plan = plan_with_spec("gcp-a3ultra-slurm", spec)
    (channel,) = plan.of_type("gcp:monitoring/notificationChannel:NotificationChannel")
    assert channel.inputs["type"] == "email" and channel.inputs["labels"] == {"email_address": "oncall@example.com"}
    policies = plan.of_type(POLICY)
    assert policies and all(p.inputs["notificationChannels"] == [channel.outputs["name"]] for p in policies)
    assert not [p for p in stack_plan("gcp-a3ultra-slurm").of_type(POLICY) if p.inputs.get("notificationChannels")]
