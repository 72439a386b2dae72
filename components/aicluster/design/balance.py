"""Balance model: compute, memory, fabric, storage, checkpoints and cost of a cluster, side by side.

Pure Python, no Pulumi. The core API (`assess`) takes simple shapes so that the `aicluster plan`
report (via `from_design`) and a CrossGuard policy pack (which builds the shapes from raw cloud
resources) run the same checks. Each figure names its public source beside it: a document and
section, a paper or a URL.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Sequence

from aicluster.catalog import InstanceType
from aicluster.catalog.object_store import DRIVERS, load_object_store
from aicluster.catalog.pricing import node_price, node_price_missing
# One checkpoint size for the balance report, the training model and the policy pack.
from aicluster.perf.estimate import CHECKPOINT_BYTES_PER_PARAM

# DGX SuperPOD RA "good" read: 15 GBps per 32-node unit of 256 GPUs = 15000 / 256 ~ 58.6 MB/s per
# GPU (NVIDIA DGX SuperPOD Reference Architecture RA-11333-001 V11, 2023-09-22, storage performance).
GOOD_READ_MBPS_PER_ACCELERATOR = 15000 / 256
# Mixed-precision Adam: fp16 params 2 + fp16 grads 2 + fp32 params, momentum, variance 12 B/param
# (ZeRO paper, arXiv:1910.02054 section 3.1).
TRAINING_STATE_BYTES_PER_PARAM = 16
# Share of aggregate accelerator memory kept free for activations and buffers. A design choice of
# aicluster, not a sourced figure.
DEFAULT_MEMORY_HEADROOM_PCT = 20


@dataclass(frozen=True)
class PoolShape:
    """A node pool, as the balance model sees it."""
    name: str
    instance: InstanceType
    nodes: int
    fabric_devices_wired: int   # AWS: EFA devices wired per node; GCP: GPU NICs wired per node
    region: str | None = None   # priced here (catalog.pricing); None: the reference price, and said so
    capacity: str = "on-demand"  # the spec's pools[].capacity.type


@dataclass(frozen=True)
class FilesystemShape:
    """A filesystem, as the balance model sees it."""
    name: str
    capacity_gib: float
    throughput_mbps_per_tib: float


@dataclass(frozen=True)
class ObjectStoreShape:
    """Datasets read from a bucket through an object-store CSI driver (Mountpoint for S3, GCS FUSE):
    every node reads at the driver's published per-client figure (catalog storage.yaml
    `object_store`; None: as fast as its storage network), never faster than its storage network
    (client_gbps). Read-only data: it counts toward the read floor, never as checkpoint storage."""
    driver: str
    read_gbps_per_client: float | None


@dataclass(frozen=True)
class WorkloadShape:
    """The workload, as the balance model sees it."""
    model_params_b: float
    checkpoint_interval_min: float
    max_checkpoint_stall_pct: float


@dataclass(frozen=True)
class PoolBalance:
    """The balance model's figures for one pool."""
    name: str
    instance_type: str
    accelerator_kind: str               # gpu | trainium | tpu (for wording only)
    nodes: int
    accelerators: int
    bf16_pflops: float | None           # None when the chip's dense BF16 TFLOPS is unknown
    hbm_gib: float
    fabric_gbps_per_accelerator: float  # of what is wired
    fabric_fraction_wired: float        # wired / hardware fabric bandwidth, 0..1
    usd_per_hour: float | None
    price_basis: str = ""               # what usd_per_hour is (quote basis, source, date), or why it is None


@dataclass(frozen=True)
class ClusterBalance:
    """The balance model's figures for the whole cluster."""
    pools: tuple[PoolBalance, ...]
    accelerators: int
    bf16_pflops: float | None
    hbm_gib: float
    fs_throughput_gbs: float            # aggregate, decimal GB/s
    fs_mbps_per_accelerator: float
    fs_floor_mbps_per_accelerator: float
    fs_meets_floor: bool | None
    training_state_gb: float | None
    memory_headroom_pct: float
    training_state_fits: bool | None
    checkpoint_gb: float | None
    checkpoint_write_s: float | None
    checkpoint_stall_pct: float | None
    checkpoint_within_budget: bool | None
    checkpoint_stall_budget_pct: float | None
    usd_per_hour: float | None
    findings: tuple[str, ...]
    object_store_gbs: float = 0.0        # datasets' aggregate read, decimal GB/s (in fs_mbps_per_accelerator)


def fabric_gbps(instance: InstanceType, wired: int) -> tuple[float, float]:
    """(wired Gbps per node, hardware fabric Gbps per node)."""
    if instance.cloud == "aws":
        # Each EFA device sits on its own network card (docs.aws.amazon.com/AWSEC2/latest/UserGuide/
        # efa-acc-inst-types.html), cards are symmetric (catalog).
        return wired * instance.card_gbps, instance.fabric_gbps
    # e.g. a2: no GPU NICs, no GPU-to-GPU fabric (cloud.google.com/compute/docs/accelerator-optimized-machines);
    # TPUs: ICI.
    if instance.gpu_nics <= 0:
        return 0.0, 0.0
    # GCP: gpu_network_gbps is shared evenly by the GPU NICs (cloud.google.com/compute/docs/gpus/gpu-network-bandwidth).
    return wired * instance.gpu_network_gbps / instance.gpu_nics, instance.gpu_network_gbps


def client_gbps(instance: InstanceType) -> float:
    """Bandwidth one node can push to a Lustre filesystem.

    AWS: without EFA-enabled FSx a client writes over one ENA interface on one card (Amazon FSx for
    Lustre User Guide, EFA-enabled file systems: ~100 Gbps per p5 client without EFA). GCP: storage
    goes over the host (gVNIC) NICs, i.e. the total minus the GPU NICs' share
    (cloud.google.com/compute/docs/gpus/gpu-network-bandwidth).
    """
    if instance.cloud == "aws":
        return instance.card_gbps
    return instance.network_gbps - instance.gpu_network_gbps


def object_store_mbps(pools: Sequence[PoolShape], store: ObjectStoreShape) -> float:
    """Aggregate MB/s every node of the pools reads from buckets: per node the driver's figure
    (GB/s) or, when it has none or the network is slower, the node's storage network (Gbps / 8)."""
    total = 0.0
    for p in pools:
        network = client_gbps(p.instance) / 8
        per_node = network if store.read_gbps_per_client is None else min(store.read_gbps_per_client, network)
        total += p.nodes * per_node * 1000
    return total


def _pool(p: PoolShape) -> PoolBalance:
    it, acc = p.instance, p.instance.accelerator
    count = p.nodes * it.accelerator_count
    wired, hardware = fabric_gbps(it, max(0, p.fabric_devices_wired))
    # The pool's own region and capacity type (a spot pool in eu-west-2 costs eu-west-2's spot figure);
    # no figure there is None with the reason, never another region's price.
    quote = node_price(it, p.region, p.capacity)
    return PoolBalance(
        name=p.name, instance_type=it.name, accelerator_kind=acc.kind, nodes=p.nodes, accelerators=count,
        # dense BF16 TFLOPS per chip (catalog, each with its datasheet); PFLOPS = chips x TFLOPS / 1000
        bf16_pflops=None if acc.bf16_tflops is None else count * acc.bf16_tflops / 1000,
        hbm_gib=count * acc.memory_gib,
        fabric_gbps_per_accelerator=wired / it.accelerator_count,
        fabric_fraction_wired=min(1.0, wired / hardware) if hardware > 0 else 0.0,
        usd_per_hour=None if quote is None else p.nodes * quote.usd_per_hour,
        price_basis=node_price_missing(it, p.region, p.capacity) if quote is None else
        f"{quote.basis}; {quote.source}, checked {quote.checked}",
    )


def assess(pools: Sequence[PoolShape], filesystems: Sequence[FilesystemShape],
           workload: WorkloadShape | None = None, *,
           floor_mbps_per_accelerator: float = GOOD_READ_MBPS_PER_ACCELERATOR,
           memory_headroom_pct: float = DEFAULT_MEMORY_HEADROOM_PCT,
           checkpoint_bytes_per_param: float = CHECKPOINT_BYTES_PER_PARAM,
           object_stores: Sequence[ObjectStoreShape] = ()) -> ClusterBalance:
    findings: list[str] = []
    pbs = tuple(_pool(p) for p in pools)
    unit = "GPU" if all(pb.accelerator_kind == "gpu" for pb in pbs) else "accelerator"
    accelerators = sum(pb.accelerators for pb in pbs)
    hbm_gib = sum(pb.hbm_gib for pb in pbs)
    pflops = None if any(pb.bf16_pflops is None for pb in pbs) else sum(pb.bf16_pflops for pb in pbs)
    usd = None if any(pb.usd_per_hour is None for pb in pbs) else sum(pb.usd_per_hour for pb in pbs)

    for p, pb in zip(pools, pbs):
        # TPU slices talk over ICI inside the slice, not over NICs: no NIC fabric to wire.
        if p.nodes >= 2 and pb.fabric_fraction_wired < 1 and pb.accelerator_kind != "tpu":
            findings.append(
                f"pool {pb.name}: {pb.fabric_gbps_per_accelerator:.0f} Gbps per {unit} wired, "
                f"{pb.fabric_fraction_wired:.0%} of {pb.instance_type}'s fabric"
                + (": wire an EFA device on every card" if p.instance.cloud == "aws" else
                   ": wire every GPU NIC" if p.instance.gpu_nics else
                   ": the type has no GPU NICs, inter-node traffic rides the host network"))

    # Aggregate throughput = capacity TiB x per-TiB throughput [FSx user guide, PerUnitStorageThroughput].
    fs_mbps = [f.capacity_gib / 1024 * f.throughput_mbps_per_tib for f in filesystems]
    fs_total = sum(fs_mbps)
    # Datasets read through the same client NICs whatever their bucket: the fastest driver's figure,
    # once, never one per dataset.
    objects_total = max((object_store_mbps(pools, o) for o in object_stores), default=0.0)
    per_acc = (fs_total + objects_total) / accelerators if accelerators else 0.0
    meets = None if not accelerators else per_acc >= floor_mbps_per_accelerator
    if meets is False:
        need = floor_mbps_per_accelerator * accelerators
        best = max((f.throughput_mbps_per_tib for f in filesystems), default=0)
        tiers = sorted({t for t in (best, 500, 1000) if t >= best and t > 0})   # this tier and faster ones
        sizes = " or ".join(f">= {-(-need * 1024 // t):.0f} GiB at {t:g} MB/s/TiB" for t in tiers)
        findings.append(
            f"{'filesystems and datasets give' if objects_total else 'filesystem gives'} {per_acc:.1f} MB/s per {unit}, below the {floor_mbps_per_accelerator:.1f} MB/s "
            f"floor: add capacity or a higher throughput tier (needs {need / 1000:.1f} GB/s: {sizes})")

    state_gb = fits = ckpt_gb = write_s = stall = within = None
    if workload is not None:
        params = workload.model_params_b * 1e9
        state_gb = params * TRAINING_STATE_BYTES_PER_PARAM / 1e9   # ZeRO section 3.1
        keep = 1 - memory_headroom_pct / 100
        usable_gb = keep * hbm_gib * 2**30 / 1e9   # HBM GiB -> bytes -> decimal GB
        if accelerators:
            fits = state_gb <= usable_gb
            if not fits:
                findings.append(
                    f"training state {state_gb:.0f} GB (16 B/param) exceeds {usable_gb:.0f} GB, the "
                    f"{100 * keep:g} % of HBM left after activation headroom: add nodes or accelerators "
                    f"with more memory (needs >= {state_gb * 1e9 / 2**30 / keep:.0f} GiB HBM)")
        ckpt_gb = params * checkpoint_bytes_per_param / 1e9
        if not filesystems:
            findings.append(f"no shared filesystem to write {ckpt_gb:.0f} GB checkpoints to")
        else:
            # One checkpoint goes to one filesystem: the fastest. Clients' bound: sum of nodes x one
            # card's Gbps / 8 (Amazon FSx for Lustre User Guide, EFA-enabled file systems: ~100 Gbps
            # per p5 client without EFA).
            fs_gbs = max(fs_mbps) / 1000
            client_gbs = sum(p.nodes * client_gbps(p.instance) / 8 for p in pools) if pools else None
            rate = fs_gbs if client_gbs is None else min(fs_gbs, client_gbs)
            # stall = write time / interval (e.g. 70B x 14 B = 980 GB at 14.4 GB/s = 28.8 TiB x 500
            # MB/s/TiB: 68 s, 3.8 % of 30 min)
            interval_s, budget = workload.checkpoint_interval_min * 60, workload.max_checkpoint_stall_pct
            if rate <= 0:
                within = False
                findings.append(f"nothing can write the {ckpt_gb:.0f} GB checkpoint: 0 GB/s to the filesystem")
            else:
                write_s = ckpt_gb / rate
                stall = 100 * write_s / interval_s
                within = stall <= budget
                if not within:
                    limit = "the clients' network" if rate < fs_gbs else "the filesystem"
                    findings.append(
                        f"checkpoint of {ckpt_gb:.0f} GB takes {write_s:.0f} s, {stall:.1f} % of a "
                        f"{interval_s / 60:g} min interval (budget {budget:g} %): limited by {limit} at {rate:.2f} "
                        f"GB/s; needs >= {ckpt_gb / (budget / 100 * interval_s):.1f} GB/s or a longer interval")

    return ClusterBalance(
        pools=pbs, accelerators=accelerators, bf16_pflops=pflops, hbm_gib=hbm_gib,
        fs_throughput_gbs=fs_total / 1000, fs_mbps_per_accelerator=per_acc,
        fs_floor_mbps_per_accelerator=floor_mbps_per_accelerator, fs_meets_floor=meets,
        training_state_gb=state_gb, memory_headroom_pct=memory_headroom_pct, training_state_fits=fits,
        checkpoint_gb=ckpt_gb, checkpoint_write_s=write_s, checkpoint_stall_pct=stall,
        checkpoint_within_budget=within,
        checkpoint_stall_budget_pct=None if workload is None else workload.max_checkpoint_stall_pct,
        usd_per_hour=usd, findings=tuple(findings), object_store_gbs=objects_total / 1000)


def from_design(design) -> ClusterBalance:
    """Balance of a ClusterDesign at each pool's max_nodes (worst per-GPU storage, cost ceiling)."""
    pools = [PoolShape(p.name, p.instance, p.max_nodes,
                       p.efa_devices if design.cloud == "aws" else p.instance.gpu_nics,
                       region=design.region, capacity=p.capacity.type) for p in design.pools]
    # Parallel filesystems only: Filestore and EFS (NFS) hold homes, not training data or checkpoints;
    # an NFS home shared by every node is no data path for a GPU fleet, so counting it would flatter it.
    filesystems = [FilesystemShape(s.name, s.capacity_gib, s.throughput_mbps_per_tib) for s in design.storage
                   if s.kind not in ("filestore", "efs")]
    w = design.workload
    # model_params_b as written, or counted from a described model: the design counts it, since the
    # spec-to-model conversion (aicluster.design.workload) sits above what the policy pack may load.
    workload = None if w is None else WorkloadShape(design.model_params_b, w.checkpoint_interval_min,
                                                    w.max_checkpoint_stall_pct)
    return assess(pools, filesystems, workload, object_stores=dataset_stores(design))


def dataset_stores(design) -> list[ObjectStoreShape]:
    """The object store of the design's datasets (kubernetes.datasets), with the driver's per-client
    read figure from the catalog; none without datasets."""
    kd = getattr(design, "kubernetes", None)
    if kd is None or not kd.datasets:
        return []
    client = load_object_store()[DRIVERS[design.cloud]]
    return [ObjectStoreShape(client.driver, client.read_gbps_per_client)]


def _n(value: float | None, fmt: str, none: str = "?") -> str:
    return none if value is None else format(value, fmt)


def _ok(flag: bool | None) -> str:
    return {True: "ok", False: "FAIL", None: "-"}[flag]


def report_lines(b: ClusterBalance) -> list[str]:
    """A compact, aligned text block for `aicluster plan`."""
    unit = "GPU" if all(p.accelerator_kind == "gpu" for p in b.pools) else "acc"
    lines = [f"{'pool':<12} {'type x nodes':<26} {unit + 's':>6} {'PFLOPS':>8} {'HBM TiB':>8} "
             f"{'Gbps/' + unit:>9} {'fabric':>7} {'$/h':>10}"]
    for p in b.pools:
        lines.append(f"{p.name:<12} {p.instance_type + ' x ' + str(p.nodes):<26} {p.accelerators:>6} "
                     f"{_n(p.bf16_pflops, '.1f'):>8} {p.hbm_gib / 1024:>8.2f} {p.fabric_gbps_per_accelerator:>9.0f} "
                     f"{p.fabric_fraction_wired:>7.0%} {_n(p.usd_per_hour, ',.2f'):>10}")
    lines.append(f"{'total':<12} {'':<26} {b.accelerators:>6} {_n(b.bf16_pflops, '.1f'):>8} "
                 f"{b.hbm_gib / 1024:>8.2f} {'':>9} {'':>7} {_n(b.usd_per_hour, ',.2f'):>10}")
    datasets = f" + {b.object_store_gbs:.2f} GB/s datasets" if b.object_store_gbs else ""
    lines.append(f"{'storage':<12} {b.fs_throughput_gbs:.2f} GB/s{datasets} = {b.fs_mbps_per_accelerator:.1f} MB/s per {unit} "
                 f"(floor {b.fs_floor_mbps_per_accelerator:.1f}): {_ok(b.fs_meets_floor)}")
    if b.training_state_gb is not None:
        usable = (1 - b.memory_headroom_pct / 100) * b.hbm_gib * 2**30 / 1e9
        lines.append(f"{'memory':<12} training state {b.training_state_gb:.0f} GB vs {usable:.0f} GB usable HBM "
                     f"({100 - b.memory_headroom_pct:g} %): {_ok(b.training_state_fits)}")
    if b.checkpoint_gb is not None:
        lines.append(f"{'checkpoint':<12} {b.checkpoint_gb:.0f} GB in {_n(b.checkpoint_write_s, '.1f')} s = "
                     f"{_n(b.checkpoint_stall_pct, '.2f')} % stall (budget {b.checkpoint_stall_budget_pct:g} %): "
                     f"{_ok(b.checkpoint_within_budget)}")
    lines.append(f"{'cost':<12} ${_n(b.usd_per_hour, ',.2f', 'unknown')}/h at max nodes")
    # One line per pool: the price's region, capacity type, source and date, or why there is none.
    lines.extend(f"  {p.name}: {p.price_basis}" for p in b.pools if p.price_basis)
    if b.findings:
        lines.append("findings:")
        lines.extend(f"  - {f}" for f in b.findings)
    else:
        lines.append("balanced: no findings")
    return lines


def to_dict(balance: ClusterBalance) -> dict:
    """JSON-able form (tuples become lists under json.dumps)."""
    return dataclasses.asdict(balance)
