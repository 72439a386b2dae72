"""aicluster.node as one artifact (aicluster/render/node_artifact.py): the same sources give the
same bytes, the name follows the bytes, and the archive runs its programs with nothing beside it."""
from __future__ import annotations

import hashlib
import io
import shutil
import subprocess
import sys
import zipfile

from aicluster.render.node_artifact import build as build_from
from aicluster.render.node_programs import NODE_PACKAGE_DIR, PROGRAMS


def build(package_dir=NODE_PACKAGE_DIR):
    """The archive of the programs a node runs (render/node_programs.PROGRAMS)."""
    return build_from(PROGRAMS, package_dir)


def test_the_same_sources_build_the_same_bytes_and_name():
    first, second = build(), build()
    assert first.data == second.data
    assert first.sha256 == hashlib.sha256(first.data).hexdigest()
    assert first.name == f"aicluster-node-{first.sha256[:12]}.pyz"


def test_the_archive_holds_the_package_sorted_dated_and_mode_fixed():
    with zipfile.ZipFile(io.BytesIO(build().data)) as archive:
        infos = archive.infolist()
    names = [i.filename for i in infos]
    assert names == sorted(names)
    assert set(names) == ({"__main__.py", "aicluster/__init__.py"}
                          | {f"aicluster/node/{p.name}" for p in NODE_PACKAGE_DIR.glob("*.py")})
    assert {(i.date_time, i.external_attr >> 16, i.compress_type) for i in infos} == \
        {((1980, 1, 1, 0, 0, 0), 0o100644, zipfile.ZIP_DEFLATED)}


def test_a_changed_module_changes_the_name(tmp_path):
    package = tmp_path / "node"
    shutil.copytree(NODE_PACKAGE_DIR, package, ignore=shutil.ignore_patterns("__pycache__"))
    assert build(package).data == build().data
    secret = package / "secret.py"
    secret.write_text(secret.read_text() + "# changed\n")
    assert build(package).name != build().name


def test_the_archive_runs_a_program_by_its_installed_name_with_argv0_passed_on(tmp_path):
    """From an empty folder, isolated (-I): only the archive is imported, never this checkout."""
    pyz = tmp_path / build().name
    pyz.write_bytes(build().data)
    work = tmp_path / "cwd"
    work.mkdir()
    done = subprocess.run([sys.executable, "-I", str(pyz), "aicluster-secret", "aicluster-secret", "--help"],
                          cwd=work, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: aicluster-secret")
    # The power program reads its action from argv[0]: a link's name reaches it.
    done = subprocess.run([sys.executable, "-I", str(pyz), "aicluster-power.py", "/opt/aicluster/bin/aicluster-resume"],
                          cwd=work, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "usage: aicluster-power.py" in done.stderr, done.stderr


def test_an_unknown_program_is_refused_with_the_names_it_runs(tmp_path):
    pyz = tmp_path / "a.pyz"
    pyz.write_bytes(build().data)
    done = subprocess.run([sys.executable, "-I", str(pyz), "aicluster-nothing", "x"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert all(program in done.stderr for program in PROGRAMS)
