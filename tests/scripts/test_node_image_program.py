"""aicluster-node-install --bake, run for real from the archive a builder gets (render/node_image.py's
bake files), with recording stubs for apt and systemctl and fake installers that record how they
were asked; and the contents key and pins it bakes from."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from aicluster.catalog.slurm_release import slurm_release
from aicluster.render import node_image
from tests.support import node_programs

RECORD = '#!/bin/bash\necho "$(basename "$0") $*" >> "$CALLS"\n'
STUBS = {
    "apt-get": RECORD, "apt-mark": RECORD, "systemctl": RECORD,
    "slurmd": '#!/bin/bash\necho "slurm 24.11.5"\n',
    "enroot": '#!/bin/bash\necho "4.2.1"\n',
    "nvidia-smi": '#!/bin/bash\necho "580.95.05"\n',
}


@pytest.fixture
def builder(tmp_path):
    stubs, root, programs = tmp_path / "stubs", tmp_path / "root", tmp_path / "root/opt/aicluster/bin"
    stubs.mkdir()
    for name, text in STUBS.items():
        (stubs / name).write_text(text)
        (stubs / name).chmod(0o755)
    node_programs.install(programs, ["aicluster-node-install"], python=sys.executable)
    # aicluster-install-slurm is run for real in test_install_slurm.py; here it records how it is asked.
    for name in ("aicluster-install-slurm", "aicluster-pyxis-build", "aicluster-containers", "aicluster-monitoring"):
        (programs / name).write_text(RECORD + f'exit "$(cat {tmp_path}/{name}.rc 2>/dev/null || echo 0)"\n')
        (programs / name).chmod(0o755)
    pins = root / node_image.PINS_FILE.lstrip("/")
    pins.parent.mkdir(parents=True)
    pins.write_bytes(node_image.bake_files("aws")[node_image.PINS_FILE])

    def run(*extra: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "PATH": f"{stubs}:/usr/bin:/bin", "AICLUSTER_ROOT": str(root),
               "AICLUSTER_BIN": str(programs), "CALLS": str(tmp_path / "calls")}
        return subprocess.run([str(programs / "aicluster-node-install"), *node_image.BAKE_COMMAND[1:], *extra],
                              env=env, capture_output=True, text=True, timeout=60)

    run.root, run.calls, run.tmp = root, tmp_path / "calls", tmp_path
    return run


def test_the_bake_installs_in_order_and_writes_the_manifest(builder):
    done = builder()
    assert done.returncode == 0, done.stderr
    calls = builder.calls.read_text().splitlines()
    r = slurm_release()
    install = next(c for c in calls if c.startswith("apt-get install"))
    assert {"munge", "python3-boto3", "libnvidia-container-tools"} <= set(install.split())
    assert not any("slurm" in word for word in install.split())        # Slurm is never a distribution's
    assert f"aicluster-install-slurm {r.install_args()}" in calls
    order = [c.split()[0] + (" " + c.split()[1] if c.startswith(("aicluster-", "apt-get")) else "") for c in calls]
    assert order == ["apt-get update", "apt-get install", "aicluster-install-slurm --version",
                     "aicluster-pyxis-build --install", "aicluster-containers --install-only",
                     "aicluster-monitoring --install-only", "apt-get clean"]
    assert "aicluster-monitoring --install-only --cloud aws --role compute" in calls
    assert not any(c.startswith(("apt-mark", "systemctl enable")) for c in calls)   # nothing held or enabled
    manifest = json.loads((builder.root / node_image.MANIFEST.lstrip("/")).read_text())
    assert manifest["contents"] == node_image.contents_key("aws") and manifest["cloud"] == "aws"
    assert manifest["found"]["slurmd"] == "slurm 24.11.5" and manifest["found"]["nvidia_driver"] == "580.95.05"
    assert manifest["pins"]["slurm"] == r.pins()


def test_the_bake_refuses_pins_of_another_cloud(builder):
    done = builder("--cloud", "gcp")
    assert done.returncode == 1 and "are for 'aws', not 'gcp'" in done.stderr
    assert not builder.calls.exists()
    assert builder("--cloud", "aws").returncode == 0


def test_a_failed_slurm_build_is_the_bakes_error(builder):
    (builder.tmp / "aicluster-install-slurm.rc").write_text("1")
    done = builder()
    assert done.returncode == 1 and "bake: slurm: " in done.stderr
    assert "aicluster-pyxis-build" not in builder.calls.read_text()


def test_a_failed_step_names_itself_and_writes_no_manifest(builder):
    (builder.tmp / "aicluster-pyxis-build.rc").write_text("1")
    done = builder()
    assert done.returncode == 1
    assert "bake: pyxis: " in done.stderr
    assert not (builder.root / node_image.MANIFEST.lstrip("/")).exists()
    assert "aicluster-containers" not in builder.calls.read_text()


def test_the_node_side_and_the_control_side_name_the_same_files():
    from aicluster.node import image

    assert image.MANIFEST == node_image.MANIFEST and image.PINS == node_image.PINS_FILE


def test_the_contents_key_names_every_pin_and_nothing_else():
    key = node_image.contents_key("aws")
    assert len(key) == 16 and key == node_image.contents_key("aws") != node_image.contents_key("gcp")
    pins = node_image.pins("aws")
    assert pins["slurm"] == slurm_release().pins() and pins["slurm"]["version"] == "24.11.5"
    assert set(node_image.pins("gcp")["nic_stacks"]) >= {"tcpx", "tcpxo", "rdma"}
    assert all(len(d) == 64 for digests in pins["enroot"]["sha256"].values() for d in digests.values())
    assert len(pins["pyxis"]["sha256"]) == 64 and len(pins["node_exporter"]["sha256"]) == 64
    assert "source" not in json.dumps(pins) and "checked" not in pins["cloudwatch_agent"]
    shipped = json.loads(node_image.bake_files("aws")[node_image.PINS_FILE])
    assert shipped == {"contents": key, **pins}


def test_a_new_pin_is_a_new_key(monkeypatch):
    before = node_image.contents_key("aws")
    node_image._pins.cache_clear()
    import aicluster.render.node_image as module
    real = module.containers

    def newer():
        import dataclasses
        c = real()
        return dataclasses.replace(c, pyxis=dataclasses.replace(c.pyxis, version="0.99.0"))
    monkeypatch.setattr(module, "containers", newer)
    try:
        assert node_image.contents_key("aws") != before
    finally:
        node_image._pins.cache_clear()
