"""The cluster's monthly budget (spec `cost`), designed: the amount, the alerts and the names both
clouds give it, and the plan's line. Pure; aws/budget.py and gcp/budget.py turn it into resources.

What a budget counts is what carries the cluster's own tag or label, `aicluster-cluster=<name>`,
which every resource aicluster makes carries (ClusterContext.labels):
- AWS Budgets filters cost by a cost allocation tag (cost filter TagKeyValue, "user:<key>$<value>",
  AWS CLI reference, `aws budgets create-budget`). A user-defined tag counts only once it is
  activated as a cost allocation tag in the Billing console, and only for costs from then on
  (AWS Billing user guide, "Activating user-defined cost allocation tags"): until then the budget
  counts nothing. docs/operating.md says so.
- A Cloud Billing budget filters by one label (Budget API, Filter.labels: a single label and value)
  and, given the project number, by the project (Filter.projects takes projects/<number>; an id is
  read back as a number and the provider sees a change on every refresh).
"""
from __future__ import annotations

from dataclasses import dataclass

from aicluster.spec.cost import CostSpec, forecast_pcts

CLUSTER_TAG = "aicluster-cluster"     # ClusterContext.labels: on every resource, AWS tag and GCP label


@dataclass(frozen=True)
class BudgetDesign:
    """A monthly cost budget of one cluster.

    cluster: the cluster's name (the budget's name, and the tag or label value it counts).
    monthly_usd: the amount per calendar month, US dollars.
    actual_pcts / forecast_pcts: the percentages of it where actual / forecast spend alerts.
    billing_account / project_number: gcp only (spec cost.billing_account, cost.project_number).
    """
    cluster: str
    cloud: str
    monthly_usd: float
    actual_pcts: tuple[int, ...]
    forecast_pcts: tuple[int, ...] = ()
    billing_account: str | None = None
    project_number: str | None = None

    @property
    def aws_name(self) -> str:
        """AWS budget name: <= 100 characters, no ':' or '\\' (cluster names are [a-z0-9-], <= 32)."""
        return f"aicluster-{self.cluster}-monthly"

    @property
    def gcp_display_name(self) -> str:
        """Cloud Billing budget display name: <= 60 characters (here at most 48)."""
        return f"aicluster {self.cluster} monthly"

    @property
    def aws_tag_filter(self) -> str:
        """The TagKeyValue cost filter value of the cluster's tag (user-defined tags: `user:` prefix)."""
        return f"user:{CLUSTER_TAG}${self.cluster}"

    @property
    def amount_text(self) -> str:
        """The amount as AWS's limit_amount string: whole dollars, or dollars and cents."""
        cents = round(self.monthly_usd * 100)
        return str(cents // 100) if cents % 100 == 0 else f"{cents / 100:.2f}"

    @property
    def amount_units_nanos(self) -> tuple[str, int]:
        """The amount as Google's Money: whole units (a string) and nanos (billionths)."""
        cents = round(self.monthly_usd * 100)
        return str(cents // 100), (cents % 100) * 10_000_000


def design_budget(cluster: str, cloud: str, cost: CostSpec | None) -> BudgetDesign | None:
    if cost is None:
        return None
    return BudgetDesign(cluster=cluster, cloud=cloud, monthly_usd=float(cost.monthly_budget_usd),
                        actual_pcts=tuple(sorted(set(cost.alert_at_pct))), forecast_pcts=forecast_pcts(cost),
                        billing_account=cost.billing_account, project_number=cost.project_number)


def alerts_destination(budget: BudgetDesign, alert_emails: tuple[str, ...] | list[str]) -> str:
    """Where the budget's alerts go, in the plan's words. The AWS topic name is aws/observability.py's
    (a test holds the two equal)."""
    if budget.cloud == "aws":
        return f"SNS topic aicluster-{budget.cluster}-alerts"
    admins = f"billing account {budget.billing_account}'s admins and users"
    if not alert_emails:
        return admins
    return f"{len(alert_emails)} alert e-mail channel{'s' if len(alert_emails) != 1 else ''} and the {admins}"


def standing_note(budget: BudgetDesign, standing_usd_per_month: float) -> str | None:
    """Say so when the cluster's standing cost alone (design/standing_cost.py: what it pays with no
    compute node up) passes an alert: that alert then fires every month, compute or not."""
    passed = [p for p in budget.actual_pcts if standing_usd_per_month > budget.monthly_usd * p / 100]
    if not passed:
        return None
    return (f"budget: the standing cost alone, ${standing_usd_per_month:,.0f}/month, passes the "
            f"{'/'.join(map(str, passed))} % alert{'s' if len(passed) > 1 else ''} every month")


def budget_line(budget: BudgetDesign, alert_emails: tuple[str, ...] | list[str] = ()) -> str:
    """`budget $60,000/month: alerts at 50/80/100 % actual, 100 % forecast -> SNS topic aicluster-x-alerts`"""
    pcts = "/".join(map(str, budget.actual_pcts))
    forecast = f", {'/'.join(map(str, budget.forecast_pcts))} % forecast" if budget.forecast_pcts else ""
    return (f"budget ${budget.monthly_usd:,.2f}".removesuffix(".00") + f"/month: alerts at {pcts} % actual"
            f"{forecast} -> {alerts_destination(budget, alert_emails)}")
