"""Issue 16, "Upgrades": no automatic upgrade drains a running gang. GKE: a maintenance window and a
persistent "no minor or node upgrades" exclusion on the cluster, surge upgrades that add a GPU node
before draining one (gcp/gke_upgrades.py). EKS: the AMI release pinned in the catalog on every node
group, updated one node at a time and never forced past a PodDisruptionBudget (aws/eks_nodes.py)."""
from __future__ import annotations

import copy

import pytest

from aicluster.catalog import CatalogError
from aicluster.catalog.kubernetes import versions_from
from aicluster.gcp.gke_upgrades import check_maintenance, least_hours_in_32_days
from aicluster.design.kubernetes import versions
from tests.support import BASE_SPEC, GCP_MIN

CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
GPU_MACHINES = ["a3-highgpu-8g", "a3-megagpu-8g", "a3-ultragpu-8g", "a4-highgpu-8g", "a2-highgpu-8g"]


def gke_spec(*pools) -> dict:
    spec = copy.deepcopy(GCP_MIN)
    spec.update(scheduler="kubernetes", pools=list(pools))
    return spec


@pytest.fixture(scope="module")
def gke_plan():
    from tests.support import run_spec

    return run_spec(gke_spec(*[{"name": f"g{i}", "instance_type": m, "max_nodes": 2} for i, m in enumerate(GPU_MACHINES)],
                             {"name": "tpu", "tpu": {"type": "v5e", "topology": "4x8"}, "max_nodes": 8}))


@pytest.fixture(scope="module")
def eks_plan():
    from tests.support import run_spec

    spec = copy.deepcopy(BASE_SPEC)
    spec.update(scheduler="kubernetes", kubernetes={"api_access": "vpc"})
    spec["pools"].append({"name": "l40s", "instance_type": "g6e.48xlarge", "max_nodes": 2, "efa": False})
    return run_spec(spec)


# --- GKE ----------------------------------------------------------------------------------------


def test_gke_cluster_has_the_window_and_the_persistent_exclusion(gke_plan):
    (cluster,) = gke_plan.of_type(CLUSTER)
    policy = cluster.inputs["maintenancePolicy"]
    maintenance = versions().gke.maintenance
    window = maintenance["window"]
    assert policy["recurringWindow"] == {"startTime": window["start"], "endTime": window["end"],
                                         "recurrence": window["recurrence"]}
    (exclusion,) = policy["maintenanceExclusions"]
    # No minor or node upgrade until the minor version's end of support: GKE keeps extending it,
    # and with no end date a later `pulumi up` has nothing to roll forward.
    assert exclusion["exclusionOptions"] == {"scope": "NO_MINOR_OR_NODE_UPGRADES",
                                             "endTimeBehavior": "UNTIL_END_OF_SUPPORT"}
    assert "endTime" not in exclusion                        # exactly one of endTime and endTimeBehavior
    assert exclusion["startTime"] == maintenance["exclusion"]["start"]
    assert exclusion["exclusionName"] == maintenance["exclusion"]["name"]
    # The daily window is the older form: one of the two only.
    assert "dailyMaintenanceWindow" not in policy


def test_the_pinned_window_leaves_gke_the_hours_it_requires():
    maintenance = versions().gke.maintenance
    check_maintenance(maintenance)
    assert least_hours_in_32_days(maintenance["window"]) >= maintenance["min_hours_per_32_days"] == 48
    assert maintenance["min_block_hours"] == 4


@pytest.mark.parametrize("window, error", [
    ({"start": "2026-01-03T02:00:00Z", "end": "2026-01-03T05:00:00Z", "recurrence": "FREQ=WEEKLY;BYDAY=SA,SU"},
     "3 hours per occurrence"),
    ({"start": "2026-01-03T02:00:00Z", "end": "2026-01-03T10:00:00Z", "recurrence": "FREQ=WEEKLY;BYDAY=SA"},
     "32 hours in some 32 days"),
    ({"start": "2026-01-05T02:00:00Z", "end": "2026-01-05T10:00:00Z", "recurrence": "FREQ=WEEKLY;BYDAY=SA,SU"},
     "not a day"),
    ({"start": "2026-01-03T02:00:00Z", "end": "2026-01-03T10:00:00Z", "recurrence": "FREQ=MONTHLY;BYMONTHDAY=1"},
     "FREQ=MONTHLY"),
])
def test_a_window_gke_would_refuse_is_refused(window, error):
    maintenance = {**versions().gke.maintenance, "window": window}
    with pytest.raises(CatalogError, match=error):
        check_maintenance(maintenance)


def test_daily_windows_count_every_day():
    assert least_hours_in_32_days({"start": "2026-01-03T00:00:00Z", "end": "2026-01-03T04:00:00Z",
                                   "recurrence": "FREQ=DAILY"}) == 4 * 7 * 4


@pytest.mark.parametrize("machine", GPU_MACHINES)
def test_gpu_node_pools_surge_one_node_and_never_take_one_down_first(gke_plan, machine):
    index = GPU_MACHINES.index(machine)
    (pool,) = [p for p in gke_plan.of_type(NODE_POOL) if p.inputs["name"] == f"g{index}"]
    assert pool.inputs["upgradeSettings"] == {"strategy": "SURGE", "maxSurge": 1, "maxUnavailable": 0}
    assert pool.inputs["management"]["autoUpgrade"] is True     # release channels require it; the exclusion holds it


def test_the_maintenance_entry_needs_its_source_and_date():
    import yaml

    from aicluster.catalog import kubernetes as catalog

    doc = yaml.safe_load(catalog._VERSIONS_FILE.read_text(encoding="utf-8"))
    assert versions_from(doc).sources["gke:maintenance"]
    del doc["gke"]["maintenance"]["checked"]
    with pytest.raises(CatalogError, match="gke.maintenance"):
        versions_from(doc)


# --- EKS ----------------------------------------------------------------------------------------


def test_every_eks_node_group_runs_the_pinned_ami_release(eks_plan):
    groups = eks_plan.of_type(NODE_GROUP)
    amis = versions().ami_types
    assert {g.inputs["nodeGroupName"] for g in groups} == {"demo-system", "demo-gpu", "demo-l40s"}
    for group in groups:
        role = "system" if group.inputs["nodeGroupName"].endswith("-system") else "gpu"
        assert group.inputs["amiType"] == amis[role]["ami_type"]
        assert group.inputs["releaseVersion"] == amis[role]["release_version"]


def test_the_pinned_releases_follow_the_cluster_version():
    """An EKS AMI release is <kubernetes version>.<patch>-<build date>: the node groups' minor must be
    the cluster's, or EKS refuses the node group (a node's kubelet may not be newer)."""
    for role, ami in versions().ami_types.items():
        minor, _, build = ami["release_version"].rpartition("-")
        assert minor.rsplit(".", 1)[0] == versions().kubernetes, role
        assert len(build) == 8 and build.isdigit(), role


def test_gpu_node_group_updates_one_node_at_a_time_and_never_force(eks_plan):
    for group in eks_plan.of_type(NODE_GROUP):
        if group.inputs["nodeGroupName"].endswith("-system"):
            continue
        assert group.inputs["updateConfig"] == {"maxUnavailable": 1}
        # Without force, a node whose pods a PodDisruptionBudget protects fails the update after
        # EKS's drain attempts instead of being terminated under a running gang.
        assert group.inputs["forceUpdateVersion"] is False
