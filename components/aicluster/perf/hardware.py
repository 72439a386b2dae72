"""Hardware shapes for the training model, from the catalog's sourced facts: a pool of instances,
a TPU slice (or several), or a what-if named by an accelerator alias."""
from __future__ import annotations

import dataclasses
import math

from aicluster.catalog import InstanceType, TpuGeneration, load_catalog
from aicluster.catalog.pricing import Quote, chip_price, node_price, node_price_missing, price_missing
from aicluster.errors import Problem, SpecError, close_match
from aicluster.perf.shapes import Hardware


def _basis(quote: Quote | None, missing: str) -> str:
    return missing if quote is None else f"{quote.basis}; {quote.source}, checked {quote.checked}"


def from_instance(instance: InstanceType, nodes: int, wired_gbps_per_node: float | None = None, *,
                  region: str | None = None, capacity: str = "on-demand") -> Hardware:
    """`nodes` of an accelerated instance type; the inter-node fabric is what is wired (default: all
    of the type's fabric: EFA on AWS, GPU NICs on GCP). Priced in `region` on `capacity`
    (catalog.pricing); no region (a what-if): the reference price, us-east-1 / us-central1
    on-demand, and `price_basis` says so."""
    acc = instance.accelerator
    fabric = instance.fabric_gbps if wired_gbps_per_node is None else wired_gbps_per_node
    quote = node_price(instance, region, capacity)
    price = None if quote is None else quote.usd_per_hour / instance.accelerator_count
    count = nodes * instance.accelerator_count
    domain = instance.nvlink_domain_gpus
    aligned = math.gcd(count, domain) if count else domain
    sources = [instance.source, acc.source, acc.scale_up_source, instance.nvlink_domain_source]
    return Hardware(
        name=f"{nodes} x {instance.name}", accelerator=acc.model, kind=acc.kind,
        count=count, per_node=instance.accelerator_count,
        bf16_tflops=float(acc.bf16_tflops or 0.0), fp8_tflops=acc.fp8_tflops,
        hbm_gib=acc.memory_gib, hbm_gbs=float(acc.hbm_bandwidth_gbs or 0.0),
        # The catalog's NVLink domain: an HGX board's 8 GPUs, an NVL72 rack's 72 over 18 nodes. A
        # job holding part of a domain (9 nodes of an NVL72, or 27 nodes = 1.5 domains) lines its
        # groups up on what every domain it touches holds of it: gcd(job, domain).
        scale_up_size=aligned, scale_up_gbs=acc.scale_up_gbs,
        scale_out_gbps_per_node=float(fabric), usd_per_accelerator_hour=price,
        source="; ".join(s for s in sources if s), domain_gpus=None if domain == aligned else domain,
        price_basis=_basis(quote, node_price_missing(instance, region, capacity)))


def placements(hw: Hardware) -> tuple[Hardware, ...]:
    """The ways a job can sit on multi-node NVLink domains: every GPU of every domain, and, when a
    domain's GPUs are not a power of two (NVL72: 72 = 8 x 9), also the largest power of two of
    whole nodes per domain (16 of 18 nodes = 64 GPUs), the rest idle. Power-of-two model-parallel
    groups (TP 16, EP 32 or 64) line up only with the second: 16 ranks of 72 straddle two
    domains. NVIDIA recommends Slurm `--segment=16` on GB200 NVL72 for large jobs such as MoE
    training (NVIDIA Technical Blog, "Unlock Exascale Performance on NVIDIA GB200 NVL72 with Slurm
    Topology-Aware Job Scheduling"), and its DeepSeek-V3 recipe for GB200 runs 256 GPUs (four
    domains of 64) with EP 64 (Megatron-Bridge scripts/performance/configs/deepseek/
    deepseek_workload_base_configs.py). HGX nodes and TPU slices have one placement."""
    if hw.kind != "gpu" or hw.scale_up_size <= hw.per_node or hw.count % hw.scale_up_size:
        return (hw,)
    nodes = hw.scale_up_size // hw.per_node
    used = max(k for k in range(1, nodes + 1) if _power_of_two(k * hw.per_node))
    if used == nodes:
        return (hw,)
    domains = hw.count // hw.scale_up_size
    segment = dataclasses.replace(
        hw, name=f"{hw.name}, {used} of {nodes} nodes per NVLink domain", count=domains * used * hw.per_node,
        scale_up_size=used * hw.per_node, domain_gpus=hw.domain_gpus or hw.scale_up_size, paid_count=hw.paid)
    return (hw, segment)


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def from_tpu(generation: TpuGeneration, chips_per_slice: int, slices: int = 1,
             usd_per_chip_hour: float | None = None, *, region: str | None = None,
             capacity: str = "on-demand") -> Hardware:
    """`slices` TPU slices of `chips_per_slice` chips: ICI inside a slice, DCN between slices.
    Priced per chip-hour at `usd_per_chip_hour` when given, else in `region` on `capacity`
    (catalog.pricing.chip_price); no region (a what-if): us-central1 on-demand, as `from_instance`
    prices a what-if, and `price_basis` says so."""
    basis = ""
    if usd_per_chip_hour is None:
        quote = chip_price(generation.name, region, capacity)
        usd_per_chip_hour = None if quote is None else quote.usd_per_hour
        basis = _basis(quote, price_missing(f"TPU {generation.name}", region, capacity))
    per_host = 4 if chips_per_slice >= 4 else chips_per_slice
    ici = generation.ici_gbs_bidirectional
    dcn = (generation.dcn_gbps_per_chip or 0.0) * per_host
    return Hardware(
        name=f"{slices} x TPU {generation.name} {chips_per_slice}-chip slice" if slices > 1
        else f"TPU {generation.name} {chips_per_slice}-chip slice",
        accelerator=f"TPU {generation.name}", kind="tpu", count=chips_per_slice * slices, per_node=per_host,
        bf16_tflops=generation.bf16_tflops, fp8_tflops=None, hbm_gib=generation.hbm_gib_per_chip,
        hbm_gbs=generation.hbm_bandwidth_gbs, scale_up_size=chips_per_slice,
        # One direction is half the published bidirectional figure; collectives over the torus use
        # every link of the chip.
        scale_up_gbs=None if ici is None else ici / 2,
        scale_out_gbps_per_node=dcn, usd_per_accelerator_hour=usd_per_chip_hour,
        source=generation.source + (f"; {generation.ici_source}" if generation.ici_source else ""),
        price_basis=basis)


def what_if(accelerator: str, nodes: int, inter_node_gbps_per_node: float | None = None, *,
            at: str = "cluster.hardware") -> Hardware:
    """A cluster that exists only on paper: `nodes` nodes (TPU: hosts of 4 chips, one slice) of the
    catalog's instance for an accelerator alias (h100, a100-80gb, b200, trainium2) or a TPU
    generation (v4, v5e, v5p, v6e)."""
    catalog = load_catalog()
    name = accelerator.lower()
    if name in catalog.tpus:
        return from_tpu(catalog.tpus[name], nodes * 4)
    for cloud in ("aws", "gcp"):
        instance = catalog.resolve(cloud, name)
        if instance is not None and instance.accelerator.kind != "cpu":
            return from_instance(instance, nodes, inter_node_gbps_per_node)
    choices = sorted({*catalog.aliases.get("aws", {}), *catalog.aliases.get("gcp", {}), *catalog.tpus})
    raise SpecError([Problem(f"{at}.accelerator", accelerator,
                             f"an accelerator alias or TPU generation: {', '.join(choices)}",
                             close_match(accelerator, choices))], subject="workload")
