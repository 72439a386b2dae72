"""AIC-SEC-001: instance metadata requires IMDSv2 session tokens.

IMDSv1 answers any unauthenticated GET, so an SSRF in any process on the node hands out the
instance role's credentials. Launch templates and instances must set
metadataOptions.httpTokens = "required" (or turn the endpoint off), and so must an EC2 Image Builder
infrastructure configuration (instanceMetadataOptions.httpTokens: the build instance that bakes a
node image holds a role too). Unset means "optional" on the API side (IMDSv1 allowed), so unset
fails too. GCP's metadata server always needs the
Metadata-Flavor header: nothing to judge there.
"""
from __future__ import annotations

from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, Severity

from ._base import schema
from ._props import get, is_unknown, kind, plain

ID = "AIC-SEC-001"
SUPPORTED = ("aws:ec2/launchTemplate", "aws:ec2/instance", "aws:imagebuilder/infrastructureConfiguration")
# Where each type keeps its metadata options.
_OPTIONS = {"aws:imagebuilder/infrastructureConfiguration": "instanceMetadataOptions"}


def validate(args, report_violation) -> None:
    if kind(args.resource_type) not in SUPPORTED:
        return
    p = plain(args.props)
    if kind(args.resource_type) == "aws:ec2/instance" and get(p, "launchTemplate") and get(p, "metadataOptions") is None:
        return   # the launch template sets it (judged there)
    options = _OPTIONS.get(kind(args.resource_type), "metadataOptions")
    tokens, endpoint = get(p, options, "httpTokens"), get(p, options, "httpEndpoint")
    if endpoint == "disabled" or tokens == "required" or is_unknown(tokens):
        return
    why = "not set (the API default is optional)" if tokens is None else repr(tokens)
    report_violation(f"{kind(args.resource_type)} {args.name!r}: {options}.httpTokens is {why}, so IMDSv1 "
                     "answers unauthenticated requests with the instance role's credentials", None)


POLICY = ResourceValidationPolicy(
    name=ID,
    display_name="imdsv2-required",
    description="Launch templates, instances and image builders require IMDSv2 (httpTokens = required).",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=(
        "Set metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(http_endpoint='enabled', "
        "http_tokens='required', http_put_response_hop_limit=1) (InstanceMetadataOptionsArgs on instances, "
        "InfrastructureConfigurationInstanceMetadataOptionsArgs(http_tokens='required') on Image Builder)."),
    config_schema=schema(),
    tags=["security", "aws"],
    validate=validate,
)
