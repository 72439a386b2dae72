"""The clouds' documented limits, over every stack and every variant of the matrix
(tests/support/contract_plans.py): each check of tests/support/cloud_limits.py must find nothing.
A failure names the variant, the resource URN, the input path, the value and the limit's source in
catalog/limits.yaml."""
from __future__ import annotations

import pytest

from tests.support.cloud_limits import CHECKS, report
from tests.support.contract_plans import VARIANT_IDS, variant


@pytest.mark.parametrize("vid", VARIANT_IDS)
@pytest.mark.parametrize("check", sorted(CHECKS))
def test_plan_is_within_the_documented_limits(check, vid):
    breaches = CHECKS[check](vid, variant(vid).result())
    assert not breaches, f"{len(breaches)} beyond the limit:\n" + report(breaches)
