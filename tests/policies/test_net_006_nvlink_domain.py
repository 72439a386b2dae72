"""AIC-NET-006 model-parallel-in-nvlink-domain, over hand-written stacks with a described workload
(issue 28 item 5): a model-parallel group that leaves its NVLink domain is warned, naming the
group, the domain and what to change."""
from __future__ import annotations

from aicluster.perf import LayoutHint, ModelShape, Moe, TrainingShape
from tests.support import handwritten as hw
from tests.support import workloads as wl

RULE = "AIC-NET-006"
# Mixtral 8x22B (mistral.ai "Cheaper, Better, Faster, Stronger", 2024-04-17, and its released
# config.json: 56 layers, hidden 6144, 48 heads, 8 KV heads, FFN 16384, 8 experts, top 2, vocab
# 32768), trained at 4K tokens.
MIXTRAL_8X22B = ModelShape(layers=56, hidden=6144, heads=48, kv_heads=8, ffn_hidden=16384, vocab=32768,
                           seq_len=4096, moe=Moe(experts=8, top_k=2, expert_ffn_hidden=16384))
BATCH = TrainingShape(global_batch_seqs=512)


def test_a_layout_inside_the_node_passes():
    assert hw.check(RULE, lambda: wl.cluster(nodes=16, lt_tags=wl.tags(wl.LLAMA3_70B))).status == "pass"


def test_tp_times_ep_beyond_an_8_gpu_node_warns_with_group_domain_and_fix():
    """tp 4 x ep 8 = 32 GPUs on p5 (8-GPU HGX domains): the expert all-to-all crosses EFA. Before
    the rule, nothing said so."""
    tags = wl.tags(MIXTRAL_8X22B, BATCH, LayoutHint(tp=4, ep=8))
    verdict = hw.check(RULE, lambda: wl.cluster(nodes=16, lt_tags=tags))
    assert verdict.status == "warn"            # advisory by default
    text = hw.messages(verdict)
    assert "16 x p5.48xlarge (128 H100)" in text
    assert "model-parallel group tp 4 x cp 1 x ep 8 = 32 GPUs is larger than one 8-GPU NVLink domain (one node)" in text
    assert "expert all-to-all and tensor-parallel traffic runs over the NICs" in text
    assert "keep tp x cp x ep a divisor of 8" in text and "lower ep or tp" in text
    assert "larger NVLink domain (GB200/GB300 NVL72: 72 GPUs)" in text


def test_model_params_b_alone_is_not_applicable():
    verdict = hw.check(RULE, lambda: hw.efa_cluster(nodes=16, model_b=70))
    assert verdict.status == "n/a" and "model_params_b only" in verdict.not_applicable
