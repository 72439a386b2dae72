"""aicluster:gcp:ClusterBudget (gcp/budget.py): in the gcp-a3mega-slurm stack (spec cost: $350,000 a
month on a billing account, no alert e-mails) a Cloud Billing budget over the cluster's label with a
threshold rule per percentage; and, built beside an ObservabilityBackend with alert e-mails (a few
resources under mocks, no cluster), the budget notifies the same e-mail channels the alert policies
do and counts the one project when given its number."""
from __future__ import annotations

import pulumi
import pytest

from aicluster.design.budget import BudgetDesign
from aicluster.design.model import ClusterContext
from aicluster.offline.capture import reveal
from aicluster.offline.engine import run_program
from tests.support import GCP_PROJECT
from tests.support.stack_plans import stack_result

STACK = "gcp-a3mega-slurm"
BUDGET = "gcp:billing/budget:Budget"
ACCOUNT = "012345-6789AB-CDEF01"


@pytest.fixture(scope="module")
def plan():
    return stack_result(STACK).plan


def test_the_budget_lives_on_the_billing_account_and_counts_the_clusters_label(plan):
    (budget,) = plan.of_type(BUDGET)
    i = reveal(budget.inputs)
    assert (i["billingAccount"], i["displayName"]) == (ACCOUNT, "aicluster a3mega-train monthly")
    assert i["amount"] == {"specifiedAmount": {"currencyCode": "USD", "units": "350000"}}
    assert i["budgetFilter"] == {"calendarPeriod": "MONTH", "labels": {"aicluster-cluster": "a3mega-train"}}


def test_a_threshold_rule_per_percentage_current_and_forecast(plan):
    (budget,) = plan.of_type(BUDGET)
    rules = reveal(budget.inputs)["thresholdRules"]
    assert [(r["thresholdPercent"], r["spendBasis"]) for r in rules] == \
        [(0.5, "CURRENT_SPEND"), (0.8, "CURRENT_SPEND"), (1.0, "CURRENT_SPEND"), (1.0, "FORECASTED_SPEND")]


def test_without_alert_emails_the_billing_admins_are_told_and_the_api_is_on(plan):
    """The default recipients (billing account admins and users) need no rule; a rule with no
    channel and no topic is refused by the provider (AtLeastOneOf), so there is none."""
    (budget,) = plan.of_type(BUDGET)
    assert "allUpdatesRule" not in reveal(budget.inputs)
    (api,) = [s for s in plan.of_type("gcp:projects/service:Service") if s.inputs["service"] == "billingbudgets.googleapis.com"]
    assert api.urn in budget.dependencies and api.inputs["disableOnDestroy"] is False


def test_the_budget_notifies_the_alert_e_mail_channels_and_counts_the_project():
    from aicluster.gcp.budget import ClusterBudget, ClusterBudgetArgs
    from aicluster.gcp.observability import ObservabilityBackend, ObservabilityBackendArgs

    context = ClusterContext(name="g", region="us-central1", zone="us-central1-a")
    budget = BudgetDesign(cluster="g", cloud="gcp", monthly_usd=99.5, actual_pcts=(100,), forecast_pcts=(),
                          billing_account=ACCOUNT, project_number="123456789012")

    def program():
        backend = ObservabilityBackend("g-observability", ObservabilityBackendArgs(
            context=context, log_streams=("slurmctld",), alert_emails=("a@example.com", "b@example.com")))
        ClusterBudget("g-budget", ClusterBudgetArgs(context=context, budget=budget,
                                                     notification_channels=backend.alert_channels))
        pulumi.export("ok", True)

    plan = run_program(program, stack="test", config={"gcp:project": GCP_PROJECT, "gcp:region": "us-central1"})
    channels = plan.of_type("gcp:monitoring/notificationChannel:NotificationChannel")
    (resource,) = plan.of_type(BUDGET)
    i = reveal(resource.inputs)
    assert len(channels) == 2
    assert i["allUpdatesRule"]["monitoringNotificationChannels"] == [c.outputs["name"] for c in channels]
    assert i["allUpdatesRule"]["schemaVersion"] == "1.0" and not i["allUpdatesRule"].get("disableDefaultIamRecipients")
    assert i["budgetFilter"]["projects"] == ["projects/123456789012"]
    assert i["amount"]["specifiedAmount"] == {"currencyCode": "USD", "units": "99", "nanos": 500_000_000}


def test_the_deployer_binds_the_budget_role_on_the_billing_account():
    """roles/billing.costsManager is bound where the budget lives: a project binding does not reach a
    billing account. The plan and deployer-roles.json say so; the other roles stay on the project."""
    import json

    from aicluster.commands.plan_report import deployer_permissions
    from aicluster.design.deployer_permissions import roles_file, summary_lines

    permissions = deployer_permissions(stack_result(STACK))
    roles = {r["role"]: r for r in json.loads(roles_file(permissions))["roles"]}
    assert roles["roles/billing.costsManager"]["on"] == "billing-account"
    assert roles["roles/billing.costsManager"]["for"] == [BUDGET]
    assert {r["on"] for name, r in roles.items() if name != "roles/billing.costsManager"} == {"project"}
    assert "roles/billing.costsManager on the billing account (deployer-roles.json)" in summary_lines(permissions)


def test_the_table_refuses_an_unknown_scope():
    import copy

    import yaml

    from aicluster.catalog import CatalogError
    from aicluster.catalog.deployer_permissions import _FILE, parse_table

    doc = yaml.safe_load(_FILE.read_text())
    bad = copy.deepcopy(doc)
    bad["gcp"]["types"][BUDGET]["scope"] = "organization"
    with pytest.raises(CatalogError, match="scope: one of project, billing-account"):
        parse_table(bad)
    assert parse_table(doc).gcp_types[BUDGET].on == "billing-account"
