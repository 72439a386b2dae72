"""Described workloads for the policy tests: published model shapes and the aicluster-model and
aicluster-training tags a hand-written stack puts on its launch template (aicluster.perf.tags)."""
from __future__ import annotations

from typing import Mapping

from aicluster.perf import LayoutHint, ModelShape, TrainingShape
from aicluster.perf.tags import workload_tags

from . import handwritten as hw

# Llama 3 (arXiv:2407.21783, table 3)
LLAMA3_8B = ModelShape(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=128256, seq_len=8192)
LLAMA3_70B = ModelShape(layers=80, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672, vocab=128256, seq_len=8192)
LLAMA3_405B = ModelShape(layers=126, hidden=16384, heads=128, kv_heads=8, ffn_hidden=53248, vocab=128256,
                         seq_len=8192)
BATCH_4M = TrainingShape(global_batch_seqs=512)                       # 512 x 8192 = 4M tokens a step
TO_15T = TrainingShape(global_batch_seqs=512, tokens=15e12)           # Llama 3's 15T tokens


def tags(model: ModelShape = LLAMA3_70B, training: TrainingShape = BATCH_4M, hint: LayoutHint = LayoutHint(),
         **extra: str) -> dict[str, str]:
    """The hand-written stacks' usual tags plus the described workload (and `extra` tags)."""
    return {**hw.TAGS, **workload_tags(model, training, hint), **extra}


def cluster(nodes: int = 16, lt_tags: Mapping[str, str] | None = None, *, cards: int | None = None,
            capacity: int = 24000, throughput: int = 500) -> None:
    """hw.efa_cluster with `cards` EFA devices wired per node (None: all 32 of a p5)."""
    _, subnet, sg = hw.network()
    pg = hw.placement_group()
    lt = hw.launch_template("hw-lt", subnet, sg, placement_group=pg, cards=cards,
                            tags=dict(tags() if lt_tags is None else lt_tags))
    hw.autoscaling_group("hw-asg", lt, subnet, max_size=nodes, placement=pg)
    hw.fsx("hw-fsx", subnet, sg, capacity=capacity, throughput=throughput)
