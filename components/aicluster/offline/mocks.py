"""FakeCloud: a deterministic, offline stand-in for AWS, GCP and the random provider.

``new_resource`` returns ``(id, state)`` where state is the resource's inputs merged with the
computed properties a real create would return (ids, ARNs, DNS names, IPs). Everything is
derived from a SHA-256 of (type, name) - never random, never time-based - so two plans of the
same program are identical.

Extending: add a function to ``RESOURCES`` (type token -> ``fn(r: _Res) -> (id, computed)``)
or to ``CALLS`` (invoke token -> ``fn(cloud, args) -> dict``). Unknown resource types get
``<short>-<hash>`` ids and echo their inputs; unknown invokes raise ``OfflineInvokeError``.

Inputs arrive with camelCase wire keys (see ``capture``); secret markers are stripped before a
handler sees them. Works both under ``aicluster.offline.engine.run_program`` and under a plain
``pulumi.runtime.set_mocks(FakeCloud(config))``.
"""
from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

import pulumi

from aicluster.offline.capture import reveal

ACCOUNT = "123456789012"
DEFAULT_AWS_REGION = "us-east-1"
DEFAULT_GCP_PROJECT = "aicluster-demo"
DEFAULT_GCP_REGION = "us-central1"
CREATED = "2025-01-01T00:00:00Z"  # fixed: plans must not depend on the clock
_ALNUM = "0123456789abcdefghijklmnopqrstuvwxyz"


class OfflineInvokeError(RuntimeError):
    """A program called a data source (invoke) the fake cloud does not answer."""

    def __init__(self, token: str):
        self.token = token
        super().__init__(
            f"offline plan: invoke {token!r} is not supported. Offline plans must not depend on "
            "invokes (data sources / lookups): pass the value in through config or the spec, or "
            "add a fake for this token to aicluster.offline.mocks.CALLS"
        )


def _digest(*parts: object) -> bytes:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()


def _stream(*parts: object, length: int) -> bytes:
    out = b""
    counter = 0
    while len(out) < length:
        out += _digest(*parts, counter)
        counter += 1
    return out[:length]


def _config_str(config: Mapping[str, object], key: str) -> Optional[str]:
    value = config.get(key)
    if value is None or value == "":
        return None
    return value if isinstance(value, str) else json.dumps(value)


@dataclass
class _Res:
    """What a handler sees: one resource being created, plus deterministic helpers."""

    cloud: "FakeCloud"
    type: str
    name: str
    inputs: dict
    region: str
    salt: int = 0

    def hex(self, n: int, tag: str = "") -> str:
        return _stream(self.type, self.name, self.salt, tag, length=n).hex()[:n]

    def alnum(self, n: int, tag: str = "", alphabet: str = _ALNUM) -> str:
        data = _stream(self.type, self.name, self.salt, tag, "alnum", length=n)
        return "".join(alphabet[b % len(alphabet)] for b in data)

    def digits(self, n: int, tag: str = "") -> str:
        data = _stream(self.type, self.name, self.salt, tag, "digits", length=n)
        return str(1 + data[0] % 9) + "".join(str(b % 10) for b in data[1:])

    def uuid(self, tag: str = "") -> str:
        h = self.hex(32, tag)
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"

    def num(self, modulo: int, tag: str = "") -> int:
        return int.from_bytes(_stream(self.type, self.name, self.salt, tag, "n", length=8), "big") % modulo

    def get(self, key: str, default: Any = None) -> Any:
        value = self.inputs.get(key)
        return default if value is None or value == "" else value

    @property
    def given_name(self) -> str:
        """The cloud-side name: the `name` input, else the Pulumi resource name."""
        return self.get("name", self.name)

    def aws_id(self, prefix: str, tag: str = "") -> str:
        return f"{prefix}-{self.hex(17, prefix + tag)}"

    def arn(self, service: str, resource: str, region: bool = True, account: bool = True) -> str:
        return (
            f"arn:aws:{service}:{self.region if region else ''}:"
            f"{ACCOUNT if account else ''}:{resource}"
        )

    @property
    def project(self) -> str:
        return self.get("project", self.cloud.gcp_project)

    @property
    def gcp_region(self) -> str:
        return self.get("region", self.cloud.gcp_region)

    def gcp_zone(self) -> str:
        return self.get("zone", f"{self.gcp_region}-a")

    def ip_in(self, cidr: Optional[str], fallback: str, tag: str = "ip") -> str:
        """A host address inside cidr (skipping the first 4, AWS-reserved), deterministic."""
        try:
            net = ipaddress.ip_network(cidr or fallback, strict=False)
        except ValueError:
            net = ipaddress.ip_network(fallback)
        usable = max(net.num_addresses - 5, 1)
        return str(net.network_address + 4 + self.num(usable, tag))


def _first(value: Any) -> Any:
    """A list's first item; a scalar as-is (pulumi_aws 7 takes FSx subnetIds as one string)."""
    if isinstance(value, (list, tuple)):
        return value[0] if value else None
    return value


def _replace_text(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, dict):
        return {k: _replace_text(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_text(v, old, new) for v in value]
    return value


def _gcp_link(project: str, *path: str) -> str:
    return "https://www.googleapis.com/compute/v1/projects/" + "/".join((project,) + path)


def _zone_id(region: str, az: str) -> str:
    """us-east-1 + us-east-1b -> use1-az2 (AWS's AZ-id shape)."""
    words = {"north": "n", "south": "s", "east": "e", "west": "w", "central": "c",
             "northeast": "ne", "northwest": "nw", "southeast": "se", "southwest": "sw"}
    parts = region.split("-")
    if len(parts) == 3:
        code = parts[0] + words.get(parts[1], parts[1][:2]) + parts[2]
    else:
        code = region.replace("-", "")
    letter = az[len(region):] if az.startswith(region) else "a"
    index = (ord(letter[:1] or "a") - ord("a")) + 1
    return f"{code}-az{index}"


def _private_dns(ip: str, region: str) -> str:
    host = "ip-" + ip.replace(".", "-")
    return f"{host}.ec2.internal" if region == "us-east-1" else f"{host}.{region}.compute.internal"


def _public_dns(ip: str, region: str) -> str:
    host = "ec2-" + ip.replace(".", "-")
    zone = "compute-1" if region == "us-east-1" else f"{region}.compute"
    return f"{host}.{zone}.amazonaws.com"


def _public_ip(r: _Res, tag: str = "public") -> str:
    return f"198.51.100.{1 + r.num(254, tag)}"


def _fake_pem(r: _Res) -> str:
    body = base64.b64encode(_stream(r.type, r.name, "pem", length=96)).decode()
    pem = "-----BEGIN CERTIFICATE-----\n" + "\n".join(
        body[i : i + 64] for i in range(0, len(body), 64)
    ) + "\n-----END CERTIFICATE-----\n"
    return base64.b64encode(pem.encode()).decode()


# ---------------------------------------------------------------- AWS


def _tags(r: _Res) -> dict:
    return {"tagsAll": r.get("tags", {})}


def _ec2(r: _Res) -> dict:
    return {"tagsAll": r.get("tags", {}), "ownerId": ACCOUNT}


def _vpc(r: _Res):
    vid = r.aws_id("vpc")
    return vid, {
        **_ec2(r), "arn": r.arn("ec2", f"vpc/{vid}"),
        "cidrBlock": r.get("cidrBlock", "10.0.0.0/16"),
        "defaultSecurityGroupId": r.aws_id("sg"), "defaultRouteTableId": r.aws_id("rtb"),
        "mainRouteTableId": r.aws_id("rtb"), "defaultNetworkAclId": r.aws_id("acl"),
        "dhcpOptionsId": r.aws_id("dopt"), "instanceTenancy": r.get("instanceTenancy", "default"),
        "enableDnsSupport": r.get("enableDnsSupport", True),
        "enableDnsHostnames": r.get("enableDnsHostnames", False),
    }


def _subnet(r: _Res):
    sid = r.aws_id("subnet")
    az = r.get("availabilityZone")
    if az is None:
        az = f"{r.region}a"
    return sid, {
        **_ec2(r), "arn": r.arn("ec2", f"subnet/{sid}"), "availabilityZone": az,
        "availabilityZoneId": r.get("availabilityZoneId", _zone_id(r.region, az)),
        "mapPublicIpOnLaunch": r.get("mapPublicIpOnLaunch", False),
    }


def _igw(r: _Res):
    gid = r.aws_id("igw")
    return gid, {**_ec2(r), "arn": r.arn("ec2", f"internet-gateway/{gid}")}


def _eip(r: _Res):
    eid = r.aws_id("eipalloc")
    ip = _public_ip(r)
    return eid, {
        **_tags(r), "allocationId": eid, "publicIp": ip, "publicDns": _public_dns(ip, r.region),
        "domain": r.get("domain", "vpc"), "publicIpv4Pool": "amazon",
        "arn": r.arn("ec2", f"elastic-ip/{eid}"),
    }


def _nat(r: _Res):
    nid = r.aws_id("nat")
    subnet = r.cloud.lookup(r.get("subnetId"))
    eip = r.cloud.lookup(r.get("allocationId"))
    public = r.get("connectivityType", "public") == "public"
    return nid, {
        **_ec2(r), "connectivityType": r.get("connectivityType", "public"),
        "privateIp": r.ip_in(subnet.get("cidrBlock"), "10.0.0.0/16"),
        "publicIp": (eip.get("publicIp") or _public_ip(r)) if public else None,
        "networkInterfaceId": r.aws_id("eni"), "associationId": r.aws_id("eipassoc"),
    }


def _route_table(r: _Res):
    rid = r.aws_id("rtb")
    return rid, {**_ec2(r), "arn": r.arn("ec2", f"route-table/{rid}")}


def _route(r: _Res):
    return f"r-{r.get('routeTableId', 'rtb')}{r.digits(10)}", {"origin": "CreateRoute", "state": "active"}


def _vpc_endpoint(r: _Res):
    vid = r.aws_id("vpce")
    kind = r.get("vpcEndpointType", "Gateway")
    computed = {
        **_ec2(r), "arn": r.arn("ec2", f"vpc-endpoint/{vid}"), "vpcEndpointType": kind,
        "state": "available", "requesterManaged": False,
    }
    if kind == "Gateway":
        computed["prefixListId"] = f"pl-{r.hex(8, 'pl')}"
    else:
        service = str(r.get("serviceName", "svc")).split(".")[-1]
        computed["networkInterfaceIds"] = [r.aws_id("eni", str(i)) for i in range(len(r.get("subnetIds", [1])))]
        computed["dnsEntries"] = [{"dnsName": f"{vid}-{r.hex(8, 'dns')}.{service}.{r.region}.vpce.amazonaws.com",
                                   "hostedZoneId": "Z7HUB22UULQXV"}]
    return vid, computed


def _security_group(r: _Res):
    gid = r.aws_id("sg")
    return gid, {
        **_ec2(r), "arn": r.arn("ec2", f"security-group/{gid}"), "name": r.given_name,
        "description": r.get("description", "Managed by Pulumi"), "revokeRulesOnDelete": False,
    }


def _sg_rule_v2(r: _Res):
    rid = r.aws_id("sgr")
    return rid, {**_tags(r), "securityGroupRuleId": rid, "arn": r.arn("ec2", f"security-group-rule/{rid}")}


def _sg_rule(r: _Res):
    return f"sgrule-{r.digits(10)}", {"securityGroupRuleId": r.aws_id("sgr")}


def _placement_group(r: _Res):
    name = r.given_name
    return name, {
        **_tags(r), "name": name, "placementGroupId": r.aws_id("pg"),
        "arn": r.arn("ec2", f"placement-group/{name}"),
        "partitionCount": r.get("partitionCount", 0), "spreadLevel": r.get("spreadLevel", ""),
    }


def _launch_template(r: _Res):
    lid = r.aws_id("lt")
    return lid, {
        **_tags(r), "name": r.given_name, "arn": r.arn("ec2", f"launch-template/{lid}"),
        "latestVersion": 1, "defaultVersion": 1,
    }


def _instance(r: _Res):
    iid = r.aws_id("i")
    subnet = r.cloud.lookup(r.get("subnetId"))
    ip = r.get("privateIp") or r.ip_in(subnet.get("cidrBlock"), "10.0.0.0/16")
    computed = {
        **_ec2(r), "arn": r.arn("ec2", f"instance/{iid}"), "privateIp": ip,
        "privateDns": _private_dns(ip, r.region), "primaryNetworkInterfaceId": r.aws_id("eni"),
        "availabilityZone": r.get("availabilityZone", subnet.get("availabilityZone", f"{r.region}a")),
        "instanceState": "running", "tenancy": r.get("tenancy", "default"),
    }
    if r.get("associatePublicIpAddress"):
        public = _public_ip(r)
        computed.update(publicIp=public, publicDns=_public_dns(public, r.region))
    return iid, computed


def _iam_unique(r: _Res, prefix: str) -> str:
    return prefix + r.alnum(17, prefix, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")


def _iam_path(r: _Res) -> str:
    path = r.get("path", "/")
    return path if path.endswith("/") else path + "/"


def _role(r: _Res):
    name = r.given_name
    return name, {
        **_tags(r), "name": name, "arn": f"arn:aws:iam::{ACCOUNT}:role{_iam_path(r)}{name}",
        "uniqueId": _iam_unique(r, "AROA"), "createDate": CREATED,
        "path": _iam_path(r), "maxSessionDuration": r.get("maxSessionDuration", 3600),
    }


def _policy(r: _Res):
    name = r.given_name
    arn = f"arn:aws:iam::{ACCOUNT}:policy{_iam_path(r)}{name}"
    return arn, {**_tags(r), "name": name, "arn": arn, "policyId": _iam_unique(r, "ANPA"),
                 "attachmentCount": 0, "path": _iam_path(r)}


def _role_policy(r: _Res):
    name = r.given_name
    return f"{r.get('role', 'role')}:{name}", {"name": name}


def _role_policy_attachment(r: _Res):
    return f"{r.get('role', 'role')}-{r.digits(26)}", {}


def _instance_profile(r: _Res):
    name = r.given_name
    return name, {**_tags(r), "name": name, "uniqueId": _iam_unique(r, "AIPA"), "createDate": CREATED,
                  "arn": f"arn:aws:iam::{ACCOUNT}:instance-profile{_iam_path(r)}{name}"}


def _lustre(r: _Res):
    fid = f"fs-{r.hex(17)}"
    subnet = r.cloud.lookup(_first(r.get("subnetIds")))
    return fid, {
        **_ec2(r), "arn": r.arn("fsx", f"file-system/{fid}"),
        "dnsName": f"{fid}.fsx.{r.region}.amazonaws.com",
        "mountName": r.alnum(8, "mount"),
        "networkInterfaceIds": [r.aws_id("eni", "0"), r.aws_id("eni", "1")],
        "vpcId": subnet.get("vpcId", r.aws_id("vpc")),
        "fileSystemTypeVersion": r.get("fileSystemTypeVersion", "2.15"),
    }


def _efs(r: _Res):
    """EFS: the DNS name a client mounts is <id>.efs.<region>.amazonaws.com (EFS user guide, "Mounting
    on Amazon EC2 Linux instances using NFS")."""
    fid = f"fs-{r.hex(17)}"
    return fid, {**_tags(r), "arn": r.arn("elasticfilesystem", f"file-system/{fid}"),
                 "dnsName": f"{fid}.efs.{r.region}.amazonaws.com", "ownerId": ACCOUNT,
                 "performanceMode": r.get("performanceMode", "generalPurpose"),
                 "throughputMode": r.get("throughputMode", "bursting"), "numberOfMountTargets": 0}


def _efs_mount_target(r: _Res):
    subnet = r.cloud.lookup(r.get("subnetId"))
    mid = f"fsmt-{r.hex(17)}"
    return mid, {"ipAddress": r.ip_in(subnet.get("cidrBlock"), "10.0.0.0/24", "efs"),
                 "networkInterfaceId": r.aws_id("eni"), "ownerId": ACCOUNT,
                 "availabilityZoneName": subnet.get("availabilityZone", f"{r.region}a"),
                 "vpcId": subnet.get("vpcId", r.aws_id("vpc"))}


def _rds_instance(r: _Res):
    """RDS: the endpoint is <identifier>.<12 characters of the account and region>.<region>.rds.amazonaws.com
    (RDS user guide, "Finding the connection information for an RDS for MariaDB DB instance")."""
    ident = r.get("identifier", r.name)
    address = f"{ident}.{r.alnum(12, 'endpoint')}.{r.region}.rds.amazonaws.com"
    port = r.get("port", 3306)
    return f"db-{r.alnum(26, 'resource').upper()}", {
        **_tags(r), "identifier": ident, "address": address, "endpoint": f"{address}:{port}", "port": port,
        "arn": r.arn("rds", f"db:{ident}"), "resourceId": f"db-{r.alnum(26, 'resource').upper()}",
        "hostedZoneId": "Z2R2ITUGPM61AM", "status": "available", "kmsKeyId": r.arn("kms", f"key/{r.uuid('kms')}")}


def _rds_named(prefix: str):
    """A DB subnet group or parameter group: its id is its name."""
    def handler(r: _Res):
        name = r.get("name", r.name)
        return name, {**_tags(r), "name": name, "arn": r.arn("rds", f"{prefix}:{name}")}
    return handler


def _dra(r: _Res):
    did = f"dra-{r.hex(17)}"
    return did, {**_tags(r), "associationId": did,
                 "arn": r.arn("fsx", f"association/{r.get('fileSystemId', 'fs')}/{did}")}


def _sm_secret(r: _Res):
    name = r.given_name
    arn = r.arn("secretsmanager", f"secret:{name}-{r.alnum(6, 'suffix', _ALNUM + 'ABCDEFGHIJKLMNOPQRSTUVWXYZ')}")
    return arn, {**_tags(r), "name": name, "arn": arn,
                 "recoveryWindowInDays": r.get("recoveryWindowInDays", 30)}


def _sm_secret_version(r: _Res):
    version = r.uuid("version")
    secret = r.get("secretId", "secret")
    return f"{secret}|{version}", {"versionId": version, "arn": secret,
                                   "versionStages": r.get("versionStages", ["AWSCURRENT"])}


def _ssm_parameter(r: _Res):
    name = r.given_name
    return name, {**_tags(r), "name": name, "arn": r.arn("ssm", f"parameter/{name.lstrip('/')}"),
                  "version": 1, "tier": r.get("tier", "Standard"), "dataType": r.get("dataType", "text")}


def _bucket(r: _Res):
    bucket = r.get("bucket", r.name)
    return bucket, {
        **_tags(r), "bucket": bucket, "arn": f"arn:aws:s3:::{bucket}", "region": r.region,
        "bucketDomainName": f"{bucket}.s3.amazonaws.com",
        "bucketRegionalDomainName": f"{bucket}.s3.{r.region}.amazonaws.com",
        "hostedZoneId": "Z3AQBSTGFYJSTF",
    }


def _bucket_object(r: _Res):
    key = r.get("key", r.name)
    return key, {**_tags(r), "key": key, "etag": r.hex(32, "etag"), "versionId": r.alnum(32, "ver")}


def _route53_zone(r: _Res):
    zid = "Z" + r.alnum(20, "zone", alphabet="0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    servers = [f"ns-{r.num(2048, f'ns{i}')}.awsdns-{r.num(64, f'nsd{i}'):02d}.{tld}"
               for i, tld in enumerate(("com", "net", "org", "co.uk"))]
    return zid, {**_tags(r), "zoneId": zid, "arn": f"arn:aws:route53:::hostedzone/{zid}",
                 "nameServers": servers, "primaryNameServer": servers[0],
                 "comment": r.get("comment", "Managed by Pulumi")}


def _kms_key(r: _Res):
    kid = r.uuid("key")
    return kid, {**_tags(r), "keyId": kid, "arn": r.arn("kms", f"key/{kid}"),
                 "keyUsage": r.get("keyUsage", "ENCRYPT_DECRYPT")}


def _log_group(r: _Res):
    name = r.given_name
    return name, {**_tags(r), "name": name, "arn": r.arn("logs", f"log-group:{name}")}


def _amp_workspace(r: _Res):
    """An Amazon Managed Service for Prometheus workspace: ws-<uuid>, and its endpoint (which ends
    in a slash, as AMP's does)."""
    wid = f"ws-{r.uuid('ws')}"
    return wid, {**_tags(r), "arn": r.arn("aps", f"workspace/{wid}"),
                 "prometheusEndpoint": f"https://aps-workspaces.{r.region}.amazonaws.com/workspaces/{wid}/"}


def _imagebuilder(kind: str):
    """An Image Builder recipe, component, infrastructure or distribution configuration: its id is
    its ARN, <kind>/<lower-case name>[/<version>/1] (build version 1), as Image Builder's."""
    def handler(r: _Res):
        name = r.given_name.lower()
        version = f"/{r.get('version')}/1" if kind == "component" else (
            f"/{r.get('version')}" if r.get("version") else "")
        arn = r.arn("imagebuilder", f"{kind}/{name}{version}")
        return arn, {**_tags(r), "arn": arn, "dateCreated": "2026-01-01T00:00:00Z"}
    return handler


def _imagebuilder_image(r: _Res):
    """An Image Builder image: its AMI in output_resources, in the stack's region, named as the
    distribution names it (with the build date filled in)."""
    recipe = r.get("imageRecipeArn", "")
    arn = r.arn("imagebuilder", f"image/{recipe.rsplit('/', 2)[-2] if '/' in recipe else r.name}/1.0.0/1")
    ami = r.aws_id("ami")
    return arn, {**_tags(r), "arn": arn, "name": r.name, "version": "1.0.0/1", "osVersion": "Ubuntu 24",
                 "platform": "Linux",
                 "outputResources": [{"amis": [{"accountId": ACCOUNT, "description": "", "image": ami,
                                                "name": f"{r.name}-2026-01-01T00-00-00Z", "region": r.region}],
                                      "containers": []}]}


def _sns_topic(r: _Res):
    """An SNS topic: its id is its ARN (as the provider's)."""
    arn = r.arn("sns", r.given_name)
    return arn, {**_tags(r), "arn": arn, "name": r.given_name}


def _amp_alert_manager_definition(r: _Res):
    """AMP's alert manager definition: one per workspace, its id the workspace's."""
    return str(r.get("workspaceId")), {}


def _amp_rule_group_namespace(r: _Res):
    """An AMP rule groups namespace: its ARN is the id (as the provider's)."""
    arn = r.arn("aps", f"rulegroupsnamespace/{r.get('workspaceId')}/{r.given_name}")
    return arn, {**_tags(r), "arn": arn}


def _sqs_queue(r: _Res):
    """An SQS queue: its URL is the id (as the provider's), with its ARN."""
    name = r.given_name
    url = f"https://sqs.{r.region}.amazonaws.com/{ACCOUNT}/{name}"
    return url, {**_tags(r), "name": name, "url": url, "arn": r.arn("sqs", name)}


def _event_rule(r: _Res):
    name = r.get("name", f"{r.name}-{r.alnum(8, 'rule')}")
    return name, {**_tags(r), "name": name, "arn": r.arn("events", f"rule/{name}")}


def _eks_cluster(r: _Res):
    name = r.given_name
    host = r.hex(32, "endpoint").upper()
    vpc_config = dict(r.get("vpcConfig", {}))
    subnet = r.cloud.lookup(_first(vpc_config.get("subnetIds")))
    vpc_config.update(clusterSecurityGroupId=r.aws_id("sg"), vpcId=subnet.get("vpcId", r.aws_id("vpc")))
    return name, {
        **_tags(r), "name": name, "arn": r.arn("eks", f"cluster/{name}"),
        "endpoint": f"https://{host}.gr7.{r.region}.eks.amazonaws.com",
        "certificateAuthority": {"data": _fake_pem(r)},
        "identities": [{"oidcs": [{"issuer": f"https://oidc.eks.{r.region}.amazonaws.com/id/{host}"}]}],
        "status": "ACTIVE", "version": r.get("version", "1.31"), "platformVersion": "eks.1",
        "clusterId": r.uuid("cluster"), "createdAt": CREATED, "vpcConfig": vpc_config,
    }


def _eks_node_group(r: _Res):
    cluster = r.get("clusterName", "cluster")
    name = r.get("nodeGroupName", r.name)
    return f"{cluster}:{name}", {
        **_tags(r), "nodeGroupName": name, "status": "ACTIVE",
        "arn": r.arn("eks", f"nodegroup/{cluster}/{name}/{r.uuid('ng')}"),
        "resources": [{"autoscalingGroups": [{"name": f"eks-{name}-{r.uuid('asg')}"}],
                       "remoteAccessSecurityGroupId": ""}],
    }


def _eks_addon(r: _Res):
    cluster, addon = r.get("clusterName", "cluster"), r.get("addonName", r.name)
    return f"{cluster}:{addon}", {**_tags(r), "addonVersion": r.get("addonVersion", "v1.0.0-eksbuild.1"),
                                  "arn": r.arn("eks", f"addon/{cluster}/{addon}/{r.uuid('addon')}")}


def _eks_access_entry(r: _Res):
    cluster, principal = r.get("clusterName", "cluster"), r.get("principalArn", r.name)
    return f"{cluster}:{principal}", {
        **_tags(r), "type": r.get("type", "STANDARD"), "createdAt": CREATED,
        "accessEntryArn": r.arn("eks", f"access-entry/{cluster}/role/{ACCOUNT}/{r.name}/{r.uuid('ae')}"),
    }


def _eks_pod_identity(r: _Res):
    aid = "a-" + r.alnum(17, "pia")
    cluster = r.get("clusterName", "cluster")
    return aid, {**_tags(r), "associationId": aid,
                 "associationArn": r.arn("eks", f"podidentityassociation/{cluster}/{aid}")}


def _eks_access_policy(r: _Res):
    cluster, principal = r.get("clusterName", "cluster"), r.get("principalArn", r.name)
    return f"{cluster}#{principal}#{r.get('policyArn', 'policy')}", {"associatedAt": CREATED, "modifiedAt": CREATED}


# ---------------------------------------------------------------- Kubernetes (pulumi_kubernetes)


def _k8s_object(r: _Res):
    """A Kubernetes object as the API server returns it: the id is namespace/name (or name),
    metadata gains uid, resourceVersion and creationTimestamp; volumes and claims come out Bound."""
    meta = dict(r.get("metadata", {}))
    name = meta.get("name") or f"{r.name}-{r.alnum(8, 'k8s')}"
    meta.update(name=name, uid=r.uuid("uid"), resourceVersion=str(1 + r.num(10**6, "rv")),
                creationTimestamp=CREATED, generation=1)
    computed: dict = {"metadata": meta}
    kind = r.get("kind", "")
    if kind == "PersistentVolumeClaim":
        computed["status"] = {"phase": "Bound", "accessModes": (r.get("spec") or {}).get("accessModes", []),
                              "capacity": ((r.get("spec") or {}).get("resources") or {}).get("requests", {})}
    elif kind == "PersistentVolume":
        computed["status"] = {"phase": "Bound"}
    elif kind == "Namespace":
        computed["status"] = {"phase": "Active"}
    rid = f"{meta['namespace']}/{name}" if meta.get("namespace") else name
    return rid, computed


def _helm_release(r: _Res):
    name = r.get("name", r.name)
    namespace = r.get("namespace", "default")
    chart = str(r.get("chart", "chart")).rsplit("/", 1)[-1]
    return f"{namespace}/{name}", {"name": name, "status": {
        "name": name, "namespace": namespace, "chart": chart, "version": r.get("version", ""),
        "revision": 1, "status": "deployed"}}


# ---------------------------------------------------------------- random


def _password(r: _Res):
    length = int(r.get("length", 32))
    alphabet = ""
    if r.get("lower", True):
        alphabet += "abcdefghijklmnopqrstuvwxyz"
    if r.get("upper", True):
        alphabet += "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    if r.get("numeric", r.get("number", True)):
        alphabet += "0123456789"
    if r.get("special", True):
        alphabet += r.get("overrideSpecial", "!@#$%&*()-_=+[]{}<>:?")
    result = r.alnum(length, "result", alphabet or _ALNUM)
    computed = {"result": result}
    if r.type.endswith("randomPassword:RandomPassword"):
        computed["bcryptHash"] = "$2a$10$" + r.alnum(53, "bcrypt", "./" + _ALNUM + _ALNUM.upper())
    return "none", computed


def _random_id(r: _Res):
    raw = _stream(r.type, r.name, "bytes", length=int(r.get("byteLength", 8)))
    prefix = r.get("prefix", "")
    b64url = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    return b64url, {
        "hex": prefix + raw.hex(), "b64Std": prefix + base64.b64encode(raw).decode(),
        "b64Url": prefix + b64url, "dec": prefix + str(int.from_bytes(raw, "big")),
    }


def _random_bytes(r: _Res):
    raw = _stream(r.type, r.name, "bytes", length=int(r.get("length", 32)))
    return "none", {"base64": base64.b64encode(raw).decode(), "hex": raw.hex()}


def _random_uuid(r: _Res):
    u = r.uuid("uuid")
    return u, {"result": u}


# ---------------------------------------------------------------- GCP


def _gcp_global(kind: str):
    def handler(r: _Res):
        name = r.given_name
        link = _gcp_link(r.project, "global", kind, name)
        return f"projects/{r.project}/global/{kind}/{name}", {
            "name": name, "project": r.project, "selfLink": link,
        }
    return handler


def _gcp_regional(kind: str):
    def handler(r: _Res):
        name, region = r.given_name, r.gcp_region
        return f"projects/{r.project}/regions/{region}/{kind}/{name}", {
            "name": name, "project": r.project, "region": region,
            "selfLink": _gcp_link(r.project, "regions", region, kind, name),
        }
    return handler


def _gcp_network(r: _Res):
    gid, computed = _gcp_global("networks")(r)
    computed.update(numericId=r.digits(19), gatewayIpv4="",
                    autoCreateSubnetworks=r.get("autoCreateSubnetworks", True))
    return gid, computed


def _gcp_subnetwork(r: _Res):
    gid, computed = _gcp_regional("subnetworks")(r)
    cidr = r.get("ipCidrRange", "10.128.0.0/20")
    try:
        gateway = str(ipaddress.ip_network(cidr, strict=False).network_address + 1)
    except ValueError:
        gateway = "10.128.0.1"
    computed.update(gatewayAddress=gateway, subnetworkId=int(r.digits(15)),
                    fingerprint=r.hex(16, "fp"))
    return gid, computed


def _gcp_instance(r: _Res):
    name, zone = r.given_name, r.gcp_zone()
    nics = []
    for i, nic in enumerate(r.get("networkInterfaces", []) or [{}]):
        nic = dict(nic)
        subnet = r.cloud.lookup(nic.get("subnetwork"))
        nic.setdefault("name", f"nic{i}")
        nic["networkIp"] = nic.get("networkIp") or r.ip_in(subnet.get("ipCidrRange"), "10.128.0.0/20", f"nic{i}")
        nics.append(nic)
    boot = dict(r.get("bootDisk") or {})
    boot.setdefault("source", _gcp_link(r.project, "zones", zone, "disks", boot.get("deviceName") or name))
    return f"projects/{r.project}/zones/{zone}/instances/{name}", {
        "name": name, "project": r.project, "zone": zone, "networkInterfaces": nics, "bootDisk": boot,
        "selfLink": _gcp_link(r.project, "zones", zone, "instances", name),
        "instanceId": r.digits(19), "currentStatus": "RUNNING", "cpuPlatform": "Intel Sapphire Rapids",
    }


def _gcp_instance_template(r: _Res):
    if r.get("namePrefix") and not r.get("name"):   # the provider appends a unique suffix to the prefix
        r.inputs = {**r.inputs, "name": f"{r.get('namePrefix')}{r.digits(26, 'suffix')}"}
    gid, computed = _gcp_global("instanceTemplates")(r)
    computed["selfLinkUnique"] = f"{computed['selfLink']}?uniqueId={r.digits(19)}"
    return gid, computed


def _gcp_lustre(r: _Res):
    location = r.get("location", r.gcp_zone())
    instance = r.get("instanceId", r.name)
    ip = r.ip_in(None, "10.90.0.0/24", "lustre")
    gid = f"projects/{r.project}/locations/{location}/instances/{instance}"
    return gid, {"name": gid, "project": r.project, "state": "ACTIVE",
                 "mountPoint": f"{ip}@tcp:/{r.get('filesystem', 'lustrefs')}"}


def _gcp_filestore(r: _Res):
    location = r.get("location", r.gcp_zone())
    networks = [dict(n) for n in r.get("networks", []) or [{}]]
    for i, net in enumerate(networks):
        net["ipAddresses"] = [r.ip_in(net.get("reservedIpRange"), "10.91.0.0/29", f"fs{i}")]
    return f"projects/{r.project}/locations/{location}/instances/{r.given_name}", {
        "name": r.given_name, "project": r.project, "networks": networks, "createTime": CREATED,
    }


def _gcp_sql_instance(r: _Res):
    """Cloud SQL: a private IP from the private service access range, and the instance's own
    server CA (serverCaCerts[0].cert, a PEM)."""
    name = r.given_name
    ip = r.ip_in(None, "10.92.0.0/24", "sql")
    pem = base64.b64decode(_fake_pem(r)).decode()
    return name, {"name": name, "project": r.project, "privateIpAddress": ip, "publicIpAddress": "",
                  "ipAddresses": [{"ipAddress": ip, "type": "PRIVATE"}],
                  "connectionName": f"{r.project}:{r.get('region', r.gcp_region)}:{name}",
                  "selfLink": f"https://sqladmin.googleapis.com/sql/v1beta4/projects/{r.project}/instances/{name}",
                  "serverCaCerts": [{"cert": pem, "commonName": "C=US,O=Google\\, Inc,CN=Google Cloud SQL Server CA",
                                     "sha1Fingerprint": r.hex(40, "ca")}],
                  "serviceAccountEmailAddress": f"p{r.digits(12)}-{r.alnum(6)}@gcp-sa-cloud-sql.iam.gserviceaccount.com"}


def _gke_cluster(r: _Res):
    name, location = r.given_name, r.get("location", r.gcp_region)
    master_auth = dict(r.get("masterAuth", {}))
    master_auth["clusterCaCertificate"] = _fake_pem(r)
    private = dict(r.get("privateClusterConfig", {}))
    if private.get("enablePrivateNodes"):    # the control plane's address inside the cluster's network
        subnet = r.cloud.lookup(r.get("subnetwork"))
        private.update(privateEndpoint=r.ip_in(subnet.get("ipCidrRange"), "10.0.0.0/24", "private-endpoint"),
                       publicEndpoint="" if private.get("enablePrivateEndpoint") else
                       f"203.0.113.{1 + r.num(254, 'endpoint')}")
    # The DNS-based endpoint always exists (allowExternalTraffic either way): gke-<id>.<region>.gke.goog.
    endpoints = dict(r.get("controlPlaneEndpointsConfig", {}) or {})
    endpoints["dnsEndpointConfig"] = {**(endpoints.get("dnsEndpointConfig") or {}),
                                      "endpoint": f"gke-{r.hex(32, 'dns-endpoint')}.{r.gcp_region}.gke.goog"}
    return f"projects/{r.project}/locations/{location}/clusters/{name}", {
        "name": name, "project": r.project, "location": location, "privateClusterConfig": private or None,
        "controlPlaneEndpointsConfig": endpoints,
        "endpoint": f"203.0.113.{1 + r.num(254, 'endpoint')}", "masterAuth": master_auth,
        "masterVersion": r.get("minMasterVersion", "1.31.1-gke.1000000"),
        "selfLink": f"https://container.googleapis.com/v1/projects/{r.project}/locations/{location}/clusters/{name}",
        "labelFingerprint": r.hex(8, "label"),
    }


def _gke_node_pool(r: _Res):
    name = r.given_name
    cluster = str(r.get("cluster", "cluster")).split("/")[-1]
    location = r.get("location", r.gcp_region)
    group = _gcp_link(r.project, "zones", f"{r.gcp_region}-a", "instanceGroupManagers", f"gke-{cluster}-{name}-{r.hex(8)}-grp")
    return f"projects/{r.project}/locations/{location}/clusters/{cluster}/nodePools/{name}", {
        "name": name, "project": r.project, "location": location,
        "instanceGroupUrls": [group], "managedInstanceGroupUrls": [group.replace("instanceGroupManagers", "instanceGroups")],
    }


def _gcp_secret(r: _Res):
    name = f"projects/{r.project}/secrets/{r.get('secretId', r.name)}"
    return name, {"name": name, "project": r.project, "createTime": CREATED}


def _gcp_secret_version(r: _Res):
    name = f"{r.get('secret', 'projects/' + r.project + '/secrets/' + r.name)}/versions/1"
    return name, {"name": name, "version": "1", "createTime": CREATED}


def _gcp_account(r: _Res):
    email = f"{r.get('accountId', r.name)}@{r.project}.iam.gserviceaccount.com"
    return f"projects/{r.project}/serviceAccounts/{email}", {
        "email": email, "name": f"projects/{r.project}/serviceAccounts/{email}",
        "uniqueId": r.digits(21), "member": f"serviceAccount:{email}", "project": r.project,
    }


def _gcs_bucket(r: _Res):
    name = r.get("name") or f"{r.name}-{r.alnum(7, 'suffix')}"   # Pulumi autonames buckets
    return name, {"name": name, "project": r.project, "url": f"gs://{name}",
                  "selfLink": f"https://www.googleapis.com/storage/v1/b/{name}",
                  "location": str(r.get("location", r.gcp_region)).upper(), "storageClass": "STANDARD"}


def _gcs_object(r: _Res):
    bucket, name = r.get("bucket", "bucket"), r.get("name", r.name)
    content = str(r.get("content", ""))
    md5 = base64.b64encode(hashlib.md5(content.encode()).digest()).decode()
    return f"{bucket}-{name}", {"name": name, "bucket": bucket, "md5hash": md5, "crc32c": r.alnum(8, "crc"),
                                "selfLink": f"https://www.googleapis.com/storage/v1/b/{bucket}/o/{name}",
                                "mediaLink": f"https://storage.googleapis.com/download/storage/v1/b/{bucket}/o/{name}",
                                "outputName": name, "storageClass": "STANDARD"}


def _gcp_custom_role(r: _Res):
    name = f"projects/{r.project}/roles/{r.get('roleId', r.name)}"
    return name, {"name": name, "project": r.project, "stage": r.get("stage", "GA"), "deleted": False}


def _gcp_dns_zone(r: _Res):
    name = r.given_name
    return f"projects/{r.project}/managedZones/{name}", {
        "name": name, "project": r.project, "managedZoneId": int(r.digits(18)), "creationTime": CREATED,
        "nameServers": ["ns-gcp-private.googledomains.com."] if r.get("visibility") == "private"
        else [f"ns-cloud-a{i}.googledomains.com." for i in range(1, 5)]}


def _gcp_iam_member(r: _Res):
    return f"{r.get('role', 'role')}/{r.get('member', 'member')}", {"etag": f"BwY{r.alnum(9, 'etag')}="}


def _gcp_log_bucket(r: _Res):
    """A Cloud Logging bucket: its id is its full name, as the provider's."""
    bid = f"projects/{r.project}/locations/{r.get('location', 'global')}/buckets/{r.get('bucketId', r.name)}"
    return bid, {"name": bid, "project": r.project, "lifecycleState": "ACTIVE"}


def _gcp_log_sink(r: _Res):
    """A project sink; with a unique writer identity, Logging's per-sink service account."""
    sid = f"projects/{r.project}/sinks/{r.given_name}"
    return sid, {"name": r.given_name, "project": r.project,
                 "writerIdentity": f"serviceAccount:service-{r.digits(12, 'sink')}@gcp-sa-logging.iam.gserviceaccount.com"}


def _gcp_notification_channel(r: _Res):
    """A Cloud Monitoring notification channel: projects/<p>/notificationChannels/<numeric id>,
    which is also its `name` (what alert policies list)."""
    cid = f"projects/{r.project}/notificationChannels/{r.digits(19, 'channel')}"
    return cid, {"name": cid, "project": r.project}


def _gcp_router_nat(r: _Res):
    return f"{r.project}/{r.gcp_region}/{r.get('router', 'router')}/{r.given_name}", {
        "name": r.given_name, "project": r.project, "region": r.gcp_region}


def _gcp_global_address(r: _Res):
    gid, computed = _gcp_global("addresses")(r)
    internal = r.get("addressType", "EXTERNAL") == "INTERNAL"
    computed["address"] = f"10.{20 + r.num(200, 'addr')}.0.0" if internal else f"203.0.113.{1 + r.num(254, 'addr')}"
    return gid, computed


def _gcp_sn_connection(r: _Res):
    return f"{r.get('network', 'network')}:{r.get('service', 'servicenetworking.googleapis.com')}", {
        "peering": "servicenetworking-googleapis-com"}


_TPU_CONFIG_TYPES = {"V4": "v4", "V5P": "v5p", "V5LITE_POD": "v5e", "V6E": "v6e"}


def _tpu_hosts(r: _Res) -> int:
    """A TPU VM's hosts: from acceleratorConfig {type, topology} through the catalog's slice
    shapes, else from acceleratorType (v5p-8: the suffix counts TensorCores)."""
    config = r.get("acceleratorConfig") or {}
    gen = _TPU_CONFIG_TYPES.get(str(config.get("type", "")).upper())
    if gen:
        from aicluster.catalog import load_catalog
        from aicluster.catalog.tpu_slices import tpu_slice

        generation = load_catalog().tpus.get(gen)
        if generation and config.get("topology") in generation.topologies:
            return tpu_slice(generation, config["topology"]).hosts
    accel = str(r.get("acceleratorType", "v5p-8"))
    try:
        size = int(accel.rsplit("-", 1)[1])
    except (IndexError, ValueError):
        size = 8
    per_host = 4 if ("lite" in accel or accel.startswith("v6e")) else 8
    return max(1, size // per_host)


def _tpu_v2vm(r: _Res):
    zone = r.get("zone", r.gcp_zone())
    subnet = r.cloud.lookup((r.get("networkConfig") or {}).get("subnetwork"))
    endpoints = [{"ipAddress": r.ip_in(subnet.get("ipCidrRange"), "10.130.0.0/20", f"tpu{i}"), "port": 8470,
                  "accessConfigs": []} for i in range(_tpu_hosts(r))]
    name = r.given_name
    return f"projects/{r.project}/locations/{zone}/nodes/{name}", {
        "name": name, "project": r.project, "zone": zone, "state": "READY",
        "networkEndpoints": endpoints, "health": "HEALTHY",
    }


Handler = Callable[[_Res], "tuple[str, dict]"]

RESOURCES: dict[str, Handler] = {
    "aws:ec2/vpc:Vpc": _vpc,
    "aws:ec2/subnet:Subnet": _subnet,
    "aws:ec2/internetGateway:InternetGateway": _igw,
    "aws:ec2/eip:Eip": _eip,
    "aws:ec2/natGateway:NatGateway": _nat,
    "aws:ec2/routeTable:RouteTable": _route_table,
    "aws:ec2/route:Route": _route,
    "aws:ec2/routeTableAssociation:RouteTableAssociation": lambda r: (r.aws_id("rtbassoc"), {}),
    "aws:ec2/vpcEndpoint:VpcEndpoint": _vpc_endpoint,
    "aws:ec2/securityGroup:SecurityGroup": _security_group,
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": _sg_rule_v2,
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": _sg_rule_v2,
    "aws:ec2/securityGroupRule:SecurityGroupRule": _sg_rule,
    "aws:ec2/placementGroup:PlacementGroup": _placement_group,
    "aws:ec2/launchTemplate:LaunchTemplate": _launch_template,
    "aws:ec2/instance:Instance": _instance,
    "aws:iam/role:Role": _role,
    "aws:iam/policy:Policy": _policy,
    "aws:iam/rolePolicy:RolePolicy": _role_policy,
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": _role_policy_attachment,
    "aws:iam/instanceProfile:InstanceProfile": _instance_profile,
    "aws:fsx/lustreFileSystem:LustreFileSystem": _lustre,
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": _dra,
    "aws:efs/fileSystem:FileSystem": _efs,
    "aws:efs/mountTarget:MountTarget": _efs_mount_target,
    "aws:rds/instance:Instance": _rds_instance,
    "aws:rds/subnetGroup:SubnetGroup": _rds_named("subgrp"),
    "aws:rds/parameterGroup:ParameterGroup": _rds_named("pg"),
    "aws:secretsmanager/secret:Secret": _sm_secret,
    "aws:secretsmanager/secretVersion:SecretVersion": _sm_secret_version,
    "aws:ssm/parameter:Parameter": _ssm_parameter,
    "aws:s3/bucket:Bucket": _bucket,
    "aws:s3/bucketV2:BucketV2": _bucket,
    "aws:s3/bucketObjectv2:BucketObjectv2": _bucket_object,
    "aws:s3/bucketObject:BucketObject": _bucket_object,
    "aws:route53/zone:Zone": _route53_zone,
    "aws:kms/key:Key": _kms_key,
    "aws:cloudwatch/logGroup:LogGroup": _log_group,
    "aws:amp/workspace:Workspace": _amp_workspace,
    "aws:amp/ruleGroupNamespace:RuleGroupNamespace": _amp_rule_group_namespace,
    "aws:amp/alertManagerDefinition:AlertManagerDefinition": _amp_alert_manager_definition,
    "aws:sns/topic:Topic": _sns_topic,
    "aws:imagebuilder/component:Component": _imagebuilder("component"),
    "aws:imagebuilder/imageRecipe:ImageRecipe": _imagebuilder("image-recipe"),
    "aws:imagebuilder/infrastructureConfiguration:InfrastructureConfiguration": _imagebuilder(
        "infrastructure-configuration"),
    "aws:imagebuilder/distributionConfiguration:DistributionConfiguration": _imagebuilder(
        "distribution-configuration"),
    "aws:imagebuilder/image:Image": _imagebuilder_image,
    "aws:eks/cluster:Cluster": _eks_cluster,
    "aws:eks/nodeGroup:NodeGroup": _eks_node_group,
    "aws:eks/addon:Addon": _eks_addon,
    "aws:eks/accessEntry:AccessEntry": _eks_access_entry,
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": _eks_pod_identity,
    "aws:sqs/queue:Queue": _sqs_queue,
    "aws:cloudwatch/eventRule:EventRule": _event_rule,
    "aws:eks/accessPolicyAssociation:AccessPolicyAssociation": _eks_access_policy,
    "kubernetes:helm.sh/v3:Release": _helm_release,
    "kubernetes:core/v1:Namespace": _k8s_object,
    "kubernetes:core/v1:ConfigMap": _k8s_object,
    "kubernetes:core/v1:PersistentVolume": _k8s_object,
    "kubernetes:core/v1:PersistentVolumeClaim": _k8s_object,
    "kubernetes:core/v1:ResourceQuota": _k8s_object,
    "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor": _k8s_object,
    "kubernetes:kueue.x-k8s.io/v1beta2:Topology": _k8s_object,
    "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue": _k8s_object,
    "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue": _k8s_object,
    "kubernetes:kueue.x-k8s.io/v1beta2:WorkloadPriorityClass": _k8s_object,
    "kubernetes:kueue.x-k8s.io/v1beta2:AdmissionCheck": _k8s_object,
    "kubernetes:kueue.x-k8s.io/v1beta2:ProvisioningRequestConfig": _k8s_object,
    "kubernetes:karpenter.sh/v1:NodePool": _k8s_object,
    "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass": _k8s_object,
    "kubernetes:karpenter.sh/v1alpha1:NodeOverlay": _k8s_object,
    "kubernetes:apps/v1:DaemonSet": _k8s_object,
    "kubernetes:apps/v1:Deployment": _k8s_object,
    "kubernetes:monitoring.googleapis.com/v1:PodMonitoring": _k8s_object,
    "kubernetes:core/v1:Secret": _k8s_object,
    "kubernetes:rbac.authorization.k8s.io/v1:Role": _k8s_object,
    "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": _k8s_object,
    "kubernetes:core/v1:ServiceAccount": _k8s_object,
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole": _k8s_object,
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding": _k8s_object,
    "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy": _k8s_object,
    "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding": _k8s_object,
    "kubernetes:networking.gke.io/v1:GKENetworkParamSet": _k8s_object,
    "kubernetes:networking.gke.io/v1:Network": _k8s_object,
    "random:index/randomPassword:RandomPassword": _password,
    "random:index/randomString:RandomString": _password,
    "random:index/randomId:RandomId": _random_id,
    "random:index/randomBytes:RandomBytes": _random_bytes,
    "random:index/randomUuid:RandomUuid": _random_uuid,
    "gcp:compute/network:Network": _gcp_network,
    "gcp:compute/subnetwork:Subnetwork": _gcp_subnetwork,
    "gcp:compute/instance:Instance": _gcp_instance,
    "gcp:compute/instanceTemplate:InstanceTemplate": _gcp_instance_template,
    "gcp:compute/image:Image": _gcp_global("images"),
    "gcp:compute/resourcePolicy:ResourcePolicy": _gcp_regional("resourcePolicies"),
    "gcp:compute/router:Router": _gcp_regional("routers"),
    "gcp:compute/routerNat:RouterNat": _gcp_router_nat,
    "gcp:compute/firewall:Firewall": _gcp_global("firewalls"),
    "gcp:compute/globalAddress:GlobalAddress": _gcp_global_address,
    "gcp:lustre/instance:Instance": _gcp_lustre,
    "gcp:filestore/instance:Instance": _gcp_filestore,
    "gcp:sql/databaseInstance:DatabaseInstance": _gcp_sql_instance,
    "gcp:sql/database:Database": lambda r: (f"projects/{r.project}/instances/{r.get('instance')}/databases/{r.given_name}",
                                            {"name": r.given_name, "project": r.project}),
    "gcp:sql/user:User": lambda r: (f"{r.given_name}/{r.get('host', '')}/{r.get('instance')}",
                                    {"name": r.given_name, "project": r.project}),
    "gcp:container/cluster:Cluster": _gke_cluster,
    "gcp:container/nodePool:NodePool": _gke_node_pool,
    "gcp:secretmanager/secret:Secret": _gcp_secret,
    "gcp:secretmanager/secretIamMember:SecretIamMember": _gcp_iam_member,
    "gcp:storage/bucket:Bucket": _gcs_bucket,
    "gcp:storage/bucketObject:BucketObject": _gcs_object,
    "gcp:storage/bucketIAMMember:BucketIAMMember": _gcp_iam_member,
    "gcp:projects/iAMCustomRole:IAMCustomRole": _gcp_custom_role,
    "gcp:projects/iAMMember:IAMMember": _gcp_iam_member,
    "gcp:serviceaccount/iAMMember:IAMMember": _gcp_iam_member,
    "gcp:secretmanager/secretVersion:SecretVersion": _gcp_secret_version,
    "gcp:serviceaccount/account:Account": _gcp_account,
    "gcp:servicenetworking/connection:Connection": _gcp_sn_connection,
    "gcp:tpu/v2Vm:V2Vm": _tpu_v2vm,
    "gcp:logging/projectBucketConfig:ProjectBucketConfig": _gcp_log_bucket,
    "gcp:logging/projectSink:ProjectSink": _gcp_log_sink,
    "gcp:monitoring/notificationChannel:NotificationChannel": _gcp_notification_channel,
    "gcp:dns/managedZone:ManagedZone": _gcp_dns_zone,
    "gcp:dns/dnsManagedZoneIamMember:DnsManagedZoneIamMember": _gcp_iam_member,
}


def _default(r: _Res):
    short = r.type.rsplit(":", 1)[-1].lower() or "res"
    return f"{short}-{r.hex(12)}", {}


# ---------------------------------------------------------------- invokes


def _caller_identity(cloud: "FakeCloud", args: dict) -> dict:
    return {"id": ACCOUNT, "accountId": ACCOUNT, "userId": "AIDAOFFLINEPLAN0000000",
            "arn": f"arn:aws:iam::{ACCOUNT}:user/aicluster-offline"}


def _region(cloud: "FakeCloud", args: dict) -> dict:
    region = args.get("region") or args.get("name") or cloud.aws_region
    return {"id": region, "name": region, "region": region,
            "endpoint": f"ec2.{region}.amazonaws.com", "description": region}


def _partition(cloud: "FakeCloud", args: dict) -> dict:
    return {"id": "aws", "partition": "aws", "dnsSuffix": "amazonaws.com",
            "reverseDnsPrefix": "com.amazonaws"}


def _availability_zones(cloud: "FakeCloud", args: dict) -> dict:
    region = args.get("region") or cloud.aws_region
    names = [f"{region}{letter}" for letter in "abcd"]
    return {"id": region, "names": names, "zoneIds": [_zone_id(region, n) for n in names],
            "groupNames": [region], "state": args.get("state", "available")}


def _gcp_instance_state(cloud: "FakeCloud", args: dict) -> dict:
    project = args.get("project") or cloud.gcp_project
    return cloud.lookup(f"projects/{project}/zones/{args.get('zone')}/instances/{args.get('name')}")


def _gcp_get_instance(cloud: "FakeCloud", args: dict) -> dict:
    """An instance this cloud created. An image builder (role image, gcp/image.py) has baked and
    powered itself off, as its startup script does on a real VM."""
    state = _gcp_instance_state(cloud, args)
    if not state:
        raise ValueError(f"gcp:compute/getInstance: no instance {args.get('name')!r} in this plan")
    baker = (state.get("labels") or {}).get("aicluster-role") == "image"
    return {**state, "currentStatus": "TERMINATED" if baker else state.get("currentStatus", "RUNNING")}


def _gcp_guest_attributes(cloud: "FakeCloud", args: dict) -> dict:
    """An image builder's guest attribute aicluster/bake: done with the contents key its labels name."""
    state = _gcp_instance_state(cloud, args)
    contents = (state.get("labels") or {}).get("aicluster-image-contents")
    values = [{"namespace": "aicluster", "key": "bake", "value": f"done {contents}"}] if contents else []
    return {"name": args.get("name"), "zone": args.get("zone"), "project": args.get("project") or cloud.gcp_project,
            "queryPath": args.get("queryPath"), "queryValues": values}


CALLS: dict[str, Callable[["FakeCloud", dict], dict]] = {
    "gcp:compute/getInstance:getInstance": _gcp_get_instance,
    "gcp:compute/getInstanceGuestAttributes:getInstanceGuestAttributes": _gcp_guest_attributes,
    "aws:index/getCallerIdentity:getCallerIdentity": _caller_identity,
    "aws:index/getRegion:getRegion": _region,
    "aws:index/getPartition:getPartition": _partition,
    "aws:index/getAvailabilityZones:getAvailabilityZones": _availability_zones,
}


class FakeCloud(pulumi.runtime.Mocks):
    """Deterministic fake AWS/GCP/random. One instance per plan (it remembers what it created)."""

    def __init__(self, config: Optional[Mapping[str, object]] = None):
        config = dict(config or {})
        self.aws_region = _config_str(config, "aws:region") or DEFAULT_AWS_REGION
        self.gcp_project = _config_str(config, "gcp:project") or DEFAULT_GCP_PROJECT
        self.gcp_region = _config_str(config, "gcp:region") or DEFAULT_GCP_REGION
        self._state_by_ref: dict[str, dict] = {}  # id / selfLink / name -> state
        self._issued: set[tuple[str, str]] = set()
        self._provider_regions: dict[str, str] = {}

    def lookup(self, ref: Any) -> dict:
        """State of a resource this cloud created, by id or selfLink; {} when unknown."""
        if isinstance(ref, str):
            return self._state_by_ref.get(ref, {})
        return {}

    def _region_for(self, typ: str, provider: Optional[str]) -> str:
        provider_id = (provider or "").rsplit("::", 1)[-1]
        if provider_id in self._provider_regions:
            return self._provider_regions[provider_id]
        return self.gcp_region if typ.startswith("gcp:") else self.aws_region

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[Optional[str], dict]:
        inputs = reveal(dict(args.inputs or {}))
        if args.custom is False:  # component resources have no cloud state
            return None, {}
        salt = 0
        while (args.typ, f"{args.name}#{salt}") in self._issued:
            salt += 1
        self._issued.add((args.typ, f"{args.name}#{salt}"))
        res = _Res(self, args.typ, args.name, inputs, self._region_for(args.typ, args.provider), salt)
        handler = RESOURCES.get(args.typ, _default)
        rid, computed = handler(res)
        if args.resource_id and args.resource_id != rid:  # import / read: use the asked-for id
            if len(rid) >= 8:
                computed = _replace_text(computed, rid, args.resource_id)
            rid = args.resource_id
        state = {**inputs, **{k: v for k, v in computed.items() if v is not None}}
        if args.typ.startswith("pulumi:providers:"):
            region = inputs.get("region")
            if isinstance(region, str) and region:
                # provider references are "<urn>::<id>"; the urn is not known here, so match on id
                self._provider_regions[rid] = region
        for key in (rid, state.get("selfLink"), state.get("arn")):
            if isinstance(key, str):
                self._state_by_ref.setdefault(key, state)
        return rid, state

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict, list]:
        handler = CALLS.get(args.token)
        if handler is None:
            raise OfflineInvokeError(args.token)
        return handler(self, reveal(dict(args.args or {}))), []
