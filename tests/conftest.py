"""Shared fixtures: example specs and an offline planner that runs the real program under mocks
(the specs and helpers themselves are in tests/support)."""
from __future__ import annotations

import copy
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from tests.support import BASE_SPEC, free_port, run_spec
from tests.support.run_cache import SHARED_ENV


@pytest.fixture
def base_spec() -> dict:
    """A valid 16 x p5.48xlarge spec; tests mutate their own deep copy."""
    return copy.deepcopy(BASE_SPEC)


@pytest.fixture
def plan_spec():
    return run_spec


@pytest.fixture(scope="module")
def moto_endpoint():
    """moto's server on loopback (EC2, S3, Secrets Manager), for scripts run as subprocesses."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """Short temporary paths, the same length with or without pytest-xdist: aic-XXXXXXXX/t in the
    system's temporary folder, and popen-gwN below it for each worker. A node program writes a path
    into a Slurm reason and the CLI bounds a path in its messages; pytest's own
    pytest-of-<user>/pytest-<n>/popen-gwN/... grows with every worker and run number. Folders of
    runs older than a day are removed (a run going on beside this one is never touched)."""
    if config.option.basetemp or hasattr(config, "workerinput"):
        return   # given on the command line, or a worker: xdist hands it the controller's, per worker
    root = Path(tempfile.gettempdir())
    for old in root.glob("aic-????????"):
        try:
            if time.time() - old.stat().st_mtime > 86_400:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            pass
    run = Path(tempfile.mkdtemp(prefix="aic-", dir=root))
    run.chmod(0o700)
    config.option.basetemp = str(run / "t")   # pytest empties and makes it on first use
    # What the workers share for this run only (tests/support/run_cache.py), beside it.
    shared = run / "shared"
    shared.mkdir()
    os.environ[SHARED_ENV] = str(shared)


def pytest_collection_finish(session):
    """Fewer, cheaper garbage collections: a test session builds thousands of plans, and every
    full collection walks every SDK object loaded so far (the suite ran ~40 % faster this way).
    Nothing loaded at collection time is garbage; cycles made later are still collected."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
