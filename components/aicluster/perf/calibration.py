"""The model's free parameters, and how they were fitted on published measurements.

`CALIBRATION` is what every estimate uses. It was fitted by `fit()` on every record of
tests/data/training-throughput.json (a copy of the 174 published measurements in the reference set,
each with its source) with `python bench/calibrate.py`, which also prints the leave-one-group-out
error. Groups are whole source tables: rows of one table share a software stack, so holding out
single rows would flatter the model. The fit is few-parameter on purpose: the model is judged on
measurements that are not in the file.
"""
from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, fields, replace
from typing import Callable, Iterable, Mapping, NamedTuple, Sequence

from aicluster.catalog import load_catalog
from aicluster.perf.hardware import from_tpu
from aicluster.perf.shapes import Hardware, Layout, ModelShape, Moe, TrainingShape
from aicluster.perf.step import Calibration, step_time

# Fitted by bench/calibrate.py on all 174 records (see docs/training-model.md for the errors).
CALIBRATION = Calibration(gemm_ceiling=0.7617, tpu_ceiling=0.9012, gemm_width=196.9, attention_efficiency=0.6449,
                          fp8_gain=1.9734, elementwise_bytes=595.3, tp_exposed=1.0, dp_overlap=0.8)


class MeasuredError(NamedTuple):
    """How far the model is from published runs it was not fitted on (leave-one-group-out)."""
    median_abs_groups_equal: float   # median |predicted / measured - 1|, every source table weighing the same
    median_abs_rows_equal: float     # the same, every published row weighing the same
    within_20pct: float              # share of rows within 20 %, every source table weighing the same


# What bench/calibrate.py measures with CALIBRATION's model (tests/perf/test_calibration.py recomputes
# it, so it cannot go stale): the estimate prints it next to its figures. "tpu" is MaxText's one table
# held out, so both medians are that table's.
MEASURED_ERROR = {"gpu": MeasuredError(0.114, 0.184, 0.77), "tpu": MeasuredError(0.079, 0.084, 0.81)}
# What the calibration set measured: accelerators, precisions and layout families. Outside them the
# estimate extrapolates (estimate.py warns for accelerators).
CALIBRATED_ACCELERATORS = ("A100", "H100", "TPU v5p")
CALIBRATED_PRECISIONS = ("bf16", "fp8")
CALIBRATED_LAYOUTS = ("ZeRO-3/FSDP on a single node", "ZeRO-3/FSDP across nodes (up to 64 GPUs)",
                      "TP", "PP (interleaved)", "ZeRO-1 / distributed optimizer", "DP (no ZeRO)")
# Published runs added after the 174 (tests/data/training-throughput-extra.json, a source per record):
# not fitted on, so every one of them is held out; bench/calibrate.py reports them per group.
EXTRA_DATA = "training-throughput-extra.json"

# Where every fit starts: round a-priori values (not fitted on anything), so that a leave-one-group-out
# fit never starts from parameters that have seen the held-out group.
PRIOR = Calibration(gemm_ceiling=0.8, tpu_ceiling=0.8, gemm_width=400.0, attention_efficiency=0.55, fp8_gain=1.45,
                    elementwise_bytes=40.0, tp_exposed=0.5, dp_overlap=0.8)

# Not fitted: the data-parallel overlap stays at its prior. With per-layer ZeRO-3 gathers a fit can
# trade it against the GEMM terms: freed, it falls to 0.15 and the held-out error rises (dense GPU
# 12.9 % groups equal, MaxText 15.6 %, docs/training-model.md), a sign it fits noise, not overlap.
FIXED = ("dp_overlap",)

# Bounds keep a fit physical (an efficiency above 1, a negative overlap).
BOUNDS = {"gemm_ceiling": (0.3, 1.0), "tpu_ceiling": (0.3, 1.0), "gemm_width": (0.0, 4000.0), "attention_efficiency": (0.1, 1.0),
          "fp8_gain": (1.0, 2.0), "elementwise_bytes": (0.0, 2000.0), "tp_exposed": (0.0, 1.0),
          "dp_overlap": (0.0, 1.0)}

# Inter-node bandwidth per node where a source does not state it: Selene and MosaicML's A100 nodes
# have 8 x 200 Gb/s (the records say so); H100 nodes of the NeMo and MosaicML tables are DGX/HGX H100
# class with 8 x 400 Gb/s (NVIDIA DGX SuperPOD RA: eight 400 Gbps links per node).
_NODE_GBPS = {"A100": 1600.0, "H100": 3200.0}


@dataclass(frozen=True)
class Record:
    """One calibration record: a measured run and what it ran (model, training, hardware)."""
    id: str
    group: str
    accelerator: str
    model: ModelShape
    training: TrainingShape
    hardware: Hardware
    layout: Layout
    tokens_per_s_per_gpu: float


def _recompute(text: str | None) -> str:
    text = (text or "none").lower()
    if text.startswith("full"):
        return "full"
    return "selective" if text.startswith(("selective", "minimal")) else "none"


def _zero(p: Mapping) -> int:
    if p.get("fsdp"):
        return 3
    stage = p.get("zero_stage")
    return 1 if stage is None else int(stage)   # None: Megatron/NeMo's distributed optimizer


def _hardware(r: Mapping) -> Hardware:
    hw = r["hardware"]
    catalog = load_catalog()
    if hw["accelerator"].startswith("TPU"):
        generation = catalog.tpus[hw["accelerator"][3:].lower()]
        slices = int(m.group(1)) if (m := re.search(r"-(\d+)xv5p-", r["id"])) else 1
        return from_tpu(generation, hw["count"] // slices, slices)
    acc = catalog.accelerators["A100-80GB" if hw["accelerator"] == "A100" else hw["accelerator"]]
    return Hardware(name=f'{hw["count"]} x {hw["accelerator"]}', accelerator=acc.model, kind="gpu",
                    count=hw["count"], per_node=hw["per_node"], bf16_tflops=float(acc.bf16_tflops),
                    fp8_tflops=acc.fp8_tflops, hbm_gib=acc.memory_gib,
                    # A record whose hardware differs from the catalog's part says so (torchtitan's
                    # H100s are the 96 GB HBM2e kind at 2.4 TB/s).
                    hbm_gbs=float(hw.get("hbm_bandwidth_gbs") or acc.hbm_bandwidth_gbs),
                    scale_up_size=hw["per_node"], scale_up_gbs=acc.scale_up_gbs,
                    scale_out_gbps_per_node=hw.get("inter_node_gbps_per_node") or _NODE_GBPS[hw["accelerator"]])


def record(r: Mapping) -> Record:
    """One published measurement as the model's inputs and the measured tokens/s per accelerator."""
    m, p = r["model"], r["parallelism"]
    heads = m["heads"] or max(1, m["hidden"] // 128)      # Narayanan's table gives no heads: d_h 128
    moe = m.get("moe")
    model = ModelShape(
        layers=m["layers"], hidden=m["hidden"], heads=heads, kv_heads=m["kv_heads"] or heads,
        ffn_hidden=m["ffn_hidden"], vocab=m["vocab"], seq_len=m["seq_len"],
        mlp=m["mlp_type"] if m["mlp_type"] in ("swiglu", "gelu", "relu2") else "gelu",
        # The set derives tokens/s from published TFLOP/s with d_h = hidden / heads for every row
        # (MaxText's wider heads included): keep its convention so work and target agree.
        moe=Moe(moe["experts"], moe["top_k"], moe["expert_ffn_hidden"]) if moe else None)
    training = TrainingShape(global_batch_seqs=r["global_batch_seqs"],
                             precision="fp8" if "fp8" in r["precision"].lower() else "bf16")
    layout = Layout(tp=p["tp"] or 1, pp=p["pp"] or 1, dp=p["dp"] or 1, cp=p["cp"] or 1, ep=p["ep"] or 1,
                    zero_stage=_zero(p), recompute=_recompute(p["recompute"]),
                    micro_batch=p["micro_batch"] or 1, virtual_stages=p["vp"] or 1)
    return Record(r["id"], r["group"], r["hardware"]["accelerator"], model, training, _hardware(r), layout,
                  r["derived"]["tokens_per_s_per_gpu"])


def records(document: Mapping) -> list[Record]:
    return [record(r) for r in document["records"]]


def predict(rec: Record, cal: Calibration = CALIBRATION) -> float:
    """Predicted tokens/s per accelerator for the record's published layout."""
    step = step_time(rec.model, rec.training, rec.hardware, rec.layout, cal)
    return step.global_batch * rec.model.seq_len / step.breakdown.total / rec.hardware.count


def errors(recs: Iterable[Record], cal: Calibration = CALIBRATION) -> list[float]:
    """Relative error of each prediction: predicted / measured - 1."""
    return [predict(r, cal) / r.tokens_per_s_per_gpu - 1 for r in recs]


def _loss(recs: Sequence[Record], cal: Calibration) -> float:
    """Mean squared log error, each source group weighted equally."""
    groups: dict[str, list[float]] = {}
    for r in recs:
        groups.setdefault(r.group, []).append(math.log(predict(r, cal) / r.tokens_per_s_per_gpu) ** 2)
    return statistics.fmean(statistics.fmean(v) for v in groups.values())


# The loss has several valleys along the elementwise term (it trades off against the GEMM ceiling):
# start coordinate descent from each of these and keep the best.
ELEMENTWISE_STARTS = (200.0, 800.0, 1400.0)


def fit(recs: Sequence[Record], start: Calibration = PRIOR, *, sweeps: int = 6,
        free: Sequence[str] | None = None) -> Calibration:
    """The best of a few coordinate descents (fit_from), one per start of the elementwise term."""
    names = list(free or (f.name for f in fields(Calibration) if f.name not in FIXED))
    if "elementwise_bytes" not in names:
        return fit_from(recs, start, sweeps=sweeps, free=names)
    fits = [fit_from(recs, replace(start, elementwise_bytes=k), sweeps=sweeps, free=names)
            for k in ELEMENTWISE_STARTS]
    return min(fits, key=lambda cal: _loss(recs, cal))


def fit_from(recs: Sequence[Record], start: Calibration, *, sweeps: int = 6,
             free: Sequence[str] | None = None) -> Calibration:
    """Coordinate descent with shrinking steps, inside BOUNDS: few parameters, smooth loss, and no
    dependency beyond the standard library."""
    names = list(free or (f.name for f in fields(Calibration) if f.name not in FIXED))
    cal, best = start, _loss(recs, start)
    for sweep in range(sweeps):
        for name in names:
            lo, hi = BOUNDS[name]
            step = (hi - lo) / 4 / 2 ** sweep
            current = getattr(cal, name)
            while step > (hi - lo) / 400:
                improved = False
                for candidate in (current - step, current + step):
                    if lo <= candidate <= hi:
                        trial = replace(cal, **{name: candidate})
                        loss = _loss(recs, trial)
                        if loss < best:
                            cal, best, current, improved = trial, loss, candidate, True
                            break
                if not improved:
                    step /= 2
    return cal


def leave_one_group_out(recs: Sequence[Record], fitter: Callable[[Sequence[Record]], Calibration] = fit
                        ) -> dict[str, list[tuple[Record, float]]]:
    """For each source group: fit on every other group, predict the held-out one."""
    out: dict[str, list[tuple[Record, float]]] = {}
    for group in sorted({r.group for r in recs}):
        cal = fitter([r for r in recs if r.group != group])
        held = [r for r in recs if r.group == group]
        out[group] = list(zip(held, errors(held, cal)))
    return out


def summary(errs: Sequence[float]) -> tuple[float, float]:
    """(median |error|, share within 20 %)."""
    absolute = [abs(e) for e in errs]
    return statistics.median(absolute), sum(a <= 0.20 for a in absolute) / len(absolute)


def weighted_summary(errors_by_group: Mapping[str, Sequence[float]]) -> tuple[float, float]:
    """(median |error|, share within 20 %), every group weighing the same whatever its row count."""
    weighted = sorted((abs(e), 1 / len(errs)) for errs in errors_by_group.values() for e in errs)
    total = sum(w for _, w in weighted)
    acc, median = 0.0, weighted[-1][0]
    for value, w in weighted:
        acc += w
        if acc >= total / 2:
            median = value
            break
    return median, sum(w for value, w in weighted if value <= 0.20) / total


def measured_error(logo: Mapping[str, Sequence[tuple[Record, float]]]) -> dict[str, MeasuredError]:
    """MEASURED_ERROR from a leave-one-group-out run, per accelerator kind (rounded as shipped)."""
    out = {}
    for kind in ("gpu", "tpu"):
        groups = {g: [e for _, e in pairs] for g, pairs in logo.items() if pairs[0][0].hardware.kind == kind}
        grouped, within = weighted_summary(groups)
        rows, _ = summary([e for errs in groups.values() for e in errs])
        out[kind] = MeasuredError(round(grouped, 3), round(rows, 3), round(within, 2))
    return out
