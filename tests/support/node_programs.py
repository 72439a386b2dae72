"""aicluster.node's programs installed as a node has them (aicluster/render/node_programs.py): the
entry points in a bin folder, the modules they run in the lib folder beside it. The entry points
run this interpreter (the node's runs the one the module's #! names), which has boto3."""
from __future__ import annotations

import sys
from pathlib import Path

from aicluster.render.node_programs import SINGLE_FILE, PROGRAMS, entry_point, library_files, module_source


def install(bin_dir: Path, programs: tuple[str, ...] | list[str], python: str = sys.executable) -> None:
    """Write `programs` (installed names: aicluster-power.py, aicluster-sync, ...) into bin_dir and
    the modules they need into bin_dir/../lib."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    install_modules(bin_dir, programs)
    for program in programs:
        target = bin_dir / program
        target.write_text(module_source(PROGRAMS[program]) if program in SINGLE_FILE else entry_point(program, python))
        target.chmod(0o755)


def install_modules(bin_dir: Path, programs: tuple[str, ...] | list[str]) -> None:
    """Only the modules `programs` need, in bin_dir/../lib (what a node's shell programs import)."""
    lib = bin_dir.parent / "lib"
    for path, text in library_files([p for p in programs if p not in SINGLE_FILE], str(lib)):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)


def module_command(module: str) -> list[str]:
    """Run aicluster.node.<module> as `python -m` does (this checkout's package)."""
    return [sys.executable, "-m", f"aicluster.node.{module}"]
