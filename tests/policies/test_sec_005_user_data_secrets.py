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
