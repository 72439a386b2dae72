"""Hardware shapes for the training model, from the catalog's sourced facts: a pool of instances,
a TPU slice (or several), or a what-if named by an accelerator alias."""
from __future__ import annotations

from aicluster.catalog import InstanceType, TpuGeneration, load_catalog
from aicluster.errors import Problem, SpecError, close_match
from aicluster.perf.shapes import Hardware


def from_instance(instance: InstanceType, nodes: int, wired_gbps_per_node: float | None = None) -> Hardware:
    """`nodes` of an accelerated instance type; the inter-node fabric is what is wired (default: all
    of the type's fabric: EFA on AWS, GPU NICs on GCP)."""
    acc = instance.accelerator
    fabric = instance.fabric_gbps if wired_gbps_per_node is None else wired_gbps_per_node
    price = instance.price.usd_per_hour / instance.accelerator_count if instance.price else None
    return Hardware(
        name=f"{nodes} x {instance.name}", accelerator=acc.model, kind=acc.kind,
        count=nodes * instance.accelerator_count, per_node=instance.accelerator_count,
        bf16_tflops=float(acc.bf16_tflops or 0.0), fp8_tflops=acc.fp8_tflops,
        hbm_gib=acc.memory_gib, hbm_gbs=float(acc.hbm_bandwidth_gbs or 0.0),
        # An HGX board is one NVLink domain: every GPU of the node, none beyond it.
        scale_up_size=instance.accelerator_count, scale_up_gbs=acc.scale_up_gbs,
        scale_out_gbps_per_node=float(fabric), usd_per_accelerator_hour=price,
        source=f"{instance.source}; {acc.source}" + (f"; {acc.scale_up_source}" if acc.scale_up_source else ""))


def from_tpu(generation: TpuGeneration, chips_per_slice: int, slices: int = 1,
             usd_per_chip_hour: float | None = None) -> Hardware:
    """`slices` TPU slices of `chips_per_slice` chips: ICI inside a slice, DCN between slices."""
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
        source=generation.source + (f"; {generation.ici_source}" if generation.ici_source else ""))


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
