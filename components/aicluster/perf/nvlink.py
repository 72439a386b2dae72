"""What the NVLink (or ICI) domain does for a layout: the model-parallel group that wants the fast
fabric, whether it stays inside one domain, and, when it spans nodes inside a multi-node domain
(GB200 NVL72), what the domain saved: the same layout re-timed as if the domain ended at the node.

The fast-fabric group is tp x cp x ep consecutive ranks: step.py orders ranks tp, cp, dp and puts
an expert group on ep ranks tp x cp apart (Megatron-Core's expert-data-parallel layout), so the
expert all-to-all spans tp x cp x ep ranks, the context-parallel ring tp x cp, and the
tensor-parallel collectives tp. Data and pipeline parallelism tolerate the NICs (their traffic
overlaps with compute or is small); these three sit on every layer's critical path.
"""
from __future__ import annotations

import dataclasses

from aicluster.perf.shapes import Hardware, Layout


def group_ranks(lay: Layout) -> int:
    """Ranks of the largest model-parallel group: tp x cp x ep."""
    return lay.tp * lay.cp * lay.ep


def group_text(lay: Layout) -> str:
    """'tp 1 x cp 1 x ep 64 = 64'."""
    return f"tp {lay.tp} x cp {lay.cp} x ep {lay.ep} = {group_ranks(lay)}"


def fabric(hw: Hardware) -> str:
    return "ICI" if hw.kind == "tpu" else "NVLink"


def domain_text(hw: Hardware) -> str:
    """'one 72-GPU NVLink domain (the job holds 64 of them: 16 of 18 nodes)' or 'one 8-GPU NVLink
    domain (one node)'."""
    unit = "chip" if hw.kind == "tpu" else "GPU"
    physical = hw.domain_gpus or hw.scale_up_size
    if hw.kind == "tpu":
        return f"one {hw.scale_up_size}-chip ICI slice"
    if physical == hw.per_node:
        return f"one {physical}-{unit} NVLink domain (one node)"
    held = "" if physical == hw.scale_up_size else \
        f"; the job holds {hw.scale_up_size} GPUs of it: {hw.scale_up_size // hw.per_node} of its " \
        f"{physical // hw.per_node} nodes, Slurm --segment={hw.scale_up_size // hw.per_node}"
    return f"one {physical}-{unit} NVLink domain ({physical // hw.per_node} nodes{held})"


def crossing(hw: Hardware, lay: Layout) -> str | None:
    """A warning when the layout's model-parallel group leaves its NVLink domain (or straddles two),
    with the group, the domain and what to change; None when it stays inside."""
    ranks = group_ranks(lay)
    if ranks <= 1 or hw.fits_domain(ranks) or hw.scale_up_gbs is None:
        return None
    where = "is larger than" if ranks > hw.scale_up_size else "does not divide, so groups straddle,"
    fits = [k for k in range(1, hw.scale_up_size + 1) if hw.scale_up_size % k == 0]
    parts = [name for name, degree in (("ep", lay.ep), ("cp", lay.cp), ("tp", lay.tp)) if degree > 1]
    return (f"model-parallel group {group_text(lay)} GPUs {where} {domain_text(hw)}: its "
            f"{' and '.join(_term(n) for n in parts)} traffic runs over the NICs "
            f"({hw.scale_out_gbps_per_node:g} Gbps per node), not {fabric(hw)}; keep tp x cp x ep a divisor of "
            f"{hw.scale_up_size} (largest {max(fits)}: lower {' or '.join(parts)}, move the rest to dp or pp)"
            + (", or choose an instance type with a larger NVLink domain (GB200/GB300 NVL72: 72 GPUs)"
               if (hw.domain_gpus or hw.scale_up_size) <= hw.per_node and hw.kind == "gpu" else ""))


def _term(name: str) -> str:
    return {"ep": "expert all-to-all", "cp": "context-parallel ring", "tp": "tensor-parallel"}[name]


def node_only(hw: Hardware) -> Hardware:
    """The same hardware with its NVLink domain cut back to one node: what an HGX-style machine of
    the same chips would give."""
    return dataclasses.replace(hw, scale_up_size=hw.per_node, domain_gpus=None)


def spans_nodes(hw: Hardware, lay: Layout) -> bool:
    """The group reaches beyond one node and still stays inside one multi-node domain."""
    return group_ranks(lay) > hw.per_node and hw.fits_domain(group_ranks(lay)) and hw.kind == "gpu"
