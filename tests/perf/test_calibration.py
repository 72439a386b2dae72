"""The calibration: reproducible from the data, and its out-of-sample error held at the level reached.

Leave-one-group-out: each source table is predicted by a fit on every other table. The thresholds
are what the model reaches (bench/calibrate.py prints the numbers; docs/training-model.md reports
them), so a change that makes the model worse out of sample fails here.
"""
from __future__ import annotations

import json
import statistics
from dataclasses import fields
from pathlib import Path

import pytest

from aicluster.perf import calibration as C
from tests.support.run_cache import shared

DATA = json.loads((Path(__file__).resolve().parents[1] / "data" / "training-throughput.json").read_text())
RECORDS = C.records(DATA)


@pytest.fixture(scope="module")
def logo():
    # About 50 s of fitting: once per run, whichever worker asks first (tests/support/run_cache.py).
    return shared("calibration leave-one-group-out", lambda: C.leave_one_group_out(RECORDS))


def test_every_record_converts_and_has_a_source_group():
    assert len(RECORDS) == DATA["meta"]["record_count"] == 174
    assert {r.group for r in RECORDS} == {"korthikanti-2022", "maxtext-v5p", "megatron-2021-weak", "mpt-a100_80gb",
                                          "mpt-h100_80gb", "nemo-2407-h100-fp8", "torchtitan-a100"}


def test_measured_error_is_what_leave_one_group_out_gives(logo):
    """The estimate prints MEASURED_ERROR: it must be what bench/calibrate.py measures today."""
    assert C.measured_error(logo) == C.MEASURED_ERROR


def test_added_records_have_a_source_and_are_not_fitted_on():
    """tests/data/training-throughput-extra.json: the same schema, one source per record, groups of
    their own; bench/calibrate.py reports them held out (the fit reads the 174 only)."""
    extra = json.loads((Path(__file__).resolve().parents[1] / "data" / C.EXTRA_DATA).read_text())
    assert extra["meta"]["record_count"] == len(extra["records"]) == 10
    assert all(r["source"]["url"] and r["source"]["ref"] for r in extra["records"])
    recs = C.records(extra)
    assert {r.group for r in recs} == {"torchtitan-h100", "llama3-405b-meta"}
    assert not {r.group for r in recs} & {r.group for r in RECORDS}
    # Held out (never fitted on): Meta's Table 4 within 2 % at the median, torchtitan's H100 runs
    # within 15 % (their 500 W parts are timed at the SXM peak: docs/training-model.md).
    by_group = {g: C.summary(C.errors([r for r in recs if r.group == g]))[0] for g in {r.group for r in recs}}
    assert by_group["llama3-405b-meta"] <= 0.02
    assert by_group["torchtitan-h100"] <= 0.15


@pytest.fixture(scope="module")
def fitted():
    return shared("calibration fit on every record", lambda: C.fit(RECORDS))


def test_shipped_parameters_are_what_the_fit_gives(fitted):
    """CALIBRATION is copied by hand from bench/calibrate.py: it must still be the fit of the data."""
    for f in fields(C.Calibration):
        lo, hi = C.BOUNDS[f.name]
        assert getattr(C.CALIBRATION, f.name) == pytest.approx(getattr(fitted, f.name), abs=0.01 * (hi - lo)), f.name


def test_dense_gpu_leave_one_group_out_error(logo):
    gpu = {g: [e for _, e in pairs] for g, pairs in logo.items() if pairs[0][0].hardware.kind == "gpu"}
    median, within = C.weighted_summary(gpu)
    assert median <= 0.115         # reached: 11.4 % (before the per-layer ZeRO-3 model: 11.4 %)
    assert within >= 0.76          # reached: 77 % (76 %)
    pooled = C.summary([e for v in gpu.values() for e in v])
    assert pooled[0] <= 0.185      # every row weighing the same (MosaicML's two tables are 120 of 158 rows): 18.4 %
    assert pooled[1] >= 0.55       # 56 % (55 %)


def test_tpu_leave_one_group_out_error_reported_separately(logo):
    errors = [e for _, e in logo["maxtext-v5p"]]
    median, within = C.summary(errors)
    assert median <= 0.085         # reached: 8.4 % (its GEMM ceiling is then the prior: no other TPU table)
    assert within >= 0.75


def test_in_sample_error_with_shipped_parameters():
    gpu = [e for r, e in zip(RECORDS, C.errors(RECORDS)) if r.hardware.kind == "gpu"]
    median, within = C.summary(gpu)
    assert median <= 0.117 and within >= 0.77     # reached: 11.6 %, 78 % (before: 11.5 %, 78 %)
    # No systematic bias across the set: the median signed error stays small.
    assert abs(statistics.median(gpu)) <= 0.05


def test_the_fit_moves_parameters_only_inside_their_bounds(fitted):
    # The fit of every record (shared with the test above: a fit is seconds) stays physical, and
    # what calibration.FIXED holds stays at the prior.
    for f in fields(C.Calibration):
        lo, hi = C.BOUNDS[f.name]
        assert lo <= getattr(fitted, f.name) <= hi
    assert all(getattr(fitted, name) == getattr(C.PRIOR, name) for name in C.FIXED)
