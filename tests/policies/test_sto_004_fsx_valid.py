"""AIC-STO-004 fsx-valid-configuration, over hand-written stacks."""
from __future__ import annotations

import pulumi_aws as aws
import pulumi_gcp as gcp
import pytest

from tests.support import handwritten as hw

RULE = "AIC-STO-004"


def _fsx(**kwargs):
    def program():
        _, subnet, sg = hw.network()
        hw.fsx("fs", subnet, sg, **kwargs)
    return program


@pytest.mark.parametrize("kwargs", [
    {"capacity": 1200, "throughput": 125},
    {"capacity": 4800, "throughput": 1000},
    {"capacity": 2400, "throughput": 200, "deployment": "PERSISTENT_1"},
    {"capacity": 10800, "throughput": None, "deployment": "SCRATCH_1"},
    {"capacity": 9600, "throughput": 500, "efa_enabled": True,
     "metadata_configuration": aws.fsx.LustreFileSystemMetadataConfigurationArgs(mode="AUTOMATIC")},
])
def test_valid_combinations_pass(kwargs):
    verdict = hw.check(RULE, _fsx(**kwargs))
    assert verdict.status == "pass", hw.messages(verdict)


@pytest.mark.parametrize("kwargs, expected", [
    ({"capacity": 3000, "throughput": 250},
     "storageCapacity 3000 GiB is not a PERSISTENT_2 size: 1200, 2400, then multiples of 2400 GiB (nearest: 2400 or 4800 GiB)"),
    ({"capacity": 2400, "throughput": 200}, "perUnitStorageThroughput 200 MB/s/TiB is not offered on PERSISTENT_2"),
    ({"capacity": 2400, "throughput": None}, "PERSISTENT_2 needs perUnitStorageThroughput: one of 125, 250, 500, 1000"),
    ({"capacity": 2400, "throughput": 200, "deployment": "SCRATCH_2"}, "SCRATCH_2 takes no perUnitStorageThroughput"),
    ({"capacity": 4800, "throughput": None, "deployment": "SCRATCH_1"}, "not a SCRATCH_1 size"),
    ({"capacity": 4800, "throughput": 500, "efa_enabled": True}, "grows in steps of 9600 GiB"),
])
def test_invalid_combinations_fail_with_the_rule(kwargs, expected):
    verdict = hw.check(RULE, _fsx(**kwargs))
    assert verdict.status == "fail"
    assert expected in hw.messages(verdict)


def test_managed_lustre_tier_minimum():
    def program(capacity: str):
        def run():
            net, _ = hw.gcp_network()
            gcp.lustre.Instance("lustre", capacity_gib=capacity, per_unit_storage_throughput="250", filesystem="fs",
                                instance_id="lustre", location="us-central1-a", network=net.id)
        return run
    assert hw.check(RULE, program("36000")).status == "pass"
    verdict = hw.check(RULE, program("18000"))
    assert verdict.status == "fail" and "below the 250 MB/s/TiB tier's minimum of 36000 GiB" in hw.messages(verdict)


def test_no_filesystem_is_not_applicable():
    assert hw.check(RULE, lambda: hw.network()).status == "n/a"
