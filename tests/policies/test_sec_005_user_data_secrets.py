"""AIC-SEC-005 no-secrets-in-user-data, over hand-written stacks (and the matcher on its own)."""
from __future__ import annotations

import pytest

from tests.support import handwritten as hw

RULE = "AIC-SEC-005"
CLEAN = """#cloud-config
runcmd:
  - TOKEN=$(curl -s -X PUT http://169.254.169.254/latest/api/token)
  - aws secretsmanager get-secret-value --secret-id arn:aws:secretsmanager:us-east-1:1:secret:munge
  - echo "StoragePass=$DB_PASSWORD" >> /etc/slurm/slurmdbd.conf
"""


@pytest.mark.parametrize("text", [
    CLEAN,
    "token = urllib.request.urlopen(req).read()\nvalue = client.get_secret_value(SecretId=args.secret_id)\n",
    "password: {{ lookup('env', 'X') }}\nsecret_arn: arn:aws:secretsmanager:r:1:secret:x\n",
])
def test_references_and_code_are_not_secrets(text):
    assert hw.rule(RULE).findings(text) == []


@pytest.mark.parametrize("text, kind", [
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIE...\n", "a private key"),
    ("export AWS_ACCESS_KEY_ID=AKIAABCDEFGHIJKLMNOP\n", "an AWS access key id"),
    ("StoragePass=Sup3rSecret!\n", "a literal value for 'StoragePass'"),
    ('db_password: "correct-horse-9"\n', "a literal value for 'db_password'"),
    ("#cloud-config\nwrite_files:\n  - path: /etc/munge/munge.key\n    encoding: b64\n    content: AAAA\n",
     "the key file /etc/munge/munge.key"),
])
def test_secret_looking_values_are_found(text, kind):
    assert any(kind in f for f in hw.rule(RULE).findings(text))


def test_clean_user_data_passes():
    def program():
        _, subnet, sg = hw.network()
        hw.launch_template("lt", subnet, sg, user_data=CLEAN)
    assert hw.check(RULE, program).status == "pass"


def test_a_password_in_launch_template_user_data_fails_without_showing_it():
    def program():
        _, subnet, sg = hw.network()
        hw.launch_template("lt", subnet, sg, user_data=CLEAN + "  - echo 'StoragePass=Sup3rSecret!' > /x\n")
    verdict = hw.check(RULE, program)
    assert verdict.status == "fail"
    assert "userData holds what looks like a secret: a literal value for 'StoragePass' on line 6" in hw.messages(verdict)
    assert "Sup3rSecret" not in hw.messages(verdict)


def test_gce_startup_script_is_read():
    def program():
        _, sub = hw.gcp_network()
        hw.gce_instance("a3", sub, metadata={"startup-script": "export GITHUB_TOKEN=ghp_" + "a1B2" * 9 + "\n"})
    verdict = hw.check(RULE, program)
    assert verdict.status == "fail" and "metadata.startup-script" in hw.messages(verdict)


# ---------------------------------------------------------------- unknown in a preview: not judged
# In a `pulumi preview`, user data built from other resources' outputs is unknown: the engine hands
# the policy pulumi_policy's unknown sentinels behind its unknown-checking proxy. Unread is not
# clean: the rule says "not judged in preview" (args.not_applicable), never "pass".

def _validate(resource_type: str, props: dict):
    """Run the rule through pulumi_policy's own types, as its Analyze does: (violations, n/a reason)."""
    from pulumi_policy import ResourceValidationArgs
    from pulumi_policy.policy import _NotApplicableError
    from pulumi_policy.proxy import unknown_checking_proxy

    violations: list[str] = []
    args = ResourceValidationArgs(resource_type, unknown_checking_proxy(props), f"urn:pulumi:s::p::{resource_type}::r",
                                  "r", None, None, {}, {})
    try:
        hw.rule(RULE).POLICY.validate(args, lambda message, urn=None: violations.append(message))
    except _NotApplicableError as exc:
        return violations, exc.reason
    return violations, None


@pytest.mark.parametrize("resource_type, props, where", [
    ("aws:ec2/launchTemplate:LaunchTemplate", {"userData": "UNKNOWN"}, "userData"),
    ("aws:ec2/instance:Instance", {"userDataBase64": "UNKNOWN"}, "userDataBase64"),
    ("gcp:compute/instanceTemplate:InstanceTemplate", {"metadata": {"startup-script": "UNKNOWN"}},
     "metadata.startup-script"),
    ("gcp:compute/instance:Instance", {"metadata": "UNKNOWN_OBJECT"}, "metadata"),
    ("gcp:compute/instance:Instance", {"metadataStartupScript": "UNKNOWN"}, "metadataStartupScript"),
    ("gcp:container/nodePool:NodePool", {"nodeConfig": {"metadata": "UNKNOWN_OBJECT"}}, "nodeConfig.metadata"),
])
def test_user_data_unknown_in_a_preview_is_not_judged(resource_type, props, where):
    from pulumi_policy import proxy

    sentinel = {"UNKNOWN": proxy.UNKNOWN_STRING_VALUE, "UNKNOWN_OBJECT": proxy.UNKNOWN_OBJECT_VALUE}

    def fill(value):
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        return sentinel.get(value, value)
    violations, reason = _validate(resource_type, fill(props))
    assert violations == []
    assert reason is not None and reason.startswith("not judged in preview: ") and where in reason
    assert "pulumi up" in reason


def test_known_secrets_are_still_reported_beside_an_unknown_script():
    from pulumi_policy import proxy

    violations, reason = _validate("gcp:compute/instance:Instance", {
        "metadata": {"startup-script": proxy.UNKNOWN_STRING_VALUE, "user-data": "StoragePass=Sup3rSecret!\n"}})
    assert len(violations) == 1 and "metadata.user-data" in violations[0]
    assert reason.startswith("not judged in preview: metadata.startup-script")


def test_known_clean_user_data_is_judged_and_passes():
    violations, reason = _validate("aws:ec2/launchTemplate:LaunchTemplate", {"userData": CLEAN})
    assert violations == [] and reason is None
