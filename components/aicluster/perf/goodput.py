"""Goodput: the share of wall-clock hours that advance training once checkpoints and failures are
counted, and the checkpoint interval that makes it largest.

First-order model (Young 1974, "A first order approximation to the optimum checkpoint interval";
Daly 2006, "A higher order estimate of the optimum checkpoint interval for restart dumps"): a job of
N accelerators fails at rate N x lambda (lambda per accelerator-hour from a published run at
scale, catalog/reliability.yaml). Every interval of tau hours of training writes a checkpoint that
stalls delta hours (synchronous write); each failure costs a restart R (a hang's detection, loading
the checkpoint back) plus the work since the last checkpoint, (tau + delta) / 2 on average. So

    goodput(tau) = tau / (tau + delta) x (1 - N lambda (R + (tau + delta) / 2))

Its maximum is near Young's tau = sqrt(2 delta / (N lambda)); it is found numerically here so that
the figure and the interval come from the same formula. Pure: no Pulumi, no spec.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path

from aicluster.catalog import load_yaml

_FILE = Path(__file__).resolve().parent.parent / "catalog" / "reliability.yaml"


@dataclass(frozen=True)
class Reliability:
    """Interruptions per accelerator-hour and the bound on detecting a hang, with their sources."""
    per_accelerator_hour: float      # unexpected ones; planned ones checkpoint first and are not charged
    detection_s: float
    source: str
    detection_source: str


@functools.lru_cache(maxsize=1)
def reliability() -> Reliability:
    doc = load_yaml(_FILE.read_text(encoding="utf-8"))
    i, d = doc["interruptions"], doc["detection"]
    rate = i["unexpected"] / (i["days"] * 24 * i["accelerators"])
    return Reliability(per_accelerator_hour=rate, detection_s=float(d["collective_timeout_s"]), source=i["source"],
                       detection_source=d["source"])


@dataclass(frozen=True)
class Goodput:
    """What failures and checkpoints leave of each hour, at the configured and the best interval."""
    fraction: float                  # at the configured checkpoint interval
    interval_min: float              # the configured interval
    best_fraction: float | None      # None: no checkpoint write time known (no filesystem)
    best_interval_min: float | None
    interruptions_per_day: float
    mtbf_h: float                    # mean time between interruptions of the whole job
    restart_s: float                 # detection + checkpoint load
    detection_s: float
    load_s: float | None             # None: no filesystem, or its rate is unknown
    stall_pct: float                 # checkpoint writes, of the configured interval
    failure_pct: float               # restarts and lost work, at the configured interval
    source: str

    def to_dict(self) -> dict:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def fraction(interval_h: float, stall_h: float, restart_h: float, failures_per_h: float) -> float:
    """goodput(tau) of the module's formula, never below 0 (a job that fails faster than it restarts
    and re-does its interval makes no progress)."""
    if interval_h <= 0:
        return 0.0
    lost = failures_per_h * (restart_h + (interval_h + stall_h) / 2)
    return max(0.0, interval_h / (interval_h + stall_h) * (1 - lost))


def best_interval(stall_h: float, restart_h: float, failures_per_h: float, floor_h: float) -> float:
    """The interval of largest goodput, no shorter than `floor_h` (a checkpoint per step at most):
    golden-section search on log(interval) between the floor and a year, where the curve has one peak."""
    lo, hi = math.log(max(floor_h, 1e-6)), math.log(24 * 365.0)
    if failures_per_h <= 0:
        return math.exp(hi)
    ratio = (math.sqrt(5) - 1) / 2
    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    for _ in range(80):
        if fraction(math.exp(a), stall_h, restart_h, failures_per_h) >= \
                fraction(math.exp(b), stall_h, restart_h, failures_per_h):
            hi, b = b, a
            a = hi - ratio * (hi - lo)
        else:
            lo, a = a, b
            b = lo + ratio * (hi - lo)
    return math.exp((lo + hi) / 2)


def goodput(accelerators: int, interval_min: float, write_s: float | None, load_s: float | None,
            step_s: float) -> Goodput:
    """Goodput of a job on `accelerators` that checkpoints every `interval_min` minutes, each write
    stalling `write_s` seconds (None: no filesystem, nothing stalls but nothing can be reloaded
    faster either) and each restart reading the checkpoint back in `load_s`."""
    rel = reliability()
    per_h = rel.per_accelerator_hour * accelerators
    stall_h = (write_s or 0.0) / 3600
    restart_s = rel.detection_s + (load_s or 0.0)
    restart_h = restart_s / 3600
    interval_h = interval_min / 60
    at_interval = fraction(interval_h, stall_h, restart_h, per_h)
    best = best_min = None
    if write_s is not None:
        best_h = best_interval(stall_h, restart_h, per_h, floor_h=step_s / 3600)
        best = fraction(best_h, stall_h, restart_h, per_h)
        best, best_min = (best, best_h * 60) if best > at_interval else (at_interval, interval_min)
    stall_share = stall_h / (interval_h + stall_h) if interval_h > 0 else 0.0
    return Goodput(fraction=at_interval, interval_min=interval_min, best_fraction=best, best_interval_min=best_min,
                   interruptions_per_day=per_h * 24, mtbf_h=math.inf if per_h <= 0 else 1 / per_h,
                   restart_s=restart_s, detection_s=rel.detection_s, load_s=load_s,
                   stall_pct=100 * stall_share, failure_pct=100 * max(0.0, 1 - stall_share - at_interval),
                   source=f"{rel.source}; {rel.detection_source}")
