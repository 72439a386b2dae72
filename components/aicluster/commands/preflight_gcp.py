"""`aicluster preflight`'s live checks on GCP (docs/preflight.md): Compute Engine REST over plain
HTTPS, so no Google client library is needed.

Credentials, the first found: an OAuth access token in GOOGLE_OAUTH_ACCESS_TOKEN (what the
Pulumi and Terraform Google providers read) or CLOUDSDK_AUTH_ACCESS_TOKEN (`gcloud auth
print-access-token` gives one); else application default credentials through google-auth where
it is installed. The project: the stack's gcp:project, else GOOGLE_CLOUD_PROJECT or
CLOUDSDK_CORE_PROJECT. AICLUSTER_GCP_COMPUTE replaces the Compute Engine endpoint (the tests
point it at tests/support/fake_gcp.py), as it does for the node programs.

A call that is throttled (403 rateLimitExceeded, 429), fails on the server (5xx), is refused
(401, 403) or gets no answer makes its check `skipped` with the reason; never a pass.
"""
from __future__ import annotations

import json
import os
import socket
import urllib.error
import urllib.request
from http.client import HTTPException

from aicluster.commands.preflight_report import Check, controller_nodes

COMPUTE = "https://compute.googleapis.com/compute/v1"
TOKEN_VARS = ("GOOGLE_OAUTH_ACCESS_TOKEN", "CLOUDSDK_AUTH_ACCESS_TOKEN", "AICLUSTER_GCP_TOKEN")
PROJECT_VARS = ("GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT")
CREDENTIALS_HELP = ("export GOOGLE_OAUTH_ACCESS_TOKEN=$(gcloud auth print-access-token), or install google-auth "
                    "with application default credentials (gcloud auth application-default login); set the "
                    "stack's gcp:project; or run --offline")
TIMEOUT_S = 20


class NotFound(Exception):
    """The resource does not exist (HTTP 404)."""


class CouldNotCheck(Exception):
    """The call got no usable answer: throttled, a server error, refused, or lost."""


def _token() -> tuple[str | None, str]:
    for var in TOKEN_VARS:
        if os.environ.get(var):
            return os.environ[var], f"access token from {var}"
    try:
        import google.auth
        import google.auth.transport.requests
    except ImportError:
        return None, "no access token in " + ", ".join(TOKEN_VARS[:2]) + " and google-auth is not installed"
    try:
        creds, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
        creds.refresh(google.auth.transport.requests.Request())
        return creds.token, "application default credentials"
    except Exception as exc:  # noqa: BLE001 - no ADC is a reason, not a crash
        return None, f"no application default credentials ({type(exc).__name__})"


def _project(config: dict) -> str | None:
    return config.get("gcp:project") or next((os.environ[v] for v in PROJECT_VARS if os.environ.get(v)), None)


def credentials_missing(config: dict) -> str | None:
    token, how = _token()
    if token is None:
        return how
    if not _project(config):
        return "no GCP project: set the stack's gcp:project (or GOOGLE_CLOUD_PROJECT)"
    return None


def credentials_found(config: dict) -> str:
    return f"{_token()[1]}, project {_project(config)}"


class Compute:
    """GET on Compute Engine's REST API with one token."""

    def __init__(self, token: str, project: str):
        self.token, self.project = token, project
        self.base = os.environ.get("AICLUSTER_GCP_COMPUTE", COMPUTE).rstrip("/")

    def get(self, path: str) -> dict:
        url = f"{self.base}/{path.lstrip('/')}"
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.token}"})
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
                return json.loads(answer.read() or b"{}")
        except urllib.error.HTTPError as exc:
            raise _http_problem(exc) from None
        except (urllib.error.URLError, HTTPException, socket.timeout, ConnectionError, OSError) as exc:
            raise CouldNotCheck(f"no answer from Compute Engine ({type(exc).__name__})") from None
        except ValueError as exc:
            raise CouldNotCheck(f"an answer that is not JSON ({exc})") from None


def _http_problem(exc: urllib.error.HTTPError) -> Exception:
    try:
        body = json.loads(exc.read() or b"{}").get("error", {})
    except (ValueError, AttributeError, OSError):
        body = {}
    reason = next((e.get("reason") for e in body.get("errors", []) if isinstance(e, dict)), None) or body.get("status")
    if exc.code == 404:
        return NotFound(body.get("message", "not found"))
    if exc.code == 429 or reason in ("rateLimitExceeded", "userRateLimitExceeded", "RESOURCE_EXHAUSTED"):
        return CouldNotCheck(f"Compute Engine throttled the call (HTTP {exc.code} {reason})")
    if exc.code in (401, 403):
        return CouldNotCheck(f"not allowed (HTTP {exc.code} {reason}): the credentials lack the read permission")
    return CouldNotCheck(f"HTTP {exc.code} {reason or ''}".rstrip())


def _guard(name: str, path: str, call) -> list[Check]:
    try:
        return call()
    except CouldNotCheck as exc:
        return [Check(name, "skipped", f"could not check: {exc}", "rerun `aicluster preflight` later, or check by "
                      "hand in the console", live=True, path=path)]
    except Exception as exc:  # noqa: BLE001 - anything else is still "could not check", never a traceback
        return [Check(name, "skipped", f"could not check: {type(exc).__name__}: {exc}", live=True, path=path)]


def live_checks(spec, config: dict) -> list[Check]:
    token, _ = _token()
    api = Compute(token, _project(config))
    checks = _guard("zone (live)", "zone", lambda: zone_check(api, spec))
    for i, pool in enumerate(spec.pools):
        checks += _guard(f"offering pools[{i}] (live)", f"pools[{i}].instance_type",
                         lambda i=i, pool=pool: machine_type_check(api, spec, i, pool))
    for label, path, name, _ in controller_nodes(spec):
        checks += _guard(f"offering {label} (live)", path,
                         lambda label=label, path=path, name=name: controller_machine_type_check(api, spec, label, path, name))
    checks += _guard("quota GPUs", "pools", lambda: gpu_quota_checks(api, spec))
    for i, pool in enumerate(spec.pools):
        if pool.capacity.type == "reservation":
            checks += _guard(f"reservation pools[{i}]", f"pools[{i}].capacity.reservation_id",
                             lambda i=i, pool=pool: reservation_check(api, spec, i, pool))
    for label, path, ref in images(spec):
        checks += _guard(f"image {label}", path, lambda label=label, path=path, ref=ref: image_check(api, label, path, ref))
    return checks


def zone_check(api: Compute, spec) -> list[Check]:
    try:
        zone = api.get(f"projects/{api.project}/zones/{spec.zone}")
    except NotFound:
        return [Check("zone (live)", "failed", f"project {api.project} sees no zone {spec.zone}",
                      "`gcloud compute zones list` lists them", live=True, path="zone")]
    status = zone.get("status", "?")
    if status != "UP":
        return [Check("zone (live)", "failed", f"{spec.zone} is {status}", "choose another zone", live=True, path="zone")]
    return [Check("zone (live)", "ok", f"{spec.zone} is UP", live=True, path="zone")]


def _type_of(spec, pool):
    from aicluster.catalog import load_catalog

    return load_catalog().resolve("gcp", pool.instance_type or "") if pool.instance_type else None


def machine_type_check(api: Compute, spec, i: int, pool) -> list[Check]:
    name = f"offering pools[{i}] (live)"
    if pool.tpu is not None:
        return [Check(name, "skipped", f"TPU {pool.tpu.type}: offerings live in the Cloud TPU API, which preflight "
                      "does not call (the offline check read catalog/regions.yaml)",
                      f"`gcloud compute tpus accelerator-types list --zone {spec.zone}`", live=True,
                      path=f"pools[{i}].tpu.type")]
    itype = _type_of(spec, pool)
    if itype is None:
        return []
    try:
        api.get(f"projects/{api.project}/zones/{spec.zone}/machineTypes/{itype.name}")
    except NotFound:
        return [Check(name, "failed", f"{itype.name} is not offered in {spec.zone} (machineTypes.get: 404)",
                      f"`gcloud compute machine-types list --filter=name={itype.name}` lists its zones",
                      live=True, path=f"pools[{i}].instance_type")]
    return [Check(name, "ok", f"{itype.name} is offered in {spec.zone} (machineTypes.get)", live=True,
                  path=f"pools[{i}].instance_type")]


def controller_machine_type_check(api: Compute, spec, label: str, path: str, name: str) -> list[Check]:
    check = f"offering {label} (live)"
    try:
        api.get(f"projects/{api.project}/zones/{spec.zone}/machineTypes/{name}")
    except NotFound:
        return [Check(check, "failed", f"{name} is not offered in {spec.zone} (machineTypes.get: 404)",
                      f"set {path} to another controller type (`aicluster catalog` lists them)", live=True, path=path)]
    return [Check(check, "ok", f"{name} is offered in {spec.zone}", live=True, path=path)]


def gpu_quota_checks(api: Compute, spec) -> list[Check]:
    """The pools' GPUs at max_nodes per regional GPU metric (preemptible for spot and flex-start),
    against the metric's limit less its usage. Pools that consume a reservation need no quota."""
    from aicluster.catalog.regions import load_quotas

    table = load_quotas()
    need: dict[str, tuple[int, list[str]]] = {}
    checks: list[Check] = []
    for i, pool in enumerate(spec.pools):
        itype = _type_of(spec, pool)
        if itype is None:
            continue
        if pool.capacity.type == "reservation":
            continue
        metric = table.gcp_gpu_metric(itype.name, preemptible=pool.capacity.type in ("spot", "flex-start"))
        if metric is None:
            continue
        gpus, pools = need.get(metric, (0, []))
        need[metric] = (gpus + itype.accelerator_count * pool.max_nodes, [*pools, f"pools[{i}]"])
    if not need:
        return []
    region = api.get(f"projects/{api.project}/regions/{spec.region}")
    listed = {q.get("metric"): q for q in region.get("quotas", [])}
    console = f"https://console.cloud.google.com/iam-admin/quotas?project={api.project}"
    for metric, (gpus, pools) in need.items():
        name, who = f"quota {metric}", " + ".join(pools)
        quota = listed.get(metric)
        if quota is None:
            checks.append(Check(name, "skipped", f"regions.get lists no {metric} quota in {spec.region}",
                                f"look it up in {console}", live=True, path=pools[0]))
            continue
        limit, usage = float(quota.get("limit", 0)), float(quota.get("usage", 0))
        detail = f"{metric} in {spec.region}: limit {limit:g}, in use {usage:g}; {who} at max_nodes need {gpus}"
        if limit - usage >= gpus:
            checks.append(Check(name, "ok", detail, live=True, path=pools[0]))
        else:
            checks.append(Check(name, "failed", detail, f"request {metric} of at least {int(usage) + gpus} in "
                                f"{spec.region}: {console} (filter: {metric})", live=True, path=pools[0]))
    return checks


def reservation_check(api: Compute, spec, i: int, pool) -> list[Check]:
    cap, itype = pool.capacity, _type_of(spec, pool)
    name, path = f"reservation pools[{i}]", f"pools[{i}].capacity.reservation_id"
    try:
        r = api.get(f"projects/{api.project}/zones/{spec.zone}/reservations/{cap.reservation_id}")
    except NotFound:
        return [Check(name, "failed", f"project {api.project} has no reservation {cap.reservation_id} in {spec.zone}",
                      f"`gcloud compute reservations list --zones {spec.zone}`", live=True, path=path)]
    specific = r.get("specificReservation", {})
    count, in_use = int(specific.get("count", 0)), int(specific.get("inUseCount", 0))
    machine = specific.get("instanceProperties", {}).get("machineType", "?")
    status = r.get("status", "?")
    problems = []
    if itype is not None and machine.rsplit("/", 1)[-1] != itype.name:
        problems.append(f"it holds {machine}, the pool runs {itype.name}")
    if status != "READY":
        problems.append(f"its status is {status}")
    if count - in_use < pool.min_nodes:
        problems.append(f"{count - in_use} of its {count} VMs are free, min_nodes is {pool.min_nodes}")
    detail = f"{cap.reservation_id}: {status}, {machine}, {count - in_use}/{count} free"
    if problems:
        return [Check(name, "failed", detail + "; " + "; ".join(problems),
                      "name a reservation that matches the pool, or change the pool to match it", live=True, path=path)]
    note = "" if count >= pool.max_nodes else f"; nodes above its {count} VMs will not start"
    return [Check(name, "ok", detail + note, live=True, path=path)]


def images(spec) -> list[tuple[str, str, str]]:
    """(label, spec path, image link) of every image the nodes boot. GKE node pools and TPU VMs
    pick their images themselves (not checked)."""
    from aicluster.catalog import load_catalog

    catalog = load_catalog()
    if spec.scheduler == "kubernetes":
        return []
    found: dict[str, tuple[str, str, str]] = {}
    for i, pool in enumerate(spec.pools):
        itype = _type_of(spec, pool)
        ref = pool.image or (catalog.gcp_images[itype.image].image if itype and itype.image else None)
        if ref:
            found.setdefault(ref, (f"pools[{i}]", f"pools[{i}].image", ref))
    head = catalog.gcp_images.get("head")
    if head is not None:
        found.setdefault(head.image, ("head", "slurm.head_node", head.image))
    return list(found.values())


def image_check(api: Compute, label: str, path: str, ref: str) -> list[Check]:
    name = f"image {label}"
    link = ref.split("/compute/v1/", 1)[-1]
    try:
        image = api.get(link)     # images.getFromFamily for .../images/family/F, images.get otherwise
    except NotFound:
        return [Check(name, "failed", f"{ref} does not exist", "check the project and family name", live=True,
                      path=path)]
    deprecated = image.get("deprecated", {}).get("state")
    if image.get("status", "READY") != "READY" or deprecated in ("OBSOLETE", "DELETED"):
        return [Check(name, "failed", f"{ref} -> {image.get('name')}: {image.get('status')} {deprecated or ''}".rstrip(),
                      "name a current image or family", live=True, path=path)]
    return [Check(name, "ok", f"{ref} resolves to {image.get('name', '?')}", live=True, path=path)]


__all__ = ["Compute", "CouldNotCheck", "NotFound", "credentials_missing", "live_checks"]
