"""MonitoringDesign -> a Prometheus rules file (alerting rules), one per stack.

No recording rules: every backend evaluates these expressions as they are (AMP, and Cloud
Monitoring's PromQL alerting policies on GCP, which evaluate no recording rules), and the
dashboards draw the same expressions (`gpu_util_by_node`, `fabric_gbps`, `lustre_gbs`).

Every alert carries `threshold` and `threshold_origin` annotations (the plan's number and the
factor applied to it: aicluster.design.observability), and names series only through the catalog's
one list (catalog/observability.yaml), so the Slurm nodes and the Kubernetes DaemonSets feed the
same rules. Labels every series carries: cluster, pool, node (the catalog's scrape target_labels).
"""
from __future__ import annotations

from typing import Any

from aicluster.catalog import dump_yaml
from aicluster.catalog.observability import contract, fabric, metric
from aicluster.design.observability import MonitoringDesign, PoolWatch, Threshold

RULES_FILE = "monitoring/prometheus-rules.yaml"
# The taint the GPU health agent puts on a failed node (k8s_health.UNHEALTHY_TAINT_KEY; a test keeps
# the two equal: this render layer cannot import the Pulumi component that defines it).
GPU_UNHEALTHY_TAINT = "aicluster.io/gpu-unhealthy"
# Slurm states that mean "not running jobs and not coming back by itself" (sinfo %T; the exporter
# joins a node's states with "&" and Slurm appends flag characters such as * and ~).
SLURM_STUCK_STATES = ".*(down|drain|fail).*"
BY_NODE = "cluster, pool, node"


def _num(value: float) -> str:
    """A PromQL literal: integers stay integers, others keep 4 significant decimals."""
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.4g}"


def _alert(name: str, expr: str, duration: str, severity: str, summary: str, origin: str,
           threshold: str, pool: str | None = None) -> dict[str, Any]:
    # A per-pool rule carries its pool as a label: two pools' rules of one name then differ (promtool
    # flags same-named rules with the same labels), and a route can tell them apart.
    labels = {"severity": severity} | ({"pool": pool} if pool else {})
    return {"alert": name, "expr": expr, "for": duration, "labels": labels,
            "annotations": {"summary": summary, "threshold": threshold, "threshold_origin": origin}}


def _pool_sel(pool: PoolWatch, extra: str = "") -> str:
    return "{" + ", ".join(x for x in (f'pool="{pool.name}"', extra) if x) + "}"


def gpu_util_by_node(selector: str = "") -> str:
    """Each node's mean GPU utilisation (percent)."""
    return f"avg by ({BY_NODE}) ({metric('gpu_util')}{selector})"


def fabric_gbps(pool: PoolWatch, window: str) -> str:
    """Each node of the pool's fabric throughput: bytes/s both ways -> Gbps per direction (the
    wired figure is per direction)."""
    fc = fabric(pool.fabric_kind)
    sel = _pool_sel(pool, fc.selector)
    return (f"8 * (sum by ({BY_NODE}) (rate({fc.rx}{sel}[{window}])) + "
            f"sum by ({BY_NODE}) (rate({fc.tx}{sel}[{window}]))) / 2 / 1e9")


def lustre_gbs(mount: str, window: str) -> str:
    """A Lustre filesystem's client throughput, read plus write, GB/s (summed over its clients)."""
    read, write = contract("lustre_read").name, contract("lustre_write").name
    sel = f'{{mount="{mount}"}}'
    return (f"(sum by (cluster, mount) (rate({read}{sel}[{window}])) + "
            f"sum by (cluster, mount) (rate({write}{sel}[{window}]))) / 1e9")


def _gpu_rules(m: MonitoringDesign) -> list[dict[str, Any]]:
    d, rules = m.durations, []
    if not m.gpu_pools:
        return rules
    util = metric("gpu_util")
    rules.append(_alert(
        "AiclusterGpuXidError", f"max by ({BY_NODE}, gpu) ({metric('gpu_xid')}) > 0", d.gpu_error, "critical",
        "GPU {{ $labels.gpu }} on {{ $labels.node }} reported XID {{ $value }}",
        "any XID: DCGM_FI_DEV_XID_ERRORS holds the last XID the driver logged (NVIDIA XID catalog)", "> 0"))
    rules.append(_alert(
        "AiclusterGpuEccUncorrectable",
        f"max by ({BY_NODE}, gpu) ({metric('gpu_ecc_dbe')}) > 0 or "
        f"max by ({BY_NODE}, gpu) ({metric('gpu_row_remap_failure')}) > 0", d.gpu_error, "critical",
        "GPU {{ $labels.gpu }} on {{ $labels.node }} has uncorrectable ECC errors or a failed row remap",
        "any double-bit (uncorrectable) volatile ECC error or row-remap failure since the driver loaded", "> 0"))
    for p in m.gpu_pools:
        gpus = f"count by ({BY_NODE}) ({util}{_pool_sel(p)})"
        rules.append(_alert(
            "AiclusterGpuMissing",
            f"({gpus} < {p.gpus_per_node}) or "
            f"(0 * count by ({BY_NODE}) ({metric('node_uname')}{_pool_sel(p)}) unless on ({BY_NODE}) {gpus})",
            d.gpu_missing, "critical",
            f"{{{{ $labels.node }}}} (pool {p.name}) shows {{{{ $value }}}} of {p.gpus_per_node} GPUs",
            p.gpu_origin, f"< {p.gpus_per_node} GPUs per node", pool=p.name))
    return rules


def _fabric_rules(m: MonitoringDesign) -> list[dict[str, Any]]:
    alerts = []
    f, d = m.factors, m.durations
    for p in m.fabric_pools:
        gbps = fabric_gbps(p, d.rate_window)
        t: Threshold = p.fabric_threshold
        active = f.fabric_active_fraction * p.wired_gbps
        busy = (f" and on ({BY_NODE}) {gpu_util_by_node(_pool_sel(p))} >= {_num(f.busy_gpu_util_pct)}"
                if p.gpus_per_node else "")
        alerts.append(_alert(
            "AiclusterFabricBelowWired",
            f"({gbps}) < {_num(t.value)} and ({gbps}) > {_num(active)}{busy}",
            d.fabric, "warning",
            f"{{{{ $labels.node }}}} (pool {p.name}) moves {{{{ $value | humanize }}}} Gbps over its fabric "
            f"during collectives, below {_num(t.value)} Gbps",
            t.origin + f"; in a collective: above {_num(active)} Gbps"
            + (f" with GPUs at least {_num(f.busy_gpu_util_pct)} % busy" if busy else ""),
            f"< {_num(t.value)} Gbps", pool=p.name))
    return alerts


def _storage_rules(m: MonitoringDesign) -> list[dict[str, Any]]:
    alerts = []
    for fs in m.filesystems:
        alerts.append(_alert(
            "AiclusterFilesystemNearProvisioned",
            f"{lustre_gbs(fs.mount, m.durations.rate_window)} > {_num(fs.threshold.value)}",
            m.durations.filesystem, "warning",
            f"{fs.name} ({fs.mount}) moves {{{{ $value | humanize }}}} GB/s, near its provisioned {fs.provisioned_gbs:.2f} GB/s",
            fs.threshold.origin, f"> {_num(fs.threshold.value)} GB/s"))
    return alerts


def _job_rules(m: MonitoringDesign) -> list[dict[str, Any]]:
    rules, d = [], m.durations
    if m.checkpoint:
        t = m.checkpoint
        rules.append(_alert(
            "AiclusterCheckpointSlow",
            f"max by (cluster, training_job) ({contract('checkpoint_duration').name}) > {_num(t.value)}", d.checkpoint, "warning",
            "job {{ $labels.training_job }} took {{ $value | humanizeDuration }} to write its checkpoint",
            t.origin, f"> {_num(t.value)} s"))
    if m.tokens_per_accelerator:
        t = m.tokens_per_accelerator
        rules.append(_alert(
            "AiclusterTokensBelowEstimate",
            f"max by (cluster, training_job) ({contract('tokens_per_second').name}) / "
            f"max by (cluster, training_job) ({contract('training_accelerators').name}) < {_num(t.value)}",
            d.tokens, "warning",
            "job {{ $labels.training_job }} trains at {{ $value | humanize }} tokens/s per accelerator",
            t.origin, f"< {_num(t.value)} tokens/s per accelerator"))
    return rules


def _node_rules(m: MonitoringDesign) -> list[dict[str, Any]]:
    d = m.durations
    if m.scheduler == "slurm":
        return [_alert(
            "AiclusterSlurmNodesStuck",
            f'sum by (cluster, partition, state) ({metric("slurm_nodes")}{{state=~"{SLURM_STUCK_STATES}"}}) > 0',
            d.node_stuck, "warning",
            "{{ $value }} nodes of partition {{ $labels.partition }} are {{ $labels.state }}",
            f"Slurm states DOWN, DRAIN, FAIL for {d.node_stuck} (power-saved idle~ nodes do not count)", "> 0 nodes")]
    return [
        _alert("AiclusterNodeGpuUnhealthy",
               f'max by (cluster, node) ({metric("kube_node_taint")}{{key="{GPU_UNHEALTHY_TAINT}"}}) > 0',
               d.node_stuck, "warning", "{{ $labels.node }} is tainted GPU-unhealthy by the health agent",
               f"taint {GPU_UNHEALTHY_TAINT} (aicluster node health agent) for {d.node_stuck}", "tainted"),
        _alert("AiclusterNodeNotReady",
               f'max by (cluster, node) ({metric("kube_node_condition")}{{condition="Ready", status="true"}}) == 0',
               d.node_stuck, "warning", "{{ $labels.node }} is not Ready",
               f"kubelet condition Ready not true for {d.node_stuck}", "Ready != true"),
    ]


def rule_groups(m: MonitoringDesign) -> dict[str, Any]:
    groups = [
        ("gpu", _gpu_rules(m)),
        ("fabric", _fabric_rules(m)),
        ("storage", _storage_rules(m)),
        ("nodes", _node_rules(m)),
        ("training", _job_rules(m)),
    ]
    return {"groups": [{"name": f"aicluster-{m.cluster}-{name}", "rules": rules} for name, rules in groups if rules]}


def rules_yaml(m: MonitoringDesign) -> str:
    head = (f"# Prometheus rules for cluster {m.cluster}, rendered by aicluster from the plan's numbers\n"
            "# (docs/operating.md). Check with: promtool check rules <this file>\n")
    return head + dump_yaml(rule_groups(m), sort_keys=False, width=1000)


def alerts(m: MonitoringDesign) -> list[dict[str, Any]]:
    """Every alerting rule (for the plan's Monitoring section)."""
    return [r for g in rule_groups(m)["groups"] for r in g["rules"] if "alert" in r]
