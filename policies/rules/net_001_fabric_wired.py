"""AIC-NET-001: a multi-node pool of EFA- or RDMA-capable nodes wires every fabric device its type has.

AWS: one EFA device on every EFA-capable network card (catalog `efa_cards`, from
DescribeInstanceTypes); both the current layout (ENA primary + `efa-only`) and the older all-`efa`
layout count. GCP: every GPU NIC (catalog `gpu_nics`; MRDMA NICs on RDMA types). NCCL silently
falls back to fewer rails when a card has no device: a p5 with one EFA device gets 1/32 of its
fabric (docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html; SkyPilot #8391).
"""
from __future__ import annotations

from pulumi_policy import EnforcementLevel, Severity, StackValidationPolicy

from aicluster.design.balance import assess

from ._base import POOL_NODES, cluster, not_applicable, schema
from ._props import ranges

ID = "AIC-NET-001"
SUPPORTED = ("aws:ec2/launchTemplate", "aws:ec2/instance", "aws:ec2/networkInterface", "aws:autoscaling/group",
             "aws:eks/nodeGroup", "gcp:compute/instance", "gcp:compute/instanceTemplate", "gcp:container/nodePool")


def unit(it) -> str:
    return "GPU" if it.accelerator.kind == "gpu" else "accelerator"


def validate(args, report_violation) -> None:
    c = cluster(args)
    judged = [p for p in c.pools if p.fabric_capable and p.multi_node]
    if not judged:
        not_applicable(args, "no pool of two or more EFA- or RDMA-capable nodes")
        return
    balance = assess([p.shape() for p in judged], [])   # the shared model: wired Gbps and share
    for pool, pb in zip(judged, balance.pools):
        it = pool.instance
        if pool.cloud == "aws":
            need = len(it.efa_cards)
            if pool.fabric.wired >= need:
                continue
            missing = sorted(set(it.efa_cards) - set(pool.fabric.cards))
            layout = {"efa-only": "ENA + efa-only layout", "efa": "all-efa layout", "mixed": "mixed layout"}.get(
                pool.fabric.layout, "no EFA interface")
            report_violation(
                f"{pool.label()}: {pool.fabric.wired} of {need} EFA devices wired ({layout}) = "
                f"{pb.fabric_gbps_per_accelerator:.0f} Gbps per {unit(it)}, "
                f"{pb.fabric_fraction_wired:.0%} of {it.name}'s {it.fabric_gbps:g} Gbps fabric; "
                f"no EFA device on network card(s) {ranges(missing)}", pool.anchor.urn)
        else:
            need = it.gpu_nics
            if pool.fabric.wired >= need:
                continue
            report_violation(
                f"{pool.label()}: {pool.fabric.wired} of {need} GPU NICs wired ({pool.fabric.detail}) = "
                f"{pb.fabric_gbps_per_accelerator:.0f} Gbps per GPU, {pb.fabric_fraction_wired:.0%} of "
                f"{it.name}'s {it.gpu_network_gbps:g} Gbps GPU network", pool.anchor.urn)


POLICY = StackValidationPolicy(
    name=ID,
    display_name="fabric-fully-wired",
    description="A pool of two or more EFA- or RDMA-capable nodes wires every fabric device its instance type has.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=(
        "AWS: in the launch template add an ENA interface (card 0, device 0), an efa-only interface at card 0 "
        "device 1 and an efa-only interface at device 0 of every other EFA-capable card (`aicluster catalog "
        "<type>` lists them); the older layout with every interface of type efa is accepted too. GCP: attach one "
        "NIC per GPU NIC of the machine type (MRDMA on A3 Ultra / A4), or additional node networks on GKE."),
    config_schema=schema(poolNodes=POOL_NODES),
    tags=["network", "fabric", "aws", "gcp"],
    validate=validate,
)
