"""`cost`: a monthly budget for the cluster, with alerts at percentages of it, delivered where the
cluster's monitoring alerts go (an AWS Budgets budget to the alerts SNS topic; a Cloud Billing
budget on the billing account to the alert e-mail channels). Shape and meaning both live here;
spec/cluster.py only hangs the section on the spec and calls `cost_problems`.
"""
from __future__ import annotations

import re
from typing import Annotated, Sequence

from pydantic import Field

from aicluster.catalog import load_limits
from aicluster.errors import Problem
from aicluster.spec.workload import SpecModel

# A Cloud Billing account id: three groups of six upper-case hex digits ("Cloud Billing API,
# billingAccounts: name billingAccounts/{billing_account_id}, e.g. 012345-567890-ABCDEF").
BILLING_ACCOUNT = re.compile(r"[0-9A-F]{6}-[0-9A-F]{6}-[0-9A-F]{6}")
# A project number: digits only (Resource Manager API, Project.projectNumber is an int64).
PROJECT_NUMBER = r"^[1-9][0-9]{0,18}$"
DEFAULT_ALERTS = (50, 80, 100)

Percent = Annotated[int, Field(strict=True, ge=1, le=1000)]


class CostSpec(SpecModel):
    """A monthly budget: alerts as spend passes percentages of it."""

    monthly_budget_usd: Annotated[float, Field(strict=True, ge=0.01, le=1e9, allow_inf_nan=False)] = Field(
        description="The cluster's budget per calendar month, in US dollars. aws: an AWS Budgets cost budget "
                    "over the resources tagged aicluster-cluster=<name> (activate that tag as a cost allocation "
                    "tag in Billing, or the budget counts nothing); gcp: a Cloud Billing budget over the "
                    "resources labelled aicluster-cluster=<name>, in this project only with project_number "
                    "(the billing account's currency must be USD).")
    alert_at_pct: Annotated[tuple[Percent, ...], Field(min_length=1, max_length=10)] = Field(
        DEFAULT_ALERTS, description="Alert when the month's actual spend passes each of these percentages of the "
                                    "budget (1-1000). Default: 50, 80, 100.")
    forecast: Annotated[bool, Field(strict=True)] = Field(
        True, description="Also alert when the month's forecast spend passes the budget: at every percentage "
                          "of alert_at_pct from 100 up (at 100 if none is).")
    billing_account: Annotated[str, Field(strict=True, min_length=1, max_length=64)] | None = Field(
        None, description="gcp, required: the Cloud Billing account the project is billed to "
                          "(XXXXXX-XXXXXX-XXXXXX; `gcloud billing projects describe PROJECT`); the budget lives "
                          "on it. aws: leave it out (the budget belongs to the deploying account).")
    project_number: Annotated[str, Field(strict=True, pattern=PROJECT_NUMBER)] | None = Field(
        None, description="gcp, optional: the project's number (`gcloud projects describe PROJECT "
                          "--format='value(projectNumber)'`), to count the project's spend only; the budget "
                          "filter takes a number, not the project id. Without it the budget counts whatever "
                          "the billing account pays for that carries the cluster's label.")


def forecast_pcts(cost: CostSpec) -> tuple[int, ...]:
    """The percentages a forecast alert is set at: a forecast past half the budget is true most of a
    month and says nothing; a forecast past the budget is the early warning a team acts on."""
    if not cost.forecast:
        return ()
    return tuple(sorted({p for p in cost.alert_at_pct if p >= 100})) or (100,)


def cost_problems(cloud: str, cost: CostSpec | None, alert_emails: Sequence[str], at: str = "cost") -> list[Problem]:
    if cost is None:
        return []
    limits = load_limits()
    problems = []
    seen = [p for i, p in enumerate(cost.alert_at_pct) if p in cost.alert_at_pct[:i]]
    if seen:
        problems.append(Problem(f"{at}.alert_at_pct", list(cost.alert_at_pct),
                                f"each percentage once (repeated: {', '.join(map(str, sorted(set(seen))))})"))
    if cloud == "aws":
        for key in ("billing_account", "project_number"):
            if getattr(cost, key) is not None:
                problems.append(Problem(f"{at}.{key}", getattr(cost, key), "leave it out on aws: the budget "
                                        "belongs to the account that deploys the stack"))
        most = limits["aws_budget_notifications"].value
        count = len(set(cost.alert_at_pct)) + len(forecast_pcts(cost))
        if count > most:
            problems.append(Problem(f"{at}.alert_at_pct", list(cost.alert_at_pct),
                                    f"at most {most} alerts in all on aws, forecast alerts included ({count} here; "
                                    f"{limits['aws_budget_notifications'].source})"))
        return problems
    account = cost.billing_account
    if account is None:
        problems.append(Problem(f"{at}.billing_account", None, "required on gcp: a Cloud Billing budget lives on "
                                "the billing account (XXXXXX-XXXXXX-XXXXXX; `gcloud billing projects describe "
                                "PROJECT` shows it)"))
    elif not BILLING_ACCOUNT.fullmatch(account):
        guess = account.strip().removeprefix("billingAccounts/").upper()
        problems.append(Problem(f"{at}.billing_account", account, "a billing account id: XXXXXX-XXXXXX-XXXXXX, "
                                "upper-case hex digits", guess if BILLING_ACCOUNT.fullmatch(guess) else None))
    most = limits["gcp_budget_channels"].value
    if len(alert_emails) > most:
        problems.append(Problem("monitoring.alert_emails", f"{len(alert_emails)} addresses",
                                f"at most {most} with {at}.monthly_budget_usd on gcp: the budget notifies every "
                                f"alert e-mail channel and takes at most {most} "
                                f"({limits['gcp_budget_channels'].source})"))
    return problems
