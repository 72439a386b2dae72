"""Shared fixtures: example specs and an offline planner that runs the real program under mocks
(the specs and helpers themselves are in tests/support)."""
from __future__ import annotations

import copy

import pytest

from tests.support import BASE_SPEC, free_port, run_spec


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


def pytest_collection_finish(session):
    """Fewer, cheaper garbage collections: a test session builds thousands of plans, and every
    full collection walks every SDK object loaded so far (the suite ran ~40 % faster this way).
    Nothing loaded at collection time is garbage; cycles made later are still collected."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
