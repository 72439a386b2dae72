"""The plan's "Standing cost" section (plan_report._standing_lines, from design/standing_cost.py):
every stack's plan shows what it pays with zero compute nodes up, in text, markdown and JSON."""
from __future__ import annotations

import json

import pytest

from aicluster.commands.plan_report import _standing_lines, markdown, text, to_json
from aicluster.design.standing_cost import standing_cost
from tests.support.stack_plans import STACK_NAMES, stack_result

HEADING = "Standing cost (paid with zero compute nodes up)"


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_every_stack_plan_has_the_standing_cost_section(stack):
    d = stack_result(stack).design
    lines = _standing_lines(d)
    assert lines[:2] == ["", HEADING]
    cost = standing_cost(d)
    assert len([ln for ln in lines if ln.startswith("  usage-priced: ")]) == len(cost.usage_notes)
    (total,) = [ln for ln in lines if ln.startswith("  total ")]
    assert f"${cost.usd_per_hour:,.2f}/h  ${cost.usd_per_month:,.2f}/month (730 h)" in total
    for line in cost.lines:
        assert any(ln.startswith(f"  {line.item:<32} ") and ln.endswith(line.what) for ln in lines)


def test_text_markdown_and_json_carry_it():
    result = stack_result("aws-p5-slurm")
    body = "\n".join(text(result))
    assert f"\n{HEADING}\n  FSx for Lustre " in body
    assert "  NAT gateway                      $0.0450/h  $32.85/month        1 gateway(s)" in body
    assert f"### {HEADING}" in "\n".join(markdown(result))
    doc = json.loads(json.dumps(to_json(result)))
    cost = doc["standing_cost"]
    assert cost["hours_per_month"] == 730 and cost["usd_per_month"] == pytest.approx(cost["usd_per_hour"] * 730, abs=0.1)   # each rounded
    fsx = next(ln for ln in cost["lines"] if ln["item"] == "FSx for Lustre")
    assert fsx["usd_per_month"] == pytest.approx(8160.0) and "PERSISTENT_2-500" in fsx["basis"]
    assert any(n.startswith("NAT gateway data: $0.045 per GB") for n in cost["usage_notes"])
