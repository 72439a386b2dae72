"""aicluster:gcp:ClusterBudget - the cluster's monthly Cloud Billing budget (spec `cost`,
design/budget.py), alerting where the cluster's monitoring alerts go (gcp/observability.py).

- The budget lives on the billing account (cost.billing_account), not in the project: it counts
  the usage labelled aicluster-cluster=<name> (Filter.labels takes one label and one value) and,
  given cost.project_number, of this project only (Filter.projects takes projects/<number>), each
  calendar month, in USD (the billing account's currency: the API refuses another).
- Threshold rules: CURRENT_SPEND at each of alert_at_pct, FORECASTED_SPEND at those from 100 up
  (threshold_percent is a fraction: 0.5 is 50 %).
- Delivery: the billing account's administrators and users, by default, as every Cloud Billing
  budget; and (all_updates_rule) the same e-mail notification channels every alert policy notifies
  (monitoring.alert_emails; a budget takes at most 5, which the spec holds it to). With no alert
  e-mails there is no all_updates_rule: it must name a channel or a Pub/Sub topic
  (terraform-provider-google resource_billing_budget.go, AtLeastOneOf), and the default recipients
  need none.
- The Cloud Billing Budget API (billingbudgets.googleapis.com) is enabled in the project, which
  the google provider bills the call to, and left on when the stack goes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pulumi
import pulumi_gcp as gcp

from aicluster.design.budget import CLUSTER_TAG, BudgetDesign
from aicluster.design.model import ClusterContext
from aicluster.gcp.common import label_value, project

BUDGET_API = "billingbudgets.googleapis.com"


def threshold_rules(budget: BudgetDesign) -> list[gcp.billing.BudgetThresholdRuleArgs]:
    rules = [(p, "CURRENT_SPEND") for p in budget.actual_pcts] + [(p, "FORECASTED_SPEND") for p in budget.forecast_pcts]
    return [gcp.billing.BudgetThresholdRuleArgs(threshold_percent=pct / 100, spend_basis=basis) for pct, basis in rules]


def budget_filter(budget: BudgetDesign) -> gcp.billing.BudgetBudgetFilterArgs:
    return gcp.billing.BudgetBudgetFilterArgs(
        calendar_period="MONTH", labels={CLUSTER_TAG: label_value(budget.cluster)},
        projects=[f"projects/{budget.project_number}"] if budget.project_number else None)


@dataclass(frozen=True)
class ClusterBudgetArgs:
    """context: the cluster's name. budget: `ClusterDesign.budget` (gcp: billing_account set).
    notification_channels: the alert e-mail channels (`ObservabilityBackend.alert_channels`), at
    most 5. depends_on: what the budget waits for (the channels' APIs)."""
    context: ClusterContext
    budget: BudgetDesign
    notification_channels: Sequence[pulumi.Input[str]] = ()
    depends_on: Sequence[pulumi.Resource] = ()


class ClusterBudget(pulumi.ComponentResource):
    budget_name: pulumi.Output[str]      # billingAccounts/<account>/budgets/<id>

    def __init__(self, name: str, args: ClusterBudgetArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:gcp:ClusterBudget", name, None, opts)
        budget = args.budget
        if budget.billing_account is None:      # the spec requires it on gcp (spec/cost.py)
            raise ValueError("a GCP budget needs a billing account")
        api = gcp.projects.Service(f"{name}-api", project=project(), service=BUDGET_API, disable_on_destroy=False,
                                   disable_dependent_services=False, opts=pulumi.ResourceOptions(parent=self))
        units, nanos = budget.amount_units_nanos
        resource = gcp.billing.Budget(
            f"{name}-budget", billing_account=budget.billing_account, display_name=budget.gcp_display_name,
            amount=gcp.billing.BudgetAmountArgs(specified_amount=gcp.billing.BudgetAmountSpecifiedAmountArgs(
                currency_code="USD", units=units, nanos=nanos or None)),
            budget_filter=budget_filter(budget), threshold_rules=threshold_rules(budget),
            all_updates_rule=gcp.billing.BudgetAllUpdatesRuleArgs(
                monitoring_notification_channels=list(args.notification_channels), schema_version="1.0")
            if args.notification_channels else None,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[api, *args.depends_on]))
        self.budget_name = resource.name
        self.register_outputs({"budget_name": resource.name})
