"""The routine spec edits a cluster owner makes, defined on any spec (never on one stack's
values), so every stack in stacks/ - including ones added later - gets the same edits.

Each edit turns a stack's spec into a (before, after) pair. Most use the stack's own spec as
`before`; where the stack has nothing to change (no tags yet, a single pool to remove), `before`
is the spec with that thing added. Node counts are tried in order until the spec accepts one
(a TPU pool grows and shrinks in whole slices: 16 hosts, not 1). An edit that cannot apply to a
stack (the Slurm idle time on a Kubernetes stack) says why, and the test is skipped with that
reason: explicit, never silent.
"""
from __future__ import annotations

import copy
import ipaddress
from dataclasses import dataclass
from typing import Callable

Pair = tuple[dict, dict]


class NotApplicable(Exception):
    """This edit has no meaning for this stack (the reason is the message)."""


@dataclass(frozen=True)
class Edit:
    id: str
    what: str
    make: Callable[[dict], Pair]
    # Tags and labels update in place on every stateful type: a tag edit may change only those keys.
    changes_tags: bool = False
    # The login nodes boot a new image (docs/images.md): they are replaced, as a new image means to.
    new_login_image: bool = False


def _copy(spec: dict) -> dict:
    return copy.deepcopy(spec)


def _pool0(spec: dict) -> dict:
    return spec["pools"][0]


def _valid(spec: dict) -> bool:
    from aicluster.design.cluster import design_cluster
    from aicluster.errors import SpecError
    from aicluster.spec.cluster import parse_spec

    try:
        design_cluster(parse_spec(spec))
    except SpecError:
        return False
    return True


def _first_valid(pairs) -> Pair:
    """The first (before, after) whose two specs the spec accepts; else the first, so the test
    reports why it is refused."""
    pairs = [p for p in pairs if p is not None]
    return next((p for p in pairs if _valid(p[0]) and _valid(p[1])), pairs[0])


def _with_pool0(spec: dict, **keys) -> dict:
    out = _copy(spec)
    _pool0(out).update(keys)
    return out


def _nvlink_sizes(spec: dict) -> list[int]:
    """The sizes pools[0] may have when its type's NVLink domain spans nodes (one domain a pool,
    every node static: 9 or 18 on AWS, 18 on GCP); [] for any other pool."""
    from aicluster.catalog import load_catalog

    name = _pool0(spec).get("instance_type")
    itype = load_catalog().resolve(spec["cloud"], name) if name else None
    if itype is None or itype.nodes_per_nvlink_domain <= 1:
        return []
    return sorted({itype.nvlink_capacity_unit, itype.nodes_per_nvlink_domain})


def _with_domain_size(spec: dict, nodes: int) -> dict:
    """pools[0] resized to another whole NVLink domain: its static nodes and its block with it."""
    out = _with_pool0(spec, max_nodes=nodes, min_nodes=nodes)
    if "nodes" in (_pool0(out).get("capacity") or {}):
        _pool0(out)["capacity"] = dict(_pool0(out)["capacity"], nodes=nodes)
    return out


def _resize_domain(spec: dict, grow: bool) -> Pair:
    """An NVL72 pool changes size only from one UltraServer size to the other (AWS 9 <-> 18)."""
    sizes, current = _nvlink_sizes(spec), _pool0(spec)["max_nodes"]
    other = [n for n in sizes if n != current]
    if not other:
        raise NotApplicable(f"pools[0] is one NVLink domain of {current} nodes, the only size its cloud sells: "
                            "more capacity is another pool (add-pool)")
    small, large = (_with_domain_size(spec, min(sizes)), _with_domain_size(spec, max(sizes)))
    return (small, large) if grow else (large, small)


def _max_nodes_up(spec: dict) -> Pair:
    if _nvlink_sizes(spec):
        return _resize_domain(spec, grow=True)
    most = _pool0(spec)["max_nodes"]
    return _first_valid([(spec, _with_pool0(spec, max_nodes=min(most * k, 100_000))) for k in (4, 2, 3)])


def _max_nodes_down(spec: dict) -> Pair:
    if _nvlink_sizes(spec):
        return _resize_domain(spec, grow=False)
    pool = _pool0(spec)
    floor = max(pool.get("min_nodes", 0), 1)
    halved = (spec, _with_pool0(spec, max_nodes=max(floor, pool["max_nodes"] // 2))) \
        if pool["max_nodes"] > floor else None
    # At its floor, or halving is not a valid size: scale down to it from a pool twice as large.
    return _first_valid([halved, (_with_pool0(spec, max_nodes=pool["max_nodes"] * 2), spec)])


def _min_nodes(spec: dict) -> Pair:
    if _nvlink_sizes(spec):
        raise NotApplicable("every node of an NVLink-domain pool is static: min_nodes is max_nodes")
    pool = _pool0(spec)
    current, most = pool.get("min_nodes", 0), pool["max_nodes"]
    return _first_valid([(spec, _with_pool0(spec, min_nodes=value))
                         for value in (current + 1, current - 1, most, 0) if 0 <= value <= most and value != current])


def _free_pool_name(spec: dict) -> str:
    taken = {p["name"] for p in spec["pools"]}
    return next(f"extra{i}" for i in range(1, 100) if f"extra{i}" not in taken)


def _with_extra_pool(spec: dict, max_nodes: int) -> dict:
    out = _copy(spec)
    extra = _copy(_pool0(spec))
    extra.update(name=_free_pool_name(spec), min_nodes=0, max_nodes=max_nodes)
    if _nvlink_sizes(spec):     # another NVLink domain: static, its own capacity block or reservation
        extra.update(min_nodes=max_nodes)
        capacity = dict(extra.get("capacity") or {})
        if capacity.get("reservation_id", "").startswith("cr-"):
            capacity["reservation_id"] = "cr-0fedcba9876543210"
        if "nodes" in capacity:
            capacity["nodes"] = max_nodes
        extra["capacity"] = capacity
    out["pools"].append(extra)
    return out


def _extra_sizes(spec: dict) -> list[int]:
    if _nvlink_sizes(spec):
        return _nvlink_sizes(spec)
    return [2, _pool0(spec)["max_nodes"]]          # a small pool, or one the size of pools[0]


def _add_pool(spec: dict) -> Pair:
    return _first_valid([(spec, _with_extra_pool(spec, n)) for n in _extra_sizes(spec)])


def _remove_pool(spec: dict) -> Pair:
    if len(spec["pools"]) >= 2:
        after = _copy(spec)
        after["pools"].pop()
        return spec, after
    return _first_valid([(_with_extra_pool(spec, n), spec) for n in _extra_sizes(spec)])


def _other_instance_type(spec: dict) -> Pair:
    """pools[0] on another type of the same cloud and accelerator kind that the spec accepts."""
    from aicluster.catalog import load_catalog
    from aicluster.design.cluster import design_cluster
    from aicluster.errors import SpecError
    from aicluster.spec.cluster import parse_spec

    catalog = load_catalog()
    if "instance_type" not in _pool0(spec):
        raise NotApplicable(f"pools[0] has no instance_type (it names its hardware by {sorted(_pool0(spec))})")
    current = catalog.resolve(spec["cloud"], _pool0(spec)["instance_type"])
    if current is None:
        raise NotApplicable(f"pools[0].instance_type {_pool0(spec)['instance_type']!r} is not a catalog type")
    candidates = [t for t in catalog.instance_types.get(spec["cloud"], {}).values()
                  if t.name != current.name and t.accelerator.kind == current.accelerator.kind]
    for candidate in sorted(candidates, key=lambda t: t.name):
        after = _copy(spec)
        _pool0(after)["instance_type"] = candidate.name
        try:
            design_cluster(parse_spec(after))
        except SpecError:
            continue
        return spec, after
    raise NotApplicable(f"no other {spec['cloud']} {current.accelerator.kind} type is valid for this stack")


def _add_filesystem(spec: dict) -> Pair:
    """A second Lustre filesystem of the smallest valid size (FSx 1200 GiB; Managed Lustre at the
    500 MB/s/TiB tier's minimum): existing filesystems and the control plane stay as they are."""
    from aicluster.catalog import load_catalog

    names = {fs["name"] for fs in spec.get("storage") or []}
    extra = {"name": next(f"extra{i}" for i in range(1, 100) if f"extra{i}" not in names),
             "type": "lustre", "mount": "/extra-data", "capacity_gib": 1200}
    if spec["cloud"] == "gcp":
        tier = load_catalog().managed_lustre[500]
        extra.update(capacity_gib=tier.min_capacity_gib, throughput_mbps_per_tib=500)
    after = _copy(spec)
    after["storage"] = [*(spec.get("storage") or []), extra]
    return spec, after


def _add_tag(spec: dict) -> Pair:
    after = _copy(spec)
    after.setdefault("tags", {})["cost-center"] = "ml-4242"
    return spec, after


def _add_alert_email(spec: dict) -> Pair:
    """Someone else is to be mailed the alerts: a subscription or channel, nothing replaced."""
    after = _copy(spec)
    after.setdefault("monitoring", {}).setdefault("alert_emails", [])
    after["monitoring"]["alert_emails"] = [*after["monitoring"]["alert_emails"], "oncall@example.com"]
    return spec, after


def _change_tag(spec: dict) -> Pair:
    tags = spec.get("tags") or {}
    if tags:
        key = sorted(tags)[0]
        after = _copy(spec)
        after["tags"][key] = f"{tags[key]}-renamed"[:63]
        return spec, after
    before, after = _copy(spec), _copy(spec)
    before["tags"], after["tags"] = {"team": "research"}, {"team": "platform"}
    return before, after


_DOC_CIDRS = ["192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"]   # RFC 5737 documentation ranges


def _free_cidrs(spec: dict) -> list[str]:
    taken = [ipaddress.ip_network(c, strict=False) for c in (spec.get("network") or {}).get("ssh_ingress_cidrs", [])]
    return [c for c in _DOC_CIDRS if not any(ipaddress.ip_network(c).overlaps(t) for t in taken)]


def _add_ssh_cidr(spec: dict) -> Pair:
    after = _copy(spec)
    after.setdefault("network", {}).setdefault("ssh_ingress_cidrs", []).append(_free_cidrs(spec)[0])
    return spec, after


def _change_ssh_cidr(spec: dict) -> Pair:
    cidrs = (spec.get("network") or {}).get("ssh_ingress_cidrs") or []
    if cidrs:
        after = _copy(spec)
        after["network"]["ssh_ingress_cidrs"][0] = _free_cidrs(spec)[0]
        return spec, after
    before, after = _copy(spec), _copy(spec)
    before.setdefault("network", {})["ssh_ingress_cidrs"] = [_DOC_CIDRS[0]]
    after.setdefault("network", {})["ssh_ingress_cidrs"] = [_DOC_CIDRS[1]]
    return before, after


def _needs_slurm(spec: dict) -> None:
    scheduler = spec.get("scheduler", "slurm")
    if scheduler != "slurm":
        raise NotApplicable(f"scheduler {scheduler} has no Slurm settings")


def _idle_time(spec: dict) -> Pair:
    _needs_slurm(spec)
    after = _copy(spec)
    slurm = after.setdefault("slurm", {})
    slurm["suspend_idle_min"] = slurm.get("suspend_idle_min", 10) + 35
    return spec, after


def _node_image(spec: dict) -> Pair:
    """Boot the GPU pools and login nodes from a baked image (built in the stack): new launch or
    instance template versions and new login nodes, never a filesystem, the head or its state."""
    _needs_slurm(spec)
    before, after = _copy(spec), _copy(spec)
    before.setdefault("slurm", {})["node_image"] = {"build": False}
    after.setdefault("slurm", {})["node_image"] = {"build": True}
    return before, after


def _accounting(spec: dict) -> Pair:
    _needs_slurm(spec)
    before, after = _copy(spec), _copy(spec)
    before.setdefault("slurm", {})["accounting"] = False
    after.setdefault("slurm", {})["accounting"] = True
    return before, after


def _managed_accounting(spec: dict) -> Pair:
    """The accounting database moves to RDS / Cloud SQL: a new database, nothing else replaced."""
    _needs_slurm(spec)
    before, after = _copy(spec), _copy(spec)
    before.setdefault("slurm", {})["accounting"] = True
    after.setdefault("slurm", {})["accounting"] = "managed"
    if (after.get("network") or {}).get("existing") and after.get("cloud", "aws") == "aws":
        after["slurm"]["accounting_subnet_ids"] = ["subnet-0123456789abcdef1", "subnet-0123456789abcdef2"]
    return before, after


def _capacity_type(spec: dict) -> Pair:
    """pools[0] between on-demand and spot (or from its reservation to on-demand)."""
    if _nvlink_sizes(spec):
        raise NotApplicable("an NVLink-domain pool has the one capacity type its cloud sells domains by")
    capacity = _pool0(spec).get("capacity") or {}
    current = capacity.get("type", "on-demand")
    targets = ["spot", "on-demand"] if current == "on-demand" else ["on-demand", "spot"]
    return _first_valid((spec, _with_pool0(spec, capacity={"type": t})) for t in targets if t != current)


def _slurm_settings(spec: dict) -> Pair:
    """Custom Slurm settings at both levels (slurm_settings.py): only slurm.conf changes."""
    _needs_slurm(spec)
    after = _copy(spec)
    after.setdefault("slurm", {})["settings"] = {"MaxJobCount": 20000, "SchedulerParameters": "bf_max_job_test=500"}
    # Partition parameters: on every pool of pools[0]'s partition (they share its line).
    partition = _pool0(after).get("partition") or _pool0(after)["name"]
    for pool in after["pools"]:
        if (pool.get("partition") or pool["name"]) == partition:
            pool["slurm_settings"] = {"MaxTime": "2-00:00:00", "PriorityTier": 10}
    return spec, after


def _add_team(spec: dict) -> Pair:
    """A team's namespace and queues (kubernetes.teams), guaranteed some of pools[0] (whole slices
    of a TPU pool): the other queues' quotas change in place."""
    scheduler = spec.get("scheduler", "slurm")
    if scheduler != "kubernetes":
        raise NotApplicable(f"scheduler {scheduler} has no Kubernetes namespaces")

    def with_team(nodes: int) -> Pair:
        after = _copy(spec)
        k8s = after.setdefault("kubernetes", {})
        k8s["teams"] = [*k8s.get("teams", []), {"name": "routine-team", "nodes": {_pool0(spec)["name"]: nodes}}]
        return spec, after
    return _first_valid(with_team(n) for n in (1, 16, 0))


def _needs_model(spec: dict) -> dict:
    workload = spec.get("workload") or {}
    if "model" not in workload:
        raise NotApplicable("the workload describes no model")
    return workload


def _training_plan(spec: dict) -> Pair:
    """What a team edits between runs: more tokens, a bigger batch, FP8."""
    workload = _needs_model(spec)
    after = _copy(spec)
    training = after["workload"].setdefault("training", {})
    training["tokens"] = 2 * float(workload.get("training", {}).get("tokens") or 1e12)
    training["global_batch_seqs"] = 2 * int(workload.get("training", {}).get("global_batch_seqs") or 512)
    training["precision"] = "fp8" if workload.get("training", {}).get("precision") != "fp8" else "bf16"
    return spec, after


def _fixed_layout(spec: dict) -> Pair:
    _needs_model(spec)
    after = _copy(spec)
    after["workload"]["parallelism"] = {"pp": 1, "zero_stage": 1, "recompute": "selective"}
    return spec, after


def _describe_model(spec: dict) -> Pair:
    """From the short form to a described model (the tags on the templates change, nothing else)."""
    workload = _needs_model(spec)
    before = _copy(spec)
    before["workload"] = {k: v for k, v in workload.items() if k not in ("model", "training", "parallelism")}
    before["workload"].setdefault("model_params_b", 70)
    return before, spec


EDITS = [
    Edit("max-nodes-up", "pools[0].max_nodes x4", _max_nodes_up),
    Edit("max-nodes-down", "pools[0].max_nodes halved", _max_nodes_down),
    Edit("min-nodes", "pools[0].min_nodes +-1", _min_nodes),
    Edit("add-pool", "a second pool like pools[0]", _add_pool),
    Edit("remove-pool", "the last pool removed", _remove_pool),
    Edit("instance-type", "pools[0] on another instance type", _other_instance_type),
    Edit("add-filesystem", "a second Lustre filesystem", _add_filesystem),
    Edit("add-tag", "a new tag", _add_tag, changes_tags=True),
    Edit("change-tag", "a tag value changed", _change_tag, changes_tags=True),
    Edit("alert-email", "monitoring.alert_emails + one address", _add_alert_email),
    Edit("add-ssh-cidr", "network.ssh_ingress_cidrs + one CIDR", _add_ssh_cidr),
    Edit("change-ssh-cidr", "network.ssh_ingress_cidrs[0] changed", _change_ssh_cidr),
    Edit("idle-time", "slurm.suspend_idle_min +35", _idle_time),
    Edit("accounting", "slurm.accounting false -> true", _accounting),
    Edit("node-image", "slurm.node_image.build false -> true", _node_image, new_login_image=True),
    Edit("managed-accounting", "slurm.accounting true -> managed", _managed_accounting),
    Edit("capacity-type", "pools[0].capacity.type on-demand <-> spot", _capacity_type),
    Edit("slurm-settings", "slurm.settings and pools[0].slurm_settings added", _slurm_settings),
    Edit("add-team", "kubernetes.teams + a team guaranteed part of pools[0]", _add_team),
    Edit("training-plan", "workload.training: tokens and batch x2, precision switched", _training_plan),
    Edit("fixed-layout", "workload.parallelism fixed", _fixed_layout),
    Edit("describe-model", "workload.model_params_b -> a described model", _describe_model),
]
