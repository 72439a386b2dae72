"""Goodput (issue 29 item 2): days to train count the checkpoint stall, failures at the job's size
(Llama 3's published interruption rate), restarts and the work lost since the last checkpoint, and
the estimate names the checkpoint interval that maximises goodput."""
from __future__ import annotations

import math

import pytest

from aicluster.perf import Storage, TrainingShape, estimate, what_if
from aicluster.perf.goodput import best_interval, fraction, goodput, reliability
from tests.support.workloads import LLAMA3_70B

TRAIN = TrainingShape(global_batch_seqs=1024, tokens=15e12)


def test_the_rate_is_llama_3s_interruptions_per_accelerator_hour():
    rel = reliability()
    # 419 unexpected interruptions in 54 days on 16,384 H100 (arXiv:2407.21783, section 3.3.4).
    assert rel.per_accelerator_hour == pytest.approx(419 / (54 * 24 * 16384))
    assert goodput(16384, 30, 60, 60, 10).interruptions_per_day == pytest.approx(419 / 54)
    assert "2407.21783" in rel.source and rel.detection_s == 600


def test_more_accelerators_fail_more_often_and_keep_less_of_each_hour():
    small, large = goodput(128, 30, 60, 60, 10), goodput(16384, 30, 60, 60, 10)
    assert large.mtbf_h == pytest.approx(small.mtbf_h * 128 / 16384)
    assert large.fraction < small.fraction < 1
    assert large.failure_pct > 10 > small.failure_pct


def test_the_stall_share_is_the_write_over_the_interval_plus_the_write():
    g = goodput(8, 30, 90, 90, 10)
    assert g.stall_pct == pytest.approx(100 * 90 / (1800 + 90))
    assert g.fraction == pytest.approx(fraction(0.5, 90 / 3600, (600 + 90) / 3600, 8 * reliability().per_accelerator_hour))


def test_the_best_interval_is_youngs_when_the_write_is_short_against_the_mtbf():
    """Young (1974): tau = sqrt(2 delta M) for delta << M; the numeric optimum agrees within a few %."""
    stall_h, per_h = 60 / 3600, 1 / 200.0
    tau = best_interval(stall_h, 0.0, per_h, floor_h=1e-3)
    assert tau == pytest.approx(math.sqrt(2 * stall_h * 200.0), rel=0.05)
    g = goodput(4096, 30, 60, 60, 10)
    assert g.best_fraction >= g.fraction
    assert fraction(g.best_interval_min / 60 * 1.2, 60 / 3600, g.restart_s / 3600, 24 / g.mtbf_h / 24) <= g.best_fraction


def test_without_a_filesystem_there_is_no_best_interval_to_name():
    g = goodput(128, 30, None, None, 10)
    assert g.best_interval_min is None and g.best_fraction is None and g.stall_pct == 0


def test_days_to_train_are_the_failure_free_days_over_goodput():
    """Fails on the old code: train_days assumed every hour trains."""
    fs = Storage("fsx", throughput_gbs=2.0, checkpoint_interval_min=30)
    est = estimate(LLAMA3_70B, TRAIN, what_if("h100", 64), storage=fs)
    assert est.train_days_ideal == pytest.approx(15e12 / est.tokens_per_s / 86400)
    assert est.train_days == pytest.approx(est.train_days_ideal / est.goodput.fraction)
    assert est.goodput.stall_pct > 20          # 988 GB at 2 GB/s every 30 min: a storage-bound run
    assert est.train_days > 1.25 * est.train_days_ideal
    assert est.goodput.best_interval_min > 30 and est.goodput.best_fraction > est.goodput.fraction
    assert est.to_dict()["goodput"]["fraction"] == est.goodput.fraction


def test_a_job_that_fails_faster_than_it_restarts_never_finishes_and_says_so():
    est = estimate(LLAMA3_70B, TrainingShape(global_batch_seqs=65536, tokens=15e12), what_if("h100", 32768),
                   storage=Storage("slow", throughput_gbs=0.5, checkpoint_interval_min=600))
    assert est.goodput.fraction == 0 and est.train_days is None and est.train_cost_usd is None
    assert any("cannot make progress" in w for w in est.warnings)


def test_cost_to_train_adds_the_standing_cost_over_the_same_days():
    fs = Storage("fsx", throughput_gbs=24.0)
    bare = estimate(LLAMA3_70B, TRAIN, what_if("h100", 64), storage=fs)
    full = estimate(LLAMA3_70B, TRAIN, what_if("h100", 64), storage=fs, standing_usd_per_hour=50.0)
    assert bare.standing_cost_usd is None and bare.train_cost_usd == pytest.approx(bare.compute_cost_usd)
    assert full.standing_cost_usd == pytest.approx(50.0 * full.train_days * 24)
    assert full.train_cost_usd == pytest.approx(full.compute_cost_usd + full.standing_cost_usd)
