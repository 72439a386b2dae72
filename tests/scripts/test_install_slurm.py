"""aicluster-install-slurm, run for real from the node archive in a scratch tree (AICLUSTER_ROOT)
against a fake Slurm source archive: a tiny tree whose configure, make and make install are shell
that write files (the slurmd it installs answers `slurmd -V`), served by a local HTTP server and by
file:// URLs. apt-get, getent, groupadd, useradd, ldconfig and systemctl are recording fakes."""
from __future__ import annotations

import functools
import hashlib
import http.server
import io
import json
import os
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import pytest

from aicluster.catalog.slurm_release import slurm_release
from aicluster.node.install_slurm import BUILD_DEPENDS, REQUIRED_PLUGINS, STAMP, UNITS
from tests.support import node_programs

VERSION = "24.11.5"
RECORD = '#!/bin/bash\necho "$(basename "$0") $*" >> "$CALLS"\n'
FAKES = {"apt-get": RECORD, "groupadd": RECORD, "useradd": RECORD, "ldconfig": RECORD, "systemctl": RECORD,
         # No slurm account yet: the program creates it.
         "getent": RECORD + "exit 2\n"}
CONFIGURE = """#!/bin/bash
# A fake configure: records its arguments, writes what make reads and the units make would build.
echo "configure $*" >> "$CALLS"
printf 'VERSION=%s\\n' "$(cat VERSION)" > config.status
mkdir -p etc
for unit in slurmctld slurmd slurmdbd sackd; do
  printf '[Service]\\nExecStart=/usr/sbin/%s --systemd\\n' "$unit" > "etc/$unit.service"
done
"""
MAKEFILE = """all:
\techo "make all" >> "$$CALLS"
\ttouch built
install: built
\techo "make install $(DESTDIR)" >> "$$CALLS"
\tmkdir -p $(DESTDIR)/usr/sbin $(DESTDIR)/usr/include/slurm $(DESTDIR)/usr/lib/slurm
\tprintf '#!/bin/sh\\necho "slurm %s"\\n' "$$(cat VERSION)" > $(DESTDIR)/usr/sbin/slurmd
\tchmod 0755 $(DESTDIR)/usr/sbin/slurmd
\techo '/* spank */' > $(DESTDIR)/usr/include/slurm/spank.h
\techo "#define SLURM_VERSION_NUMBER 0x180b05" > $(DESTDIR)/usr/include/slurm/slurm_version.h
\tfor p in $(PLUGINS); do touch $(DESTDIR)/usr/lib/slurm/$$p.so; done
"""


def fake_archive(version: str = VERSION, plugins=REQUIRED_PLUGINS) -> bytes:
    out = io.BytesIO()
    top = f"slurm-slurm-{version.replace('.', '-')}-1"
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        makefile = f"PLUGINS = {' '.join(plugins)}\n" + MAKEFILE
        for name, text, mode in (("configure", CONFIGURE, 0o755), ("Makefile", makefile, 0o644),
                                 ("VERSION", version + "\n", 0o644)):
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mode = len(text.encode()), mode
            tar.addfile(info, io.BytesIO(text.encode()))
    return out.getvalue()


ARCHIVE = fake_archive()
SHA256 = hashlib.sha256(ARCHIVE).hexdigest()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """http://127.0.0.1:<port>/good.tar.gz (the archive), /bad.tar.gz (other bytes), anything else 404."""
    served = tmp_path_factory.mktemp("served")
    (served / "good.tar.gz").write_bytes(ARCHIVE)
    (served / "bad.tar.gz").write_bytes(fake_archive("24.11.4"))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *a: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture
def node(tmp_path):
    fakes, root, programs = tmp_path / "fakes", tmp_path / "root", tmp_path / "root/opt/aicluster/bin"
    fakes.mkdir()
    for name, text in FAKES.items():
        (fakes / name).write_text(text)
        (fakes / name).chmod(0o755)
    node_programs.install(programs, ["aicluster-install-slurm"], python=sys.executable)
    (tmp_path / "slurm.tar.gz").write_bytes(ARCHIVE)
    calls = tmp_path / "calls"

    def run(*urls: str, sha256: str = SHA256, version: str = VERSION, extra=()) -> subprocess.CompletedProcess:
        env = {**os.environ, "PATH": f"{fakes}:/usr/bin:/bin", "AICLUSTER_ROOT": str(root), "CALLS": str(calls)}
        return subprocess.run([str(programs / "aicluster-install-slurm"), "--version", version, "--sha256", sha256,
                               "--size", str(len(ARCHIVE)), *extra, *urls], env=env, capture_output=True, text=True,
                              timeout=60)

    run.root, run.file_url = root, (tmp_path / "slurm.tar.gz").as_uri()
    run.calls = lambda: calls.read_text().splitlines() if calls.exists() else []
    return run


def test_it_builds_and_installs_the_pinned_slurm_in_the_products_paths(node):
    done = node(node.file_url)
    assert done.returncode == 0, done.stderr
    calls = node.calls()
    configure = next(c for c in calls if c.startswith("configure "))
    assert {"--prefix=/usr", "--sysconfdir=/etc/slurm", "--with-pmix"} <= set(configure.split())
    install = next(c for c in calls if c.startswith("apt-get install"))
    assert set(BUILD_DEPENDS) <= set(install.split()) and {"libmunge-dev", "libmariadb-dev", "libpmix-dev"} <= \
        set(install.split())
    assert f"make install {node.root}" in calls
    assert "groupadd --system --gid 64030 slurm" in calls and any(c.startswith("useradd --system --uid 64030") for c in calls)
    assert "ldconfig " in calls and "systemctl daemon-reload" in calls
    # Dependencies before the build; the build before the account, ldconfig and the units.
    order = [c.split()[0] for c in calls if c.split()[0] in ("apt-get", "configure", "make", "ldconfig")]
    assert order == ["apt-get", "apt-get", "configure", "make", "make", "ldconfig"]
    assert subprocess.run([node.root / "usr/sbin/slurmd", "-V"], capture_output=True, text=True).stdout.split()[-1] \
        == VERSION
    for unit in UNITS:
        assert (node.root / f"usr/lib/systemd/system/{unit}.service").read_text().startswith("[Service]")
    assert (node.root / "usr/include/slurm/spank.h").exists()      # pyxis builds against it
    for folder in ("etc/slurm", "var/spool/slurmd", "var/log/slurm"):
        assert (node.root / folder).is_dir()
    stamp = json.loads((node.root / STAMP.lstrip("/")).read_text())
    assert stamp["version"] == VERSION and stamp["sha256"] == SHA256 and stamp["url"] == node.file_url
    assert not (node.root / "var/tmp/aicluster-slurm-build").exists()     # the build tree is removed


def test_a_wrong_sha256_is_refused_and_nothing_is_installed(node, server):
    done = node(f"{server}/bad.tar.gz", node.file_url, sha256="0" * 64)
    assert done.returncode == 1
    assert "no URL gives the pinned archive" in done.stderr and "refused" in done.stderr
    assert node.calls() == []                  # no apt-get, no configure, no make
    assert not (node.root / "usr").exists() and not (node.root / STAMP.lstrip("/")).exists()
    assert not list((node.root / "var/tmp").rglob("*.tar.gz*"))


def test_the_first_url_failing_falls_through_to_the_second(node, server):
    done = node(f"{server}/missing.tar.gz", f"{server}/bad.tar.gz", f"{server}/good.tar.gz")
    assert done.returncode == 0, done.stderr
    assert "cannot download" in done.stderr and "not the pinned" in done.stderr
    assert json.loads((node.root / STAMP.lstrip("/")).read_text())["url"] == f"{server}/good.tar.gz"


def test_a_second_run_does_nothing(node):
    assert node(node.file_url).returncode == 0
    before = node.calls()
    done = node("http://127.0.0.1:9/unreachable.tar.gz")       # it does not even download
    assert done.returncode == 0, done.stderr
    assert "nothing to do" in done.stdout and node.calls() == before


def test_another_installed_version_is_refused_unless_upgrade(node):
    assert node(node.file_url).returncode == 0
    installed = (node.root / "usr/sbin/slurmd").read_bytes()
    other = fake_archive("24.11.6")
    (node.root.parent / "slurm.tar.gz").write_bytes(other)
    sha = hashlib.sha256(other).hexdigest()
    calls = node.calls()
    done = node(node.file_url, version="24.11.6", sha256=sha, extra=("--size", str(len(other))))
    assert done.returncode == 3
    assert "Slurm 24.11.5 is installed here, the pin is 24.11.6: refused" in done.stderr and "--upgrade" in done.stderr
    assert node.calls() == calls and (node.root / "usr/sbin/slurmd").read_bytes() == installed
    done = node(node.file_url, version="24.11.6", sha256=sha, extra=("--size", str(len(other)), "--upgrade"))
    assert done.returncode == 0, done.stderr
    assert json.loads((node.root / STAMP.lstrip("/")).read_text())["version"] == "24.11.6"


def test_a_slurmd_it_did_not_install_is_refused(node):
    """An older cluster's node: Ubuntu's apt-installed slurmd 23.11.4, no stamp."""
    slurmd = node.root / "usr/sbin/slurmd"
    slurmd.parent.mkdir(parents=True)
    slurmd.write_text('#!/bin/sh\necho "slurm-wlm 23.11.4"\n')
    slurmd.chmod(0o755)
    done = node(node.file_url)
    assert done.returncode == 3 and "slurmd 23.11.4 is installed here, not by aicluster-install-slurm" in done.stderr
    assert node.calls() == []


def test_a_build_without_a_plugin_the_configuration_loads_is_refused(node):
    """configure leaves a plugin out when its library is missing (no libpmix-dev: no mpi/pmix)."""
    archive = fake_archive(plugins=[p for p in REQUIRED_PLUGINS if p != "mpi_pmix"])
    (node.root.parent / "slurm.tar.gz").write_bytes(archive)
    done = node(node.file_url, sha256=hashlib.sha256(archive).hexdigest(), extra=("--size", str(len(archive))))
    assert done.returncode == 1 and "the build has no mpi_pmix in /usr/lib/slurm" in done.stderr
    assert not (node.root / STAMP.lstrip("/")).exists()


def test_the_catalog_pins_the_source_archive_it_is_run_with():
    r = slurm_release()
    assert (r.release, r.version) == ("24.11", "24.11.5")
    assert r.urls[0] == "https://github.com/SchedMD/slurm/archive/refs/tags/slurm-24-11-5-1.tar.gz"
    assert r.urls[1] == "http://deb.debian.org/debian/pool/main/s/slurm-wlm/slurm-wlm_24.11.5.orig.tar.gz"
    assert r.sha256 == "e1a5547edd212c38b5e3230a284133f777b32746551f094aaa81cc4af375e332" and r.size == 9907599
    args = r.install_args().split()
    assert args[:6] == ["--version", r.version, "--sha256", r.sha256, "--size", str(r.size)] and args[6:] == list(r.urls)
    from aicluster.node.install_slurm import main
    with pytest.raises(SystemExit):                       # the arguments parse (then --help ends it)
        main([*args, "--help"])
