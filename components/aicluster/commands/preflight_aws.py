"""`aicluster preflight`'s live checks on AWS (docs/preflight.md).

Credentials: boto3's default chain (environment, shared config and credentials files, SSO, the
instance or container role). Endpoints: boto3's own, so AWS_ENDPOINT_URL (or
AWS_ENDPOINT_URL_EC2, ...) points them elsewhere, as the tests do at moto.

Every call goes through `_guard`: throttling, a lost or timed-out answer, a refused permission or
any other failure of the call becomes a `skipped` check that says why ("could not check"), never
a pass and never a traceback.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Callable

from aicluster.commands.preflight_report import Check, controller_nodes

CREDENTIALS_HELP = ("configure AWS credentials boto3 finds (AWS_PROFILE, aws configure / aws sso login, "
                    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or an instance role); or run --offline")
_THROTTLED = {"Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException",
              "RequestThrottled", "RequestThrottledException", "SlowDown", "ServiceUnavailable",
              "ServiceUnavailableException", "InternalError", "InternalFailure", "InternalServerError"}
_DENIED = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "AuthFailure",
           "InvalidClientTokenId", "ExpiredToken", "ExpiredTokenException", "UnrecognizedClientException"}

# Clients, by service name: tests replace it with one that hands out stubbed clients.
ClientFactory = Callable[[str], Any]


def _session():
    import boto3

    return boto3.session.Session()


def credentials_missing(config: dict) -> str | None:
    """Why the live checks cannot run, or None when boto3's default chain finds credentials."""
    try:
        found = _session().get_credentials()
    except Exception as exc:  # noqa: BLE001 - a broken profile is a reason, not a crash
        return f"no usable AWS credentials ({type(exc).__name__}: {exc})"
    return None if found is not None else "no AWS credentials found (boto3's default chain)"


def credentials_found(config: dict) -> str:
    creds = _session().get_credentials()
    method = getattr(creds, "method", None) or "default chain"
    return f"AWS credentials from {method}"


def client_factory(region: str) -> ClientFactory:
    from botocore.config import Config

    session = _session()
    config = Config(region_name=region, retries={"mode": "standard", "max_attempts": 3},
                    connect_timeout=5, read_timeout=20)
    return lambda service: session.client(service, config=config)


def _guard(name: str, path: str, call: Callable[[], list[Check]]) -> list[Check]:
    """Run one group of live checks; any failure to ask becomes `skipped` with its reason."""
    try:
        return call()
    except Exception as exc:  # noqa: BLE001 - every failure to ask is "could not check"
        return [Check(name, "skipped", f"could not check: {_why(exc)}", "rerun `aicluster preflight` later, or "
                      "check by hand in the console", live=True, path=path)]


def _code(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    return (response or {}).get("Error", {}).get("Code", "") if isinstance(response, dict) else ""


def _why(exc: Exception) -> str:
    code = _code(exc)
    if code in _THROTTLED:
        return f"AWS throttled the call ({code})"
    if code in _DENIED:
        return f"not allowed ({code}): the credentials lack the read permission"
    if code:
        return f"{code}: {getattr(exc, 'response', {}).get('Error', {}).get('Message', '')}".rstrip(": ")
    name = type(exc).__name__
    if name in ("EndpointConnectionError", "ConnectionClosedError", "ReadTimeoutError", "ConnectTimeoutError",
                "ConnectionError", "ProxyConnectionError"):
        return f"no answer from AWS ({name})"
    return f"{name}: {exc}"


def live_checks(spec, config: dict, clients: ClientFactory | None = None) -> list[Check]:
    clients = clients or client_factory(spec.region)
    ec2 = clients("ec2")
    checks = _guard("zone (live)", "zone", lambda: zone_check(ec2, spec))
    for i, pool in enumerate(spec.pools):
        checks += _guard(f"offering pools[{i}] (live)", f"pools[{i}].instance_type",
                         lambda i=i, pool=pool: offering_check(ec2, spec, i, pool))
    for label, path, name, _ in controller_nodes(spec):
        checks += _guard(f"offering {label} (live)", path,
                         lambda label=label, path=path, name=name: controller_offering_check(ec2, spec, label, path, name))
    quotas = clients("service-quotas")
    checks += vcpu_quota_checks(quotas, spec)
    checks += _guard("quota FSx for Lustre", "storage", lambda: fsx_quota_check(quotas, spec))
    for i, pool in enumerate(spec.pools):
        if pool.capacity.type in ("reservation", "capacity-block"):
            checks += _guard(f"reservation pools[{i}]", f"pools[{i}].capacity.reservation_id",
                             lambda i=i, pool=pool: capacity_reservation_check(ec2, spec, i, pool))
    ssm = clients("ssm")
    for label, path, ref in images(spec):
        checks += _guard(f"image {label}", path, lambda label=label, path=path, ref=ref:
                         image_check(ec2, ssm, label, path, ref))
    return checks


def _type_of(spec, pool):
    from aicluster.catalog import load_catalog

    return load_catalog().resolve("aws", pool.instance_type or "")


def zone_check(ec2, spec) -> list[Check]:
    try:
        zones = ec2.describe_availability_zones(ZoneNames=[spec.zone])["AvailabilityZones"]
    except Exception as exc:
        if _code(exc) in ("InvalidParameterValue", "InvalidAvailabilityZone"):
            zones = []
        else:
            raise
    if not zones:
        return [Check("zone (live)", "failed", f"this account has no zone {spec.zone} in {spec.region}",
                      f"`aws ec2 describe-availability-zones --region {spec.region}` lists the account's zones",
                      live=True, path="zone")]
    zone = zones[0]
    state, zone_id = zone.get("State", "?"), zone.get("ZoneId", "?")
    if state != "available":
        return [Check("zone (live)", "failed", f"{spec.zone} ({zone_id}) is {state}", "choose another zone",
                      live=True, path="zone")]
    opt_in = zone.get("OptInStatus", "opt-in-not-required")
    if opt_in == "not-opted-in":
        return [Check("zone (live)", "failed", f"{spec.zone} ({zone_id}) needs an opt-in",
                      f"enable the region {spec.region} for the account (Account settings, AWS Regions)",
                      live=True, path="zone")]
    return [Check("zone (live)", "ok", f"{spec.zone} is {zone_id} in this account, available", live=True, path="zone")]


def offering_check(ec2, spec, i: int, pool) -> list[Check]:
    itype = _type_of(spec, pool)
    name, path = f"offering pools[{i}] (live)", f"pools[{i}].instance_type"
    if itype is None:
        return []
    offered = _offerings(ec2, "availability-zone", [{"Name": "location", "Values": [spec.zone]},
                                                    {"Name": "instance-type", "Values": [itype.name]}])
    if offered:
        return [Check(name, "ok", f"{itype.name} is offered in {spec.zone} (DescribeInstanceTypeOfferings)",
                      live=True, path=path)]
    zones = sorted(o["Location"] for o in _offerings(ec2, "availability-zone", [
        {"Name": "instance-type", "Values": [itype.name]}]))
    return [Check(name, "failed", f"{itype.name} is not offered in {spec.zone} for this account",
                  f"zones of {spec.region} that offer it: {', '.join(zones)}" if zones else
                  f"no zone of {spec.region} offers it to this account; choose another region", live=True, path=path)]


def controller_offering_check(ec2, spec, label: str, path: str, name: str) -> list[Check]:
    offered = _offerings(ec2, "availability-zone", [{"Name": "location", "Values": [spec.zone]},
                                                    {"Name": "instance-type", "Values": [name]}])
    if offered:
        return [Check(f"offering {label} (live)", "ok", f"{name} is offered in {spec.zone}", live=True, path=path)]
    return [Check(f"offering {label} (live)", "failed", f"{name} is not offered in {spec.zone} for this account",
                  f"set {path} to another controller type (`aicluster catalog` lists them)", live=True, path=path)]


def _offerings(ec2, location_type: str, filters: list[dict]) -> list[dict]:
    found, token = [], None
    while True:
        kwargs = {"LocationType": location_type, "Filters": filters, **({"NextToken": token} if token else {})}
        page = ec2.describe_instance_type_offerings(**kwargs)
        found += page.get("InstanceTypeOfferings", [])
        token = page.get("NextToken")
        if not token:
            return found


def _console(region: str, service: str, code: str) -> str:
    return f"https://{region}.console.aws.amazon.com/servicequotas/home/services/{service}/quotas/{code}"


def vcpu_quota_checks(quotas, spec) -> list[Check]:
    """The vCPUs of the pools at max_nodes and of the head, login or system nodes, summed per EC2
    vCPU quota (On-Demand or Spot by family), against the quota's value in the region."""
    from aicluster.catalog.regions import load_quotas

    table = load_quotas()
    need: dict[str, tuple[Any, int, list[str]]] = {}
    checks: list[Check] = []
    for i, pool in enumerate(spec.pools):
        itype = _type_of(spec, pool)
        if itype is None or itype.vcpu is None:
            continue
        if pool.capacity.type == "capacity-block":
            checks.append(Check(f"quota pools[{i}]", "skipped",
                                "a Capacity Block's instances are bounded by the block, not by a vCPU quota",
                                "the reservation check reads the block", live=True, path=f"pools[{i}].capacity"))
            continue
        quota = table.aws_vcpu_quota(itype.name, spot=pool.capacity.type == "spot")
        if quota is None:
            checks.append(Check(f"quota pools[{i}]", "skipped", f"catalog/quotas.yaml names no vCPU quota for "
                                f"{itype.name}", live=True, path=f"pools[{i}].instance_type"))
            continue
        _, vcpus, pools = need.get(quota.code, (quota, 0, []))
        need[quota.code] = (quota, vcpus + itype.vcpu * pool.max_nodes, [*pools, f"pools[{i}]"])
    from aicluster.catalog import load_catalog
    controllers = load_catalog().controllers
    for label, path, name, count in controller_nodes(spec):
        quota, ctype = table.aws_vcpu_quota(name, spot=False), controllers.get(name)
        if quota is None or ctype is None:
            continue
        _, vcpus, pools = need.get(quota.code, (quota, 0, []))
        need[quota.code] = (quota, vcpus + ctype.vcpu * count, [*pools, path.rsplit(".", 1)[0]])
    for code, (quota, vcpus, pools) in need.items():
        checks += _guard(f"quota {code}", pools[0], lambda code=code, quota=quota, vcpus=vcpus, pools=pools:
                         _one_vcpu_quota(quotas, spec, quota, vcpus, pools))
    return checks


def _one_vcpu_quota(quotas, spec, quota, vcpus: int, pools: list[str]) -> list[Check]:
    value = quotas.get_service_quota(ServiceCode="ec2", QuotaCode=quota.code)["Quota"]["Value"]
    name, who = f"quota {quota.code}", " + ".join(pools)
    detail = f"{quota.name}: {value:g} vCPUs in {spec.region}; {who} at max_nodes need {vcpus}"
    if value >= vcpus:
        return [Check(name, "ok", detail + " (instances already running use part of it)", live=True, path=pools[0])]
    return [Check(name, "failed", detail,
                  f"request {quota.code} ({quota.name}) of at least {vcpus} vCPUs in {spec.region}: "
                  f"{_console(spec.region, 'ec2', quota.code)} or `aws service-quotas request-service-quota-increase "
                  f"--service-code ec2 --quota-code {quota.code} --desired-value {vcpus} --region {spec.region}`",
                  live=True, path=pools[0])]


def fsx_quota_check(quotas, spec) -> list[Check]:
    """FSx for Lustre's storage capacity quota (matched by name: ListServiceQuotas of fsx) against
    the spec's Lustre file systems."""
    lustre = [(i, fs) for i, fs in enumerate(spec.storage) if fs.type == "lustre" and fs.capacity_gib]
    if not lustre:
        return []
    need = sum(fs.capacity_gib for _, fs in lustre)
    listed, token = [], None
    while True:
        page = quotas.list_service_quotas(ServiceCode="fsx", **({"NextToken": token} if token else {}))
        listed += page.get("Quotas", [])
        token = page.get("NextToken")
        if not token:
            break
    matching = [q for q in listed if "lustre" in q.get("QuotaName", "").lower()
                and "storage capacity" in q.get("QuotaName", "").lower()]
    kinds = {fs.deployment_type.lower().replace("_", " ") for _, fs in lustre} | \
            {fs.deployment_type.lower() for _, fs in lustre}
    specific = [q for q in matching if any(k in q["QuotaName"].lower() for k in kinds)]
    chosen = (specific or matching)
    path = f"storage[{lustre[0][0]}].capacity_gib"
    if not chosen:
        return [Check("quota FSx for Lustre", "skipped", f"ListServiceQuotas lists no FSx for Lustre storage capacity "
                      f"quota in {spec.region}", "see the FSx console's Service Quotas page", live=True, path=path)]
    quota = min(chosen, key=lambda q: q.get("Value", 0))
    value, code = quota.get("Value", 0), quota.get("QuotaCode", "?")
    detail = f"{quota['QuotaName']} ({code}): {value:g} GiB in {spec.region}; the spec's Lustre needs {need} GiB"
    if value >= need:
        return [Check("quota FSx for Lustre", "ok", detail, live=True, path=path)]
    return [Check("quota FSx for Lustre", "failed", detail,
                  f"request {code} of at least {need} GiB: {_console(spec.region, 'fsx', code)}", live=True, path=path)]


def capacity_reservation_check(ec2, spec, i: int, pool) -> list[Check]:
    cap, itype = pool.capacity, _type_of(spec, pool)
    name, path = f"reservation pools[{i}]", f"pools[{i}].capacity.reservation_id"
    try:
        found = ec2.describe_capacity_reservations(CapacityReservationIds=[cap.reservation_id])["CapacityReservations"]
    except Exception as exc:
        if _code(exc).startswith("InvalidCapacityReservationId"):
            found = []
        else:
            raise
    if not found:
        return [Check(name, "failed", f"{cap.reservation_id} is not a capacity reservation of this account in "
                      f"{spec.region}", "`aws ec2 describe-capacity-reservations` lists them; a Capacity Block is "
                      "bought with `aws ec2 purchase-capacity-block`", live=True, path=path)]
    r = found[0]
    problems = []
    if itype is not None and r.get("InstanceType") != itype.name:
        problems.append(f"it holds {r.get('InstanceType')}, the pool runs {itype.name}")
    if r.get("AvailabilityZone") != spec.zone:
        problems.append(f"it is in {r.get('AvailabilityZone')}, the cluster in {spec.zone}")
    is_block = r.get("ReservationType") == "capacity-block"
    if is_block != (cap.type == "capacity-block"):
        problems.append(f"it is a {'Capacity Block' if is_block else 'capacity reservation'}; the pool's "
                        f"capacity type is {cap.type}")
    state = r.get("State", "?")
    usable = ("active", "scheduled") if is_block else ("active",)
    if state not in usable:
        problems.append(f"its state is {state}")
    end = r.get("EndDate")
    if isinstance(end, datetime) and end <= datetime.now(timezone.utc):
        problems.append(f"it ended {end.isoformat()}")
    available, total = r.get("AvailableInstanceCount", 0), r.get("TotalInstanceCount", 0)
    if state == "active" and available < pool.min_nodes:
        problems.append(f"{available} of its {total} instances are free, min_nodes is {pool.min_nodes}")
    window = f"{_when(r.get('StartDate'))} to {_when(end)}" if is_block else \
        (f"until {_when(end)}" if end else "no end date")
    detail = (f"{cap.reservation_id}: {state}, {r.get('InstanceType')} in {r.get('AvailabilityZone')}, "
              f"{available}/{total} free, {window}")
    if problems:
        return [Check(name, "failed", detail + "; " + "; ".join(problems),
                      "name a reservation or block that matches the pool, or change the pool to match it",
                      live=True, path=path)]
    note = "" if total >= pool.max_nodes else f"; nodes above its {total} instances will not launch"
    return [Check(name, "ok", detail + note, live=True, path=path)]


def _when(value) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value or "?")


def images(spec) -> list[tuple[str, str, str]]:
    """(label, spec path, reference) of every image the nodes boot: each pool's own image or the
    catalog's default for its accelerator, and the head node's. EKS node groups pick their AMI
    themselves (not checked)."""
    from aicluster.catalog import load_catalog

    catalog = load_catalog()
    found: dict[str, tuple[str, str, str]] = {}
    if spec.scheduler == "kubernetes":
        return []
    for i, pool in enumerate(spec.pools):
        itype = _type_of(spec, pool)
        if pool.image:
            ref = pool.image
        elif itype is not None:
            role = "trainium" if itype.accelerator.kind == "trainium" else "gpu"
            ref = catalog.images[role]["ssm_parameter"]
        else:
            continue
        found.setdefault(ref, (f"pools[{i}]", f"pools[{i}].image", ref))
    head = catalog.images["head"]["ssm_parameter"]
    found.setdefault(head, ("head", "slurm.head_node", head))
    return list(found.values())


def image_check(ec2, ssm, label: str, path: str, ref: str) -> list[Check]:
    name = f"image {label}"
    if ref.startswith("ami-"):
        image_id = ref
    else:
        parameter = ref.removeprefix("resolve:ssm:")
        try:
            image_id = ssm.get_parameter(Name=parameter)["Parameter"]["Value"]
        except Exception as exc:
            if _code(exc) == "ParameterNotFound":
                return [Check(name, "failed", f"the SSM parameter {parameter} does not exist in this region",
                              "check the parameter path, or name an AMI id", live=True, path=path)]
            raise
    try:
        found = ec2.describe_images(ImageIds=[image_id])["Images"]
    except Exception as exc:
        if _code(exc).startswith("InvalidAMIID"):
            found = []
        else:
            raise
    if not found or found[0].get("State", "available") != "available":
        state = found[0].get("State") if found else "not found"
        return [Check(name, "failed", f"{ref} -> {image_id}: {state}", "name an image that exists in "
                      f"{getattr(ec2.meta, 'region_name', 'the region')}", live=True, path=path)]
    return [Check(name, "ok", f"{ref} resolves to {image_id} ({found[0].get('Name', '?')})", live=True, path=path)]
