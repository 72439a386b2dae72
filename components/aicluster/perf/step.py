"""Time per training step on the critical path (docs/training-model.md section 3).

Per accelerator: compute (weight GEMMs at an efficiency that grows with GEMM width h/t, attention at
its own efficiency, memory-bound elementwise work at HBM bandwidth), then what communication the
framework cannot hide: tensor-parallel collectives (a calibrated exposed share), the pipeline
bubble, pipeline sends, data-parallel gradient and parameter traffic beyond what overlaps with
compute, context- and expert-parallel exchanges, and the optimizer step.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import NamedTuple

from aicluster.perf.flops import attention_flops_per_token, matmul_flops_per_token, recompute_flops_per_token
from aicluster.perf.memory import micro_batches, stage_layers, stage_params
from aicluster.perf.result import Breakdown
from aicluster.perf.shapes import MLP_MATRICES, Hardware, Layout, ModelShape, TrainingShape

# Share of link bandwidth a ring collective reaches: NVLink 0.65 (Calculon's A100/H100 system files,
# docs/training-model.md section 3.2); NICs 0.8 (nccl-tests bus bandwidth over EFA/InfiniBand is
# 75-90 % of line rate; a design choice inside that range).
SCALE_UP_EFFICIENCY = 0.65
SCALE_OUT_EFFICIENCY = 0.8
# Ring all-gather and reduce-scatter across nodes reach less: nccl-tests all_gather_perf on 32 H100
# nodes of 8 x 400 Gb/s InfiniBand measured ~200 GB/s bus bandwidth at 2 GB against ~340 GB/s for
# all_reduce_perf on the same nodes (NVIDIA/nccl issue #1218, 2024-03): half the nodes' line rate.
# Applied to ZeRO-3's per-layer collectives; ZeRO 1/2 move theirs once per step behind the whole
# step, where the rate does not decide what is exposed.
SCALE_OUT_GATHER_EFFICIENCY = 0.5
# XLA schedules data-parallel collectives asynchronously against the whole step; 0.8 is the prior
# the calibration never moved (no TPU record is DP-bound), the TPU's own constant so that the GPU
# model's per-layer overlap does not stand for XLA's.
TPU_DP_OVERLAP = 0.8
# Optimizer step: read and write fp32 master weights, both Adam moments and the gradient (std).
OPTIMIZER_BYTES_PER_PARAM = 32


@dataclass(frozen=True)
class Calibration:
    """The model's free parameters, fitted on published measurements (perf/calibration.py)."""
    gemm_ceiling: float        # best fraction of dense BF16 peak a weight GEMM reaches on a GPU
    tpu_ceiling: float         # the same on a TPU (XLA fuses the elementwise work)
    gemm_width: float          # w0 in efficiency = ceiling * w / (w + w0), w = h / tp
    attention_efficiency: float  # attention's efficiency relative to the GEMM ceiling
    fp8_gain: float            # how much faster an FP8 GEMM runs than a BF16 one
    elementwise_bytes: float   # HBM bytes per token, layer and hidden unit of non-matmul work
    tp_exposed: float          # share of tensor-parallel communication left on the critical path
    dp_overlap: float          # share of the compute beside it that data-parallel traffic hides behind (a
                               # step's for ZeRO 0-2, a layer's for ZeRO-3's per-layer gathers)


class Step(NamedTuple):
    """One training step's time, and the layout and batch it was timed for. A tuple: the layout
    search and the calibration's fits make hundreds of thousands (a frozen dataclass costs 4x more
    to build)."""
    breakdown: Breakdown
    intra_node_s: float        # exposed time on NVLink / ICI
    inter_node_s: float        # exposed time on NICs / DCN
    global_batch: int          # the batch actually run (rounded up to whole micro-batches)
    hfu_flops_per_token: float


def _ring_s(bytes_: float, ranks: int, gbs: float) -> float:
    """Ring all-reduce of `bytes_` over `ranks` at `gbs` GB/s bus bandwidth (nccl-tests convention)."""
    return 0.0 if ranks <= 1 or gbs <= 0 else 2 * (ranks - 1) / ranks * bytes_ / (gbs * 1e9)


def _nic_gbs_per_accelerator(hw: Hardware) -> float:
    return hw.scale_out_gbps_per_node / 8 / hw.per_node * SCALE_OUT_EFFICIENCY


def _group_gbs(hw: Hardware, stride: int, size: int) -> tuple[float, bool]:
    """Bus bandwidth of a group of `size` ranks `stride` apart (Megatron orders ranks tp, cp, dp, pp)
    and whether it leaves the NVLink / ICI domain. Inside one domain, whether that is one HGX node
    or an NVL72 rack of 18 nodes, the group runs at NVLink speed. A group that leaves its domain
    waits on the NICs; the members it has inside one domain reach each other over NVLink and drive
    their own NICs together (hierarchical collectives), so the group gets that many NICs (on an
    HGX node: the members per node)."""
    span = stride * size
    if hw.fits_domain(span):
        return (hw.scale_up_gbs or 0.0) * SCALE_UP_EFFICIENCY, False
    members_per_domain = max(1, math.gcd(span, hw.scale_up_size) // stride)
    return _nic_gbs_per_accelerator(hw) * members_per_domain, True


def ceiling_for(hw: Hardware, cal: Calibration) -> float:
    """One GEMM ceiling for every GPU generation: what separates an H100 from an A100 beyond peak
    FLOPs is HBM bandwidth per FLOP, which the elementwise term carries. A separate Hopper ceiling
    fitted better in sample and worse out of sample (docs/training-model.md, calibration)."""
    return cal.tpu_ceiling if hw.kind == "tpu" else cal.gemm_ceiling


class _Exposed:
    """Exposed communication time, by the network it waits on."""

    def __init__(self) -> None:
        self.intra = self.inter = 0.0

    def add(self, seconds: float, leaves_domain: bool) -> float:
        if leaves_domain:
            self.inter += seconds
        else:
            self.intra += seconds
        return seconds


def _compute_s(m: ModelShape, tr: TrainingShape, hw: Hardware, lay: Layout, cal: Calibration,
               tokens: float, flops: _Flops, layers: int) -> tuple[float, float]:
    """(compute, attention) seconds per step of one accelerator: weight GEMMs, attention,
    recompute and memory-bound elementwise work; the fullest pipeline stage (`layers`) sets the pace."""
    n = lay.tp * lay.pp * lay.dp * lay.cp
    peak = hw.bf16_tflops * 1e12
    gemm_rc, attn_rc = flops.recompute
    width = m.hidden / lay.tp
    ceiling = ceiling_for(hw, cal)
    gemm_eff = ceiling * width / (width + cal.gemm_width)
    if tr.precision == "fp8" and hw.fp8_tflops:
        gemm_eff *= cal.fp8_gain
    # Routed experts: a GEMM is also narrow in its token dimension. Each accelerator's experts get
    # ep x b x (s / cp) x top_k / E token rows per micro-batch (DeepSeek-V3's 256 experts, top 8,
    # 4096 tokens: 128 rows at ep 1, 8192 at ep 64), at the same calibrated form rows / (rows + w0)
    # as the width. Not fitted: the calibration set has no MoE measurement (estimate warns so).
    routed = _routed_flops(m, lay.recompute)
    expert_eff = 1.0
    if routed:
        rows = lay.ep * lay.micro_batch * (m.seq_len / lay.cp) * m.moe.top_k / m.moe.experts
        expert_eff = rows / (rows + cal.gemm_width)
    gemm_s = tokens * (flops.matmul + gemm_rc - routed + routed / expert_eff) / n / (peak * gemm_eff)
    attn_s = tokens * (flops.attention + attn_rc) / n / (peak * ceiling * cal.attention_efficiency)
    elementwise = cal.elementwise_bytes * (4 / 3 if lay.recompute == "full" else 1)
    # XLA fuses elementwise work into the matmuls on TPUs; GPUs run it as separate HBM-bound kernels.
    unfused = hw.kind != "tpu" and hw.hbm_gbs
    elem_s = elementwise * tokens * m.layers * m.hidden / n / (hw.hbm_gbs * 1e9) if unfused else 0.0
    imbalance = layers * lay.pp / m.layers
    return (gemm_s + attn_s + elem_s) * imbalance, attn_s


def _tensor_parallel_s(m: ModelShape, hw: Hardware, lay: Layout, mb: int, cal: Calibration, net: _Exposed,
                       layers: int) -> float:
    """4 collectives per layer and micro-batch (2 forward, 2 backward; +2 with full recompute) of
    b s h 2 B, reduce-scatter + all-gather pairs under sequence parallelism; a calibrated share is
    exposed."""
    bw, leaves = _group_gbs(hw, 1, lay.tp)
    if not bw:
        return 0.0
    collectives = 6 if lay.recompute == "full" else 4
    volume = lay.micro_batch * m.seq_len / lay.cp * m.hidden * 2
    total = mb * layers * collectives * _ring_s(volume, lay.tp, bw)
    return net.add(cal.tp_exposed * total, leaves)


def _pipeline_sends_s(m: ModelShape, hw: Hardware, lay: Layout, mb: int, net: _Exposed) -> float:
    """Activations forward and gradients back per micro-batch and virtual stage, scattered over
    the TP ranks."""
    if lay.pp == 1:
        return 0.0
    bw, leaves = _group_gbs(hw, lay.tp * lay.cp * lay.dp, lay.pp)
    volume = lay.micro_batch * m.seq_len / lay.cp * m.hidden * 2 / lay.tp
    return net.add(2 * mb * lay.virtual_stages * volume / (bw * 1e9), leaves) if bw else 0.0


# NCCL's own cost model for a ring all-gather or reduce-scatter (NVIDIA/nccl src/graph/tuning.cc,
# ncclTopoTuneModel, ring algorithm, Simple protocol, the one large messages use): a base latency
# plus one hop latency per ring step, n - 1 steps of which nodes - 1 cross the network. The alpha
# term grows with the ranks: 1,024 ranks on 128 nodes wait ~4.3 ms per collective whatever its size,
# which is why per-layer ZeRO-3 gathers stop hiding at scale.
RING_BASE_US = 8.4
RING_HOP_US_NVLINK = 3.4
RING_HOP_US_NET = 9.6


def _ring_latency_s(ranks: int, nodes: int) -> float:
    """Latency term of one ring all-gather or reduce-scatter over `ranks` ranks on `nodes` nodes."""
    if ranks <= 1:
        return 0.0
    inter = min(ranks - 1, max(0, nodes - 1))
    return (RING_BASE_US + (ranks - 1 - inter) * RING_HOP_US_NVLINK + inter * RING_HOP_US_NET) * 1e-6


def _half_ring_s(bytes_: float, ranks: int, gbs: float, nodes: int) -> float:
    """One ring all-gather or reduce-scatter of a `bytes_` buffer (each rank ends with or holds a
    1/ranks shard): (n-1)/n of it crosses each link, plus the latency term."""
    if ranks <= 1 or gbs <= 0:
        return 0.0
    return (ranks - 1) / ranks * bytes_ / (gbs * 1e9) + _ring_latency_s(ranks, nodes)


def _group_nodes(hw: Hardware, stride: int, size: int) -> int:
    """NVLink / ICI domains a group of `size` ranks `stride` apart spans (ring steps on the network)."""
    if hw.fits_domain(stride * size):
        return 1
    return max(1, size // max(1, math.gcd(stride * size, hw.scale_up_size) // stride))


def _data_parallel_s(hw: Hardware, lay: Layout, mb: int, cal: Calibration, compute: float,
                     params: tuple[float, float], net: _Exposed, layers: int) -> float:
    """Data-parallel traffic over dp x cp ranks that compute does not hide. `params`:
    memory.stage_params of the layout; `compute`: the step's compute on the fullest stage.

    - ZeRO 0-2 and Megatron's distributed optimizer: gradients reduce(-scatter) once per step and
      parameters all-gather once (the volume of an all-reduce), in large buckets behind the step's
      compute.
    - ZeRO-3 / FSDP without a pipeline: every micro-batch gathers each layer's weights in forward
      and again in backward and reduce-scatters its gradients. FSDP prefetches the next layer's
      gather behind the current layer's compute, so per layer only a gather (forward: a third of
      the layer's compute beside it, a quarter with full recompute) or gather + reduce-scatter
      (backward: the rest) longer than that compute is exposed, plus the first gather of each pass
      and the last reduce-scatter, which nothing hides. Across nodes these run at the all-gather's
      share of the NICs (SCALE_OUT_GATHER_EFFICIENCY).
    - ZeRO-3 with a pipeline (torchtitan FSDP + PP): weights are not resharded after forward and
      gradients reduce-scatter once per step, at the last micro-batch: a gather per micro-batch
      and layer in forward, one reduce-scatter per layer in the last backward.
    On TPUs, FSDP stays inside a slice (ICI) and only gradients cross the data-center network, once
    per step (MaxText's dcn_data_parallelism); XLA schedules it against the whole step.
    A share (dp_overlap, held at its prior: calibration.FIXED) of the compute a transfer runs
    beside is what hides it."""
    dense, experts = params
    ranks = lay.dp * lay.cp
    grad_bytes = 2 * (dense + experts / max(1, lay.ep))   # experts reduce over fewer ranks; same order
    if hw.kind == "tpu":
        return _tpu_data_parallel_s(hw, lay, mb, cal, compute, grad_bytes, net)
    if ranks <= 1:
        return 0.0
    bw, leaves = _group_gbs(hw, lay.tp, ranks)
    nodes = _group_nodes(hw, lay.tp, ranks) if leaves else 1
    if lay.zero_stage < 3:
        traffic = 2 * _half_ring_s(grad_bytes, ranks, bw, nodes)
        return net.add(max(0.0, traffic - cal.dp_overlap * compute), leaves)
    if leaves:
        bw *= SCALE_OUT_GATHER_EFFICIENCY / SCALE_OUT_EFFICIENCY
    gather = _half_ring_s(grad_bytes / layers, ranks, bw, nodes)   # one layer's weights (or gradients)
    # The compute beside one layer's transfer in one micro-batch, forward and backward.
    layer_s = cal.dp_overlap * compute / (mb * layers)
    forward = 0.25 if lay.recompute == "full" else 1 / 3    # backward: two matmuls per forward one (+ a rerun)
    hide_f, hide_b = forward * layer_s, (1 - forward) * layer_s
    if lay.pp > 1:
        exposed = mb * (gather + (layers - 1) * max(0.0, gather - hide_f)) \
            + gather + (layers - 1) * max(0.0, gather - hide_b)
    else:
        exposed = mb * (3 * gather + (layers - 1) * (max(0.0, gather - hide_f) + max(0.0, 2 * gather - hide_b)))
    return net.add(exposed, leaves)


def _tpu_data_parallel_s(hw: Hardware, lay: Layout, mb: int, cal: Calibration, compute: float,
                         grad_bytes: float, net: _Exposed) -> float:
    ranks = lay.dp * lay.cp
    passes = mb * 1.5 if lay.zero_stage == 3 else 1

    def exposed(seconds: float) -> float:
        return max(0.0, seconds - TPU_DP_OVERLAP * compute)

    in_domain = max(1, min(ranks, hw.scale_up_size // lay.tp))
    if ranks > in_domain:
        ici = (hw.scale_up_gbs or 0.0) * SCALE_UP_EFFICIENCY
        inner = net.add(exposed(passes * _ring_s(grad_bytes, in_domain, ici)), False)
        outer = _ring_s(grad_bytes / in_domain, ranks // in_domain, _nic_gbs_per_accelerator(hw))
        return inner + net.add(exposed(outer), True)
    bw, leaves = _group_gbs(hw, lay.tp, ranks)
    return net.add(exposed(passes * _ring_s(grad_bytes, ranks, bw)), leaves)


def _context_and_expert_s(m: ModelShape, hw: Hardware, lay: Layout, mb: int, attn_s: float, net: _Exposed,
                          layers: int) -> float:
    """Context parallel: K and V blocks go round the ring (forward, and twice backward), hidden
    behind attention when the local sequence is long. Expert parallel: two all-to-alls forward and
    two backward per MoE layer."""
    seconds = 0.0
    b, c, e = lay.micro_batch, lay.cp, lay.ep
    if c > 1:
        bw, leaves = _group_gbs(hw, lay.tp, c)
        kv = 2 * b * (m.seq_len / c) * m.kv_heads * m.head_dim * 2 / lay.tp
        ring = mb * layers * 3 * (c - 1) * kv / (bw * 1e9) if bw else 0.0
        seconds += net.add(max(0.0, ring - attn_s), leaves)
    if m.moe is not None and e > 1:
        seconds += net.add(*_all_to_all_s(hw, lay.tp * c, e, b * (m.seq_len / c) * m.moe.top_k * m.hidden * 2 / lay.tp,
                                          mb * layers * 4))
    return seconds


def _all_to_all_s(hw: Hardware, stride: int, ranks: int, volume: float, times: int) -> tuple[float, bool]:
    """`times` all-to-alls in which every rank sends `volume` bytes spread evenly over `ranks` ranks
    `stride` apart, and whether they leave the NVLink domain. Nothing is reduced on the way, so a
    group that leaves its domain cannot pool NICs as a ring does: each rank pushes the share bound
    outside its domain through its own NIC while the share inside goes over NVLink at the same time."""
    nvl = (hw.scale_up_gbs or 0.0) * SCALE_UP_EFFICIENCY * 1e9
    if hw.fits_domain(stride * ranks):
        return (times * (ranks - 1) / ranks * volume / nvl if nvl else 0.0), False
    inside = max(1, math.gcd(stride * ranks, hw.scale_up_size) // stride)
    nic = _nic_gbs_per_accelerator(hw) * 1e9
    over_nic = (ranks - inside) / ranks * volume / nic if nic else 0.0
    over_nvl = (inside - 1) / ranks * volume / nvl if nvl else 0.0
    return times * max(over_nic, over_nvl), True


def _routed_flops(m: ModelShape, recompute: str) -> float:
    """Matmul FLOPs per token in routed experts (forward and backward; full recompute adds a forward)."""
    if m.moe is None:
        return 0.0
    per_token = 6.0 * m.layers * m.moe.top_k * MLP_MATRICES[m.mlp] * m.hidden * m.moe.expert_ffn_hidden
    return per_token * (4 / 3 if recompute == "full" else 1)


@dataclass(frozen=True)
class _Flops:
    """A model's FLOPs per token, and what its recompute mode adds (flops.py)."""
    matmul: float
    attention: float
    recompute: tuple[float, float]


@functools.lru_cache(maxsize=256)
def _flops(m: ModelShape, recompute: str) -> _Flops:
    # The layout search times thousands of layouts of one model: its FLOPs are counted once.
    return _Flops(matmul_flops_per_token(m), attention_flops_per_token(m), recompute_flops_per_token(m, recompute))


def step_time(m: ModelShape, tr: TrainingShape, hw: Hardware, lay: Layout, cal: Calibration) -> Step:
    mb = micro_batches(tr.global_batch_seqs, lay)
    batch = mb * lay.dp * lay.micro_batch          # the global batch actually run
    layers = stage_layers(m, lay)
    params = stage_params(m, lay)
    flops = _flops(m, lay.recompute)
    net = _Exposed()
    compute, attn_s = _compute_s(m, tr, hw, lay, cal, batch * m.seq_len, flops, layers)
    exposed_tp = _tensor_parallel_s(m, hw, lay, mb, cal, net, layers)
    bubble = (lay.pp - 1) / (lay.virtual_stages * mb) * (compute + exposed_tp)
    p2p = _pipeline_sends_s(m, hw, lay, mb, net)
    exposed_dp = _data_parallel_s(hw, lay, mb, cal, compute, params, net, layers)
    cp_ep = _context_and_expert_s(m, hw, lay, mb, attn_s, net, layers)
    dense, experts = params
    shards = lay.dp * lay.cp if lay.zero_stage >= 1 else 1
    optimizer = OPTIMIZER_BYTES_PER_PARAM * (dense + experts) / shards / (hw.hbm_gbs * 1e9) if hw.hbm_gbs else 0.0
    breakdown = Breakdown(compute=compute, exposed_tp=exposed_tp, bubble=bubble, exposed_dp=exposed_dp,
                          p2p=p2p, optimizer=optimizer, exposed_cp_ep=cp_ep)
    gemm_rc, attn_rc = flops.recompute
    hfu = flops.matmul + flops.attention + gemm_rc + attn_rc
    return Step(breakdown, net.intra, net.inter, batch, hfu)
