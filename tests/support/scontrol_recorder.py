"""An `scontrol` stand-in for the power programs' tests (AICLUSTER_SCONTROL): it succeeds and
appends each call's arguments, tab-separated, one call a line."""
from __future__ import annotations

from pathlib import Path


def recorder(directory: Path) -> tuple[Path, Path]:
    """(the stand-in at <directory>/bin/scontrol, the file it records to)."""
    record = directory / "scontrol.calls"
    stub = directory / "bin" / "scontrol"
    stub.parent.mkdir(exist_ok=True)
    stub.write_text(f'#!/bin/sh\nfor a in "$@"; do printf "%s\\t" "$a"; done >> "{record}"\necho >> "{record}"\n')
    stub.chmod(0o755)
    return stub, record


def calls(record: Path) -> list[list[str]]:
    """The recorded calls, each its list of arguments."""
    if not record.exists():
        return []
    return [line.rstrip("\t").split("\t") for line in record.read_text().splitlines()]
