"""AIC-STO-002: aggregate filesystem throughput per GPU meets a floor.

Aggregate throughput = capacity TiB x per-TiB throughput (FSx PerUnitStorageThroughput, the SCRATCH
baseline from the catalog, Managed Lustre perUnitStorageThroughput). The default floor is the DGX
SuperPOD "good" aggregate read, 15 GB/s per 32-node unit of 256 GPUs = 58.6 MB/s per GPU
(NVIDIA DGX SuperPOD Reference Architecture RA-11333-001 V11; `aicluster.design.balance.GOOD_READ_MBPS_PER_ACCELERATOR`). The verdict is
`aicluster.design.balance.assess`'s, the model `aicluster plan` reports.

Where the workload describes its model (tags aicluster-model and aicluster-training) AIC-STO-006
judges storage from the training model instead, and this rule is not applicable.
"""
from __future__ import annotations

from pulumi_policy import EnforcementLevel, Severity, StackValidationPolicy

from aicluster.design.balance import GOOD_READ_MBPS_PER_ACCELERATOR, assess

from ._base import POOL_NODES, cluster, config, gpus, not_applicable, number_or, schema
from .model.workload import SUPERSEDED, storage_superseded

ID = "AIC-STO-002"
SUPPORTED = ("aws:fsx/lustreFileSystem", "gcp:lustre/instance", "aws:ec2/launchTemplate", "aws:ec2/instance",
             "aws:autoscaling/group", "aws:eks/nodeGroup", "gcp:compute/instance", "gcp:compute/instanceTemplate",
             "gcp:container/nodePool")


def validate(args, report_violation) -> None:
    c, cfg = cluster(args), config(args)
    if storage_superseded(c, cfg):
        not_applicable(args, SUPERSEDED)
        return
    floor = number_or(cfg, "floorMbpsPerAccelerator", GOOD_READ_MBPS_PER_ACCELERATOR)
    pools = [p for p in c.sized_pools if not p.tpu]
    filesystems = [f for f in c.parallel_filesystems if f.throughput_mbps is not None]
    if not pools or not filesystems:
        not_applicable(args, "no GPU or Trainium pool of known size" if not pools else
                       "no parallel filesystem of known size (AIC-STO-001 judges its absence)")
        return
    b = assess([p.shape() for p in pools], [f.shape() for f in filesystems], floor_mbps_per_accelerator=floor)
    if b.fs_meets_floor is not False:
        return
    report_violation(_message(b, pools, filesystems, floor), filesystems[0].resource.urn)


def _message(b, pools, filesystems, floor: float) -> str:
    unit = gpus(pools)
    parts = ", ".join(f"{f.key} {f.capacity_gib:g} GiB x {f.throughput_mbps_per_tib:g} MB/s/TiB" for f in filesystems)
    fix = next((f.split("floor: ", 1)[-1] for f in b.findings if f.startswith("filesystem gives")), "")
    return (f"{b.fs_throughput_gbs:.2f} GB/s for {b.accelerators} {unit}s = {b.fs_mbps_per_accelerator:.2f} MB/s per "
            f"{unit} < {floor:.1f} MB/s floor ({parts}; {', '.join(f'{p.nodes} x {p.instance.name}' for p in pools)})"
            + (f"; {fix}" if fix else ""))


POLICY = StackValidationPolicy(
    name=ID,
    display_name="storage-throughput-floor",
    description="Aggregate parallel-filesystem throughput per GPU meets a floor (default 58.6 MB/s per GPU, the "
                "DGX SuperPOD 'good' read figure).",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=(
        "Raise the filesystem's capacity or its per-TiB throughput tier (FSx PERSISTENT_2: 125, 250, 500, 1000 "
        "MB/s/TiB) until capacity TiB x tier / GPUs reaches the floor; the message names the sizes that do."),
    config_schema=schema(
        floorMbpsPerAccelerator={"type": "number", "minimum": 0, "default": GOOD_READ_MBPS_PER_ACCELERATOR,
                                 "description": "Floor in MB/s of aggregate filesystem throughput per GPU."},
        poolNodes=POOL_NODES),
    tags=["storage", "balance", "aws", "gcp"],
    validate=validate,
)
