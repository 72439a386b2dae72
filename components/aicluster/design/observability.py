"""What a cluster's monitoring watches, with every alert threshold derived from the plan's own numbers.

Pure: ClusterDesign -> MonitoringDesign. The numbers come from where the plan gets them:
- a pool's wired fabric Gbps: balance.fabric_gbps (EFA devices x card Gbps on AWS, GPU NICs' share
  of gpu_network_gbps on GCP), the figure the plan's Balance table shows per GPU;
- a filesystem's provisioned GB/s: StorageDesign.throughput_mbps (capacity TiB x MB/s/TiB), the
  plan's Storage line;
- the checkpoint write time: balance.from_design (checkpoint GB / min(filesystem, clients)), the
  plan's Balance "checkpoint" line;
- the expected tokens/s per accelerator: workload_inputs.estimate_design, the plan's Training
  estimate.
Each threshold keeps a sentence saying where it came from; the rules carry it as an annotation.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from aicluster.design.balance import fabric_gbps, from_design
from aicluster.catalog.node_local import containers
from aicluster.catalog.observability import scrape
from aicluster.design.model import ClusterDesign
from aicluster.design.parts import PoolDesign
from aicluster.errors import SpecError
from aicluster.design.telemetry_backend import LOG_RETENTION_DAYS, SLURM_LOG_STREAMS, log_group_name, log_id
from aicluster.design.workload import estimate_design


@dataclass(frozen=True)
class AlertFactors:
    """The factors applied to the plan's numbers (aicluster's choices, not sourced figures)."""
    # Fabric: a node in a collective that moves less than a quarter of its wired Gbps is far below
    # what the design paid for (a degraded or missing EFA device/NIC halves or worse). A compute-bound
    # job can sit below this on purpose (data-parallel gradients only): raise or lower per stack.
    fabric_fraction: float = 0.25
    # "During collectives": the node's fabric carries traffic (above 1 % of wired Gbps, an idle node
    # carries ~0) and its GPUs are busy (mean utilisation at least 50 %).
    fabric_active_fraction: float = 0.01
    busy_gpu_util_pct: float = 50.0
    # Filesystem: sustained traffic at 90 % of the provisioned GB/s means the next reader or
    # checkpoint waits (FSx and Managed Lustre throttle at the provisioned figure).
    filesystem_fraction: float = 0.90
    # Checkpoint: twice the plan's write time leaves room for metadata and stragglers; beyond it
    # the checkpoint stall budget the plan checked is no longer true.
    checkpoint_factor: float = 2.0
    # Throughput: 70 % of the estimate allows for the model's own error (perf calibration) and
    # input stalls; below it something is wrong (a slow node, a degraded link, a bad layout).
    tokens_fraction: float = 0.70


@dataclass(frozen=True)
class AlertDurations:
    """How long each condition must hold before its alert fires (Prometheus `for:`). Tests shorten
    them; in production they filter out a single bad scrape."""
    gpu_error: str = "0s"        # XID / double-bit ECC: one sample is a fact, fire at once
    gpu_missing: str = "5m"
    fabric: str = "15m"
    filesystem: str = "15m"
    checkpoint: str = "0s"       # one slow checkpoint is already a missed budget
    node_stuck: str = "30m"
    tokens: str = "30m"
    # The window of rate() in the rules and dashboards: 5m spans 10 scrapes at 30 s. A rate over a series
    # younger than its window reads low (Prometheus divides by the window), so a test with 1 s
    # scrapes shortens it with the `for:` durations.
    rate_window: str = "5m"


@dataclass(frozen=True)
class Threshold:
    """One alert threshold and where it comes from."""
    value: float
    unit: str
    origin: str


@dataclass(frozen=True)
class PoolWatch:
    """What the monitoring watches on one pool."""
    name: str
    instance_type: str
    gpus_per_node: int               # NVIDIA GPUs DCGM must report per node; 0: no DCGM on this pool
    gpu_origin: str
    fabric_kind: str | None          # efa | rdma | gvnic (catalog observability.yaml fabric); None: no NIC fabric
    wired_gbps: float
    fabric_threshold: Threshold | None


@dataclass(frozen=True)
class FilesystemWatch:
    """What the monitoring watches on one filesystem."""
    name: str
    mount: str
    provisioned_gbs: float
    threshold: Threshold


@dataclass(frozen=True)
class MonitoringDesign:
    """The monitoring of a cluster: what is watched, and its thresholds."""
    cluster: str
    cloud: str
    scheduler: str
    pools: tuple[PoolWatch, ...]
    filesystems: tuple[FilesystemWatch, ...]
    checkpoint: Threshold | None      # None: no workload, or no filesystem to write to
    tokens_per_accelerator: Threshold | None   # None: no described model, or no estimate
    factors: AlertFactors
    durations: AlertDurations
    notes: tuple[str, ...] = field(default_factory=tuple)   # what is not watched, and why
    alert_emails: tuple[str, ...] = ()                     # spec monitoring.alert_emails

    @property
    def gpu_pools(self) -> tuple[PoolWatch, ...]:
        return tuple(p for p in self.pools if p.gpus_per_node)

    @property
    def fabric_pools(self) -> tuple[PoolWatch, ...]:
        return tuple(p for p in self.pools if p.fabric_threshold is not None)


def _fabric_kind(cloud: str, pool: PoolDesign) -> tuple[str | None, int, str]:
    """(kind, wired devices, how they are named) of a pool's GPU fabric."""
    it = pool.instance
    if pool.tpu:
        return None, 0, "ICI inside the slice"
    if cloud == "aws":
        return ("efa", pool.efa_devices, f"{pool.efa_devices} EFA devices x {it.card_gbps:g} Gbps") if pool.efa \
            else (None, 0, "no EFA")
    if pool.gpu_nics and it.gpu_nic_stack == "rdma":
        return "rdma", pool.gpu_nics, f"{pool.gpu_nics} MRDMA NICs sharing {it.gpu_network_gbps:g} Gbps"
    if pool.gpu_nics:
        return "gvnic", pool.gpu_nics, f"{pool.gpu_nics} {it.gpu_nic_stack.upper()} GPU NICs sharing {it.gpu_network_gbps:g} Gbps"
    return None, 0, "no GPU NICs"


def _no_dcgm_exporter(scheduler: str, pool: PoolDesign) -> bool:
    """A Slurm pool whose nodes run no DCGM exporter: it runs under enroot (aicluster-monitoring),
    and a node of an architecture enroot has no pinned .deb for installs no enroot
    (aicluster-containers). Kubernetes runs DCGM as a DaemonSet image: not concerned."""
    return scheduler == "slurm" and pool.instance.dpkg_arch not in containers().enroot.arches


def _pool_watch(cloud: str, scheduler: str, pool: PoolDesign, f: AlertFactors, notes: list[str]) -> PoolWatch:
    it, acc = pool.instance, pool.instance.accelerator
    nvidia = acc.kind == "gpu" and acc.vendor == "nvidia"
    if not nvidia and acc.kind != "cpu":
        notes.append(f"pool {pool.name}: {acc.model} has no DCGM; GPU health rules skip it")
    elif nvidia and _no_dcgm_exporter(scheduler, pool):
        # Counting DCGM series that never come would fire GpuMissing for every node, forever: the
        # pool is left out of the GPU rules (gpus_per_node 0), and the plan says so.
        nvidia = False
        notes.append(f"GPUs of {pool.name} (no DCGM exporter: no containers on {it.dpkg_arch} until enroot has a "
                     f"pinned {it.dpkg_arch} build)")
    kind, wired_devices, described = _fabric_kind(cloud, pool)
    wired = fabric_gbps(it, wired_devices)[0] if kind else 0.0
    threshold = None
    if kind and wired > 0 and pool.max_nodes >= 2:
        threshold = Threshold(f.fabric_fraction * wired, "Gbps",
                              f"{it.name}: {wired:g} Gbps wired ({described}, catalog) x {f.fabric_fraction:g}")
    elif kind is None and pool.max_nodes >= 2 and not pool.tpu:
        notes.append(f"pool {pool.name}: no GPU fabric wired ({described}); no fabric rule")
    return PoolWatch(pool.name, it.name, it.accelerator_count if nvidia else 0,
                     f"{it.name}: {it.accelerator_count} x {acc.model} (catalog)", kind, wired, threshold)


def monitoring_design(design: ClusterDesign, factors: AlertFactors | None = None,
                      durations: AlertDurations | None = None) -> MonitoringDesign:
    f, notes = factors or AlertFactors(), []
    pools = tuple(_pool_watch(design.cloud, design.scheduler, p, f, notes) for p in design.pools)
    filesystems = []
    for fs in design.storage:
        if fs.kind in ("filestore", "efs"):     # homes: no provisioned throughput to compare with
            notes.append(f"filesystem {fs.name} ({fs.kind}): homes, no throughput rule")
            continue
        gbs = fs.throughput_mbps / 1000
        filesystems.append(FilesystemWatch(fs.name, fs.mount, gbs, Threshold(
            f.filesystem_fraction * gbs, "GB/s",
            f"{fs.name}: {fs.capacity_gib} GiB x {fs.throughput_mbps_per_tib} MB/s/TiB = {gbs:.2f} GB/s "
            f"provisioned (plan) x {f.filesystem_fraction:g}")))

    balance = from_design(design)
    checkpoint = None
    if balance.checkpoint_write_s:
        checkpoint = Threshold(f.checkpoint_factor * balance.checkpoint_write_s, "s",
                               f"{balance.checkpoint_gb:.0f} GB checkpoint written in {balance.checkpoint_write_s:.1f} s "
                               f"(plan balance) x {f.checkpoint_factor:g}")
    elif design.workload is None:
        notes.append("no workload in the spec: no checkpoint or throughput rule")

    tokens = None
    try:
        estimate = estimate_design(design)
    except SpecError as exc:          # the plan reports it as a finding; monitoring just has no number
        estimate = None
        notes.append(f"no training estimate ({'; '.join(str(p) for p in exc.problems)}): no throughput rule")
    if estimate is not None:
        per = estimate.best.tokens_per_s_per_gpu
        tokens = Threshold(f.tokens_fraction * per, "tokens/s per accelerator",
                           f"estimate {per:,.0f} tokens/s per accelerator on {estimate.hardware} "
                           f"(plan training estimate) x {f.tokens_fraction:g}")
    elif design.workload is not None and design.workload.model is None:
        notes.append("workload without workload.model: no throughput rule")
    return MonitoringDesign(design.name, design.cloud, design.scheduler, pools, tuple(filesystems), checkpoint,
                            tokens, f, durations or AlertDurations(), tuple(notes), tuple(design.alert_emails))


# ---------------------------------------------------------------- the plan's Monitoring section

_BACKEND = {"aws": "Amazon Managed Service for Prometheus workspace (remote write with IAM)",
            "gcp": "Google Cloud Managed Service for Prometheus (the project's Monarch store)"}


def _watched(m: MonitoringDesign) -> list[str]:
    what = ["node_exporter on every node (CPU, memory, NICs, RDMA ports, textfile series)"]
    if m.gpu_pools:
        what.append("DCGM exporter on " + ", ".join(f"{p.name} ({p.gpus_per_node} GPUs/node)" for p in m.gpu_pools))
    if m.fabric_pools:
        what.append("fabric counters on " + ", ".join(f"{p.name} ({p.fabric_kind}, {p.wired_gbps:g} Gbps wired)"
                                                     for p in m.fabric_pools))
    if m.filesystems:
        what.append("Lustre client stats of " + ", ".join(f"{f.mount}" for f in m.filesystems))
    what.append("Slurm through the exporter on the head node" if m.scheduler == "slurm"
                else "Kueue's metrics endpoint and kube-state-metrics (node conditions and taints)")
    return what


def _shipping(m: MonitoringDesign) -> dict[str, str]:
    """How the metrics reach the backend and where the logs go (slurm_monitoring on Slurm VMs,
    k8s_metrics on Kubernetes)."""
    if m.scheduler == "slurm":
        collector = {"aws": "a Prometheus agent on every node (remote write, SigV4 as the instance role)",
                     "gcp": "the Ops Agent on every node (its Prometheus receiver)"}[m.cloud]
        where = (log_group_name(m.cluster, "<stream>") if m.cloud == "aws"
                 else f"log {log_id(m.cluster, '<stream>')} in the cluster's log bucket")
        shipper = "the CloudWatch agent" if m.cloud == "aws" else "the Ops Agent"
        logs = (f"{', '.join(SLURM_LOG_STREAMS)} (XID lines only) by {shipper} to {where}, "
                f"{LOG_RETENTION_DAYS} days")
    else:
        collector = {"aws": "a Prometheus agent in namespace monitoring (Pod Identity, SigV4); AMP evaluates the rules",
                     "gcp": "GKE managed collection (PodMonitorings)"}[m.cloud]
        logs = {"aws": f"control plane to /aws/eks/{m.cluster}/cluster, {LOG_RETENTION_DAYS} days; node and "
                       "container logs (the health agent's XID findings) are not shipped by aicluster on EKS",
                "gcp": "GKE's system and container logs (the health agent's XID findings included) routed to the "
                       f"cluster's log bucket, {LOG_RETENTION_DAYS} days"}[m.cloud]
    emails = ", ".join(m.alert_emails)
    if m.cloud == "aws":
        alerts = (f"AMP's alert manager to the SNS topic aicluster-{m.cluster}-alerts (output alerts_topic_arn), "
                  + (f"e-mailed to {emails} (each address confirms its subscription once)" if emails
                     else "no subscriber yet (monitoring.alert_emails, or subscribe to the topic)"))
    else:
        alerts = ("Cloud Monitoring alerting policies, one per rule, "
                  + (f"e-mailed to {emails}" if emails
                     else "incidents in the console only (monitoring.alert_emails adds an e-mail channel)"))
    return {"collector": collector, "logs": logs, "alerts": alerts}


def _thresholds(m: MonitoringDesign) -> list[tuple[str, Threshold]]:
    out = [(f"fabric {p.name} below", p.fabric_threshold) for p in m.fabric_pools]
    out += [(f"filesystem {f.name} above", f.threshold) for f in m.filesystems]
    if m.checkpoint:
        out.append(("checkpoint longer than", m.checkpoint))
    if m.tokens_per_accelerator:
        out.append(("training below", m.tokens_per_accelerator))
    return out


def plan_lines(m: MonitoringDesign, rules_file: str, dashboard_dir: str) -> list[str]:
    """The Monitoring block of `aicluster plan`: what is watched, where it lives, the thresholds."""
    lines = [f"  watched: {w}" for w in _watched(m)]
    shipping = _shipping(m)
    lines.append(f"  metrics: {_BACKEND.get(m.cloud, m.cloud)}; scrape every {_scrape_s()} s by {shipping['collector']}")
    lines.append(f"  logs: {shipping['logs']}")
    lines.append(f"  alerts: {shipping['alerts']}")
    lines.append(f"  rules: {rules_file}; dashboards: {dashboard_dir}/*.json (import into Grafana: docs/operating.md)")
    if m.gpu_pools:
        lines.append("  alert GPU XID or uncorrectable ECC: any; GPU missing: fewer than "
                     + ", ".join(f"{p.gpus_per_node} on {p.name}" for p in m.gpu_pools))
    lines.append("  alert nodes DOWN/DRAIN/FAIL (Slurm)" if m.scheduler == "slurm"
                 else "  alert nodes NotReady or tainted GPU-unhealthy")
    for label, t in _thresholds(m):
        lines.append(f"  alert {label} {t.value:,.4g} {t.unit}: {t.origin}")
    lines += [f"  not watched: {n}" for n in m.notes]
    return lines


def plan_facts(m: MonitoringDesign, rules_file: str, dashboard_dir: str) -> dict:
    return {
        "backend": _BACKEND.get(m.cloud, m.cloud), "scrape_interval_s": _scrape_s(), "watched": _watched(m),
        **_shipping(m),
        "rules_file": rules_file, "dashboards_dir": dashboard_dir,
        "gpus_per_node": {p.name: p.gpus_per_node for p in m.gpu_pools},
        "thresholds": [{"alert": label, "value": t.value, "unit": t.unit, "origin": t.origin}
                       for label, t in _thresholds(m)],
        "factors": dataclasses.asdict(m.factors), "notes": list(m.notes),
    }


def _scrape_s() -> int:
    return scrape().interval_s
