"""Fakes for the container stack's programs: aicluster-containers on a node (tests/scripts/
test_containers.py, a compute node; tests/scripts/test_login_bootstrap.py, a login node runs the
same program) and aicluster-pyxis-build on the head (test_containers.py).

Stubs are bash bodies (no #! line) that append what they were asked to "$CALLS":
- `curl -o OUT URL` writes fake_download(URL) to OUT: "$FAKE_DOWNLOADS/<name>" when that file
  exists (the pyxis source archive), else `fake <name>`; the download named "$TAMPER" gets a
  line more (a .deb or archive replaced on its way).
- `dpkg --print-architecture` answers "$DPKG_ARCH" (amd64); `dpkg-query` answers "$LIBSLURM_VERSION"
  for libslurm-dev and "$DPKG_VERSION" for anything else (an installed enroot).
- `mountpoint` succeeds when "$SCRATCH_MOUNTED" is set; apt-get, systemctl, systemd-run and
  logger only record (python3 is real: install_readers).
- A node never clones or compiles: git, make, gcc and cc record and fail (exit 97). The head's
  build has its own `make` (HEAD_BUILD_STUBS): `make ... DESTDIR=D` leaves
  D/usr/local/lib/slurm/spank_pyxis.so holding the first line of the unpacked Makefile, as pyxis's
  `make install` leaves the plugin it built.

The digests: pins() gives the catalog's pins with every .deb digest replaced by the digest of
what the fake curl downloads for it (and the archive's by the fake archive's), so the programs
rendered with them (node_local_files.containers_program(pins), pyxis_build_program(pins)) run the
real `sha256sum -c` on the fakes' bytes.
"""
from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import os
import sys
import tarfile
from pathlib import Path

from aicluster.catalog.node_local import Containers, containers
from tests.support import node_programs

FAKE_PLUGIN_LINE = "fake spank_pyxis.so built from pyxis's Makefile"

_RECORD = 'echo "$(basename "$0") $*" >> "$CALLS"\n'
_NEVER_ON_A_NODE = _RECORD + 'echo "$(basename "$0"): must not run here" >&2\nexit 97\n'

CONTAINER_TOOL_STUBS = {
    "dpkg": 'echo "${DPKG_ARCH:-amd64}"\n',
    "dpkg-query": 'case "$*" in *libslurm-dev*) printf %s "${LIBSLURM_VERSION:-}" ;; *) printf %s "${DPKG_VERSION:-}" ;; esac\n',
    "mountpoint": '[[ -n ${SCRATCH_MOUNTED:-} ]]\n',
    "apt-get": _RECORD,
    "systemctl": _RECORD,
    "systemd-run": _RECORD,
    "logger": "exit 0\n",
    "curl": (_RECORD +
             'out="" url=""\n'
             'while (($#)); do case $1 in -o) out=$2; shift ;; http*) url=$1 ;; esac; shift; done\n'
             'name=${url##*/}\n'
             'if [[ -n ${FAKE_DOWNLOADS:-} && -f $FAKE_DOWNLOADS/$name ]]; then cp "$FAKE_DOWNLOADS/$name" "$out"\n'
             'else printf "fake %s\\n" "$name" > "$out"; fi\n'
             'if [[ $name == "${TAMPER:-}" ]]; then echo tampered >> "$out"; fi\n'),
    "git": _NEVER_ON_A_NODE,
    "make": _NEVER_ON_A_NODE,
    "gcc": _NEVER_ON_A_NODE,
    "cc": _NEVER_ON_A_NODE,
}

HEAD_BUILD_STUBS = {
    **CONTAINER_TOOL_STUBS,
    "gcc": "exit 0\n",
    "make": (_RECORD +
             'src="" dest=""\n'
             'while (($#)); do case $1 in -C) src=$2; shift ;; DESTDIR=*) dest=${1#DESTDIR=} ;; esac; shift; done\n'
             'if [[ -n $dest ]]; then mkdir -p "$dest/usr/local/lib/slurm"\n'
             '  head -n 1 "$src/Makefile" > "$dest/usr/local/lib/slurm/spank_pyxis.so"; fi\n'),
}


def fake_download(name: str) -> bytes:
    """What the fake curl writes for a URL ending in `name` (no $FAKE_DOWNLOADS file, no tamper)."""
    return f"fake {name}\n".encode()


def fake_archive() -> bytes:
    """A source archive laid out as GitHub's archive/refs/tags/v<version>.tar.gz (one top
    directory), the same bytes at every call (no time stamps)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        data = (FAKE_PLUGIN_LINE + "\nall:\n").encode()
        info = tarfile.TarInfo(f"pyxis-{containers().pyxis.version}/Makefile")
        info.size, info.mtime = len(data), 0
        tar.addfile(info, io.BytesIO(data))
    return gzip.compress(buf.getvalue(), mtime=0)


def pins(archive: bytes | None = None) -> Containers:
    """The catalog's pins, every digest replaced by that of what the fakes download."""
    c = containers()
    debs = {arch: {p: hashlib.sha256(fake_download(Path(c.enroot.url(p, arch)).name)).hexdigest()
                   for p in c.enroot.packages}
            for arch in c.enroot.sha256}
    return dataclasses.replace(
        c, enroot=dataclasses.replace(c.enroot, sha256=debs),
        pyxis=dataclasses.replace(c.pyxis, sha256=hashlib.sha256(archive or fake_archive()).hexdigest()))


def write_stubs(directory: Path, stubs: dict[str, str]) -> None:
    """Each stub as an executable bash script named for the program in `directory`."""
    for name, body in stubs.items():
        path = directory / name
        path.write_text("#!/bin/bash\n" + body)
        path.chmod(0o755)


def install_readers(bin_dir: Path, stubs_dir: Path) -> None:
    """What aicluster-containers reads the bucket with: aicluster.node.gcp in the lib folder beside
    the node's bin directory (GCP nodes have it with aicluster-secret), and this interpreter as
    `python3` first on PATH (it has boto3)."""
    node_programs.install_modules(bin_dir, ["aicluster-secret"])
    python = stubs_dir / "python3"
    if not python.exists():
        python.symlink_to(sys.executable)


def install_sync(bin_dir: Path) -> None:
    """The real aicluster-sync in the head's bin directory (its --publish-artifact)."""
    node_programs.install(bin_dir, ["aicluster-sync"])


def calls(path: Path) -> str:
    return path.read_text() if path.exists() else ""


FAKE_AWS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull}
