"""The threat model of SECURITY.md as checks over a plan: each returns the violations it finds
(empty: the property holds). They read raw resources, like the policy pack, so they also judge
resource types and stacks added later; a stateful data store of a type no check knows is itself
a violation (it must be added here, encrypted or explicitly service-encrypted).
"""
from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import re
from typing import Any, Iterable

from aicluster.offline.capture import Secret, reveal
from aicluster.design.stateful import stateful_kind

WORLD = {"0.0.0.0/0", "::/0"}
SSH = 22


def _true(value: Any) -> bool:
    value = reveal(value)
    return value is True or (isinstance(value, str) and value.lower() == "true")


def _ports(rule: dict, from_key="fromPort", to_key="toPort") -> tuple[int, int]:
    if str(rule.get("protocol", rule.get("ipProtocol", ""))) in ("-1", "all"):
        return 0, 65535
    try:
        return int(rule.get(from_key, 0)), int(rule.get(to_key, 65535))
    except (TypeError, ValueError):
        return 0, 65535


def _world(cidrs: Iterable[str]) -> list[str]:
    out = []
    for cidr in cidrs or []:
        try:
            if ipaddress.ip_network(str(cidr), strict=False).prefixlen == 0:
                out.append(str(cidr))
        except ValueError:
            continue
    return out


# --- 1. no ingress from the whole internet, except SSH the spec asked for ----------------------


def world_ingress(resources, spec: dict) -> list[str]:
    """(resource, ports, source) for every ingress rule, API endpoint or firewall open to 0.0.0.0/0
    or ::/0. SSH (tcp/22 only) is allowed when network.ssh_ingress_cidrs names that source."""
    asked = set((spec.get("network") or {}).get("ssh_ingress_cidrs") or [])
    api_asked = set((spec.get("kubernetes") or {}).get("api_access_cidrs") or [])
    found = []

    def judge(r, ports: tuple[int, int], sources: list[str], what: str):
        for source in _world(sources):
            if ports == (SSH, SSH) and source in asked:
                continue
            found.append(f"{r.name} ({r.type}): {what} ports {ports[0]}-{ports[1]} open to {source}")

    for r in resources:
        i = reveal(r.inputs)
        if r.type == "aws:ec2/securityGroup:SecurityGroup":
            for rule in i.get("ingress") or []:
                judge(r, _ports(rule), [*rule.get("cidrBlocks", []), *rule.get("ipv6CidrBlocks", [])], "ingress")
        elif r.type == "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule":
            judge(r, _ports(i), [c for c in (i.get("cidrIpv4"), i.get("cidrIpv6")) if c], "ingress")
        elif r.type == "aws:ec2/securityGroupRule:SecurityGroupRule" and i.get("type") == "ingress":
            judge(r, _ports(i), [*i.get("cidrBlocks", []), *i.get("ipv6CidrBlocks", [])], "ingress")
        elif r.type == "gcp:compute/firewall:Firewall" and i.get("direction", "INGRESS") == "INGRESS":
            for allow in i.get("allows") or []:
                ports = allow.get("ports") or ["0-65535"]
                for p in ports:
                    lo, _, hi = str(p).partition("-")
                    judge(r, (int(lo), int(hi or lo)), i.get("sourceRanges") or [], "firewall")
        elif r.type == "aws:eks/cluster:Cluster":
            vpc = i.get("vpcConfig") or {}
            if _true(vpc.get("endpointPublicAccess", True)):
                cidrs = vpc.get("publicAccessCidrs") or ["0.0.0.0/0"]   # the AWS default when unset
                found += [f"{r.name}: public API endpoint open to {c}" for c in _world(cidrs) if c not in api_asked]
        elif r.type == "gcp:container/cluster:Cluster":
            networks = ((i.get("masterAuthorizedNetworksConfig") or {}).get("cidrBlocks") or [])
            private = (i.get("privateClusterConfig") or {}).get("enablePrivateEndpoint")
            if not _true(private):
                found += [f"{r.name}: control plane open to {n.get('cidrBlock')}" for n in networks
                          if _world([n.get("cidrBlock", "")]) and n.get("cidrBlock") not in api_asked]
    return found


# --- 2. IAM: no `*` action on `*` resource -----------------------------------------------------

# Managed policies that grant everything (or nearly): never attached by aicluster.
ADMIN_POLICIES = ("AdministratorAccess", "PowerUserAccess", "IAMFullAccess")
GCP_PRIMITIVE_ROLES = ("roles/owner", "roles/editor")


def _statements(document: Any) -> list[dict]:
    if isinstance(document, str):
        try:
            document = json.loads(document)
        except ValueError:
            return []
    if not isinstance(document, dict):
        return []
    statements = document.get("Statement", [])
    return [s for s in (statements if isinstance(statements, list) else [statements]) if isinstance(s, dict)]


def _listed(value: Any) -> list[str]:
    return [str(v) for v in (value if isinstance(value, list) else [value])] if value is not None else []


def iam_wildcards(resources) -> list[str]:
    """Allow statements with a `*` (or `service:*`) action on a `*` resource, NotAction/NotResource
    allows, admin-like managed policies, primitive GCP roles."""
    found = []
    for r in resources:
        i = reveal(r.inputs)
        documents = []
        if r.type in ("aws:iam/rolePolicy:RolePolicy", "aws:iam/policy:Policy", "aws:iam/userPolicy:UserPolicy",
                      "aws:iam/groupPolicy:GroupPolicy"):
            documents.append(i.get("policy"))
        if r.type == "aws:iam/role:Role":
            documents += [p.get("policy") for p in i.get("inlinePolicies") or [] if isinstance(p, dict)]
        for document in documents:
            for s in _statements(document):
                if s.get("Effect", "Allow") != "Allow":
                    continue
                actions, targets = _listed(s.get("Action")), _listed(s.get("Resource"))
                if "NotAction" in s or "NotResource" in s:
                    found.append(f"{r.name}: Allow with NotAction/NotResource ({s.get('Sid', 'no Sid')})")
                wild = [a for a in actions if a == "*" or a.endswith(":*")]
                if wild and "*" in targets:
                    found.append(f"{r.name}: {', '.join(wild)} on * ({s.get('Sid', 'no Sid')})")
        arn = str(i.get("policyArn", ""))
        if r.type.startswith("aws:iam/") and any(arn.endswith(f":policy/{name}") for name in ADMIN_POLICIES):
            found.append(f"{r.name}: attaches {arn}")
        if r.type.startswith("gcp:projects/iAM") and i.get("role") in GCP_PRIMITIVE_ROLES:
            found.append(f"{r.name}: grants {i.get('role')}")
    return found


# --- 3. secrets live only in the secret store --------------------------------------------------

SECRET_STORE_INPUTS = {
    "aws:secretsmanager/secretVersion:SecretVersion": {"secretString", "secretBinary"},
    "gcp:secretmanager/secretVersion:SecretVersion": {"secretData"},
    "gcp:secretmanager/regionalSecretVersion:RegionalSecretVersion": {"secretData"},
    # The accounting database's own credential: the service that checks it must be told it.
    "aws:rds/instance:Instance": {"password"},
    "gcp:sql/user:User": {"password"},
}
_PRIVATE_KEY = re.compile(r"-----BEGIN ([A-Z ]+ )?PRIVATE KEY-----")
_ACCESS_KEY = re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b")


def _secret_values(value: Any, out: set[str], inside: bool = False) -> None:
    if isinstance(value, Secret):
        _secret_values(value.value, out, True)
    elif isinstance(value, dict):
        for v in value.values():
            _secret_values(v, out, inside)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _secret_values(v, out, inside)
    elif inside and isinstance(value, str) and len(value) >= 8:
        out.add(value)
        try:   # the munge key is stored base64: look for its raw bytes' other spellings too
            raw = base64.b64decode(value, validate=True)
            if len(raw) >= 8:
                out.add(raw.hex())
        except (binascii.Error, ValueError):
            pass


def secret_values(resources) -> set[str]:
    """The secret material of this plan: what the generators (random bytes, passwords, keys) make
    and what the secret store's versions hold. (Not every value Pulumi marks secret: providers
    also mark ordinary content, e.g. Cloud Storage object bodies, as sensitive.)"""
    found: set[str] = set()
    for r in resources:
        if stateful_kind(r.type, r.inputs) == "secret-material":
            _secret_values(r.outputs, found)
        for key in SECRET_STORE_INPUTS.get(r.type, ()):
            value = r.inputs.get(key)
            _secret_values(value if isinstance(value, Secret) else Secret(value), found)
    return found


def _text(value: Any) -> str:
    return json.dumps(reveal(value), sort_keys=True, default=str)


def secrets_outside_the_store(resources, files: dict[str, str], outputs: dict) -> list[str]:
    """Secret material appears only in the secret store's version resources (marked secret) and in
    the generators that make it; never in another resource's inputs, a rendered file (user data,
    published configuration), or a stack output. No private key or access key id anywhere."""
    secrets = secret_values(resources)
    found = []
    for r in resources:
        if stateful_kind(r.type, r.inputs) == "secret-material":
            continue
        allowed = SECRET_STORE_INPUTS.get(r.type, set())
        for key, value in r.inputs.items():
            if key in allowed:
                if not isinstance(value, Secret):
                    found.append(f"{r.name}: {key} holds the secret without Pulumi's secret marker")
                continue
            text = _text(value)
            found += [f"{r.name}: input {key} holds a secret value" for s in secrets if s in text][:1]
            if _PRIVATE_KEY.search(text) or _ACCESS_KEY.search(text):
                found.append(f"{r.name}: input {key} holds a private key or access key id")
    for name, content in files.items():
        found += [f"rendered file {name} holds a secret value" for s in secrets if s in content][:1]
        if _PRIVATE_KEY.search(content) or _ACCESS_KEY.search(content):
            found.append(f"rendered file {name} holds a private key or access key id")
    text = _text(outputs)
    if any(isinstance(v, Secret) for v in _walk(outputs)) or any(s in text for s in secrets):
        found.append("a stack output holds a secret value")
    return found


def _walk(value: Any):
    yield value
    if isinstance(value, dict):
        for v in value.values():
            yield from _walk(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _walk(v)


# --- 4. IMDSv2 everywhere ----------------------------------------------------------------------


def imds_v1(resources) -> list[str]:
    """Every launch template and instance requires IMDSv2 tokens with a hop limit of at most 2
    (1 for aicluster's own nodes; 2 is the most a container host may need). GCP has no IMDSv1,
    but its legacy metadata endpoints must stay disabled."""
    found = []
    for r in resources:
        i = reveal(r.inputs)
        if r.type in ("aws:ec2/launchTemplate:LaunchTemplate", "aws:ec2/instance:Instance"):
            meta = i.get("metadataOptions") or {}
            if meta.get("httpTokens") != "required":
                found.append(f"{r.name}: metadataOptions.httpTokens is {meta.get('httpTokens')!r}, not 'required'")
            hops = meta.get("httpPutResponseHopLimit")
            if hops is not None and int(hops) > 2:
                found.append(f"{r.name}: IMDS hop limit {hops} lets containers reach the node's credentials")
        elif r.type == "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass":
            # Karpenter writes its own launch templates from the EC2NodeClass: the same rule.
            meta = (i.get("spec") or {}).get("metadataOptions") or {}
            if meta.get("httpTokens") != "required" or int(meta.get("httpPutResponseHopLimit") or 2) > 2:
                found.append(f"{r.name}: EC2NodeClass metadataOptions {meta!r}: IMDSv2 with hop limit <= 2 required")
        elif r.type in ("gcp:compute/instance:Instance", "gcp:compute/instanceTemplate:InstanceTemplate"):
            meta = i.get("metadata") or {}
            if str(meta.get("disable-legacy-endpoints", "true")).lower() == "false":
                found.append(f"{r.name}: legacy metadata endpoints enabled")
    return found


# --- 5. encryption at rest everywhere ----------------------------------------------------------

# Stateful data stores the service always encrypts at rest (no setting can turn it off).
SERVICE_ENCRYPTED = {
    "aws:fsx/lustreFileSystem": "FSx for Lustre encrypts every file system at rest (AWS KMS)",
    "aws:fsx/dataRepositoryAssociation": "a link to S3; holds no data itself",
    "aws:fsx/openZfsFileSystem": "FSx encrypts every file system at rest",
    "aws:fsx/ontapFileSystem": "FSx encrypts every file system at rest",
    "aws:fsx/ontapStorageVirtualMachine": "part of an encrypted FSx for ONTAP file system",
    "gcp:lustre/instance": "Google Cloud encrypts all data at rest",
    "gcp:filestore/instance": "Google Cloud encrypts all data at rest",
    "gcp:parallelstore/instance": "Google Cloud encrypts all data at rest",
    "gcp:compute/disk": "Google Cloud encrypts all data at rest",
    "gcp:compute/regionDisk": "Google Cloud encrypts all data at rest",
    "gcp:sql/databaseInstance": "Google Cloud encrypts all data at rest",
    "gcp:sql/database": "lives inside its Cloud SQL instance, encrypted at rest",
    # AMP user guide, "Encryption at rest": workspace data is encrypted with an AWS owned key by
    # default; a customer managed key (kmsKeyArn) is an option, not the switch that turns it on.
    "aws:amp/workspace": "Amazon Managed Service for Prometheus encrypts every workspace at rest",
}


def unencrypted(resources) -> list[str]:
    """EBS (launch templates, instances, volumes), EFS, RDS, S3 (bucket default encryption, and
    objects) and SNS topics are encrypted; every other stateful data store is one the service
    encrypts itself."""
    from aicluster.design.stateful import type_key

    found = []
    resources = list(resources)
    encrypted_buckets = {reveal(r.inputs.get("bucket")) for r in resources
                         if r.type.startswith("aws:s3/bucketServerSideEncryptionConfiguration")}
    for r in resources:
        i = reveal(r.inputs)
        kind = stateful_kind(r.type, r.inputs)
        if r.type == "aws:ec2/launchTemplate:LaunchTemplate":
            for m in i.get("blockDeviceMappings") or []:
                ebs = m.get("ebs") or {}
                if ebs and not _true(ebs.get("encrypted")):
                    found.append(f"{r.name}: EBS {m.get('deviceName')} not encrypted")
        elif r.type == "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass":
            mappings = (i.get("spec") or {}).get("blockDeviceMappings")
            if not mappings:
                found.append(f"{r.name}: EC2NodeClass without blockDeviceMappings (the AMI family's default "
                             "volumes: encryption not stated)")
            for m in mappings or []:
                if not _true((m.get("ebs") or {}).get("encrypted")):
                    found.append(f"{r.name}: EC2NodeClass EBS {m.get('deviceName')} not encrypted")
        elif r.type == "aws:ec2/instance:Instance":
            # Launched from a launch template with no root device of its own: the template's
            # mapping is its root volume, judged with the template.
            from_template = i.get("launchTemplate") and not i.get("rootBlockDevice")
            volumes = ([] if from_template else [("root", i.get("rootBlockDevice") or {})]) + [
                (v.get("deviceName"), v) for v in i.get("ebsBlockDevices") or []]
            found += [f"{r.name}: {name} volume not encrypted" for name, v in volumes if not _true(v.get("encrypted"))]
        elif r.type in ("aws:ebs/volume:Volume", "aws:efs/fileSystem:FileSystem"):
            if not _true(i.get("encrypted")):
                found.append(f"{r.name}: not encrypted")
        elif r.type in ("aws:rds/instance:Instance", "aws:rds/cluster:Cluster"):
            if not _true(i.get("storageEncrypted")):
                found.append(f"{r.name}: storageEncrypted is not true")
        elif r.type in ("aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2"):
            inline = i.get("serverSideEncryptionConfiguration")
            if not inline and reveal(r.outputs.get("bucket", r.inputs.get("bucket"))) not in encrypted_buckets \
                    and r.id not in encrypted_buckets:
                found.append(f"{r.name}: no default encryption configured")
        elif r.type == "aws:s3/bucketObjectv2:BucketObjectv2":
            if not i.get("serverSideEncryption") and not i.get("kmsKeyId"):
                found.append(f"{r.name}: object without server-side encryption")
        elif r.type == "aws:sns/topic:Topic":
            # SNS keeps a message until it is delivered: unencrypted unless the topic names a key.
            if not i.get("kmsMasterKeyId"):
                found.append(f"{r.name}: SNS topic without server-side encryption (kmsMasterKeyId)")
        elif kind in ("filesystem", "volume", "database", "metrics") and type_key(r.type) not in SERVICE_ENCRYPTED:
            found.append(f"{r.name}: {r.type} stores data and no check here knows how it is encrypted")
    return found


# --- 6. nothing public by default ---------------------------------------------------------------


def public_addresses(resources, spec: dict) -> list[str]:
    """No compute interface gets a public IP; the head node only when head_node.public_ip asks."""
    head_public = bool(((spec.get("slurm") or {}).get("head_node") or {}).get("public_ip"))
    found = []
    for r in resources:
        i = reveal(r.inputs)
        if r.type == "aws:ec2/launchTemplate:LaunchTemplate":
            for nic in i.get("networkInterfaces") or []:
                if _true(nic.get("associatePublicIpAddress")):
                    found.append(f"{r.name}: a launch template interface gets a public IP")
        elif r.type == "aws:ec2/instance:Instance" and _true(i.get("associatePublicIpAddress")):
            if not (stateful_kind(r.type, r.inputs) == "head-node" and head_public):
                found.append(f"{r.name}: public IP not asked for")
        elif r.type in ("gcp:compute/instance:Instance", "gcp:compute/instanceTemplate:InstanceTemplate"):
            for nic in i.get("networkInterfaces") or []:
                if nic.get("accessConfigs") and not (stateful_kind(r.type, r.inputs) == "head-node" and head_public):
                    found.append(f"{r.name}: an interface has an external IP (access config)")
        elif r.type in ("aws:rds/instance:Instance", "aws:rds/cluster:Cluster"):
            # The provider's default is private, but the input is judged: a default can change.
            if i.get("publiclyAccessible") is not False:
                found.append(f"{r.name}: publiclyAccessible is {i.get('publiclyAccessible')!r}, not false")
        elif r.type == "gcp:sql/databaseInstance:DatabaseInstance":
            ip = (i.get("settings") or {}).get("ipConfiguration") or {}
            if ip.get("ipv4Enabled") is not False:
                found.append(f"{r.name}: ipConfiguration.ipv4Enabled is not false (a public IP)")
            if ip.get("sslMode") != "ENCRYPTED_ONLY":
                found.append(f"{r.name}: connections without TLS allowed (sslMode {ip.get('sslMode')!r})")
    return found


# --- 7. pods' cloud identities reach exactly their declared buckets ------------------------------

S3_WRITE_ACTIONS = {"s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"}
S3_ALLOWED = {"s3:ListBucket", "s3:GetObject", *S3_WRITE_ACTIONS}
GCS_ROLE_OF = {"read": "roles/storage.objectViewer", "readwrite": "roles/storage.objectUser"}
_S3_ARN = re.compile(r"arn:aws[a-z-]*:s3:::([a-z0-9][a-z0-9._-]*[a-z0-9])(/(.*))?")
_WI_MEMBER = re.compile(r"serviceAccount:[a-z0-9-]+\.svc\.id\.goog\[([a-z0-9-]+)/([a-z0-9-]+)\]")


def _declared(spec: dict) -> dict[tuple[str, str], dict[str, tuple[str, str]]]:
    """(namespace, name) -> bucket -> (prefix, access), from kubernetes.service_accounts."""
    k8s = spec.get("kubernetes") or {}
    out = {}
    for sa in k8s.get("service_accounts") or []:
        grants = {}
        for g in sa.get("buckets") or []:
            rest = g["uri"].split("://", 1)[1]
            bucket, _, prefix = rest.partition("/")
            grants[bucket] = (prefix.strip("/"), g.get("access", "read"))
        out[(sa.get("namespace") or k8s.get("namespace") or "training", sa["name"])] = grants
    return out


def _pod_role(document: Any) -> bool:
    return any("pods.eks.amazonaws.com" in _listed((s.get("Principal") or {}).get("Service"))
               for s in _statements(document))


def pod_identity_grants(resources, spec: dict) -> list[str]:
    """Every EKS Pod Identity role and every GKE Workload Identity service account reaches exactly the
    buckets (aws: and prefixes) its Kubernetes service account declares, with exactly its access:
    no wildcard action or bucket, no bucket beyond the declared ones, no write on a read grant, no
    project-level role, one binding per declared account and none for an undeclared one."""
    declared = _declared(spec)
    resources = list(resources)
    found: list[str] = []
    roles = {str(r.id): r for r in resources if r.type == "aws:iam/role:Role"}
    pod_roles = {rid: r for rid, r in roles.items() if _pod_role(reveal(r.inputs).get("assumeRolePolicy"))}
    arn_to_role = {str(reveal(r.outputs).get("arn")): rid for rid, r in pod_roles.items()}
    bound: dict[str, tuple[str, str]] = {}          # pod role id -> (namespace, service account)
    for r in resources:
        if r.type != "aws:eks/podIdentityAssociation:PodIdentityAssociation":
            continue
        i = reveal(r.inputs)
        rid = arn_to_role.get(str(i.get("roleArn")))
        if rid is not None:
            bound[rid] = (str(i.get("namespace")), str(i.get("serviceAccount")))
    policies: dict[str, list] = {rid: [] for rid in pod_roles}
    for r in resources:
        i = reveal(r.inputs)
        if r.type == "aws:iam/rolePolicy:RolePolicy" and str(i.get("role")) in policies:
            policies[str(i.get("role"))].append((r.name, i.get("policy")))
        if r.type == "aws:iam/rolePolicyAttachment:RolePolicyAttachment" and str(i.get("role")) in policies:
            if ":s3" in str(i.get("policyArn", "")).lower() or "S3" in str(i.get("policyArn", "")):
                found.append(f"{r.name}: attaches {i.get('policyArn')} to a pod role (S3 only by an exact inline policy)")
    for rid, docs in policies.items():
        s3 = [(name, s) for name, doc in docs for s in _statements(doc)
              if any(a.lower().startswith("s3:") or a == "*" for a in _listed(s.get("Action")))]
        if not s3:
            continue
        account = bound.get(rid)
        grants = declared.get(account) if account else None
        if grants is None:
            found.append(f"{roles[rid].name}: S3 access for {account or 'no service account'}, which "
                         "kubernetes.service_accounts does not declare")
            continue
        for name, s in s3:
            actions = _listed(s.get("Action"))
            wild = [a for a in actions if "*" in a or a not in S3_ALLOWED]
            if wild or "NotAction" in s or "NotResource" in s:
                found.append(f"{name}: actions {', '.join(wild) or 'NotAction/NotResource'} beyond "
                             f"{sorted(S3_ALLOWED)}")
            for target in _listed(s.get("Resource")):
                m = _S3_ARN.fullmatch(target)
                if m is None:
                    found.append(f"{name}: resource {target} is not an exact bucket or object ARN")
                    continue
                bucket, path = m.group(1), m.group(3)
                if bucket not in grants:
                    found.append(f"{name}: bucket {bucket} is not declared for {account[0]}/{account[1]}")
                    continue
                prefix, access = grants[bucket]
                if path is not None:
                    wanted = f"{prefix}/*" if prefix else "*"
                    if path != wanted:
                        found.append(f"{name}: objects {target}, not {bucket}/{wanted}")
                elif prefix and "Condition" not in s:
                    found.append(f"{name}: lists all of {bucket}, not only under {prefix}/")
                if access == "read" and S3_WRITE_ACTIONS & set(actions):
                    found.append(f"{name}: write actions on {bucket}, declared read")
    for account in declared:
        if resources and any(r.type.startswith("aws:eks/") for r in resources) and account not in bound.values():
            found.append(f"service account {account[0]}/{account[1]}: no Pod Identity association")

    # GKE: Google service accounts that Kubernetes service accounts act as.
    acting: dict[str, tuple[str, str]] = {}          # GSA email -> (namespace, name)
    for r in resources:
        i = reveal(r.inputs)
        if r.type == "gcp:serviceaccount/iAMMember:IAMMember" and i.get("role") == "roles/iam.workloadIdentityUser":
            m = _WI_MEMBER.fullmatch(str(i.get("member")))
            if m is None:
                found.append(f"{r.name}: workloadIdentityUser for {i.get('member')}, not one exact service account")
                continue
            account = (m.group(1), m.group(2))
            if account not in declared:
                found.append(f"{r.name}: {account[0]}/{account[1]} is not in kubernetes.service_accounts")
            acting[str(i.get("serviceAccountId", "")).rsplit("/", 1)[-1]] = account
    for r in resources:
        i = reveal(r.inputs)
        member = str(i.get("member", ""))
        email = member.split(":", 1)[1] if member.startswith("serviceAccount:") else None
        if email not in acting:
            continue
        account = acting[email]
        grants = declared.get(account, {})
        if r.type == "gcp:storage/bucketIAMMember:BucketIAMMember":
            bucket = str(i.get("bucket"))
            if bucket not in grants:
                found.append(f"{r.name}: bucket {bucket} is not declared for {account[0]}/{account[1]}")
            elif i.get("role") != GCS_ROLE_OF[grants[bucket][1]]:
                found.append(f"{r.name}: {i.get('role')} on {bucket}, not {GCS_ROLE_OF[grants[bucket][1]]}")
        elif r.type.startswith("gcp:projects/") or r.type.startswith("gcp:organizations/"):
            found.append(f"{r.name}: {i.get('role')} at project level for {account[0]}/{account[1]}")
    if any(r.type.startswith("gcp:container/") for r in resources):
        for account in declared:
            if account not in acting.values():
                found.append(f"service account {account[0]}/{account[1]}: no Workload Identity binding")
    return found


# Kubernetes RBAC aicluster applies itself (Helm charts bring their own, reviewed upstream).
_K8S_ROLES = ("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole", "kubernetes:rbac.authorization.k8s.io/v1:Role")
_K8S_BINDINGS = ("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
                 "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding")
_K8S_ADMIN_ROLES = ("cluster-admin", "admin", "edit")


def k8s_rbac_wildcards(resources) -> list[str]:
    """Roles with a "*" in apiGroups, resources, verbs or nonResourceURLs, an escalation verb
    (escalate, bind, impersonate), and bindings to the built-in admin roles."""
    found = []
    for r in resources:
        i = reveal(r.inputs)
        if r.type in _K8S_ROLES:
            for rule in i.get("rules") or []:
                for field in ("apiGroups", "resources", "verbs", "nonResourceURLs"):
                    if any("*" in str(v) for v in rule.get(field) or []):
                        found.append(f"{r.name}: {field} {rule.get(field)}")
                risky = sorted(set(rule.get("verbs") or []) & {"escalate", "bind", "impersonate"})
                if risky:
                    found.append(f"{r.name}: verbs {risky}")
        elif r.type in _K8S_BINDINGS and (i.get("roleRef") or {}).get("name") in _K8S_ADMIN_ROLES:
            found.append(f"{r.name}: bound to {i['roleRef']['name']}")
    return found


# --- 8. metrics and logs: shipped with least privilege --------------------------------------------

_TELEMETRY_PREFIXES = ("aps:", "logs:")
# Writing roles only: the nodes and collectors ship, they never read, configure or delete.
GCP_TELEMETRY_ROLES = {"roles/monitoring.metricWriter", "roles/logging.logWriter"}


def telemetry_grants(resources) -> list[str]:
    """Every Allow on an `aps:` or `logs:` action names exactly the plan's own AMP workspaces and
    CloudWatch log groups (a group's ARN, or its streams `<arn>:log-stream:*`): no `*`, no other
    account's or cluster's store, no wildcard action. On GCP, a monitoring or logging role granted
    to a member is a writer role, never an admin or viewer one."""
    resources = list(resources)
    owned = set()
    for r in resources:
        if r.type in ("aws:amp/workspace:Workspace", "aws:cloudwatch/logGroup:LogGroup"):
            arn = reveal((r.outputs or {}).get("arn"))
            if isinstance(arn, str):
                owned |= {arn, f"{arn}:log-stream:*"} if "log-group:" in arn else {arn}
    found = []
    for r in resources:
        i = reveal(r.inputs)
        if r.type in ("aws:iam/rolePolicy:RolePolicy", "aws:iam/policy:Policy"):
            for s in _statements(i.get("policy")):
                actions = _listed(s.get("Action"))
                if s.get("Effect", "Allow") != "Allow" or not any(a.startswith(_TELEMETRY_PREFIXES) for a in actions):
                    continue
                wild = [a for a in actions if a.startswith(_TELEMETRY_PREFIXES) and "*" in a]
                if wild:
                    found.append(f"{r.name}: wildcard action {wild}")
                stray = [t for t in _listed(s.get("Resource")) if t not in owned]
                if stray:
                    found.append(f"{r.name}: {', '.join(actions)} on {stray} (not this cluster's workspace or log groups)")
        elif r.type.startswith("gcp:") and "iAMMember" in r.type:
            role = str(i.get("role", ""))
            if role.startswith(("roles/monitoring.", "roles/logging.")) and role not in GCP_TELEMETRY_ROLES:
                found.append(f"{r.name}: grants {role} (writers need only {sorted(GCP_TELEMETRY_ROLES)})")
    return found
