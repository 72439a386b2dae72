"""AIC-STO-006: the filesystem feeds the described workload's data loader and takes its checkpoints
within the stall budget.

The training model (aicluster.perf; docs/training-model.md) gives the tokens per second the best
layout consumes; at training.bytes_per_token (4: int32 token ids) that is the MB/s the data loader
reads, which the fastest parallel filesystem must supply. A checkpoint (14 bytes per parameter:
bf16 weights, fp32 master weights and Adam moments, after ZeRO, arXiv:1910.02054 section 3.1) is
written at the slower of the filesystem and the pool's clients' network; the write must stay under
the stall budget (default 5 % of a 30 minute interval; the aicluster-checkpoint-interval-min and
aicluster-max-checkpoint-stall-pct tags or this rule's config change them).

Where the workload is described this replaces AIC-STO-002 (a per-GPU floor that knows nothing of
the model) and AIC-STO-003 (checkpoint size from model_params_b alone); with only model_params_b
those two judge and this rule is not applicable.
"""
from __future__ import annotations

from pulumi_policy import EnforcementLevel, Severity, StackValidationPolicy

from ._base import POOL_NODES, cluster, config, not_applicable, schema
from .model.workload import runnable

ID = "AIC-STO-006"
SUPPORTED = ("aws:fsx/lustreFileSystem", "gcp:lustre/instance", "aws:ec2/launchTemplate", "aws:ec2/instance",
             "aws:autoscaling/group", "aws:eks/nodeGroup", "gcp:compute/instance", "gcp:compute/instanceTemplate",
             "gcp:container/nodePool", "gcp:tpu/v2Vm")


def validate(args, report_violation) -> None:
    c, cfg = cluster(args), config(args)
    d, why = runnable(c, cfg)
    if d is None:
        not_applicable(args, why)
        return
    if d.storage is None:
        not_applicable(args, "no parallel filesystem of known size (AIC-STO-001 judges its absence)")
        return
    e = d.estimate
    anchor = next(f.resource.urn for f in c.parallel_filesystems if f.key == d.storage.name)
    fs = f"{d.storage.name} {d.storage.throughput_gbs:.2f} GB/s"
    clients = "" if d.storage.client_gbs is None else f", clients {d.storage.client_gbs:.1f} GB/s"
    dl = e.data_loading
    if dl.filesystem_mb_per_s is not None and dl.mb_per_s > dl.filesystem_mb_per_s:
        report_violation(
            f"{d.label()}: the data loader reads {dl.mb_per_s:,.0f} MB/s ({dl.tokens_per_s:,.0f} tokens/s x "
            f"{d.workload.training.bytes_per_token:g} B) but {fs} gives {dl.filesystem_mb_per_s:,.0f} MB/s", anchor)
    ck = e.checkpoint
    if ck.stall_pct is None:
        report_violation(f"{d.label()}: nothing can write the {ck.size_gb:,.0f} GB checkpoint: 0 GB/s to {fs}", anchor)
    elif ck.stall_pct > ck.budget_pct:
        need = ck.size_gb / (ck.budget_pct / 100 * ck.interval_min * 60)
        report_violation(
            f"{d.label()}: a {ck.size_gb:,.0f} GB checkpoint takes {ck.write_s:,.0f} s to {fs}{clients}, "
            f"{ck.stall_pct:.1f} % of a {ck.interval_min:g} min interval (budget {ck.budget_pct:g} %); needs >= "
            f"{need:.1f} GB/s or a longer interval", anchor)


POLICY = StackValidationPolicy(
    name=ID,
    display_name="workload-storage",
    description="When the workload describes its model, the parallel filesystem supplies the data loader's MB/s "
                "and writes a checkpoint within the stall budget (default 5 % of 30 minutes); replaces AIC-STO-002 "
                "and AIC-STO-003 then.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=(
        "Add filesystem throughput (capacity or a higher per-TiB tier), wire the clients' network (EFA-enabled "
        "FSx), checkpoint less often or asynchronously; the message gives the GB/s the budget needs."),
    config_schema=schema(
        checkpointIntervalMin={"type": "number", "minimum": 0,
                               "description": "Minutes between checkpoints (overrides the tag; default 30)."},
        maxCheckpointStallPct={"type": "number", "minimum": 0, "maximum": 100,
                               "description": "Largest share of the interval a checkpoint write may take "
                                              "(overrides the tag; default 5)."},
        poolNodes=POOL_NODES),
    tags=["storage", "workload", "aws", "gcp"],
    validate=validate,
)
