"""The deployer's permissions over every stack and every variant of the matrix
(tests/support/contract_plans.py): the table (catalog/deployer_permissions.yaml) knows every custom
resource type each plans, and each AWS plan's deployer policy fits IAM's documented limits
(catalog/limits.yaml: iam_managed_policy_chars per document, iam_managed_policies_per_role
documents). The size check itself is shown to fail on an oversized policy."""
from __future__ import annotations

import pytest

from aicluster.catalog import load_limits
from aicluster.design.deployer_permissions import for_plan, policy_chars, policy_size_problems
from tests.support.contract_plans import VARIANT_IDS, variant

LIMITS = load_limits()
MAX_CHARS = int(LIMITS["iam_managed_policy_chars"].value)
MAX_POLICIES = int(LIMITS["iam_managed_policies_per_role"].value)


@pytest.mark.parametrize("vid", VARIANT_IDS)
def test_the_table_knows_every_type_the_plan_creates(vid):
    result = variant(vid).result()
    perms = for_plan(result.plan, result.design)
    assert not perms.missing, (f"{vid}: no entry in catalog/deployer_permissions.yaml for "
                               f"{', '.join(perms.missing)}: add what its create/read/update/delete calls need")


@pytest.mark.parametrize("vid", [v for v in VARIANT_IDS if variant(v).cloud == "aws"])
def test_the_deployer_policy_fits_iam(vid):
    result = variant(vid).result()
    perms = for_plan(result.plan, result.design)
    assert (perms.limit_chars, perms.limit_policies) == (MAX_CHARS, MAX_POLICIES)
    problems = policy_size_problems(perms.documents, MAX_CHARS, MAX_POLICIES)
    assert not problems, f"{vid}: " + "; ".join(problems) + f" ({LIMITS['iam_managed_policy_chars'].source})"
    assert perms.documents and all(policy_chars(d) <= MAX_CHARS for d in perms.documents)


def _document(actions: int) -> dict:
    return {"Version": "2012-10-17",
            "Statement": [{"Sid": "Ec2", "Effect": "Allow", "Resource": "*",
                           "Action": [f"ec2:DescribeSomething{i:04d}" for i in range(actions)]}]}


def test_the_size_check_fails_on_an_oversized_policy_and_on_too_many():
    small, large = _document(10), _document(400)
    assert policy_chars(large) > MAX_CHARS >= policy_chars(small)
    assert policy_size_problems([small], MAX_CHARS, MAX_POLICIES) == []
    (problem,) = policy_size_problems([small, large], MAX_CHARS, MAX_POLICIES)
    assert "policy document 1" in problem and f"{MAX_CHARS:,}" in problem
    (problem,) = policy_size_problems([small] * (MAX_POLICIES + 1), MAX_CHARS, MAX_POLICIES)
    assert f"over the {MAX_POLICIES}" in problem
