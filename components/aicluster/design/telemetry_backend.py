"""What every cloud's managed metrics and log backends share (aws/observability.py,
gcp/observability.py): the log streams the nodes ship, their retention, and the collector's
Kubernetes identity. Pure: no Pulumi import.
"""
from __future__ import annotations

# One retention for every log store aicluster makes: the CloudWatch Logs groups (the EKS
# control-plane group too) and the Cloud Logging bucket. Enough to look back over a month of runs;
# the metrics keep their own, longer history (AMP: 150 days by default; Cloud Monitoring: 24 months).
LOG_RETENTION_DAYS = 30

# What the nodes ship, by scheduler (slurm_monitoring: each VM's log agent). "kernel" carries the
# GPU XID lines. Kubernetes nodes ship no stream of aicluster's: a node's findings (XIDs included)
# are the health agent's container log, which GKE's own logging collects (the sink routes the
# cluster's container logs into its bucket); on EKS nothing ships container logs yet.
SLURM_LOG_STREAMS = ("slurmctld", "slurmd", "health-check", "reconcile", "kernel")
KUBERNETES_LOG_STREAMS: tuple[str, ...] = ()

# The collector on Kubernetes: its namespace and service account (EKS Pod Identity association).
COLLECTOR_NAMESPACE = "monitoring"
COLLECTOR_SERVICE_ACCOUNT = "aicluster-metrics"


def log_streams(kubernetes: bool) -> tuple[str, ...]:
    return KUBERNETES_LOG_STREAMS if kubernetes else SLURM_LOG_STREAMS


def log_group_name(cluster: str, stream: str) -> str:
    """AWS: the CloudWatch Logs group of one stream (aws/observability.py makes it, the nodes'
    CloudWatch agent writes to it)."""
    return f"/aicluster/{cluster}/{stream}"


def log_id(cluster: str, stream: str) -> str:
    """GCP: the log a node writes one stream to (the Ops Agent's log name, which the sink of
    gcp/observability.py routes): one per cluster and stream, so clusters sharing a project never mix."""
    return f"aicluster-{cluster}-{stream}"


def amp_remote_write(url: str, region: str) -> dict:
    """A Prometheus remote_write entry for an Amazon Managed Service for Prometheus workspace:
    signed with SigV4 as whatever AWS identity the sender has (instance role or Pod Identity), and
    AMP's documented queue settings for a busy sender. The EKS collector and the Slurm nodes' agents
    both use it."""
    return {"url": url, "sigv4": {"region": region},
            "queue_config": {"max_samples_per_send": 1000, "max_shards": 200, "capacity": 2500}}
