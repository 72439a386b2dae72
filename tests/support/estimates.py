"""A hand-made perf.Estimate, for tests of what reads one (the plan's estimate section), so they do
not depend on the training model's numbers."""
from __future__ import annotations

import dataclasses

from aicluster.perf import Breakdown, Candidate, Checkpoint, DataLoading, Estimate, Layout, Memory
from aicluster.perf.goodput import goodput


def an_estimate(**overrides) -> Estimate:
    """Llama-3-70B-like on 16 x p5: tp 8, dp 16, 40 % MFU; `overrides` replace Estimate fields,
    `best=` a whole candidate (see a_candidate)."""
    best = overrides.pop("best", None) or a_candidate()
    base = Estimate(
        hardware="16 x p5.48xlarge", accelerators=128, best=best, candidates=(best,), layouts_searched=1200,
        layouts_fitting=300, tokens_per_s=best.tokens_per_s_per_gpu * 128, train_days=343.4,
        train_days_ideal=330.0, train_cost_usd=8_000_000.0, usd_per_hour=1000.0, standing_usd_per_hour=None,
        goodput=goodput(128, 30.0, 84.4, 84.4, 20.0),
        checkpoint=Checkpoint(size_gb=987.7, write_s=84.4, stall_pct=4.7, interval_min=30.0, budget_pct=5.0),
        data_loading=DataLoading(tokens_per_s=best.tokens_per_s_per_gpu * 128, mb_per_s=2.0, filesystem_mb_per_s=11719.0),
        bound="compute", warnings=())
    return dataclasses.replace(base, **overrides)


def a_candidate(**overrides) -> Candidate:
    base = Candidate(
        layout=Layout(tp=8, pp=1, dp=16, zero_stage=1, recompute="selective", micro_batch=1),
        step_time_s=20.0, tokens_per_s_per_gpu=3277.0, model_tflops_per_gpu=395.0, mfu=0.40, hfu=0.42,
        bound="compute",
        memory=Memory(weights=17.6, gradients=17.6, optimizer=8.8, activations=20.0, buffers=4.0, capacity=80.0),
        breakdown=Breakdown(compute=17.0, exposed_tp=1.5, bubble=0.0, exposed_dp=1.0, p2p=0.0, optimizer=0.5))
    return dataclasses.replace(base, **overrides)
