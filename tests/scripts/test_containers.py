"""The container stack of Slurm nodes (issue 15, deliverable 3; issue 24, item 9: supply chain).

aicluster-containers, rendered with test pins (tests/support/container_tools.py: the catalog's pins
with the digests of what the fakes download) and run in a scratch tree (AICLUSTER_ROOT): curl,
apt-get, dpkg, systemctl, systemd-run are recording stubs, git/make/gcc/cc fail if a node ever
runs them; sha256sum, install, mktemp and python3 (boto3 against moto's S3, aicluster.node.gcp
against the fake Cloud Storage of tests/support/fake_gcp.py) are real. aicluster-pyxis-build runs the same way
on a "head", with the real aicluster-sync --publish-artifact.

What a node ends up with: the pinned enroot .debs, each checked against its pinned SHA-256 (a
tampered one, or an architecture without a pin, installs nothing); pyxis as the head built it,
checked against the SHA-256 published beside it (a tampered one installs nothing), or, not
published yet, a retrying unit and a set-up that goes on (slurmd never waits); enroot's paths on
/scratch when it is mounted (else /var/tmp); the host's fabric directories in containers. No node
clones or compiles anything: the rendered compute and login boot paths hold no clone, no compiler,
and no download that is not checked against a pinned digest.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shutil
import subprocess
import urllib.request
from pathlib import Path

import boto3
import pytest
import yaml

from aicluster.catalog.node_local import containers
from aicluster.catalog.slurm_release import slurm_release
from aicluster.render.node_programs import module_source
from aicluster.render.node_local_files import (ARTIFACT_PREFIX, CONTAINERS_PROGRAM, PYXIS_ARTIFACT_PREFIX, PYXIS_FETCH_UNIT,
                                        containers_program, pyxis_artifact_dir, pyxis_build_program)
from tests.support.container_tools import (CONTAINER_TOOL_STUBS, FAKE_AWS, FAKE_PLUGIN_LINE, HEAD_BUILD_STUBS, calls,
                                           fake_archive, install_readers, install_sync, pins, write_stubs)

C = containers()
PINS = pins()
BUCKET = "demo-config"
ARCH = "amd64"
KEY = f"{pyxis_artifact_dir(PINS)}/{ARCH}/spank_pyxis.so"
PLUGIN = b"\x7fELF fake spank_pyxis.so, as the head built it\n"


@pytest.fixture
def s3(moto_endpoint):
    urllib.request.urlopen(urllib.request.Request(f"{moto_endpoint}/moto-api/reset", method="POST")).close()
    client = boto3.client("s3", region_name="us-east-1", endpoint_url=moto_endpoint, **{
        k.lower(): v for k, v in FAKE_AWS.items() if k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")})
    client.create_bucket(Bucket=BUCKET)
    client.endpoint = moto_endpoint
    return client


def publish(s3, data: bytes = PLUGIN, digest: str | None = None, key: str = KEY) -> None:
    """What the head's aicluster-sync --publish-artifact leaves: the object, then its SHA-256."""
    s3.put_object(Bucket=BUCKET, Key=key, Body=data)
    s3.put_object(Bucket=BUCKET, Key=key + ".sha256",
                  Body=f"{digest or hashlib.sha256(data).hexdigest()}  spank_pyxis.so\n".encode())


# A compute node: slurmd and GPU support in enroot are there (a login node has neither).
NODE_STUBS = {"slurmd": "exit 0\n", "nvidia-container-cli": "exit 0\n", **CONTAINER_TOOL_STUBS}


@pytest.fixture
def node(tmp_path, s3):
    tmp_path = tmp_path / "node"
    stubs, programs = tmp_path / "stubs", tmp_path / "opt"
    stubs.mkdir(parents=True)
    programs.mkdir()
    write_stubs(stubs, NODE_STUBS)
    install_readers(programs, stubs)
    root = tmp_path / "root"
    (root / "etc" / "aicluster").mkdir(parents=True)
    (root / "etc" / "aicluster" / "node.env").write_text(
        f"AICLUSTER_GPUS=8\nAICLUSTER_CLOUD=aws\nAICLUSTER_BUCKET={BUCKET}\nAICLUSTER_REGION=us-east-1\n")
    (root / "opt" / "amazon" / "efa").mkdir(parents=True)      # the DLAMI's EFA; no aws-ofi-nccl dirs
    script = programs / CONTAINERS_PROGRAM
    script.write_text(containers_program(PINS))
    script.chmod(0o755)

    def run(*args: str, **env: str) -> subprocess.CompletedProcess:
        full = {"PATH": f"{stubs}:/usr/bin:/bin", "AICLUSTER_ROOT": str(root), "AICLUSTER_BIN": str(programs),
                "CALLS": str(tmp_path / "calls"), "HOME": str(tmp_path), "AWS_ENDPOINT_URL": s3.endpoint,
                **FAKE_AWS, **env}
        return subprocess.run(["bash", str(script), *args], env=full, capture_output=True, text=True, timeout=120)

    run.root, run.calls, run.script = root, tmp_path / "calls", script
    return run


def plugin(node) -> Path:
    return node.root / C.pyxis.plugin.lstrip("/")


def test_a_fresh_node_gets_the_pinned_enroot_and_the_heads_pyxis(node, s3):
    publish(s3)
    r = node(SCRATCH_MOUNTED="1")
    assert r.returncode == 0, r.stderr
    done = calls(node.calls)
    for package in C.enroot.packages:
        assert C.enroot.url(package) in done
    install = next(line for line in done.splitlines() if line.startswith("apt-get install"))
    assert "enroot.deb" in install and "enroot+caps.deb" in install
    assert plugin(node).read_bytes() == PLUGIN
    assert (node.root / (C.pyxis.plugin.lstrip("/") + ".version")).read_text() == KEY + "\n"
    # Nothing cloned, nothing compiled, no retrying unit (it was published).
    assert not re.search(r"^(git|make|gcc|cc) ", done, re.M) and "systemctl enable" not in done
    assert f"enroot {C.enroot.version} and pyxis {C.pyxis.version} ready" in r.stderr
    conf = (node.root / "etc" / "enroot" / "enroot.conf").read_text()
    assert "ENROOT_DATA_PATH       /scratch/enroot/data/user-${UID}" in conf
    assert "ENROOT_CACHE_PATH      /scratch/enroot/cache/user-${UID}" in conf
    assert oct((node.root / "scratch" / "enroot").stat().st_mode & 0o7777) == "0o1777"
    assert (node.root / "etc" / "tmpfiles.d" / "aicluster-enroot.conf").read_text() == "d /run/enroot 1777 root root -\n"
    fabric = (node.root / "etc" / "enroot" / "mounts.d" / "90-aicluster-fabric.fstab").read_text()
    assert fabric == "/opt/amazon/efa /opt/amazon/efa none x-create=dir,bind,ro,nosuid,nodev,private 0 -1\n"


@pytest.mark.parametrize("package", C.enroot.packages)
def test_a_tampered_deb_is_refused_and_nothing_is_installed(node, s3, package):
    """A .deb that is not the pinned one (a replaced release asset, a man in the middle) never
    reaches apt; before, any bytes the URL answered were installed."""
    publish(s3)
    r = node(TAMPER=Path(C.enroot.url(package)).name)
    assert r.returncode == 1
    assert "does not have the pinned SHA-256" in r.stderr and "nothing installed" in r.stderr
    done = calls(node.calls)
    assert "apt-get install" not in done and "apt-get update" not in done
    assert not plugin(node).exists()


@pytest.mark.parametrize("args", [(), ("--install-only",), ("--pyxis",)])
def test_an_architecture_without_a_pin_boots_without_containers(node, s3, args):
    """An aarch64 (Grace) node: enroot has no arm64 pin, so nothing is installed, one line says
    what the node lacks, and the set-up ends well, so the boot goes on to slurmd (pyxis is
    `optional` in plugstack.conf). Before, it failed and the node never joined Slurm."""
    publish(s3, key=f"{pyxis_artifact_dir(PINS)}/arm64/spank_pyxis.so")   # even a published arm64 pyxis
    assert "arm64" not in PINS.enroot.sha256
    r = node(*args, DPKG_ARCH="arm64")
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == [
        f"aicluster-containers: containers unavailable on arm64: enroot {C.enroot.version} has no pinned digest "
        "(catalog/node_local.yaml); jobs run without --container-image"]
    assert not node.calls.exists(), node.calls.read_text()       # no curl, apt-get, systemctl
    assert not plugin(node).exists() and not (node.root / "etc" / "enroot").exists()
    assert not (node.root / "etc" / "systemd").exists()


def test_a_pinned_architecture_whose_deb_does_not_match_still_fails(node, s3):
    """The skip is for an architecture with no pin only: pinned arm64 digests that the download
    does not match (a replaced asset, a wrong pin) refuse the package and fail the boot."""
    publish(s3)
    arm64 = {p: "0" * 64 for p in C.enroot.packages}
    node.script.write_text(containers_program(dataclasses.replace(
        PINS, enroot=dataclasses.replace(PINS.enroot, sha256={**PINS.enroot.sha256, "arm64": arm64}))))
    r = node(DPKG_ARCH="arm64")
    assert r.returncode == 1
    assert "does not have the pinned SHA-256" in r.stderr and "nothing installed" in r.stderr
    assert "containers unavailable" not in r.stderr
    assert "apt-get install" not in calls(node.calls) and not plugin(node).exists()


@pytest.mark.parametrize("tamper", ["object", "digest", "not-a-digest"])
def test_a_tampered_pyxis_artifact_is_refused_and_nothing_is_installed(node, s3, tamper):
    """The plugin must match the SHA-256 the head published beside it: another object (or digest)
    installs nothing and fails the set-up (its reason is the node's)."""
    if tamper == "object":
        publish(s3, data=PLUGIN + b"tampered", digest=hashlib.sha256(PLUGIN).hexdigest())
    elif tamper == "digest":
        publish(s3, digest="0" * 64)
    else:
        publish(s3, digest="sha256:nope")
    r = node()
    assert r.returncode == 1
    assert "was refused" in r.stderr and "nothing installed" in r.stderr
    assert not plugin(node).exists()
    assert not (node.root / (C.pyxis.plugin.lstrip("/") + ".version")).exists()


def test_pyxis_not_published_yet_is_retried_in_the_background_and_slurmd_does_not_wait(node, s3):
    """A new cluster's head may still be building: the set-up finishes (enroot ready) and a unit
    fetches pyxis every minute until it is published (a unit file: a reboot before then loses
    nothing); nothing is built here."""
    r = node()
    assert r.returncode == 0, r.stderr
    done = calls(node.calls)
    unit = (node.root / "etc" / "systemd" / "system" / f"{PYXIS_FETCH_UNIT}.service").read_text()
    assert f"ExecStart={node.script} --pyxis\n" in unit
    assert "Restart=on-failure\nRestartSec=60\n" in unit and "WantedBy=multi-user.target" in unit
    assert f"systemctl enable --now --no-block {PYXIS_FETCH_UNIT}.service" in done.splitlines()
    assert "pyxis" in r.stderr and "pending" in r.stderr and not plugin(node).exists()
    assert not re.search(r"^(git|make|gcc|cc) ", done, re.M)
    # What the unit runs: fails (retried) until the head publishes, then installs it.
    again = node("--pyxis")
    assert again.returncode == 1 and "not published yet" in again.stderr
    publish(s3)
    again = node("--pyxis")
    assert again.returncode == 0, again.stderr
    assert plugin(node).read_bytes() == PLUGIN


def test_gcp_nodes_fetch_pyxis_from_cloud_storage(node, tmp_path):
    from tests.support.fake_gcp import FakeGcp

    fake = FakeGcp().start()
    try:
        fake.objects[(BUCKET, KEY)] = PLUGIN
        fake.objects[(BUCKET, KEY + ".sha256")] = f"{hashlib.sha256(PLUGIN).hexdigest()}  spank_pyxis.so\n".encode()
        (node.root / "etc" / "aicluster" / "node.env").write_text(
            f"AICLUSTER_GPUS=8\nAICLUSTER_CLOUD=gcp\nAICLUSTER_BUCKET={BUCKET}\nAICLUSTER_REGION=us-central1\n"
            "AICLUSTER_NIC_LIB_DIR=/var/lib/gib\n")
        (node.root / "var" / "lib" / "gib").mkdir(parents=True)
        r = node(**fake.env())
        assert r.returncode == 0, r.stderr
        assert plugin(node).read_bytes() == PLUGIN
        fabric = (node.root / "etc" / "enroot" / "mounts.d" / "90-aicluster-fabric.fstab").read_text()
        assert fabric.splitlines()[0].startswith("/var/lib/gib /var/lib/gib none x-create=dir,bind,ro")
    finally:
        fake.stop()


def test_gcp_nodes_read_the_bucket_with_the_archive_installed_last(node, tmp_path):
    """An update installs a new aicluster-node-<sha12>.pyz beside the old one: the bucket reader is
    the newest archive (the one the entry points run), not whichever name sorts last."""
    import os
    import zipfile

    from tests.support.fake_gcp import FakeGcp

    lib = Path(node.script).parent.parent / "lib"
    stale = lib / "aicluster-node-ffffffffffff.pyz"      # sorts after any real name
    with zipfile.ZipFile(stale, "w") as archive:
        archive.writestr("aicluster/__init__.py", "")
        archive.writestr("aicluster/node/__init__.py", "")
        archive.writestr("aicluster/node/gcp.py", "raise SystemExit('read with a stale archive')\n")
    os.utime(stale, (1_000_000_000, 1_000_000_000))
    fake = FakeGcp().start()
    try:
        fake.objects[(BUCKET, KEY)] = PLUGIN
        fake.objects[(BUCKET, KEY + ".sha256")] = f"{hashlib.sha256(PLUGIN).hexdigest()}  spank_pyxis.so\n".encode()
        (node.root / "etc" / "aicluster" / "node.env").write_text(
            f"AICLUSTER_GPUS=8\nAICLUSTER_CLOUD=gcp\nAICLUSTER_BUCKET={BUCKET}\nAICLUSTER_REGION=us-central1\n")
        r = node(**fake.env())
        assert r.returncode == 0, r.stderr
        assert "stale archive" not in r.stderr and plugin(node).read_bytes() == PLUGIN
    finally:
        fake.stop()


def test_without_scratch_enroot_lives_under_var_tmp(node, s3):
    publish(s3)
    r = node()
    assert r.returncode == 0, r.stderr
    conf = (node.root / "etc" / "enroot" / "enroot.conf").read_text()
    assert "ENROOT_DATA_PATH       /var/tmp/enroot/data/user-${UID}" in conf


def test_a_node_that_has_both_installs_nothing(node, s3):
    publish(s3)
    assert node().returncode == 0
    node.calls.unlink()
    r = node(DPKG_VERSION=f"{C.enroot.version}-1")
    assert r.returncode == 0, r.stderr
    assert not node.calls.exists(), node.calls.read_text()
    assert f"enroot {C.enroot.version} is installed" in r.stderr and f"pyxis {C.pyxis.version} is installed" in r.stderr


# --- the head builds pyxis once and publishes it ------------------------------------------------

@pytest.fixture
def head(tmp_path, s3):
    tmp_path = tmp_path / "head"
    stubs, programs, downloads = tmp_path / "stubs", tmp_path / "opt", tmp_path / "downloads"
    for d in (stubs, programs, downloads):
        d.mkdir(parents=True)
    write_stubs(stubs, HEAD_BUILD_STUBS)
    install_sync(programs)
    (stubs / "python3").symlink_to(__import__("sys").executable)
    archive = fake_archive()
    (downloads / Path(C.pyxis.url).name).write_bytes(archive)
    root = tmp_path / "root"
    (root / "etc" / "aicluster").mkdir(parents=True)
    (root / "etc" / "aicluster" / "sync.json").write_text(
        json.dumps({"bucket": BUCKET, "prefix": "head/", "region": "us-east-1"}))
    # The headers aicluster-install-slurm installs with the cluster's Slurm (24.11.5: 0x180b05).
    (root / "usr/include/slurm").mkdir(parents=True)
    (root / "usr/include/slurm/slurm_version.h").write_text(slurm_version_h(slurm_release().version))
    script = programs / "aicluster-pyxis-build"
    script.write_text(pyxis_build_program(pins(archive)))
    script.chmod(0o755)

    def run(*args: str, **env: str) -> subprocess.CompletedProcess:
        full = {"PATH": f"{stubs}:/usr/bin:/bin", "AICLUSTER_ROOT": str(root), "AICLUSTER_BIN": str(programs),
                "CALLS": str(tmp_path / "calls"), "HOME": str(tmp_path), "FAKE_DOWNLOADS": str(downloads),
                "AWS_ENDPOINT_URL": s3.endpoint,
                **FAKE_AWS, **env}
        return subprocess.run(["bash", str(script), *args], env=full, capture_output=True, text=True, timeout=120)

    run.root, run.calls = root, tmp_path / "calls"
    return run


def test_the_head_builds_pyxis_once_and_publishes_it_with_its_sha256(head, node, s3):
    r = head()
    assert r.returncode == 0, r.stderr
    done = calls(head.calls)
    assert C.pyxis.url in done and "git" not in done.split()
    assert re.search(r"^make -C \S+ -s install prefix=/usr/local DESTDIR=\S+$", done, re.M)
    built = s3.get_object(Bucket=BUCKET, Key=KEY)["Body"].read()
    assert built.decode().strip() == FAKE_PLUGIN_LINE
    digest = s3.get_object(Bucket=BUCKET, Key=KEY + ".sha256")["Body"].read().decode()
    assert digest == f"{hashlib.sha256(built).hexdigest()}  spank_pyxis.so\n"
    # Once: a second run (the unit restarted, the head rebooted) builds nothing.
    head.calls.unlink()
    again = head()
    assert again.returncode == 0 and "is published" in again.stderr
    assert "make" not in calls(head.calls)
    # A node installs exactly that build.
    n = node()
    assert n.returncode == 0, n.stderr
    assert plugin(node).read_bytes() == built


def slurm_version_h(version: str) -> str:
    major, minor, micro = (int(p) for p in version.split("."))
    return f"#ifndef _SLURM_VERSION_H_\n#define SLURM_VERSION_NUMBER 0x{major:02x}{minor:02x}{micro:02x}\n#endif\n"


def test_the_head_builds_only_against_the_clusters_slurm_headers(head, s3):
    """The headers of another Slurm (or none) are refused: nothing installed, nothing built."""
    header = head.root / "usr/include/slurm/slurm_version.h"
    header.write_text(slurm_version_h("24.11.4"))
    r = head()
    assert r.returncode == 1
    assert f"the Slurm headers in /usr/include/slurm are 0x180b04, the cluster runs {slurm_release().version} " \
           "(0x180b05): not built" in r.stderr
    header.unlink()
    r = head()
    assert r.returncode == 1 and "the Slurm headers in /usr/include/slurm are missing" in r.stderr
    assert "apt-get" not in calls(head.calls) and "make" not in calls(head.calls)


def test_a_tampered_pyxis_source_archive_is_refused_and_nothing_is_built_or_published(head, s3):
    r = head(TAMPER=Path(C.pyxis.url).name)
    assert r.returncode == 1 and "does not have the pinned SHA-256" in r.stderr
    assert "make" not in calls(head.calls)
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET, Prefix=ARTIFACT_PREFIX)


def test_the_build_runs_in_a_retrying_unit_from_the_heads_sync(head):
    """In the background (a sync pass never waits on it), retried every minute, and again at the
    next boot if the head reboots before it is published."""
    r = head("--background")
    assert r.returncode == 0, r.stderr
    unit = (head.root / "etc" / "systemd" / "system" / "aicluster-pyxis-build.service").read_text()
    assert "Restart=on-failure\nRestartSec=60\n" in unit and "WantedBy=multi-user.target" in unit
    assert re.search(r"^ExecStart=/\S+/aicluster-pyxis-build$", unit, re.M)
    done = calls(head.calls).splitlines()
    assert done[-2:] == ["systemctl enable aicluster-pyxis-build.service",
                         "systemctl restart --no-block aicluster-pyxis-build.service"]
    assert "make" not in calls(head.calls)


def test_the_head_publishes_the_build_program_and_runs_it_from_sync():
    """The program reaches the head with its other published files; aicluster-sync runs it (in
    the background) when it is installed or changes, as the head's monitoring set-up."""
    from aicluster.commands.planner import plan_stack

    for stack in ("aws-p5-slurm", "gcp-a3mega-slurm"):
        files = plan_stack(stack).files
        (manifest_name,) = [n for n in files if n.endswith("manifest.json")]
        manifest = json.loads(files[manifest_name])
        (entry,) = [e for e in manifest["files"] if e["path"] == "/opt/aicluster/bin/aicluster-pyxis-build"]
        assert entry["run"] == ["/opt/aicluster/bin/aicluster-pyxis-build", "--background"]
        assert entry["mode"] == "0755"


# --- what the nodes' boot paths hold --------------------------------------------------------------

# A command (not an argument, not a comment): at the start of a line or after ; & | ( ` $( && ||.
_COMMAND = r"(?:^|[;&|(`]|\$\()\s*(?:sudo\s+|exec\s+|command\s+)?{}(?=\s|$)"
_CLONE = re.compile(_COMMAND.format(r"git\s+clone"), re.M)
_COMPILER = re.compile(_COMMAND.format(r"(?:make|gcc|cc|g\+\+|clang|c\+\+|go\s+build|cargo\s+build)"), re.M)
_DOWNLOAD = re.compile(_COMMAND.format(r"(?:curl|wget)"), re.M)


def _code(text: str) -> str:
    """The script without its comment lines."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def _node_boot_files() -> dict[str, str]:
    """name -> text of everything a compute or login node runs at boot, as the plans render it: the
    user data (and each file it writes) and every program the nodes fetch (compute/, login/), on
    both clouds; and the login user data of both clouds."""
    from aicluster.render.login_files import login_user_data
    from aicluster.commands.planner import plan_stack

    out = {}
    for stack in ("aws-p5-slurm", "gcp-a3mega-slurm"):
        for name, text in plan_stack(stack).files.items():
            if name.startswith(("compute/", "login/")):
                out[f"{stack}:{name}"] = text
            elif name.startswith("user-data/") and not name.endswith("-head.yaml"):
                out[f"{stack}:{name}"] = text
                for f in yaml.safe_load(text).get("write_files", []):
                    out[f"{stack}:{name}:{f['path']}"] = f.get("content", "")
    for cloud in ("aws", "gcp"):
        text = login_user_data(cloud=cloud, cluster="demo", region="us-east-1", hostname="demo-login-1",
                               controller_addr="10.0.0.5", munge_secret="m", bucket=BUCKET)
        out[f"{cloud}-login"] = text
        for f in yaml.safe_load(text)["write_files"]:
            out[f"{cloud}-login:{f['path']}"] = f.get("content", "")
    return out


def test_no_node_clones_or_compiles_at_boot():
    """Before: every compute and login node ran `git clone` of pyxis and `make` at every boot."""
    files = _node_boot_files()
    assert any(name.endswith("/aicluster-containers") for name in files)
    for name, text in files.items():
        code = _code(text)
        assert not _CLONE.search(code), name
        assert not _COMPILER.search(code), (name, _COMPILER.search(code))


def test_every_download_of_the_container_stack_is_checked_against_a_pinned_digest():
    """Each curl of aicluster-containers is followed by a SHA-256 check against a pin, and the pins
    are exactly the catalog's (before: the .debs were installed as downloaded)."""
    text = containers_program()
    lines = _code(text).splitlines()
    downloads = [i for i, line in enumerate(lines) if _DOWNLOAD.search(line)]
    assert downloads
    for i in downloads:
        assert any("sha256sum -c" in line for line in lines[i + 1:i + 4]), lines[i]
    pinned = dict(re.findall(r"^\s+(\w+/[\w+]+)\) echo ([0-9a-f]{64}) ;;$", text, re.M))
    assert pinned == {f"{arch}/{p}": d for arch, digests in C.enroot.sha256.items() for p, d in digests.items()}
    # Every .deb goes through the checked download, and nothing else reaches apt from the network.
    assert len(re.findall(r"^\s+fetch_checked \"https://github.com/NVIDIA/enroot/", text, re.M)) == len(C.enroot.packages)
    assert "fetch_published \"$storage\"" in text         # pyxis: checked against the digest the head published
    for name in ("aicluster-pyxis-build",):
        build = _code(pyxis_build_program())
        b_lines = build.splitlines()
        for i, line in enumerate(b_lines):
            if _DOWNLOAD.search(line):
                assert any("sha256sum -c" in nxt for nxt in b_lines[i + 1:i + 4]), (name, line)
        assert f"PYXIS_SHA256={C.pyxis.sha256}\n" in pyxis_build_program()


def test_the_artifact_lives_where_the_grants_allow():
    assert pyxis_artifact_dir().startswith(PYXIS_ARTIFACT_PREFIX) and PYXIS_ARTIFACT_PREFIX.startswith(ARTIFACT_PREFIX)
    # aicluster-sync publishes only there (it refuses any other key).
    sync = module_source("sync")
    assert f'ARTIFACT_PREFIX = "{ARTIFACT_PREFIX}"' in sync
    assert f"slurm-{slurm_release().version}" in pyxis_artifact_dir()
    assert f"PYXIS_DIR={pyxis_artifact_dir()}\n" in containers_program()
    assert f"PYXIS_DIR={pyxis_artifact_dir()}\n" in pyxis_build_program()


def test_the_pyxis_build_program_passes_shellcheck(tmp_path):
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck is required (.ci/install-system-deps installs it)"
    for name, text in (("aicluster-pyxis-build", pyxis_build_program()), (CONTAINERS_PROGRAM, containers_program())):
        script = tmp_path / name
        script.write_text(text)
        r = subprocess.run([shellcheck, str(script)], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout


# --- who may write and read the artifact ------------------------------------------------------------

def test_only_the_head_writes_artifacts_and_nodes_read_only_pyxis():
    """AWS: the head may put (and read, list) objects under artifacts/ only; compute and login roles
    get s3:GetObject on artifacts/pyxis/* and no write. GCP: the same by IAM conditions."""
    from aicluster.commands.planner import plan_stack

    result = plan_stack("aws-p5-slurm")
    name, plan = result.design.name, result.plan
    policies = {r.name: json.loads(r.inputs["policy"]) for r in plan.of_type("aws:iam/rolePolicy:RolePolicy")}
    bucket = plan.named(f"{name}-slurm-config", "aws:s3/bucket:Bucket").outputs["arn"]
    writes = [(n, st) for n, doc in policies.items() for st in doc["Statement"]
              if any(a in ("s3:PutObject", "s3:*") for a in ([st["Action"]] if isinstance(st["Action"], str) else st["Action"]))]
    # Who may write where artifacts/ lies: the head, and only there (another role may write its own
    # prefix: the node image builder its logs).
    def covers_artifacts(resource) -> bool:
        resources = [resource] if isinstance(resource, str) else resource
        return any(r in ("*", f"{bucket}/*") or r.startswith(f"{bucket}/{ARTIFACT_PREFIX}") for r in resources)

    assert [(n, st["Resource"]) for n, st in writes if covers_artifacts(st["Resource"])] == \
        [(f"{name}-slurm-head-artifacts", f"{bucket}/{ARTIFACT_PREFIX}*")]
    for role_policy in (f"{name}-slurm-node-files-compute-read", f"{name}-login-read"):
        reads = {st["Sid"]: st for st in policies[role_policy]["Statement"]}
        assert reads["ReadPyxis"] == {"Sid": "ReadPyxis", "Effect": "Allow", "Action": "s3:GetObject",
                                      "Resource": f"{bucket}/{PYXIS_ARTIFACT_PREFIX}*"}

    result = plan_stack("gcp-a3mega-slurm")
    name, plan = result.design.name, result.plan
    grants = {r.name: r.inputs for r in plan.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")}
    head = grants[f"{name}-slurm-artifacts-head"]
    assert head["role"] == "roles/storage.objectUser"
    assert head["condition"]["expression"].endswith(f'/objects/{ARTIFACT_PREFIX}")')
    compute = grants[f"{name}-slurm-artifacts-compute"]
    assert compute["role"] == "roles/storage.objectViewer"
    assert compute["condition"]["expression"].endswith(f'/objects/{PYXIS_ARTIFACT_PREFIX}")')
    config = plan.named(f"{name}-slurm-config", "gcp:storage/bucket:Bucket").outputs["name"]
    writers = [n for n, g in grants.items() if g["bucket"] == config and g["role"] != "roles/storage.objectViewer"]
    assert writers == [f"{name}-slurm-artifacts-head"], writers


# --- a baked node image (docs/images.md) ---------------------------------------------------------


def baked(node, contents: str = "0123456789abcdef") -> None:
    env = node.root / "etc" / "aicluster" / "node.env"
    env.write_text(env.read_text() + f"AICLUSTER_IMAGE_CONTENTS={contents}\n")


def test_a_baked_node_with_both_installs_nothing_not_even_a_check_of_the_bucket(node, s3):
    plugin(node).parent.mkdir(parents=True)
    plugin(node).write_bytes(PLUGIN)
    (plugin(node).parent / (plugin(node).name + ".version")).write_text(KEY + "\n")   # as pyxis-build --install
    baked(node)
    r = node(DPKG_VERSION=f"{C.enroot.version}-1")
    assert r.returncode == 0, r.stderr
    assert not node.calls.exists(), node.calls.read_text()
    assert (node.root / "etc" / "enroot" / "enroot.conf").exists()      # configured, as every boot


def test_a_baked_node_that_lacks_enroot_installs_nothing_and_says_what_is_missing(node, s3):
    baked(node)
    r = node()
    assert r.returncode == 1
    assert "the baked image (contents 0123456789abcdef) lacks https://github.com/NVIDIA/enroot/" in r.stderr
    assert not node.calls.exists() or "curl" not in node.calls.read_text()


def test_a_baked_node_without_pyxis_never_reads_the_bucket(node, s3):
    publish(s3)
    baked(node)
    r = node(DPKG_VERSION=f"{C.enroot.version}-1")
    assert r.returncode == 1 and "lacks pyxis" in r.stderr
    assert not plugin(node).exists()


def test_install_only_installs_enroot_and_configures_nothing(node, s3):
    (node.root / "etc" / "aicluster" / "node.env").unlink()           # a builder has no node.env
    r = node("--install-only")
    assert r.returncode == 0, r.stderr
    done = calls(node.calls)
    for package in C.enroot.packages:
        assert C.enroot.url(package) in done
    assert "apt-get install" in done
    assert not (node.root / "etc" / "enroot").exists() and not plugin(node).exists()


def test_the_bake_builds_pyxis_here_with_the_record_a_node_reads(head, node, s3):
    """aicluster-pyxis-build --install: the same build, installed on this machine (a baked image)
    with the record aicluster-containers checks, nothing published."""
    r = head("--install")
    assert r.returncode == 0, r.stderr
    installed = head.root / C.pyxis.plugin.lstrip("/")
    assert installed.read_text().strip() == FAKE_PLUGIN_LINE
    assert (installed.parent / (installed.name + ".version")).read_text().strip() == KEY
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET)
    head.calls.unlink()
    assert head("--install").returncode == 0 and "make" not in calls(head.calls)     # once
