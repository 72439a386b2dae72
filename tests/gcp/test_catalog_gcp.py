"""The GCP catalog additions: every image, NIC stack, controller type and Filestore tier carries a
source; every GPU machine type names its image and NIC stack; Filestore capacity rules."""
from __future__ import annotations

import pytest

from aicluster.catalog import load_catalog

CAT = load_catalog()
GCP = CAT.instance_types["gcp"]


@pytest.mark.parametrize("role", sorted(CAT.gcp_images))
def test_images_are_pinned_family_links_with_sources(role):
    image = CAT.gcp_images[role]
    assert image.source.strip() and image.image.startswith("projects/") and "/global/images/family/" in image.image


@pytest.mark.parametrize("stack", sorted(CAT.nic_stacks))
def test_nic_stacks_pin_their_pieces_with_sources(stack):
    s = CAT.nic_stacks[stack]
    assert s.source.strip() and s.lib_dir.startswith("/")
    for image in (s.nccl_plugin_image, s.rxdm_image):
        assert image is None or (image.startswith("us-docker.pkg.dev/gce-ai-infra/") and ":v" in image)
    assert all("=" in p or p == "dmabuf-import-helper" for p in s.apt_packages)


@pytest.mark.parametrize("name", sorted(GCP))
def test_every_gcp_type_names_its_image_disk_and_stack(name):
    it = GCP[name]
    assert it.boot_disk_type in ("pd-ssd", "hyperdisk-balanced")
    # No default image: TCPX's patched kernel, and A4X's arm64 (the accelerator image is amd64).
    assert it.image in CAT.gcp_images or (it.image is None and (it.gpu_nic_stack == "tcpx" or name == "a4x-highgpu-4g"))
    assert (it.gpu_nics == 0) == (it.gpu_nic_stack == "none")
    if it.gpu_nics:
        assert it.nic_mtu in (8244, 8896)


def test_controllers_per_cloud():
    gcp = {n: c for n, c in CAT.controllers.items() if c.cloud == "gcp"}
    assert "n2-standard-8" in gcp and all(c.source.strip() and c.memory_gib == 4 * c.vcpu for c in gcp.values())
    assert {c.cloud for c in CAT.controllers.values()} == {"aws", "gcp"}


@pytest.mark.parametrize("tier, ok, bad", [
    ("BASIC_HDD", [1024, 1025, 65433], [1023, 65434]),
    ("BASIC_SSD", [2560, 4000], [2048]),
    ("ZONAL", [1024, 1280, 9984, 10240, 12800, 102400], [1100, 10000, 11000, 102401]),
    ("ENTERPRISE", [1024, 10240], [1000, 10496]),
])
def test_filestore_capacity_rules(tier, ok, bad):
    t = CAT.filestore[tier]
    assert t.source.strip()
    assert all(t.capacity_allowed(c) for c in ok) and not any(t.capacity_allowed(c) for c in bad)
    assert all(t.capacity_allowed(t.nearest(c)) for c in bad)
