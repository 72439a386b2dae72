"""What every cloud's managed metrics and log backends share (aws/observability.py,
gcp/observability.py): the log streams the nodes ship, their retention, and the collector's
Kubernetes identity. Pure: no Pulumi import.
"""
from __future__ import annotations

# One retention for every log store aicluster makes: the CloudWatch Logs groups (the EKS
# control-plane group too) and the Cloud Logging bucket. Enough to look back over a month of runs;
# the metrics keep their own, longer history (AMP: 150 days by default; Cloud Monitoring: 24 months).
LOG_RETENTION_DAYS = 30

# What the nodes ship, by scheduler. "kernel" carries the GPU XID lines; Kubernetes has no
# slurmctld, slurmd or reconcile (its control plane logs to the cloud's own place).
SLURM_LOG_STREAMS = ("slurmctld", "slurmd", "health-check", "reconcile", "kernel")
KUBERNETES_LOG_STREAMS = ("kernel",)

# The collector on Kubernetes: its namespace and service account (EKS Pod Identity association).
COLLECTOR_NAMESPACE = "monitoring"
COLLECTOR_SERVICE_ACCOUNT = "aicluster-metrics"


def log_streams(kubernetes: bool) -> tuple[str, ...]:
    return KUBERNETES_LOG_STREAMS if kubernetes else SLURM_LOG_STREAMS
