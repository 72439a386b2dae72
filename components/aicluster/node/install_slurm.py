#!/usr/bin/env python3
"""aicluster-install-slurm: build and install the cluster's one Slurm from SchedMD's source archive
(catalog/slurm_release.yaml), the same way on every role (head, login, compute; AWS and GCP) and
on an image builder (aicluster-node-install --bake).

    aicluster-install-slurm --version 24.11.5 --sha256 HEX [--size BYTES] [--upgrade] URL [URL...]

1. Idempotent: a machine whose stamp (/var/lib/aicluster/slurm-install.json) names this version
   and digest, and whose slurmd is there, does nothing. Another version (its stamp, or a slurmd
   found without one: the apt-installed 23.11 of older clusters) is refused unless --upgrade
   (docs/config-sync.md, "Upgrading Slurm": slurmdbd first, then slurmctld, then slurmd).
2. Downloads the archive from each URL in turn until one gives the pinned size and SHA-256;
   anything else is refused and removed, and nothing is installed when no URL gives it.
3. Installs the build dependencies (BUILD_DEPENDS, Ubuntu 24.04 names) with apt-get.
4. ./configure --prefix=/usr --sysconfdir=/etc/slurm (the paths the rest of aicluster uses:
   /usr/sbin/slurmd, /etc/slurm, /var/spool/slurmd, /var/log/slurm; plugins in /usr/lib/slurm,
   headers in /usr/include/slurm for pyxis), make -j$(nproc), make install.
5. Installs the systemd units configure generated (slurmctld, slurmd, slurmdbd, sackd), creates
   the slurm user and group when missing (uid/gid 64030, Debian's, so a node upgraded from the
   Debian packages keeps its files' owner), runs ldconfig, checks `slurmd -V`, writes the stamp.

Exit 0 installed (or already there), 1 failed (the last line says why), 2 usage, 3 refused (another
version is installed). Standard library only. AICLUSTER_ROOT prefixes every path it installs to
(make install DESTDIR=) and reads (the tests run it in a scratch tree with a fake archive).
"""
from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request

PROG = "aicluster-install-slurm"
STAMP = "/var/lib/aicluster/slurm-install.json"
WORK = "/var/tmp/aicluster-slurm-build"
UNITS = ("slurmctld", "slurmd", "slurmdbd", "sackd")
UNIT_DIR = "/usr/lib/systemd/system"
SLURMD = "/usr/sbin/slurmd"
# The slurm account of Debian's and Ubuntu's slurm packages (base-passwd: 64030): the same on every
# node, and the owner an upgraded node's /var/spool/slurm* already has.
SLURM_UID = 64030
# Ubuntu 24.04 names (Debian 12 and 13 have the same): the compiler, munge, and the libraries of
# the plugins aicluster's configuration uses (cgroup/v2 with dbus, hwloc, PMIx for MPI, JSON,
# YAML, JWT and http-parser for slurmrestd and `--json`, Lua for job_submit, PAM, MariaDB for
# slurmdbd, curl for the InfluxDB profile plugin, lz4 for sbcast, numa, readline for scontrol).
# What ParallelCluster's cookbook (aws-parallelcluster-slurm, slurm/install_slurm.rb) and
# Cluster Toolkit's slurm-gcp image role (ansible/roles/slurm/tasks) install before building.
BUILD_DEPENDS = (
    "build-essential", "pkg-config", "python3", "munge", "libmunge-dev", "libhwloc-dev", "libjson-c-dev",
    "libhttp-parser-dev", "libyaml-dev", "libjwt-dev", "libpmix-dev", "libdbus-1-dev", "liblua5.3-dev",
    "libpam0g-dev", "libmariadb-dev", "libcurl4-openssl-dev", "libssl-dev", "liblz4-dev", "zlib1g-dev",
    "libnuma-dev", "libreadline-dev",
)
# The plugins aicluster's rendered configuration loads (templates/slurm: slurm.conf, cgroup.conf),
# slurmdbd's MariaDB storage, PMIx for MPI, and the GB200 NVL72 pair (switch/nvidia_imex,
# topology/block): configure leaves out a plugin whose library is missing without failing, so a
# build without one of these is refused rather than found out by the first job.
REQUIRED_PLUGINS = (
    "accounting_storage_slurmdbd", "accounting_storage_mysql", "auth_munge", "cgroup_v2", "jobacct_gather_cgroup",
    "mpi_pmix", "priority_multifactor", "proctrack_cgroup", "select_cons_tres", "switch_nvidia_imex",
    "task_affinity", "task_cgroup", "topology_block", "topology_tree",
)
PLUGIN_DIR = "/usr/lib/slurm"
# --with-pmix: 24.11 builds mpi/pmix only when asked ("support for pmix is disabled by default");
# it then finds libpmix-dev through pkg-config (/usr/lib/<arch>/pmix2). Everything else is found by
# configure. make builds the systemd units into etc/ (noinst_DATA): installed from there.
CONFIGURE = ("--prefix=/usr", "--sysconfdir=/etc/slurm", "--libdir=/usr/lib", "--localstatedir=/var",
             "--runstatedir=/run", "--disable-static", "--with-pmix")


class Refused(Exception):
    """Another Slurm is installed (exit 3)."""


class Failed(Exception):
    """A step failed (exit 1); the message says which and why."""


def log(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


def root() -> str:
    return os.environ.get("AICLUSTER_ROOT", "")


def rooted(path: str) -> str:
    return root() + path


def run(*command: str, cwd: str | None = None, env: dict | None = None) -> None:
    """Run a command with its output on stderr (the build log); Failed with its last lines."""
    done = subprocess.run(command, cwd=cwd, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors="replace")
    if done.returncode != 0:
        tail = "\n".join(done.stdout.strip().splitlines()[-20:])
        sys.stderr.write(tail + "\n")
        last = tail.splitlines()[-1] if tail else "no output"
        raise Failed(f"{' '.join(command[:2])}: exit {done.returncode}: {last[:300]}")


def read_stamp() -> dict | None:
    try:
        with open(rooted(STAMP), encoding="utf-8") as fh:
            stamp = json.load(fh)
        return stamp if isinstance(stamp, dict) else None
    except (OSError, ValueError):
        return None


def slurmd_version() -> str:
    """The installed slurmd's version ("24.11.5"), or "" when there is none."""
    for candidate in (rooted(SLURMD), shutil.which("slurmd") if not root() else None):
        if candidate and os.access(candidate, os.X_OK):
            try:
                out = subprocess.run([candidate, "-V"], capture_output=True, text=True, timeout=30).stdout.split()
            except (OSError, subprocess.TimeoutExpired):
                continue
            return out[-1] if out else "unknown"
    return ""


def installed(version: str, sha256: str, upgrade: bool) -> bool:
    """True when this version is installed already; Refused when another is (unless upgrade)."""
    stamp, found = read_stamp(), slurmd_version()
    if stamp and stamp.get("version") == version and stamp.get("sha256") == sha256 and found == version:
        return True
    if upgrade:
        return False
    if stamp and stamp.get("version") != version:
        raise Refused(f"Slurm {stamp.get('version')} is installed here, the pin is {version}: refused "
                      "(--upgrade replaces it: slurmdbd first, then slurmctld, then slurmd; docs/config-sync.md)")
    if found and not stamp:
        raise Refused(f"slurmd {found} is installed here, not by {PROG} (a distribution package?), the pin is "
                      f"{version}: refused (remove it, or --upgrade to install {version} over it)")
    return False


def download(urls: list[str], sha256: str, size: int | None, dest: str) -> str:
    """The first URL whose bytes have the pinned size and SHA-256, saved at dest; Failed when none."""
    reasons = []
    for url in urls:
        part = dest + ".part"
        digest, got = hashlib.sha256(), 0
        try:
            for attempt in range(3):
                try:
                    with urllib.request.urlopen(url, timeout=60) as response, open(part, "wb") as out:
                        digest, got = hashlib.sha256(), 0
                        while chunk := response.read(1 << 20):
                            digest.update(chunk)
                            got += len(chunk)
                            out.write(chunk)
                    break
                except OSError as err:
                    if attempt == 2 or getattr(err, "code", 0) in (403, 404, 410):
                        raise
                    time.sleep(2 * (attempt + 1))
        except OSError as err:
            reasons.append(f"{url}: {err}")
            log(f"cannot download {url}: {err}; trying the next")
            _remove(part)
            continue
        if (size is not None and got != size) or digest.hexdigest() != sha256:
            reasons.append(f"{url}: {got} bytes, SHA-256 {digest.hexdigest()}")
            log(f"{url} is {got} bytes with SHA-256 {digest.hexdigest()}, not the pinned {sha256}: refused")
            _remove(part)
            continue
        os.replace(part, dest)
        log(f"{url}: {got} bytes, SHA-256 {sha256} as pinned")
        return url
    raise Failed("no URL gives the pinned archive (SHA-256 " + sha256 + "), nothing installed: " + "; ".join(reasons))


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def unpack(archive: str, into: str) -> str:
    """The archive's one top folder, unpacked under `into` (no absolute paths, no links out)."""
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
        tops = {m.name.split("/", 1)[0] for m in members}
        if len(tops) != 1:
            raise Failed(f"the archive has {len(tops)} top folders, not one")
        if hasattr(tarfile, "data_filter"):
            tar.extractall(into, filter="data")
        else:   # Python < 3.12 without the backport: refuse what the data filter refuses
            for m in members:
                if m.name.startswith("/") or ".." in m.name.split("/") or (m.issym() and m.linkname.startswith("/")):
                    raise Failed(f"the archive holds an unsafe path: {m.name}")
            tar.extractall(into)
    return os.path.join(into, tops.pop())


def install_dependencies() -> None:
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    run("apt-get", "update", "-q", env=env)
    run("apt-get", "install", "-y", "-q", "-o", "DPkg::Lock::Timeout=300", "--no-install-recommends",
        *BUILD_DEPENDS, env=env)


def slurm_account() -> None:
    """The slurm group and user, when missing (a distribution's munge creates munge's)."""
    if subprocess.run(["getent", "group", "slurm"], capture_output=True).returncode != 0:
        run("groupadd", "--system", "--gid", str(SLURM_UID), "slurm")
    if subprocess.run(["getent", "passwd", "slurm"], capture_output=True).returncode != 0:
        run("useradd", "--system", "--uid", str(SLURM_UID), "--gid", "slurm", "--home-dir", "/var/lib/slurm",
            "--no-create-home", "--shell", "/usr/sbin/nologin", "--comment", "Slurm workload manager", "slurm")


def build_and_install(source: str, jobs: int) -> None:
    with _Step("configure"):
        run("./configure", *CONFIGURE, cwd=source)
    with _Step("make"):
        run("make", f"-j{jobs}", cwd=source)
    with _Step("make install"):
        run("make", "install", f"DESTDIR={root()}", cwd=source)
    units = rooted(UNIT_DIR)
    os.makedirs(units, exist_ok=True)
    for unit in UNITS:
        generated = os.path.join(source, "etc", f"{unit}.service")
        if not os.path.exists(generated):
            raise Failed(f"configure generated no etc/{unit}.service")
        shutil.copyfile(generated, os.path.join(units, f"{unit}.service"))
        os.chmod(os.path.join(units, f"{unit}.service"), 0o644)
    missing = [p for p in REQUIRED_PLUGINS if not os.path.exists(rooted(f"{PLUGIN_DIR}/{p}.so"))]
    if missing:
        raise Failed(f"the build has no {', '.join(missing)} in {PLUGIN_DIR} (a build dependency missing?)")
    if not os.path.exists(rooted("/usr/include/slurm/spank.h")):
        raise Failed("make install left no /usr/include/slurm/spank.h (pyxis builds against it)")


def write_stamp(version: str, sha256: str, url: str) -> None:
    path = rooted(STAMP)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".slurm-install-")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"version": version, "sha256": sha256, "url": url, "prefix": "/usr", "sysconfdir": "/etc/slurm",
                   "installed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, fh, sort_keys=True)
        fh.write("\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


class _Step:
    """Logs how long a step took ("step build: 412.3 s"): the build log's timeline (bench/boot_to_slurmd.py)."""

    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        self.start = time.monotonic()

    def __exit__(self, *exc):
        log(f"step {self.name}: {time.monotonic() - self.start:.1f} s{' (failed)' if exc[0] else ''}")


def install(version: str, sha256: str, urls: list[str], size: int | None, *, upgrade: bool = False,
            deps: bool = True, jobs: int | None = None, keep: bool = False) -> str:
    """Install Slurm `version`; what it did, in one line. Refused / Failed as the module says."""
    if installed(version, sha256, upgrade):
        return f"Slurm {version} is installed (SHA-256 {sha256[:12]}): nothing to do"
    work = rooted(WORK)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    try:
        archive = os.path.join(work, f"slurm-{version}.tar.gz")
        with _Step("download"):
            url = download(urls, sha256, size, archive)
        if deps:
            with _Step("dependencies"):
                install_dependencies()
        with _Step("unpack"):
            source = unpack(archive, work)
        build_and_install(source, jobs or os.cpu_count() or 1)
        slurm_account()
        for path in ("/etc/slurm", "/var/spool/slurmd", "/var/log/slurm"):
            os.makedirs(rooted(path), exist_ok=True)
        run("ldconfig")
        run("systemctl", "daemon-reload")
        found = slurmd_version()
        if found != version:
            raise Failed(f"the installed slurmd -V says {found or 'nothing'}, not {version}")
        write_stamp(version, sha256, url)
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    return f"Slurm {version} built from {url} and installed in /usr (units: {', '.join(UNITS)})"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--version", required=True, help="the pinned version, 24.11.5")
    parser.add_argument("--sha256", required=True, help="the archive's pinned SHA-256")
    parser.add_argument("--size", type=int, help="the archive's pinned size in bytes")
    parser.add_argument("--upgrade", action="store_true", help="replace another installed version")
    parser.add_argument("--no-deps", action="store_true", help="do not apt-get the build dependencies")
    parser.add_argument("--jobs", type=int, help="make -j (default: the CPUs)")
    parser.add_argument("--keep", action="store_true", help="keep the build tree (" + WORK + ")")
    parser.add_argument("urls", nargs="+", metavar="URL", help="where the archive is, tried in turn")
    args = parser.parse_args(argv)
    if len(args.sha256) != 64 or any(c not in "0123456789abcdef" for c in args.sha256):
        parser.error("--sha256 is not 64 lowercase hex digits")
    os.makedirs(rooted("/var/lib/aicluster"), exist_ok=True)
    with open(rooted("/var/lib/aicluster/.slurm-install.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)       # one install at a time (cloud-init and a bootstrap)
        try:
            print(f"{PROG}: " + install(args.version, args.sha256, args.urls, args.size, upgrade=args.upgrade,
                                        deps=not args.no_deps, jobs=args.jobs, keep=args.keep), flush=True)
        except Refused as err:
            log(f"REFUSED: {err}")
            return 3
        except Failed as err:
            log(f"FAILED: {err}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
