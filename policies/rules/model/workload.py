"""The described workload of a stack and what the training model (aicluster.perf) says of it.

The workload comes from the aicluster-model and aicluster-training tags (aicluster.perf.tags) on a
pool's launch template, instance template, node pool or TPU VM; it runs on the largest sized pool
that carries them (a job spans one pool, as in `aicluster plan`). The hardware is that pool at its
node count with the fabric it actually wires (a TPU pool: all its slices, ICI within each and DCN
between them), the storage the fastest parallel filesystem bounded by what the pool's nodes can
push to it, and the checkpoint interval and stall budget the workload hints (config or tags) give.
The rules AIC-MEM-002, AIC-NET-005, AIC-STO-006 and AIC-CST-003 share this one estimate.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, Mapping

from aicluster.design.balance import WorkloadShape, client_gbps, fabric_gbps
from aicluster.catalog import TpuGeneration, load_catalog
from aicluster.catalog.tpu_slices import host_generation
from aicluster.errors import SpecError
from aicluster.perf import (Estimate, Hardware, LayoutHint, ModelShape, Storage, TrainingShape, estimate, from_instance,
                            from_tpu)
from aicluster.perf.flops import parameter_count
from aicluster.perf.tags import MODEL_TAG, TRAINING_TAG, Workload, workload_from_tags

from .cluster import Cluster, Filesystem, Pool
from .capacity import pool_capacity, stack_region
from .standing import standing_from_resources
from .kinds import PARTITION_TAG


@dataclass(frozen=True)
class Described:
    """A described workload, where it runs and the training model's answer (None: `refused` says
    why no layout runs: nothing fits HBM, or the fixed layout is impossible)."""
    workload: Workload
    pool: Pool                  # where violations point (a TPU pool of several slices: its first)
    source: str                 # "tags on <pool>"
    hardware: Hardware
    storage: Storage | None
    estimate: Estimate | None
    refused: str = ""
    standing_usd_per_hour: float | None = None   # the stack's standing cost (model/standing.py)

    def label(self) -> str:
        """What the job runs on and what runs: '16 x p5.48xlarge (128 H100): 70.6B parameters (tags on gpu)'."""
        return (f"{self.hardware.name} ({self.hardware.count} {self.hardware.accelerator}): "
                f"{parameter_count(self.workload.model) / 1e9:.1f}B parameters ({self.source})")

    def layout(self) -> str:
        lay = self.estimate.best.layout
        return (f"tp {lay.tp} pp {lay.pp} dp {lay.dp} cp {lay.cp} ep {lay.ep} zero {lay.zero_stage} "
                f"recompute {lay.recompute} micro-batch {lay.micro_batch}")


def described(c: Cluster, config: Mapping[str, Any]) -> tuple[Described | None, str]:
    """(the described workload and its estimate, "") or (None, why there is none)."""
    found: list[tuple[Pool, Workload]] = []
    reasons: list[str] = []
    for pool in c.pools:
        tags = _workload_tags(c, pool)
        if not tags:
            continue
        workload, why = workload_from_tags(tags)
        if workload is None:
            reasons.append(f"{pool.label()}: {why}")
        else:
            found.append((pool, workload))
    sized = _jobs([(p, w) for p, w in found if p.nodes], lambda p: c.index.tags(p.anchor).get(PARTITION_TAG))
    if not sized:
        if reasons:
            return None, "; ".join(reasons)
        if found:
            return None, f"{found[0][0].label()} carries the workload but its size is unknown (set poolNodes)"
        hints, _ = c.workload(config)
        return None, ("the workload gives model_params_b only: describe workload.model (tags aicluster-model, "
                      "aicluster-training) for the training model" if hints is not None else
                      "no described workload (tags aicluster-model and aicluster-training)")
    pool, workload, slices = max(sized, key=lambda pws: (pws[0].accelerators * pws[2],
                                                         pws[0].instance.accelerator.bf16_tflops or 0.0))
    # A GPU job over several pools of one partition: the first pool, at the nodes of them all.
    pool = dataclasses.replace(pool, nodes=(pool.nodes or 0) * slices) if not pool.tpu and slices > 1 else pool
    slices = slices if pool.tpu else 1
    # Checkpoint interval and stall budget from the config or the tags; the model size they are
    # read with is not needed here (the described model counts its own), so any stands in for it.
    hints, _ = c.workload({"modelParamsB": 1, **config})
    # Priced as the plan prices it: the stack's region and the pool's capacity type (model/capacity.py).
    hw = hardware(pool, slices, region=stack_region(c.index, pool.cloud), capacity=pool_capacity(c.index, pool))
    fs = storage(c, pool, hints, slices)
    # What the stack pays beside the accelerators, read off its resources as the plan reads its
    # design: AIC-CST-003's cost to train adds it over the days at goodput.
    standing = standing_from_resources(c).usd_per_hour
    result, refused = _estimate_or_refusal(workload, hw, fs, standing)
    return Described(workload, pool, f"tags on {pool.key}", hw, fs, result, refused, standing), ""


def runnable(c: Cluster, config: Mapping[str, Any]) -> tuple[Described | None, str]:
    """(the described workload with an estimate, "") or (None, why there is nothing to judge). The
    rules that judge the estimate (AIC-NET-005, AIC-STO-006) are not applicable without one; a
    refused workload is AIC-MEM-002's to report, so they only point there."""
    d, why = described(c, config)
    if d is None:
        return None, why
    if d.estimate is None:
        return None, no_layout(d)
    return d, ""


def no_layout(d: Described) -> str:
    """Why a rule that judges the estimate has none: no layout runs (AIC-MEM-002 reports that)."""
    return f"no layout runs (AIC-MEM-002 reports it): {d.refused}"


def _estimate_or_refusal(workload: Workload, hw: Hardware, fs: Storage | None,
                         standing_usd_per_hour: float | None = None) -> tuple[Estimate | None, str]:
    try:
        return _estimate(workload.model, workload.training, workload.hint, hw, fs, standing_usd_per_hour), ""
    except SpecError as exc:   # no layout runs on this cluster; anything else is a bug and propagates
        return None, "; ".join(map(str, exc.problems))


def with_headroom(d: Described, headroom_pct: float) -> tuple[Estimate | None, str]:
    """The best layout that leaves `headroom_pct` of each accelerator's HBM free: the same search
    on accelerators with that much less memory. (None, why) when no layout does."""
    tighter = dataclasses.replace(d.hardware, hbm_gib=d.hardware.hbm_gib * (1 - headroom_pct / 100))
    return _estimate_or_refusal(d.workload, tighter, d.storage, d.standing_usd_per_hour)


def storage_superseded(c: Cluster, config: Mapping[str, Any]) -> bool:
    """True when AIC-STO-006 judges storage from the described workload, in the place of AIC-STO-002
    (a per-GPU floor) and AIC-STO-003 (a checkpoint sized from model_params_b)."""
    d, _ = described(c, config)
    return d is not None and d.estimate is not None and d.storage is not None


SUPERSEDED = "superseded by AIC-STO-006 (workload described)"


def _workload_tags(c: Cluster, pool: Pool) -> dict[str, str]:
    """The two workload tags of the pool's anchor, else of another member (a launcher)."""
    for member in [pool.anchor, *pool.members]:
        tags = c.index.tags(member)
        picked = {k: tags[k] for k in (MODEL_TAG, TRAINING_TAG) if k in tags}
        if picked:
            return picked
    return {}


def _jobs(sized: list[tuple[Pool, Workload]], partition_of) -> list[tuple[Pool, Workload, int]]:
    """(pool, workload, count) of each job: the pools one job spans, as the plan's estimate counts
    them, and how many there are.

    - TPU slices: `aicluster` gives every slice of a multi-slice TPU pool its own GKE node pool
      (<pool>-<k>) or Cloud TPU VM, each tagged with the pool's name (aicluster-pool, the Pool key)
      and the workload; the job spans them all (workload_inputs.hardware: from_tpu(chips per
      slice, slices)). Judged one slice at a time, the pack saw 1/N of the chips and no DCN.
    - GPU pools of one Slurm partition (`aicluster-partition` on their templates): NVL72 domains,
      one pool each, that one job spans (`sbatch -N 36 --segment=18`; design/workload.py
      partition_mates).
    Members share the type, the size and the workload; anything else stays a job of its own."""
    jobs: dict[tuple, tuple[Pool, Workload, int]] = {}
    for pool, workload in sized:
        partition = None if pool.tpu else partition_of(pool)
        if pool.tpu:
            group: tuple = ("slices", pool.key, pool.instance.name, pool.nodes, workload)
        elif partition:
            group = ("partition", partition, pool.instance.name, pool.nodes, workload)
        else:
            group = ("pool", id(pool))
        first, _, count = jobs.get(group, (pool, workload, 0))
        jobs[group] = (first, workload, count + 1)
    return list(jobs.values())


def hardware(pool: Pool, slices: int = 1, *, region: str | None = None, capacity: str = "on-demand") -> Hardware:
    """The pool at its node count. GPUs and Trainium: the fabric as wired (EFA devices, GPU NICs).
    TPUs: `slices` slices of the pool's chips each, ICI within a slice and the catalog's DCN
    between slices (as `aicluster plan`). Priced in `region` on `capacity` (catalog.pricing)."""
    if pool.tpu:
        return from_tpu(_tpu_generation(pool), pool.accelerators, slices, region=region, capacity=capacity)
    wired, _ = fabric_gbps(pool.instance, max(0, pool.fabric.wired))
    return from_instance(pool.instance, pool.nodes or 0, wired, region=region, capacity=capacity)


def storage(c: Cluster, pool: Pool, hints: WorkloadShape | None, slices: int = 1) -> Storage | None:
    """The fastest parallel filesystem of known size, bounded by the job's clients' network (every
    node of its `slices` slices)."""
    sized = [f for f in c.parallel_filesystems if f.throughput_mbps]
    if not sized:
        return None
    fs: Filesystem = max(sized, key=lambda f: f.throughput_mbps)
    client = (pool.nodes or 0) * slices * _client_gbps(pool) / 8
    extra = {} if hints is None else {"checkpoint_interval_min": hints.checkpoint_interval_min,
                                      "max_checkpoint_stall_pct": hints.max_checkpoint_stall_pct}
    return Storage(name=fs.key, throughput_gbs=fs.throughput_mbps / 1000,
                   client_gbs=client if client > 0 and client != float("inf") else None, **extra)


def _tpu_generation(pool: Pool) -> TpuGeneration:
    return load_catalog().tpus[host_generation(pool.instance)]


def _client_gbps(pool: Pool) -> float:
    """What one node pushes to the filesystem. A TPU host writes over its data-center network, the
    catalog's DCN per chip x its chips, as the plan's TPU host (aicluster.catalog.tpu_slices.host_instance) counts
    it; a generation without that figure leaves it unbounded (0: no bound)."""
    if not pool.tpu:
        return client_gbps(pool.instance)
    return (_tpu_generation(pool).dcn_gbps_per_chip or 0.0) * pool.instance.accelerator_count


@functools.lru_cache(maxsize=32)
def _estimate(model: ModelShape, training: TrainingShape, hint: LayoutHint, hw: Hardware,
              fs: Storage | None, standing_usd_per_hour: float | None) -> Estimate:
    # Four rules ask for the same estimate of the same stack: the layout search runs once.
    return estimate(model, training, hw, hint=hint, storage=fs, top=1, at="aicluster-training",
                    standing_usd_per_hour=standing_usd_per_hour)
