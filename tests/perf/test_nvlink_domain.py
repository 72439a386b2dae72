"""The training model knows the NVLink domain (issue 28 item 5): TP, CP and EP groups inside one
domain run at NVLink speed whether the domain is one HGX node or an NVL72 rack of 18 nodes; groups
that leave it (or straddle two) wait on the NICs; the search reaches past the node; the estimate
says when the domain made its layout possible."""
from __future__ import annotations

import dataclasses
import time

import pytest

from aicluster.catalog import load_catalog
from aicluster.perf import Layout, LayoutHint, ModelShape, Moe, TrainingShape, estimate, from_instance, what_if
from aicluster.perf.calibration import CALIBRATION
from aicluster.perf.hardware import placements
from aicluster.perf.nvlink import crossing
from aicluster.perf.step import step_time

AWS = load_catalog().instance_types["aws"]
# DeepSeek-V3-like (arXiv:2412.19437 section 4.2; approximations in examples/workloads/deepseek-v3-nvl72-compare.yaml).
DSV3 = ModelShape(layers=61, hidden=7168, heads=128, kv_heads=8, ffn_hidden=18432, vocab=129280, seq_len=4096,
                  moe=Moe(experts=256, top_k=8, expert_ffn_hidden=2048, shared_experts=1), head_size=128)
# NVIDIA's GB200 recipe trains it with the distributed optimizer at global batch 2048.
RECIPE = TrainingShape(global_batch_seqs=2048)
ZERO1 = LayoutHint(zero_stage=1)


def test_hardware_takes_the_domain_from_the_catalog():
    hgx = from_instance(AWS["p5en.48xlarge"], 16)
    assert (hgx.scale_up_size, hgx.per_node, hgx.domain_gpus) == (8, 8, None)
    nvl = from_instance(AWS["p6e-gb200.36xlarge"], 36)
    assert (nvl.scale_up_size, nvl.per_node, nvl.count) == (72, 4, 144)
    assert nvl.scale_up_gbs == load_catalog().accelerators["GB200"].scale_up_gbs
    # 9 nodes, half an NVL72 (an AWS UltraServer of 9): the job's 36 GPUs are its domain.
    assert from_instance(AWS["p6e-gb200.36xlarge"], 9).scale_up_size == 36


def test_placements_add_a_power_of_two_segment_on_nvl72_only():
    assert placements(from_instance(AWS["p5en.48xlarge"], 16)) == (from_instance(AWS["p5en.48xlarge"], 16),)
    whole, segment = placements(from_instance(AWS["p6e-gb200.36xlarge"], 36))
    assert (whole.count, whole.scale_up_size) == (144, 72)
    assert (segment.count, segment.scale_up_size, segment.domain_gpus, segment.paid) == (128, 64, 72, 144)
    assert "16 of 18 nodes per NVLink domain" in segment.name


@pytest.mark.parametrize("lay", [Layout(tp=16, dp=8), Layout(dp=128, ep=64)], ids=["tp16", "ep64"])
def test_a_group_beyond_the_node_runs_on_nvlink_inside_the_domain_and_on_efa_outside(lay):
    """The same 128 GPUs and layout: inside a 64-GPU slice of NVL72 the group's traffic is NVLink
    time; with the domain cut to the node (HGX-style) it is NIC time and slower."""
    nvl = placements(from_instance(AWS["p6e-gb200.36xlarge"], 36))[1]
    node_only = dataclasses.replace(nvl, scale_up_size=nvl.per_node, domain_gpus=None)
    inside, outside = (step_time(DSV3, RECIPE, hw, lay, CALIBRATION) for hw in (nvl, node_only))
    term = "exposed_tp" if lay.tp > 1 else "exposed_cp_ep"
    assert getattr(inside.breakdown, term) > 0 and inside.inter_node_s < getattr(inside.breakdown, term)
    assert getattr(outside.breakdown, term) > 3 * getattr(inside.breakdown, term)
    # 16 ranks of a fully used 72-GPU domain straddle two domains (ranks 64-79): not NVLink.
    assert not from_instance(AWS["p6e-gb200.36xlarge"], 36).fits_domain(16)


def test_search_reaches_past_the_node_on_nvl72():
    from aicluster.perf.search import space
    nvl = from_instance(AWS["p6e-gb200.36xlarge"], 36)
    sp = space(DSV3, nvl, LayoutHint(), "parallelism")
    assert max(sp.tp) == 64 and 64 in sp.ep
    assert max(space(DSV3, from_instance(AWS["p5en.48xlarge"], 18), LayoutHint(), "parallelism").tp) == 8


def test_large_moe_on_gb200_picks_a_group_beyond_8_and_says_the_domain_made_it_possible():
    """Issue 28's done-when: the estimate for a large MoE on GB200 picks a layout with TP or EP
    beyond 8 and says that the domain made it possible."""
    start = time.perf_counter()
    est = estimate(DSV3, RECIPE, what_if("gb200", 144), hint=ZERO1)
    elapsed = time.perf_counter() - start
    lay = est.best.layout
    assert lay.tp > 8 or lay.ep > 8, lay
    assert est.nvlink_domain.startswith("the NVLink domain made this layout possible")
    assert f"inside one 72-GPU NVLink domain" in est.nvlink_domain
    assert "expert all-to-all" in est.nvlink_domain and "if it crossed nodes over the NICs" in est.nvlink_domain
    assert est.to_dict()["nvlink_domain"] == est.nvlink_domain
    if est.accelerators < 576:   # the job took 16 of each domain's 18 nodes: the idle GPUs are said and paid
        assert any("64 of 576 GPUs stay idle" in w and "--segment=16" in w for w in est.warnings)
    # Both placements (all 72 GPUs of each domain, 64 of them) searched, in bounded time.
    assert est.layouts_searched > 5000 and elapsed < 10
    # The same chips with the domain cut to the node: no such layout wins, nothing to say.
    hgx = estimate(DSV3, RECIPE, what_if("b200", 72), hint=ZERO1)
    assert hgx.nvlink_domain is None and hgx.tokens_per_s < est.tokens_per_s


def test_a_fixed_group_beyond_the_domain_is_warned_with_what_to_change():
    est = estimate(DSV3, RECIPE, what_if("h200", 72), hint=LayoutHint(zero_stage=1, ep=64, tp=1))
    warning = next(w for w in est.warnings if w.startswith("model-parallel group"))
    assert "tp 1 x cp 1 x ep 64 = 64 GPUs is larger than one 8-GPU NVLink domain (one node)" in warning
    assert "expert all-to-all traffic runs over the NICs" in warning
    assert "lower ep" in warning and "larger NVLink domain (GB200/GB300 NVL72: 72 GPUs)" in warning
    assert crossing(from_instance(AWS["p5en.48xlarge"], 72), Layout(tp=8, dp=72)) is None


def test_the_cost_counts_the_idle_gpus_of_each_domain():
    """On a 64-of-72 placement the job runs 512 GPUs and the bill is for 576."""
    hw = dataclasses.replace(what_if("gb200", 144), usd_per_accelerator_hour=10.0)
    est = estimate(DSV3, RECIPE, hw, hint=ZERO1)
    assert est.usd_per_hour == 576 * 10.0
    assert est.accelerators in (512, 576)
