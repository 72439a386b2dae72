"""AIC-STO-004: FSx for Lustre (and Managed Lustre) capacity and throughput combinations are valid.

The rules come from the catalog (`components/aicluster/catalog/storage.yaml`, from the FSx API reference and
ParallelCluster's FSx validators): per deployment type the allowed capacities (1200, 2400, then
steps of 2400; SCRATCH_1 steps of 3600), the PerUnitStorageThroughput tiers (none on SCRATCH), and
the capacity steps of EFA-enabled file systems. Managed Lustre: the tier and its minimum capacity.
The API refuses these at create time; the policy refuses them at preview, with the nearest sizes.
"""
from __future__ import annotations

from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, Severity

from aicluster.catalog import load_catalog

from ._base import schema
from ._props import get, kind, number, plain, truthy

ID = "AIC-STO-004"
SUPPORTED = ("aws:fsx/lustreFileSystem", "gcp:lustre/instance")


def _fsx(p, report) -> None:
    catalog = load_catalog()
    deployment = get(p, "deploymentType") or "SCRATCH_1"
    if not isinstance(deployment, str):
        return
    tier = catalog.fsx.get(deployment)
    if tier is None:
        report(f"deploymentType {deployment!r} is not one of {', '.join(sorted(catalog.fsx))}")
        return
    if (get(p, "storageType") or "SSD") == "HDD":
        if deployment != "PERSISTENT_1":
            report(f"storageType HDD needs deploymentType PERSISTENT_1, not {deployment}")
        return   # HDD capacity rules (6000 / 1800 GiB steps) are not in the catalog: not judged
    capacity = number(get(p, "storageCapacity"))
    _capacity(deployment, tier, capacity, report)
    tput = _throughput(p, deployment, tier, report)
    if truthy(get(p, "efaEnabled")):
        _efa(p, deployment, tier, tput, capacity, report)


def _capacity(deployment, tier, capacity, report) -> None:
    if capacity is not None and not tier.capacity_allowed(int(capacity)):
        near = " or ".join(str(n) for n in tier.neighbours(capacity))
        report(f"storageCapacity {capacity:g} GiB is not a {deployment} size: {tier.capacity_rule()}"
               + (f" (nearest: {near} GiB)" if near else ""))


def _throughput(p, deployment, tier, report) -> float | None:
    """Checks perUnitStorageThroughput against the deployment type's tiers; returns it."""
    throughput = get(p, "perUnitStorageThroughput")
    tput = number(throughput)
    if tier.throughput_mbps_per_tib:
        if throughput is None:
            report(f"{deployment} needs perUnitStorageThroughput: one of "
                   f"{', '.join(str(t) for t in tier.throughput_mbps_per_tib)} MB/s/TiB")
        elif tput is not None and tput not in tier.throughput_mbps_per_tib:
            report(f"perUnitStorageThroughput {tput:g} MB/s/TiB is not offered on {deployment}: one of "
                   f"{', '.join(str(t) for t in tier.throughput_mbps_per_tib)}")
    elif tput is not None:
        report(f"{deployment} takes no perUnitStorageThroughput (it has a fixed baseline of "
               f"{tier.baseline_mbps_per_tib} MB/s/TiB); {tput:g} was given")
    return tput


def _efa(p, deployment, tier, tput, capacity, report) -> None:
    if deployment != "PERSISTENT_2":
        report(f"efaEnabled needs deploymentType PERSISTENT_2, not {deployment}")
    elif tput is not None and capacity is not None:
        step = tier.efa_capacity_step_gib.get(int(tput))
        if step and capacity % step:
            report(f"an EFA-enabled PERSISTENT_2 at {tput:g} MB/s/TiB grows in steps of {step} GiB; "
                   f"{capacity:g} GiB is not a multiple")
    if get(p, "metadataConfiguration") is None:
        report("efaEnabled needs a metadataConfiguration (AUTOMATIC or USER_PROVISIONED)")


def _managed_lustre(p, report) -> None:
    tiers = load_catalog().managed_lustre
    tput, capacity = number(get(p, "perUnitStorageThroughput")), number(get(p, "capacityGib"))
    if tput is None:
        return
    tier = tiers.get(int(tput))
    if tier is None:
        report(f"perUnitStorageThroughput {tput:g} MB/s/TiB is not a Managed Lustre tier: one of "
               f"{', '.join(str(t) for t in sorted(tiers))}")
        return
    if capacity is not None and capacity < tier.min_capacity_gib:
        report(f"capacityGib {capacity:g} is below the {tput:g} MB/s/TiB tier's minimum of {tier.min_capacity_gib} GiB")


def validate(args, report_violation) -> None:
    k = kind(args.resource_type)
    if k not in SUPPORTED:
        return
    p = plain(args.props)
    (_fsx if k == "aws:fsx/lustreFileSystem" else _managed_lustre)(p, lambda m: report_violation(m, None))


POLICY = ResourceValidationPolicy(
    name=ID,
    display_name="fsx-valid-configuration",
    description="FSx for Lustre and Managed Lustre capacity, throughput tier and EFA settings form a valid combination.",
    severity=Severity.MEDIUM,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=(
        "Use a capacity the deployment type allows (the message names the nearest ones), a throughput tier it "
        "offers (none on SCRATCH types), and for efaEnabled a PERSISTENT_2 in the tier's capacity steps with a "
        "metadata configuration. `aicluster catalog PERSISTENT_2` lists the rules."),
    config_schema=schema(),
    tags=["storage", "aws", "gcp"],
    validate=validate,
)
