"""When GKE may upgrade a cluster on its own, and how a GPU node pool is upgraded.

- maintenance_policy: the cluster's recurring window and its maintenance exclusion, both from
  catalog/kubernetes.yaml (gke.maintenance). The exclusion's scope NO_MINOR_OR_NODE_UPGRADES keeps
  every automatic node upgrade (and minor upgrades of the control plane) away until the minor
  version's end of support (end_time_behavior UNTIL_END_OF_SUPPORT: no end date to roll forward, so
  a later `pulumi up` has nothing to change); control plane patches still land, inside the window.
  A node upgrade drains the node, which kills a gang job: an operator runs it between jobs.
- gpu_upgrade_settings: how a GPU node pool is upgraded when an operator (or GKE, once the minor
  version reaches its end of support) does: surge, new nodes first (max_surge: the pool's
  max_unavailable, 1 by default) and never a node down before its replacement is up (max_unavailable 0), so the pool keeps its full size and a
  running gang keeps its nodes while GKE drains the old one (the drain respects the job's
  PodDisruptionBudget for up to an hour; GKE docs, node-pool-upgrade-strategies). Blue-green would
  need a second copy of the whole pool: GPU capacity, reservations in particular, rarely has one.
  A pool whose reservation has no spare machine cannot get its surge node: the upgrade stops there
  without taking a node away (docs/kubernetes-day-two.md, "Upgrades", says how to upgrade it idle).
"""
from __future__ import annotations

import datetime

import pulumi_gcp as gcp

from aicluster.catalog import CatalogError
from aicluster.design.kubernetes import versions

SURGE_NODES = 1             # a GPU pool's upgrade adds one node first
UNAVAILABLE_NODES = 0       # and takes none away before its replacement is up
_DAYS = {"MO": 0, "TU": 1, "WE": 2, "TH": 3, "FR": 4, "SA": 5, "SU": 6}


def _time(value: str) -> datetime.datetime:
    return datetime.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)


def weekly_days(recurrence: str) -> list[int]:
    """The weekdays (Monday 0) of an RRULE `FREQ=WEEKLY;BYDAY=..` or every day of `FREQ=DAILY`."""
    parts = dict(p.split("=", 1) for p in recurrence.split(";"))
    if parts.get("FREQ") == "DAILY" and set(parts) == {"FREQ"}:
        return list(range(7))
    if parts.get("FREQ") == "WEEKLY" and set(parts) == {"FREQ", "BYDAY"}:
        return sorted(_DAYS[d] for d in parts["BYDAY"].split(","))
    raise CatalogError(f"kubernetes.yaml gke.maintenance.window.recurrence {recurrence!r}: aicluster checks only "
                       "FREQ=DAILY or FREQ=WEEKLY;BYDAY=..")


def least_hours_in_32_days(window: dict) -> float:
    """The fewest hours of window any 32 consecutive days hold (GKE's rule counts a rolling 32-day
    period): each weekly occurrence recurs at least four times in 32 days."""
    start, end = _time(window["start"]), _time(window["end"])
    hours = (end - start).total_seconds() / 3600
    return hours * len(weekly_days(window["recurrence"])) * (32 // 7)


def check_maintenance(maintenance: dict) -> None:
    """Refuse a window GKE would refuse: each occurrence at least min_block_hours long, within one
    day, starting on a day the recurrence names, and min_hours_per_32_days of them in any 32 days."""
    window = maintenance["window"]
    start, end = _time(window["start"]), _time(window["end"])
    hours = (end - start).total_seconds() / 3600
    if not maintenance["min_block_hours"] <= hours <= 24:
        raise CatalogError(f"kubernetes.yaml gke.maintenance.window: {hours:g} hours per occurrence; GKE counts "
                           f"only blocks of at least {maintenance['min_block_hours']} hours")
    if start.weekday() not in weekly_days(window["recurrence"]):
        raise CatalogError(f"kubernetes.yaml gke.maintenance.window.start {window['start']} is not a day its "
                           f"recurrence {window['recurrence']} names")
    least = least_hours_in_32_days(window)
    if least < maintenance["min_hours_per_32_days"]:
        raise CatalogError(f"kubernetes.yaml gke.maintenance.window: {least:g} hours in some 32 days; GKE needs at "
                           f"least {maintenance['min_hours_per_32_days']}")


def maintenance_policy() -> gcp.container.ClusterMaintenancePolicyArgs:
    """The cluster's maintenance_policy: the recurring window and the persistent exclusion."""
    maintenance = versions().gke.maintenance
    check_maintenance(maintenance)
    window, exclusion = maintenance["window"], maintenance["exclusion"]
    return gcp.container.ClusterMaintenancePolicyArgs(
        recurring_window=gcp.container.ClusterMaintenancePolicyRecurringWindowArgs(
            start_time=window["start"], end_time=window["end"], recurrence=window["recurrence"]),
        maintenance_exclusions=[gcp.container.ClusterMaintenancePolicyMaintenanceExclusionArgs(
            exclusion_name=exclusion["name"], start_time=exclusion["start"],
            exclusion_options=gcp.container.ClusterMaintenancePolicyMaintenanceExclusionExclusionOptionsArgs(
                scope=exclusion["scope"], end_time_behavior=exclusion["end_time_behavior"]))])


def gpu_upgrade_settings(surge: int = SURGE_NODES) -> gcp.container.NodePoolUpgradeSettingsArgs:
    """A GPU node pool's upgrade: surge `surge` nodes (the pool's max_unavailable, 1 by default),
    none unavailable (the module docstring says why): at most that many nodes are being replaced at
    once, and each only once its replacement is up."""
    return gcp.container.NodePoolUpgradeSettingsArgs(strategy="SURGE", max_surge=max(1, surge),
                                                     max_unavailable=UNAVAILABLE_NODES)
