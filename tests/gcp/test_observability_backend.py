"""aicluster:gcp:ObservabilityBackend under mocks, on the Slurm and GKE example stacks: Managed
Service for Prometheus (GKE's managed collection on; the node accounts may write metrics and logs,
nothing more), the Monitoring and Logging APIs on, and the cluster's logs routed into its own log
bucket with the one retention."""
from __future__ import annotations

import pytest

from aicluster.gcp.observability import GKE_RESOURCE_TYPES, log_id, sink_filter
from aicluster.offline.capture import reveal
from aicluster.stateful import stateful_kind
from aicluster.telemetry_backend import KUBERNETES_LOG_STREAMS, LOG_RETENTION_DAYS, SLURM_LOG_STREAMS
from tests.support.stack_plans import stack_plan

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
