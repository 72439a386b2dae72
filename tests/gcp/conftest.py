"""Fixtures the GCP power-program tests share."""
from __future__ import annotations

import pytest

from tests.support.scontrol_recorder import calls as recorded_calls
from tests.support.scontrol_recorder import recorder


@pytest.fixture
def scontrol(tmp_path, monkeypatch):
    """A stub scontrol on AICLUSTER_SCONTROL; calling the fixture's value gives its calls so far."""
    stub, record = recorder(tmp_path)
    monkeypatch.setenv("AICLUSTER_SCONTROL", str(stub))
    return lambda: recorded_calls(record)
