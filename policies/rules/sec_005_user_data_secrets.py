"""AIC-SEC-005: user data and startup scripts carry no secret-looking values.

User data is readable by anyone with ec2:DescribeInstanceAttribute, by every process on the node
through IMDS, and ends up in logs; secrets (munge key, database passwords, tokens) are fetched at
boot from the secret store instead (docs/security-defaults.md). Looked for, in launch templates, instances, GCE
metadata (user-data, startup-script), GKE node pools and TPU VMs, after base64 decoding:

* high-confidence formats: private key blocks, AWS access key ids (AKIA/ASIA...), GitHub and Slack
  tokens;
* a key that names a secret (password, passwd, secret, token, api key, access key, munge key,
  StoragePass) assigned a literal value of 8+ characters that mixes character classes - references
  are fine: `$VAR`, `$(command)`, `{{ template }}`, `${...}`, file paths, ARNs, `resolve:` ...;
* a cloud-init write_files entry that writes a key file (munge.key, *.pem, id_rsa, ...) inline.
The message names the kind of secret and where it is, never the value.

In a preview, user data built from other resources' outputs is unknown: such a resource is reported
"not judged in preview" (not applicable, with where the unknown script is), never "pass"; `pulumi up`
knows every value and judges it.
"""
from __future__ import annotations

import base64
import binascii
import re

import yaml
from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, Severity

from ._base import not_applicable, schema
from ._props import get, is_unknown, kind, plain

ID = "AIC-SEC-005"
NOT_JUDGED = "not judged in preview"
SUPPORTED = ("aws:ec2/launchTemplate", "aws:ec2/instance", "gcp:compute/instance", "gcp:compute/instanceTemplate",
             "gcp:container/nodePool", "gcp:tpu/v2Vm")

_FORMATS = [
    ("a private key", re.compile(r"-----BEGIN (?:[A-Z]+ )*PRIVATE KEY-----")),
    ("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a GitHub token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}\b")),
    ("a Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b")),
]
_ASSIGNMENT = re.compile(
    r"""(?ix)
    (?<![\w:/.-])(?P<key>[\w.-]*(?:password|passwd|secret|token|api[_-]?key|access[_-]?key|munge[_-]?key|storagepass)[\w.-]*)
    ["']?\s*(?:=(?!=)|:)\s*
    (?P<value>"[^"\n]*"|'[^'\n]*'|[^\s#]+)""")
_REFERENCE = re.compile(r"""^(?:\$|\{\{|\{%|<|%|/|~|@|arn:|resolve:|file:|s3://|https?://|ssm:|secretsmanager|projects/)""", re.I)
_KEY_FILE = re.compile(r"(?:munge\.key|id_rsa|id_ed25519|\.pem|\.key|\.p12|credentials)$")


def _decode(value: str) -> str:
    text = value.strip()
    if re.fullmatch(r"[A-Za-z0-9+/=\s]+", text) and len(text) % 4 == 0 and len(text) >= 8:
        try:
            decoded = base64.b64decode(text, validate=False).decode("utf-8")
            if decoded.isprintable() or "\n" in decoded:
                return decoded
        except (binascii.Error, UnicodeDecodeError):
            pass
    return value


def _looks_secret(value: str) -> bool:
    quoted = value[:1] in "'\"" and len(value) > 1
    value = value.strip().strip("'\"")
    if len(value) < 8 or _REFERENCE.match(value) or "${" in value or "$(" in value or "{{" in value:
        return False
    if not quoted and (re.search(r"[()\[\]{},]", value)                  # code: calls, indexing, tuples
                       or re.fullmatch(r"[A-Za-z_]\w*(?:\.\w+)+", value)    # attribute / module references
                       or re.fullmatch(r"[a-z_]+", value)):                 # a variable name
        return False
    classes = sum(bool(re.search(p, value)) for p in (r"[a-z]", r"[A-Z]", r"\d", r"[^A-Za-z0-9]"))
    return classes >= 2 and not value.lower() in ("required", "optional", "enabled", "disabled")


def findings(text: str) -> list[str]:
    out: list[str] = []
    for label, pattern in _FORMATS:
        for m in pattern.finditer(text):
            out.append(f"{label} on line {text.count(chr(10), 0, m.start()) + 1}")
    for m in _ASSIGNMENT.finditer(text):
        if _looks_secret(m.group("value")):
            out.append(f"a literal value for {m.group('key')!r} on line {text.count(chr(10), 0, m.start()) + 1}")
    if text.lstrip().startswith("#cloud-config"):
        try:
            doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))   # libyaml: faster
        except yaml.YAMLError:
            doc = None
        for entry in (doc or {}).get("write_files") or [] if isinstance(doc, dict) else []:
            path = str(entry.get("path", "")) if isinstance(entry, dict) else ""
            if _KEY_FILE.search(path) and entry.get("content"):
                out.append(f"the key file {path} written inline by write_files")
    return out


def _scripts(k: str, p) -> tuple[list[tuple[str, str]], list[str]]:
    """(where, text) of every script the resource carries, and where a script is still unknown."""
    out: list[tuple[str, str]] = []
    unknown: list[str] = []
    if k in ("aws:ec2/launchTemplate", "aws:ec2/instance"):
        for key in ("userData", "userDataBase64"):
            value = get(p, key)
            if is_unknown(value):
                unknown.append(key)
            elif isinstance(value, str):
                out.append((key, _decode(value)))
    else:
        where = "nodeConfig.metadata" if k == "gcp:container/nodePool" else "metadata"
        metadata = get(p, "nodeConfig", "metadata") if k == "gcp:container/nodePool" else get(p, "metadata")
        if is_unknown(metadata):
            unknown.append(where)
        elif isinstance(metadata, dict):
            for key, value in metadata.items():
                if is_unknown(value):
                    unknown.append(f"metadata.{key}")
                elif isinstance(value, str):
                    out.append((f"metadata.{key}", _decode(value)))
        value = get(p, "metadataStartupScript")
        if is_unknown(value):
            unknown.append("metadataStartupScript")
        elif isinstance(value, str):
            out.append(("metadataStartupScript", value))
    return out, unknown


def validate(args, report_violation) -> None:
    k = kind(args.resource_type)
    if k not in SUPPORTED:
        return
    scripts, unknown = _scripts(k, plain(args.props))
    for where, text in scripts:
        found = findings(text)
        if found:
            report_violation(f"{k} {args.name!r} {where} holds what looks like a secret: {'; '.join(found)} "
                             "(value not shown)", None)
    if unknown:
        # A preview does not know user data built from other resources' outputs (addresses, names):
        # unread is not clean, so it is not judged here; `pulumi up` knows the values and judges them.
        not_applicable(args, f"{NOT_JUDGED}: {', '.join(unknown)} of {args.name!r} is still unknown "
                             "(built from other resources' outputs); `pulumi up` judges it")


POLICY = ResourceValidationPolicy(
    name=ID,
    display_name="no-secrets-in-user-data",
    description="User data, startup scripts and instance metadata carry no secret-looking values.",
    severity=Severity.CRITICAL,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=(
        "Store the secret in AWS Secrets Manager / SSM Parameter Store (GCP Secret Manager), grant the node role read "
        "access, and fetch it at boot; mark it secret in Pulumi (pulumi.Output.secret). Rotate any secret that was "
        "ever in user data."),
    config_schema=schema(),
    tags=["security", "aws", "gcp"],
    validate=validate,
)
