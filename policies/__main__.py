"""The aicluster policy pack: `pulumi preview --policy-pack policies [--policy-pack-config FILE]`.

Only builds the pack. The rules live in rules/ (one per module); `aicluster check` runs the same
policy objects offline through components/aicluster/offline/policy_bridge.py.
"""
from pulumi_policy import EnforcementLevel, PolicyPack

from rules import PACK_DESCRIPTION, PACK_NAME, POLICIES

PolicyPack(
    name=PACK_NAME,
    description=PACK_DESCRIPTION,
    enforcement_level=EnforcementLevel.ADVISORY,
    policies=POLICIES,
)
