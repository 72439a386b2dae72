"""`aicluster preflight`: before the first `pulumi up`, check that the cloud can build this stack.

Offline, always (catalog/regions.yaml, sourced and dated): the region and zone exist, each pool's
instance type, machine type or TPU generation is offered there, and each pool's capacity type
holds together (a reservation named where the spec buys one, enough of it for the always-on
nodes). Live, when credentials are present (docs/preflight.md): the account's own view of the
zone and the offerings, the vCPU or GPU quotas against the pools' maximum size, the FSx for
Lustre storage quota, the reservation or Capacity Block the spec names, and the images the nodes
boot (commands/preflight_aws.py, commands/preflight_gcp.py).

A check that cannot be made (no catalog data, throttled, no answer, not allowed) is `skipped`
with its reason: never a pass it did not earn, never a traceback. Exit 0 when nothing failed, 1
when a check failed, 2 on bad input (the spec, the stack file, the arguments).

`run_preflight(stack, live)` is the function other commands call (`aicluster up` before the
first up); `add_parser` and `run` make the command. The cloud SDKs load only inside functions.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from aicluster.commands.preflight_report import (EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, Check, PreflightReport,
                                                 Status, controller_nodes)
from aicluster.commands.stacks import StackConfig, read_stack
from aicluster.errors import SpecError

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "EXIT_OK", "Check", "PreflightReport", "Status", "add_parser",
           "controller_nodes", "offline_checks", "render_text", "run", "run_preflight"]

# --- the offline checks (catalog/regions.yaml) -----------------------------------------------


def _pool_offering(spec, index: int, pool) -> tuple[str | None, str]:
    """(the catalog name whose offering decides, what to call it): a TPU generation, or the
    instance/machine type an alias resolves to."""
    from aicluster.catalog import load_catalog

    if pool.tpu is not None:
        return pool.tpu.type.lower(), f"TPU {pool.tpu.type}"
    itype = load_catalog().resolve(spec.cloud, pool.instance_type or "")
    return (itype.name, itype.name) if itype else (None, str(pool.instance_type))


def offline_checks(spec) -> list[Check]:
    """What the catalog alone can tell: the place exists and offers each pool's type; each pool's
    capacity holds together."""
    from aicluster.catalog.regions import places

    known = places(spec.cloud)
    checks = [Check("region", "ok", f"{spec.region} is a region of {spec.cloud} (catalog/regions.yaml, checked "
                                    f"{known.origin.checked})", path="region"),
              Check("zone", "ok", f"{spec.zone} is a zone of {spec.region}", path="zone")]
    for i, pool in enumerate(spec.pools):
        checks.append(_offering_check(spec, known, i, pool))
        checks.append(_capacity_check(spec, i, pool))
    for label, path, name, _ in controller_nodes(spec):
        offered, entry = known.offered(name, spec.region, spec.zone)
        if entry is None:
            continue    # a general-purpose type the catalog has no offering data for (GCP N2): the live check asks
        check = f"offering {label}"
        if offered is None:
            checks.append(Check(check, "skipped", f"the catalog's offering data does not cover {spec.region}",
                                "the live check asks the cloud", path=path))
        elif offered:
            checks.append(Check(check, "ok", f"{name} is offered in {spec.region}", path=path))
        else:
            checks.append(Check(check, "failed", f"{name} is not offered in {spec.region} (catalog/regions.yaml, "
                                f"checked {entry.origin.checked})", f"set {path} to a controller type the region "
                                "offers (`aicluster catalog` lists them)", path=path))
    return checks


def _offering_check(spec, known, i: int, pool) -> Check:
    name, label = _pool_offering(spec, i, pool)
    path = f"pools[{i}].tpu.type" if pool.tpu is not None else f"pools[{i}].instance_type"
    check = f"offering pools[{i}]"
    if name is None:
        return Check(check, "skipped", f"{label} is not in the catalog", path=path)
    offered, entry = known.offered(name, spec.region, spec.zone)
    if entry is None:
        return Check(check, "skipped", f"catalog/regions.yaml lists no offerings of {label}",
                     "the live check asks the cloud", path=path)
    where = spec.region if entry.level == "region" else spec.zone
    if offered is None:
        return Check(check, "skipped", f"the catalog's offering data ({entry.origin.source}) does not cover "
                                       f"{spec.region}", "the live check asks the cloud", path=path)
    if offered:
        return Check(check, "ok", f"{label} is offered in {where} (checked {entry.origin.checked})", path=path)
    nearby = known.places_in_region(entry, spec.region) if entry.level == "zone" else []
    elsewhere = ", ".join(nearby or list(entry.places)[:12])
    return Check(check, "failed", f"{label} is not offered in {where} (catalog/regions.yaml, checked "
                                  f"{entry.origin.checked})",
                 f"move the cluster to a {'zone' if entry.level == 'zone' else 'region'} that offers it: {elsewhere}"
                 + ("" if nearby or entry.level == "region" else f" (none in {spec.region})"), path=path)


def _capacity_check(spec, i: int, pool) -> Check:
    cap = pool.capacity
    check, path = f"capacity pools[{i}]", f"pools[{i}].capacity"
    if cap.type in ("reservation", "capacity-block"):
        kind = "Capacity Block" if cap.type == "capacity-block" else "reservation"
        if cap.nodes is not None and cap.nodes < pool.min_nodes:
            return Check(check, "failed", f"{pool.min_nodes} always-on nodes (min_nodes) but the {kind} "
                                          f"{cap.reservation_id} holds {cap.nodes}",
                         f"lower pools[{i}].min_nodes to at most {cap.nodes}, or grow the {kind}", path=path)
        size = f"holds {cap.nodes} nodes" if cap.nodes is not None else "size not given (capacity.nodes)"
        return Check(check, "ok", f"{cap.type} {cap.reservation_id} ({size}); the live check reads its state",
                     path=path)
    return Check(check, "ok", f"{cap.type}: no reservation to name", path=path)


def _catalog_overruled(offline: list[Check], live: list[Check]) -> list[Check]:
    """The catalog's offering lists age (Google adds GPU zones often); where the live check asked
    the cloud and it offers the type, the offline "not offered" is the catalog's error, not the
    spec's: it stays in the report, as a note, and no longer fails."""
    confirmed = {c.name[:-len(" (live)")] for c in live if c.name.endswith(" (live)") and c.status == "ok"}
    kept = [replace(c, status="ok", detail=f"{c.detail}; the cloud offers it (live check below): "
                                              "the catalog list is out of date")
            if c.status == "failed" and c.name in confirmed else c for c in offline]
    return kept + live


# --- running it --------------------------------------------------------------------------------


def run_preflight(stack: StackConfig, live: bool | None = None) -> PreflightReport:
    """Every preflight check of `stack`. live: None (live when credentials are present), True
    (live; missing credentials fail the `credentials` check), False (offline only). Bad input
    raises SpecError (exit 2); nothing else escapes."""
    from aicluster.design.cluster import design_cluster
    from aicluster.errors import Problem
    from aicluster.spec.cluster import parse_spec

    source = str(stack.path)
    spec = parse_spec(stack.spec_data, source=source)
    provider_region = stack.config.get(f"{spec.cloud}:region")
    if provider_region and provider_region != spec.region:
        raise SpecError([Problem("region", spec.region, f"the stack's {spec.cloud}:region ({provider_region}); "
                                                        "set both to the same region")], source)
    try:
        design_cluster(spec)     # the sizing round (filesystem capacities, throughput tiers), as `plan` has it
    except SpecError as exc:
        raise exc.with_source(source) from None
    checks = offline_checks(spec)
    if live is False:
        return PreflightReport(stack.name, spec.cloud, spec.region, spec.zone, False, "offline (--offline)", checks)
    if spec.cloud == "aws":
        from aicluster.commands import preflight_aws as cloud
    else:
        from aicluster.commands import preflight_gcp as cloud
    reason = cloud.credentials_missing(stack.config)
    if reason:
        if live:
            checks.append(Check("credentials", "failed", reason, cloud.CREDENTIALS_HELP, live=True))
        return PreflightReport(stack.name, spec.cloud, spec.region, spec.zone, False, reason, checks)
    checks = _catalog_overruled(checks, cloud.live_checks(spec, stack.config))
    return PreflightReport(stack.name, spec.cloud, spec.region, spec.zone, True, cloud.credentials_found(stack.config),
                           checks)


_MARK = {"ok": "ok", "failed": "FAILED", "skipped": "skipped"}


def render_text(report: PreflightReport) -> str:
    lines = [f"preflight {report.stack}: {report.cloud} {report.region} / {report.zone}; "
             f"live checks: {'yes' if report.live else 'no'} ({report.live_reason})"]
    width = max((len(c.name) for c in report.checks), default=10)
    for c in report.checks:
        lines.append(f"  {_MARK[c.status]:<8} {c.name:<{width}}  {c.detail}")
        if c.remedy and c.status != "ok":
            lines.append(f"  {'':<8} {'':<{width}}  -> {c.remedy}")
    lines.append(f"{report.count('ok')} ok, {report.count('failed')} failed, {report.count('skipped')} skipped"
                 + (" (skipped: could not check; see each reason)" if report.count("skipped") else ""))
    return "\n".join(lines)


def add_parser(sub) -> None:
    parser = sub.add_parser("preflight", help="check the cloud can build a stack before the first `pulumi up`: "
                                              "regions, offerings, quotas, reservations, images")
    parser.add_argument("file", nargs="?", metavar="FILE",
                        help="a stack file (stacks/Pulumi.<stack>.yaml) or a bare spec YAML file")
    parser.add_argument("--stack", "-s", metavar="NAME",
                        help="a stack of your project (default: its one stack) or an example stack")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--offline", dest="live", action="store_false", default=None,
                      help="only the catalog checks, no cloud calls")
    mode.add_argument("--live", dest="live", action="store_true", default=None,
                      help="the live checks too; missing credentials fail (default: live when credentials are found)")
    parser.add_argument("--format", "-f", choices=("text", "json"), default="text")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from aicluster.commands.stacks import stack_target

    report = run_preflight(read_stack(stack_target(args.file, args.stack)), args.live)
    if args.format == "json":
        print(json.dumps(report.to_json(), indent=2, sort_keys=True))
    else:
        print(render_text(report))
    sys.stdout.flush()
    return report.exit_code
