"""AIC-CST-002 cost-ceiling, over hand-written stacks."""
from __future__ import annotations

from tests.support import handwritten as hw

RULE = "AIC-CST-002"


def test_off_without_a_ceiling():
    verdict = hw.check(RULE, lambda: hw.efa_cluster(nodes=16))
    assert verdict.status == "n/a" and "maxUsdPerHour" in verdict.not_applicable


def test_under_the_ceiling_passes():
    assert hw.check(RULE, lambda: hw.efa_cluster(nodes=16), {"maxUsdPerHour": 1000}).status == "pass"


def test_over_the_ceiling_fails_with_the_catalog_prices():
    verdict = hw.check(RULE, lambda: hw.efa_cluster(nodes=64), {"maxUsdPerHour": 2000})
    assert verdict.status == "fail"
    assert "$3,522.56/h at max nodes (64 x p5.48xlarge $3,522.56/h; list price us-east-1 2026-07) > $2,000.00/h" \
        in hw.messages(verdict)


def test_a_type_without_a_price_cannot_be_shown_to_fit():
    verdict = hw.check(RULE, lambda: hw.efa_cluster(nodes=2, instance_type="p5e.48xlarge"), {"maxUsdPerHour": 2000})
    assert verdict.status == "fail" and "no catalog price for p5e.48xlarge" in hw.messages(verdict)
