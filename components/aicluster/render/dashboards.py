"""MonitoringDesign -> Grafana dashboards (JSON), one file per view: the cluster, its pools, GPUs,
fabric, storage and jobs. Delivery: a documented import into the user's Grafana, Amazon Managed
Grafana or Grafana on GKE (docs/operating.md); each dashboard asks for its Prometheus data source
on import (the `datasource` template variable), so one file serves AMP, Google Cloud Managed
Service for Prometheus or a self-run Prometheus.

Queries name series only through the catalog's one list and the rules' recording names, and carry
no Grafana variables, so every one is plain PromQL (the tests parse each with promtool). Thresholds
drawn on the panels are the alert rules' own (the plan's numbers x the factors).
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

from aicluster.render.alert_rules import SLURM_STUCK_STATES, fabric_gbps, gpu_util_by_node, lustre_gbs
from aicluster.catalog.observability import contract, metric
from aicluster.design.observability import MonitoringDesign

DASHBOARD_DIR = "monitoring/grafana"
_DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def _panel(title: str, exprs: list[tuple[str, str]], unit: str, threshold: float | None = None,
           kind: str = "timeseries") -> dict[str, Any]:
    field: dict[str, Any] = {"unit": unit}
    if threshold is not None:
        field["thresholds"] = {"mode": "absolute", "steps": [{"color": "green", "value": None},
                                                             {"color": "red", "value": threshold}]}
        field["custom"] = {"thresholdsStyle": {"mode": "line"}}
    return {"type": kind, "title": title, "datasource": _DATASOURCE,
            "fieldConfig": {"defaults": field, "overrides": []},
            "targets": [{"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend, "datasource": _DATASOURCE}
                        for i, (expr, legend) in enumerate(exprs)]}


def _dashboard(m: MonitoringDesign, key: str, title: str, panels: list[dict[str, Any]]) -> dict[str, Any]:
    # Grafana uids are at most 40 characters: a readable prefix and a hash of the cluster name.
    uid = f"aic-{key}-{hashlib.sha256(m.cluster.encode()).hexdigest()[:12]}"
    for i, p in enumerate(panels):
        p["id"] = i + 1
        p["gridPos"] = {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)}
    return {
        "uid": uid, "title": f"aicluster {m.cluster}: {title}", "tags": ["aicluster", m.cluster],
        "timezone": "utc", "schemaVersion": 39, "version": 1, "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus",
                                 "label": "Prometheus"}]},
        "panels": panels,
    }


def _overview(m: MonitoringDesign) -> list[dict[str, Any]]:
    util = metric("gpu_util")
    panels = [
        _panel("Firing alerts", [('count by (alertname) (ALERTS{alertstate="firing"})', "{{alertname}}")], "short"),
        _panel("Nodes reporting", [(f"count by (pool) ({metric('node_uname')})", "{{pool}}")], "short"),
    ]
    if m.gpu_pools:
        panels += [_panel("GPUs reporting", [(f"count by (pool) ({util})", "{{pool}}")], "short"),
                   _panel("Mean GPU utilisation", [(f"avg by (pool) ({util})", "{{pool}}")], "percent")]
    if m.scheduler == "slurm":
        panels.append(_panel("Slurm nodes by state", [(f"sum by (state) ({metric('slurm_nodes')})", "{{state}}")], "short"))
    else:
        panels.append(_panel("Kueue workloads", [
            (f"sum by (cluster_queue, status) ({metric('kueue_pending')})", "pending {{cluster_queue}} {{status}}"),
            (f"sum by (cluster_queue) ({metric('kueue_admitted')})", "admitted {{cluster_queue}}")], "short"))
    return panels


def _pools(m: MonitoringDesign) -> list[dict[str, Any]]:
    panels = []
    for p in m.pools:
        sel = f'{{pool="{p.name}"}}'
        panels.append(_panel(f"{p.name} ({p.instance_type}): nodes up",
                             [(f"count({metric('node_uname')}{sel})", "nodes")], "short"))
        panels.append(_panel(f"{p.name}: CPU busy", [(
            f'1 - avg by (node) (rate({metric("node_cpu")}{{pool="{p.name}", mode="idle"}}[5m]))', "{{node}}")],
            "percentunit"))
        if p.gpus_per_node:
            panels.append(_panel(f"{p.name}: GPUs per node (expected {p.gpus_per_node})",
                                 [(f"count by (node) ({metric('gpu_util')}{sel})", "{{node}}")], "short",
                                 threshold=p.gpus_per_node))
    return panels


def _gpus(m: MonitoringDesign) -> list[dict[str, Any]]:
    if not m.gpu_pools:
        return []
    by = "{{node}} gpu {{gpu}}"
    return [
        _panel("GPU utilisation", [(f"avg by (node) ({metric('gpu_util')})", "{{node}}")], "percent"),
        _panel("Tensor pipe active", [(f"avg by (node) ({metric('gpu_tensor_active')})", "{{node}}")], "percentunit"),
        _panel("GPU memory used", [(f"max by (node, gpu) ({metric('gpu_memory_used')})", by)], "decmbytes"),
        _panel("Last XID", [(f"max by (node, gpu) ({metric('gpu_xid')}) > 0", by)], "short", threshold=1),
        _panel("Uncorrectable ECC errors", [(f"max by (node, gpu) ({metric('gpu_ecc_dbe')})", by)], "short", threshold=1),
        _panel("PCIe replays", [(f"sum by (node) (rate({metric('gpu_pcie_replay')}[5m]))", "{{node}}")], "short"),
        _panel("NVLink traffic", [(f"sum by (node) (rate({metric('gpu_nvlink_bytes')}[5m]))", "{{node}}")], "Bps"),
        _panel("PCIe traffic", [(f"sum by (node) ({metric('gpu_pcie_tx')})", "{{node}} tx"),
                                (f"sum by (node) ({metric('gpu_pcie_rx')})", "{{node}} rx")], "Bps"),
    ]


def _fabric(m: MonitoringDesign) -> list[dict[str, Any]]:
    return [_panel(f"{p.name}: fabric Gbps per node (wired {p.wired_gbps:g}, alert below {p.fabric_threshold.value:g})",
                   [(fabric_gbps(p, m.durations.rate_window), "{{node}}")], "short", threshold=p.fabric_threshold.value)
            for p in m.fabric_pools]


def _storage(m: MonitoringDesign) -> list[dict[str, Any]]:
    read, write = contract("lustre_read").name, contract("lustre_write").name
    panels = []
    for fs in m.filesystems:
        sel = f'{{mount="{fs.mount}"}}'
        panels.append(_panel(f"{fs.name} ({fs.mount}): GB/s (provisioned {fs.provisioned_gbs:.2f})",
                             [(lustre_gbs(fs.mount, m.durations.rate_window), "total")], "short",
                             threshold=fs.threshold.value))
        panels.append(_panel(f"{fs.name}: per node", [
            (f"sum by (node) (rate({read}{sel}[5m]))", "{{node}} read"),
            (f"sum by (node) (rate({write}{sel}[5m]))", "{{node}} write")], "Bps"))
    return panels


def _jobs(m: MonitoringDesign) -> list[dict[str, Any]]:
    tokens, accs = contract("tokens_per_second").name, contract("training_accelerators").name
    t = m.tokens_per_accelerator
    panels = [
        _panel("Tokens/s per accelerator" + (f" (alert below {t.value:,.0f})" if t else ""),
               [(f"max by (training_job) ({tokens}) / max by (training_job) ({accs})", "{{training_job}}")], "short",
               threshold=t.value if t else None),
        _panel("Checkpoint duration" + (f" (alert above {m.checkpoint.value:.0f} s)" if m.checkpoint else ""),
               [(f"max by (training_job) ({contract('checkpoint_duration').name})", "{{training_job}}")], "s",
               threshold=m.checkpoint.value if m.checkpoint else None),
    ]
    if m.scheduler == "slurm":
        panels.append(_panel("Slurm nodes DOWN/DRAIN/FAIL", [(
            f'sum by (partition, state) ({metric("slurm_nodes")}{{state=~"{SLURM_STUCK_STATES}"}})',
            "{{partition}} {{state}}")], "short"))
    else:
        panels.append(_panel("Kueue pending workloads", [
            (f"sum by (cluster_queue, status) ({metric('kueue_pending')})", "{{cluster_queue}} {{status}}")], "short"))
    if m.gpu_pools:
        panels.append(_panel("GPU utilisation by pool", [(f"avg by (pool) ({gpu_util_by_node()})", "{{pool}}")], "percent"))
    return panels


VIEWS = (("overview", "cluster overview", _overview), ("pools", "pools", _pools), ("gpus", "GPUs", _gpus),
         ("fabric", "fabric", _fabric), ("storage", "storage", _storage), ("jobs", "jobs and training", _jobs))


def dashboards(m: MonitoringDesign) -> dict[str, dict[str, Any]]:
    """file name -> dashboard; a view with nothing to show (no GPUs, no fabric) is left out."""
    out = {}
    for key, title, build in VIEWS:
        panels = build(m)
        if panels:
            out[f"{DASHBOARD_DIR}/{key}.json"] = _dashboard(m, key, title, panels)
    return out


def dashboard_files(m: MonitoringDesign) -> dict[str, str]:
    return {path: json.dumps(board, indent=2) + "\n" for path, board in dashboards(m).items()}


def queries(board: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in board["panels"] for t in p["targets"]]
