"""What of aicluster.node a node installs, and the thin entry points that run it.

The node programs are one package, aicluster.node (standard library and the cloud SDKs only). A
node gets one content-hashed zipapp of it, LIB/aicluster-node-<sha256[:12]>.pyz
(render/node_artifact.py), holding the modules its programs need, and each program at its usual
path in /opt/aicluster/bin as a few lines of shell that run the archive with the program's name.
The head's archive holds every program; a GCP compute or login node's only the secret helper and
what it imports, because there the archive travels base64-encoded in metadata, whose user-data
value holds 256 KB (the whole package would leave a GPU node's user data no room to grow). The
paths slurm.conf, the systemd units and the bash programs name are the same as when each program
was one loose file, and argv[0] is passed on unchanged: the power program reads its action from the
name it was started by (aicluster-resume, a link to aicluster-power.py).

Read from the package's folder, never imported: the control side has no use for boto3 at plan
time, and what is shipped is the files themselves.
"""
from __future__ import annotations

import os
import posixpath
import tempfile
from functools import lru_cache

from aicluster.render.node_artifact import PACKAGE_DIR, NodeArtifact, build

NODE_PACKAGE_DIR = PACKAGE_DIR
INSTALL_DIR = "/opt/aicluster"
LIB = f"{INSTALL_DIR}/lib"             # holds the archive the entry points run
LIBRARY_MODE, PROGRAM_MODE = "0644", "0755"

# Installed program name (in /opt/aicluster/bin) -> its module in aicluster.node.
PROGRAMS: dict[str, str] = {
    "aicluster-power.py": "aws_power",
    "aicluster-gcp-power.py": "gcp_power",
    "aicluster-sync": "sync",
    "aicluster-fetch": "fetch",
    "aicluster-secret": "secret",
    "aicluster-gcp-lustre-import": "lustre_import",
    "aicluster-node-install": "image",
    "aicluster-install-slurm": "install_slurm",
}
# Installed as the module's own file, not as an entry point: aicluster-fetch is what installs the
# rest, from EC2's 16 KB of user data, so it needs nothing beside it (it imports nothing of the package).
SINGLE_FILE = ("aicluster-fetch",)
PACKAGED = tuple(p for p in PROGRAMS if p not in SINGLE_FILE)
# What of the package a compute or login node runs: the secret helper (the munge key) and
# aicluster-node-install: the baked image's check (docs/images.md), and the Slurm installer
# (`--slurm`, aicluster-install-slurm's arguments) on the install-at-boot path.
NODE_PROGRAMS = ("aicluster-secret", "aicluster-node-install")
# What each module imports of the package (tests/scripts/test_node_programs.py checks it against
# the modules' own imports, so a new import cannot ship a program without its module).
DEPENDS: dict[str, tuple[str, ...]] = {
    "aws_power": ("slurm", "reconcile"),
    "gcp_power": ("slurm", "reconcile", "gcp"),
    "reconcile": ("slurm",),
    "sync": ("gcp",),
    "secret": ("gcp",),
    "lustre_import": ("gcp",),
    "image": ("install_slurm",),
}


# The node's programs that are no module of the package (bash, and the metrics collector), each
# installed as the file it is: aicluster/node/bin/<name>.
PROGRAM_FILES_DIR = NODE_PACKAGE_DIR / "bin"


def program_text(name: str) -> str:
    """The text of aicluster/node/bin/<name>, as a node installs it."""
    return (PROGRAM_FILES_DIR / name).read_text(encoding="utf-8")


def module_source(module: str) -> str:
    """The text of aicluster/node/<module>.py."""
    return (NODE_PACKAGE_DIR / f"{module}.py").read_text(encoding="utf-8")


def modules_for(programs: list[str] | tuple[str, ...]) -> list[str]:
    """The modules `programs` (installed names) need, with what they import, in a stable order."""
    needed: list[str] = []
    pending = [PROGRAMS[p] for p in programs]
    while pending:
        module = pending.pop(0)
        if module not in needed:
            needed.append(module)
            pending.extend(DEPENDS.get(module, ()))
    return sorted(needed)


def artifact(programs: list[str] | tuple[str, ...] = PACKAGED) -> NodeArtifact:
    """The archive that runs `programs` (installed names; every program of the package unless
    told): their modules and what those import. The same programs give the same bytes."""
    return _artifact(tuple(sorted(set(programs) - set(SINGLE_FILE))))


@lru_cache(maxsize=None)
def _artifact(programs: tuple[str, ...]) -> NodeArtifact:
    return build({p: PROGRAMS[p] for p in programs}, modules=modules_for(programs))


def artifact_file(built: NodeArtifact | None = None) -> str:
    """An archive (every program's unless told) as a local file, named by its full SHA-256 and
    written once (atomically: a concurrent plan never reads half an archive). For uploads that take
    a file rather than bytes (a GCS object's `source`) and for the tests that run it."""
    built = built or artifact()
    path = os.path.join(tempfile.gettempdir(), f"aicluster-node-{built.sha256}.pyz")
    if not os.path.exists(path):
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".aicluster-node-")
        with os.fdopen(fd, "wb") as fh:
            fh.write(built.data)
        os.replace(tmp, path)
    return path


def interpreter(module: str) -> str:
    """The Python a module's own #! line names (/usr/bin/python3: the image's, with its boto3)."""
    first = module_source(module).splitlines()[0]
    return first[2:].strip() if first.startswith("#!") else "/usr/bin/python3"


def entry_point(program: str, python: str | None = None, archive: NodeArtifact | None = None) -> str:
    """The shell entry point installed as `program`: runs `archive` (the one of every program unless
    told) in the lib folder beside the bin folder it is in, with the program's name and argv[0] the
    name it was started by. `python` overrides the interpreter (the tests run their own)."""
    module = PROGRAMS[program]
    name = (archive or artifact()).name
    # python3 ARCHIVE puts the archive first on sys.path, in place of the current directory:
    # nothing of the caller's folder (slurmctld's, a user's) is imported by a program run as root.
    return (f"#!/bin/sh\n"
            f"# {program}: aicluster.node.{module}, in ../lib/{name} (aicluster/render/node_programs.py).\n"
            f"lib=\"$(dirname \"$(readlink -f \"$0\")\")/../lib\"\n"
            f"exec {python or interpreter(module)} \"$lib/{name}\" {program} \"$0\" \"$@\"\n")


def node_files(programs: list[str] | tuple[str, ...], bin_dir: str,
               lib: str = LIB) -> list[tuple[str, str | bytes, str]]:
    """(path, content, mode) of everything `programs` need on a node: the archive that runs them in
    lib (bytes), when one of them runs from one, then the entry points in bin_dir (text)."""
    packaged = [p for p in programs if p not in SINGLE_FILE]
    archive = artifact(packaged) if packaged else None
    return ([(posixpath.join(lib, archive.name), archive.data, LIBRARY_MODE)] if archive else []) + \
        [(posixpath.join(bin_dir, p),
          module_source(PROGRAMS[p]) if p in SINGLE_FILE else entry_point(p, archive=archive), PROGRAM_MODE)
         for p in programs]
