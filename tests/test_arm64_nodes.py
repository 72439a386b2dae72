"""Slurm pools of arm64 (Grace) types, p6e-gb200 and a4x: what their nodes install and what the
plan says of it. The monitoring downloads are pinned for both architectures
(tests/observability/test_slurm_monitoring.py runs the program as an aarch64 node); enroot has no
public arm64 digest, so the plan says an arm64 pool's containers are not set up (its nodes join
Slurm without them, tests/scripts/test_containers.py) and its GPUs are not watched by DCGM (no
exporter without enroot), and the baked image (x86_64 only) leaves arm64 pools installing at boot,
by name."""
from __future__ import annotations

import copy
import json

import pytest

from aicluster.catalog import CatalogError
from aicluster.catalog import node_local
from aicluster.commands.plan_report import text, to_json
from tests.support.stack_plans import result_with_spec, stack_spec_data

BLOCK = {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"}


@pytest.fixture(scope="module")
def gb200_beside_p5():
    """aws-p5-slurm (a baked node image) with an 18-node GB200 UltraServer pool beside its p5 pool."""
    spec = stack_spec_data("aws-p5-slurm")
    spec["pools"].append({"name": "gb200", "instance_type": "p6e-gb200.36xlarge", "min_nodes": 18,
                          "max_nodes": 18, "partition": "gb200", "capacity": BLOCK})
    return result_with_spec("aws-p5-slurm", spec)


def test_the_plan_says_an_arm64_pool_installs_at_boot(gb200_beside_p5):
    body = "\n".join(text(gb200_beside_p5))
    assert "pool gb200 installs at boot: arm64 (p6e-gb200.36xlarge): the bake starts only from" in body
    image = json.loads(json.dumps(to_json(gb200_beside_p5)))["cluster"]["node_image"]
    assert image["pools"] == ["gpu"]
    assert [e["pool"] for e in image["at_boot"]] == ["gb200"] and "x86_64 GPU image" in image["at_boot"][0]["why"]


def test_the_plan_says_arm64_containers_are_not_pinned(gb200_beside_p5):
    pools = {p["name"]: p for p in json.loads(json.dumps(to_json(gb200_beside_p5)))["cluster"]["pools"]}
    assert pools["gpu"]["containers"]["pinned"] is True and pools["gpu"]["containers"]["arch"] == "amd64"
    arm = pools["gb200"]["containers"]
    assert (arm["arch"], arm["pinned"]) == ("arm64", False)
    assert "no pinned arm64 .deb digest" in arm["gap"]
    body = "\n".join(text(gb200_beside_p5))
    assert "containers NOT on arm64: enroot 4.2.1 has no pinned arm64 .deb digest" in body
    assert "containers enroot 4.2.1 + pyxis" in body          # the p5 pool's line is unchanged


def test_the_plan_names_a_pools_architecture(gb200_beside_p5):
    body = "\n".join(text(gb200_beside_p5))
    assert "  gb200: p6e-gb200.36xlarge (4x GB200, arm64), nodes 18..18" in body
    assert "  gpu: p5.48xlarge (8x H100), nodes" in body          # x86_64 says nothing new
    pools = {p["name"]: p for p in json.loads(json.dumps(to_json(gb200_beside_p5)))["cluster"]["pools"]}
    assert (pools["gb200"]["arch"], pools["gpu"]["arch"]) == ("arm64", "x86_64")


def test_arm64_nodes_get_the_same_monitoring_program(gb200_beside_p5):
    # One program for every node; it picks its architecture's pins by uname -m.
    files = gb200_beside_p5.files
    texts = {v for k, v in files.items() if k.endswith("aicluster-monitoring")}
    assert texts and all("  aarch64)\n    ARCH=arm64" in t for t in texts)


def _watch(name: str):
    from aicluster.design.cluster import design_cluster
    from aicluster.design.observability import monitoring_design
    from aicluster.spec.cluster import parse_spec
    from tests.support import stack_spec
    return monitoring_design(design_cluster(parse_spec(stack_spec(name))))


NOT_WATCHED = "GPUs of {} (no DCGM exporter: no containers on arm64 until enroot has a pinned arm64 build)"


def test_the_gb200_stacks_gpus_are_not_watched_and_the_plan_says_so():
    """Its nodes run no DCGM exporter (no enroot on arm64): GpuMissing counting DCGM series would
    fire for every node forever. Before, each pool had a GpuMissing rule and the XID/ECC rules."""
    from aicluster.render.alert_rules import alerts
    from tests.support.stack_plans import stack_result

    watch = _watch("aws-gb200-slurm")
    assert not watch.gpu_pools and {p.name: p.gpus_per_node for p in watch.pools} == {"nvl72a": 0, "nvl72b": 0}
    found = alerts(watch)
    assert not [r for r in found if r["alert"].startswith("AiclusterGpu")], [r["alert"] for r in found]
    # The fabric stays watched, without the GPU-busy condition it cannot evaluate.
    fabric = [r for r in found if r["alert"] == "AiclusterFabricBelowWired"]
    assert {r["labels"]["pool"] for r in fabric} == {"nvl72a", "nvl72b"}
    assert not [r for r in fabric if "DCGM" in r["expr"]]
    body = "\n".join(text(stack_result("aws-gb200-slurm")))
    for pool in ("nvl72a", "nvl72b"):
        assert f"  not watched: {NOT_WATCHED.format(pool)}" in body
    assert "GPU missing: fewer than" not in body
    assert "so these nodes boot and join Slurm without containers" in body


def test_an_arm64_slurm_pool_beside_an_x86_pool_leaves_only_its_own_gpus_out(gb200_beside_p5):
    body = "\n".join(text(gb200_beside_p5))
    assert f"  not watched: {NOT_WATCHED.format('gb200')}" in body
    assert "GPU missing: fewer than 8 on gpu\n" in body + "\n"
    facts = json.loads(json.dumps(to_json(gb200_beside_p5)))
    assert NOT_WATCHED.format("gb200") in json.dumps(facts)


def test_arm64_kubernetes_pools_keep_their_dcgm_watch():
    # GKE and EKS run DCGM as a DaemonSet image, not under enroot: A4X's GPUs stay watched.
    watch = _watch("gcp-a4x-gke")
    assert [p.name for p in watch.gpu_pools] == ["gb200"]
    assert not [n for n in watch.notes if "no DCGM exporter" in n]


def _containers_with(monkeypatch, arm64):
    doc = copy.deepcopy(node_local._doc())
    doc["containers"]["enroot"]["sha256"]["arm64"] = arm64
    monkeypatch.setattr(node_local, "_doc", lambda: doc)
    return node_local.containers.__wrapped__()


@pytest.mark.parametrize("arm64,why", [
    (None, "containers.enroot.sha256.arm64 has no digest for enroot, enroot+caps"),
    ({"enroot": "a" * 64}, "containers.enroot.sha256.arm64 has no digest for enroot+caps"),
    ({"enroot": "a" * 64, "enroot+caps": ""}, "containers.enroot.sha256.arm64.enroot+caps is ''"),
])
def test_the_catalog_refuses_an_arm64_enroot_pin_without_its_sha256(monkeypatch, arm64, why):
    with pytest.raises(CatalogError) as error:
        _containers_with(monkeypatch, arm64)
    assert why in str(error.value)


def test_a_whole_arm64_enroot_pin_is_rendered_for_arm64_nodes(monkeypatch):
    # The day a public digest exists: pinned, an arm64 node installs it (the program picks by dpkg's arch).
    from aicluster.render.node_local_files import containers_program
    pins = _containers_with(monkeypatch, {"enroot": "a" * 64, "enroot+caps": "c" * 64})
    assert pins.enroot.arches == ("amd64", "arm64")
    program = containers_program(pins)
    assert f"arm64/enroot) echo {'a' * 64}" in program and f"arm64/enroot+caps) echo {'c' * 64}" in program
    assert "amd64/enroot) echo 5955c51e88df0c5ed538d87abb5264609d4bad55fa8570745ed5d4ec66c8ab91" in program
