"""AIC-SEC-001 imdsv2-required, over hand-written stacks."""
from __future__ import annotations

import pytest

from tests.support import handwritten as hw

RULE = "AIC-SEC-001"


def test_required_tokens_pass():
    def program():
        _, subnet, sg = hw.network()
        hw.launch_template("lt", subnet, sg)
        hw.instance("i", subnet, sg)
    verdict = hw.check(RULE, program)
    assert verdict.status == "pass" and verdict.judged == 2


@pytest.mark.parametrize("tokens, why", [("optional", "'optional'"), (None, "not set (the API default is optional)")])
def test_imdsv1_launch_template_fails(tokens, why):
    def program():
        _, subnet, sg = hw.network()
        hw.launch_template("lt", subnet, sg, http_tokens=tokens)
    verdict = hw.check(RULE, program)
    assert verdict.status == "fail"
    assert f"aws:ec2/launchTemplate 'lt': metadataOptions.httpTokens is {why}" in hw.messages(verdict)


def test_imdsv1_instance_fails():
    def program():
        _, subnet, sg = hw.network()
        hw.instance("head", subnet, sg, instance_type="m7i.xlarge", http_tokens="optional")
    verdict = hw.check(RULE, program)
    assert verdict.status == "fail" and "aws:ec2/instance 'head'" in hw.messages(verdict)


def test_no_instances_is_not_applicable():
    assert hw.check(RULE, lambda: hw.network()).status == "n/a"


def _builder(tokens):
    import pulumi_aws as aws

    aws.imagebuilder.InfrastructureConfiguration(
        "builder", name="node-image", instance_profile_name="builder",
        instance_metadata_options=aws.imagebuilder.InfrastructureConfigurationInstanceMetadataOptionsArgs(
            http_tokens=tokens) if tokens else None)


def test_image_builder_with_tokens_required_passes():
    verdict = hw.check(RULE, lambda: _builder("required"))
    assert verdict.status == "pass" and verdict.judged == 1


@pytest.mark.parametrize("tokens, why", [("optional", "'optional'"), (None, "not set (the API default is optional)")])
def test_image_builder_with_imdsv1_fails(tokens, why):
    """The build instance that bakes a node image holds a role: IMDSv1 there leaks it like anywhere else."""
    verdict = hw.check(RULE, lambda: _builder(tokens))
    assert verdict.status == "fail"
    assert f"aws:imagebuilder/infrastructureConfiguration 'builder': instanceMetadataOptions.httpTokens is {why}" \
        in hw.messages(verdict)
