"""The plan as a person reads it (text, markdown) and as tools read it (JSON)."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aicluster.design.balance import report_lines, to_dict
from aicluster.commands.check import verdict_lines
from aicluster.design.model import ClusterDesign
from aicluster.design.parts import PoolDesign, StorageDesign
from aicluster.errors import SpecError
from aicluster.design.accounting import accounting_facts, accounting_plan_lines
from aicluster.design.login import login_facts, login_plan_lines
from aicluster.design.standing_cost import plan_lines as standing_plan_lines, standing_cost
from aicluster.render import node_image
from aicluster.render.node_local_files import pool_node_local_json, pool_plan_lines
from aicluster.render.alert_rules import RULES_FILE
from aicluster.render.dashboards import DASHBOARD_DIR
from aicluster.design.observability import monitoring_design, plan_facts, plan_lines
from aicluster.offline.capture import reveal
from aicluster.offline.report import resource_table_markdown, resource_tree
from aicluster.commands.out_dir import OutDir, write_tree
from aicluster.perf import Estimate
from aicluster.commands.planner import PlanResult
from aicluster.commands.training_text import train_lines
from aicluster.design.workload import estimate_design
from aicluster.design import deployer_permissions as deployer

_NOT_YET: dict[str, str] = {}


def _kubernetes_title(d: ClusterDesign) -> str:
    return f"Kubernetes ({'GKE' if d.kubernetes.platform == 'gke' else 'EKS'} {d.kubernetes.version})"


def _kubernetes_lines(d: ClusterDesign) -> list[str]:
    if d.kubernetes is None:
        return []
    if d.kubernetes.platform == "gke":
        from aicluster.gcp.gke_report import kubernetes_lines
    else:
        from aicluster.aws.eks_report import kubernetes_lines

    return ["", _kubernetes_title(d), *kubernetes_lines(d)]


def _fabric(pool: PoolDesign) -> str:
    if pool.tpu:
        slices = f"{pool.slices} slice" + ("s" if pool.slices != 1 else "")
        return f"{pool.tpu.describe()}, {slices}: {pool.max_nodes} hosts, ICI within each slice"
    if pool.nics:     # GCP: every NIC of the instance template
        host = sum(1 for n in pool.nics if n.role == "host")
        gpu = f" + {pool.gpu_nics} {'MRDMA' if pool.instance.gpu_nic_stack == 'rdma' else 'gVNIC GPU NICs'} " \
              f"({pool.instance.gpu_nic_stack.upper()})" if pool.gpu_nics else ""
        return f"{len(pool.nics)} NICs per node: {host} gVNIC{gpu}"
    if not pool.efa:
        return "ENA only (no EFA)"
    cards = len({nic.network_card_index for nic in pool.interfaces if nic.is_efa})
    return f"1 ENA + {pool.efa_devices} EFA-only on {cards} cards"


def pool_lines(design: ClusterDesign) -> list[str]:
    lines = []
    for pool in design.pools:
        capacity = pool.capacity.type + (f" {pool.capacity.reservation_id}" if pool.capacity.reservation_id else "")
        placement = f"{pool.placement.strategy} placement group" if pool.placement.strategy else \
            f"no placement group ({pool.placement.reason})"
        if design.cloud == "gcp":
            placement = "compact placement policy" if pool.placement.strategy else \
                f"no placement policy ({pool.placement.reason})"
            if design.kubernetes and pool.placement.strategy:
                placement = "compact placement (GKE placement_policy COMPACT" + \
                    (f", tpu_topology {pool.tpu.topology})" if pool.tpu else ")")
            elif pool.tpu and not design.kubernetes:
                placement = "each slice one Cloud TPU VM (its hosts on one ICI topology), always on"
        # The CPU architecture where it is not x86_64 (Grace: arm64): what its nodes download.
        arch = f", {pool.instance.arch}" if pool.instance.arch != "x86_64" else ""
        lines.append(f"  {pool.name}: {pool.instance.name} ({pool.instance.accelerator_count}x "
                     f"{pool.instance.accelerator.model}{arch}), nodes {pool.min_nodes}..{pool.max_nodes} "
                     f"as {pool.hostlist}")
        lines.append(f"    fabric {_fabric(pool)}; {placement}; capacity {capacity}")
        lines.extend(pool_plan_lines(design, pool))     # /scratch and containers (Slurm)
    return lines


def network_lines(design: ClusterDesign) -> list[str]:
    """GCP: the system VPC and every GPU NIC network, with their subnets and MTUs."""
    net = design.network
    if design.cloud != "gcp":
        return []
    system = f"system VPC {design.name}, subnet {net.private_subnet_cidr}" if net.create_vpc else \
        f"system VPC {net.existing_vpc_id} (existing), subnet {net.existing_subnet_id}"
    lines = [f"  {system}, MTU {net.mtu}, Cloud NAT; private service access {net.service_cidr}"]
    for fab in net.fabric_networks:
        kind = f"RDMA VPC with RoCE profile {design.zone}-vpc-roce" if fab.roce else "VPC"
        subnets = f"{len(fab.subnets)} subnets ({fab.subnets[0].cidr} ..)" if len(fab.subnets) > 1 else \
            f"subnet {fab.subnets[0].cidr}"
        lines.append(f"  {fab.name}: {kind}, MTU {fab.mtu}, {subnets}")
    return lines


def _guard(fs: StorageDesign) -> str:
    """How the filesystem is guarded, and what `aicluster destroy` does with it (on_delete)."""
    if not fs.protect:
        return "NOT protected"
    return "protected + retained" if fs.on_delete == "retain" else f"protected; on destroy: {fs.on_delete}"


def _storage_line(fs: StorageDesign) -> str:
    if fs.kind == "filestore":
        guard = _guard(fs)
        return f"  {fs.name}: Filestore {fs.filestore_tier} (NFS), {fs.capacity_gib} GiB, mounted at {fs.mount}; {guard}"
    guard = _guard(fs)
    if fs.kind == "efs":   # aws/home.py: elastic, so no size; daily AWS Backup
        return (f"  {fs.name}: Amazon EFS (NFS 4.1), elastic, encrypted, AWS Backup on, mounted at {fs.mount}; "
                f"{guard}; not training-data throughput")
    kind = f"FSx for Lustre {fs.deployment_type}" if fs.kind == "fsx-lustre" else "Managed Lustre"
    return (f"  {fs.name}: {kind}, {fs.capacity_gib} GiB x {fs.throughput_mbps_per_tib} MB/s/TiB = "
            f"{fs.throughput_mbps / 1000:.1f} GB/s, mounted at {fs.mount}; {guard}")


def _storage_label(fs: StorageDesign) -> tuple[str, ...]:
    """A filesystem's lines in the diagram, by its real kind: Filestore (NFS) by tier and capacity,
    a Lustre filesystem by capacity, per-TiB throughput and aggregate throughput."""
    if fs.kind == "filestore":
        return f"{fs.name}: Filestore {fs.filestore_tier} (NFS)", f"{fs.capacity_gib} GiB"
    if fs.kind == "efs":
        return f"{fs.name}: Amazon EFS (NFS)", "elastic"
    kind = f"FSx for Lustre {fs.deployment_type}" if fs.kind == "fsx-lustre" else "Managed Lustre"
    return (f"{fs.name}: {kind}", f"{fs.capacity_gib} GiB x {fs.throughput_mbps_per_tib} MB/s/TiB",
            f"{fs.throughput_mbps / 1000:.1f} GB/s")


def _shown(path) -> str:
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def text(result: PlanResult) -> list[str]:
    d, plan = result.design, result.plan
    custom = plan.custom_resources()
    lines = [
        f"aicluster plan: stack {result.stack.name} ({_shown(result.stack.path)}), offline with a fake cloud",
        f"cluster {d.name}: {d.cloud} {d.zone}, scheduler {d.scheduler}",
        "",
        "Pools",
        *pool_lines(d),
        *(["", "Networks", *network_lines(d)] if d.cloud == "gcp" else []),
        "",
        "Storage",
        *([_storage_line(fs) for fs in d.storage] or ["  none"]),
        *_kubernetes_lines(d),
        *_login_lines(d),
        *_node_image_lines(d),
        *_accounting_lines(d),
        *_standing_lines(d),
        "",
        f"Resources: {len(custom)} to create, in {len(plan.components())} components",
        *["  " + line for line in resource_tree(plan)],
        "",
        "Provisioning critical path",
        *["  " + line for line in critical_path_lines(result)],
        "",
        "Balance",
        *["  " + line for line in report_lines(result.balance)],
        "",
        "Training estimate (the workload on the largest accelerator pool, with its partition, at max nodes)",
        *["  " + line for line in estimate_lines(plan_estimate(d))],
        "",
        "Monitoring (alert thresholds from the plan's numbers)",
        *_monitoring_lines(d),
        "",
        "Policy pack (aicluster check, pack defaults)",
        *["  " + line for line in verdict_lines(_verdicts(result))],
        "",
        f"Deployer permissions (what pulumi up/destroy need; {deployer_file(result)} with --out DIR)",
        *["  " + line for line in deployer.summary_lines(deployer_permissions(result))],
    ]
    if result.files:
        lines += ["", "Rendered files (written with --out DIR)", *[f"  {name}" for name in sorted(result.files)]]
    if d.scheduler in _NOT_YET:
        lines += ["", f"note: {_NOT_YET[d.scheduler]}."]
    return lines


def markdown(result: PlanResult) -> list[str]:
    d = result.design
    return [
        f"## aicluster plan: `{result.stack.name}`",
        "",
        f"Cluster **{d.name}** on {d.cloud} `{d.zone}`, scheduler {d.scheduler}.",
        "",
        "```mermaid",
        *mermaid(result),
        "```",
        "",
        "### Pools",
        "",
        *[line.strip() and f"- {line.strip()}" for line in pool_lines(d)],
        *(["", "### Networks", "", *[f"- {line.strip()}" for line in network_lines(d)]] if d.cloud == "gcp" else []),
        "",
        "### Storage",
        "",
        *([f"- {_storage_line(fs).strip()}" for fs in d.storage] or ["- none"]),
        *(["", f"### {_kubernetes_title(d)}", "",
            *[f"- {line.strip()}" for line in _kubernetes_lines(d)[2:]]] if d.kubernetes else []),
        *(["", "### Login nodes", "", *[f"- {line.strip()}" for line in _login_lines(d)[2:]]]
          if _login_lines(d) else []),
        *(["", "### Accounting", "", *[f"- {line.strip()}" for line in _accounting_lines(d)[2:]]]
          if _accounting_lines(d) else []),
        "", "### Standing cost (paid with zero compute nodes up)", "", "```", *_standing_lines(d)[2:], "```",
        "",
        f"### Resources ({len(result.plan.custom_resources())})",
        "",
        *resource_table_markdown(result.plan),
        "",
        "### Provisioning critical path",
        "",
        "```",
        *critical_path_lines(result),
        "```",
        "",
        "### Balance",
        "",
        "```",
        *report_lines(result.balance),
        "```",
        "",
        "### Training estimate",
        "",
        "```",
        *estimate_lines(plan_estimate(d)),
        "```",
        "",
        "### Monitoring",
        "",
        *[f"- {line.strip()}" for line in _monitoring_lines(d)],
        "",
        "### Policy pack",
        "",
        *verdict_table(_verdicts(result)),
        "",
        "### Deployer permissions",
        "",
        *[f"- {line}" for line in deployer.summary_lines(deployer_permissions(result))],
        f"- written as `{deployer_file(result)}` with `--out DIR` (docs/deployer-permissions.md)",
        "",
        *([f"_Note: {_NOT_YET[d.scheduler]}._"] if d.scheduler in _NOT_YET else []),
    ]


def to_json(result: PlanResult) -> dict[str, Any]:
    d = result.design
    return {
        "stack": result.stack.name,
        "cluster": {
            "name": d.name, "cloud": d.cloud, "region": d.region, "zone": d.zone, "scheduler": d.scheduler,
            "pools": [{
                "name": p.name, "instance_type": p.instance.name, "arch": p.instance.arch, "min_nodes": p.min_nodes,
                "max_nodes": p.max_nodes, "hostlist": p.hostlist, "efa_devices": p.efa_devices,
                "placement": p.placement.strategy, "capacity": p.capacity.type,
                "nics": [{"index": n.index, "network": n.network, "subnet": n.subnet, "nic_type": n.nic_type,
                          "role": n.role} for n in p.nics],
                **({"tpu": {"type": p.tpu.name, "topology": p.tpu.topology, "chips_per_slice": p.tpu.chips,
                            "hosts_per_slice": p.tpu.hosts, "slices": p.slices, "machine_type": p.tpu.machine_type}}
                   if p.tpu else {}),
                **pool_node_local_json(d, p),     # "scratch" and "containers": null off Slurm
            } for p in d.pools],
            "networks": [{"name": n.name, "key": n.key, "mtu": n.mtu, "roce": n.roce,
                          "subnets": [s.cidr for s in n.subnets]} for n in d.network.fabric_networks],
            "storage": [{
                "name": s.name, "kind": s.kind, "mount": s.mount, "capacity_gib": s.capacity_gib,
                "elastic": s.kind == "efs",     # capacity_gib 0: EFS grows with its files
                "throughput_mbps_per_tib": s.throughput_mbps_per_tib, "protect": s.protect,
                "deployment_type": s.deployment_type, "filestore_tier": s.filestore_tier,
            } for s in d.storage],
            "login": _login_json(d),
            "accounting": accounting_facts(d.slurm.accounting_settings) if d.slurm else None,
            "node_image": _node_image_json(d),
        },
        "plan": result.plan.to_json(),
        "balance": to_dict(result.balance),
        "estimate": plan_estimate(d).to_json(),
        "monitoring": plan_facts(monitoring_design(d), RULES_FILE, DASHBOARD_DIR),
        "standing_cost": standing_cost(d).to_dict(),
        "policy": [{
            "id": v.rule_id, "name": v.name, "enforcement": v.enforcement.value, "status": v.status,
            "not_applicable": v.not_applicable,
            "violations": [{"message": x.message, "urn": x.urn, "resource": x.resource_name} for x in v.violations],
        } for v in _verdicts(result)],
        "files": sorted(result.files),
        **({"kubernetes": _kubernetes_json(d)} if d.kubernetes else {}),
        "critical_path": _critical_path(result).to_json(),
        "deployer_permissions": {"file": deployer_file(result), **deployer_permissions(result).to_json()},
    }


def _monitoring_lines(d: ClusterDesign) -> list[str]:
    return plan_lines(monitoring_design(d), RULES_FILE, DASHBOARD_DIR) + _budget_lines(d)


def _budget_lines(d: ClusterDesign) -> list[str]:
    """The spec's monthly budget (design/budget.py), at the end of the Monitoring block: its alerts
    go where monitoring's do; and whether the standing cost alone passes an alert."""
    from aicluster.design.budget import budget_line, standing_note
    from aicluster.design.standing_cost import standing_cost

    if not d.budget:
        return []
    note = standing_note(d.budget, standing_cost(d).usd_per_month)
    return [f"  {budget_line(d.budget, d.alert_emails)}", *([f"  {note}"] if note else [])]


def _standing_lines(d: ClusterDesign) -> list[str]:
    """What the cluster pays while idle (design/standing_cost.py): per item, the total per hour and
    per month, what has no price and what is priced by use."""
    return ["", "Standing cost (paid with zero compute nodes up)",
            *["  " + line for line in standing_plan_lines(standing_cost(d))]]


def _accounting_lines(d: ClusterDesign) -> list[str]:
    return accounting_plan_lines(d.slurm.accounting_settings) if d.slurm else []


def _login_lines(d: ClusterDesign) -> list[str]:
    return login_plan_lines(d.name, d.cloud, d.slurm.login if d.slurm else None)


def _node_image_json(d: ClusterDesign) -> dict[str, Any] | None:
    """What the Slurm nodes boot (docs/images.md): the baked image and its contents key, or null
    (every node installs at boot); null without Slurm."""
    if d.slurm is None:
        return None
    image = d.slurm.node_image
    if image is None:
        return {"baked": False, "contents": node_image.contents_key(d.cloud)}
    return {"baked": True, "build": image.build, "image_id": image.image_id, "base_image": image.base_image,
            "pools": list(image.pools), "contents": node_image.contents_key(d.cloud),
            "at_boot": [{"pool": pool, "why": why} for pool, why in image.at_boot]}


def _node_image_lines(d: ClusterDesign) -> list[str]:
    facts = _node_image_json(d)
    if facts is None:
        return []
    key = facts["contents"]
    if not facts["baked"]:
        return ["", "Node image", "  none: every node installs its pinned software at boot, each download checked "
                f"against its SHA-256 (contents {key}; slurm.node_image, docs/images.md)"]
    where = ("baked in this stack" + (" by EC2 Image Builder" if d.cloud == "aws" else " on a builder VM")
             if facts["build"] else f"{facts['image_id']}, baked before (its manifest must name this contents key)")
    login = ["the login nodes"] if d.slurm.login and d.slurm.login.count else []
    booted = ", ".join([*(f"pool {p}" for p in facts["pools"]), *login])
    return ["", "Node image", f"  {where}, contents {key}, from {facts['base_image']}",
            f"  booted by {booted or 'no pool'}: their boot installs nothing",
            *(f"  pool {e['pool']} installs at boot: {e['why']}" for e in facts["at_boot"])]


def _login_json(d: ClusterDesign) -> dict[str, Any] | None:
    """The login nodes (login_design.login_facts, as the text prints them) and the filesystems
    they mount (every one of the cluster's); null without Slurm."""
    facts = login_facts(d.name, d.cloud, d.slurm.login if d.slurm else None)
    return None if facts is None else {**facts, "mounts": [fs.mount for fs in d.storage]}


def _kubernetes_json(d: ClusterDesign) -> dict[str, Any]:
    if d.kubernetes.platform == "gke":
        from aicluster.gcp.gke_report import kubernetes_summary
    else:
        from aicluster.aws.eks_report import kubernetes_summary

    return kubernetes_summary(d)


# ---------------------------------------------------------------- the training estimate


@dataclass(frozen=True)
class PlanEstimate:
    """The training model's answer for the spec's workload, or why there is none. `status`:
    estimated | no-workload | not-described (model_params_b alone) | finding (nothing fits, or the
    fixed layout cannot run: a result about the cluster, shown in the plan, not a crash)."""
    status: str
    estimate: Estimate | None = None
    note: str = ""
    unit: str = "GPU"               # how the lines name one accelerator: GPU, else accelerator

    def to_json(self) -> dict[str, Any]:
        if self.estimate is not None:
            return {"status": self.status, **self.estimate.to_dict()}
        return {"status": self.status, "note": self.note}


def plan_estimate(design: ClusterDesign) -> PlanEstimate:
    ws = design.workload
    if ws is None:
        return PlanEstimate("no-workload", note="no workload in the spec: describe workload.model for step time, "
                                                "MFU and time to train")
    if ws.model is None:
        return PlanEstimate("not-described", note=f"model_params_b {ws.model_params_b:g} alone gives no step time: "
                                                  "the estimate needs workload.model (layers, hidden, heads, "
                                                  "ffn_hidden, vocab, seq_len)")
    try:
        found = estimate_design(design)
    except SpecError as exc:
        return PlanEstimate("finding", note="; ".join(str(p) for p in exc.problems))
    kinds = {p.instance.accelerator.kind for p in design.pools if p.instance.accelerator.kind != "cpu"}
    return PlanEstimate("estimated", found, unit="GPU" if kinds == {"gpu"} else "accelerator")


def estimate_lines(pe: PlanEstimate) -> list[str]:
    """A compact block: the best layout, throughput, MFU and bound, days and dollars to train, warnings."""
    e = pe.estimate
    if e is None:
        return [f"finding: {pe.note}" if pe.status == "finding" else pe.note]
    b, lay, unit = e.best, e.best.layout, pe.unit
    lines = [
        f"{'hardware':<11} {e.hardware} ({e.accelerators} {unit}s)",
        f"{'layout':<11} tp {lay.tp}  pp {lay.pp}  dp {lay.dp}  cp {lay.cp}  ep {lay.ep}  zero {lay.zero_stage}  "
        f"recompute {lay.recompute}  micro-batch {lay.micro_batch}"
        + (f"  virtual stages {lay.virtual_stages}" if lay.virtual_stages > 1 else ""),
        f"{'throughput':<11} {b.tokens_per_s_per_gpu:,.0f} tokens/s per {unit}, {e.tokens_per_s:,.0f} tokens/s in all",
        f"{'MFU':<11} {100 * b.mfu:.1f} % ({b.model_tflops_per_gpu:.0f} model TFLOP/s per {unit}), "
        f"step {b.step_time_s:.2f} s, bound: {e.bound}",
        f"{'memory':<11} {b.memory.total:.1f} of {b.memory.capacity:.1f} GiB per {unit} "
        f"({b.memory.headroom_pct:.0f} % free)",
    ]
    lines += train_lines(e, 11, unit)
    if e.warnings:
        lines += ["warnings:", *[f"  - {w}" for w in e.warnings]]
    return lines


# ---------------------------------------------------------------- policy verdicts and the diagram


def _verdicts(result: PlanResult) -> list:
    """The policy pack's verdicts on this plan, with the pack's default config."""
    from aicluster.commands.check import verdicts_for_plan

    return verdicts_for_plan(result.plan)


def verdict_table(verdicts) -> list[str]:
    rows = ["| rule | name | enforcement | result | details |", "|---|---|---|---|---|"]
    word = {"pass": "PASS", "fail": "FAIL", "warn": "WARN", "n/a": "N/A", "disabled": "OFF"}
    for v in verdicts:
        details = "<br>".join(x.message for x in v.violations) or (v.not_applicable or "")
        rows.append(f"| `{v.rule_id}` | {v.name} | {v.enforcement.value} | {word[v.status]} | "
                    f"{details.replace('|', chr(92) + '|')} |")
    return rows


def _label(*parts: str) -> str:
    text = "<br/>".join(p for p in parts if p)
    return '"' + text.replace('"', "#quot;") + '"'


def _head(result: PlanResult) -> str | None:
    for r in result.plan.custom_resources():
        inputs = reveal(r.inputs)
        tags = next((v for v in (inputs.get("tags"), inputs.get("labels")) if isinstance(v, dict)), {})
        if tags.get("aicluster-role") in ("head", "control-plane") and r.type.split(":")[1] in ("ec2/instance",
                                                                                                "compute/instance"):
            return str(inputs.get("instanceType") or inputs.get("machineType"))
    return None


def mermaid(result: PlanResult) -> list[str]:
    """A Mermaid flowchart of the cluster for pull-request comments: control plane, pools in their
    fabric and placement, filesystems, and what connects them."""
    d = result.design
    head = _head(result)
    if d.scheduler == "slurm":
        control = _label("Slurm head node", head or "not in this plan", "slurmctld")
    elif d.kubernetes:
        control = _label(f"{'GKE' if d.kubernetes.platform == 'gke' else 'EKS'} {d.kubernetes.version} control plane",
                         f"Kueue ClusterQueue {d.kubernetes.cluster_queue}")
    else:
        control = _label("Kubernetes control plane", head or "not in this plan")
    lines = ["flowchart LR", '  subgraph cp["control plane"]', f"    head[{control}]", "  end"]
    for i, pool in enumerate(d.pools):
        fabric = (f"EFA: {pool.efa_devices} devices per node" if pool.efa else "ENA only, no EFA") \
            if d.cloud == "aws" else _fabric(pool)
        placement = f"{pool.placement.strategy} placement group" if pool.placement.strategy else \
            f"no placement group: {pool.placement.reason}"
        lines += [f"  subgraph fabric{i}[{_label(f'{pool.name} fabric', placement)}]",
                  f"    pool{i}[{_label(f'{pool.name}: {pool.max_nodes} x {pool.instance.name}', f'{pool.accelerators} x {pool.instance.accelerator.model}', fabric)}]",
                  "  end",
                  f"  head -->|schedules| pool{i}"]
    for j, fs in enumerate(d.storage):
        lines.append(f"  fs{j}[({_label(*_storage_label(fs))})]")
        lines += [f"  pool{i} ==>|{fs.mount}| fs{j}" for i in range(len(d.pools))]
        lines.append(f"  head -.->|{fs.mount}| fs{j}")
    return lines


# ---------------------------------------------------------------- provisioning critical path


def _critical_path(result: PlanResult):
    """The longest chain of creations `pulumi up` waits on (components/aicluster/design/critical_path.py)."""
    from aicluster.design.critical_path import critical_path

    return critical_path(result.plan)


def critical_path_lines(result: PlanResult) -> list[str]:
    from aicluster.design.critical_path import lines

    return lines(_critical_path(result))


# ---------------------------------------------------------------- `aicluster plan --out DIR`


def write_outputs(result: PlanResult, out: Path | OutDir) -> list[Path]:
    """plan.json and every rendered file into `out` (out_dir: never through a symlink, each file
    replaced whole, an earlier plan's leftovers removed, a folder of someone else's files refused)."""
    files = {"plan.json": json.dumps(to_json(result), indent=2, sort_keys=True) + "\n"}
    files.update(sorted(result.files.items()))
    files[deployer_file(result)] = deployer_file_text(result)
    return write_tree(out, files)


# ---------------------------------------------------------------- the deployer's permissions


def deployer_permissions(result: PlanResult) -> deployer.DeployerPermissions:
    """What `pulumi up`, `preview`, `refresh` and `destroy` of this plan need (docs/deployer-permissions.md)."""
    return deployer.for_plan(result.plan, result.design)


def deployer_file(result: PlanResult) -> str:
    """AWS: deployer-policy.json (IAM policy documents); GCP: deployer-roles.json (roles to bind)."""
    return "deployer-policy.json" if result.design.cloud == "aws" else "deployer-roles.json"


def deployer_file_text(result: PlanResult) -> str:
    perms = deployer_permissions(result)
    return deployer.policy_file(perms) if perms.cloud == "aws" else deployer.roles_file(perms)
