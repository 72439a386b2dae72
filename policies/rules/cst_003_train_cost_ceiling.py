"""AIC-CST-003: training the workload to its token count costs at most a ceiling (US$).

Optional: without `maxTrainUsd` in the config the rule is not applicable. Where the workload
describes its model and training.tokens (tags aicluster-model and aicluster-training), the cost is
the training model's (aicluster.perf): days to train at the best layout's throughput and the job's
goodput (checkpoint stalls, failures at its size, restarts; perf/goodput.py) x the pool's price per
hour plus the cluster's standing cost per hour (design/standing_cost.py) where it is known.

With only model_params_b there is no throughput to go by, so the rule falls back to the standard
estimate C = 6 x P x D FLOPs (P parameters, D tokens; Kaplan et al. 2020, arXiv:2001.08361 section
2.1) at an assumed MFU (default 40 %, about what Llama 3 405B sustained in BF16 on 16K H100s,
38-43 %, arXiv:2407.21783 table 4) of the largest pool's dense BF16 peak, for the `trainTokens` the
config gives (none: not applicable), priced as AIC-CST-002 prices the pool: the stack's region and
the pool's capacity type. Better a stated rough figure than no check: describing the model replaces
it with the estimate.
"""
from __future__ import annotations

from pulumi_policy import EnforcementLevel, Severity, StackValidationPolicy

from aicluster.catalog.pricing import node_price, node_price_missing

from ._base import POOL_NODES, cluster, config, not_applicable, number_or, schema
from ._props import number
from .model.capacity import pool_capacity, stack_region
from .model.workload import described, no_layout

ID = "AIC-CST-003"
SUPPORTED = ("aws:ec2/launchTemplate", "aws:ec2/instance", "aws:autoscaling/group", "aws:eks/nodeGroup",
             "gcp:compute/instance", "gcp:compute/instanceTemplate", "gcp:container/nodePool", "gcp:tpu/v2Vm")
DEFAULT_ASSUMED_MFU = 0.40


def validate(args, report_violation) -> None:
    c, cfg = cluster(args), config(args)
    ceiling = number(cfg.get("maxTrainUsd"))
    if ceiling is None:
        not_applicable(args, "no maxTrainUsd in the policy config")
        return
    d, why = described(c, cfg)
    if d is not None:
        _judge_estimate(args, d, ceiling, report_violation)
    else:
        _judge_six_pd(args, c, cfg, ceiling, why, report_violation)


def _judge_estimate(args, d, ceiling: float, report_violation) -> None:
    e = d.estimate
    if e is None:
        not_applicable(args, no_layout(d))
        return
    if e.train_days_ideal is None:
        not_applicable(args, "the workload gives no token count (training.tokens): no time or cost to train")
        return
    if e.train_days is None:
        report_violation(f"{d.label()}: the job never finishes: goodput 0 (interrupted every {e.goodput.mtbf_h:.2f} h "
                         f"on average, sooner than it restarts and re-does its checkpoint interval)", d.pool.anchor.urn)
        return
    if e.train_cost_usd is None:
        report_violation(f"{d.label()}: no catalog price for {d.hardware.name}: cannot show training stays under "
                         f"${ceiling:,.0f}", d.pool.anchor.urn)
        return
    if e.train_cost_usd > ceiling:
        report_violation(
            f"{d.label()}: {d.workload.training.tokens:.3g} tokens at {e.tokens_per_s:,.0f} tokens/s (MFU "
            f"{100 * e.best.mfu:.1f} %) take {e.train_days:,.1f} days at {100 * e.goodput.fraction:.1f} % goodput "
            f"(checkpoints and failures) x {_per_hour(e)} = ${e.train_cost_usd:,.0f} > ${ceiling:,.0f} ceiling",
            d.pool.anchor.urn)


def _per_hour(e) -> str:
    if e.standing_usd_per_hour is None:
        return f"${e.usd_per_hour:,.2f}/h"
    return (f"(${e.usd_per_hour:,.2f}/h accelerators + ${e.standing_usd_per_hour:,.2f}/h standing = "
            f"${e.usd_per_hour + e.standing_usd_per_hour:,.2f}/h)")


def _judge_six_pd(args, c, cfg, ceiling: float, why: str, report_violation) -> None:
    hints, source = c.workload(cfg)
    tokens = number(cfg.get("trainTokens"))
    if hints is None or tokens is None:
        not_applicable(args, f"{why}; with model_params_b the 6PD fallback needs trainTokens in the config"
                       if hints is not None else why)
        return
    pools = c.sized_pools
    if not pools:
        not_applicable(args, "no accelerator pool of known size")
        return
    pool = max(pools, key=lambda p: p.accelerators)
    # Priced where and as it is bought, as AIC-CST-002 prices it: the stack's region and the pool's
    # capacity type (a TPU host by its chips); with no region found, the reference price, said so.
    acc = pool.instance.accelerator
    region, capacity = stack_region(c.index, pool.instance.cloud), pool_capacity(c.index, pool)
    price = node_price(pool.instance, region, capacity)
    if price is None or not acc.bf16_tflops:
        missing = node_price_missing(pool.instance, region, capacity) if price is None else \
            f"no catalog BF16 peak for {pool.instance.name}"
        report_violation(f"{pool.label()}: {missing}: cannot show training stays under ${ceiling:,.0f}",
                         pool.anchor.urn)
        return
    mfu = number_or(cfg, "assumedMfu", DEFAULT_ASSUMED_MFU)
    flops = 6 * hints.model_params_b * 1e9 * tokens
    hours = flops / (mfu * acc.bf16_tflops * 1e12 * pool.accelerators) / 3600
    cost = hours * price.usd_per_hour * (pool.nodes or 0)
    if cost > ceiling:
        report_violation(
            f"{pool.label()}: 6 x {hints.model_params_b:g}B parameters ({source}) x {tokens:.3g} tokens = "
            f"{flops:.3g} FLOPs at an assumed {100 * mfu:g} % MFU of {pool.accelerators} x {acc.bf16_tflops:g} TFLOP/s "
            f"= {hours / 24:,.1f} days x ${price.usd_per_hour * (pool.nodes or 0):,.2f}/h ({price.basis}) = "
            f"${cost:,.0f} > ${ceiling:,.0f} ceiling (rough: describe workload.model for the training model's "
            f"estimate)",
            pool.anchor.urn)


POLICY = StackValidationPolicy(
    name=ID,
    display_name="train-cost-ceiling",
    description="When a ceiling is configured, training the workload to its token count costs at most that many "
                "US$ (the training model's days x list price; with only model_params_b, 6 x P x D FLOPs at an "
                "assumed 40 % MFU for the config's trainTokens).",
    severity=Severity.MEDIUM,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=(
        "Train on fewer tokens, use a layout or accelerator with a better price per token (`aicluster estimate "
        "--compare`), or raise maxTrainUsd in the policy config; the message shows days, $/h and MFU."),
    config_schema=schema(
        maxTrainUsd={"type": "number", "minimum": 0,
                     "description": "Ceiling in US$ for training to the token count (unset: rule off)."},
        trainTokens={"type": "number", "minimum": 0,
                     "description": "Tokens to train on for the 6PD fallback when only model_params_b is known."},
        assumedMfu={"type": "number", "exclusiveMinimum": 0, "maximum": 1, "default": DEFAULT_ASSUMED_MFU,
                    "description": "Model FLOPs utilization the 6PD fallback assumes."},
        poolNodes=POOL_NODES),
    tags=["cost", "workload", "aws", "gcp"],
    validate=validate,
)
