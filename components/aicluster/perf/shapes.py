"""The training model's inputs: a model's architecture, its training set-up, a parallel layout and
the hardware it runs on. Plain frozen dataclasses, so the layout search (thousands of candidates)
stays cheap; `perf.from_spec` builds them from the spec's pydantic models.

Notation follows docs/training-model.md (after Narayanan et al. 2021 and Korthikanti et al. 2022):
L layers, h hidden, a heads, g KV heads, f FFN width, s sequence length, V vocabulary.
"""
from __future__ import annotations

from dataclasses import dataclass

# MLP matmuls per layer: SwiGLU has gate, up and down projections; GELU and ReLU^2 have up and down.
MLP_MATRICES = {"swiglu": 3, "gelu": 2, "relu2": 2}


@dataclass(frozen=True)
class Moe:
    """A mixture-of-experts model's expert counts."""
    experts: int
    top_k: int
    expert_ffn_hidden: int
    shared_experts: int = 0


@dataclass(frozen=True)
class ModelShape:
    """The shape of a model to train, as the training model counts it."""
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn_hidden: int
    vocab: int
    seq_len: int
    mlp: str = "swiglu"            # swiglu | gelu | relu2
    moe: Moe | None = None
    head_size: int | None = None   # None: hidden / heads (MaxText's wide models use 128 regardless)

    @property
    def head_dim(self) -> int:
        return self.head_size or self.hidden // self.heads


@dataclass(frozen=True)
class TrainingShape:
    """The batch, precision and data of a training run, as the training model counts it."""
    global_batch_seqs: int
    precision: str = "bf16"         # bf16 | fp8
    tokens: float | None = None     # tokens to train on; None: no time or cost to train
    bytes_per_token: float = 4.0    # what the data loader reads per token (int32 token ids)


@dataclass(frozen=True)
class Layout:
    """One parallel layout: every degree fixed. tp*pp*dp*cp GPUs; ep splits experts within dp*cp."""
    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1
    zero_stage: int = 1             # 0 DDP, 1 optimizer states, 2 + gradients, 3 + parameters (FSDP)
    recompute: str = "selective"    # none | selective | full
    micro_batch: int = 1
    virtual_stages: int = 1

    def as_dict(self) -> dict:
        return {"tp": self.tp, "pp": self.pp, "dp": self.dp, "cp": self.cp, "ep": self.ep,
                "zero_stage": self.zero_stage, "recompute": self.recompute,
                "micro_batch": self.micro_batch, "virtual_stages": self.virtual_stages}


@dataclass(frozen=True)
class LayoutHint:
    """What the user fixed of the layout (None: searched)."""
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    cp: int | None = None
    ep: int | None = None
    zero_stage: int | None = None
    recompute: str | None = None
    micro_batch: int | None = None
    virtual_stages: int | None = None


@dataclass(frozen=True)
class Hardware:
    """The accelerators a job runs on and the networks between them.

    GPUs: an NVLink domain is one node of an HGX type (scale_up_size = per_node = 8) or several
    nodes of a rack-scale type (GB200 NVL72: 18 nodes of 4 GPUs, scale_up_size 72); domains talk
    over EFA or GPU NICs (scale_out_gbps_per_node). TPUs: a slice is one ICI domain (scale_up_size =
    chips per slice); slices talk over the data-center network (DCN). scale_up_size counts the
    job's ranks in one domain: a job that leaves nodes of each domain idle (a Slurm segment of 16
    of an NVL72's 18 nodes) has 64 there, and `domain_gpus` keeps the physical 72."""
    name: str                           # e.g. "64 x p5.48xlarge", "v5p 8x8x8"
    accelerator: str                    # catalog model: H100, TPU v5p ...
    kind: str                           # gpu | trainium | tpu
    count: int                          # accelerators the job spans
    per_node: int                       # accelerators per node (TPU: per host)
    bf16_tflops: float                  # dense, per accelerator
    fp8_tflops: float | None
    hbm_gib: float                      # per accelerator
    hbm_gbs: float                      # per accelerator
    scale_up_size: int                  # accelerators in one NVLink / ICI domain
    scale_up_gbs: float | None          # per accelerator, one direction, GB/s; None: unknown
    scale_out_gbps_per_node: float      # wired inter-node bandwidth per node (TPU: DCN per host)
    usd_per_accelerator_hour: float | None = None
    source: str = ""
    domain_gpus: int | None = None      # GPUs of one physical NVLink domain; None: scale_up_size
    paid_count: int | None = None       # accelerators paid for (idle ones of each domain too); None: count
    price_basis: str = ""               # what usd_per_accelerator_hour is (region, capacity, source, date) or why None

    @property
    def nodes(self) -> int:
        return -(-self.count // self.per_node)

    @property
    def paid(self) -> int:
        return self.paid_count or self.count

    def fits_domain(self, ranks: int) -> bool:
        """Whether every group of `ranks` consecutive ranks lies inside one NVLink / ICI domain. Groups
        are aligned blocks (Megatron orders ranks tp, cp, dp, pp), so the block must also divide the
        job's ranks per domain: 16 consecutive ranks of a 72-GPU domain straddle two domains (ranks
        64-79), 16 of 64 never do."""
        return 0 < ranks <= self.scale_up_size and self.scale_up_size % ranks == 0


@dataclass(frozen=True)
class Storage:
    """The shared filesystem the job reads data from and writes checkpoints to."""
    name: str
    throughput_gbs: float               # the filesystem's aggregate throughput, GB/s
    client_gbs: float | None = None     # what the job's nodes can push to it together; None: no bound
    checkpoint_interval_min: float = 30.0
    max_checkpoint_stall_pct: float = 5.0

    @property
    def write_gbs(self) -> float:
        return self.throughput_gbs if self.client_gbs is None else min(self.throughput_gbs, self.client_gbs)
