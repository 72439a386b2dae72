"""AIC-NET-006: the described workload's model-parallel group stays inside one NVLink domain.

The training model (aicluster.perf; docs/training-model.md) picks the best layout of the described
workload on the pool as wired. Its model-parallel group, tp x cp x ep consecutive ranks (the
expert all-to-all spans all three, the context ring tp x cp, the tensor-parallel collectives tp),
sits on every layer's critical path: inside one NVLink domain (the 8 GPUs of an HGX node, the 72
of a GB200/GB300 NVL72 rack, a TPU slice's ICI) it runs at NVLink speed, across a domain boundary
at the NICs' (an order of magnitude slower). A group larger than the domain, or one that does not
divide the ranks each domain holds (16 consecutive ranks of a 72-GPU domain straddle two), crosses.
The layout the workload fixes (workload.parallelism) is the usual cause: the search itself
prefers groups that fit, and warns when even its best does not.

Not applicable with only model_params_b (no layout without the model) or when no layout runs
(AIC-MEM-002 reports that).
"""
from __future__ import annotations

from pulumi_policy import EnforcementLevel, Severity, StackValidationPolicy

from aicluster.perf.hardware import placements
from aicluster.perf.nvlink import crossing

from ._base import POOL_NODES, cluster, config, not_applicable, schema
from .model.workload import runnable

ID = "AIC-NET-006"
SUPPORTED = ("aws:ec2/launchTemplate", "aws:ec2/instance", "aws:autoscaling/group", "aws:eks/nodeGroup",
             "gcp:compute/instance", "gcp:compute/instanceTemplate", "gcp:container/nodePool", "gcp:tpu/v2Vm")


def validate(args, report_violation) -> None:
    c, cfg = cluster(args), config(args)
    d, why = runnable(c, cfg)
    if d is None:
        not_applicable(args, why)
        return
    # The estimate may have placed the job on part of each NVL72 domain: judge that placement.
    placed = next((hw for hw in placements(d.hardware) if hw.name == d.estimate.hardware), d.hardware)
    warning = crossing(placed, d.estimate.best.layout)
    if warning:
        report_violation(f"{d.label()}: best layout {d.layout()}: {warning}", d.pool.anchor.urn)


POLICY = StackValidationPolicy(
    name=ID,
    display_name="model-parallel-in-nvlink-domain",
    description="When the workload describes its model, the best layout's model-parallel group (tp x cp x ep) "
                "stays inside one NVLink domain (an HGX node's 8 GPUs, an NVL72 rack's 72), so tensor, context "
                "and expert parallel traffic runs on NVLink rather than the NICs.",
    severity=Severity.MEDIUM,
    enforcement_level=EnforcementLevel.ADVISORY,
    remediation_steps=(
        "Lower the fixed tp, cp or ep in workload.parallelism until tp x cp x ep divides the GPUs of one NVLink "
        "domain (move the rest to dp or pp), or choose an instance type with a larger NVLink domain (GB200/GB300 "
        "NVL72: 72 GPUs); the message names the group, the domain and the traffic that leaves it."),
    config_schema=schema(poolNodes=POOL_NODES),
    tags=["network", "workload", "aws", "gcp"],
    validate=validate,
)
