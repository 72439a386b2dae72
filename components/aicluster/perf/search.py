"""The layout search (docs/training-model.md section 5): every tp x pp x dp x cp x ep layout the
hardware and model allow, with interleaving, ZeRO stage, recompute and micro-batch size; layouts
that do not fit HBM are set aside; the rest are ranked by predicted throughput."""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Iterator

from aicluster.errors import Problem, SpecError
from aicluster.perf.shapes import Hardware, Layout, LayoutHint, ModelShape

MICRO_BATCHES = (1, 2, 4, 8)
ZERO_STAGES = (1, 3)
RECOMPUTE = ("none", "selective", "full")
VIRTUAL_STAGES = (1, 2, 4, 8)
# Context parallelism only pays for long sequences: NeMo's Llama 3 recipes split 8k-token sequences
# in two; shorter chunks starve the attention kernels.
CP_MIN_CHUNK = 4096
CP_MAX = 16


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def _powers_of_two(limit: int) -> list[int]:
    out, k = [], 1
    while k <= limit:
        out.append(k)
        k *= 2
    return out


@dataclass(frozen=True)
class Space:
    """The degrees a search may pick, after the user's fixed choices."""
    tp: tuple[int, ...]
    cp: tuple[int, ...]
    pp: tuple[int, ...]
    ep: tuple[int, ...]
    zero: tuple[int, ...]
    recompute: tuple[str, ...]
    micro_batch: tuple[int, ...]
    virtual: tuple[int, ...]


def _allowed(m: ModelShape, hw: Hardware) -> dict[str, tuple[list, str]]:
    """Per degree: the values the hardware and model allow, and the rule in words (for errors)."""
    # TP stays inside the NVLink / ICI domain (8 GPUs of an HGX node, up to 64 of an NVL72 rack) and
    # must split heads and KV heads evenly. EP is any divisor of the experts: the step model times an
    # expert group that leaves the domain at NIC speed.
    tp = [t for t in _powers_of_two(hw.scale_up_size) if m.heads % t == 0 and (m.kv_heads % t == 0 or t % m.kv_heads == 0)]
    # CP: up to 16 ranks (NeMo's long-context recipes), or up to the NVLink domain where it is larger
    # (NVL72): the ring of K/V blocks wants NVLink.
    cp_max = max(CP_MAX, hw.scale_up_size) if hw.kind == "gpu" else CP_MAX
    cp = [c for c in _powers_of_two(min(cp_max, hw.count))
          if c == 1 or (m.seq_len // c >= CP_MIN_CHUNK and m.seq_len % (2 * c) == 0)]
    # Stages need not hold equal layers: the fullest one sets the pace (memory.stage_layers).
    pp = [p for p in _divisors(hw.count) if p <= m.layers]
    ep = [1] if m.moe is None else [e for e in _divisors(m.moe.experts) if e <= hw.count]

    def listed(values: list) -> str:
        return ", ".join(map(str, values))

    return {
        "tp": (tp, f"a power of two within one NVLink/ICI domain ({hw.scale_up_size} accelerators) that divides "
                   f"heads ({m.heads}) and KV heads ({m.kv_heads}): {listed(tp)}"),
        "cp": (cp, f"1, or a power of two up to {cp_max} that leaves chunks of at least {CP_MIN_CHUNK} tokens and divides "
                   f"the sequence in 2 x cp chunks: {listed(cp)}"),
        "pp": (pp, f"a divisor of the {hw.count} accelerators, at most the {m.layers} layers: {listed(pp)}"),
        "ep": (ep, f"1 for a dense model, or a divisor of the experts: {listed(ep)}"),
        "zero_stage": ([0, 1, 2, 3], "0, 1, 2 or 3"),
        "recompute": (list(RECOMPUTE), "none, selective or full"),
    }


# What the search tries for a key the user left open, when it differs from everything allowed.
_SEARCHED = {"zero_stage": ZERO_STAGES, "recompute": RECOMPUTE, "micro_batch": MICRO_BATCHES,
             "virtual_stages": VIRTUAL_STAGES}


def space(m: ModelShape, hw: Hardware, hint: LayoutHint, at: str) -> Space:
    """The candidate degrees, or a SpecError naming every fixed value that cannot work."""
    problems: list[Problem] = []
    allowed = _allowed(m, hw)
    picked: dict[str, tuple] = {}
    for name in ("tp", "cp", "pp", "ep", "zero_stage", "recompute", "micro_batch", "virtual_stages"):
        fixed = getattr(hint, name)
        values, rule = allowed.get(name, (None, ""))
        if fixed is None:
            picked[name] = tuple(_SEARCHED.get(name, values))
            continue
        if values is not None and fixed not in values:
            problems.append(Problem(f"{at}.{name}", fixed, rule))
        picked[name] = (fixed,)
    if hint.dp is not None and not any(t * c * p * hint.dp == hw.count
                                       for t, c, p in itertools.product(picked["tp"], picked["cp"], picked["pp"])):
        problems.append(Problem(f"{at}.dp", hint.dp, f"tp x pp x dp x cp equal to the {hw.count} accelerators "
                                "of the cluster"))
    if problems:
        raise SpecError(problems, subject="workload")
    return Space(picked["tp"], picked["cp"], picked["pp"], picked["ep"], picked["zero_stage"], picked["recompute"],
                 picked["micro_batch"], picked["virtual_stages"])


def _interleaving_ok(m: ModelShape, p: int, v: int, micro_batches: int) -> bool:
    """Interleaving needs several stages, a layer per chunk at least and a number of micro-batches
    divisible by pp (Megatron-LM's schedule)."""
    return v == 1 or (p > 1 and p * v <= m.layers and micro_batches % p == 0)


def layouts(m: ModelShape, hw: Hardware, hint: LayoutHint, global_batch: int, *, at: str = "parallelism"
            ) -> Iterator[Layout]:
    """Every layout of the space that uses all the accelerators and splits the global batch."""
    sp = space(m, hw, hint, at)
    for t, c, p in itertools.product(sp.tp, sp.cp, sp.pp):
        if hw.count % (t * c * p):
            continue
        d = hw.count // (t * c * p)
        if (hint.dp is not None and d != hint.dp) or global_batch < d:
            continue
        for e, b in itertools.product(sp.ep, sp.micro_batch):
            if (d * c) % e or (b > 1 and d * b > global_batch):
                continue
            micro_batches = -(-global_batch // (d * b))
            for v, z, r in itertools.product(sp.virtual, sp.zero, sp.recompute):
                if _interleaving_ok(m, p, v, micro_batches):
                    yield Layout(tp=t, pp=p, dp=d, cp=c, ep=e, zero_stage=z, recompute=r, micro_batch=b,
                                 virtual_stages=v)
