"""The least-privilege check of the pods' cloud identities (checks.pod_identity_grants) holds on the
example stacks that declare service accounts, and fails on each way a grant can be too wide: every
mistake is made on a copy of the real plan's resources, so the check is judged on what aicluster
actually builds."""
from __future__ import annotations

import dataclasses
import json

import pytest

from aicluster.offline.capture import reveal
from tests.support import checks
from tests.support.stack_plans import stack_result

ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
ASSOCIATION = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
BUCKET_MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"
WI_MEMBER = "gcp:serviceaccount/iAMMember:IAMMember"


def _spec(result) -> dict:
    return result.spec.model_dump(mode="json")


def _s3_role_arns(resources) -> set:
    """The ARNs of the roles with an S3 policy: the pod identities' (Karpenter's controller and the
    metrics collector also have Pod Identity associations, and no S3)."""
    with_s3 = {str(reveal(r.inputs).get("role")) for r in resources
               if r.type == ROLE_POLICY and "s3:" in str(reveal(r.inputs).get("policy"))}
    return {reveal(r.outputs).get("arn") for r in resources if r.type == "aws:iam/role:Role" and str(r.id) in with_s3}


def _edit(resources, type_, change):
    """The resources with `change(inputs) -> inputs` applied to the first one of `type_` that has
    S3 or bucket grants (the pod identity's, not another component's)."""
    out, done = [], False
    s3_roles = _s3_role_arns(resources) if type_ == ASSOCIATION else set()
    for r in resources:
        i = reveal(r.inputs)
        if not done and r.type == type_ and (type_ != ROLE_POLICY or "s3:" in str(i.get("policy"))) \
                and (type_ != ASSOCIATION or i.get("roleArn") in s3_roles):
            r, done = dataclasses.replace(r, inputs=change(dict(i))), True
        out.append(r)
    assert done, f"no {type_} to change"
    return out


def _policy(change):
    def apply(i):
        doc = json.loads(i["policy"])
        change(doc["Statement"])
        return {**i, "policy": json.dumps(doc)}
    return apply


@pytest.fixture(scope="module")
def eks():
    return stack_result("aws-p5-eks")


@pytest.fixture(scope="module")
def gke():
    return stack_result("gcp-a3ultra-gke")


def test_the_stacks_declare_identities_and_pass(eks, gke):
    for result in (eks, gke):
        assert _spec(result)["kubernetes"]["service_accounts"], "the check must have something to judge"
        assert checks.pod_identity_grants(result.plan.resources, _spec(result)) == []


def _set_resource(statements, k, value):
    statements[k]["Resource"] = value


@pytest.mark.parametrize("mistake", [
    pytest.param(lambda st: st[1].update(Action=["s3:*"]), id="s3-star"),
    pytest.param(lambda st: _set_resource(st, 1, ["arn:aws:s3:::*"]), id="every-bucket"),
    pytest.param(lambda st: _set_resource(st, 1, ["arn:aws:s3:::example-ml-datasets/*"]), id="whole-bucket-not-prefix"),
    pytest.param(lambda st: st[0].pop("Condition"), id="lists-beyond-the-prefix"),
    pytest.param(lambda st: _set_resource(st, 3, ["arn:aws:s3:::someone-elses-bucket/*"]), id="undeclared-bucket"),
    pytest.param(lambda st: st[1].update(Action=["s3:GetObject", "s3:PutObject"]), id="write-on-a-read-grant"),
    pytest.param(lambda st: st[1].update(Action="*", Resource="*"), id="star-on-star"),
])
def test_too_wide_s3_policies_are_caught(eks, mistake):
    resources = _edit(eks.plan.resources, ROLE_POLICY, _policy(mistake))
    assert checks.pod_identity_grants(resources, _spec(eks)) != []


def test_a_role_given_to_an_undeclared_service_account_is_caught(eks):
    resources = _edit(eks.plan.resources, ASSOCIATION, lambda i: {**i, "serviceAccount": "default"})
    found = checks.pod_identity_grants(resources, _spec(eks))
    assert any("does not declare" in f for f in found) and any("no Pod Identity association" in f for f in found)


@pytest.mark.parametrize("change, words", [
    (lambda i: {**i, "role": "roles/storage.objectAdmin"}, "not roles/storage.object"),
    (lambda i: {**i, "bucket": "someone-elses-bucket"}, "is not declared"),
])
def test_too_wide_bucket_grants_are_caught(gke, change, words):
    resources = _edit(gke.plan.resources, BUCKET_MEMBER, change)
    assert any(words in f for f in checks.pod_identity_grants(resources, _spec(gke)))


def test_a_workload_identity_binding_for_a_whole_namespace_is_caught(gke):
    def everyone(i):
        return {**i, "member": i["member"].replace("[training/trainer]", "[training/*]")}
    resources = _edit(gke.plan.resources, WI_MEMBER, everyone)
    found = checks.pod_identity_grants(resources, _spec(gke))
    assert any("not one exact service account" in f for f in found)


def test_a_project_role_for_a_pod_identity_is_caught(gke):
    member = next(reveal(r.inputs)["member"] for r in gke.plan.resources if r.type == BUCKET_MEMBER)
    extra = dataclasses.replace(next(r for r in gke.plan.resources if r.type == BUCKET_MEMBER),
                                type="gcp:projects/iAMMember:IAMMember", name="extra",
                                inputs={"project": "p", "role": "roles/storage.admin", "member": member})
    found = checks.pod_identity_grants([*gke.plan.resources, extra], _spec(gke))
    assert any("at project level" in f for f in found)
