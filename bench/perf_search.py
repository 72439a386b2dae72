"""How long `aicluster estimate` takes to search every layout, from one node to 16,384 GPUs.

    .venv/bin/python bench/perf_search.py          # prints a table, writes bench/results/perf_search.json

Each size is timed side by side in one run (best of 5), so the ratios between sizes are what to
compare across machines; the issue's bar is the 16,384-GPU search under 2 s.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "components"))

from aicluster.perf import ModelShape, Moe, TrainingShape, estimate, what_if  # noqa: E402
from aicluster.perf.estimate import clear_search_cache  # noqa: E402

LLAMA3_405B = ModelShape(layers=126, hidden=16384, heads=128, kv_heads=8, ffn_hidden=53248, vocab=128256,
                         seq_len=8192)
# DeepSeek-V3-like MoE (arXiv:2412.19437; approximations in examples/workloads/deepseek-v3-nvl72-compare.yaml)
# on GB200 NVL72: two placements per search (all 72 GPUs of a domain, 64 of them) and EP up to 256.
DSV3 = ModelShape(layers=61, hidden=7168, heads=128, kv_heads=8, ffn_hidden=18432, vocab=129280, seq_len=4096,
                  moe=Moe(experts=256, top_k=8, expert_ffn_hidden=2048, shared_experts=1), head_size=128)
# (model, accelerator alias, nodes, global batch sequences)
CASES = [(LLAMA3_405B, "h100", 1, 64), (LLAMA3_405B, "h100", 16, 256), (LLAMA3_405B, "h100", 128, 1024),
         (LLAMA3_405B, "h100", 512, 2048), (LLAMA3_405B, "h100", 2048, 2048),
         (DSV3, "gb200", 18, 256), (DSV3, "gb200", 144, 2048), (DSV3, "gb200", 4608, 2048)]


def main() -> int:
    rows = []
    for model, accelerator, nodes, batch in CASES:
        times = []
        hw = what_if(accelerator, nodes)
        for _ in range(5):
            clear_search_cache()        # time the search, not the memo of the previous round
            start = time.perf_counter()
            try:
                est = estimate(model, TrainingShape(global_batch_seqs=batch), hw)
                searched, best = est.layouts_searched, est.best.layout.as_dict()
            except Exception as exc:   # a single node cannot hold 405B: the search still ran in full
                searched, best = None, str(exc).splitlines()[-1].strip()
            times.append(time.perf_counter() - start)
        rows.append({"model": "llama3-405b" if model is LLAMA3_405B else "deepseek-v3-like", "accelerator": accelerator,
                     "gpus": hw.count, "global_batch": batch, "layouts": searched, "best_s": min(times),
                     "best_layout": best})
    base = rows[0]["best_s"]
    print(f"{'model':<17} {'acc':<6} {'GPUs':>6} {'layouts':>8} {'seconds':>8} {'x first':>8}  best layout")
    for r in rows:
        print(f"{r['model']:<17} {r['accelerator']:<6} {r['gpus']:>6} {r['layouts'] or '-':>8} {r['best_s']:>8.3f} "
              f"{r['best_s'] / base:>8.1f}  {r['best_layout']}")
    out = ROOT / "bench" / "results" / "perf_search.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
