"""aicluster.node as one content-hashed artifact: a zipapp (PEP 441) a node runs with python3.

The archive holds the package's modules under aicluster/node/ and a top-level __main__.py that
runs one program, named by its installed name (the table render/node_programs.py passes in:
PROGRAMS), with the rest of argv as the program's own argv: `python3 aicluster-node-<sha12>.pyz aicluster-power.py "$0" "$@"`
keeps argv[0] the name the program was started by (aicluster-resume, a link), which the power
programs read their action from.

Deterministic: the same sources give the same bytes, so the name (the first 12 hex digits of the
bytes' SHA-256) changes exactly when a module does. Entries are sorted, dated 1980-01-01 (the
earliest date a zip holds), 0644, deflated at a fixed level; nothing of the build machine (its
clock, umask, file order) reaches the archive.
"""
from __future__ import annotations

import hashlib
import io
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

# Imports nothing of render/node_programs.py (it is handed the program table), so node_programs
# can import this module to ship the archive without a cycle.
PACKAGE_DIR = Path(__file__).resolve().parents[1] / "node"

_EPOCH = (1980, 1, 1, 0, 0, 0)
_LEVEL = 9
_FILE_MODE = 0o100644          # a regular file, rw-r--r--: in the high 16 bits of external_attr
NAME_PREFIX = "aicluster-node-"

# __main__.py: the program table is written into it, so the archive runs with nothing beside it.
# sys.path[0] is the archive itself when python3 runs it, never the caller's folder (slurmctld's,
# a user's), so a program that runs as root imports only what the archive holds and the system's.
_MAIN = '''"""Run one program of aicluster.node: {prog} PROGRAM ARGV0 [ARGS...] (render/node_artifact.py)."""
import importlib
import sys

PROGRAMS = {table}


def run() -> int:
    if len(sys.argv) < 3 or sys.argv[1] not in PROGRAMS:
        print("usage: python3 ARCHIVE PROGRAM ARGV0 [ARGS...]; PROGRAM one of " + ", ".join(sorted(PROGRAMS)),
              file=sys.stderr)
        return 2
    module = PROGRAMS[sys.argv[1]]
    sys.argv = sys.argv[2:]
    return importlib.import_module("aicluster.node." + module).main()


sys.exit(run())
'''


@dataclass(frozen=True)
class NodeArtifact:
    data: bytes
    sha256: str

    @property
    def name(self) -> str:
        """aicluster-node-<first 12 hex of the SHA-256>.pyz: a new content is a new file name."""
        return f"{NAME_PREFIX}{self.sha256[:12]}.pyz"


def _entry(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=_EPOCH)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = _FILE_MODE << 16
    info.create_system = 3     # Unix, whatever the build machine: the mode above is read as Unix's
    return info


def build(programs: Mapping[str, str], package_dir: Path = PACKAGE_DIR,
          modules: Iterable[str] | None = None) -> NodeArtifact:
    """The archive of package_dir's modules (aicluster/node/*.py; only `modules` when given) and a
    __main__.py that runs `programs` (installed name -> module of aicluster.node) by name."""
    table = "{\n" + "".join(f"    {p!r}: {m!r},\n" for p, m in sorted(programs.items())) + "}"
    files = {"__main__.py": _MAIN.format(prog="aicluster-node", table=table).encode("utf-8")}
    wanted = None if modules is None else {f"{m}.py" for m in modules} | {"__init__.py"}
    for path in sorted(package_dir.glob("*.py")):
        if wanted is None or path.name in wanted:
            files[f"aicluster/node/{path.name}"] = path.read_bytes()
    # An empty aicluster/__init__.py: zipimport finds a namespace package (PEP 420) only through a
    # directory entry, which this archive does not write; nothing of the control side's
    # aicluster/__init__ belongs on a node.
    files["aicluster/__init__.py"] = b""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=_LEVEL) as archive:
        for name in sorted(files):
            archive.writestr(_entry(name), files[name], compress_type=zipfile.ZIP_DEFLATED, compresslevel=_LEVEL)
    data = out.getvalue()
    return NodeArtifact(data, hashlib.sha256(data).hexdigest())

