"""Recording stubs for what aicluster-containers drives to download, build and install (curl,
apt-get, dpkg, git, make, mountpoint, cc), shared by tests/scripts/test_containers.py (a compute
node) and tests/scripts/test_login_bootstrap.py (a login node runs the same program).

Each stub is a bash body (no #! line). They append what they were asked to "$CALLS"; `git`
answers rev-parse with "$GIT_HEAD" (the pinned pyxis commit, or another to see it refused);
`make ... DESTDIR=D` leaves D/usr/local/lib/slurm/spank_pyxis.so, as pyxis's `make install` does;
`dpkg-query` answers "$DPKG_VERSION" (an installed enroot) and `mountpoint` succeeds when
"$SCRATCH_MOUNTED" is set."""
from __future__ import annotations

from pathlib import Path

CONTAINER_TOOL_STUBS = {
    "cc": "exit 0\n",
    "dpkg": 'echo amd64\n',
    "dpkg-query": 'printf %s "${DPKG_VERSION:-}"\n',
    "mountpoint": '[[ -n ${SCRATCH_MOUNTED:-} ]]\n',
    "apt-get": 'echo "apt-get $*" >> "$CALLS"\n',
    "curl": 'echo "curl $*" >> "$CALLS"\nwhile (($#)); do [[ $1 == -o ]] && : > "$2"; shift; done\n',
    "git": ('echo "git $*" >> "$CALLS"\n'
            'if [[ $1 == clone ]]; then mkdir -p "${@: -1}"; fi\n'
            'if [[ $3 == rev-parse ]]; then echo "$GIT_HEAD"; fi\n'),
    "make": ('echo "make $*" >> "$CALLS"\n'
             'for a in "$@"; do case $a in DESTDIR=*) d=${a#DESTDIR=};\n'
             '  mkdir -p "$d/usr/local/lib/slurm"; : > "$d/usr/local/lib/slurm/spank_pyxis.so";; esac; done\n'),
}


def write_stubs(directory: Path, stubs: dict[str, str]) -> None:
    """Each stub as an executable bash script named for the program in `directory`."""
    for name, body in stubs.items():
        path = directory / name
        path.write_text("#!/bin/bash\n" + body)
        path.chmod(0o755)
