"""AIC-SEC-006: databases are private and refuse unencrypted connections.

A database (slurmdbd's accounting history, with `slurm.accounting: managed`) is reached from the
head node only: never from the internet, and never in plaintext (the slurmdbd password and every
job record cross the wire). Judged:

* aws:rds/instance, aws:rds/clusterInstance: `publiclyAccessible` is not true (the provider's
  default is false). aws:rds/cluster: not `publiclyAccessible`; a Multi-AZ DB cluster
  (`dbClusterInstanceClass` set) that leaves it unset with no DB subnet group, or the `default`
  one, is public (the provider's documented default);
* TLS only on RDS for MariaDB and MySQL (Aurora MySQL too) is the parameter
  `require_secure_transport` = 1/ON in the instance's DB parameter group (`parameterGroupName`),
  or the cluster's cluster parameter group (`dbClusterParameterGroupName`). It is judged when the
  name resolves to an aws:rds/parameterGroup or aws:rds/clusterParameterGroup of the same stack,
  and when no group is named or an RDS `default.` group is, for MariaDB and MySQL 5.7 / 8.0, whose
  default groups leave it OFF (default groups cannot be edited). A group that lives outside the
  stack cannot be read and is not judged, nor is the TLS setting of other engines (PostgreSQL's
  rds.force_ssl default differs by major version);
* gcp:sql/databaseInstance: no public IPv4 (`settings.ipConfiguration.ipv4Enabled` false; unset
  means Cloud SQL assigns one) and unencrypted connections refused (`sslMode` ENCRYPTED_ONLY or
  TRUSTED_CLIENT_CERTIFICATE_REQUIRED, or `requireSsl` true in older providers).

A stack policy because the TLS part reads a second resource (the parameter group); under
`pulumi preview` it runs on the same resources (AnalyzeStack) and reports each database by URN.
Values still unknown in a preview (a computed name, an unset sslMode) are not judged.
"""
from __future__ import annotations

from pulumi_policy import EnforcementLevel, Severity, StackValidationPolicy

from ._base import not_applicable, schema
from ._props import get, is_unknown, items, kind, truthy
from .model import Index

ID = "AIC-SEC-006"
RDS_INSTANCE, RDS_CLUSTER, RDS_CLUSTER_INSTANCE = "aws:rds/instance", "aws:rds/cluster", "aws:rds/clusterInstance"
PARAMETER_GROUP, CLUSTER_PARAMETER_GROUP = "aws:rds/parameterGroup", "aws:rds/clusterParameterGroup"
CLOUD_SQL = "gcp:sql/databaseInstance"
SUPPORTED = (RDS_INSTANCE, RDS_CLUSTER, RDS_CLUSTER_INSTANCE, PARAMETER_GROUP, CLUSTER_PARAMETER_GROUP, CLOUD_SQL)
DATABASES = (RDS_INSTANCE, RDS_CLUSTER, RDS_CLUSTER_INSTANCE, CLOUD_SQL)

TLS_PARAMETER = "require_secure_transport"
_MYSQL_ENGINES = ("mariadb", "mysql", "aurora-mysql", "aurora")
# Engines whose RDS default parameter group leaves require_secure_transport OFF (MariaDB's and
# MySQL 5.7 / 8.0's server default); newer MySQL lines are left alone rather than guessed.
_PLAINTEXT_BY_DEFAULT = (("mariadb", ""), ("mysql", "5.7"), ("mysql", "8.0"), ("aurora-mysql", "5.7"),
                         ("aurora-mysql", "8.0"), ("aurora", ""))
_ON = ("1", "on", "true")
_TLS_ONLY_SSL_MODES = ("ENCRYPTED_ONLY", "TRUSTED_CLIENT_CERTIFICATE_REQUIRED")


def _rds_public(k: str, p) -> str | None:
    public = truthy(get(p, "publiclyAccessible"))
    if public:
        return "publiclyAccessible is true"
    subnet_group = get(p, "dbSubnetGroupName")
    multi_az_cluster = k == RDS_CLUSTER and bool(get(p, "dbClusterInstanceClass"))
    if (multi_az_cluster and public is None and not is_unknown(get(p, "publiclyAccessible"))
            and not is_unknown(subnet_group) and subnet_group in (None, "default")):
        return "publiclyAccessible unset with no DB subnet group: a Multi-AZ DB cluster is then public"
    return None


def _tls_on(group_props) -> bool:
    """The group sets require_secure_transport on (a value still unknown in a preview is given the benefit)."""
    if is_unknown(get(group_props, "parameters")):
        return True
    for parameter in items(group_props, "parameters"):
        if str(get(parameter, "name", default="")).lower() == TLS_PARAMETER:
            value = get(parameter, "value", default="")
            return is_unknown(value) or str(value).strip().lower() in _ON
    return False


def _plaintext_by_default(p) -> bool:
    engine, version = get(p, "engine"), get(p, "engineVersion")
    if not isinstance(engine, str) or is_unknown(engine):
        return False
    version = version if isinstance(version, str) and not is_unknown(version) else None
    return any(engine == e and (not prefix or (version or "").startswith(prefix))
               for e, prefix in _PLAINTEXT_BY_DEFAULT)


def _rds_tls(ix: Index, r) -> str | None:
    """Why the database accepts plaintext connections; None when TLS is required or cannot be read."""
    p = ix.props(r)
    engine = get(p, "engine")
    if kind(r.resource_type) == RDS_CLUSTER_INSTANCE or engine not in _MYSQL_ENGINES:
        return None   # an Aurora instance takes its cluster's setting; other engines are not judged
    prop, group_kind = (("dbClusterParameterGroupName", CLUSTER_PARAMETER_GROUP) if kind(r.resource_type) == RDS_CLUSTER
                        else ("parameterGroupName", PARAMETER_GROUP))
    name = get(p, prop)
    groups = ix.refs(r, prop, {group_kind})   # by name, or the engine's dependencies in a preview
    if groups:
        plaintext = [ix.props(g).get("name") or g.name for g in groups if not _tls_on(ix.props(g))]
        if plaintext:
            return (f"its parameter group {', '.join(map(str, plaintext))} does not set {TLS_PARAMETER}=1, "
                    "so unencrypted connections are accepted")
        return None
    if is_unknown(name):
        return None
    if (not name or str(name).startswith("default.")) and _plaintext_by_default(p):
        return (f"it uses the {'default ' + repr(name) if name else 'engine default'} parameter group, where "
                f"{TLS_PARAMETER} is OFF: unencrypted connections are accepted")
    return None   # a group outside this stack cannot be read


def _cloud_sql(p) -> list[str]:
    ip = get(p, "settings", "ipConfiguration")
    if is_unknown(ip):
        return []
    out = []
    ipv4 = get(ip, "ipv4Enabled")
    if not is_unknown(ipv4) and truthy(ipv4) is not False:
        out.append("settings.ipConfiguration.ipv4Enabled is " + ("unset (Cloud SQL then assigns a public IPv4)"
                                                                  if ipv4 is None else repr(ipv4)))
    mode, require_ssl = get(ip, "sslMode"), get(ip, "requireSsl")
    if is_unknown(mode) or is_unknown(require_ssl):
        return out
    if mode not in _TLS_ONLY_SSL_MODES and not truthy(require_ssl):
        out.append(f"sslMode is {mode if mode else 'unset'}: unencrypted connections are accepted")
    return out


def validate(args, report_violation) -> None:
    ix = Index(args.resources)
    databases = ix.of(*DATABASES)
    if not databases:
        not_applicable(args, "no RDS or Cloud SQL database in this stack")
        return
    for r in databases:
        k, p = kind(r.resource_type), ix.props(r)
        if k == CLOUD_SQL:
            problems = _cloud_sql(p)
        else:
            problems = [why for why in (_rds_public(k, p), _rds_tls(ix, r)) if why]
        if problems:
            report_violation(f"{k} {r.name!r} is not a private, TLS-only database: {'; '.join(problems)}", r.urn)


POLICY = StackValidationPolicy(
    name=ID,
    display_name="database-private",
    description="RDS and Cloud SQL databases are not reachable from the internet and refuse unencrypted "
                "connections (RDS MariaDB/MySQL: require_secure_transport in the parameter group; Cloud SQL: no "
                "public IPv4, sslMode ENCRYPTED_ONLY).",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=(
        "AWS: publicly_accessible=False and a DB subnet group of private subnets; an aws.rds.ParameterGroup (cluster "
        "parameter group for Aurora) with require_secure_transport='1', named in parameter_group_name; a security "
        "group open on the database port to the clients' group only. GCP: settings.ip_configuration with "
        "ipv4_enabled=False, private_network (private service access) and ssl_mode='ENCRYPTED_ONLY'."),
    config_schema=schema(),
    tags=["security", "aws", "gcp"],
    validate=validate,
)
