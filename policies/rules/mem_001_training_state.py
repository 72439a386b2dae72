"""AIC-MEM-001: the full training state fits in aggregate accelerator memory, with headroom.

Mixed-precision Adam keeps 16 bytes per parameter (fp16 weights 2 + fp16 gradients 2 + fp32
weights, momentum and variance 12; ZeRO, arXiv:1910.02054 section 3.1). Fully sharded (ZeRO-3 /
FSDP), that state still has to fit in the HBM of all accelerators together, with room left for
activations and buffers (default 20 %, an aicluster design choice). The model size comes from the
policy config or the aicluster-model-params-b tag; `aicluster.design.balance.assess` gives the verdict.
"""
from __future__ import annotations

from pulumi_policy import EnforcementLevel, Severity, StackValidationPolicy

from aicluster.design.balance import DEFAULT_MEMORY_HEADROOM_PCT, assess

from ._base import MODEL_PARAMS_B, POOL_NODES, cluster, config, gpus, not_applicable, number_or, schema

ID = "AIC-MEM-001"
SUPPORTED = ("aws:ec2/launchTemplate", "aws:ec2/instance", "aws:autoscaling/group", "aws:eks/nodeGroup",
             "gcp:compute/instance", "gcp:compute/instanceTemplate", "gcp:container/nodePool", "gcp:tpu/v2Vm",
             "aws:fsx/lustreFileSystem", "gcp:lustre/instance")


def validate(args, report_violation) -> None:
    c, cfg = cluster(args), config(args)
    workload, source = c.workload(cfg)
    pools = c.sized_pools
    if workload is None or not pools:
        not_applicable(args, source if workload is None else "no accelerator pool of known size")
        return
    headroom = number_or(cfg, "memoryHeadroomPct", DEFAULT_MEMORY_HEADROOM_PCT)
    b = assess([p.shape() for p in pools], [], workload, memory_headroom_pct=headroom)
    if b.training_state_fits is not False:
        return
    finding = next((f for f in b.findings if f.startswith("training state")), "")
    unit = gpus(pools)
    report_violation(
        f"{workload.model_params_b:g}B parameters ({source}) on {', '.join(f'{p.nodes} x {p.instance.name}' for p in pools)} "
        f"= {b.accelerators} {unit}s with {b.hbm_gib:,.0f} GiB HBM: {finding}", pools[0].anchor.urn)


POLICY = StackValidationPolicy(
    name=ID,
    display_name="training-state-fits",
    description="The full training state (16 bytes per parameter) fits in the accelerators' aggregate memory, "
                "keeping a configurable headroom (default 20 %) for activations.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=(
        "Add nodes (raise the pool's max nodes) or use accelerators with more memory (H200, B200); the message "
        "gives the HBM the model needs. Offloading optimizer state to host memory is the other way out."),
    config_schema=schema(
        modelParamsB=MODEL_PARAMS_B,
        memoryHeadroomPct={"type": "number", "minimum": 0, "maximum": 95, "default": DEFAULT_MEMORY_HEADROOM_PCT,
                           "description": "Share of aggregate accelerator memory kept free for activations."},
        poolNodes=POOL_NODES),
    tags=["memory", "balance", "aws", "gcp"],
    validate=validate,
)
