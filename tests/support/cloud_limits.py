"""The clouds' documented limits (components/aicluster/catalog/limits.yaml) as checks over a plan.

Each check takes a variant id and its PlanResult and returns the breaches it finds (empty: the plan
is within the limit). Like the policy pack, they read raw resources (camelCase wire inputs), so they
judge resource types and stacks added later too. A breach names the variant, the resource URN, the
input path, the value and the limit's source.

Names the provider makes up: a resource with no explicit name gets Pulumi's autoname, its logical
name plus "-" and 7 random characters (`autoname`); that is the name the cloud sees.
"""
from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import re
import unicodedata
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

import yaml

from aicluster.catalog import load_catalog, load_limits
from aicluster.offline.capture import CapturedResource, reveal

LIMITS = load_limits()
AUTONAME_SUFFIX = "-" + "x" * 7          # Pulumi autonaming: "-" and 7 random characters


@dataclass(frozen=True)
class Breach:
    variant: str
    urn: str
    path: str
    value: Any
    rule: str
    limit: str          # key in limits.yaml

    def __str__(self) -> str:
        return (f"{self.variant}: {self.urn}\n    {self.path} = {_show(self.value)}\n    {self.rule}\n"
                f"    source: {LIMITS[self.limit].source} [limits.yaml {self.limit}]")


def _show(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return repr(text) if len(text) <= 160 else f"{text[:120]!r}... ({len(text)} characters)"


def report(breaches: Iterable[Breach]) -> str:
    return "\n".join(str(b) for b in breaches)


def value(name: str):
    return LIMITS[name].value


def fullmatch(name: str, text: str) -> bool:
    return isinstance(text, str) and re.fullmatch(value(name), text) is not None


Check = Callable[[str, Any], list[Breach]]


# --- reading inputs ---------------------------------------------------------------------------------


def inputs(r: CapturedResource) -> dict:
    return reveal(r.inputs)


def at(obj: Any, path: str) -> Iterator[tuple[str, Any]]:
    """(concrete path, value) for every match of `path` ("a.b[].c") in obj."""
    parts = path.split(".") if path else []

    def go(node: Any, i: int, where: str):
        if i == len(parts):
            yield where, node
            return
        part = parts[i]
        many = part.endswith("[]")
        key = part[:-2] if many else part
        if not isinstance(node, dict) or key not in node or node[key] is None:
            return
        child = node[key]
        step = f"{where}.{key}" if where else key
        if many:
            for j, item in enumerate(child if isinstance(child, list) else []):
                yield from go(item, i + 1, f"{step}[{j}]")
        else:
            yield from go(child, i + 1, step)

    yield from go(obj, 0, "")


def resources(result, prefix: str = "") -> list[CapturedResource]:
    return [r for r in result.plan.custom_resources() if r.type.startswith(prefix)]


def autoname(r: CapturedResource, field: str = "name", lower: bool = False) -> tuple[str, str]:
    """(input path, the name the cloud sees): the explicit input, else Pulumi's autoname."""
    i = inputs(r)
    if isinstance(i.get(field), str):
        return field, i[field]
    name = r.name + AUTONAME_SUFFIX
    return f"{field} (autoname)", name.lower() if lower else name


def cluster_json(result) -> dict:
    text = result.files.get("aicluster/cluster.json")
    return json.loads(text) if text else {}


# --- 1. user data and metadata --------------------------------------------------------------------


def _decoded_user_data(i: dict) -> tuple[str, bytes] | None:
    if isinstance(i.get("userDataBase64"), str):
        return "userDataBase64", base64.b64decode(i["userDataBase64"])
    text = i.get("userData")
    if not isinstance(text, str):
        return None
    try:
        return "userData", base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return "userData", text.encode()


def user_data(variant: str, result) -> list[Breach]:
    """EC2 user data <= 16 KB raw: launch templates (base64 on the wire) and instances."""
    out = []
    limit = value("ec2_user_data_bytes")
    for r in resources(result, "aws:ec2/"):
        if r.type not in ("aws:ec2/launchTemplate:LaunchTemplate", "aws:ec2/instance:Instance"):
            continue
        found = _decoded_user_data(inputs(r))
        if found and len(found[1]) > limit:
            path, raw = found
            out.append(Breach(variant, r.urn, path, f"{len(raw)} bytes raw ({len(raw) - limit} over)",
                              f"at most {limit} bytes before base64", "ec2_user_data_bytes"))
    return out


_METADATA_PATHS = {
    "gcp:compute/instanceTemplate:InstanceTemplate": ("metadata",),
    "gcp:compute/instance:Instance": ("metadata",),
    "gcp:tpu/v2Vm:V2Vm": ("metadata",),
    "gcp:container/nodePool:NodePool": ("nodeConfig.metadata",),
    "gcp:container/cluster:Cluster": ("nodeConfig.metadata",),
}


def gce_metadata(variant: str, result) -> list[Breach]:
    """GCE metadata: each value <= 256 KiB, all keys and values < 512 KB, keys [a-zA-Z0-9_-] < 128 bytes."""
    out = []
    per_value, total_max = value("gce_metadata_value_bytes"), value("gce_metadata_total_bytes")
    for r in resources(result, "gcp:"):
        i = inputs(r)
        for pattern in _METADATA_PATHS.get(r.type, ()):
            for path, md in at(i, pattern):
                if not isinstance(md, dict):
                    continue
                items = dict(md)
                if r.type == "gcp:compute/instance:Instance" and isinstance(i.get("metadataStartupScript"), str):
                    items["startup-script"] = i["metadataStartupScript"]
                total = 0
                for key, val in items.items():
                    size = len(str(val).encode())
                    total += len(key.encode()) + size
                    if not fullmatch("gce_metadata_key", key):
                        out.append(Breach(variant, r.urn, f"{path} key", key, "a key of [a-zA-Z0-9_-], < 128 bytes",
                                          "gce_metadata_key"))
                    if size > per_value:
                        out.append(Breach(variant, r.urn, f"{path}.{key}", f"{size} bytes",
                                          f"at most {per_value} bytes per value", "gce_metadata_value_bytes"))
                if total >= total_max:
                    out.append(Breach(variant, r.urn, path, f"{total} bytes in {len(items)} entries",
                                      f"less than {total_max} bytes in all", "gce_metadata_total_bytes"))
    return out


# --- 2. AWS tags ------------------------------------------------------------------------------------


def _aws_general_char(c: str) -> bool:
    return c in "_.:/=+-@" or unicodedata.category(c)[0] in "LNZ"


def _default_tags(result) -> dict[str, dict]:
    """provider reference (or None: the default provider) -> its default tags (tags_all's other half)."""
    config = result.stack.config.get("aws:defaultTags")
    out: dict[Any, dict] = {None: dict((config or {}).get("tags") or {}) if isinstance(config, dict) else {}}
    for r in result.plan.resources:
        if r.type == "pulumi:providers:aws":
            tags = (inputs(r).get("defaultTags") or {})
            if isinstance(tags, str):
                tags = json.loads(tags)
            out[f"{r.urn}::{r.id}"] = dict((tags or {}).get("tags") or {})
    return out


def _tag_breaches(variant, r, path, tags: dict, ec2: bool, metadata_keys: bool) -> list[Breach]:
    out = []
    user = {k: v for k, v in tags.items() if not str(k).lower().startswith("aws:")}
    if len(user) > value("aws_tags_per_resource"):
        out.append(Breach(variant, r.urn, path, f"{len(user)} tags: {sorted(user)}",
                          f"at most {value('aws_tags_per_resource')} user tags", "aws_tags_per_resource"))
    for key, val in tags.items():
        key, val = str(key), str(val)
        if key.lower().startswith(value("aws_reserved_tag_prefix")):
            out.append(Breach(variant, r.urn, f"{path}.{key}", key, "aws: is reserved", "aws_reserved_tag_prefix"))
        if len(key) > value("aws_tag_key_length"):
            out.append(Breach(variant, r.urn, f"{path}.{key}", key, f"keys of at most {value('aws_tag_key_length')} "
                              "characters", "aws_tag_key_length"))
        if len(val) > value("aws_tag_value_length"):
            out.append(Breach(variant, r.urn, f"{path}.{key}", val, f"values of at most "
                              f"{value('aws_tag_value_length')} characters", "aws_tag_value_length"))
        if not ec2 and not (all(map(_aws_general_char, key)) and all(map(_aws_general_char, val))):
            out.append(Breach(variant, r.urn, f"{path}.{key}", f"{key}={val}", f"{value('aws_tag_chars')} only",
                              "aws_tag_chars"))
        if metadata_keys and (not fullmatch("ec2_metadata_tag_key", key) or key in (".", "..", "_index")):
            out.append(Breach(variant, r.urn, f"{path}.{key}", key, "instance tags readable in instance metadata: "
                              "keys of letters, digits and + - = . , _ : @ only", "ec2_metadata_tag_key"))
    return out


def aws_tags(variant: str, result) -> list[Breach]:
    """Tags (tags_all: provider default tags + the resource's), launch template tag specifications
    (with the tags the resume program adds to instances), volume tags: count, lengths, characters."""
    out = []
    defaults = _default_tags(result)
    runtime = cluster_json(result)
    boot_keys = {runtime[k]: "" for k in ("cluster_tag", "pool_tag", "node_tag") if runtime.get(k)}
    templates = {r.id: inputs(r) for r in resources(result, "aws:ec2/launchTemplate:LaunchTemplate")}
    for r in resources(result, "aws:"):
        i = inputs(r)
        ec2 = r.type.startswith(("aws:ec2/", "aws:vpc/"))
        # An instance launched from a template takes the template's metadata options.
        options = i.get("metadataOptions") or templates.get((i.get("launchTemplate") or {}).get("id"), {}).get(
            "metadataOptions") or {}
        metadata_tags = options.get("instanceMetadataTags") == "enabled"
        if isinstance(i.get("tags"), dict) or defaults.get(r.provider):
            tags_all = {**defaults.get(r.provider, defaults[None]), **(i.get("tags") or {})}
            instance = r.type == "aws:ec2/instance:Instance"
            out += _tag_breaches(variant, r, "tags (tags_all)", tags_all, ec2, instance and metadata_tags)
        if isinstance(i.get("volumeTags"), dict):
            out += _tag_breaches(variant, r, "volumeTags", i["volumeTags"], ec2, False)
        for path, spec in at(i, "tagSpecifications[]"):
            tags = dict(spec.get("tags") or {})
            is_instance = spec.get("resourceType") == "instance"
            if is_instance and r.type == "aws:ec2/launchTemplate:LaunchTemplate" and boot_keys:
                tags = {**boot_keys, **tags}        # the resume program's CreateFleet tags and node name
                path = f"{path}.tags (+ {', '.join(sorted(boot_keys))} at boot)"
            else:
                path = f"{path}.tags"
            out += _tag_breaches(variant, r, path, tags, True, is_instance and metadata_tags)
    return out


# --- 3. GCP labels and network tags -----------------------------------------------------------------


def _label_key_ok(key: str) -> bool:
    return (1 <= len(key) <= value("gcp_label_key") and unicodedata.category(key[0]) in ("Ll", "Lo")
            and all(unicodedata.category(c) in ("Ll", "Lo") or c.isdigit() or c in "_-" for c in key))


def _label_value_ok(val: str) -> bool:
    return len(val) <= value("gcp_label_value") and all(
        unicodedata.category(c) in ("Ll", "Lo") or c.isdigit() or c in "_-" for c in val)


# Types whose top-level `labels` configure the resource rather than label it: a notification
# channel's are the fields its type's descriptor defines, e.g. email_address (Cloud Monitoring API,
# NotificationChannel.labels); its GCP labels are `userLabels`.
_CONFIGURING_LABELS = {"gcp:monitoring/notificationChannel:NotificationChannel"}


def _label_maps(r: CapturedResource) -> Iterator[tuple[str, dict]]:
    """GCP label maps of a resource at any depth; a GKE nodeConfig's `labels` are Kubernetes node
    labels (checked with the Kubernetes rules), its `resourceLabels` GCP labels."""

    def walk(node: Any, where: str, in_node_config: bool):
        if isinstance(node, dict):
            for key, child in node.items():
                path = f"{where}.{key}" if where else key
                # userLabels: Cloud Monitoring alert policies' labels, under the same rules (Cloud
                # Monitoring API, AlertPolicy.user_labels: lowercase letters, digits, _ and -, a
                # key starting with a letter, at most 63 characters each).
                if key in ("labels", "resourceLabels", "effectiveLabels", "userLabels") and isinstance(child, dict):
                    if not (key == "labels" and (in_node_config or (not where and r.type in _CONFIGURING_LABELS))):
                        yield path, child
                else:
                    yield from walk(child, path, in_node_config or key == "nodeConfig")
        elif isinstance(node, list):
            for j, item in enumerate(node):
                yield from walk(item, f"{where}[{j}]", in_node_config)

    yield from walk(inputs(r), "", False)


def gcp_labels(variant: str, result) -> list[Breach]:
    """Labels: at most 64 per resource (with the provider's default labels and the launch's request
    id the resume program adds to each node at creation), keys and values in GCP's alphabet, 63
    characters."""
    out = []
    config = result.stack.config.get("gcp:defaultLabels") or {}
    for r in resources(result, "gcp:"):
        for path, labels in _label_maps(r):
            labels = {**config, **labels} if path == "labels" else dict(labels)
            if r.type == "gcp:compute/instanceTemplate:InstanceTemplate" and path == "labels":
                labels["aicluster-resume-id"] = "00000000-0000-0000-0000-000000000000"
                path = "labels (+ aicluster-resume-id at creation)"
            if len(labels) > value("gcp_labels_per_resource"):
                out.append(Breach(variant, r.urn, path, f"{len(labels)} labels",
                                  f"at most {value('gcp_labels_per_resource')} labels", "gcp_labels_per_resource"))
            for key, val in labels.items():
                if not _label_key_ok(str(key)):
                    out.append(Breach(variant, r.urn, f"{path}.{key}", key, LIMITS["gcp_label_key"].what,
                                      "gcp_label_key"))
                if not _label_value_ok(str(val)):
                    out.append(Breach(variant, r.urn, f"{path}.{key}", val, LIMITS["gcp_label_value"].what,
                                      "gcp_label_value"))
    return out


_NETWORK_TAG_PATHS = {"gcp:compute/instanceTemplate:InstanceTemplate": "tags",
                      "gcp:compute/instance:Instance": "tags",
                      "gcp:container/nodePool:NodePool": "nodeConfig.tags",
                      "gcp:container/cluster:Cluster": "nodeConfig.tags",
                      "gcp:tpu/v2Vm:V2Vm": "tags"}


def gce_network_tags(variant: str, result) -> list[Breach]:
    out = []
    rule = value("gce_network_tags")
    for r in resources(result, "gcp:"):
        for path, tags in at(inputs(r), _NETWORK_TAG_PATHS.get(r.type, "-")):
            tags = tags if isinstance(tags, list) else []
            if len(tags) > rule["count"]:
                out.append(Breach(variant, r.urn, path, tags, f"at most {rule['count']} network tags", "gce_network_tags"))
            for j, tag in enumerate(tags):
                if not re.fullmatch(rule["pattern"], str(tag)):
                    out.append(Breach(variant, r.urn, f"{path}[{j}]", tag, "RFC 1035: 1-63 lowercase letters, digits "
                                      "and -, a letter first", "gce_network_tags"))
    return out


# --- 4. IAM ----------------------------------------------------------------------------------------


def _minified_length(doc: Any) -> int:
    """Characters IAM counts: the document without whitespace outside strings."""
    if isinstance(doc, str):
        try:
            doc = json.loads(doc)
        except ValueError:
            return len(re.sub(r"\s", "", doc))
    return len(json.dumps(doc, separators=(",", ":"), ensure_ascii=False))


def _policy_text(doc: Any) -> str:
    return doc if isinstance(doc, str) else json.dumps(doc)


def aws_iam(variant: str, result) -> list[Breach]:
    """Inline policies of a role together <= 10,240 characters; managed policies <= 6,144; trust
    policies <= 2,048; at most 10 managed policies per role; the policy alphabet; role, instance
    profile and policy names (with Pulumi's autoname)."""
    out = []
    roles: dict[str, CapturedResource] = {}
    role_paths: dict[str, str] = {}
    for r in resources(result, "aws:iam/role:Role"):
        path, name = autoname(r)
        roles[name] = r
        role_paths[name] = path
        i = inputs(r)
        if i.get("namePrefix") and len(i["namePrefix"]) > value("iam_role_name_prefix"):
            out.append(Breach(variant, r.urn, "namePrefix", i["namePrefix"],
                              f"at most {value('iam_role_name_prefix')} characters", "iam_role_name_prefix"))
        elif not fullmatch("iam_role_name", name):
            out.append(Breach(variant, r.urn, path, name, "1-64 characters of [A-Za-z0-9+=,.@_-]", "iam_role_name"))
        if i.get("description") is not None and not fullmatch("iam_role_description", str(i["description"])):
            out.append(Breach(variant, r.urn, "description", i["description"], "up to 1000 characters of tab, LF, "
                              "CR, U+0020-U+007E and U+00A1-U+00FF", "iam_role_description"))
        if i.get("assumeRolePolicy") is not None:
            size = _minified_length(i["assumeRolePolicy"])
            if size > value("iam_trust_policy_chars"):
                out.append(Breach(variant, r.urn, "assumeRolePolicy", f"{size} characters without whitespace",
                                  f"at most {value('iam_trust_policy_chars')}", "iam_trust_policy_chars"))
    inline: dict[str, list[tuple[str, int]]] = defaultdict(list)
    attached: dict[str, list[str]] = defaultdict(list)
    for r in resources(result, "aws:iam/role:Role"):
        name = autoname(r)[1]
        for path, p in at(inputs(r), "inlinePolicies[]"):
            if p.get("policy"):
                inline[name].append((f"{r.urn} {path}", _minified_length(p["policy"])))
        for arn in inputs(r).get("managedPolicyArns") or []:
            attached[name].append(str(arn))
    for r in resources(result, "aws:iam/"):
        i = inputs(r)
        if r.type == "aws:iam/rolePolicy:RolePolicy":
            inline[str(i.get("role"))].append((r.urn, _minified_length(i.get("policy", ""))))
            path, name = autoname(r)
            if not fullmatch("iam_inline_policy_name", name):
                out.append(Breach(variant, r.urn, path, name, "1-128 characters of [A-Za-z0-9+=,.@_-]",
                                  "iam_inline_policy_name"))
        elif r.type == "aws:iam/rolePolicyAttachment:RolePolicyAttachment":
            attached[str(i.get("role"))].append(str(i.get("policyArn")))
        elif r.type == "aws:iam/policy:Policy":
            size = _minified_length(i.get("policy", ""))
            if size > value("iam_managed_policy_chars"):
                out.append(Breach(variant, r.urn, "policy", f"{size} characters without whitespace",
                                  f"at most {value('iam_managed_policy_chars')}", "iam_managed_policy_chars"))
        elif r.type == "aws:iam/instanceProfile:InstanceProfile":
            path, name = autoname(r)
            if not fullmatch("iam_instance_profile_name", name):
                out.append(Breach(variant, r.urn, path, name, "1-128 characters of [A-Za-z0-9+=,.@_-]",
                                  "iam_instance_profile_name"))
        for key in ("policy", "assumeRolePolicy"):
            if i.get(key) is not None and not fullmatch("iam_policy_document_chars", _policy_text(i[key])):
                out.append(Breach(variant, r.urn, key, _policy_text(i[key]), "tab, LF, CR and U+0020-U+00FF only",
                                  "iam_policy_document_chars"))
    for role, policies in inline.items():
        total = sum(size for _, size in policies)
        if total > value("iam_role_inline_policy_chars"):
            where = roles[role].urn if role in roles else f"role {role}"
            out.append(Breach(variant, where, f"inline policies ({len(policies)}: "
                              f"{', '.join(f'{u.rsplit(chr(58), 1)[-1]} {s}' for u, s in policies)})",
                              f"{total} characters without whitespace",
                              f"at most {value('iam_role_inline_policy_chars')} for all inline policies of a role",
                              "iam_role_inline_policy_chars"))
    for role, arns in attached.items():
        if len(arns) > value("iam_managed_policies_per_role"):
            where = roles[role].urn if role in roles else f"role {role}"
            out.append(Breach(variant, where, "managed policy attachments", arns,
                              f"at most {value('iam_managed_policies_per_role')}", "iam_managed_policies_per_role"))
    return out


def gcp_iam(variant: str, result) -> list[Breach]:
    out = []
    for r in resources(result, "gcp:"):
        i = inputs(r)
        if r.type == "gcp:projects/iAMCustomRole:IAMCustomRole":
            perms = i.get("permissions") or []
            if len(perms) > value("gcp_custom_role_permissions"):
                out.append(Breach(variant, r.urn, "permissions", f"{len(perms)} permissions",
                                  f"at most {value('gcp_custom_role_permissions')}", "gcp_custom_role_permissions"))
            if not fullmatch("gcp_custom_role_id", i.get("roleId", "")):
                out.append(Breach(variant, r.urn, "roleId", i.get("roleId"), "3-64 characters of [a-zA-Z0-9_.]",
                                  "gcp_custom_role_id"))
            if len((i.get("title") or "").encode()) > value("gcp_custom_role_title"):
                out.append(Breach(variant, r.urn, "title", i.get("title"), f"at most {value('gcp_custom_role_title')} bytes",
                                  "gcp_custom_role_title"))
        elif r.type == "gcp:serviceaccount/account:Account":
            if not fullmatch("gcp_service_account_id", i.get("accountId", "")):
                out.append(Breach(variant, r.urn, "accountId", i.get("accountId"), "6-30 characters, "
                                  "[a-z]([-a-z0-9]*[a-z0-9])", "gcp_service_account_id"))
    return out


# --- 5. names --------------------------------------------------------------------------------------


def _dns_breaches(variant, urn, path, name: str, limit: str) -> list[Breach]:
    rule = value(limit)
    name = name.rstrip(".")
    labels = name.split(".")
    out = []
    long = [label for label in labels if len(label.encode()) > rule["label"] or not label]
    if long:
        out.append(Breach(variant, urn, path, name, f"labels of 1-{rule['label']} bytes ({', '.join(long)})", limit))
    if len(name.encode()) > rule["name"]:
        out.append(Breach(variant, urn, path, name, f"at most {rule['name']} bytes", limit))
    return out


def _node_names(result) -> list[tuple[str, str]]:
    """(pool, the longest node name) for every Slurm pool: the resume programs name nodes <pool>-<n>."""
    design = result.design
    if design.scheduler != "slurm":
        return []
    return [(p.name, f"{p.name}-{p.max_nodes}") for p in design.pools]


def aws_names(variant: str, result) -> list[Breach]:
    out = []
    for r in resources(result, "aws:"):
        i = inputs(r)
        t = r.type
        if t == "aws:s3/bucket:Bucket" or t == "aws:s3/bucketV2:BucketV2":
            if i.get("bucketPrefix"):
                if len(i["bucketPrefix"]) > value("s3_bucket_prefix") or i["bucketPrefix"] != i["bucketPrefix"].lower():
                    out.append(Breach(variant, r.urn, "bucketPrefix", i["bucketPrefix"],
                                      f"lowercase, at most {value('s3_bucket_prefix')} characters", "s3_bucket_prefix"))
            else:
                path, name = autoname(r, "bucket", lower=True)
                if not fullmatch("s3_bucket_name", name):
                    out.append(Breach(variant, r.urn, path, name, LIMITS["s3_bucket_name"].what + " (3-63, "
                                      "lowercase letters, digits, . and -)", "s3_bucket_name"))
        elif t == "aws:s3/bucketObjectv2:BucketObjectv2" or t == "aws:s3/bucketObject:BucketObject":
            key = str(i.get("key", ""))
            if len(key.encode()) > value("s3_object_key_bytes") or not key:
                out.append(Breach(variant, r.urn, "key", key, f"1-{value('s3_object_key_bytes')} bytes of UTF-8",
                                  "s3_object_key_bytes"))
        elif t == "aws:secretsmanager/secret:Secret":
            path, name = autoname(r)
            if i.get("namePrefix"):
                path, name = "namePrefix", i["namePrefix"] + "x" * 26
            if not fullmatch("secretsmanager_name", name):
                out.append(Breach(variant, r.urn, path, name, "1-512 characters of [A-Za-z0-9/_+=.@-], not ending "
                                  "in - and six characters", "secretsmanager_name"))
        elif t == "aws:route53/zone:Zone":
            out += _dns_breaches(variant, r.urn, "name", str(i.get("name", "")), "route53_name")
            for pool, node in _node_names(result):
                out += _dns_breaches(variant, r.urn, f"<node {node} of pool {pool}>.name (at boot)",
                                     f"{node}.{i.get('name', '')}", "route53_name")
        elif t == "aws:rds/instance:Instance":
            if not fullmatch("rds_db_identifier", str(i.get("identifier", ""))):
                out.append(Breach(variant, r.urn, "identifier", i.get("identifier"), "1-63 letters, digits and -, a "
                                  "letter first, no - last, no --", "rds_db_identifier"))
            if not fullmatch("rds_group_name", str(i.get("finalSnapshotIdentifier", ""))):
                out.append(Breach(variant, r.urn, "finalSnapshotIdentifier", i.get("finalSnapshotIdentifier"),
                                  "1-255 letters, digits and -, a letter first, no - last, no --", "rds_group_name"))
        elif t == "aws:rds/parameterGroup:ParameterGroup":
            path, name = autoname(r)
            if not fullmatch("rds_group_name", name):
                out.append(Breach(variant, r.urn, path, name, "1-255 letters, digits and -, a letter first, no - "
                                  "last, no --", "rds_group_name"))
        elif t == "aws:route53/record:Record":
            out += _dns_breaches(variant, r.urn, "name", str(i.get("name", "")), "route53_name")
        elif t == "aws:ec2/launchTemplate:LaunchTemplate":
            path, name = autoname(r)
            if i.get("namePrefix"):
                path, name = "namePrefix", i["namePrefix"] + "x" * 26
            if not fullmatch("ec2_launch_template_name", name):
                out.append(Breach(variant, r.urn, path, name, "3-128 characters of [a-zA-Z0-9().-/_]",
                                  "ec2_launch_template_name"))
            if len(str(i.get("description", ""))) > value("ec2_description"):
                out.append(Breach(variant, r.urn, "description", i["description"],
                                  f"at most {value('ec2_description')} characters", "ec2_description"))
        elif t == "aws:ec2/placementGroup:PlacementGroup":
            path, name = autoname(r)
            if len(name) > value("ec2_placement_group_name") or not name.isascii():
                out.append(Breach(variant, r.urn, path, name, "up to 255 ASCII characters", "ec2_placement_group_name"))
        elif t == "aws:ec2/securityGroup:SecurityGroup":
            path, name = autoname(r)
            if len(name) > value("ec2_security_group_name") or name.lower().startswith("sg-"):
                out.append(Breach(variant, r.urn, path, name, "up to 255 characters, not starting sg-",
                                  "ec2_security_group_name"))
            texts = [(path, name), ("description", str(i.get("description", "")))]
            texts += [(p, str(d)) for rule in ("ingress[]", "egress[]") for p, d in at(i, f"{rule}.description")]
            out += _sg_text(variant, r, texts)
        elif t in ("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
                   "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule",
                   "aws:ec2/securityGroupRule:SecurityGroupRule"):
            out += _sg_text(variant, r, [("description", str(i.get("description", "")))])
        elif t == "aws:eks/cluster:Cluster":
            path, name = autoname(r)
            if not fullmatch("eks_cluster_name", name):
                out.append(Breach(variant, r.urn, path, name, "1-100 characters, [0-9A-Za-z][A-Za-z0-9-_]*",
                                  "eks_cluster_name"))
        elif t == "aws:eks/nodeGroup:NodeGroup":
            path, name = autoname(r, "nodeGroupName")
            if i.get("nodeGroupNamePrefix"):
                path, name = "nodeGroupNamePrefix", i["nodeGroupNamePrefix"] + "x" * 26
            if not fullmatch("eks_nodegroup_name", name):
                out.append(Breach(variant, r.urn, path, name, "1-63 characters, [0-9A-Za-z][A-Za-z0-9-_]*",
                                  "eks_nodegroup_name"))
            if len(i.get("taints") or []) > value("eks_taints_per_nodegroup"):
                out.append(Breach(variant, r.urn, "taints", len(i["taints"]),
                                  f"at most {value('eks_taints_per_nodegroup')} taints", "eks_taints_per_nodegroup"))
        elif t in _AWS_NAME_PATTERNS:
            limit, allowed = _AWS_NAME_PATTERNS[t]
            path, name = autoname(r)
            if not fullmatch(limit, name):
                out.append(Breach(variant, r.urn, path, name, allowed, limit))
        elif t in ("aws:ec2/vpc:Vpc", "aws:ec2/subnet:Subnet") and i.get("cidrBlock"):
            low, high = value("vpc_cidr_prefix")
            prefix = ipaddress.ip_network(i["cidrBlock"], strict=False).prefixlen
            if not low <= prefix <= high:
                out.append(Breach(variant, r.urn, "cidrBlock", i["cidrBlock"], f"a /{low} to /{high} block",
                                  "vpc_cidr_prefix"))
    return out


# Types whose name is judged by one pattern of limits.yaml alone: type -> (limit, what is allowed).
_AWS_NAME_PATTERNS = {
    "aws:cloudwatch/logGroup:LogGroup": ("cloudwatch_log_group_name", "1-512 characters of [.-_/#A-Za-z0-9]"),
    "aws:sns/topic:Topic": ("sns_topic_name", "1-256 characters of A-Za-z0-9_-"),
    "aws:amp/ruleGroupNamespace:RuleGroupNamespace": ("amp_rule_groups_namespace_name",
                                                      "1-64 characters, [0-9A-Za-z][-.0-9A-Z_a-z]*"),
}


def _sg_text(variant, r, texts) -> list[Breach]:
    out = []
    for path, text in texts:
        if not fullmatch("ec2_security_group_text_chars", text) or len(text) > value("ec2_description"):
            out.append(Breach(variant, r.urn, path, text, "up to 255 characters of a-z A-Z 0-9, spaces and "
                              "._-:/()#,@[]+=&;{}!$*", "ec2_security_group_text_chars"))
    return out


# GCP resources named by RFC 1035 (type -> name input); others are checked on their own below.
_GCP_NAMED = {
    "gcp:compute/network:Network": "name", "gcp:compute/subnetwork:Subnetwork": "name",
    "gcp:compute/firewall:Firewall": "name", "gcp:compute/router:Router": "name",
    "gcp:compute/routerNat:RouterNat": "name", "gcp:compute/globalAddress:GlobalAddress": "name",
    "gcp:compute/address:Address": "name", "gcp:compute/resourcePolicy:ResourcePolicy": "name",
    "gcp:compute/instance:Instance": "name", "gcp:compute/instanceTemplate:InstanceTemplate": "name",
    "gcp:container/nodePool:NodePool": "name", "gcp:filestore/instance:Instance": "name",
    "gcp:lustre/instance:Instance": "instanceId", "gcp:dns/managedZone:ManagedZone": "name",
    "gcp:compute/networkAttachment:NetworkAttachment": "name",
}


def gcp_names(variant: str, result) -> list[Breach]:
    out = []
    runtime = cluster_json(result)
    for r in resources(result, "gcp:"):
        i, t = inputs(r), r.type
        if t in _GCP_NAMED:
            field = _GCP_NAMED[t]
            if t == "gcp:compute/instanceTemplate:InstanceTemplate" and i.get("namePrefix"):
                prefix = i["namePrefix"]
                if len(prefix) > value("gce_instance_template_name_prefix"):
                    out.append(Breach(variant, r.urn, "namePrefix", prefix, f"at most "
                                      f"{value('gce_instance_template_name_prefix')} characters",
                                      "gce_instance_template_name_prefix"))
                path, name = "namePrefix (+ the provider's 24-digit suffix)", prefix + "0" * 24
                name = name[:63]
            else:
                path, name = autoname(r, field)
            if not fullmatch("gcp_resource_name", name):
                out.append(Breach(variant, r.urn, path, name, "RFC 1035: 1-63 lowercase letters, digits and -, "
                                  "a letter first, no - last", "gcp_resource_name"))
        if t == "gcp:sql/databaseInstance:DatabaseInstance":
            path, name = autoname(r)
            if not fullmatch("cloudsql_instance_id", name):
                out.append(Breach(variant, r.urn, path, name, "lowercase letters, digits and -, a letter first",
                                  "cloudsql_instance_id"))
        if t == "gcp:container/cluster:Cluster":
            path, name = autoname(r)
            if not fullmatch("gke_cluster_name", name):
                out.append(Breach(variant, r.urn, path, name, "1-40 lowercase letters, digits and -", "gke_cluster_name"))
        elif t == "gcp:tpu/v2Vm:V2Vm":
            path, name = autoname(r)
            if not fullmatch("tpu_node_id", name):
                out.append(Breach(variant, r.urn, path, name, "RFC 1035, 1-63 characters", "tpu_node_id"))
        elif t == "gcp:lustre/instance:Instance":
            if not fullmatch("managed_lustre_filesystem", str(i.get("filesystem", ""))):
                out.append(Breach(variant, r.urn, "filesystem", i.get("filesystem"), "1-8 letters and digits",
                                  "managed_lustre_filesystem"))
        elif t == "gcp:filestore/instance:Instance":
            for path, share in at(i, "fileShares.name"):
                if not fullmatch("filestore_share_name", str(share)):
                    out.append(Breach(variant, r.urn, path, share, "a letter, then lowercase letters, digits and _; "
                                      "16 characters", "filestore_share_name"))
        elif t == "gcp:storage/bucket:Bucket":
            path, name = autoname(r, lower=True)
            if not fullmatch("gcs_bucket_name", name):
                out.append(Breach(variant, r.urn, path, name, "3-63 lowercase letters, digits, - and _", "gcs_bucket_name"))
        elif t == "gcp:storage/bucketObject:BucketObject":
            name = str(i.get("name", ""))
            if not name or len(name.encode()) > value("gcs_object_name_bytes") or name in (".", "..") \
                    or "\r" in name or "\n" in name:
                out.append(Breach(variant, r.urn, "name", name, "1-1024 bytes of UTF-8, no CR or LF",
                                  "gcs_object_name_bytes"))
        elif t == "gcp:compute/image:Image":
            for field in ("name", "family"):
                path, name = autoname(r, field) if field == "name" else (field, i.get(field))
                if name is not None and not fullmatch("gce_image_name", str(name)):
                    out.append(Breach(variant, r.urn, path, name, "RFC 1035: 1-63 lowercase letters, digits and -",
                                      "gce_image_name"))
        elif t == "gcp:compute/subnetwork:Subnetwork" and i.get("ipCidrRange"):
            ranges = [("ipCidrRange", i["ipCidrRange"])] + [(p, c) for p, c in at(i, "secondaryIpRanges[].ipCidrRange")]
            for path, cidr in ranges:
                if ipaddress.ip_network(cidr, strict=False).prefixlen > value("gcp_subnet_prefix"):
                    out.append(Breach(variant, r.urn, path, cidr, f"a /{value('gcp_subnet_prefix')} or larger range",
                                      "gcp_subnet_prefix"))
        elif t == "gcp:secretmanager/secret:Secret":
            if not fullmatch("gcp_secret_id", str(i.get("secretId", ""))):
                out.append(Breach(variant, r.urn, "secretId", i.get("secretId"), "1-255 of [A-Za-z0-9_-]", "gcp_secret_id"))
        elif t == "gcp:dns/managedZone:ManagedZone":
            out += _dns_breaches(variant, r.urn, "dnsName", str(i.get("dnsName", "")), "cloud_dns_name")
            for pool, node in _node_names(result):
                out += _dns_breaches(variant, r.urn, f"<node {node} of pool {pool}>.dnsName (at boot)",
                                     f"{node}.{i.get('dnsName', '')}", "cloud_dns_name")
        elif t == "gcp:dns/recordSet:RecordSet":
            out += _dns_breaches(variant, r.urn, "name", str(i.get("name", "")), "cloud_dns_name")
    prefix = runtime.get("instance_prefix")
    if prefix:
        for pool, node in _node_names(result):
            if not fullmatch("gcp_resource_name", prefix + node):
                out.append(Breach(variant, f"<instance of node {node}, created at boot>", "name", prefix + node,
                                  "RFC 1035, 1-63 characters", "gcp_resource_name"))
    return out


# --- 5b. EC2 Image Builder (the baked node image) ------------------------------------------------------

_IMAGEBUILDER_NAMED = ("aws:imagebuilder/component:Component", "aws:imagebuilder/imageRecipe:ImageRecipe",
                       "aws:imagebuilder/infrastructureConfiguration:InfrastructureConfiguration",
                       "aws:imagebuilder/distributionConfiguration:DistributionConfiguration")
BUILD_DATE = "{{ imagebuilder:buildDate }}"


def imagebuilder(variant: str, result) -> list[Breach]:
    """Image Builder resources: names, semantic versions (each number <= 2^30-1), the component's
    inline document, the AMI name (with the build date), tags (30 at most) and volume sizes."""
    out = []
    defaults = _default_tags(result)
    for r in resources(result, "aws:imagebuilder/"):
        i = inputs(r)
        if r.type in _IMAGEBUILDER_NAMED:
            path, name = autoname(r)
            if not fullmatch("imagebuilder_resource_name", name):
                out.append(Breach(variant, r.urn, path, name, "3-128 of letters, digits, - _ and spaces",
                                  "imagebuilder_resource_name"))
        if "version" in i:
            match = re.fullmatch(value("imagebuilder_semantic_version"), str(i["version"]))
            if not match or any(int(n) > 2**30 - 1 for n in match.groups()):
                out.append(Breach(variant, r.urn, "version", i["version"], "major.minor.patch, each <= 1073741823",
                                  "imagebuilder_semantic_version"))
        data = i.get("data")
        if isinstance(data, str) and not 1 <= len(data) <= value("imagebuilder_component_data_chars"):
            out.append(Breach(variant, r.urn, "data", f"{len(data)} characters",
                              f"1 to {value('imagebuilder_component_data_chars')} characters",
                              "imagebuilder_component_data_chars"))
        for path, name in at(i, "distributions[].amiDistributionConfiguration.name"):
            if not fullmatch("imagebuilder_ami_name", str(name)) or BUILD_DATE not in str(name):
                out.append(Breach(variant, r.urn, path, name, f"1-127 characters, with {BUILD_DATE}",
                                  "imagebuilder_ami_name"))
        for path, size in at(i, "blockDeviceMappings[].ebs.volumeSize"):
            if not 1 <= int(size) <= value("imagebuilder_volume_gib"):
                out.append(Breach(variant, r.urn, path, size, f"1 to {value('imagebuilder_volume_gib')} GiB",
                                  "imagebuilder_volume_gib"))
        maps = [("tags (tags_all)", {**defaults.get(r.provider, defaults[None]), **(i.get("tags") or {})})]
        maps += [("resourceTags", i["resourceTags"])] if isinstance(i.get("resourceTags"), dict) else []
        maps += list(at(i, "distributions[].amiDistributionConfiguration.amiTags"))
        for path, tags in maps:
            if isinstance(tags, dict) and len(tags) > value("imagebuilder_tags_per_resource"):
                out.append(Breach(variant, r.urn, path, f"{len(tags)} tags",
                                  f"at most {value('imagebuilder_tags_per_resource')}", "imagebuilder_tags_per_resource"))
    return out


# --- 6. network interfaces ---------------------------------------------------------------------------


def ec2_interfaces(variant: str, result) -> list[Breach]:
    """Launch template NICs: per network card at most the type's maximum, one EFA per card, EFA
    devices at most the type's MaximumEfaInterfaces, the primary (card 0, device 0) an ENA interface."""
    out = []
    catalog = load_catalog()
    per_card = value("ec2_interfaces_per_card")
    for r in resources(result, "aws:ec2/launchTemplate:LaunchTemplate"):
        i = inputs(r)
        nics = i.get("networkInterfaces") or []
        itype = catalog.instance_types["aws"].get(str(i.get("instanceType")))
        if not nics or itype is None:
            continue
        cards: dict[int, list[dict]] = defaultdict(list)
        for nic in nics:
            cards[int(nic.get("networkCardIndex") or 0)].append(nic)
        for card, on_card in sorted(cards.items()):
            if card >= itype.network_cards:
                out.append(Breach(variant, r.urn, f"networkInterfaces (card {card})", card,
                                  f"{itype.name} has network cards 0-{itype.network_cards - 1}", "ec2_interfaces_per_card"))
            if len(on_card) > per_card.get(itype.name, 10 ** 6):
                out.append(Breach(variant, r.urn, f"networkInterfaces (card {card})", f"{len(on_card)} interfaces",
                                  f"at most {per_card[itype.name]} per card on {itype.name}", "ec2_interfaces_per_card"))
            efa = [n for n in on_card if n.get("interfaceType") in ("efa", "efa-only")]
            if len(efa) > value("ec2_efa_per_card"):
                out.append(Breach(variant, r.urn, f"networkInterfaces (card {card})", f"{len(efa)} EFA devices",
                                  "one EFA device per network card", "ec2_efa_per_card"))
            devices = [int(n.get("deviceIndex") or 0) for n in on_card]
            if len(set(devices)) != len(devices):
                out.append(Breach(variant, r.urn, f"networkInterfaces (card {card}) deviceIndex", devices,
                                  "a distinct device index per interface of a card", "ec2_interfaces_per_card"))
        total_efa = sum(n.get("interfaceType") in ("efa", "efa-only") for n in nics)
        if total_efa > itype.max_efa_interfaces:
            out.append(Breach(variant, r.urn, "networkInterfaces", f"{total_efa} EFA devices",
                              f"at most {itype.max_efa_interfaces} on {itype.name} (catalog max_efa_interfaces, "
                              "DescribeInstanceTypes EfaInfo.MaximumEfaInterfaces)", "ec2_efa_per_card"))
        primary = [n for n in cards.get(0, []) if int(n.get("deviceIndex") or 0) == 0]
        if not primary or primary[0].get("interfaceType") == "efa-only":
            out.append(Breach(variant, r.urn, "networkInterfaces (card 0, device 0)",
                              primary[0].get("interfaceType") if primary else None,
                              "a primary interface that is not efa-only", "ec2_efa_per_card"))
    return out


def gce_max_nics(machine_type: str) -> int | None:
    rule = value("gce_nics")
    if machine_type in rule["exceptions"]:
        return rule["exceptions"][machine_type]
    catalog = load_catalog()
    vcpu = None
    itype = catalog.instance_types["gcp"].get(machine_type)
    if itype is not None:
        vcpu = itype.vcpu
    elif machine_type in catalog.controllers:
        vcpu = catalog.controllers[machine_type].vcpu
    else:
        for gen in catalog.tpus.values():
            if machine_type in gen.hosts:
                vcpu = gen.hosts[machine_type][0]
        m = re.fullmatch(r"[a-z0-9]+-(standard|highmem|highcpu)-(\d+)", machine_type)
        if vcpu is None and m:
            vcpu = int(m.group(2))
    if vcpu is None:
        return None
    return min(rule["max"], max(rule["min_cap"], vcpu))


def gce_interfaces(variant: str, result) -> list[Breach]:
    out = []
    for r in resources(result, "gcp:"):
        i = inputs(r)
        if r.type in ("gcp:compute/instanceTemplate:InstanceTemplate", "gcp:compute/instance:Instance"):
            machine, count, path = i.get("machineType"), len(i.get("networkInterfaces") or []), "networkInterfaces"
        elif r.type == "gcp:container/nodePool:NodePool":
            machine = (i.get("nodeConfig") or {}).get("machineType")
            extra = (i.get("networkConfig") or {}).get("additionalNodeNetworkConfigs") or []
            count, path = 1 + len(extra), "networkConfig.additionalNodeNetworkConfigs (+ the primary NIC)"
        else:
            continue
        most = gce_max_nics(str(machine))
        if most is not None and count > most:
            out.append(Breach(variant, r.urn, path, f"{count} NICs on {machine}", f"at most {most} on {machine}",
                              "gce_nics"))
    return out


# --- 7. Kubernetes objects ----------------------------------------------------------------------

# Kinds whose name must be an RFC 1123 label (63); every other kind takes a DNS subdomain (253).
_LABEL_NAMED = {"Namespace", "Service", "Job"}


def k8s_manifests(result) -> list[tuple[str, dict]]:
    """(file, object) for every Kubernetes object the plan renders: the applied objects and the
    example jobs (not Helm values)."""
    out = []
    for name, text in sorted(result.files.items()):
        if name.startswith("k8s/") and name.endswith((".yaml", ".yml")) and not name.startswith("k8s/helm/"):
            for doc in yaml.safe_load_all(text):
                if isinstance(doc, dict) and "kind" in doc:
                    out.append((name, doc))
    return out


def _label_breaches(variant, where, path, labels: dict) -> list[Breach]:
    out = []
    for key, val in (labels or {}).items():
        if not fullmatch("k8s_label_key", str(key)):
            out.append(Breach(variant, where, f"{path}.{key}", key, "a label key: [prefix/]name, name 1-63 of "
                              "[A-Za-z0-9-_.], prefix a DNS subdomain", "k8s_label_key"))
        if val is not None and not fullmatch("k8s_label_value", str(val)):
            out.append(Breach(variant, where, f"{path}.{key}", val, "a label value: 0-63 of [A-Za-z0-9-_.], "
                              "alphanumeric first and last", "k8s_label_value"))
    return out


def _taint_breaches(variant, where, path, taints) -> list[Breach]:
    out = []
    for j, taint in enumerate(taints or []):
        out += _label_breaches(variant, where, f"{path}[{j}]", {taint.get("key"): taint.get("value")})
    return out


def _walk_object(variant: str, where: str, obj: Any, path: str = "") -> list[Breach]:
    """Label maps, selectors, container/volume/port names and annotation keys anywhere in an object."""
    out = []
    if isinstance(obj, dict):
        for key, child in obj.items():
            here = f"{path}.{key}" if path else key
            if key in ("labels", "matchLabels", "nodeSelector", "nodeLabels") and isinstance(child, dict):
                out += _label_breaches(variant, where, here, child)
            elif key == "annotations" and isinstance(child, dict):
                for k in child:
                    if not fullmatch("k8s_label_key", str(k)):
                        out.append(Breach(variant, where, f"{here}.{k}", k, "an annotation key (label key syntax)",
                                          "k8s_label_key"))
            elif key in ("containers", "initContainers", "volumes") and isinstance(child, list):
                for j, item in enumerate(child):
                    name = (item or {}).get("name")
                    if not fullmatch("k8s_dns_label", str(name)):
                        out.append(Breach(variant, where, f"{here}[{j}].name", name, "an RFC 1123 label (63)",
                                          "k8s_dns_label"))
                    for k, port in enumerate((item or {}).get("ports") or []):
                        if port.get("name") is not None and not fullmatch("k8s_port_name", str(port["name"])):
                            out.append(Breach(variant, where, f"{here}[{j}].ports[{k}].name", port["name"],
                                              "an IANA_SVC_NAME (15)", "k8s_port_name"))
                    out += _walk_object(variant, where, item, f"{here}[{j}]")
            else:
                out += _walk_object(variant, where, child, here)
    elif isinstance(obj, list):
        for j, item in enumerate(obj):
            out += _walk_object(variant, where, item, f"{path}[{j}]")
    return out


def k8s_objects(variant: str, result) -> list[Breach]:
    """Every rendered Kubernetes object: names by kind, namespaces, labels, selectors, taints, names
    of containers, volumes and ports, ConfigMap keys; JobSet's Jobs; EKS/GKE node labels and taints;
    Helm release names."""
    out = []
    for file, obj in k8s_manifests(result):
        meta = obj.get("metadata") or {}
        kind, name = obj.get("kind"), meta.get("name")
        where = f"{file} {kind}/{name}"
        rule = "k8s_dns_label" if kind in _LABEL_NAMED else "k8s_dns_subdomain"
        if not fullmatch(rule, str(name)):
            out.append(Breach(variant, where, "metadata.name", name,
                              "an RFC 1123 label (63)" if rule == "k8s_dns_label" else "a DNS subdomain (253)", rule))
        if meta.get("namespace") is not None and not fullmatch("k8s_dns_label", str(meta["namespace"])):
            out.append(Breach(variant, where, "metadata.namespace", meta["namespace"], "an RFC 1123 label (63)",
                              "k8s_dns_label"))
        if kind == "ConfigMap":
            size = sum(len(str(v).encode()) for part in ("data", "binaryData") for v in (obj.get(part) or {}).values())
            if size > value("k8s_configmap_bytes"):
                out.append(Breach(variant, where, "data", f"{size} bytes", f"at most {value('k8s_configmap_bytes')}",
                                  "k8s_configmap_bytes"))
            for key in (obj.get("data") or {}):
                if not fullmatch("k8s_configmap_key", key):
                    out.append(Breach(variant, where, f"data.{key}", key, "[-._a-zA-Z0-9]{1,253}", "k8s_configmap_key"))
        if kind == "JobSet":
            for j, job in enumerate((obj.get("spec") or {}).get("replicatedJobs") or []):
                replicas = int(job.get("replicas", 1) or 1)
                pods = int(((job.get("template") or {}).get("spec") or {}).get("parallelism", 1) or 1)
                host = f"{name}-{job.get('name')}-{replicas - 1}-{pods - 1}"
                if not fullmatch("k8s_dns_label", host):
                    out.append(Breach(variant, where, f"spec.replicatedJobs[{j}].name (pod hostname {host})", host,
                                      "JobSet names each Job <jobset>-<replicatedJob>-<index> and its pods' hostnames "
                                      "<job>-<pod index>: RFC 1123 labels (63)", "k8s_dns_label"))
        if kind == "Job" and (obj.get("spec") or {}).get("completionMode") == "Indexed":
            host = f"{name}-{int(obj['spec'].get('completions', 1) or 1) - 1}"
            if not fullmatch("k8s_dns_label", host):
                out.append(Breach(variant, where, "metadata.name (pod hostname)", host, "an Indexed Job's pods are "
                                  "named <job>-<index> as hostnames: an RFC 1123 label (63)", "k8s_dns_label"))
        out += _walk_object(variant, where, obj)
    for r in resources(result):
        i = inputs(r)
        if r.type == "aws:eks/nodeGroup:NodeGroup":
            out += _label_breaches(variant, r.urn, "labels", i.get("labels"))
            out += _taint_breaches(variant, r.urn, "taints", i.get("taints"))
        elif r.type in ("gcp:container/nodePool:NodePool", "gcp:container/cluster:Cluster"):
            node = i.get("nodeConfig") or {}
            out += _label_breaches(variant, r.urn, "nodeConfig.labels", node.get("labels"))
            out += _taint_breaches(variant, r.urn, "nodeConfig.taints", node.get("taints"))
        elif r.type == "kubernetes:helm.sh/v3:Release":
            name = i.get("name") or r.name
            if len(str(name)) > value("helm_release_name") or not fullmatch("k8s_dns_label", str(name)):
                out.append(Breach(variant, r.urn, "name", name, f"an RFC 1123 label of at most "
                                  f"{value('helm_release_name')} characters", "helm_release_name"))
            if i.get("namespace") and not fullmatch("k8s_dns_label", str(i["namespace"])):
                out.append(Breach(variant, r.urn, "namespace", i["namespace"], "an RFC 1123 label (63)", "k8s_dns_label"))
    return out


def secret_values(variant: str, result) -> list[Breach]:
    """Secret values: Secrets Manager SecretString and Secret Manager payloads, 64 KiB each."""
    out = []
    for r in resources(result):
        i = inputs(r)
        if r.type == "aws:secretsmanager/secretVersion:SecretVersion" and i.get("secretString") is not None:
            path, limit = "secretString", "secretsmanager_secret_bytes"
            size = len(str(i["secretString"]).encode())
        elif r.type == "gcp:secretmanager/secretVersion:SecretVersion" and i.get("secretData") is not None:
            path, limit = "secretData", "gcp_secret_payload_bytes"
            size = len(str(i["secretData"]).encode())
        else:
            continue
        if size > value(limit):
            out.append(Breach(variant, r.urn, path, f"{size} bytes (value not shown)", f"at most {value(limit)} bytes",
                              limit))
    return out


def budgets(variant: str, result) -> list[Breach]:
    """Budgets (spec cost): the AWS budget's name and notification count, each notification's one
    SNS subscriber; the Cloud Billing budget's display name and notification channels."""
    out = []
    for r in resources(result, "aws:budgets/budget:Budget"):
        i = inputs(r)
        path, name = autoname(r)
        if not fullmatch("aws_budget_name", name):
            out.append(Breach(variant, r.urn, path, name, "1-100 characters, no ':' or '\\', no '/action/'",
                              "aws_budget_name"))
        notes = i.get("notifications") or []
        if len(notes) > value("aws_budget_notifications"):
            out.append(Breach(variant, r.urn, "notifications", f"{len(notes)} notifications",
                              f"at most {value('aws_budget_notifications')}", "aws_budget_notifications"))
        for j, note in enumerate(notes):
            if len(note.get("subscriberSnsTopicArns") or []) > 1:
                out.append(Breach(variant, r.urn, f"notifications[{j}].subscriberSnsTopicArns",
                                  note["subscriberSnsTopicArns"], "one SNS subscriber per notification",
                                  "aws_budget_notifications"))
    for r in resources(result, "gcp:billing/budget:Budget"):
        i = inputs(r)
        name = str(i.get("displayName", ""))
        if not 0 < len(name) <= value("gcp_budget_display_name"):
            out.append(Breach(variant, r.urn, "displayName", name, f"1-{value('gcp_budget_display_name')} "
                              "characters", "gcp_budget_display_name"))
        rule = i.get("allUpdatesRule")
        channels = (rule or {}).get("monitoringNotificationChannels") or []
        if rule is not None and not channels and not rule.get("pubsubTopic"):
            out.append(Breach(variant, r.urn, "allUpdatesRule", rule, "a channel or a Pub/Sub topic, or no rule",
                              "gcp_budget_notification_rule"))
        if len(channels) > value("gcp_budget_channels"):
            out.append(Breach(variant, r.urn, "allUpdatesRule.monitoringNotificationChannels",
                              f"{len(channels)} channels", f"at most {value('gcp_budget_channels')}",
                              "gcp_budget_channels"))
    return out


CHECKS: dict[str, Check] = {
    "ec2-user-data-16KB": user_data,
    "gce-metadata-256KB-512KB": gce_metadata,
    "aws-tags": aws_tags,
    "gcp-labels": gcp_labels,
    "gce-network-tags": gce_network_tags,
    "aws-iam-policy-sizes-and-names": aws_iam,
    "gcp-iam-custom-roles-and-accounts": gcp_iam,
    "aws-names": aws_names,
    "gcp-names": gcp_names,
    "aws-image-builder": imagebuilder,
    "ec2-network-interfaces-and-efa": ec2_interfaces,
    "gce-network-interfaces": gce_interfaces,
    "kubernetes-objects": k8s_objects,
    "secret-value-sizes": secret_values,
    "budgets": budgets,
}
