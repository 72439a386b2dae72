"""How aicluster.node reaches a node (aicluster/render/node_programs.py): the whole package as one
content-hashed archive in /opt/aicluster/lib, and each program a thin entry point in
/opt/aicluster/bin that runs the archive with its name. Run for real: the entry points under sh,
read by shellcheck."""
from __future__ import annotations

import ast
import io
import shutil
import subprocess
import sys
import zipfile

import pytest

from aicluster.render.node_programs import (DEPENDS, LIB, NODE_PACKAGE_DIR, PACKAGED, PROGRAMS, SINGLE_FILE, artifact,
                                            entry_point, modules_for, node_files)
from tests.support import node_programs

MODULES = sorted(p.stem for p in NODE_PACKAGE_DIR.glob("*.py") if p.stem != "__init__")
# What a node has beside the standard library: the cloud SDK of the AWS images (boto3, botocore).
NODE_SIDE_PACKAGES = {"boto3", "botocore", "aicluster"}


def node_imports(module: str) -> set[str]:
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
    assert node_imports(module) == set(DEPENDS.get(module, ())), module


def test_a_nodes_archive_holds_what_its_programs_import_and_runs_only_them():
    """The secret helper's archive (a GCP compute or login node's) holds secret and gcp, and its
    __main__ knows only that program."""
    secret = artifact(["aicluster-secret"])
    with zipfile.ZipFile(io.BytesIO(secret.data)) as archive:
        assert {n for n in archive.namelist() if n.startswith("aicluster/node/")} == \
            {"aicluster/node/__init__.py", "aicluster/node/secret.py", "aicluster/node/gcp.py"}
        main = archive.read("__main__.py").decode()
    assert "'aicluster-secret': 'secret'" in main and "aicluster-sync" not in main
    assert secret.name != artifact().name and artifact(["aicluster-secret"]) == secret
    assert set(modules_for(["aicluster-power.py"])) == {"aws_power", "slurm", "reconcile"}
    assert set(modules_for(["aicluster-gcp-power.py"])) == {"gcp_power", "slurm", "reconcile", "gcp"}


def imported_roots(source: bytes) -> set[str]:
    tree = ast.parse(source)
    roots = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    roots |= {n.module.split(".")[0] for n in ast.walk(tree)
              if isinstance(n, ast.ImportFrom) and n.module and not n.level}
    return roots - {"__future__"}


def package_imports(source: bytes) -> set[str]:
    """The modules of aicluster (at any depth) `source` imports."""
    tree = ast.parse(source)
    found = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("aicluster")}
    return found | {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
                    if a.name.startswith("aicluster")}


def test_the_archive_holds_its_programs_modules_and_nothing_of_the_control_side():
    """Every program's module is in the archive of every program, with what it imports; and what
    they import is the standard library, boto3 and aicluster.node itself: a node has no pydantic,
    pulumi or jinja2."""
    with zipfile.ZipFile(io.BytesIO(artifact().data)) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    assert set(members) == {"__main__.py", "aicluster/__init__.py", "aicluster/node/__init__.py",
                            *[f"aicluster/node/{m}.py" for m in modules_for(PACKAGED)]}
    assert {f"aicluster/node/{PROGRAMS[p]}.py" for p in PACKAGED} <= set(members)
    for name, source in members.items():
        foreign = {r for r in imported_roots(source) if r not in sys.stdlib_module_names} - NODE_SIDE_PACKAGES
        assert not foreign, f"{name} imports {foreign}"
        assert all(m == "aicluster.node" or m.startswith("aicluster.node.") for m in package_imports(source)), name


def test_every_program_runs_from_the_one_archive_and_the_single_file_one_needs_none():
    for program in SINGLE_FILE:
        assert not package_imports((NODE_PACKAGE_DIR / f"{PROGRAMS[program]}.py").read_bytes())
    files = node_files(list(PROGRAMS), "/opt/aicluster/bin")
    paths = [path for path, _, _ in files]
    assert len(paths) == len(set(paths))
    assert [p for p in paths if p.startswith(f"{LIB}/")] == [f"{LIB}/{artifact().name}"]
    assert "/opt/aicluster/bin/aicluster-fetch" in paths and not any(p.endswith("/fetch.py") for p in paths)
    assert node_files(list(SINGLE_FILE), "/opt/aicluster/bin")[0][0] == "/opt/aicluster/bin/aicluster-fetch"
    assert len(node_files(list(SINGLE_FILE), "/opt/aicluster/bin")) == 1      # no archive for fetch alone


def test_entry_points_pass_shellcheck():
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck is required for this test: apt-get install shellcheck (.ci/run installs it)"
    for program in set(PROGRAMS) - set(SINGLE_FILE):
        run = subprocess.run([shellcheck, "--severity=style", "-"], input=entry_point(program),
                             capture_output=True, text=True)
        assert run.returncode == 0, f"{program}:\n{run.stdout}"


def test_an_entry_point_imports_from_its_archive_never_from_the_callers_folder(tmp_path):
    """`python3 ARCHIVE` puts the archive where -c would put the current directory: a program run
    as root by slurmctld or a timer never imports a file from whatever folder it was started in."""
    bin_dir = tmp_path / "opt" / "bin"
    node_programs.install(bin_dir, ["aicluster-secret"])
    planted = tmp_path / "cwd" / "aicluster" / "node"
    planted.mkdir(parents=True)
    (planted / "secret.py").write_text("raise SystemExit('imported from the current directory')\n")
    run = subprocess.run([str(bin_dir / "aicluster-secret"), "--help"], cwd=tmp_path / "cwd",
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout.startswith("usage: aicluster-secret"), run.stderr
