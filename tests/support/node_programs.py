"""aicluster.node's programs installed as a node has them (aicluster/render/node_programs.py): the
entry points in a bin folder, the archive of aicluster.node they run in the lib folder beside it.
The entry points run this interpreter (the node's runs the one the module's #! names), which has
boto3; the programs themselves come from the built archive, never from this checkout's package."""
from __future__ import annotations

import sys
from pathlib import Path

from aicluster.render.node_programs import PROGRAMS, SINGLE_FILE, artifact, artifact_file, entry_point, module_source


def install(bin_dir: Path, programs: tuple[str, ...] | list[str], python: str = sys.executable) -> None:
    """Write `programs` (installed names: aicluster-power.py, aicluster-sync, ...) into bin_dir and
    the archive they run into bin_dir/../lib, as node_files gives a node both."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    install_modules(bin_dir, programs)
    archive = artifact(programs)
    for program in programs:
        target = bin_dir / program
        target.write_text(module_source(PROGRAMS[program]) if program in SINGLE_FILE
                          else entry_point(program, python, archive=archive))
        target.chmod(0o755)


def install_modules(bin_dir: Path, programs: tuple[str, ...] | list[str]) -> None:
    """Only the archive `programs` run from (their modules), in bin_dir/../lib: what a node's
    shell programs import."""
    if any(p not in SINGLE_FILE for p in programs):
        lib = bin_dir.parent / "lib"
        lib.mkdir(parents=True, exist_ok=True)
        archive = artifact(programs)
        (lib / archive.name).write_bytes(archive.data)


def module_command(module: str) -> list[str]:
    """Run the program of aicluster.node.<module> from the built archive, as a node's entry point
    does (argv[0] the program's installed name); the arguments follow."""
    program = next(p for p, m in PROGRAMS.items() if m == module)
    return [sys.executable, artifact_file(), program, program]


def record_slurm_install(bin_dir: Path, calls: Path, body: str = "exit 0\n") -> None:
    """Make bin_dir's aicluster-node-install (installed first) record a `--slurm ARGS` call as the line
    "aicluster-install-slurm ARGS" in `calls` and run `body` (bash) in place of building Slurm; its
    other modes (--check, --bake) run the real program. A test never downloads or builds Slurm."""
    real = bin_dir / "aicluster-node-install"
    real.rename(bin_dir / "aicluster-node-install.real")
    real.write_text('#!/bin/bash\nif [[ ${1:-} == --slurm ]]; then\n  shift\n'
                    f'  echo "aicluster-install-slurm $*" >> "{calls}"\n{body}fi\n'
                    'exec "${0%/*}/aicluster-node-install.real" "$@"\n')
    real.chmod(0o755)
