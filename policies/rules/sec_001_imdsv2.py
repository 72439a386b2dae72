"""AIC-SEC-001: instance metadata requires IMDSv2 session tokens.

IMDSv1 answers any unauthenticated GET, so an SSRF in any process on the node hands out the
instance role's credentials. Launch templates and instances must set
metadataOptions.httpTokens = "required" (or turn the endpoint off). Unset means "optional" on the
API side (IMDSv1 allowed), so unset fails too. GCP's metadata server always needs the
Metadata-Flavor header: nothing to judge there.
"""
from __future__ import annotations

from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, Severity

from ._base import schema
from ._props import get, is_unknown, kind, plain

ID = "AIC-SEC-001"
SUPPORTED = ("aws:ec2/launchTemplate", "aws:ec2/instance")


def validate(args, report_violation) -> None:
    if kind(args.resource_type) not in SUPPORTED:
        return
    p = plain(args.props)
    if kind(args.resource_type) == "aws:ec2/instance" and get(p, "launchTemplate") and get(p, "metadataOptions") is None:
        return   # the launch template sets it (judged there)
    tokens, endpoint = get(p, "metadataOptions", "httpTokens"), get(p, "metadataOptions", "httpEndpoint")
    if endpoint == "disabled" or tokens == "required" or is_unknown(tokens):
        return
    why = "not set (the API default is optional)" if tokens is None else repr(tokens)
    report_violation(f"{kind(args.resource_type)} {args.name!r}: metadataOptions.httpTokens is {why}, so IMDSv1 "
                     "answers unauthenticated requests with the instance role's credentials", None)


POLICY = ResourceValidationPolicy(
    name=ID,
    display_name="imdsv2-required",
    description="Launch templates and instances require IMDSv2 (metadataOptions.httpTokens = required).",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=(
        "Set metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(http_endpoint='enabled', "
        "http_tokens='required', http_put_response_hop_limit=1) (InstanceMetadataOptionsArgs on instances)."),
    config_schema=schema(),
    tags=["security", "aws"],
    validate=validate,
)
