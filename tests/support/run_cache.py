"""What the pytest-xdist workers of one test run compute once and share: stack plans
(tests/support/stack_plans.py), the contract matrix's variants, the calibration fit.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import pickle
from pathlib import Path

# Set by tests/conftest.py for the whole run: a folder every pytest-xdist worker shares, where the
# first worker to need a result (a stack's plan, a fit) leaves it pickled for the others.
SHARED_ENV = "AICLUSTER_TEST_SHARED"


def shared(key: str, compute):
    """compute() once per test run across pytest-xdist workers: the first worker to ask computes it
    and leaves it pickled in the run's shared folder; the others wait on a lock and load it. A
    failure is not kept (each asker raises its own). Without the folder (pytest not run through
    tests/conftest.py), compute() itself."""
    folder = os.environ.get(SHARED_ENV)
    if not folder:
        return compute()
    folder = Path(folder) / "results"
    folder.mkdir(parents=True, exist_ok=True)
    stem = hashlib.sha256(key.encode()).hexdigest()[:32]
    saved = folder / f"{stem}.pickle"
    with open(folder / f"{stem}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if saved.exists():
            return pickle.loads(saved.read_bytes())
        value = compute()
        partial = folder / f"{stem}.partial"
        partial.write_bytes(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        partial.replace(saved)
        return value
