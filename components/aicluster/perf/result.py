"""What an estimate answers: the best layout's step, memory, bound, time and cost to train, and the
runners-up. `to_dict()` is the JSON `aicluster estimate --format json` prints under `estimate`."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from aicluster.perf.goodput import Goodput
from aicluster.perf.shapes import Layout

BOUNDS = ("compute", "memory", "intra-node", "inter-node", "pipeline", "storage")


@dataclass(frozen=True)
class Memory:
    """GiB per accelerator on the busiest pipeline stage (the first)."""
    weights: float
    gradients: float
    optimizer: float
    activations: float
    buffers: float          # logits, communication buckets, allocator fragmentation
    capacity: float         # HBM per accelerator

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations + self.buffers

    @property
    def headroom_pct(self) -> float:
        return 100 * (1 - self.total / self.capacity) if self.capacity else 0.0


@dataclass(frozen=True)
class Breakdown:
    """Seconds per step on the critical path."""
    compute: float
    exposed_tp: float
    bubble: float
    exposed_dp: float
    p2p: float
    optimizer: float
    exposed_cp_ep: float = 0.0

    @property
    def total(self) -> float:
        return (self.compute + self.exposed_tp + self.bubble + self.exposed_dp + self.p2p
                + self.optimizer + self.exposed_cp_ep)


@dataclass(frozen=True)
class Candidate:
    """One evaluated layout."""
    layout: Layout
    step_time_s: float
    tokens_per_s_per_gpu: float
    model_tflops_per_gpu: float
    mfu: float
    hfu: float
    bound: str
    memory: Memory
    breakdown: Breakdown


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint's size and how long writing it takes."""
    size_gb: float
    write_s: float | None           # None: no filesystem to write to
    stall_pct: float | None         # of the checkpoint interval, synchronous writes
    interval_min: float
    budget_pct: float


@dataclass(frozen=True)
class DataLoading:
    """What the training job reads per second, against what its filesystem gives."""
    tokens_per_s: float             # what the whole job consumes
    mb_per_s: float                 # at training.bytes_per_token
    filesystem_mb_per_s: float | None


@dataclass(frozen=True)
class Calibrated:
    """How much of an estimate rests on measurements: the model's error out of sample for this kind of
    accelerator (leave one published source table out, perf/calibration.py MEASURED_ERROR), and
    where this estimate leaves what the calibration set measured."""
    records: int                      # published runs the model was fitted on
    accelerators: tuple[str, ...]     # those the runs measured
    median_error_groups_equal: float  # median |predicted / measured - 1|, source tables weighing the same
    median_error_rows_equal: float    # the same, every published row weighing the same
    within_20pct: float
    extrapolates: tuple[str, ...]     # what this estimate has that no published run had

    def text(self) -> str:
        error = (f"out of sample the median error is {100 * self.median_error_groups_equal:.1f} % (each source table "
                 f"weighing the same; {100 * self.median_error_rows_equal:.1f} % each run), "
                 f"{100 * self.within_20pct:.0f} % of runs within 20 %")
        where = (f"; this estimate extrapolates: {', '.join(self.extrapolates)}" if self.extrapolates
                 else "; this estimate stays inside what they measured")
        return f"fitted on {self.records} published runs ({', '.join(self.accelerators)}); {error}{where}"


@dataclass(frozen=True)
class Estimate:
    """The training model's answer for one workload on one cluster."""
    hardware: str
    accelerators: int
    best: Candidate
    candidates: tuple[Candidate, ...]      # best first, at most `top`
    layouts_searched: int
    layouts_fitting: int
    tokens_per_s: float                    # the whole job
    train_days: float | None               # wall-clock days at the goodput (None: no tokens, or no progress)
    train_days_ideal: float | None         # if every hour trained (no checkpoint stall, no failure)
    train_cost_usd: float | None           # (accelerators + standing cost) per hour x train_days
    usd_per_hour: float | None             # the accelerators paid for
    standing_usd_per_hour: float | None    # what the cluster pays beside them; None: not known
    goodput: Goodput
    checkpoint: Checkpoint
    data_loading: DataLoading
    bound: str                             # the best layout's, or storage when checkpoints stall more
    warnings: tuple[str, ...] = field(default_factory=tuple)
    nvlink_domain: str | None = None       # what a multi-node NVLink domain did for the best layout
    calibrated: Calibrated | None = None   # what the figures rest on

    @property
    def compute_cost_usd(self) -> float | None:
        """The accelerators' share of the cost to train."""
        if self.train_days is None or self.usd_per_hour is None:
            return None
        return self.usd_per_hour * self.train_days * 24

    @property
    def standing_cost_usd(self) -> float | None:
        """What the rest of the cluster costs over the same days."""
        if self.train_days is None or self.standing_usd_per_hour is None:
            return None
        return self.standing_usd_per_hour * self.train_days * 24

    def to_dict(self) -> dict:
        b = self.best
        mem = dataclasses.asdict(b.memory) | {"total": b.memory.total, "headroom_pct": b.memory.headroom_pct}
        return {
            "hardware": self.hardware,
            "accelerators": self.accelerators,
            "tokens_per_s_per_gpu": b.tokens_per_s_per_gpu,
            "tokens_per_s": self.tokens_per_s,
            "model_tflops_per_gpu": b.model_tflops_per_gpu,
            "mfu": b.mfu,
            "hfu": b.hfu,
            "step_time_s": b.step_time_s,
            "memory_per_gpu_gib": mem,
            "layout": b.layout.as_dict(),
            "bound": self.bound,
            "breakdown_s": dataclasses.asdict(b.breakdown),
            "train_days": self.train_days,
            "train_days_ideal": self.train_days_ideal,
            "train_cost_usd": self.train_cost_usd,
            "compute_cost_usd": self.compute_cost_usd,
            "standing_cost_usd": self.standing_cost_usd,
            "usd_per_hour": self.usd_per_hour,
            "standing_usd_per_hour": self.standing_usd_per_hour,
            "goodput": self.goodput.to_dict(),
            "checkpoint": dataclasses.asdict(self.checkpoint),
            "data_loading": dataclasses.asdict(self.data_loading),
            "warnings": list(self.warnings),
            "nvlink_domain": self.nvlink_domain,
            "calibrated": None if self.calibrated is None else dataclasses.asdict(self.calibrated),
            "layouts_searched": self.layouts_searched,
            "layouts_fitting": self.layouts_fitting,
            "candidates": [{"layout": c.layout.as_dict(), "tokens_per_s_per_gpu": c.tokens_per_s_per_gpu,
                            "mfu": c.mfu, "step_time_s": c.step_time_s, "bound": c.bound,
                            "memory_per_gpu_gib": c.memory.total} for c in self.candidates],
        }
