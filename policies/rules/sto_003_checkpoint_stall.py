"""AIC-STO-003: a checkpoint write stays under a share of the checkpoint interval.

Checkpoint = parameters x 14 bytes (weights, fp32 master weights, Adam moments; derived from ZeRO, arXiv:1910.02054 section 3.1);
write time = size / the slower of the filesystem and the clients' network; stall = write time /
interval. Hints (model size, interval, budget) come from the policy config or from the
aicluster-model-params-b, aicluster-checkpoint-interval-min and aicluster-max-checkpoint-stall-pct
tags on a pool's launch template or a filesystem. `aicluster.design.balance.assess` computes the verdict.

Where the workload describes its model (tags aicluster-model and aicluster-training) AIC-STO-006
judges storage from the training model instead, and this rule is not applicable.
"""
from __future__ import annotations

from pulumi_policy import EnforcementLevel, Severity, StackValidationPolicy

from aicluster.design.balance import CHECKPOINT_BYTES_PER_PARAM, assess

from ._base import MODEL_PARAMS_B, POOL_NODES, cluster, config, not_applicable, number_or, schema
from .model.workload import SUPERSEDED, storage_superseded

ID = "AIC-STO-003"
SUPPORTED = ("aws:fsx/lustreFileSystem", "gcp:lustre/instance", "aws:ec2/launchTemplate", "aws:ec2/instance",
             "aws:autoscaling/group", "aws:eks/nodeGroup", "gcp:compute/instanceTemplate", "gcp:container/nodePool",
             "gcp:tpu/v2Vm")


def validate(args, report_violation) -> None:
    c, cfg = cluster(args), config(args)
    if storage_superseded(c, cfg):
        not_applicable(args, SUPERSEDED)
        return
    workload, source = c.workload(cfg)
    filesystems = [f for f in c.parallel_filesystems if f.throughput_mbps is not None]
    if workload is None or not filesystems or not c.sized_pools:
        not_applicable(args, source if workload is None else
                       "no parallel filesystem of known size" if not filesystems else "no pool of known size")
        return
    bpp = number_or(cfg, "checkpointBytesPerParam", CHECKPOINT_BYTES_PER_PARAM)
    b = assess([p.shape() for p in c.sized_pools], [f.shape() for f in filesystems], workload,
               checkpoint_bytes_per_param=bpp)
    if b.checkpoint_within_budget is not False:
        return
    finding = next((f for f in b.findings if f.startswith(("checkpoint of", "nothing can write"))), "")
    report_violation(
        f"{workload.model_params_b:g}B parameters x {bpp:g} B = {b.checkpoint_gb:,.0f} GB per checkpoint ({source}): "
        f"{finding}", filesystems[0].resource.urn)


POLICY = StackValidationPolicy(
    name=ID,
    display_name="checkpoint-stall-budget",
    description="When workload hints exist, writing a checkpoint takes at most a configurable share of the "
                "checkpoint interval (default 5 % of 30 minutes).",
    severity=Severity.MEDIUM,
    enforcement_level=EnforcementLevel.ADVISORY,
    remediation_steps=(
        "Add filesystem throughput (capacity or a higher tier), checkpoint less often, or shard checkpoints "
        "asynchronously; the message gives the GB/s the budget needs."),
    config_schema=schema(
        modelParamsB=MODEL_PARAMS_B,
        checkpointIntervalMin={"type": "number", "minimum": 0,
                               "description": "Minutes between checkpoints (overrides the tag; default 30)."},
        maxCheckpointStallPct={"type": "number", "minimum": 0, "maximum": 100,
                               "description": "Largest share of wall time a checkpoint may take (overrides the tag; default 5)."},
        checkpointBytesPerParam={"type": "number", "minimum": 0, "default": CHECKPOINT_BYTES_PER_PARAM,
                                 "description": "Checkpoint bytes per parameter (14: weights + fp32 master + Adam moments)."},
        poolNodes=POOL_NODES),
    tags=["storage", "balance", "aws", "gcp"],
    validate=validate,
)
