"""The pack's described-workload model (policies/rules/model/workload.py) against `aicluster plan`:
for a TPU pool of several slices both count every slice's chips, ICI within a slice and DCN between
slices, so AIC-MEM-002, AIC-NET-005, AIC-STO-006 and AIC-CST-003 judge the estimate the plan shows.

`aicluster` gives each slice its own GKE node pool (<pool>-<k>) or Cloud TPU VM; the pack used to
judge one of them alone (64 of 128 chips, no DCN between slices)."""
from __future__ import annotations

import importlib

import pytest

from aicluster.offline.policy_bridge import RULES_PACKAGE, load_rules, resolve_config, run_policies, stack_resources
from aicluster.design.workload import estimate_design, hardware, storage
from tests.support.stack_plans import result_with_spec, stack_spec_data

STACK = "gcp-tpu-v5p-gke"           # one v5p 4x4x4 slice: 64 chips on 16 hosts


def _two_slices(scheduler: str) -> dict:
    """The stack's v5p pool at 32 hosts: two 4x4x4 slices (multislice), on GKE or on Slurm."""
    spec = stack_spec_data(STACK)
    pool = spec["pools"][0]
    pool["max_nodes"] = 32
    if scheduler == "slurm":
        # Slurm creates every slice up front (Cloud TPU VMs): min_nodes is max_nodes.
        spec["scheduler"] = "slurm"
        spec.pop("kubernetes")
        pool["min_nodes"] = 32
    return spec


def _pack_described(plan):
    """What the pack's model derives from the planned resources: (Described, why)."""
    load_rules()
    model = importlib.import_module(f"{RULES_PACKAGE}.model")
    workload = importlib.import_module(f"{RULES_PACKAGE}.model.workload")
    return workload.described(model.build(stack_resources(plan), {}), {})


@pytest.mark.parametrize("scheduler", ["kubernetes", "slurm"])
def test_a_two_slice_tpu_pool_gives_the_pack_the_plans_hardware_and_estimate(scheduler):
    result = result_with_spec(STACK, _two_slices(scheduler))
    plan_hw, _ = hardware(result.design)
    assert (plan_hw.count, plan_hw.scale_up_size) == (128, 64)     # the plan: 2 slices of 64 chips
    d, why = _pack_described(result.plan)
    assert d is not None, why
    # Chips, slices (the ICI domain is one slice; DCN between them) and the host network: all the plan's.
    assert d.hardware == plan_hw
    assert d.hardware.name == "2 x TPU v5p 64-chip slice"
    plan_fs = storage(result.design)
    assert (d.storage.throughput_gbs, d.storage.client_gbs) == (plan_fs.throughput_gbs, plan_fs.client_gbs)
    # The estimate the four rules judge is the one the plan shows.
    plan_e = estimate_design(result.design)
    assert d.estimate.best.layout == plan_e.best.layout
    assert d.estimate.best.step_time_s == pytest.approx(plan_e.best.step_time_s)
    assert d.estimate.best.memory.total == pytest.approx(plan_e.best.memory.total)
    assert d.estimate.best.breakdown == plan_e.best.breakdown
    assert d.estimate.tokens_per_s == pytest.approx(plan_e.tokens_per_s)
    assert d.estimate.train_days == pytest.approx(plan_e.train_days)
    assert d.estimate.checkpoint.write_s == pytest.approx(plan_e.checkpoint.write_s)


def test_the_rules_name_the_whole_multislice_job_and_warn_on_its_dcn():
    """The verdicts themselves speak of 128 chips in 2 slices: NET-005 (advisory) with no exposed
    communication allowed warns of the DCN between slices, CST-003 finds no TPU price for the job."""
    plan = result_with_spec(STACK, _two_slices("kubernetes")).plan
    config = resolve_config([r.POLICY for r in load_rules()],
                            {"AIC-NET-005": {"maxExposedCommPct": 0}, "AIC-CST-003": {"maxTrainUsd": 1}})
    verdicts = {v.rule_id: v for v in run_policies(plan, config)}
    job = "2 x TPU v5p 64-chip slice (128 TPU v5p): 70.6B parameters"
    net = verdicts["AIC-NET-005"]
    assert net.status == "warn"
    assert job in net.violations[0].message and "per node between slices" in net.violations[0].message
    cost = verdicts["AIC-CST-003"]
    assert cost.status == "fail" and job in cost.violations[0].message
    assert verdicts["AIC-MEM-002"].status == "pass" and verdicts["AIC-STO-006"].status == "pass"


def test_gpu_pools_of_one_partition_give_the_pack_the_plans_job():
    """aws-gb200-slurm: two NVL72 pools of one partition are one job of 36 nodes in the plan and,
    by their templates' aicluster-partition tag, in the pack: the same hardware, clients and layout."""
    result = result_with_spec("aws-gb200-slurm", stack_spec_data("aws-gb200-slurm"))
    plan_hw, _ = hardware(result.design)
    assert plan_hw.count == 144
    d, why = _pack_described(result.plan)
    assert d is not None, why
    assert d.hardware == plan_hw
    plan_fs = storage(result.design)
    assert (d.storage.throughput_gbs, d.storage.client_gbs) == (plan_fs.throughput_gbs, plan_fs.client_gbs)
    assert d.estimate.best.layout == estimate_design(result.design).best.layout
