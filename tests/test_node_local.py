"""Node-local pieces of Slurm nodes (issue 15, deliverables 3 and 4): the catalog's container pins
and local NVMe facts (catalog/node_local.yaml), the rendered aicluster-containers program, and
their way onto AWS nodes (the fetched programs) and GCP nodes (user data), and into the plan.

shellcheck is required: without it the lint test fails, it does not skip.
"""
from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess

import pytest
import yaml

from aicluster.aws.slurm import node_program_files
from aicluster.catalog import CatalogError, node_local
from aicluster.catalog.node_local import LocalNvme, containers, local_nvme
from aicluster.render.node_local_files import node_local_programs, scratch_summary

CHECKED = re.compile(r"checked on 2026-\d\d-\d\d")


def test_pins_are_sourced_and_checked():
    c = containers()
    for what, source in (("enroot", c.enroot.source), ("pyxis", c.pyxis.source), ("image", c.example_source)):
        assert CHECKED.search(source), what
    assert c.enroot.version in c.enroot.source and f"v{c.pyxis.version}" in c.pyxis.source
    assert c.pyxis.commit in c.pyxis.source and len(c.pyxis.commit) == 40
    # Every artifact pinned by SHA-256 (issue 24): each .deb per architecture, pyxis's source archive.
    assert c.enroot.arches and all(set(d) == set(c.enroot.packages) for d in c.enroot.sha256.values())
    assert c.pyxis.url == f"https://github.com/NVIDIA/pyxis/archive/refs/tags/v{c.pyxis.version}.tar.gz"
    assert len(c.pyxis.sha256) == 64
    assert c.enroot.url("enroot+caps") == \
        f"https://github.com/NVIDIA/enroot/releases/download/v{c.enroot.version}/enroot+caps_{c.enroot.version}-1_amd64.deb"
    assert c.example_image.startswith("nvcr.io#nvidia/pytorch:") and not c.example_image.endswith(":latest")


@pytest.mark.parametrize("itype", ["p4d.24xlarge", "p5.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge",
                                   "a3-megagpu-8g", "a3-ultragpu-8g", "a4-highgpu-8g"])
def test_the_issue_s_instance_types_have_their_local_nvme(itype):
    nvme = local_nvme(itype)
    assert nvme is not None and nvme.devices >= 8 and nvme.source


def test_device_counts_agree_with_the_instance_types_totals():
    node_local.check()


def test_a_device_count_that_disagrees_is_refused(monkeypatch):
    table = dict(node_local._local_nvme())
    table["p5.48xlarge"] = dataclasses.replace(table["p5.48xlarge"], devices=4)
    monkeypatch.setattr(node_local, "_local_nvme", lambda: table)
    with pytest.raises(CatalogError, match="p5.48xlarge: 4 x 3800 GB = 15200 GB, but the instance type says 30400"):
        node_local.check()


def test_plan_summary():
    assert scratch_summary("p5.48xlarge") == "RAID0 of 8 x 3800 GB local NVMe = 30400 GB"
    assert scratch_summary("a3-ultragpu-8g") == "RAID0 of 32 x 375 GiB local NVMe = 12000 GiB"
    assert scratch_summary("m7i.2xlarge").startswith("none (no local NVMe")
    assert LocalNvme(1, 100, "x").total_gb == 100


@pytest.mark.parametrize("itype", ["a3-highgpu-8g", "a3-megagpu-8g", "a3-ultragpu-8g", "a4-highgpu-8g"])
def test_gcp_local_ssd_sizes_are_gib_as_google_states_them(itype):
    """A Local SSD disk is 375 GiB (402.7 GB): the plan must not call it 375 GB."""
    nvme = local_nvme(itype)
    assert (nvme.device_gb, nvme.unit) == (375, "GiB") and "GiB" in nvme.source


def test_an_unknown_size_unit_is_refused(monkeypatch):
    doc = node_local._doc()
    bad = {**doc, "local_nvme": {**doc["local_nvme"], "p5.48xlarge": {**doc["local_nvme"]["p5.48xlarge"], "unit": "TB"}}}
    monkeypatch.setattr(node_local, "_doc", lambda: bad)
    node_local._local_nvme.cache_clear()
    try:
        with pytest.raises(CatalogError, match="local_nvme.p5.48xlarge.unit is 'TB'"):
            node_local._local_nvme()
    finally:
        monkeypatch.undo()
        node_local._local_nvme.cache_clear()


@pytest.mark.parametrize("enroot, pyxis, message", [
    ({"sha256": {"amd64": {"enroot": "a" * 64}}}, {}, "sha256.amd64 has no digest for enroot\\+caps"),
    ({"sha256": {}}, {}, "pins no architecture"),
    ({}, {"sha256": "sha256:abc"}, "containers.pyxis.sha256 is 'sha256:abc', not a hex SHA-256"),
])
def test_a_container_pin_without_a_good_digest_is_refused(monkeypatch, enroot, pyxis, message):
    doc = node_local._doc()
    c = doc["containers"]
    bad = {**doc, "containers": {**c, "enroot": {**c["enroot"], **enroot}, "pyxis": {**c["pyxis"], **pyxis}}}
    monkeypatch.setattr(node_local, "_doc", lambda: bad)
    node_local.containers.cache_clear()
    try:
        with pytest.raises(CatalogError, match=message):
            node_local.containers()
    finally:
        monkeypatch.undo()
        node_local.containers.cache_clear()


def test_containers_program_is_pinned_and_passes_shellcheck(tmp_path):
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck is required (.ci/install-system-deps installs it)"
    text = node_local_programs()["aicluster-containers"]
    c = containers()
    assert f"ENROOT_VERSION={c.enroot.version}\n" in text and f"PYXIS_VERSION={c.pyxis.version}\n" in text
    assert f"PYXIS_PLUGIN={c.pyxis.plugin}\n" in text
    assert "ENROOT_DATA_PATH       $base/data/user-\\${UID}" in text
    script = tmp_path / "aicluster-containers"
    script.write_text(text)
    r = subprocess.run([shellcheck, str(script)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout


def test_aws_nodes_fetch_both_programs():
    names = {entry["path"].rsplit("/", 1)[1] for entry, _ in node_program_files()}
    assert {"aicluster-scratch", "aicluster-containers"} <= names


def test_gcp_nodes_carry_both_programs():
    from tests.support.stack_plans import stack_result

    result = stack_result("gcp-a3mega-slurm")
    (name,) = [n for n in result.files if n.startswith("user-data/") and n.endswith("-gpu-template.yaml")]
    paths = {f["path"] for f in yaml.safe_load(result.files[name])["write_files"]}
    assert {"/opt/aicluster/bin/aicluster-scratch", "/opt/aicluster/bin/aicluster-containers"} <= paths


def test_the_plan_shows_scratch_and_containers_per_pool():
    from aicluster.commands.plan_report import pool_lines
    from tests.support.stack_plans import stack_result

    lines = pool_lines(stack_result("aws-p5-slurm").design)
    assert "    /scratch RAID0 of 8 x 3800 GB local NVMe = 30400 GB; containers enroot " in "\n".join(lines)


def test_every_aws_gpu_type_with_instance_storage_in_moto_has_its_local_nvme():
    """Outside truth: moto's copy of EC2 DescribeInstanceTypes. A catalog GPU type whose
    InstanceStorageInfo lists NVMe disks gets /scratch only if node_local.yaml knows them (P6-B300
    was added without them and planned no /scratch)."""
    from moto.ec2.models.instance_types import INSTANCE_TYPES

    from aicluster.catalog import load_catalog

    for name, itype in load_catalog().instance_types["aws"].items():
        info = INSTANCE_TYPES.get(name, {}).get("InstanceStorageInfo")
        if itype.accelerator.kind != "gpu" or not info:
            continue
        disks = info["Disks"][0]
        nvme = local_nvme(name)
        assert nvme is not None, f"{name}: moto lists {disks['Count']} x {disks['SizeInGB']} GB, node_local.yaml none"
        assert (nvme.devices, nvme.device_gb) == (disks["Count"], disks["SizeInGB"]), name
