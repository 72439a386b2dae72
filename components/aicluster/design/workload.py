"""The training model's inputs from a spec and a design: the workload's shapes (perf.ModelShape,
TrainingShape, LayoutHint), the hardware the job runs on and the filesystem it reads data from and
writes checkpoints to. The one place spec sections become perf shapes, so `aicluster plan`,
`aicluster estimate` and the policy pack model the same job."""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from aicluster.design.balance import client_gbps, fabric_gbps
from aicluster.design.standing_cost import standing_cost
from aicluster.errors import Problem, SpecError
from aicluster.design.workload_shapes import shapes, workload_warnings
from aicluster.perf import Estimate, Hardware, Storage, estimate, from_instance, from_tpu

if TYPE_CHECKING:   # design.py imports this module: a runtime import back would be a cycle
    from aicluster.design.model import ClusterDesign
    from aicluster.design.parts import PoolDesign, StorageDesign
    from aicluster.spec.cluster import WorkloadSpec


# --- the hardware and the filesystem -------------------------------------------------------


def accelerator_pools(design: ClusterDesign) -> list[PoolDesign]:
    return [p for p in design.pools if p.instance.accelerator.kind != "cpu" and p.instance.accelerator_count > 0]


def modelled_pool(design: ClusterDesign) -> PoolDesign:
    """The pool the job runs on: the one with most accelerators at max_nodes (a training job
    spans one accelerator type and one fabric: this pool and its partition mates)."""
    pools = accelerator_pools(design)
    if not pools:
        raise SpecError([Problem("pools", [p.name for p in design.pools],
                                 "a pool of accelerators (GPU, Trainium or TPU) for the training model to run on")],
                        subject="workload")
    return max(pools, key=lambda p: (p.accelerators, p.instance.accelerator.bf16_tflops or 0.0))


def partition_mates(design: ClusterDesign, pool: PoolDesign) -> list[PoolDesign]:
    """`pool` and the pools of the same instance type in its Slurm partition: one job spans them
    (NVL72 domains, one pool each, share a partition; `sbatch -N 36 --segment=18`)."""
    return [p for p in design.pools if p is pool or (p.partition_name == pool.partition_name
                                                      and p.instance == pool.instance and p.tpu is None)]


def job_nodes(design: ClusterDesign) -> int:
    """The nodes one job may hold: the modelled pool's and its partition mates' max_nodes."""
    return sum(p.max_nodes for p in partition_mates(design, modelled_pool(design)))


def hardware(design: ClusterDesign) -> tuple[Hardware, tuple[str, ...]]:
    """The largest accelerator pool at max_nodes (with its partition mates), with the fabric
    actually wired, and what the model leaves out."""
    pool = modelled_pool(design)
    mates = partition_mates(design, pool)
    warnings = []
    others = [p for p in accelerator_pools(design) if p not in mates]
    if others:
        where = (f"partition {', '.join(p.name for p in mates)}" if len(mates) > 1 else f"pool {pool.name}")
        warnings.append(f"modelled on {where} ({sum(p.accelerators for p in mates)} accelerators), the largest; "
                        f"{', '.join(p.name for p in others)} not included (a job spans one partition)")
    # Priced where the cluster is, on the pool's capacity type (a spot pool at its region's spot figure).
    if pool.tpu is not None:
        hw = from_tpu(pool.tpu.generation, pool.tpu.chips, max(1, pool.slices), region=design.region,
                      capacity=pool.capacity.type)
        return hw, tuple(warnings)
    wired = pool.efa_devices if design.cloud == "aws" else pool.gpu_nics
    gbps, full = fabric_gbps(pool.instance, wired)
    if pool.max_nodes > 1 and gbps < full:
        what = "EFA devices" if design.cloud == "aws" else "GPU NICs"
        warnings.append(f"pool {pool.name} wires {gbps:g} of {full:g} Gbps of {what} per node: inter-node "
                        "collectives are modelled at what is wired")
    return from_instance(pool.instance, sum(p.max_nodes for p in mates), gbps, region=design.region,
                         capacity=pool.capacity.type), tuple(warnings)


def _parallel_filesystems(design: ClusterDesign) -> list[StorageDesign]:
    # Filestore and EFS (NFS) hold homes, not training data or checkpoints (as in balance.from_design).
    return [s for s in design.storage if s.kind not in ("filestore", "efs") and s.throughput_mbps > 0]


def storage(design: ClusterDesign, workload: WorkloadSpec | None = None) -> Storage | None:
    """The fastest parallel filesystem, bounded by what the modelled pool's nodes can push to it;
    checkpoint interval and stall budget from `workload` (default: the design's)."""
    filesystems = _parallel_filesystems(design)
    if not filesystems:
        return None
    fs = max(filesystems, key=lambda s: s.throughput_mbps)
    ws = workload if workload is not None else design.workload
    # Only the job's own nodes write its checkpoints: one partition's pools of one type (see
    # partition_mates). Clients: a node's storage bandwidth in Gbps / 8 = GB/s (balance.client_gbps
    # has the sources).
    pool = modelled_pool(design)
    client = job_nodes(design) * client_gbps(pool.instance) / 8
    extra = {} if ws is None else {"checkpoint_interval_min": ws.checkpoint_interval_min,
                                   "max_checkpoint_stall_pct": ws.max_checkpoint_stall_pct}
    return Storage(name=fs.name, throughput_gbs=fs.throughput_mbps / 1000, client_gbs=client if client > 0 else None,
                   **extra)


def estimate_for(ws: WorkloadSpec, hw: Hardware, fs: Storage | None, *, top: int = 3,
                 warnings: tuple[str, ...] = (), prefix: str = "workload.",
                 standing_usd_per_hour: float | None = None) -> Estimate:
    """The training model's answer for `ws` on `hw`; SpecError when nothing fits. `prefix` is
    where the workload's sections sit in the YAML ("workload." in a spec, "" in a workload file);
    `standing_usd_per_hour` what the cluster pays beside its accelerators (None: a cluster on paper)."""
    found = shapes(ws)
    if found is None:
        raise SpecError([Problem(f"{prefix}model", None, "a model section (layers, hidden, heads, ffn_hidden, "
                                 "vocab, seq_len): model_params_b alone gives no step time")], subject="workload")
    model, training, hint = found
    result = estimate(model, training, hw, hint=hint, storage=fs, top=top, at=f"{prefix}parallelism",
                      standing_usd_per_hour=standing_usd_per_hour)
    extra = warnings + workload_warnings(ws)
    return dataclasses.replace(result, warnings=extra + tuple(result.warnings)) if extra else result


def estimate_design(design: ClusterDesign, top: int = 3) -> Estimate | None:
    """The estimate `aicluster plan` shows: the design's workload on its largest accelerator pool;
    None without a described model."""
    ws = design.workload
    if ws is None or ws.model is None:
        return None
    hw, warnings = hardware(design)
    return estimate_for(ws, hw, storage(design), top=top, warnings=warnings,
                        standing_usd_per_hour=standing_cost(design).usd_per_hour)
