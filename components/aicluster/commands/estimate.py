"""`aicluster estimate FILE [--format text|json] [--compare]`: the training model's answer for a
workload on a cluster (step time, memory, layout, bound, days and dollars to train), or a ranking
of several clusters for one workload."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from aicluster.errors import Problem, SpecError
from aicluster.perf import Estimate
from aicluster.perf.estimate import TERMS
from aicluster.perf.flops import parameter_count
from aicluster.commands.training_text import train_lines
from aicluster.commands.workload_file import Cluster, WorkloadRequest, read_workload
from aicluster.design.workload import estimate_for
from aicluster.design.workload_shapes import shapes


@dataclass(frozen=True)
class Ranked:
    """One cluster of a comparison: its estimate, or why there is none."""

    cluster: Cluster
    estimate: Estimate | None
    error: str | None

    @property
    def usd_per_token(self) -> float | None:
        """What a trained token costs: the accelerators and the standing cost per second over the
        tokens the job keeps per second at its goodput."""
        e = self.estimate
        if e is None or e.usd_per_hour is None or e.tokens_per_s <= 0 or e.goodput.fraction <= 0:
            return None
        return (e.usd_per_hour + (e.standing_usd_per_hour or 0.0)) / 3600 / (e.tokens_per_s * e.goodput.fraction)


def run(path: str, fmt: str = "text", compare: bool = False) -> str:
    """What the command prints; SpecError on bad input or a cluster the workload does not fit."""
    return answer(read_workload(path), fmt, compare)


def answer(request: WorkloadRequest, fmt: str = "text", compare: bool = False) -> str:
    """What the command prints for a request already read."""
    if compare:
        ranked = rank(request)
        return _json(compare_json(request, ranked)) if fmt == "json" else "\n".join(compare_text(request, ranked))
    if request.cluster is None:
        raise SpecError([Problem("cluster", None, "the cluster to estimate on (`clusters:` alone is for --compare)")],
                        request.source, "workload")
    est = _estimate_on(request, request.cluster)
    if fmt == "json":
        return _json({"estimate": est.to_dict(), "workload": workload_json(request),
                      "cluster": request.cluster.to_dict()})
    return "\n".join(text(request, request.cluster, est))


def _estimate_on(request: WorkloadRequest, cluster: Cluster) -> Estimate:
    try:
        return estimate_for(request.workload, cluster.hardware, cluster.storage, warnings=cluster.warnings,
                            prefix=request.prefix, standing_usd_per_hour=cluster.standing_usd_per_hour)
    except SpecError as exc:
        raise exc.with_source(request.source) from None


def rank(request: WorkloadRequest) -> list[Ranked]:
    """Every cluster, fastest first; those the workload does not fit last, with the reason."""
    out = []
    for cluster in request.all_clusters:
        try:
            out.append(Ranked(cluster, _estimate_on(request, cluster), None))
        except SpecError as exc:   # nothing fits on this one: a result of the comparison, not bad input
            out.append(Ranked(cluster, None, "; ".join(str(p) for p in exc.problems)))
    return sorted(out, key=lambda r: (r.estimate is None, -(r.estimate.tokens_per_s if r.estimate else 0)))


def _fastest(ranked: list[Ranked]) -> Ranked | None:
    return next((r for r in ranked if r.estimate is not None), None)


def _cheapest(ranked: list[Ranked]) -> Ranked | None:
    priced = [r for r in ranked if r.usd_per_token is not None]
    return min(priced, key=lambda r: r.usd_per_token) if priced else None


# --- JSON -------------------------------------------------------------------------------------


def _json(data: dict) -> str:
    return json.dumps(data, indent=2, sort_keys=True)


def workload_json(request: WorkloadRequest) -> dict:
    model, training, hint = shapes(request.workload)
    return {"source": request.source, "params_b": parameter_count(model) / 1e9,
            "model_params_b": request.workload.model_params_b,
            "model": dataclasses.asdict(model), "training": dataclasses.asdict(training),
            "parallelism": {k: v for k, v in dataclasses.asdict(hint).items() if v is not None},
            "checkpoint_interval_min": request.workload.checkpoint_interval_min,
            "max_checkpoint_stall_pct": request.workload.max_checkpoint_stall_pct}


def compare_json(request: WorkloadRequest, ranked: list[Ranked]) -> dict:
    by_cost = sorted((r for r in ranked if r.usd_per_token is not None), key=lambda r: r.usd_per_token)
    cost_rank = {id(r): i + 1 for i, r in enumerate(by_cost)}
    reasons = dict(why(ranked))
    entries = []
    for i, r in enumerate(ranked):
        entries.append({"cluster": r.cluster.to_dict(), "estimate": None if r.estimate is None else r.estimate.to_dict(),
                        "why": reasons.get(r.cluster.label),
                        "error": r.error, "rank_by_time": i + 1 if r.estimate else None,
                        "rank_by_cost": cost_rank.get(id(r)), "usd_per_million_tokens":
                        None if r.usd_per_token is None else r.usd_per_token * 1e6})
    fastest, cheapest = _fastest(ranked), _cheapest(ranked)
    return {"workload": workload_json(request), "comparison": entries,
            "fastest": fastest.cluster.label if fastest else None,
            "cheapest": cheapest.cluster.label if cheapest else None}


# --- text -------------------------------------------------------------------------------------


def _num(value: float | None, fmt: str, none: str = "-") -> str:
    return none if value is None else format(value, fmt)


def _tokens(n: float) -> str:
    for size, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return f"{n:g}"


def _layout(layout: dict) -> str:
    return "/".join(str(layout[k]) for k in ("tp", "pp", "dp", "cp", "ep"))


def describe_workload(request: WorkloadRequest) -> list[str]:
    model, training, _ = shapes(request.workload)
    kind = (f"MoE {model.moe.experts} experts, top-{model.moe.top_k}" if model.moe else "dense") + f", {model.mlp}"
    batch = training.global_batch_seqs * model.seq_len
    tokens = f", {_tokens(training.tokens)} tokens" if training.tokens else ""
    return [f"{'workload':<13} {parameter_count(model) / 1e9:.1f} B parameters: {model.layers} layers, hidden "
            f"{model.hidden}, {model.heads} heads / {model.kv_heads} KV, ffn {model.ffn_hidden}, vocab {model.vocab}, "
            f"seq {model.seq_len}; {kind}",
            f"{'training':<13} global batch {training.global_batch_seqs} x {model.seq_len} = {_tokens(batch)} tokens, "
            f"{training.precision}{tokens}"]


def describe_cluster(cluster: Cluster) -> list[str]:
    hw = cluster.hardware
    fabric = "ICI" if hw.kind == "tpu" else "NVLink"
    lines = [f"{'hardware':<13} {cluster.label}: {hw.name} = {hw.count} x {hw.accelerator} ({hw.hbm_gib:.0f} GiB "
             f"HBM, {hw.bf16_tflops:g} TFLOP/s bf16), {fabric} domain {hw.domain_gpus or hw.scale_up_size}, "
             f"{hw.scale_out_gbps_per_node:g} Gbps per node between domains"]
    fs = cluster.storage
    if fs is not None:
        clients = f", clients {fs.client_gbs:.1f} GB/s" if fs.client_gbs is not None else ""
        lines.append(f"{'filesystem':<13} {fs.name}: {fs.throughput_gbs:.2f} GB/s{clients}")
    return lines


def text(request: WorkloadRequest, cluster: Cluster, est: Estimate) -> list[str]:
    d = est.to_dict()
    lay, mem, bd = d["layout"], d["memory_per_gpu_gib"], d["breakdown_s"]
    unit = "GPU" if cluster.hardware.kind == "gpu" else "chip"
    lines = describe_workload(request) + describe_cluster(cluster) + [""]
    lines.append(f"{'best layout':<13} tp {lay['tp']}  pp {lay['pp']}  dp {lay['dp']}  cp {lay['cp']}  ep {lay['ep']}  "
                 f"zero {lay['zero_stage']}  recompute {lay['recompute']}  micro-batch {lay['micro_batch']}  "
                 f"virtual stages {lay['virtual_stages']}")
    lines.append(f"{'throughput':<13} {d['tokens_per_s_per_gpu']:,.0f} tokens/s per {unit}, "
                 f"{d['tokens_per_s']:,.0f} tokens/s in all")
    lines.append(f"{'compute':<13} {d['model_tflops_per_gpu']:.0f} model TFLOP/s per {unit}, MFU {d['mfu']:.1%} "
                 f"(HFU {d['hfu']:.1%})")
    lines.append(f"{'step time':<13} {d['step_time_s']:.2f} s, bound: {d['bound']}")
    lines.append(f"{'breakdown':<13} " + "  ".join(f"{k.replace('exposed_', '')} {v:.3f}" for k, v in bd.items()) + " s")
    lines.append(f"{'memory/' + unit:<13} weights {mem['weights']:.1f} + gradients {mem['gradients']:.1f} + optimizer "
                 f"{mem['optimizer']:.1f} + activations {mem['activations']:.1f} + buffers {mem['buffers']:.1f} = "
                 f"{mem['total']:.1f} of {mem['capacity']:.1f} GiB ({mem['headroom_pct']:.0f} % free)")
    lines += train_lines(est, 13, unit)
    ck = d["checkpoint"]
    if ck["write_s"] is not None:
        lines.append(f"{'checkpoint':<13} {ck['size_gb']:,.0f} GB written in {ck['write_s']:,.1f} s = "
                     f"{_num(ck['stall_pct'], '.2f')} % of {ck['interval_min']:g} min (budget {ck['budget_pct']:g} %)")
    else:
        lines.append(f"{'checkpoint':<13} {ck['size_gb']:,.0f} GB (no filesystem to time the write)")
    dl = d["data_loading"]
    vs = f" vs {dl['filesystem_mb_per_s']:,.0f} MB/s filesystem" if dl["filesystem_mb_per_s"] is not None else ""
    lines.append(f"{'data loading':<13} {dl['tokens_per_s']:,.0f} tokens/s = {dl['mb_per_s']:,.1f} MB/s{vs}")
    lines.append(f"{'searched':<13} {d['layouts_searched']:,} layouts, {d['layouts_fitting']:,} fit in HBM")
    if len(d["candidates"]) > 1:
        lines += ["", "next best layouts:", _candidate_header(unit)]
        lines += [_candidate_row(i + 2, c) for i, c in enumerate(d["candidates"][1:])]
    if d["nvlink_domain"]:
        lines.append(f"{'nvlink domain':<13} {d['nvlink_domain']}")
    if d["warnings"]:
        lines += ["", "warnings:"] + [f"  - {w}" for w in d["warnings"]]
    return lines


def _candidate_header(unit: str) -> str:
    return (f"  {'#':>2} {'tp/pp/dp/cp/ep':<16} {'zero':>4} {'recompute':<10} {'mb':>3} {'vs':>3} "
            f"{'tokens/s/' + unit:>14} {'MFU':>6} {'step s':>8} {'GiB':>6}  bound")


def _candidate_row(n: int, c: dict) -> str:
    lay = c["layout"]
    return (f"  {n:>2} {_layout(lay):<16} {lay['zero_stage']:>4} {lay['recompute']:<10} {lay['micro_batch']:>3} "
            f"{lay['virtual_stages']:>3} {c['tokens_per_s_per_gpu']:>14,.0f} {c['mfu']:>6.1%} {c['step_time_s']:>8.2f} "
            f"{c['memory_per_gpu_gib']:>6.1f}  {c['bound']}")


def compare_text(request: WorkloadRequest, ranked: list[Ranked]) -> list[str]:
    lines = describe_workload(request) + [""]
    width = max([len(r.cluster.label) for r in ranked] + [7])
    lines.append(f"{'#':>2}  {'cluster':<{width}}  {'accelerators':<18} {'tp/pp/dp/cp/ep':<15} {'tok/s/acc':>9} "
                 f"{'MFU':>6} {'bound':<10} {'days':>8} {'$ to train':>14} {'$/M tok':>8}")
    for i, r in enumerate(ranked):
        e, hw = r.estimate, r.cluster.hardware
        accel = f"{hw.count} x {hw.accelerator}"
        if e is None:
            lines.append(f"{'-':>2}  {r.cluster.label:<{width}}  {accel:<18} does not fit: {r.error}")
            continue
        lines.append(f"{i + 1:>2}  {r.cluster.label:<{width}}  {accel:<18} {_layout(e.best.layout.as_dict()):<15} "
                     f"{e.best.tokens_per_s_per_gpu:>9,.0f} {e.best.mfu:>6.1%} {e.bound:<10} "
                     f"{_num(e.train_days, ',.1f'):>8} {_num(e.train_cost_usd, ',.0f'):>14} "
                     f"{_num(None if r.usd_per_token is None else r.usd_per_token * 1e6, ',.2f'):>8}")
    fastest, cheapest = _fastest(ranked), _cheapest(ranked)
    lines += ["", f"fastest: {fastest.cluster.label if fastest else 'none fits'}; "
                  f"cheapest: {cheapest.cluster.label if cheapest else 'no priced cluster fits'}"]
    reasons = why(ranked)
    if reasons:
        lines += ["", "why (step time per term against the slowest, same global batch):"]
        lines += [f"  - {label}: {reason}" for label, reason in reasons]
    # Every cluster's own warnings: a ranking must not hide that one of its figures extrapolates.
    warned = [r for r in ranked if r.estimate is not None and r.estimate.warnings]
    if warned:
        lines += ["", "warnings, by cluster:"]
        for r in warned:
            lines.append(f"  {r.cluster.label}:")
            lines += [f"    - {w}" for w in r.estimate.warnings]
    return lines


def why(ranked: list[Ranked], terms: int = 3) -> list[tuple[str, str]]:
    """(cluster, what moved) for every fitting cluster but the slowest: the step time against the
    slowest's (the workload's global batch is the same everywhere, so step times compare), the
    terms that moved most and, where a multi-node NVLink domain made the layout possible, that."""
    fitting = [r for r in ranked if r.estimate is not None]
    if len(fitting) < 2:
        return []
    base = fitting[-1]
    b0, lay0 = base.estimate.best.breakdown, base.estimate.best.layout
    out = []
    for r in fitting[:-1]:
        best = r.estimate.best
        b = best.breakdown
        moved = sorted(TERMS, key=lambda name: -abs(getattr(b, name) - getattr(b0, name)))[:terms]
        parts = [f"{TERMS[name](best.layout if getattr(b, name) else lay0)} {getattr(b0, name):.2f} -> "
                 f"{getattr(b, name):.2f} s" for name in moved if abs(getattr(b, name) - getattr(b0, name)) >= 0.005]
        text = (f"step {b0.total:.2f} -> {b.total:.2f} s against {base.cluster.label} "
                f"(layout {_layout(lay0.as_dict())} -> {_layout(best.layout.as_dict())}): " + ", ".join(parts))
        if r.estimate.nvlink_domain:
            text += f"; {r.estimate.nvlink_domain}"
        out.append((r.cluster.label, text))
    return out
