"""AIC-NET-005: the described workload's exposed communication stays under a share of step time.

The training model (aicluster.perf; docs/training-model.md) times one step of the best layout on
the fabric the stack actually wires (EFA devices on AWS, GPU NICs on GCP, ICI and DCN on TPU) and
splits it into compute, pipeline bubble, optimizer and the communication that compute does not
hide: tensor-parallel (exposed_tp), data-parallel gradient reduction (exposed_dp), pipeline
point-to-point (p2p) and context/expert-parallel exchanges (exposed_cp_ep). Their sum must stay
under a configurable share of the step (default 25 %: past that, the fabric, not the
accelerators, sets the pace; an aicluster design choice).

Not applicable with only model_params_b (no step time without the model) or when no layout runs
(AIC-MEM-002 reports that).
"""
from __future__ import annotations

from pulumi_policy import EnforcementLevel, Severity, StackValidationPolicy

from ._base import POOL_NODES, cluster, config, not_applicable, number_or, schema
from .model.workload import runnable

ID = "AIC-NET-005"
SUPPORTED = ("aws:ec2/launchTemplate", "aws:ec2/instance", "aws:autoscaling/group", "aws:eks/nodeGroup",
             "gcp:compute/instance", "gcp:compute/instanceTemplate", "gcp:container/nodePool", "gcp:tpu/v2Vm")
DEFAULT_MAX_EXPOSED_PCT = 25


def validate(args, report_violation) -> None:
    c, cfg = cluster(args), config(args)
    d, why = runnable(c, cfg)
    if d is None:
        not_applicable(args, why)
        return
    ceiling = number_or(cfg, "maxExposedCommPct", DEFAULT_MAX_EXPOSED_PCT)
    best = d.estimate.best
    b = best.breakdown
    parts = {"tensor-parallel": b.exposed_tp, "data-parallel": b.exposed_dp, "pipeline p2p": b.p2p,
             "context/expert-parallel": b.exposed_cp_ep}
    exposed = sum(parts.values())
    pct = 100 * exposed / best.step_time_s if best.step_time_s > 0 else 0.0
    if pct <= ceiling:
        return
    shown = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in parts.items() if seconds > 0)
    report_violation(
        f"{d.label()}: {exposed:.2f} s of a {best.step_time_s:.2f} s step is exposed communication ({shown}), "
        f"{pct:.0f} % > {ceiling:g} %, with {d.hardware.scale_out_gbps_per_node:g} Gbps wired per node between "
        f"{'slices' if d.pool.tpu else 'nodes'} (best layout {d.layout()}, bound: {best.bound})",
        d.pool.anchor.urn)


POLICY = StackValidationPolicy(
    name=ID,
    display_name="exposed-communication",
    description="When the workload describes its model, communication the best layout cannot hide behind compute "
                "(tensor, data, pipeline, context and expert parallel) stays under a configurable share of the "
                "step time (default 25 %).",
    severity=Severity.MEDIUM,
    enforcement_level=EnforcementLevel.ADVISORY,
    remediation_steps=(
        "Wire the whole fabric (every EFA device, every GPU NIC; AIC-NET-001), keep tensor parallelism inside a "
        "node, choose instances with more inter-node bandwidth, or raise the global batch so each step computes "
        "longer per byte exchanged; the message splits the exposed time by kind."),
    config_schema=schema(
        maxExposedCommPct={"type": "number", "minimum": 0, "maximum": 100, "default": DEFAULT_MAX_EXPOSED_PCT,
                           "description": "Largest share of the step time exposed communication may take."},
        poolNodes=POOL_NODES),
    tags=["network", "workload", "aws", "gcp"],
    validate=validate,
)
