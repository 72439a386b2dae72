"""AIC-MEM-002: the described workload's best layout fits each accelerator's memory, with headroom.

Where the workload describes its model (tags aicluster-model and aicluster-training, written by
`aicluster` from the spec's workload.model, workload.training and workload.parallelism), the
training model (aicluster.perf; docs/training-model.md) searches the parallel layouts and counts,
per accelerator on the busiest pipeline stage, weights, gradients, optimizer states, activations
and buffers. Some layout must leave a configurable share of HBM free (default 10 %: allocator
fragmentation and the spikes a model of averages does not see, an aicluster design choice): the
same search runs on accelerators with that much less memory. The fastest layout may pack memory
tighter (recompute none); that is fine as long as a roomier one exists. A workload no layout can
run at all (nothing fits, or the fixed layout cannot work) fails too.

With only model_params_b the rule is not applicable: AIC-MEM-001 judges aggregate memory then.
"""
from __future__ import annotations

from pulumi_policy import EnforcementLevel, Severity, StackValidationPolicy

from ._base import POOL_NODES, cluster, config, not_applicable, number_or, schema
from .model.workload import described, with_headroom

ID = "AIC-MEM-002"
SUPPORTED = ("aws:ec2/launchTemplate", "aws:ec2/instance", "aws:autoscaling/group", "aws:eks/nodeGroup",
             "gcp:compute/instance", "gcp:compute/instanceTemplate", "gcp:container/nodePool", "gcp:tpu/v2Vm")
DEFAULT_MIN_HEADROOM_PCT = 10


def validate(args, report_violation) -> None:
    c, cfg = cluster(args), config(args)
    d, why = described(c, cfg)
    if d is None:
        not_applicable(args, why)
        return
    anchor = d.pool.anchor.urn
    if d.estimate is None:
        report_violation(f"{d.label()}: no layout runs: {d.refused}", anchor)
        return
    floor = number_or(cfg, "minHeadroomPct", DEFAULT_MIN_HEADROOM_PCT)
    roomy, _ = with_headroom(d, floor)
    if roomy is not None:
        return
    m = d.estimate.best.memory
    report_violation(
        f"{d.label()}: no layout leaves {floor:g} % of HBM free; the best that fits ({d.layout()}) uses "
        f"{m.total:.1f} of {m.capacity:.1f} GiB per accelerator (weights {m.weights:.1f} + gradients "
        f"{m.gradients:.1f} + optimizer {m.optimizer:.1f} + activations {m.activations:.1f} + buffers "
        f"{m.buffers:.1f}), {m.headroom_pct:.1f} % free", anchor)

POLICY = StackValidationPolicy(
    name=ID,
    display_name="layout-fits-hbm",
    description="When the workload describes its model, some parallel layout fits each accelerator's HBM with a "
                "configurable headroom (default 10 %); a workload no layout can run fails.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=(
        "Add nodes (more data-parallel and sharding room), use accelerators with more HBM, or relax what "
        "workload.parallelism fixes (a higher zero_stage, full recompute, a smaller micro_batch, more pp); "
        "`aicluster estimate` shows the memory of every candidate layout."),
    config_schema=schema(
        minHeadroomPct={"type": "number", "minimum": 0, "maximum": 95, "default": DEFAULT_MIN_HEADROOM_PCT,
                        "description": "Share of each accelerator's HBM some layout must leave free."},
        poolNodes=POOL_NODES),
    tags=["memory", "workload", "aws", "gcp"],
    validate=validate,
)
