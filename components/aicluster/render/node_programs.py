"""What of aicluster.node a node installs, and the thin entry points that run it.

The node programs are one package, aicluster.node (standard library and the cloud SDKs only). A
node gets the package's modules it needs under LIB (/opt/aicluster/lib/aicluster/node/), and each
program at its usual path in /opt/aicluster/bin as a few lines of shell that run the module's
main() from there. The paths slurm.conf, the systemd units and the bash programs name are the same
as when each program was one loose file, and argv[0] is passed on unchanged: the power program reads
its action from the name it was started by (aicluster-resume, a link to aicluster-power.py).

Read as text from the package's folder, never imported: the control side has no use for boto3 at
plan time, and what is shipped is the file itself.
"""
from __future__ import annotations

import posixpath
from pathlib import Path

NODE_PACKAGE_DIR = Path(__file__).resolve().parents[1] / "node"
INSTALL_DIR = "/opt/aicluster"
LIB = f"{INSTALL_DIR}/lib"             # sys.path of every entry point; holds aicluster/node/
LIBRARY_MODE, PROGRAM_MODE = "0644", "0755"

# Installed program name (in /opt/aicluster/bin) -> its module in aicluster.node.
PROGRAMS: dict[str, str] = {
    "aicluster-power.py": "aws_power",
    "aicluster-gcp-power.py": "gcp_power",
    "aicluster-sync": "sync",
    "aicluster-fetch": "fetch",
    "aicluster-secret": "secret",
    "aicluster-gcp-lustre-import": "lustre_import",
}
# Installed as the module's own file, not as an entry point: aicluster-fetch is what installs the
# rest, from EC2's 16 KB of user data, so it needs nothing beside it (it imports nothing of the package).
SINGLE_FILE = ("aicluster-fetch",)
# What each module imports of the package (tests/scripts/test_node_programs.py checks it against
# the modules' own imports, so a new import cannot ship a program without its module).
DEPENDS: dict[str, tuple[str, ...]] = {
    "aws_power": ("slurm", "reconcile"),
    "gcp_power": ("slurm", "reconcile", "gcp"),
    "reconcile": ("slurm",),
    "sync": ("gcp",),
    "secret": ("gcp",),
    "lustre_import": ("gcp",),
}


def module_source(module: str) -> str:
    """The text of aicluster/node/<module>.py, as the node installs it."""
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


def module_path(module: str, lib: str = LIB) -> str:
    return posixpath.join(lib, "aicluster", "node", f"{module}.py")


def library_files(programs: list[str] | tuple[str, ...], lib: str = LIB) -> list[tuple[str, str]]:
    """(path, content) of the package's part that `programs` run from: their modules. The package's
    __init__ (a docstring) is not shipped: lib/aicluster/node is a namespace package on the node
    (PEP 420), and every byte counts where a program travels in EC2's 16 KB of user data."""
    return [(module_path(m, lib), module_source(m)) for m in modules_for(programs)]


def interpreter(module: str) -> str:
    """The Python a module's own #! line names (/usr/bin/python3: the image's, with its boto3)."""
    first = module_source(module).splitlines()[0]
    return first[2:].strip() if first.startswith("#!") else "/usr/bin/python3"


def entry_point(program: str, python: str | None = None) -> str:
    """The shell entry point installed as `program`: runs aicluster.node.<module>.main() from the
    lib folder beside the bin folder it is in, with argv[0] the name it was started by. `python`
    overrides the interpreter (the tests run their own)."""
    module = PROGRAMS[program]
    code = (f"import sys; sys.path[0] = sys.argv[1]; sys.argv = sys.argv[2:]; "
            f"from aicluster.node.{module} import main; sys.exit(main())")
    # sys.path[0] is the lib folder, in place of -c's current directory: nothing of the caller's
    # folder (slurmctld's, a user's) is ever imported by a program that runs as root.
    return (f"#!/bin/sh\n"
            f"# {program}: aicluster.node.{module}, installed in ../lib (aicluster/render/node_programs.py).\n"
            f"lib=\"$(dirname \"$(readlink -f \"$0\")\")/../lib\"\n"
            f"exec {python or interpreter(module)} -c '{code}' \"$lib\" \"$0\" \"$@\"\n")


def node_files(programs: list[str] | tuple[str, ...], bin_dir: str, lib: str = LIB) -> list[tuple[str, str, str]]:
    """(path, content, mode) of everything `programs` need on a node: the entry points in bin_dir
    and the package's modules in lib."""
    packaged = [p for p in programs if p not in SINGLE_FILE]
    return ([(path, text, LIBRARY_MODE) for path, text in library_files(packaged, lib)]
            + [(posixpath.join(bin_dir, p), module_source(PROGRAMS[p]) if p in SINGLE_FILE else entry_point(p),
                PROGRAM_MODE) for p in programs])
