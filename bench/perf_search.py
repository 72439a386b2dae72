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

from aicluster.perf import ModelShape, TrainingShape, estimate, what_if  # noqa: E402

LLAMA3_405B = ModelShape(layers=126, hidden=16384, heads=128, kv_heads=8, ffn_hidden=53248, vocab=128256,
                         seq_len=8192)
CASES = [(1, 64), (16, 256), (128, 1024), (512, 2048), (2048, 2048)]   # (H100 nodes, global batch sequences)


def main() -> int:
    rows = []
    for nodes, batch in CASES:
        times = []
        for _ in range(5):
            start = time.perf_counter()
            try:
                est = estimate(LLAMA3_405B, TrainingShape(global_batch_seqs=batch), what_if("h100", nodes))
                searched, best = est.layouts_searched, est.best.layout.as_dict()
            except Exception as exc:   # a single node cannot hold 405B: the search still ran in full
                searched, best = None, str(exc).splitlines()[-1].strip()
            times.append(time.perf_counter() - start)
        rows.append({"gpus": nodes * 8, "global_batch": batch, "layouts": searched, "best_s": min(times),
                     "best_layout": best})
    base = rows[0]["best_s"]
    print(f"{'GPUs':>6} {'layouts':>8} {'seconds':>8} {'x 8-GPU':>8}  best layout")
    for r in rows:
        print(f"{r['gpus']:>6} {r['layouts'] or '-':>8} {r['best_s']:>8.3f} {r['best_s'] / base:>8.1f}  {r['best_layout']}")
    out = ROOT / "bench" / "results" / "perf_search.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
