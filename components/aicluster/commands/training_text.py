"""The lines `aicluster plan` and `aicluster estimate` both print for days, goodput and dollars to
train: one wording in both places."""
from __future__ import annotations

from aicluster.perf import Estimate


def _hours(h: float) -> str:
    return f"{h:,.1f} h" if h < 48 else f"{h / 24:,.1f} days"


def train_lines(e: Estimate, width: int, unit: str = "GPU") -> list[str]:
    """to train / goodput / cost lines; a single hint line when the workload gives no token count."""
    label = lambda name: f"{name:<{width}}"   # noqa: E731 - one column width for the block
    g = e.goodput
    lines = []
    if e.train_days_ideal is None:
        lines.append(f"{label('to train')} unknown: give training.tokens for days and $ to train")
    elif e.train_days is None:
        lines.append(f"{label('to train')} never: goodput is 0 (see the warnings)")
    else:
        lines.append(f"{label('to train')} {e.train_days:,.1f} days at {100 * g.fraction:.1f} % goodput "
                     f"({e.train_days_ideal:,.1f} if every hour trained)")
    stall = (f"checkpoint stall {g.stall_pct:.1f} % ({e.checkpoint.write_s:,.0f} s every {g.interval_min:g} min)"
             if e.checkpoint.write_s is not None else "checkpoint stall unknown (no filesystem)")
    load = f" + {g.load_s / 60:.1f} min to reload the checkpoint" if g.load_s else ""
    lines.append(f"{label('goodput')} {stall}; failures and restarts {g.failure_pct:.1f} %: "
                 f"{g.interruptions_per_day:.2g} interruptions a day on {e.accelerators:,} {unit}s (one every "
                 f"{_hours(g.mtbf_h)}, Llama 3's rate at 16k GPUs), {g.restart_s / 60:.0f} min each to restart "
                 f"({g.detection_s / 60:.0f} min to detect a hang{load}) plus the work since the last checkpoint")
    if g.best_interval_min is not None and g.best_fraction is not None and abs(g.best_interval_min - g.interval_min) > 1:
        days = f", {e.train_days_ideal / g.best_fraction:,.1f} days" if e.train_days_ideal else ""
        lines.append(f"{'':<{width}} best checkpoint interval {g.best_interval_min:,.0f} min: "
                     f"{100 * g.best_fraction:.1f} % goodput{days}")
    lines.append(cost_line(e, width))
    if e.calibrated is not None:
        lines.append(f"{label('model')} {e.calibrated.text()}")
    return lines


def cost_line(e: Estimate, width: int) -> str:
    label = f"{'cost':<{width}}"
    if e.usd_per_hour is None:
        return f"{label} unknown (no catalog price for these accelerators here)"
    if e.train_cost_usd is None:
        standing = (f" + standing ${e.standing_usd_per_hour:,.2f}/h" if e.standing_usd_per_hour is not None
                    else " (standing cost not counted: no cluster planned)")
        return f"{label} accelerators ${e.usd_per_hour:,.2f}/h{standing}"
    over = f"over {e.train_days:,.1f} days"
    if e.standing_cost_usd is None:
        return (f"{label} ${e.train_cost_usd:,.0f} to train: accelerators ${e.usd_per_hour:,.2f}/h {over} "
                "(standing cost not counted: no cluster planned)")
    return (f"{label} ${e.train_cost_usd:,.0f} to train = ${e.compute_cost_usd:,.0f} accelerators "
            f"(${e.usd_per_hour:,.2f}/h) + ${e.standing_cost_usd:,.0f} standing (${e.standing_usd_per_hour:,.2f}/h) "
            f"{over}")
