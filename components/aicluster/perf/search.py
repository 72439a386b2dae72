"""The layout search (docs/training-model.md section 5): every tp x pp x dp x cp x ep layout the
hardware and model allow, with interleaving, ZeRO stage, recompute and micro-batch size; layouts
that do not fit HBM are set aside; the rest are ranked by predicted throughput."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from ..errors import Problem, SpecError
from .shapes import Hardware, Layout, LayoutHint, ModelShape

MICRO_BATCHES = (1, 2, 4, 8)
ZERO_STAGES = (1, 3)
RECOMPUTE = ("none", "selective", "full")
VIRTUAL_STAGES = (1, 2, 4, 8)
# Context parallelism only pays for long sequences: NeMo's Llama 3 recipes split 8k-token sequences
# in two; shorter chunks starve the attention kernels.
CP_MIN_CHUNK = 4096


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


def space(m: ModelShape, hw: Hardware, hint: LayoutHint, at: str) -> Space:
    """The candidate degrees, or a SpecError naming the fixed value that cannot work."""
    problems: list[Problem] = []
    # TP stays inside the NVLink / ICI domain and must split heads and KV heads evenly.
    tp_ok = [t for t in _powers_of_two(hw.scale_up_size)
             if m.heads % t == 0 and (m.kv_heads % t == 0 or t % m.kv_heads == 0)]
    cp_ok = [c for c in _powers_of_two(min(16, hw.count)) if c == 1 or (m.seq_len // c >= CP_MIN_CHUNK
                                                                         and m.seq_len % (2 * c) == 0)]
    # Stages need not hold equal layers: the slowest (ceil(L / pp) layers) sets the pace.
    pp_ok = [p for p in _divisors(hw.count) if p <= m.layers]
    ep_ok = [1] if m.moe is None else [e for e in _divisors(m.moe.experts) if e <= hw.count]

    def pick(name: str, fixed, allowed: list, rule: str) -> tuple:
        if fixed is None:
            return tuple(allowed)
        if fixed not in allowed:
            problems.append(Problem(f"{at}.{name}", fixed, rule))
        return (fixed,)

    tp = pick("tp", hint.tp, tp_ok, f"a power of two within one NVLink/ICI domain ({hw.scale_up_size} "
              f"accelerators) that divides heads ({m.heads}) and KV heads ({m.kv_heads}): "
              + ", ".join(map(str, tp_ok)))
    cp = pick("cp", hint.cp, cp_ok, f"1, or a power of two up to 16 that leaves chunks of at least {CP_MIN_CHUNK} "
              "tokens and divides the sequence in 2 x cp chunks: " + ", ".join(map(str, cp_ok)))
    pp = pick("pp", hint.pp, pp_ok, f"a divisor of the {hw.count} accelerators, at most the {m.layers} layers: "
              + ", ".join(map(str, pp_ok)))
    ep = pick("ep", hint.ep, ep_ok, "1 for a dense model, or a divisor of the experts: " + ", ".join(map(str, ep_ok)))
    zero = pick("zero_stage", hint.zero_stage, [0, 1, 2, 3], "0, 1, 2 or 3") if hint.zero_stage is not None else ZERO_STAGES
    recompute = pick("recompute", hint.recompute, list(RECOMPUTE), "none, selective or full") \
        if hint.recompute is not None else RECOMPUTE
    micro = (hint.micro_batch,) if hint.micro_batch is not None else MICRO_BATCHES
    virtual = (hint.virtual_stages,) if hint.virtual_stages is not None else VIRTUAL_STAGES
    if hint.dp is not None:
        fixed = [(t, c, p) for t in tp for c in cp for p in pp if t * c * p * hint.dp == hw.count]
        if not fixed:
            problems.append(Problem(f"{at}.dp", hint.dp, f"tp x pp x dp x cp equal to the {hw.count} "
                                    "accelerators of the cluster"))
    if problems:
        raise SpecError(problems, subject="workload")
    return Space(tp, cp, pp, ep, zero, recompute, micro, virtual)


def layouts(m: ModelShape, hw: Hardware, hint: LayoutHint, global_batch: int, *, at: str = "parallelism"
            ) -> Iterator[Layout]:
    """Every layout of the space that uses all the accelerators."""
    sp = space(m, hw, hint, at)
    for t in sp.tp:
        for c in sp.cp:
            for p in sp.pp:
                if hw.count % (t * c * p):
                    continue
                d = hw.count // (t * c * p)
                if hint.dp is not None and d != hint.dp:
                    continue
                if d * c < 1 or global_batch < d:
                    continue
                for e in sp.ep:
                    if (d * c) % e:
                        continue
                    for b in sp.micro_batch:
                        if d * b > global_batch and b > 1:
                            continue
                        m_count = -(-global_batch // (d * b))
                        for v in sp.virtual:
                            # Interleaving needs several stages, a layer per chunk at least and a
                            # number of micro-batches divisible by pp (Megatron-LM's schedule).
                            if v > 1 and (p == 1 or p * v > m.layers or m_count % p):
                                continue
                            for z in sp.zero:
                                for r in sp.recompute:
                                    yield Layout(tp=t, pp=p, dp=d, cp=c, ep=e, zero_stage=z, recompute=r,
                                                 micro_batch=b, virtual_stages=v)
