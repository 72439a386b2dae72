"""A second Slurm release for the tests (issue 13): Slurm 24.11 from Debian trixie, in the chroot
.ci/install-slurm-release builds (/opt/aicluster-slurm/trixie), beside the machine's own 22.05.

Every program of that release is run through a small wrapper script (`Release.wrappers`): the
wrapper enters a private mount namespace (`unshare --mount`, so nothing leaks to the machine and
the mounts go when the program exits), binds this machine's /proc, /dev, /tmp, the temp dir and
/etc/hosts into the chroot at the same paths, and runs the chroot's program there, in the caller's
working directory. Paths under the temp dir (pytest's tmp_path, the private munge socket, the sync's
throwaway copy) are therefore the same inside and outside: the rendered slurm.conf, its programs
and its state work unchanged.

munge is the chroot's too: the controller's munged, slurmctld and the client commands all run from
the release, and reach each other through the munge socket under the temp dir.

With the wrappers first on PATH (`first_on_path`), tests/support/slurmctld.py's Controller (which
finds its programs with shutil.which) runs the release's munged, slurmctld, scontrol, sinfo and
sbatch; the sync takes the wrapper as AICLUSTER_SLURMCTLD. The tests check `scontrol show config`'s
SLURM_VERSION, so a wrapper that silently ran the machine's 22.05 would fail them.

Needs root (mount namespaces and chroot), as the tests that run slurmd already do; a missing chroot
fails with the command that installs it."""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

# Debian trixie's Slurm (source: deb.debian.org dists/trixie, slurmctld 24.11.5-4+deb13u1, munge
# 0.5.16-1.1~deb13u1; checked on 2026-11-23). The install script pins the same major release.
RELEASE = "24.11"
SUITE = "trixie"
DEFAULT_ROOT = "/opt/aicluster-slurm/trixie"
INSTALL = ".ci/install-slurm-release"
INSTALL_HINT = (f"install Slurm {RELEASE} (Debian {SUITE}) in its chroot: sudo {INSTALL} "
                "(about a minute; needs debootstrap and deb.debian.org)")
STAMP = ".aicluster-slurm-release"
PROGRAMS = ("slurmctld", "slurmd", "scontrol", "sinfo", "sbatch", "squeue", "munged", "munge", "unmunge")
# Where each program lives in the chroot.
SBIN = {"slurmctld", "slurmd", "munged"}

# The wrapper: $1 the chroot, $2 the program, then its arguments. Runs in a new mount namespace
# (private propagation: unshare's default), so the binds vanish with the program.
WRAPPER = """#!/bin/sh
# Slurm {release} (Debian {suite}) from {root}: {program} (tests/support/slurm_release.py).
# shellcheck disable=SC2016  # the inner script's $1, $root, ... are its own, expanded there
exec {unshare} --mount --propagation private -- /bin/sh -c '
set -e
root=$1; shift
mount --rbind /proc "$root/proc"
mount --rbind /dev "$root/dev"
for dir in {binds}; do
  mkdir -p "$root$dir"
  mount --rbind "$dir" "$root$dir"
done
mount --bind /etc/hosts "$root/etc/hosts"
wd=$(pwd -P)
[ -d "$root$wd" ] || wd=/
exec {unshare} --root="$root" --wd="$wd" "$@"
' sh {root_q} {path} "$@"
"""


@dataclass(frozen=True)
class Release:
    root: Path

    @classmethod
    def installed(cls) -> "Release":
        """The release the install script put in place; fails the test (with how to install it)
        when it is not there or cannot be run."""
        release = cls(Path(os.environ.get("AICLUSTER_SLURM_RELEASE_ROOT", DEFAULT_ROOT)))
        assert (release.root / STAMP).is_file() and (release.root / "usr/sbin/slurmctld").is_file(), (
            f"Slurm {RELEASE} is not installed in {release.root}: {INSTALL_HINT}"
            + ("" if str(release.root) == DEFAULT_ROOT else f" (with AICLUSTER_SLURM_RELEASE_ROOT={release.root})"))
        assert os.geteuid() == 0, (f"Slurm {RELEASE} runs in a chroot and a mount namespace: run this test "
                                   "as root (CI does)")
        for name in ("unshare", "mount"):
            assert shutil.which(name), f"`{name}` not found (util-linux, mount): apt-get install util-linux mount"
        # A container without CAP_SYS_ADMIN (unprivileged Docker) cannot make a mount namespace.
        probe = subprocess.run([shutil.which("unshare"), "--mount", "true"], capture_output=True, text=True,
                               timeout=30)
        assert probe.returncode == 0, (f"cannot make a mount namespace for Slurm {RELEASE} ({probe.stderr.strip()}): "
                                       "run the tests as root on a VM or in a privileged container")
        return release

    def describe(self) -> str:
        """What the install script recorded, e.g. `slurm-wlm 24.11.5 (Debian trixie: ...)`."""
        return (self.root / STAMP).read_text().strip()

    def wrappers(self, bin_dir: Path) -> Path:
        """One executable per program in bin_dir, each running the release's program."""
        bin_dir.mkdir(parents=True, exist_ok=True)
        # /tmp, and the temp dir when it is elsewhere (TMPDIR): where the tests' files are.
        binds = sorted({"/tmp", os.path.realpath(tempfile.gettempdir())})
        for program in PROGRAMS:
            where = "/usr/sbin" if program in SBIN else "/usr/bin"
            path = bin_dir / program
            path.write_text(WRAPPER.format(
                release=RELEASE, suite=SUITE, root=self.root, program=program, unshare=shutil.which("unshare"),
                binds=" ".join(shlex.quote(b) for b in binds), root_q=shlex.quote(str(self.root)),
                path=shlex.quote(f"{where}/{program}")))
            path.chmod(0o755)
        return bin_dir


@contextmanager
def first_on_path(bin_dir: Path):
    """The release's wrappers first on PATH while the block runs: shutil.which (the Controller's
    `tool`) finds them before the machine's own Slurm."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
        yield

