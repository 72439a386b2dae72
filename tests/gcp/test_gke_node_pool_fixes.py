"""GKE node pools (issue 11): the boot disk each TPU generation takes, Secure Boot with Managed
Lustre, and flex-start with compact placement.

- Cloud TPU docs (setup-persistent-disk, "TPU support for Hyperdisk and Persistent Disk"): v6e takes
  Hyperdisk Balanced / ML only, v4, v5e and v5p Balanced Persistent Disk only. Every TPU node pool
  used to ask for hyperdisk-balanced.
- Managed Lustre from GKE: "Node pools with Secure boot enabled are supported only if the machine
  type of the node pool is a GPU machine type". TPU node pools mounting it kept Secure Boot.
- GKE takes compact placement with flex-start only on A3 Ultra, A4 and H4D (Cluster Toolkit's
  gke-node-pool precondition); a multi-node a3-megagpu-8g flex-start pool was placed COMPACT.
"""
from __future__ import annotations

import copy

import pytest

from aicluster.catalog import load_catalog
from aicluster.errors import SpecError
from aicluster.design.kubernetes import versions
from aicluster.spec.cluster import parse_spec
from tests.support import GCP_MIN

NODE_POOL = "gcp:container/nodePool:NodePool"
LUSTRE = {"name": "scratch", "type": "lustre", "mount": "/lustre", "capacity_gib": 18000}
TPU_SHAPES = {"v4": "2x2x2", "v5e": "4x4", "v5p": "2x2x2", "v6e": "4x4"}


def gke_spec(*pools, **top) -> dict:
    spec = copy.deepcopy(GCP_MIN)
    spec.update({"scheduler": "kubernetes", "pools": list(pools), **top})
    return spec


def tpu_pool(gen: str) -> dict:
    from aicluster.catalog.tpu_slices import tpu_slice

    hosts = tpu_slice(load_catalog().tpus[gen], TPU_SHAPES[gen]).hosts
    return {"name": "tpu", "tpu": {"type": gen, "topology": TPU_SHAPES[gen]}, "max_nodes": hosts}


def node_pools(plan) -> dict[str, dict]:
    return {p.inputs["name"]: p.inputs for p in plan.of_type(NODE_POOL)}


# --- boot disks --------------------------------------------------------------------------------


def test_catalog_gives_each_tpu_generation_its_boot_disk_with_a_source():
    tpus = load_catalog().tpus
    assert {g: t.boot_disk_type for g, t in tpus.items()} == {
        "v4": "pd-balanced", "v5e": "pd-balanced", "v5p": "pd-balanced", "v6e": "hyperdisk-balanced",
        "tpu7x": "hyperdisk-balanced"}
    import yaml
    from aicluster.catalog import _HERE

    raw = yaml.safe_load((_HERE / "tpu.yaml").read_text())["tpus"]
    for gen, entry in raw.items():
        if gen == "tpu7x":     # not on the setup-persistent-disk table read then: Cluster Toolkit's blueprint
            assert "gke-tpu-7x.yaml" in entry["boot_disk_source"] and "checked 2026-11-28" in entry["boot_disk_source"]
            continue
        assert "setup-persistent-disk" in entry["boot_disk_source"] and "checked on 2026-11-23" in entry[
            "boot_disk_source"], gen


@pytest.mark.parametrize("gen", sorted(TPU_SHAPES))
def test_tpu_node_pool_boots_from_the_disk_its_generation_takes(plan_spec, gen):
    pool = node_pools(plan_spec(gke_spec(tpu_pool(gen))))["tpu"]
    assert pool["nodeConfig"]["diskType"] == load_catalog().tpus[gen].boot_disk_type
    assert (pool["nodeConfig"]["diskType"] == "hyperdisk-balanced") == (gen == "v6e")


def test_gpu_node_pools_keep_their_machine_types_disk(plan_spec):
    for machine in ("a3-megagpu-8g", "a3-ultragpu-8g"):
        pool = node_pools(plan_spec(gke_spec({"name": "gpu", "instance_type": machine, "max_nodes": 2})))["gpu"]
        assert pool["nodeConfig"]["diskType"] == load_catalog().instance_types["gcp"][machine].boot_disk_type


# --- Secure Boot and Managed Lustre ------------------------------------------------------------


def test_tpu_node_pools_mounting_managed_lustre_boot_without_secure_boot(plan_spec):
    plan = plan_spec(gke_spec(tpu_pool("v5p"), {"name": "gpu", "instance_type": "a3-ultragpu-8g", "max_nodes": 2},
                              storage=[LUSTRE]))
    pools = node_pools(plan)
    shielded = {name: p["nodeConfig"]["shieldedInstanceConfig"] for name, p in pools.items()}
    assert shielded["tpu"] == {"enableSecureBoot": False, "enableIntegrityMonitoring": True}
    assert shielded["gpu"]["enableSecureBoot"] is True       # GPU machine types keep it
    assert shielded["system"]["enableSecureBoot"] is True    # mounts no filesystem
    assert versions().gke.lustre_secure_boot == ("gpu",)


def test_tpu_node_pools_keep_secure_boot_without_managed_lustre(plan_spec):
    pool = node_pools(plan_spec(gke_spec(tpu_pool("v5p"))))["tpu"]
    assert pool["nodeConfig"]["shieldedInstanceConfig"]["enableSecureBoot"] is True


def test_tpu_stack_plan_shows_disk_and_secure_boot():
    from aicluster.commands.plan_report import text
    from tests.support.stack_plans import stack_result

    out = "\n".join(text(stack_result("gcp-tpu-v5p-gke")))
    (line,) = [x for x in out.splitlines() if "node pools v5p" in x]
    assert "pd-balanced boot disk" in line and "no Secure Boot" in line


# --- flex-start and compact placement ----------------------------------------------------------


def test_flex_start_compact_families_are_in_the_catalog_with_a_source():
    gke = versions().gke
    assert gke.flex_start_compact == ("a3-ultragpu-", "a4-highgpu-", "h4d-")
    assert "cluster-toolkit" in versions().sources["gke:flex-start-compact"]


def test_multi_node_flex_start_on_a3_mega_is_refused_at_the_capacity():
    with pytest.raises(SpecError) as info:
        parse_spec(gke_spec({"name": "gpu", "instance_type": "a3-megagpu-8g", "max_nodes": 4,
                             "capacity": "flex-start"}))
    (p,) = info.value.problems
    assert p.path == "pools[0].capacity.type" and p.value == "flex-start"
    assert "on-demand, spot or reservation" in p.allowed
    assert "a3-ultragpu-8g, a4-highgpu-8g" in p.allowed and "max_nodes: 1" in p.allowed


def test_the_cli_exits_2_for_it(tmp_path):
    import contextlib
    import io

    import yaml
    from aicluster.cli import main

    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(gke_spec({"name": "gpu", "instance_type": "h100", "max_nodes": 4,
                                             "capacity": "flex-start"})))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["plan", str(path)])
    assert code == 2 and "  - pools[0].capacity.type: 'flex-start' is not valid;" in err.getvalue()


@pytest.mark.parametrize("machine", ["a3-ultragpu-8g", "a4-highgpu-8g"])
def test_flex_start_on_a3_ultra_and_a4_stays_compact(plan_spec, machine):
    pool = node_pools(plan_spec(gke_spec({"name": "gpu", "instance_type": machine, "max_nodes": 4,
                                          "capacity": "flex-start"})))["gpu"]
    assert pool["nodeConfig"]["flexStart"] is True and pool["placementPolicy"] == {"type": "COMPACT"}


def test_single_node_flex_start_on_a3_mega_needs_no_placement(plan_spec):
    pool = node_pools(plan_spec(gke_spec({"name": "gpu", "instance_type": "a3-megagpu-8g", "max_nodes": 1,
                                          "capacity": "flex-start"})))["gpu"]
    assert pool["nodeConfig"]["flexStart"] is True and "placementPolicy" not in pool
