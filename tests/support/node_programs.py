"""aicluster.node's programs installed as a node has them (aicluster/render/node_programs.py): the
entry points in a bin folder, the archive of aicluster.node they run in the lib folder beside it.
The entry points run this interpreter (the node's runs the one the module's #! names), which has
boto3; the programs themselves come from the built archive, never from this checkout's package."""
from __future__ import annotations

import sys
from pathlib import Path

from aicluster.render.node_programs import LIB, PROGRAMS, SINGLE_FILE, artifact, artifact_file, entry_point, node_files


def install(bin_dir: Path, programs: tuple[str, ...] | list[str], python: str = sys.executable) -> None:
    """Write `programs` (installed names: aicluster-power.py, aicluster-sync, ...) into bin_dir and
    the archive they run into bin_dir/../lib."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    install_modules(bin_dir, programs)
    for path, content, _mode in node_files(programs, str(bin_dir)):
        if not path.startswith(f"{LIB}/"):
            program = Path(path).name
            target = bin_dir / program
            target.write_text(content if program in SINGLE_FILE else entry_point(program, python))
            target.chmod(0o755)


def install_modules(bin_dir: Path, programs: tuple[str, ...] | list[str]) -> None:
    """Only the archive `programs` run from, in bin_dir/../lib (what a node's shell programs import)."""
    if any(p not in SINGLE_FILE for p in programs):
        lib = bin_dir.parent / "lib"
        lib.mkdir(parents=True, exist_ok=True)
        (lib / artifact().name).write_bytes(artifact().data)


def module_command(module: str) -> list[str]:
    """Run the program of aicluster.node.<module> from the built archive, as a node's entry point
    does (argv[0] the program's installed name); the arguments follow."""
    program = next(p for p, m in PROGRAMS.items() if m == module)
    return [sys.executable, artifact_file(), program, program]
