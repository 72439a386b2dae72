"""Per-GPU throughput against GPU count at a fixed model and global batch: where adding GPUs stops
paying, for ZeRO-3 / FSDP and for TP + PP.

    .venv/bin/python bench/scaling.py           # prints both tables, writes bench/results/scaling.json

Llama 3 70B, 1,024 sequences of 8,192 tokens per step, H100 p5 nodes (8 GPUs on NVLink, 3,200 Gb/s
of EFA per node), 8 to 16,384 GPUs in powers of two. ZeRO-3: tp 1, pp 1, dp N, full recompute,
micro-batch 1. TP + PP: tp 8, ZeRO-1, selective recompute, micro-batch 1, and the pipeline depth
(1-16) and interleaving (1, 2, 4) that train fastest among those that fit in HBM. Throughput counts
the batch asked for: past dp = batch a data-parallel rank has no sequence of its own (the step pads),
so the extra GPUs idle. "Stops paying": total tokens/s grows by less than 10 % over the previous
doubling, or falls.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "components"))

from aicluster.perf import ModelShape, TrainingShape, what_if  # noqa: E402
from aicluster.perf.calibration import CALIBRATION  # noqa: E402
from aicluster.perf.flops import flops_per_token  # noqa: E402
from aicluster.perf.memory import memory  # noqa: E402
from aicluster.perf.shapes import Layout  # noqa: E402
from aicluster.perf.step import Calibration, step_time  # noqa: E402

LLAMA3_70B = ModelShape(layers=80, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672, vocab=128256, seq_len=8192)
BATCH = 1024
GPUS = tuple(2 ** k for k in range(3, 15))      # 8 ... 16,384
PAYS = 1.10                                    # a doubling must add 10 % of total throughput


def _timed(model: ModelShape, lay: Layout, gpus: int, batch: int, cal: Calibration) -> dict:
    hw = what_if("h100", gpus // 8)
    step = step_time(model, TrainingShape(global_batch_seqs=batch), hw, lay, cal)
    b = step.breakdown
    total = batch * model.seq_len / b.total          # the batch asked for, not the padded one
    per_gpu = total / gpus
    mem = memory(model, lay, hw, batch)
    return {"gpus": gpus, "layout": lay.as_dict(), "tokens_per_s_per_gpu": per_gpu, "tokens_per_s": total,
            "mfu": per_gpu * flops_per_token(model) / 1e12 / hw.bf16_tflops, "step_s": b.total,
            "compute_s": b.compute, "exposed_dp_s": b.exposed_dp, "bubble_s": b.bubble, "p2p_s": b.p2p,
            "exposed_tp_s": b.exposed_tp, "memory_gib": mem.total, "fits": mem.total <= hw.hbm_gib,
            "padded": step.global_batch > batch}


def zero3(gpus: int, model: ModelShape = LLAMA3_70B, batch: int = BATCH, cal: Calibration = CALIBRATION) -> dict:
    return _timed(model, Layout(tp=1, pp=1, dp=gpus, zero_stage=3, recompute="full", micro_batch=1), gpus, batch, cal)


def tp_pp(gpus: int, model: ModelShape = LLAMA3_70B, batch: int = BATCH, cal: Calibration = CALIBRATION) -> dict | None:
    """tp 8 and the fastest fitting pipeline (depth, interleaving) for `gpus`; None when none fits."""
    best = None
    for pp in (1, 2, 4, 8, 16):
        if gpus % (8 * pp):
            continue
        dp = gpus // (8 * pp)
        for v in (1, 2, 4) if pp > 1 else (1,):
            if model.layers % (pp * v):
                continue
            row = _timed(model, Layout(tp=8, pp=pp, dp=dp, zero_stage=1, recompute="selective", micro_batch=1,
                                       virtual_stages=v), gpus, batch, cal)
            if row["fits"] and (best is None or row["tokens_per_s"] > best["tokens_per_s"]):
                best = row
    return best


def stops_paying(rows: list[dict | None]) -> int | None:
    """The first GPU count whose doubling added less than 10 % of total throughput (or lost some)."""
    previous = None
    for row in rows:
        if row is None:
            continue
        if previous is not None and row["tokens_per_s"] < PAYS * previous["tokens_per_s"]:
            return row["gpus"]
        previous = row
    return None


def main() -> int:
    out = {"model": "Llama 3 70B", "global_batch_seqs": BATCH, "seq_len": LLAMA3_70B.seq_len, "hardware": "H100 p5.48xlarge"}
    for name, family in (("zero3", zero3), ("tp8_pp", tp_pp)):
        rows = [family(n) for n in GPUS]
        knee = stops_paying(rows)
        print(f"\n{name}: Llama 3 70B, {BATCH} x 8k sequences per step, H100 p5"
              + (f"; adding GPUs stops paying at {knee:,}" if knee else ""))
        print(f"{'GPUs':>6} {'layout':<16} {'tok/s/GPU':>9} {'tok/s':>10} {'MFU':>5} {'step s':>7} {'compute':>7} "
              f"{'exp. DP':>7} {'bubble':>7} {'GiB':>5}")
        for row in rows:
            if row is None:
                continue
            lay = row["layout"]
            shape = f"pp{lay['pp']} v{lay['virtual_stages']} dp{lay['dp']}" if name == "tp8_pp" else f"dp{lay['dp']}"
            mark = " <- stops paying" if row["gpus"] == knee else ""
            note = (" padded: dp > batch" if row["padded"] else "") + ("" if row["fits"] else " (over HBM)")
            print(f"{row['gpus']:>6} {shape:<16} {row['tokens_per_s_per_gpu']:>9.0f} {row['tokens_per_s']:>10,.0f} "
                  f"{row['mfu']:>5.0%} {row['step_s']:>7.2f} {row['compute_s']:>7.2f} {row['exposed_dp_s']:>7.2f} "
                  f"{row['bubble_s']:>7.2f} {row['memory_gib']:>5.0f}{mark}{note}")
        out[name] = {"rows": rows, "stops_paying_at": knee}
    target = ROOT / "bench" / "results" / "scaling.json"
    target.parent.mkdir(exist_ok=True)
    target.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
