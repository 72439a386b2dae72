"""AIC-STO-002 storage-throughput-floor, over hand-written stacks."""
from __future__ import annotations

from tests.support import handwritten as hw

RULE = "AIC-STO-002"


def test_passes_above_the_floor():
    # 16 x p5 = 128 GPUs; 24000 GiB x 500 MB/s/TiB = 11.7 GB/s = 91.6 MB/s per GPU
    assert hw.check(RULE, lambda: hw.efa_cluster(nodes=16)).status == "pass"


def test_fails_64_p5_on_1_2_tib_at_125():
    verdict = hw.check(RULE, lambda: hw.efa_cluster(nodes=64, capacity=1200, throughput=125))
    assert verdict.status == "fail"
    text = hw.messages(verdict)
    assert "0.15 GB/s for 512 GPUs = 0.29 MB/s per GPU < 58.6 MB/s floor" in text
    assert "hw-fsx 1200 GiB x 125 MB/s/TiB" in text
    assert "needs 30.0 GB/s" in text            # the balance model's fix: capacity at each tier


def test_the_floor_is_configurable():
    program = lambda: hw.efa_cluster(nodes=16)   # noqa: E731 - 91.6 MB/s per GPU
    verdict = hw.check(RULE, program, {"floorMbpsPerAccelerator": 156.25})
    assert verdict.status == "fail" and "< 156.2 MB/s floor" in hw.messages(verdict)


def test_scratch_uses_the_catalog_baseline():
    def program():
        _, subnet, sg = hw.network()
        pg = hw.placement_group()
        lt = hw.launch_template("lt", subnet, sg, placement_group=pg)
        hw.autoscaling_group("asg", lt, subnet, max_size=2, placement=pg)
        hw.fsx("scratch", subnet, sg, capacity=9600, throughput=None, deployment="SCRATCH_2")
    # 9600 GiB x 200 MB/s/TiB (baseline) = 1.875 GB/s for 16 GPUs = 117 MB/s
    assert hw.check(RULE, program).status == "pass"


def test_without_a_filesystem_it_is_not_applicable():
    def program():
        _, subnet, sg = hw.network()
        hw.instance("n0", subnet, sg)
        hw.instance("n1", subnet, sg)
    verdict = hw.check(RULE, program)
    assert verdict.status == "n/a" and "AIC-STO-001" in verdict.not_applicable
