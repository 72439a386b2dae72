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
EXTRA = ROOT / "tests" / "data" / C.EXTRA_DATA


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
    weighted = C.weighted_summary(gpu)
    print(f"dense GPU, leave-one-group-out, every row the same:    median |err| {pooled[0]:.1%}, "
          f"{pooled[1]:.0%} within 20 %")
    print(f"dense GPU, leave-one-group-out, every group the same:  median |err| {weighted[0]:.1%}, "
          f"{weighted[1]:.0%} within 20 %")
    in_sample = C.summary([e for r, e in zip(recs, C.errors(recs)) if r.hardware.kind == "gpu"])
    print(f"dense GPU, in sample with the shipped parameters:       median |err| {in_sample[0]:.1%}, "
          f"{in_sample[1]:.0%} within 20 %")
    out |= {"gpu_pooled": pooled, "gpu_group_weighted": weighted, "gpu_in_sample": in_sample}
    measured = C.measured_error(logo)
    print(f"MEASURED_ERROR (perf/calibration.py): {measured}"
          + ("" if measured == C.MEASURED_ERROR else f"  <- differs from the shipped {C.MEASURED_ERROR}"))
    # Published runs added since (a source per record) are not fitted on: every one is held out.
    extra = C.records(json.loads(EXTRA.read_text()))
    print(f"\nadded records, held out (predicted with the fit on the {len(recs)}):")
    print(f"{'group / record':<42} {'measured':>9} {'predicted':>9} {'error':>7}")
    out["extra"] = {}
    for group in sorted({r.group for r in extra}):
        rows = [r for r in extra if r.group == group]
        errs = C.errors(rows, fitted)
        med, within = C.summary(errs)
        print(f"{group:<42} {len(rows):>5} rows, median |err| {med:.1%}, {within:.0%} within 20 %")
        for r, e in zip(rows, errs):
            print(f"  {r.id:<40} {r.tokens_per_s_per_gpu:>9.0f} {C.predict(r, fitted):>9.0f} {e:>+7.1%}")
        out["extra"][group] = {"rows": len(rows), "median_abs_error": med, "within_20pct": within,
                               "errors": {r.id: e for r, e in zip(rows, errs)}}
    if args.write:
        (ROOT / "bench" / "results").mkdir(exist_ok=True)
        (ROOT / "bench" / "results" / "calibration.json").write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
