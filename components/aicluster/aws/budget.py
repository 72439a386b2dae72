"""aicluster:aws:ClusterBudget - the cluster's monthly AWS Budgets cost budget (spec `cost`,
design/budget.py), alerting into the cluster's alerts SNS topic, the one AMP's alert manager uses
(aws/observability.py): one place to subscribe to, for both kinds of alert.

- The budget: COST, MONTHLY, in USD, over the costs tagged aicluster-cluster=<name> (cost filter
  TagKeyValue). The tag must be activated as a cost allocation tag in Billing, or the budget
  counts nothing (docs/operating.md).
- One notification per percentage: ACTUAL at each of alert_at_pct, FORECASTED at those from 100
  up; each delivered to the topic (a notification takes one SNS subscriber; a budget at most ten
  notifications, catalog/limits.yaml).
- The topic lets AWS Budgets publish only for this account (`budgets_topic_statement`: the
  Budgets user guide's "Creating an Amazon SNS topic for budget notifications", with
  aws:SourceAccount and aws:SourceArn arn:<partition>:budgets::<account>:*), and the topic's key
  lets AWS Budgets encrypt what it publishes (`budgets_key_statement`): SNS encrypts a message with
  the topic's key under the publisher's identity, so a publisher the key policy does not name gets
  KMS access denied and its notification is dropped (SNS developer guide, "Configuring AWS KMS
  permissions" / "Enable compatibility between event sources from AWS services and encrypted
  topics"). ObservabilityBackend adds the topic statement when `budget_alerts` is set; the key
  statement is always there, so that adding a budget never changes the protected key.
"""
from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from aicluster.design.budget import BudgetDesign
from aicluster.design.model import ClusterContext

BUDGETS_SERVICE = "budgets.amazonaws.com"


def _partition_account(arn: str) -> tuple[str, str]:
    parts = arn.split(":")
    return parts[1], parts[4]


def budgets_topic_statement(topic_arn: str) -> dict:
    """AWS Budgets may publish to the topic, for this account's budgets only."""
    partition, account = _partition_account(topic_arn)
    return {"Sid": "BudgetsPublishAlerts", "Effect": "Allow", "Principal": {"Service": BUDGETS_SERVICE},
            "Action": "sns:Publish", "Resource": topic_arn,
            "Condition": {"StringEquals": {"aws:SourceAccount": account},
                          "ArnLike": {"aws:SourceArn": f"arn:{partition}:budgets::{account}:*"}}}


def budgets_key_statement(arn_in_account: str) -> dict:
    """AWS Budgets may use the topic's key (a data key per message, and decrypting it), for this
    account's budgets only (the same conditions as the topic's): without it an encrypted topic
    drops every budget notification. `arn_in_account`: any ARN of the account (its partition and id)."""
    partition, account = _partition_account(arn_in_account)
    return {"Sid": "BudgetsEncryptAlerts", "Effect": "Allow", "Principal": {"Service": BUDGETS_SERVICE},
            "Action": ["kms:GenerateDataKey*", "kms:Decrypt"], "Resource": "*",
            "Condition": {"StringEquals": {"aws:SourceAccount": account},
                          "ArnLike": {"aws:SourceArn": f"arn:{partition}:budgets::{account}:*"}}}


def notifications(budget: BudgetDesign, topic_arn: pulumi.Input[str]) -> list[aws.budgets.BudgetNotificationArgs]:
    """ACTUAL at every percentage, FORECASTED at the forecast ones, each to the topic."""
    kinds = [("ACTUAL", p) for p in budget.actual_pcts] + [("FORECASTED", p) for p in budget.forecast_pcts]
    return [aws.budgets.BudgetNotificationArgs(
        notification_type=kind, comparison_operator="GREATER_THAN", threshold=float(pct),
        threshold_type="PERCENTAGE", subscriber_sns_topic_arns=[topic_arn]) for kind, pct in kinds]


@dataclass(frozen=True)
class ClusterBudgetArgs:
    """context: the cluster's name and tags. budget: `ClusterDesign.budget`.
    topic_arn: the alerts topic (`ObservabilityBackend.alerts_topic_arn`), whose policy and key
    already let AWS Budgets publish (ObservabilityBackendArgs.budget_alerts).
    depends_on: what must exist first (`ObservabilityBackend.alerts_topic_policy`): AWS Budgets
    refuses a notification to a topic it may not publish to."""
    context: ClusterContext
    budget: BudgetDesign
    topic_arn: pulumi.Input[str]
    depends_on: tuple[pulumi.Resource, ...] = ()


class ClusterBudget(pulumi.ComponentResource):
    budget_name: pulumi.Output[str]

    def __init__(self, name: str, args: ClusterBudgetArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:aws:ClusterBudget", name, None, opts)
        budget = args.budget
        resource = aws.budgets.Budget(
            f"{name}-budget", name=budget.aws_name, budget_type="COST", time_unit="MONTHLY",
            limit_amount=budget.amount_text, limit_unit="USD",
            cost_filters=[aws.budgets.BudgetCostFilterArgs(name="TagKeyValue", values=[budget.aws_tag_filter])],
            notifications=notifications(budget, args.topic_arn), tags=args.context.labels("alerts"),
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.depends_on)))
        self.budget_name = resource.name
        self.register_outputs({"budget_name": resource.name})
