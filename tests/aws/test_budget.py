"""aicluster:aws:ClusterBudget (aws/budget.py) in the aws-p4d-small stack (spec cost: $60,000 a
month, alerts at 50/80/100 %, forecast on): an AWS Budgets cost budget over the cluster's tag, one
notification per threshold into the alerts topic monitoring uses, a topic policy that lets AWS
Budgets publish for this account only and a key policy that lets it encrypt, and the plan's line."""
from __future__ import annotations

import json

import pytest

from aicluster.aws.observability import alert_key_policy, alert_topic_policy
from aicluster.offline.capture import reveal
from tests.support.stack_plans import stack_result

STACK = "aws-p4d-small"
BUDGET = "aws:budgets/budget:Budget"
TOPIC_ARN = "arn:aws:sns:us-west-2:123456789012:aicluster-x-alerts"
WORKSPACE_ARN = "arn:aws:aps:us-west-2:123456789012:workspace/ws-1"


@pytest.fixture(scope="module")
def result():
    return stack_result(STACK)


def _topic(plan):
    (topic,) = [t for t in plan.of_type("aws:sns/topic:Topic") if t.inputs["name"].endswith("-alerts")]
    return topic


def test_the_budget_is_a_monthly_usd_cost_budget_over_the_clusters_tag(result):
    (budget,) = result.plan.of_type(BUDGET)
    i = reveal(budget.inputs)
    assert (i["name"], i["budgetType"], i["timeUnit"], i["limitAmount"], i["limitUnit"]) == \
        ("aicluster-p4d-small-monthly", "COST", "MONTHLY", "60000", "USD")
    assert i["costFilters"] == [{"name": "TagKeyValue", "values": ["user:aicluster-cluster$p4d-small"]}]
    assert i["tags"]["aicluster-cluster"] == "p4d-small"


def test_one_notification_per_threshold_into_the_monitoring_topic(result):
    (budget,) = result.plan.of_type(BUDGET)
    topic_arn = _topic(result.plan).outputs["arn"]
    notes = reveal(budget.inputs)["notifications"]
    assert sorted((n["notificationType"], n["threshold"]) for n in notes) == \
        [("ACTUAL", 50.0), ("ACTUAL", 80.0), ("ACTUAL", 100.0), ("FORECASTED", 100.0)]
    assert all(n["comparisonOperator"] == "GREATER_THAN" and n["thresholdType"] == "PERCENTAGE"
               and n["subscriberSnsTopicArns"] == [topic_arn] and not n.get("subscriberEmailAddresses")
               for n in notes)


def test_the_budget_waits_for_the_topic_policy_that_lets_budgets_publish(result):
    (budget,) = result.plan.of_type(BUDGET)
    (policy,) = [p for p in result.plan.of_type("aws:sns/topicPolicy:TopicPolicy") if p.name.endswith("-alerts-policy")]
    assert policy.urn in budget.dependencies
    statements = {s["Sid"]: s for s in json.loads(reveal(policy.inputs["policy"]))["Statement"]}
    account = _topic(result.plan).outputs["arn"].split(":")[4]
    budgets = statements["BudgetsPublishAlerts"]
    assert budgets["Principal"] == {"Service": "budgets.amazonaws.com"} and budgets["Action"] == "sns:Publish"
    assert budgets["Condition"] == {"StringEquals": {"aws:SourceAccount": account},
                                    "ArnLike": {"aws:SourceArn": f"arn:aws:budgets::{account}:*"}}
    assert "AmpPublishesAlerts" in statements       # AMP still publishes


def test_the_topics_key_lets_budgets_encrypt_for_this_account(result):
    (key,) = [k for k in result.plan.of_type("aws:kms/key:Key") if k.name.endswith("-alerts-key")]
    statements = {s["Sid"]: s for s in json.loads(reveal(key.inputs["policy"]))["Statement"]}
    budgets = statements["BudgetsEncryptAlerts"]
    assert budgets["Principal"] == {"Service": "budgets.amazonaws.com"}
    assert budgets["Action"] == ["kms:GenerateDataKey*", "kms:Decrypt"]
    account = _topic(result.plan).outputs["arn"].split(":")[4]
    assert budgets["Condition"] == {"StringEquals": {"aws:SourceAccount": account},
                                    "ArnLike": {"aws:SourceArn": f"arn:aws:budgets::{account}:*"}}
    assert key.protect        # still the stateful key it was: only its policy gained a statement


def test_without_a_budget_only_amp_may_publish_to_the_topic():
    topic = alert_topic_policy(TOPIC_ARN, WORKSPACE_ARN)
    assert [s["Sid"] for s in topic["Statement"]] == ["AmpPublishesAlerts"]
    with_budget = alert_topic_policy(TOPIC_ARN, WORKSPACE_ARN, budgets=True)["Statement"]
    assert with_budget[-1]["Condition"]["ArnLike"]["aws:SourceArn"] == "arn:aws:budgets::123456789012:*"
    assert [s["Sid"] for s in alert_key_policy(WORKSPACE_ARN)["Statement"]] == \
        ["AccountAdministersTheKey", "AmpEncryptsAlerts", "BudgetsEncryptAlerts"]


def test_adding_a_budget_leaves_every_stateful_resource_untouched(result):
    """The alerts key is stateful and protected: a budget added to (or removed from) the spec
    must change nothing of it, nor of any other stateful resource (the replacement-safety rule)."""
    from tests.support.replacement import differences
    from tests.support.stack_plans import plan_with_spec, stack_spec_data

    without = {k: v for k, v in stack_spec_data(STACK).items() if k != "cost"}
    before = plan_with_spec(STACK, without)
    assert not before.of_type(BUDGET)
    assert not differences(before, result.plan, allow_tags=False)


def test_the_plan_shows_the_budget_with_the_topic_it_alerts(result):
    from aicluster.commands.plan_report import text

    lines = [line.strip() for line in text(result) if "budget $" in line]
    topic = _topic(result.plan).inputs["name"]
    assert lines == [f"budget $60,000/month: alerts at 50/80/100 % actual, 100 % forecast -> SNS topic {topic}"]


def test_the_plan_says_when_the_standing_cost_alone_passes_an_alert(result):
    """The same design with a budget below twice its standing cost (no new plan)."""
    import dataclasses

    from aicluster.commands.plan_report import _budget_lines
    from aicluster.design.standing_cost import standing_cost

    design = result.design
    standing = standing_cost(design).usd_per_month
    low = dataclasses.replace(design, budget=dataclasses.replace(design.budget, monthly_usd=standing * 1.5))
    lines = [line.strip() for line in _budget_lines(low)]
    assert lines[1] == f"budget: the standing cost alone, ${standing:,.0f}/month, passes the 50 % alert every month"
    assert len(_budget_lines(design)) == 1          # $60,000: no alert is passed while idle
