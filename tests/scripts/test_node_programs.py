"""How aicluster.node reaches a node (aicluster/render/node_programs.py): each program is a thin
entry point in /opt/aicluster/bin that runs its module from /opt/aicluster/lib, and a node gets
every module its programs import. Run for real: the entry points under sh, read by shellcheck."""
from __future__ import annotations

import ast
import shutil
import subprocess

import pytest

from aicluster.render.node_programs import (DEPENDS, NODE_PACKAGE_DIR, PROGRAMS, SINGLE_FILE, entry_point,
                                            modules_for, node_files)
from tests.support import node_programs

MODULES = sorted(p.stem for p in NODE_PACKAGE_DIR.glob("*.py") if p.stem != "__init__")


def package_imports(module: str) -> set[str]:
    """The modules of aicluster.node that `module` imports, at the top or inside a function."""
    tree = ast.parse((NODE_PACKAGE_DIR / f"{module}.py").read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "aicluster.node":
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("aicluster.node."):
            found.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[2] for a in node.names if a.name.startswith("aicluster.node.")}
    return found


@pytest.mark.parametrize("module", MODULES)
def test_depends_is_what_each_module_imports(module):
    """A new import of the package ships with the program, or this fails: a node never runs a
    program without a module it needs."""
    assert package_imports(module) == set(DEPENDS.get(module, ())), module


def test_every_program_ships_its_modules_and_the_single_file_one_needs_none():
    assert set(modules_for(["aicluster-power.py"])) == {"aws_power", "slurm", "reconcile"}
    assert set(modules_for(["aicluster-gcp-power.py"])) == {"gcp_power", "slurm", "reconcile", "gcp"}
    for program in SINGLE_FILE:
        assert not package_imports(PROGRAMS[program])      # it installs the rest: nothing beside it
    paths = [path for path, _, _ in node_files(list(PROGRAMS), "/opt/aicluster/bin")]
    assert len(paths) == len(set(paths))
    assert "/opt/aicluster/bin/aicluster-fetch" in paths and not any(p.endswith("/fetch.py") for p in paths)


def test_entry_points_pass_shellcheck():
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck is required for this test: apt-get install shellcheck (.ci/run installs it)"
    for program in set(PROGRAMS) - set(SINGLE_FILE):
        run = subprocess.run([shellcheck, "--severity=style", "-"], input=entry_point(program),
                             capture_output=True, text=True)
        assert run.returncode == 0, f"{program}:\n{run.stdout}"


def test_an_entry_point_imports_from_its_lib_folder_never_from_the_callers(tmp_path):
    """The entry point puts the lib folder where -c would put the current directory: a program run
    as root by slurmctld or a timer never imports a file from whatever folder it was started in."""
    bin_dir = tmp_path / "opt" / "bin"
    node_programs.install(bin_dir, ["aicluster-secret"])
    planted = tmp_path / "cwd" / "aicluster" / "node"
    planted.mkdir(parents=True)
    (planted / "secret.py").write_text("raise SystemExit('imported from the current directory')\n")
    run = subprocess.run([str(bin_dir / "aicluster-secret"), "--help"], cwd=tmp_path / "cwd",
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout.startswith("usage: aicluster-secret"), run.stderr
