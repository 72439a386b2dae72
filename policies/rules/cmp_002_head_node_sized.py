"""AIC-CMP-002: the Slurm head node (controller) is sized for the node count.

The head node is the aws:ec2/instance (or GCE instance) tagged aicluster-role=head (or
control-plane). Its size comes from the catalog (`controller_types`, or any catalog type), or from
the config's `instanceTypes` for other types.

The thresholds are an aicluster design choice, not a sourced figure, and live in the config
(`sizing`): slurmctld keeps every node and job record in memory and answers every node's RPCs
(registrations arrive in bursts when hundreds of cloud nodes resume at once); the head also runs
slurmdbd and its database, munge, the resume/suspend programs that call the cloud API, and often
the NFS export of /home. Default rows: up to 64 nodes 4 vCPU / 16 GiB (m7i.xlarge), 256 nodes
8 / 32, 1024 nodes 16 / 64, 4096 nodes 32 / 128, beyond that 64 / 256.
"""
from __future__ import annotations

from pulumi_policy import EnforcementLevel, Severity, StackValidationPolicy

from aicluster.catalog import load_catalog

from ._base import POOL_NODES, cluster, config, not_applicable, schema
from ._props import get, integer, number

ID = "AIC-CMP-002"
SUPPORTED = ("aws:ec2/instance", "gcp:compute/instance", "aws:ec2/launchTemplate", "aws:autoscaling/group",
             "aws:eks/nodeGroup", "gcp:container/nodePool")
DEFAULT_SIZING = [
    {"maxNodes": 64, "minVcpu": 4, "minMemoryGib": 16},
    {"maxNodes": 256, "minVcpu": 8, "minMemoryGib": 32},
    {"maxNodes": 1024, "minVcpu": 16, "minMemoryGib": 64},
    {"maxNodes": 4096, "minVcpu": 32, "minMemoryGib": 128},
    {"maxNodes": 1000000, "minVcpu": 64, "minMemoryGib": 256},
]


def _facts(name: str, extra: dict) -> tuple[float, float] | None:
    catalog = load_catalog()
    if name in catalog.controllers:
        c = catalog.controllers[name]
        return c.vcpu, c.memory_gib
    it = catalog.find(name)
    if it is not None and it.vcpu and it.memory_gib:
        return it.vcpu, it.memory_gib
    given = extra.get(name)
    if isinstance(given, dict) and number(given.get("vcpu")) and number(given.get("memoryGib")):
        return number(given["vcpu"]), number(given["memoryGib"])
    return None


def validate(args, report_violation) -> None:
    c, cfg = cluster(args), config(args)
    if not c.heads:
        not_applicable(args, "no head node (an instance tagged aicluster-role=head)")
        return
    nodes = c.nodes
    sizing = sorted(cfg.get("sizing") or DEFAULT_SIZING, key=lambda row: number(row.get("maxNodes")) or 0)
    row = next((r for r in sizing if nodes <= (number(r.get("maxNodes")) or 0)), sizing[-1])
    unsized = [p.key for p in c.unsized_pools]
    for head in c.heads:
        itype = get(c.index.props(head), "instanceType") or get(c.index.props(head), "machineType")
        if isinstance(itype, str):
            message = _judge(head.name, itype, nodes, row, unsized, cfg.get("instanceTypes") or {})
            if message:
                report_violation(message, head.urn)


def _judge(head: str, itype: str, nodes: int, row: dict, unsized: list[str], extra: dict) -> str | None:
    """Why head node `head` of type `itype` is too small for `nodes` compute nodes (sizing `row`); None if not."""
    need_cpu, need_mem = number(row.get("minVcpu")) or 0, number(row.get("minMemoryGib")) or 0
    facts = _facts(itype.split("/")[-1], extra)
    if facts is None:
        return (f"head node {head}: instance type {itype} is not in the catalog; add its vCPU and "
                f"memory to this rule's config `instanceTypes` to size it for {nodes} nodes")
    cpu, mem = facts
    if cpu < need_cpu or mem < need_mem:
        return (f"head node {head}: {itype} has {cpu:g} vCPU / {mem:g} GiB; {nodes} compute nodes "
                f"(up to {integer(row.get('maxNodes'))}) need >= {need_cpu:g} vCPU / {need_mem:g} GiB"
                + (f" (pools of unknown size not counted: {', '.join(unsized)})" if unsized else ""))
    return None


POLICY = StackValidationPolicy(
    name=ID,
    display_name="head-node-sized",
    description="The Slurm head node has the vCPUs and memory the cluster's node count needs (thresholds in config).",
    severity=Severity.MEDIUM,
    enforcement_level=EnforcementLevel.ADVISORY,
    remediation_steps=(
        "Choose a larger head node type (m7i.2xlarge for up to 256 nodes, m7i.4xlarge up to 1024, ...; "
        "`aicluster catalog` lists controller types), or set the thresholds in this rule's `sizing` config."),
    config_schema=schema(
        sizing={"type": "array", "default": DEFAULT_SIZING,
                "items": {"type": "object", "required": ["maxNodes", "minVcpu", "minMemoryGib"],
                          "properties": {"maxNodes": {"type": "integer", "minimum": 1},
                                         "minVcpu": {"type": "number", "minimum": 1},
                                         "minMemoryGib": {"type": "number", "minimum": 1}}},
                "description": "Rows of (maxNodes, minVcpu, minMemoryGib); the first row whose maxNodes >= the "
                               "cluster's compute nodes applies."},
        instanceTypes={"type": "object",
                       "additionalProperties": {"type": "object", "required": ["vcpu", "memoryGib"],
                                                "properties": {"vcpu": {"type": "number"},
                                                               "memoryGib": {"type": "number"}}},
                       "description": "vCPU and memory of head node types the catalog does not hold."},
        poolNodes=POOL_NODES),
    tags=["compute", "slurm", "aws", "gcp"],
    validate=validate,
)
