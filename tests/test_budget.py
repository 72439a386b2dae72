"""The spec's `cost` section (spec/cost.py) and its design (design/budget.py): what a budget is made
of, the plan's line, and every bad input as a SpecError with its path, value, what is allowed and a
close match. No plan: pure functions over parsed specs (the resources: tests/aws/test_budget.py,
tests/gcp/test_budget.py)."""
from __future__ import annotations

import pytest

from aicluster.design.budget import BudgetDesign, budget_line, design_budget
from aicluster.errors import SpecError
from aicluster.spec.cluster import parse_spec
from tests.support import stack_spec

AWS, GCP = stack_spec("aws-p4d-small"), stack_spec("gcp-a3mega-slurm")
ACCOUNT = "012345-6789AB-CDEF01"


def _spec(base: dict, cost: dict | None, **extra) -> dict:
    spec = {k: v for k, v in base.items() if k != "cost"} | extra
    if cost is not None:
        spec["cost"] = cost
    return spec


def _problem(base: dict, cost: dict | None, **extra):
    with pytest.raises(SpecError) as caught:
        parse_spec(_spec(base, cost, **extra))
    return caught.value.problems


def test_a_monthly_budget_is_designed_with_the_default_alerts():
    spec = parse_spec(_spec(AWS, {"monthly_budget_usd": 60000}))
    budget = design_budget(spec.name, spec.cloud, spec.cost)
    assert budget == BudgetDesign(cluster="p4d-small", cloud="aws", monthly_usd=60000.0,
                                  actual_pcts=(50, 80, 100), forecast_pcts=(100,))
    assert (budget.aws_name, budget.aws_tag_filter) == ("aicluster-p4d-small-monthly", "user:aicluster-cluster$p4d-small")
    assert design_budget(spec.name, spec.cloud, None) is None


def test_forecast_alerts_are_at_the_budget_and_past_it_or_none():
    def forecast(pcts, on=True):
        spec = parse_spec(_spec(AWS, {"monthly_budget_usd": 10, "alert_at_pct": pcts, "forecast": on}))
        return design_budget(spec.name, spec.cloud, spec.cost).forecast_pcts

    assert forecast([50, 80]) == (100,)
    assert forecast([120, 50, 100]) == (100, 120)
    assert forecast([50, 100], on=False) == ()


@pytest.mark.parametrize("usd, text, money", [(60000, "60000", ("60000", 0)), (1234.5, "1234.50", ("1234", 500_000_000)),
                                              (0.07, "0.07", ("0", 70_000_000))])
def test_the_amount_is_written_as_each_api_takes_it(usd, text, money):
    budget = BudgetDesign(cluster="x", cloud="aws", monthly_usd=usd, actual_pcts=(100,))
    assert (budget.amount_text, budget.amount_units_nanos) == (text, money)


def test_the_plan_line_says_amount_alerts_and_destination():
    aws = BudgetDesign(cluster="p4d-small", cloud="aws", monthly_usd=60000, actual_pcts=(50, 80, 100), forecast_pcts=(100,))
    assert budget_line(aws) == ("budget $60,000/month: alerts at 50/80/100 % actual, 100 % forecast "
                                "-> SNS topic aicluster-p4d-small-alerts")
    gcp = BudgetDesign(cluster="g", cloud="gcp", monthly_usd=1234.5, actual_pcts=(90,), billing_account=ACCOUNT)
    assert budget_line(gcp, ("a@example.com", "b@example.com")) == (
        f"budget $1,234.50/month: alerts at 90 % actual -> 2 alert e-mail channels and the billing account "
        f"{ACCOUNT}'s admins and users")


def test_names_fit_the_documented_limits_for_the_longest_cluster_name():
    from aicluster.catalog import load_limits
    import re

    limits = load_limits()
    budget = BudgetDesign(cluster="a" * 32, cloud="gcp", monthly_usd=1, actual_pcts=(100,))
    assert re.fullmatch(limits["aws_budget_name"].value, budget.aws_name)
    assert len(budget.gcp_display_name) <= limits["gcp_budget_display_name"].value


def test_a_gcp_budget_takes_the_billing_account_and_an_optional_project_number():
    spec = parse_spec(_spec(GCP, {"monthly_budget_usd": 5000, "billing_account": ACCOUNT,
                                  "project_number": "123456789012"}))
    budget = design_budget(spec.name, spec.cloud, spec.cost)
    assert (budget.billing_account, budget.project_number) == (ACCOUNT, "123456789012")


@pytest.mark.parametrize("base, cost, path, value, allowed, match", [
    (AWS, {"monthly_budget_usd": -5}, "cost.monthly_budget_usd", -5, "a number >= 0.01", None),
    (AWS, {"monthly_budget_usd": "60000"}, "cost.monthly_budget_usd", "60000", "a number", None),
    (AWS, {"monthly_budget": 60000}, "cost.monthly_budget", "monthly_budget", "unknown key", "monthly_budget_usd"),
    (AWS, {"monthly_budget_usd": 10, "alert_at_pct": [0]}, "cost.alert_at_pct[0]", 0, "a number >= 1", None),
    (AWS, {"monthly_budget_usd": 10, "alert_at_pct": [50, 50]}, "cost.alert_at_pct", [50, 50], "each percentage once", None),
    (AWS, {"monthly_budget_usd": 10, "alert_at_pct": list(range(10, 101, 10))}, "cost.alert_at_pct",
     list(range(10, 101, 10)), "at most 10 alerts in all on aws", None),
    (AWS, {"monthly_budget_usd": 10, "billing_account": ACCOUNT}, "cost.billing_account", ACCOUNT, "leave it out on aws", None),
    (GCP, {"monthly_budget_usd": 10}, "cost.billing_account", None, "required on gcp", None),
    (GCP, {"monthly_budget_usd": 10, "billing_account": ACCOUNT.lower()}, "cost.billing_account", ACCOUNT.lower(),
     "XXXXXX-XXXXXX-XXXXXX", ACCOUNT),
    (GCP, {"monthly_budget_usd": 10, "billing_account": f"billingAccounts/{ACCOUNT}"}, "cost.billing_account",
     f"billingAccounts/{ACCOUNT}", "XXXXXX-XXXXXX-XXXXXX", ACCOUNT),
    (GCP, {"monthly_budget_usd": 10, "billing_account": "my-account"}, "cost.billing_account", "my-account",
     "XXXXXX-XXXXXX-XXXXXX", None),
    (GCP, {"monthly_budget_usd": 10, "billing_account": ACCOUNT, "project_number": "my-project"}, "cost.project_number",
     "my-project", "a string matching", None),
])
def test_bad_cost_input_is_a_spec_error(base, cost, path, value, allowed, match):
    problems = _problem(base, cost)
    found = [p for p in problems if p.path == path]
    assert found, problems
    assert found[0].value == value and allowed in found[0].allowed and found[0].suggestion == match, found[0]


def test_a_gcp_budget_notifies_at_most_five_alert_channels():
    emails = [f"oncall{i}@example.com" for i in range(6)]
    (problem,) = _problem(GCP, {"monthly_budget_usd": 10, "billing_account": ACCOUNT}, monitoring={"alert_emails": emails})
    assert (problem.path, problem.value) == ("monitoring.alert_emails", "6 addresses")
    assert "at most 5" in problem.allowed and "monitoringNotificationChannels" in problem.allowed
    parse_spec(_spec(GCP, {"monthly_budget_usd": 10, "billing_account": ACCOUNT},
                     monitoring={"alert_emails": emails[:5]}))
    parse_spec(_spec(GCP, None, monitoring={"alert_emails": emails}))     # no budget: up to 10, as before


def test_a_budget_the_standing_cost_alone_passes_is_called_out():
    from aicluster.design.budget import standing_note

    budget = BudgetDesign(cluster="x", cloud="aws", monthly_usd=2000, actual_pcts=(50, 80, 100))
    assert standing_note(budget, 1094.03) == "budget: the standing cost alone, $1,094/month, passes the 50 % alert every month"
    assert standing_note(budget, 1700) == \
        "budget: the standing cost alone, $1,700/month, passes the 50/80 % alerts every month"
    assert standing_note(budget, 999) is None
