"""One estimate: search the layouts, keep those that fit HBM, rank them by predicted throughput, and
add what the best one means for time and cost to train, checkpoints and the data loader."""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

from aicluster.errors import Problem, SpecError
from aicluster.perf import nvlink
from aicluster.perf.calibration import CALIBRATED_ACCELERATORS, CALIBRATION, MEASURED_ERROR
from aicluster.perf.flops import flops_per_token, parameter_count
from aicluster.perf.goodput import goodput
from aicluster.perf.hardware import placements
from aicluster.perf.memory import memory
from aicluster.perf.result import Calibrated, Candidate, Checkpoint, DataLoading, Estimate, Memory
from aicluster.perf.search import layouts, space
from aicluster.perf.shapes import Hardware, Layout, LayoutHint, ModelShape, Storage, TrainingShape
from aicluster.perf.step import Calibration, Step, step_time

# Resumable checkpoint: bf16 weights + fp32 master weights and Adam moments, 14 B/param (the upper
# end of 12-14 B/param derived from the ZeRO breakdown; BLOOM-176B's 2.3 TB full checkpoint is
# ~13 B/param).
CHECKPOINT_BYTES_PER_PARAM = 14
# Memory binds when a layout that does not fit would be this much faster than the best that does.
MEMORY_BOUND_GAIN = 1.10
# The most data-parallel ranks of a published ZeRO-3 run on GPUs in the calibration set (MosaicML's
# and torchtitan's FSDP tables: 64 GPUs across nodes): beyond it the gathers are modelled, not
# measured. (MaxText's TPU runs shard over up to 256 chips inside a slice.)
ZERO3_WARN_DP = 64
# The best MFU (model FLOPs over dense BF16 peak) of any published run per accelerator and precision
# (tests/data/training-throughput*.json; tests/perf/test_calibrated.py recomputes it): above it the
# estimate beats every run that was measured on that accelerator. H100 in BF16 is much lower than
# A100 in BF16: the faster tensor cores leave more of the step to memory and communication.
BEST_PUBLISHED_MFU = {("A100", "bf16"): 0.64, ("H100", "bf16"): 0.46, ("H100", "fp8"): 0.85,
                      ("TPU v5p", "bf16"): 0.71}


def _candidate(m: ModelShape, tr: TrainingShape, hw: Hardware, lay: Layout, step: Step, mem) -> Candidate:
    b = step.breakdown
    per_gpu = step.global_batch * m.seq_len / b.total / hw.count
    tflops = per_gpu * flops_per_token(m) / 1e12
    shares = {"compute": b.compute + b.optimizer, "pipeline": b.bubble,
              "intra-node": step.intra_node_s, "inter-node": step.inter_node_s}
    return Candidate(layout=lay, step_time_s=b.total, tokens_per_s_per_gpu=per_gpu, model_tflops_per_gpu=tflops,
                     mfu=tflops / hw.bf16_tflops, hfu=per_gpu * step.hfu_flops_per_token / 1e12 / hw.bf16_tflops,
                     bound=max(shares, key=shares.get), memory=mem, breakdown=b)


@dataclass(frozen=True)
class _Evaluated:
    """One searched layout with what the model says of it on the hardware, whatever its HBM size."""
    layout: Layout
    step: Step
    memory: Memory              # capacity 0: the caller's HBM decides what fits
    memory_gib: float           # memory.total
    tokens_per_s_per_gpu: float


@dataclass(frozen=True)
class _Searched:
    """One layout search: every layout evaluated, fastest first."""
    ranked: tuple[_Evaluated, ...]      # fastest first (ties in search order)
    fastest_tokens_per_s: float         # the whole job, fitting or not
    count: int


@functools.lru_cache(maxsize=64)
def _search(model: ModelShape, training: TrainingShape, hardware: Hardware, hint: LayoutHint,
            calibration: Calibration) -> _Searched:
    """Every layout of the space with its memory and step time: the layout search, run once per
    model, training, hardware (its HBM size set aside: `hardware.hbm_gib` is 0 here) and hint in a
    process. `aicluster plan` asks for the same estimate several times (the plan's estimate, the
    monitoring thresholds, the policy pack's rules and its headroom check on less HBM); frozen
    inputs make the answer a pure function of them."""
    evaluated: list[_Evaluated] = []
    fastest = 0.0
    for lay in layouts(model, hardware, hint, training.global_batch_seqs):
        mem = memory(model, lay, hardware, training.global_batch_seqs)
        step = step_time(model, training, hardware, lay, calibration)
        rate = step.global_batch * model.seq_len / step.breakdown.total
        fastest = max(fastest, rate)
        evaluated.append(_Evaluated(lay, step, mem, mem.total, rate / hardware.count))
    evaluated.sort(key=lambda e: -e.tokens_per_s_per_gpu)
    return _Searched(tuple(evaluated), fastest, len(evaluated))


def clear_search_cache() -> None:
    """Forget every remembered layout search (tests that count searches start from none)."""
    _search.cache_clear()


def estimate(model: ModelShape, training: TrainingShape, hardware: Hardware, *, hint: LayoutHint = LayoutHint(),
             storage: Storage | None = None, top: int = 3, at: str = "parallelism",
             calibration: Calibration = CALIBRATION, standing_usd_per_hour: float | None = None) -> Estimate:
    """The best layouts of `model` on `hardware`; SpecError when none fits or the fixed part cannot work.
    `standing_usd_per_hour`: what the cluster pays beside its accelerators (filesystems, head node,
    NAT, ...; design/standing_cost.py), added to the cost to train; None: not known (a cluster on
    paper), the cost is the accelerators' alone and says so."""
    warnings: list[str] = []
    if hardware.bf16_tflops <= 0:
        raise SpecError([Problem("cluster", hardware.accelerator, "an accelerator with a sourced dense BF16 "
                                 "peak in the catalog (`aicluster catalog`)")], subject="workload")
    if training.precision == "fp8" and not hardware.fp8_tflops:
        warnings.append(f"{hardware.accelerator} has no FP8 tensor cores in the catalog: timed as BF16")
    # Where NVLink domains span nodes (NVL72), the job may fill each domain or leave nodes idle so
    # that power-of-two groups line up with it (hardware.placements): both are searched, the one
    # that trains faster on the same paid-for cluster wins.
    placed: list[Hardware] = []
    refusals: list[SpecError] = []
    for option in placements(hardware):
        try:
            space(model, option, hint, at)   # a fixed layout that cannot work: a SpecError naming `at`
            placed.append(option)
        except SpecError as exc:
            refusals.append(exc)
    if not placed:
        raise refusals[0]
    searches = [(hw, _search(model, training, dataclasses.replace(hw, hbm_gib=0.0), hint, calibration))
                for hw in placed]
    count = sum(s.count for _, s in searches)
    chosen = [(hw, s, [e for e in s.ranked if e.memory_gib <= hardware.hbm_gib]) for hw, s in searches]
    chosen = [c for c in chosen if c[2]]
    if not chosen:
        raise SpecError([Problem("cluster", hardware.name, f"enough HBM for the model: none of the {count} "
                                 f"layouts searched fits in {hardware.hbm_gib:.0f} GiB per accelerator (add nodes, "
                                 f"choose accelerators with more HBM, or relax the fixed keys under {at})")],
                        subject="workload")
    hardware, searched, fitting = max(chosen, key=lambda c: c[2][0].tokens_per_s_per_gpu * c[0].count)
    candidates = tuple(_candidate(model, training, hardware, e.layout, e.step,
                                  dataclasses.replace(e.memory, capacity=hardware.hbm_gib))
                       for e in fitting[:max(1, top)])
    best = candidates[0]
    tokens_per_s = best.tokens_per_s_per_gpu * hardware.count
    bound = best.bound
    if searched.fastest_tokens_per_s > MEMORY_BOUND_GAIN * tokens_per_s:
        bound = "memory"
        warnings.append(f"memory binds: a layout that does not fit HBM would run "
                        f"{searched.fastest_tokens_per_s / tokens_per_s:.2f}x faster (more HBM or more "
                        "accelerators help)")

    params = parameter_count(model)
    checkpoint = _checkpoint(params, storage)
    loading = DataLoading(tokens_per_s=tokens_per_s, mb_per_s=tokens_per_s * training.bytes_per_token / 1e6,
                          filesystem_mb_per_s=None if storage is None else storage.throughput_gbs * 1000)
    if (checkpoint.stall_pct is not None and checkpoint.stall_pct > checkpoint.budget_pct) or (
            loading.filesystem_mb_per_s is not None and loading.mb_per_s > loading.filesystem_mb_per_s):
        bound = "storage"
    usd_per_hour = None if hardware.usd_per_accelerator_hour is None else \
        hardware.usd_per_accelerator_hour * hardware.paid
    # A restart reads the checkpoint back at the rate it was written (Lustre's throughput is
    # symmetric per TiB; the clients' NICs bound both ways).
    good = goodput(hardware.count, checkpoint.interval_min, checkpoint.write_s, checkpoint.write_s, best.step_time_s)
    days = ideal = cost = None
    if training.tokens:
        ideal = training.tokens / tokens_per_s / 86400
        days = ideal / good.fraction if good.fraction > 0 else None
        if days is None:
            warnings.append(f"the job cannot make progress: it is interrupted every {good.mtbf_h:.2f} h on average, "
                            f"sooner than it restarts ({good.restart_s / 60:.0f} min) and re-does its checkpoint "
                            f"interval ({good.interval_min:g} min); checkpoint more often or train on fewer accelerators")
        elif usd_per_hour is not None:
            cost = (usd_per_hour + (standing_usd_per_hour or 0.0)) * days * 24
    warnings += _caveats(model, training, hardware, best)
    above = _above_published(hardware, training, best, days)
    if above:
        warnings.append(above)
    return Estimate(hardware=hardware.name, accelerators=hardware.count, best=best, candidates=candidates[:top],
                    layouts_searched=count, layouts_fitting=len(fitting), tokens_per_s=tokens_per_s,
                    train_days=days, train_days_ideal=ideal, train_cost_usd=cost, usd_per_hour=usd_per_hour,
                    standing_usd_per_hour=standing_usd_per_hour, goodput=good, checkpoint=checkpoint,
                    data_loading=loading, bound=bound, warnings=tuple(warnings),
                    nvlink_domain=_domain_note(model, training, hardware, best, calibration),
                    calibrated=_calibrated(model, training, hardware, best))


# Published runs the shipped CALIBRATION was fitted on (tests/data/training-throughput.json).
CALIBRATION_RECORDS = 174


def _calibrated(m: ModelShape, tr: TrainingShape, hw: Hardware, best: Candidate) -> Calibrated:
    """The measured error for this kind of accelerator, and what in this estimate no published run had."""
    err = MEASURED_ERROR["tpu" if hw.kind == "tpu" else "gpu"]
    lay = best.layout
    out = []
    if not any(hw.accelerator.startswith(c) for c in CALIBRATED_ACCELERATORS):
        out.append(f"{hw.accelerator} (no published run)")
    if m.moe is not None:
        out.append("a mixture of experts (no MoE run)")
    if nvlink.spans_nodes(hw, lay):
        out.append("an NVLink domain across nodes (no NVL72 run)")
    published = _published_ceiling(hw, tr)
    if published and best.mfu > published[0]:
        out.append(f"MFU {best.mfu:.0%}, above the best published {published[1]} run ({published[0]:.0%})")
    if hw.kind == "gpu" and lay.zero_stage == 3 and lay.dp * lay.cp > ZERO3_WARN_DP:
        out.append(f"ZeRO-3 over {lay.dp * lay.cp} ranks (published ZeRO-3 runs reach {ZERO3_WARN_DP})")
    return Calibrated(records=CALIBRATION_RECORDS, accelerators=CALIBRATED_ACCELERATORS,
                      median_error_groups_equal=err.median_abs_groups_equal,
                      median_error_rows_equal=err.median_abs_rows_equal, within_20pct=err.within_20pct,
                      extrapolates=tuple(out))


def _domain_note(m: ModelShape, tr: TrainingShape, hw: Hardware, best: Candidate, cal: Calibration) -> str | None:
    """When the best layout's model-parallel group spans nodes inside one multi-node NVLink domain
    (NVL72), say so and what it saved: the same layout timed as if the domain ended at the node."""
    lay = best.layout
    if not nvlink.spans_nodes(hw, lay):
        return None
    cut = step_time(m, tr, nvlink.node_only(hw), lay, cal).breakdown
    b = best.breakdown
    terms = [(TERMS[name](lay), getattr(b, name), getattr(cut, name)) for name in ("exposed_cp_ep", "exposed_tp")]
    moved = "; ".join(f"{label} {now:.2f} s per step on NVLink, {then:.2f} s if it crossed nodes over the NICs"
                      for label, now, then in terms if then > now)
    return (f"the NVLink domain made this layout possible: model-parallel group {nvlink.group_text(lay)} GPUs "
            f"spans {nvlink.group_ranks(lay) // hw.per_node} nodes inside {nvlink.domain_text(hw)}"
            + (f"; {moved} (step {b.total:.2f} s vs {cut.total:.2f} s)" if moved else ""))


# What each breakdown term is, in words (the layout decides whether exposed_cp_ep is experts or context).
TERMS = {
    "compute": lambda lay: "compute",
    "exposed_tp": lambda lay: "tensor-parallel communication",
    "bubble": lambda lay: "pipeline bubble",
    "exposed_dp": lambda lay: "data-parallel communication",
    "p2p": lambda lay: "pipeline sends",
    "optimizer": lambda lay: "optimizer step",
    "exposed_cp_ep": lambda lay: ("expert all-to-all" if lay.cp == 1 else "context-parallel ring" if lay.ep == 1
                                  else "context/expert exchange"),
}


def _checkpoint(params: float, storage: Storage | None) -> Checkpoint:
    size_gb = params * CHECKPOINT_BYTES_PER_PARAM / 1e9
    if storage is None:
        return Checkpoint(size_gb, None, None, 30.0, 5.0)
    write_s = size_gb / storage.write_gbs if storage.write_gbs > 0 else None
    stall = None if write_s is None else 100 * write_s / (storage.checkpoint_interval_min * 60)
    return Checkpoint(size_gb, write_s, stall, storage.checkpoint_interval_min, storage.max_checkpoint_stall_pct)


def _published_ceiling(hw: Hardware, tr: TrainingShape) -> tuple[float, str] | None:
    """(the best published MFU of this accelerator and precision, "H100 bf16"), or None when no run
    of that class was measured."""
    precision = tr.precision if hw.fp8_tflops else "bf16"
    return next(((mfu, f"{hw.accelerator} {precision}") for (acc, prec), mfu in BEST_PUBLISHED_MFU.items()
                 if hw.accelerator.startswith(acc) and prec == precision), None)


def _above_published(hw: Hardware, tr: TrainingShape, best: Candidate, days: float | None) -> str | None:
    """The warning for an MFU above every published run of its class, with the days it would take at
    the best published MFU: the figure a team can plan against."""
    found = _published_ceiling(hw, tr)
    if found is None or best.mfu <= found[0]:
        return None
    ceiling, what = found
    at = f"; at {ceiling:.0%} MFU training takes {days * best.mfu / ceiling:,.1f} days" if days else ""
    return (f"predicted MFU {best.mfu:.0%} is above the best published {what} run ({ceiling:.0%}): no measured run "
            f"of that class was this fast, treat it as optimistic{at}")


def _caveats(m: ModelShape, tr: TrainingShape, hw: Hardware, best: Candidate) -> list[str]:
    """Where the calibration says less than the number suggests."""
    out = []
    if not any(hw.accelerator.startswith(c) for c in CALIBRATED_ACCELERATORS):
        out.append(f"no published measurement of {hw.accelerator} in the calibration set: efficiencies are "
                   "borrowed from the nearest calibrated class (A100/H100 for GPUs, v5p for TPUs)")
    if hw.scale_up_gbs is None:
        out.append(f"{hw.accelerator}'s scale-up bandwidth is not in the catalog: tensor-parallel traffic is not timed")
    if m.moe is not None:
        out.append("the calibration set has no MoE measurement: expert all-to-all, routing and the expert GEMMs' "
                   "efficiency are modelled, not fitted")
    if hw.kind == "gpu" and best.layout.zero_stage == 3 and best.layout.dp * best.layout.cp > ZERO3_WARN_DP:
        out.append(f"ZeRO-3 over {best.layout.dp * best.layout.cp} data-parallel ranks: its per-layer gathers are "
                   "timed from bandwidth and NCCL's ring latency, but the published ZeRO-3 runs it was checked "
                   f"against reach {ZERO3_WARN_DP} ranks")
    if hw.paid > hw.count:
        nodes, of = hw.scale_up_size // hw.per_node, (hw.domain_gpus or hw.scale_up_size) // hw.per_node
        out.append(f"the job runs on {nodes} of each NVLink domain's {of} nodes (Slurm --segment={nodes}) so that its "
                   f"groups line up with the domain: {hw.paid - hw.count} of {hw.paid} GPUs stay idle (spares for a "
                   "failed node), and the cost counts them")
    crossing = nvlink.crossing(hw, best.layout)
    if crossing:
        out.append(crossing)
    b = best.breakdown
    if best.layout.tp > 1 and b.exposed_tp > 0.1 * b.total:
        out.append("tensor-parallel time is uncertain: published throughput cannot tell TP communication from "
                   "narrow-GEMM inefficiency (both grow with tp / hidden)")
    if best.layout.dp * best.layout.micro_batch * (-(-tr.global_batch_seqs // (best.layout.dp * best.layout.micro_batch))) \
            != tr.global_batch_seqs:
        out.append(f"the global batch of {tr.global_batch_seqs} sequences does not split into dp x micro-batch; "
                   "it is rounded up to whole micro-batches")
    return out
