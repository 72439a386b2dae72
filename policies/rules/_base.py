"""Small shared pieces of the rules: config schemas, the cluster model of a stack, wording."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from pulumi_policy import PolicyConfigSchema

from . import model
from ._props import number, plain


def schema(**properties: dict) -> PolicyConfigSchema:
    """A rule's config schema. Property names are camelCase (Pulumi's config file style)."""
    return PolicyConfigSchema(properties=properties)


# The node-count override every stack rule that counts nodes accepts (hand-written stacks whose
# launch templates carry no size and have no autoscaling group or node group).
POOL_NODES = {
    "type": "object",
    "additionalProperties": {"type": "integer", "minimum": 0},
    "description": "Nodes per pool for stacks that do not say: pool name (aicluster-pool tag or the "
                   "launch template / node group / template name, globs allowed) -> max nodes.",
}
MODEL_PARAMS_B = {"type": "number", "minimum": 0,
                  "description": "Model size in billions of parameters (overrides the aicluster-model-params-b tag)."}


def config(args: Any) -> dict:
    """The rule's config as plain data (the engine sends numbers as floats)."""
    return dict(plain(args.get_config() or {}))


def cluster(args: Any) -> model.Cluster:
    return model.build(args.resources, config(args))


def not_applicable(args: Any, reason: str) -> None:
    """Mark the policy not applicable (pulumi_policy >= 1.17 has it; older SDKs just return)."""
    marker = getattr(args, "not_applicable", None)
    if marker is not None:
        marker(reason)


def fmt_gb(value_gb: float) -> str:
    return f"{value_gb:,.0f} GB" if value_gb >= 10 else f"{value_gb:.1f} GB"


def number_or(cfg: Mapping[str, Any], key: str, default: float) -> float:
    value = number(cfg.get(key))
    return default if value is None else value


def gpus(pools: Sequence[model.Pool]) -> str:
    """How the rules name the pools' accelerators: GPU when all are GPUs."""
    return "GPU" if all(p.instance.accelerator.kind == "gpu" for p in pools) else "accelerator"
