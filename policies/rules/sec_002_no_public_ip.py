"""AIC-SEC-002: compute nodes have no public IP.

Compute nodes reach the internet through NAT and are reached through the head node or SSM, never
directly. Judged: launch templates (every interface's associatePublicIpAddress), accelerated or
compute-tagged instances, GCE instances and templates (accessConfigs), GKE node pools (private
nodes off) and Cloud TPU VMs (enableExternalIps). Resources tagged aicluster-role head, login or
control-plane are not compute nodes and are not judged here.
"""
from __future__ import annotations

from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, Severity

from aicluster.catalog import load_catalog

from ._base import schema
from ._props import ROLE, get, integer, items, kind, plain, tags_of, truthy

ID = "AIC-SEC-002"
SUPPORTED = ("aws:ec2/launchTemplate", "aws:ec2/instance", "gcp:compute/instance", "gcp:compute/instanceTemplate",
             "gcp:container/nodePool", "gcp:tpu/v2Vm")
_NOT_COMPUTE = ("head", "login", "control-plane", "network", "storage")


def _is_compute(p, resource_type: str) -> bool:
    role = tags_of(p, resource_type).get(ROLE)
    if role:
        return role == "compute"
    if kind(resource_type) in ("aws:ec2/launchTemplate", "gcp:compute/instanceTemplate", "gcp:container/nodePool",
                               "gcp:tpu/v2Vm"):
        return True   # templates and node pools exist to launch nodes
    machine = get(p, "instanceType") or get(p, "machineType")
    return isinstance(machine, str) and load_catalog().find(machine) is not None


def _launch_template(p) -> list[str]:
    return [f"networkInterfaces[{i}] (card {integer(get(n, 'networkCardIndex')) or 0})"
            for i, n in enumerate(items(p, "networkInterfaces")) if truthy(get(n, "associatePublicIpAddress"))]


def _instance(p) -> list[str]:
    return ["associatePublicIpAddress"] if truthy(get(p, "associatePublicIpAddress")) else []


def _gce(p) -> list[str]:
    return [f"networkInterfaces[{i}].accessConfigs" for i, n in enumerate(items(p, "networkInterfaces"))
            if items(n, "accessConfigs") or items(n, "ipv6AccessConfigs")]


def _node_pool(p) -> list[str]:
    return ["networkConfig.enablePrivateNodes = false"] if truthy(get(p, "networkConfig", "enablePrivateNodes")) is False else []


def _tpu_vm(p) -> list[str]:
    return ["networkConfig.enableExternalIps"] if truthy(get(p, "networkConfig", "enableExternalIps")) else []


PUBLIC_IPS = dict(zip(SUPPORTED, (_launch_template, _instance, _gce, _gce, _node_pool, _tpu_vm)))


def validate(args, report_violation) -> None:
    k = kind(args.resource_type)
    if k not in SUPPORTED:
        return
    p = plain(args.props)
    if not _is_compute(p, args.resource_type):
        return
    where = PUBLIC_IPS[k](p)
    if where:
        report_violation(f"{k} {args.name!r} gives compute nodes a public IP: {', '.join(where)}", None)


POLICY = ResourceValidationPolicy(
    name=ID,
    display_name="no-public-ip-on-compute",
    description="Compute nodes (launch templates, instances, GCE templates, node pools, TPU VMs) get no public IP.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=(
        "AWS: associate_public_ip_address='false' on every launch-template interface (a string in pulumi_aws v7) and "
        "a private subnet with a NAT gateway. GCP: no access_configs on the NICs (Cloud NAT for egress), "
        "enable_private_nodes on GKE, enable_external_ips=False on TPU VMs."),
    config_schema=schema(),
    tags=["security", "aws", "gcp"],
    validate=validate,
)
