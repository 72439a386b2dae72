"""An instance type's CPU architecture (catalog `arch`, EC2's words): the Grace-Blackwell types are
arm64, every other type x86_64; the loader refuses any other name. The nodes' download pins
(observability.yaml, node_local.yaml) are chosen by it."""
from __future__ import annotations

import pytest

from aicluster import catalog as cat
from aicluster.catalog import CatalogError, load_catalog


@pytest.mark.parametrize("name,arch,dpkg", [
    ("p6e-gb200.36xlarge", "arm64", "arm64"),
    ("a4x-highgpu-4g", "arm64", "arm64"),
    ("p5.48xlarge", "x86_64", "amd64"),
    ("a3-megagpu-8g", "x86_64", "amd64"),
])
def test_the_grace_types_are_arm64(name, arch, dpkg):
    itype = load_catalog().find(name)
    assert (itype.arch, itype.dpkg_arch) == (arch, dpkg)


def test_an_arm64_aws_type_boots_an_arm64_image():
    catalog = load_catalog()
    for itype in catalog.instance_types["aws"].values():
        if itype.arch == "arm64":
            assert "/arm64/" in catalog.images[itype.image]["ssm_parameter"], itype.name


def test_an_unknown_architecture_is_refused(monkeypatch):
    real = cat._read

    def read(name):
        doc = real(name)
        if name == "aws.yaml":
            doc["instance_types"]["p6e-gb200.36xlarge"]["arch"] = "aarch64"
        return doc

    monkeypatch.setattr(cat, "_read", read)
    with pytest.raises(CatalogError, match=r"p6e-gb200.36xlarge: arch 'aarch64' is not one of x86_64, arm64"):
        load_catalog.__wrapped__()
