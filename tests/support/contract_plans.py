"""The plans the contracts judge: every stack in stacks/ as written, plus a matrix of variants built
from the stacks by editing their specs (never from one stack's values, so a stack added later gets
the same edits):

* `max`      every stack with the longest names the spec allows, the most user tags it allows
             (keys and values at their longest) and its options on (SSH and API CIDRs, accounting);
* `type=T`   every catalog instance type of the cloud on pools[0] of the first stack of each
             cloud x scheduler (GKE and Slurm, EKS and Slurm);
* `capacity=C` every capacity type of the cloud (on-demand, spot, reservation, capacity-block on
             AWS, flex-start on GCP) on pools[0] of those stacks;
* `tpu=G`    every Cloud TPU generation on GKE (from the first TPU stack) and, for the generations
             Slurm takes, on Slurm (a TPU pool put into the first GCP Slurm stack), multi-host
             slices, with the TPU capacity types.

A variant the spec refuses (trn2 on EKS, a TPU generation Slurm cannot describe) is left out with
its reason in `refused()` (an edit refused only for the pool's always-on nodes, a capacity block on
EKS, is retried with min_nodes 0); test_matrix.py checks that every type, capacity and scheduler is
still covered by some planned variant. Each variant is planned once per session.
"""
from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, field

from aicluster.catalog import load_catalog, load_limits
from aicluster.design.cluster import design_cluster
from aicluster.errors import SpecError
from aicluster.spec.cluster import (MAX_ALERT_EMAILS, ClusterSpec, PoolSpec, imagebuilder_tag_budget, parse_spec,
                                    user_tag_budget)
from tests.support.run_cache import shared
from tests.support.stack_plans import STACK_NAMES, result_with_spec, stack_result, stack_spec_data

CAPACITIES = {"aws": ("on-demand", "spot", "reservation", "capacity-block"),
              "gcp": ("on-demand", "spot", "reservation", "flex-start")}
TPU_CAPACITIES = ("on-demand", "spot", "reservation")
RESERVATION = {"aws": "cr-0123456789abcdef0", "gcp": "contract-reservation"}
GCP_IMAGE = "projects/my-project/global/images/family/my-gpu-image"   # for types with no public image
# How each cloud sells a multi-node NVLink domain (spec/cluster.py _NVLINK_DOMAIN_CAPACITY).
NVLINK_DOMAIN_CAPACITY = {"aws": "capacity-block", "gcp": "reservation"}


def _max_length(model, field: str) -> int:
    return next(m.max_length for m in model.model_fields[field].metadata if hasattr(m, "max_length"))


NAME_MAX = _max_length(ClusterSpec, "name")       # the spec's caps, read off its models (32, 24)
POOL_MAX = _max_length(PoolSpec, "name")


@dataclass(frozen=True)
class Variant:
    id: str                      # "aws-p5-slurm", "aws-p5-slurm+type=g5.48xlarge", ...
    stack: str                   # the stack whose config (region, project) it is planned with
    spec: dict | None = field(default=None, compare=False, hash=False)   # None: the stack as written
    cloud: str = ""
    scheduler: str = ""
    accelerator: str = ""        # gpu | trainium | tpu
    capacities: tuple[str, ...] = ()
    instance_types: tuple[str, ...] = ()

    def result(self):
        """The PlanResult (spec, design, plan, files), planned once per run across workers (kept here too:
        stack_plans' cache of edited specs is bounded and shared with the other suites)."""
        if self.id not in _PLANNED:
            _PLANNED[self.id] = stack_result(self.stack) if self.spec is None else \
                shared(f"variant {self.id}", lambda: result_with_spec(self.stack, self.spec))
        return _PLANNED[self.id]


_PLANNED: dict[str, object] = {}


def _kind(spec: dict) -> tuple[str, str, str]:
    pool = spec["pools"][0]
    if pool.get("tpu"):
        accel = "tpu"
    else:
        itype = load_catalog().resolve(spec["cloud"], pool["instance_type"])
        accel = itype.accelerator.kind if itype else "gpu"
    return spec["cloud"], spec.get("scheduler", "slurm"), accel


def _describe(vid: str, stack: str, spec: dict, as_written: bool) -> Variant:
    catalog = load_catalog()
    cloud, scheduler, accel = _kind(spec)
    caps = tuple(sorted({_capacity_type(p.get("capacity")) for p in spec["pools"]}))
    types = []
    for p in spec["pools"]:
        if p.get("instance_type"):
            t = catalog.resolve(cloud, p["instance_type"])
            types.append(t.name if t else p["instance_type"])
        elif p.get("tpu"):
            types.append(f"tpu-{p['tpu']['type']}")
    return Variant(vid, stack, None if as_written else spec, cloud, scheduler, accel, caps, tuple(types))


def _capacity_type(capacity) -> str:
    """`spot` or {type: spot} -> spot; none -> on-demand (the spec's shorthand and default)."""
    if isinstance(capacity, dict):
        return capacity.get("type", "on-demand")
    return capacity or "on-demand"


def _valid(spec: dict) -> str | None:
    """None when the spec plans, else why it is refused (the SpecError's first line)."""
    try:
        design_cluster(parse_spec(spec))
    except SpecError as err:
        return str(err).strip().splitlines()[-1].strip()
    return None


def _long(prefix: str, length: int) -> str:
    """A valid name of exactly `length` characters that starts with `prefix`."""
    body = (prefix + "-" + "x" * length)[:length - 1]
    return (body.rstrip("-") + "z" * length)[:length - 1] + "9"


def _maximal(spec: dict) -> dict:
    """The stack at the spec's limits: longest names, the most (and longest) user tags, options on."""
    out = copy.deepcopy(spec)
    cloud = out["cloud"]
    out["name"] = _long(out["name"], NAME_MAX)
    for i, pool in enumerate(out["pools"]):
        pool["name"] = _long(f"{pool['name']}{i}", POOL_MAX)
    for i, fs in enumerate(out.get("storage") or []):
        fs["name"] = _long(f"{fs['name']}{i}", POOL_MAX)
    budget = user_tag_budget(cloud)
    if cloud == "aws" and ((out.get("slurm") or {}).get("node_image") or {}).get("build"):
        budget = imagebuilder_tag_budget()      # Image Builder takes fewer tags (spec: _node_image_problems)
    # AWS keys in the alphabet every AWS service and instance-metadata tags accept; GCP keys are
    # turned into labels (lowercase), so they are written lowercase here to stay distinct.
    tags = {f"{'k' if cloud == 'gcp' else 'K'}{i:02d}".ljust(63, "k" if cloud == "gcp" else "K"):
            f"value-{i:02d} with spaces_and.dots:/=+-@".ljust(63, "v") for i in range(budget)}
    out["tags"] = tags
    out.setdefault("network", {})
    if not out["network"].get("existing"):
        out["network"]["ssh_ingress_cidrs"] = ["203.0.113.0/24", "198.51.100.0/24"]
    # Every alert e-mail the spec takes (with a GCP budget, only as many channels as a budget notifies).
    emails = MAX_ALERT_EMAILS
    if cloud == "gcp" and out.get("cost"):
        emails = int(load_limits()["gcp_budget_channels"].value)
    out.setdefault("monitoring", {})["alert_emails"] = [f"oncall-{i:02d}@example.com" for i in range(emails)]
    if out.get("scheduler", "slurm") == "slurm":
        out.setdefault("slurm", {})["accounting"] = True
    else:
        out.setdefault("kubernetes", {})["api_access_cidrs"] = ["203.0.113.0/24"]
        out["kubernetes"]["namespace"] = _long(out["kubernetes"].get("namespace", "training"), POOL_MAX)
    if cloud == "gcp" and out.get("scheduler", "slurm") == "slurm":
        # GCP names each node <cluster>-<pool>-<n>, at most 63 characters: the spec refuses more.
        for pool in out["pools"]:
            pool["name"] = pool["name"][:max(1, 63 - NAME_MAX - 2 - len(str(pool["max_nodes"])))].rstrip("-")
    return out


def _with_node_image(spec: dict) -> dict:
    """The spec with slurm.node_image.build, its tags cut to what Image Builder takes."""
    out = copy.deepcopy(spec)
    out.setdefault("slurm", {})["node_image"] = {"build": True}
    if out["cloud"] == "aws" and out.get("tags"):
        out["tags"] = dict(list(out["tags"].items())[:imagebuilder_tag_budget()])
    return out


def _with_pool0(spec: dict, **keys) -> dict:
    out = copy.deepcopy(spec)
    pool = out["pools"][0]
    for key in [k for k, v in keys.items() if v is None]:
        pool.pop(key, None)
    pool.update({k: v for k, v in keys.items() if v is not None})
    return out


def _capacity(cloud: str, kind: str) -> dict | str:
    if kind in ("reservation", "capacity-block"):
        return {"type": kind, "reservation_id": RESERVATION[cloud]}
    return kind


def _multi_host_topology(gen) -> tuple[str, int]:
    from aicluster.catalog.tpu_slices import tpu_slice

    for topology in gen.topologies:
        tpu = tpu_slice(gen, topology)
        if tpu.multi_host:
            return topology, tpu.hosts
    topology = gen.topologies[0]
    return topology, tpu_slice(gen, topology).hosts


def _tpu_pool(gen, scheduler: str, capacity: str = "on-demand") -> dict:
    topology, hosts = _multi_host_topology(gen)
    pool = {"name": f"tpu{gen.name}", "tpu": {"type": gen.name, "topology": topology}, "max_nodes": hosts,
            "capacity": _capacity("gcp", capacity)}
    if scheduler == "slurm":
        pool["min_nodes"] = hosts             # Slurm: every slice is created and always on
    return pool


def _nvlink_domain_stack(stack: str) -> bool:
    """True when the stack's pools[0] is a multi-node NVLink domain (GB200 NVL72)."""
    spec = stack_spec_data(stack)
    name = spec["pools"][0].get("instance_type")
    itype = load_catalog().resolve(spec["cloud"], name) if name else None
    return itype is not None and itype.nodes_per_nvlink_domain > 1


def _edits() -> list[tuple[str, str, dict]]:
    """(variant id, stack, spec) for every edit of the matrix, before validation. An edit the spec
    refuses only for the pool's always-on nodes (a capacity block on EKS starts empty) is tried
    again with min_nodes 0 (see _alternatives)."""
    catalog = load_catalog()
    out: list[tuple[str, str, dict]] = []
    for stack in STACK_NAMES:
        out.append((f"{stack}+max", stack, _maximal(stack_spec_data(stack))))
        if stack_spec_data(stack).get("scheduler", "slurm") == "slurm":
            # The baked node image (aws/image.py, gcp/image.py), at the longest names and the most tags
            # the spec takes with it.
            out.append((f"{stack}+node-image", stack, _with_node_image(stack_spec_data(stack))))
            out.append((f"{stack}+max+node-image", stack, _with_node_image(_maximal(stack_spec_data(stack)))))
    families: dict[tuple[str, str, str], str] = {}
    # An NVL72 stack (pools of one NVLink domain each, sharing a partition) is a family's base only
    # when nothing else is: another type or capacity on its pools[0] leaves the partition's other
    # NVL72 pools behind (refused), so its variants would cover nothing.
    for stack in sorted(STACK_NAMES, key=_nvlink_domain_stack):
        families.setdefault(_kind(stack_spec_data(stack)), stack)
    gpu_bases = {(c, s): st for (c, s, a), st in families.items() if a != "tpu"}
    for (cloud, scheduler), stack in sorted(gpu_bases.items()):
        spec = stack_spec_data(stack)
        for name, itype in sorted(catalog.instance_types[cloud].items()):
            image = GCP_IMAGE if cloud == "gcp" and scheduler == "slurm" and itype.image is None else None
            keys = {"instance_type": name, "image": image, "capacity": "on-demand"}
            if itype.nodes_per_nvlink_domain > 1:
                # A multi-node NVLink domain (GB200 NVL72): one pool is one unit the cloud sells, every
                # node static, on the capacity it sells domains through (spec: nvlink_domain_problems).
                nodes = itype.nvlink_capacity_unit
                keys.update(capacity=_capacity(cloud, NVLINK_DOMAIN_CAPACITY[cloud]), max_nodes=nodes, min_nodes=nodes)
            out.append((f"{stack}+type={name}", stack, _with_pool0(spec, **keys)))
        for kind in CAPACITIES[cloud]:
            edited = _with_pool0(spec, capacity=_capacity(cloud, kind))
            if edited != spec:
                out.append((f"{stack}+capacity={kind}", stack, edited))
    # TPU on GKE: the first TPU stack; on Slurm: a TPU pool in the first GCP Slurm stack.
    tpu_bases = {"kubernetes": families.get(("gcp", "kubernetes", "tpu")),
                 "slurm": families.get(("gcp", "slurm", "tpu")) or gpu_bases.get(("gcp", "slurm"))}
    for scheduler, stack in sorted(tpu_bases.items()):
        if stack is None:
            continue
        base = stack_spec_data(stack)
        for gen in catalog.tpus.values():
            spec = copy.deepcopy(base)
            spec["pools"] = [_tpu_pool(gen, scheduler)]
            out.append((f"{stack}+tpu={gen.name}", stack, spec))
        gen = catalog.tpus["v5p"]
        for kind in TPU_CAPACITIES:
            spec = copy.deepcopy(base)
            spec["pools"] = [_tpu_pool(gen, scheduler, kind)]
            out.append((f"{stack}+tpu=v5p,capacity={kind}", stack, spec))
    return out


@functools.lru_cache(maxsize=1)
def _matrix() -> tuple[tuple[Variant, ...], tuple[tuple[str, str], ...]]:
    variants = [_describe(stack, stack, stack_spec_data(stack), True) for stack in STACK_NAMES]
    refused = []
    seen = {v.id for v in variants}
    for vid, stack, spec in _edits():
        if vid in seen:
            continue
        seen.add(vid)
        why = _valid(spec)
        if why and "min_nodes" in why:
            spec = _with_pool0(spec, min_nodes=0)
            why = _valid(spec)
        if why:
            refused.append((vid, why))
        else:
            variants.append(_describe(vid, stack, spec, False))
    return tuple(variants), tuple(refused)


def variants() -> tuple[Variant, ...]:
    return _matrix()[0]


def refused() -> tuple[tuple[str, str], ...]:
    """(variant id, why the spec refuses it) for the matrix's edits that are not valid specs."""
    return _matrix()[1]


VARIANT_IDS = [v.id for v in variants()]
_BY_ID = {v.id: v for v in variants()}


def variant(vid: str) -> Variant:
    return _BY_ID[vid]
