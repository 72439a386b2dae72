"""apt pins in catalog/gcp.yaml are Debian versions apt can install (issue 11).

`apt-get install name=version` matches the package's Debian version, which must start with a digit
(Debian Policy 5.6.12: [epoch:]upstream_version[-debian_revision]). The gIB pin was
`nccl-gib=v1.1.0`, the container image's tag, which no package version equals; Cluster Toolkit's
A3 Ultra / A4 blueprints changed the same pin to 1.1.0.
"""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from aicluster.catalog import load_catalog

# Debian Policy 5.6.12: epoch digits; upstream starts with a digit and holds [A-Za-z0-9.+~-] (a
# hyphen only with a revision); revision [A-Za-z0-9+.~].
DEBIAN_VERSION = re.compile(r"^(?:\d+:)?\d[A-Za-z0-9.+~]*(?:-?[A-Za-z0-9.+~-]*-[A-Za-z0-9+.~]+)?$")
PINS = [(stack.name, pkg) for stack in load_catalog().nic_stacks.values() for pkg in stack.apt_packages if "=" in pkg]


def test_there_are_pins_to_check():
    assert ("rdma", "nccl-gib=1.1.0") in PINS


@pytest.mark.parametrize("stack, package", PINS)
def test_pin_is_a_debian_version(stack, package):
    name, version = package.split("=", 1)
    assert re.fullmatch(r"[a-z0-9][a-z0-9+.-]+", name), package
    assert DEBIAN_VERSION.match(version), f"{stack}: {package}: not a Debian version (must start with a digit)"


@pytest.mark.skipif(shutil.which("dpkg") is None, reason="dpkg not installed")
@pytest.mark.parametrize("stack, package", PINS)
def test_dpkg_accepts_the_pin(stack, package):
    version = package.split("=", 1)[1]
    run = subprocess.run(["dpkg", "--validate-version", version], capture_output=True, text=True)
    assert run.returncode == 0, f"{stack}: {package}: {run.stderr.strip()}"


@pytest.mark.parametrize("version, ok", [("1.1.0", True), ("2:1.0-3ubuntu1", True), ("1.0~rc1", True),
                                         ("v1.1.0", False), ("", False), ("latest", False)])
def test_the_check_itself(version, ok):
    assert bool(DEBIAN_VERSION.match(version)) is ok
    if shutil.which("dpkg") and version:
        assert (subprocess.run(["dpkg", "--validate-version", version], capture_output=True).returncode == 0) is ok


def test_the_source_names_cluster_toolkits_change():
    source = load_catalog().nic_stacks["rdma"].source
    assert "1.1.0" in source and "cluster-toolkit" in source and "checked on 2026-11-23" in source
