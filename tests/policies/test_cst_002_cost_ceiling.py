"""AIC-CST-002 cost-ceiling, over hand-written stacks and every example stack: each pool priced in
the stack's region on its capacity type (catalog/prices.yaml), never another region's price."""
from __future__ import annotations

import pytest

from tests.support import handwritten as hw
from tests.support.stack_plans import STACK_NAMES, stack_result

RULE = "AIC-CST-002"


def test_off_without_a_ceiling():
    verdict = hw.check(RULE, lambda: hw.efa_cluster(nodes=16))
    assert verdict.status == "n/a" and "maxUsdPerHour" in verdict.not_applicable


def test_under_the_ceiling_passes():
    assert hw.check(RULE, lambda: hw.efa_cluster(nodes=16), {"maxUsdPerHour": 1000}).status == "pass"


def test_over_the_ceiling_fails_with_the_catalog_prices():
    verdict = hw.check(RULE, lambda: hw.efa_cluster(nodes=64), {"maxUsdPerHour": 2000})
    assert verdict.status == "fail"
    text = hw.messages(verdict)
    assert text.startswith("$3,522.56/h at max nodes (64 x p5.48xlarge on-demand $3,522.56/h "
                           "(us-east-1 on-demand list price per instance-hour; aws/karpenter-provider-aws")
    assert "checked 2026-11-28)) > $2,000.00/h ceiling" in text


def test_a_type_without_a_price_in_the_region_cannot_be_shown_to_fit():
    """p5e has a Capacity Block rate in us-east-2 only: us-east-1 on-demand is not borrowed from anywhere."""
    verdict = hw.check(RULE, lambda: hw.efa_cluster(nodes=2, instance_type="p5e.48xlarge"), {"maxUsdPerHour": 2000})
    assert verdict.status == "fail"
    assert "no catalog price for p5e.48xlarge in us-east-1 (on-demand): cannot show" in hw.messages(verdict)


def _pool(market: str | None, zone: str, instance_type: str, nodes: int):
    def program():
        _, subnet, sg = hw.network("hw", zone=zone)
        lt = hw.launch_template("hw-lt", subnet, sg, instance_type=instance_type, zone=zone, market=market)
        hw.autoscaling_group("hw-asg", lt, subnet, max_size=nodes)
    return program


def test_a_spot_pool_costs_its_regions_spot_figure():
    """2 x p4d.24xlarge on Spot (instanceMarketOptions) in us-east-1: the median of the region's zone
    prices ($6.79 each), not the on-demand $21.96 the rule charged before prices had a capacity type."""
    program = _pool("spot", "us-east-1a", "p4d.24xlarge", 2)
    assert hw.check(RULE, program, {"maxUsdPerHour": 14}).status == "pass"
    verdict = hw.check(RULE, program, {"maxUsdPerHour": 13})
    assert verdict.status == "fail"
    assert "2 x p4d.24xlarge spot $13.58/h (us-east-1 spot, median of 3 zone(s) per instance-hour, " \
        "range $5.093-$9.611" in hw.messages(verdict)


def test_a_capacity_block_is_priced_at_its_published_rate():
    verdict = hw.check(RULE, _pool("capacity-block", "us-east-1a", "p5.48xlarge", 2), {"maxUsdPerHour": 70})
    assert verdict.status == "fail"
    assert "2 x p5.48xlarge capacity-block $78.66/h (us-east-1 Capacity Block effective hourly rate" \
        in hw.messages(verdict)


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_every_stack_has_a_price_and_the_pack_agrees_with_the_plan(stack):
    """The plan's figure (design: region, each pool's capacity type) is what the pack reads off the
    stack's resources: a ceiling just above it passes, just below fails, on both clouds."""
    from aicluster.commands.check import resolve_config, run_policies
    from aicluster.design.balance import from_design

    result = stack_result(stack)
    usd = from_design(result.design).usd_per_hour
    assert usd is not None and usd > 0, [p.price_basis for p in from_design(result.design).pools]

    def status(ceiling: float) -> str:
        module = hw.rule(RULE)
        config = resolve_config([module.POLICY], {RULE: {"maxUsdPerHour": ceiling}})
        (v,) = run_policies(result.plan, config, rules=[module])
        return v.status

    assert status(usd * 1.001) == "pass"
    assert status(usd * 0.999) == "fail"


def test_a_gcp_spot_pool_is_read_off_its_template_and_priced_at_the_regions_spot_figure():
    """gcp-a3mega-slurm on Spot: the instance template's scheduling.provisioningModel SPOT makes the
    pack price us-east4's Spot figure, as the plan does from the spec (one replan, cached)."""
    from aicluster.catalog.pricing import instance_price
    from aicluster.commands.check import resolve_config, run_policies
    from aicluster.design.balance import from_design
    from tests.support.stack_plans import result_with_spec, stack_spec_data

    spec = stack_spec_data("gcp-a3mega-slurm")
    (gpu,) = [p for p in spec["pools"] if p["instance_type"] == "a3-megagpu-8g"]
    gpu["capacity"] = "spot"
    result = result_with_spec("gcp-a3mega-slurm", spec)
    spot = instance_price("gcp", "a3-megagpu-8g", "us-east4", "spot").usd_per_hour
    usd = from_design(result.design).usd_per_hour
    assert usd == pytest.approx(gpu["max_nodes"] * spot)
    module = hw.rule(RULE)
    for ceiling, status in ((usd * 1.001, "pass"), (usd * 0.999, "fail")):
        config = resolve_config([module.POLICY], {RULE: {"maxUsdPerHour": ceiling}})
        (v,) = run_policies(result.plan, config, rules=[module])
        assert v.status == status, hw.messages(v)
    assert "a3-megagpu-8g spot" in hw.messages(v) and "us-east4 spot per instance-hour, one regional price" in hw.messages(v)
