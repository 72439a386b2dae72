"""The described workload as two tag values, so a policy pack reading raw cloud resources can run the
same training model as `aicluster plan`.

`aicluster-model` holds the architecture, `aicluster-training` the training set-up and the layout
the user fixed. Each value is at most 63 characters of lowercase letters, digits, `_` and `-`,
starting with a letter: the GCP label alphabet, which AWS tags accept too, so one value serves both
clouds.

    aicluster-model     l80h8192a64g8f28672v128256s8192[d128]-swiglu[-e8k2x14336[r1]]
    aicluster-training  b1024-bf16[-t15e12][-y4][-tp8pp4cp1ep1dp16z1mb1vs1][-rsel]

Groups are separated by `-`. Integer fields run together inside a group (a key of letters, then
digits), since a dash per field would not leave room for a mixture-of-experts model. Real numbers
(tokens to train on, bytes per token) are an integer mantissa and a power of ten, `15e12` = 1.5e13
and `25d1` = 2.5 (`d`: decimal places), so they round-trip exactly.

Decoding never raises: a malformed value gives None and the reason, for a rule to report.
"""
from __future__ import annotations

import re
from decimal import Decimal
from typing import Mapping, NamedTuple

from aicluster.perf.shapes import MLP_MATRICES, LayoutHint, Moe, ModelShape, TrainingShape

MODEL_TAG = "aicluster-model"
TRAINING_TAG = "aicluster-training"
MAX_LENGTH = 63                                   # GCP label values; AWS tag values allow 256
_ALPHABET = re.compile(r"[a-z][a-z0-9_-]{0,62}")

_MODEL_KEYS = {"l": "layers", "h": "hidden", "a": "heads", "g": "kv_heads", "f": "ffn_hidden", "v": "vocab",
               "s": "seq_len", "d": "head_size"}
_OPTIONAL_MODEL_KEYS = ("head_size",)        # None: hidden / heads
_MOE_KEYS = {"e": "experts", "k": "top_k", "x": "expert_ffn_hidden", "r": "shared_experts"}
_LAYOUT_KEYS = {"tp": "tp", "pp": "pp", "cp": "cp", "ep": "ep", "dp": "dp", "z": "zero_stage", "mb": "micro_batch",
                "vs": "virtual_stages"}
_RECOMPUTE = {"none": "rnone", "selective": "rsel", "full": "rfull"}
_PRECISIONS = ("bf16", "fp8")
_DEFAULT_BYTES_PER_TOKEN = TrainingShape(global_batch_seqs=1).bytes_per_token

_PAIRS = re.compile(r"([a-z]+)(\d+)")
_REAL = re.compile(r"(\d+)(?:([ed])(\d+))?")
_REAL_GROUP = re.compile(r"([ty])(\d+(?:[ed]\d+)?)")


class Workload(NamedTuple):
    model: ModelShape
    training: TrainingShape
    hint: LayoutHint


# ---------------------------------------------------------------- numbers


def real_text(value: float) -> str:
    """A non-negative real as mantissa and power of ten: 1.5e13 -> 15e12, 2.5 -> 25d1, 4.0 -> 4."""
    if not (value >= 0 and value != float("inf")):
        raise ValueError(f"{value!r} is not a finite, non-negative number")
    # repr gives the shortest decimal that reads back as the same float, so the tag is exact.
    sign, digits, exponent = Decimal(repr(float(value))).normalize().as_tuple()
    mantissa = int("".join(map(str, digits)) or "0")
    if mantissa == 0:
        return "0"
    return f"{mantissa}" + (f"e{exponent}" if exponent > 0 else f"d{-exponent}" if exponent < 0 else "")


def real_value(text: str) -> float | None:
    m = _REAL.fullmatch(text)
    if m is None:
        return None
    mantissa, kind, power = m.groups()
    if kind is None:
        return float(mantissa)
    return float(f"{mantissa}e{power if kind == 'e' else '-' + power}")


# ---------------------------------------------------------------- encoding


def _pairs(values: Mapping[str, int | None]) -> str:
    return "".join(f"{key}{int(value)}" for key, value in values.items() if value is not None)


def model_tag(model: ModelShape) -> str:
    core = _pairs({key: getattr(model, name) for key, name in _MODEL_KEYS.items()})
    groups = [core, model.mlp]
    if model.moe is not None:
        moe = model.moe
        groups.append(_pairs({"e": moe.experts, "k": moe.top_k, "x": moe.expert_ffn_hidden,
                              "r": moe.shared_experts or None}))
    return _checked("model", "-".join(groups))


def training_tag(training: TrainingShape, hint: LayoutHint = LayoutHint()) -> str:
    groups = [f"b{training.global_batch_seqs}", training.precision]
    if training.tokens is not None:
        groups.append("t" + real_text(training.tokens))
    if training.bytes_per_token != _DEFAULT_BYTES_PER_TOKEN:
        groups.append("y" + real_text(training.bytes_per_token))
    layout = _pairs({key: getattr(hint, name) for key, name in _LAYOUT_KEYS.items()})
    if layout:
        groups.append(layout)
    if hint.recompute is not None:
        groups.append(_RECOMPUTE[hint.recompute])
    return _checked("training", "-".join(groups))


def _checked(what: str, value: str) -> str:
    if not _ALPHABET.fullmatch(value):
        raise ValueError(f"the {what} tag {value!r} is not a label value: at most {MAX_LENGTH} lowercase "
                         f"letters, digits, '_' or '-', starting with a letter")
    return value


def workload_tags(model: ModelShape, training: TrainingShape, hint: LayoutHint = LayoutHint()) -> dict[str, str]:
    """The two tags; ValueError when a value cannot be a label (longer than 63 characters)."""
    return {MODEL_TAG: model_tag(model), TRAINING_TAG: training_tag(training, hint)}


# ---------------------------------------------------------------- decoding


class _Bad(Exception):
    """A malformed tag value; never leaves this module."""


def _read_pairs(group: str, keys: Mapping[str, str], what: str) -> dict[str, int]:
    pairs = _PAIRS.findall(group)
    if "".join(k + v for k, v in pairs) != group:
        raise _Bad(f"{what}: {group!r} is not key-number pairs")
    out: dict[str, int] = {}
    for key, digits in pairs:
        if key not in keys:
            raise _Bad(f"{what}: unknown key {key!r} in {group!r} (known: {', '.join(keys)})")
        if keys[key] in out:
            raise _Bad(f"{what}: {key!r} given twice in {group!r}")
        out[keys[key]] = int(digits)
    return out


def _positive(values: Mapping[str, int], what: str, *, zero_ok: tuple[str, ...] = ()) -> None:
    for name, value in values.items():
        if value < (0 if name in zero_ok else 1):
            raise _Bad(f"{what}: {name} must be {'>= 0' if name in zero_ok else '>= 1'}, got {value}")


def _decode_model(value: str) -> ModelShape:
    groups = value.split("-")
    if len(groups) not in (2, 3):
        raise _Bad(f"model: {value!r} has {len(groups)} groups, expected core-mlp[-moe]")
    core = _read_pairs(groups[0], _MODEL_KEYS, "model")
    missing = [name for name in _MODEL_KEYS.values() if name not in core and name not in _OPTIONAL_MODEL_KEYS]
    if missing:
        raise _Bad(f"model: {value!r} lacks {', '.join(missing)}")
    _positive(core, "model")
    if groups[1] not in MLP_MATRICES:
        raise _Bad(f"model: MLP {groups[1]!r} is not one of {', '.join(MLP_MATRICES)}")
    moe = None
    if len(groups) == 3:
        fields = _read_pairs(groups[2], _MOE_KEYS, "model")
        missing = [name for name in ("experts", "top_k", "expert_ffn_hidden") if name not in fields]
        if missing:
            raise _Bad(f"model: mixture of experts {groups[2]!r} lacks {', '.join(missing)}")
        _positive(fields, "model", zero_ok=("shared_experts",))
        moe = Moe(**fields)
    return ModelShape(**core, mlp=groups[1], moe=moe)


def _decode_training(value: str) -> tuple[TrainingShape, LayoutHint]:
    groups = value.split("-")
    if len(groups) < 2 or not re.fullmatch(r"b\d+", groups[0]) or groups[1] not in _PRECISIONS:
        raise _Bad(f"training: {value!r} does not start with b<sequences>-<{'|'.join(_PRECISIONS)}>")
    batch = int(groups[0][1:])
    if batch < 1:
        raise _Bad("training: the global batch must be >= 1 sequence")
    fields: dict = {"global_batch_seqs": batch, "precision": groups[1]}
    hint: dict = {}
    reals = {"t": "tokens", "y": "bytes_per_token"}
    recompute = {code: name for name, code in _RECOMPUTE.items()}
    layout_read = False
    for group in groups[2:]:
        real = _REAL_GROUP.fullmatch(group)
        if group in recompute and "recompute" not in hint:
            hint["recompute"] = recompute[group]
        elif real and reals[real[1]] not in fields:
            fields[reals[real[1]]] = real_value(real[2])
        elif not real and group not in recompute and not layout_read:
            layout = _read_pairs(group, _LAYOUT_KEYS, "training")
            _positive(layout, "training", zero_ok=("zero_stage",))
            hint |= layout
            layout_read = True
        else:
            raise _Bad(f"training: cannot read {group!r} in {value!r} (repeated or unknown)")
    if fields.get("bytes_per_token") == 0:
        raise _Bad("training: bytes per token must be > 0")
    return TrainingShape(**fields), LayoutHint(**hint)


def workload_from_tags(tags: Mapping[str, str]) -> tuple[Workload | None, str]:
    """(the described workload, "") or (None, why not): no model tag, or a malformed one."""
    model, training = tags.get(MODEL_TAG), tags.get(TRAINING_TAG)
    if model is None and training is None:
        return None, f"no {MODEL_TAG} and {TRAINING_TAG} tags (the workload describes no model)"
    if not isinstance(model, str) or not isinstance(training, str):
        missing = MODEL_TAG if not isinstance(model, str) else TRAINING_TAG
        return None, f"{missing} tag missing or not text: the model and its training go together"
    try:
        shape = _decode_model(model)
        run, hint = _decode_training(training)
    except _Bad as exc:
        return None, f"malformed workload tag, {exc}"
    return Workload(shape, run, hint), ""
