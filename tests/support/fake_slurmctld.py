"""A stand-in for `slurmctld -D -f slurm.conf`, for aicluster-sync tests whose published
configuration names another host as SlurmctldHost (a real slurmctld refuses to run there; the
tests with a real one are in tests/slurm/test_sync_slurmctld.py).

Run as a program: it reads the file given with -f, answers like slurmctld 22.05 for a
configuration it rejects (an error line, a fatal line, exit 1), and otherwise listens on the
file's SlurmctldPort, as a slurmctld that accepted its configuration does, until SIGTERM.
A configuration is rejected when it holds the text in AICLUSTER_FAKE_SLURMCTLD_REJECT.
Each start appends the file's path to AICLUSTER_FAKE_SLURMCTLD_CALLS when that is set."""
from __future__ import annotations

import os
import re
import socket
import sys
import time
from pathlib import Path

REJECT = "AICLUSTER_FAKE_SLURMCTLD_REJECT"
CALLS = "AICLUSTER_FAKE_SLURMCTLD_CALLS"


def install(bin_dir: Path) -> Path:
    """An executable `slurmctld` in bin_dir that runs this stand-in (for AICLUSTER_SLURMCTLD)."""
    program = bin_dir / "slurmctld"
    program.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{Path(__file__).resolve()}" "$@"\n')
    program.chmod(0o755)
    return program


def main(argv: list[str]) -> int:
    conf = Path(argv[argv.index("-f") + 1])
    text = conf.read_text()
    if os.environ.get(CALLS):
        with open(os.environ[CALLS], "a", encoding="utf-8") as fh:
            fh.write(f"{conf}\n")
    bad = os.environ.get(REJECT)
    if bad and bad in text:
        print(f"slurmctld: error: _parse_next_key: Parsing error at unrecognized key: {bad}", flush=True)
        print("slurmctld: fatal: Unable to process configuration file", flush=True)
        return 1
    port = int(re.search(r"^SlurmctldPort=(\d+)", text, re.M | re.I).group(1))
    with socket.socket() as server:
        server.bind(("127.0.0.1", port))
        server.listen()
        while True:             # until the test's SIGTERM
            time.sleep(1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
