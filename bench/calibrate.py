"""Fit the training model's free parameters on the published measurements and report how well it
predicts source groups it has not seen (leave-one-group-out).

    .venv/bin/python bench/calibrate.py            # fit, in-sample and leave-one-group-out errors
    .venv/bin/python bench/calibrate.py --write    # also write bench/results/calibration.json

The fitted values go into components/aicluster/perf/calibration.py (CALIBRATION) by hand, so a
change to them is a reviewed diff.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "components"))

from aicluster.perf import calibration as C  # noqa: E402

DATA = ROOT / "tests" / "data" / "training-throughput.json"


def weighted_summary(pairs_by_group: dict[str, list[float]]) -> tuple[float, float]:
    """(median |error|, share within 20 %), every group weighing the same whatever its row count."""
    weighted = sorted((abs(e), 1 / len(errs)) for errs in pairs_by_group.values() for e in errs)
    total = sum(w for _, w in weighted)
    acc, median = 0.0, weighted[-1][0]
    for value, w in weighted:
        acc += w
        if acc >= total / 2:
            median = value
            break
    within = sum(w for value, w in weighted if value <= 0.20) / total
    return median, within


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    recs = C.records(json.loads(DATA.read_text()))
    start = time.perf_counter()
    fitted = C.fit(recs)
    print(f"fit on all {len(recs)} records in {time.perf_counter() - start:.1f} s: {fitted}")
    print(f"shipped CALIBRATION: {C.CALIBRATION}")
    out = {"fitted": asdict(fitted), "shipped": asdict(C.CALIBRATION), "groups": {}}
    logo = C.leave_one_group_out(recs)
    gpu: dict[str, list[float]] = {}
    print(f"{'held-out group':<22} {'rows':>4} {'median err':>10} {'median |err|':>12} {'within 20 %':>11}")
    for group, pairs in logo.items():
        errs = [e for _, e in pairs]
        med, within = C.summary(errs)
        print(f"{group:<22} {len(errs):>4} {statistics.median(errs):>+10.1%} {med:>12.1%} {within:>11.0%}")
        out["groups"][group] = {"rows": len(errs), "median_error": statistics.median(errs),
                                "median_abs_error": med, "within_20pct": within}
        if pairs[0][0].hardware.kind == "gpu":
            gpu[group] = errs
    pooled = C.summary([e for errs in gpu.values() for e in errs])
    weighted = weighted_summary(gpu)
    print(f"dense GPU, leave-one-group-out, every row the same:    median |err| {pooled[0]:.1%}, "
          f"{pooled[1]:.0%} within 20 %")
    print(f"dense GPU, leave-one-group-out, every group the same:  median |err| {weighted[0]:.1%}, "
          f"{weighted[1]:.0%} within 20 %")
    in_sample = C.summary([e for r, e in zip(recs, C.errors(recs)) if r.hardware.kind == "gpu"])
    print(f"dense GPU, in sample with the shipped parameters:       median |err| {in_sample[0]:.1%}, "
          f"{in_sample[1]:.0%} within 20 %")
    out |= {"gpu_pooled": pooled, "gpu_group_weighted": weighted, "gpu_in_sample": in_sample}
    if args.write:
        (ROOT / "bench" / "results").mkdir(exist_ok=True)
        (ROOT / "bench" / "results" / "calibration.json").write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
