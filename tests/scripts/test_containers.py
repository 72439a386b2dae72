"""aicluster-containers (issue 15, deliverable 3), rendered with the catalog's pins and run in a
scratch tree (AICLUSTER_ROOT). The programs it drives to download, build and install (curl,
apt-get, dpkg, git, make, mountpoint) are recording stubs; bash, sed, install and mktemp are real.

It checks what the node ends up with: the pinned enroot .debs fetched, pyxis built from the pinned
commit and refused from any other, enroot's paths on /scratch when it is mounted (else /tmp), the
host's fabric directories mounted into containers where the node has them, and nothing redone on
a node that already has both.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from aicluster.catalog.node_local import containers
from aicluster.node_local_files import node_local_programs
from tests.support.container_tools import CONTAINER_TOOL_STUBS, write_stubs

C = containers()

# A compute node: slurmd and GPU support in enroot are there (a login node has neither).
STUBS = {"slurmd": "exit 0\n", "nvidia-container-cli": "exit 0\n", **CONTAINER_TOOL_STUBS}


@pytest.fixture
def node(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_stubs(bin_dir, STUBS)
    root = tmp_path / "root"
    (root / "etc" / "aicluster").mkdir(parents=True)
    (root / "etc" / "aicluster" / "node.env").write_text("AICLUSTER_GPUS=8\n")
    (root / "opt" / "amazon" / "efa").mkdir(parents=True)      # the DLAMI's EFA; no aws-ofi-nccl dirs
    script = tmp_path / "aicluster-containers"
    script.write_text(node_local_programs()["aicluster-containers"])
    calls = tmp_path / "calls"

    def run(**env: str) -> subprocess.CompletedProcess:
        full = {"PATH": f"{bin_dir}:/usr/bin:/bin", "AICLUSTER_ROOT": str(root), "CALLS": str(calls),
                "GIT_HEAD": C.pyxis.commit, **env}
        return subprocess.run(["bash", str(script)], env=full, capture_output=True, text=True, timeout=60)

    run.root, run.calls = root, calls
    return run


def test_a_fresh_node_gets_the_pinned_enroot_and_pyxis_and_scratch_paths(node):
    r = node(SCRATCH_MOUNTED="1")
    assert r.returncode == 0, r.stderr
    calls = node.calls.read_text()
    for package in ("enroot", "enroot+caps"):
        assert C.enroot.url(package) in calls
    assert f"git clone -q --depth 1 --branch v{C.pyxis.version} {C.pyxis.git_url}" in calls
    assert f"prefix=/usr/local DESTDIR={node.root}" in calls
    assert (node.root / C.pyxis.plugin.lstrip("/")).exists()
    conf = (node.root / "etc" / "enroot" / "enroot.conf").read_text()
    assert "ENROOT_DATA_PATH       /scratch/enroot/data/user-${UID}" in conf
    assert "ENROOT_CACHE_PATH      /scratch/enroot/cache/user-${UID}" in conf
    assert oct((node.root / "scratch" / "enroot").stat().st_mode & 0o7777) == "0o1777"
    assert (node.root / "etc" / "tmpfiles.d" / "aicluster-enroot.conf").read_text() == "d /run/enroot 1777 root root -\n"
    fabric = (node.root / "etc" / "enroot" / "mounts.d" / "90-aicluster-fabric.fstab").read_text()
    assert fabric == "/opt/amazon/efa /opt/amazon/efa none x-create=dir,bind,ro,nosuid,nodev,private 0 -1\n"


def test_without_scratch_enroot_lives_under_var_tmp(node):
    r = node()
    assert r.returncode == 0, r.stderr
    conf = (node.root / "etc" / "enroot" / "enroot.conf").read_text()
    assert "ENROOT_DATA_PATH       /var/tmp/enroot/data/user-${UID}" in conf


def test_gcp_mounts_the_nic_stack_directory(node):
    (node.root / "etc" / "aicluster" / "node.env").write_text("AICLUSTER_GPUS=8\nAICLUSTER_NIC_LIB_DIR=/var/lib/gib\n")
    (node.root / "var" / "lib" / "gib").mkdir(parents=True)
    assert node().returncode == 0
    fabric = (node.root / "etc" / "enroot" / "mounts.d" / "90-aicluster-fabric.fstab").read_text()
    assert fabric.splitlines()[0].startswith("/var/lib/gib /var/lib/gib none x-create=dir,bind,ro")


def test_a_moved_pyxis_tag_is_refused(node):
    r = node(GIT_HEAD="0" * 40)
    assert r.returncode == 1
    assert "the tag moved, refusing to build it" in r.stderr
    assert "make" not in node.calls.read_text()
    assert not (node.root / C.pyxis.plugin.lstrip("/")).exists()


def test_a_node_that_has_both_installs_nothing(node):
    assert node().returncode == 0
    node.calls.unlink()
    r = node(DPKG_VERSION=f"{C.enroot.version}-1")
    assert r.returncode == 0, r.stderr
    assert not node.calls.exists(), node.calls.read_text()
    assert f"enroot {C.enroot.version} is installed" in r.stderr and f"pyxis {C.pyxis.version} is installed" in r.stderr
