"""Google Cloud REST for aicluster's node programs: the metadata server, an access token for the
VM's service account, Compute Engine, Cloud DNS, Secret Manager, Cloud Storage and Managed Lustre.

Standard library only (urllib), so the head node and the compute nodes need no Google SDK: the
programs run with the distribution's python3. Installed in /opt/aicluster/lib with the programs
that import it (aicluster-gcp-power.py, aicluster-secret, aicluster-sync, aicluster-gcp-lustre-import).

Tests point every endpoint at a local fake through the environment:
AICLUSTER_GCP_METADATA, AICLUSTER_GCP_COMPUTE, AICLUSTER_GCP_DNS, AICLUSTER_GCP_SECRETMANAGER,
AICLUSTER_GCP_STORAGE, AICLUSTER_GCP_LUSTRE; AICLUSTER_GCP_TOKEN skips the metadata server's token.
"""
from __future__ import annotations

import base64
import http.client
import json
import os
import random
import time
import urllib.error
import urllib.parse
import urllib.request

METADATA = "http://metadata.google.internal/computeMetadata/v1"
COMPUTE = "https://compute.googleapis.com/compute/v1"
DNS = "https://dns.googleapis.com/dns/v1"
SECRETMANAGER = "https://secretmanager.googleapis.com/v1"
STORAGE = "https://storage.googleapis.com/storage/v1"
LUSTRE = "https://lustre.googleapis.com/v1"
RETRY_STATUS = (429, 500, 502, 503, 504)
# Compute Engine answers a spent rate quota with 403 and the reason rateLimitExceeded, and refills
# the quota at the start of the next minute (https://cloud.google.com/compute/api-quota); other
# Google APIs answer 429 (https://cloud.google.com/docs/quotas/troubleshoot). A 403 for any other
# reason (QUOTA_EXCEEDED, forbidden) is final.
RATE_LIMIT_REASONS = ("rateLimitExceeded", "userRateLimitExceeded", "RATE_LIMIT_EXCEEDED")
# Truncated exponential backoff with full jitter: 1, 2, 4 ... 32 s caps, about 95 s in all at
# worst, long enough to reach the next minute's quota and well inside ResumeTimeout (5 min or more).
ATTEMPTS = 8
BACKOFF_CAP_S = 32.0
TIMEOUT_S = 60


def endpoint(name: str, default: str) -> str:
    return os.environ.get(f"AICLUSTER_GCP_{name}", default).rstrip("/")


class ApiError(Exception):
    """A Google API error: the HTTP status, the error's reason or status word, and its message."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.status, self.code, self.message = status, code, message


def _error_of(status: int, body: bytes) -> ApiError:
    try:
        error = json.loads(body or b"{}").get("error", {})
    except ValueError:
        error = {}
    if not isinstance(error, dict):
        error = {"message": str(error)}
    details = error.get("errors") or [{}]
    code = details[0].get("reason") or error.get("status") or f"HTTP{status}"
    return ApiError(status, str(code), str(error.get("message") or body[:300].decode(errors="replace")))


def metadata(path: str) -> str:
    """A value of the metadata server (instance/name, instance/zone, project/project-id, ...)."""
    request = urllib.request.Request(f"{endpoint('METADATA', METADATA)}/{path}", headers={"Metadata-Flavor": "Google"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read().decode()


_token: tuple[str, float] | None = None


def access_token() -> str:
    """The service account's OAuth token from the metadata server, reused until a minute before it expires."""
    global _token
    fixed = os.environ.get("AICLUSTER_GCP_TOKEN")
    if fixed:
        return fixed
    if _token and _token[1] > time.monotonic() + 60:
        return _token[0]
    doc = json.loads(metadata("instance/service-accounts/default/token"))
    _token = (doc["access_token"], time.monotonic() + float(doc.get("expires_in", 300)))
    return _token[0]


def retryable(problem: ApiError) -> bool:
    """Throttling and server errors are worth another try; anything else is the answer."""
    return problem.status in RETRY_STATUS or (problem.status == 403 and problem.code in RATE_LIMIT_REASONS)


def backoff(attempt: int) -> float:
    """Seconds to wait before try `attempt + 1`: full jitter over an exponential cap, so many
    callers throttled at once (every resume slurmctld started) do not come back in step.
    AICLUSTER_GCP_BACKOFF_S scales the base (1 s); tests make it small."""
    base = float(os.environ.get("AICLUSTER_GCP_BACKOFF_S", "1"))
    return random.uniform(0, min(BACKOFF_CAP_S, base * 2 ** attempt))


def call(method: str, url: str, body: dict | None = None, params: dict | None = None, raw: bool = False,
         deadline: float | None = None):
    """One API call with the VM's token; retries rate limits, server errors and lost connections
    with jittered backoff. A call that creates something must carry an idempotency key (Compute
    Engine's requestId) to be retried safely: a lost answer may hide a request that was done.
    No retry starts after `deadline` (time.monotonic()), so a resume ends inside its budget.
    Returns the decoded JSON (or the raw bytes); raises ApiError."""
    if params:
        url = f"{url}?{urllib.parse.urlencode(params)}"
    data = json.dumps(body).encode() if body is not None else None
    for attempt in range(ATTEMPTS):
        request = urllib.request.Request(url, data=data, method=method, headers={
            "Authorization": f"Bearer {access_token()}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                payload = response.read()
            return payload if raw else json.loads(payload or b"{}")
        except urllib.error.HTTPError as err:
            problem = _error_of(err.code, err.read())
            if not retryable(problem):
                raise problem from None
        except (urllib.error.URLError, http.client.HTTPException, TimeoutError, ConnectionError) as err:
            problem = ApiError(0, "ConnectionError", str(err) or type(err).__name__)
        pause = backoff(attempt)
        if attempt == ATTEMPTS - 1 or (deadline is not None and time.monotonic() + pause > deadline):
            raise problem
        time.sleep(pause)
    raise AssertionError("unreachable")


def secret_value(name: str) -> bytes:
    """The latest version of a Secret Manager secret (projects/<p>/secrets/<id>)."""
    doc = call("GET", f"{endpoint('SECRETMANAGER', SECRETMANAGER)}/{name}/versions/latest:access")
    return base64.b64decode(doc["payload"]["data"])


def storage_read(bucket: str, name: str) -> bytes:
    """One Cloud Storage object's bytes."""
    quoted = urllib.parse.quote(name, safe="")
    return call("GET", f"{endpoint('STORAGE', STORAGE)}/b/{bucket}/o/{quoted}", params={"alt": "media"}, raw=True)


class Compute:
    """The Compute Engine calls the power programs make, in one zone of one project."""

    def __init__(self, project: str, zone: str):
        self.project, self.zone = project, zone
        self.base = f"{endpoint('COMPUTE', COMPUTE)}/projects/{project}/zones/{zone}"
        self.deadline: float | None = None      # time.monotonic() after which no call is retried

    def call(self, method: str, path: str, body: dict | None = None, params: dict | None = None) -> dict:
        return call(method, f"{self.base}/{path}", body, params, deadline=self.deadline)

    def bulk_insert(self, body: dict, request_id: str) -> dict:
        """instances.bulkInsert with `request_id` as its requestId: Compute Engine ignores a
        repeat of a request it already has (for at least 60 minutes) and answers with the same
        operation, so a retry after a lost answer creates nothing twice
        (https://cloud.google.com/compute/docs/reference/rest/v1/instances/bulkInsert)."""
        return self.call("POST", "instances/bulkInsert", body, params={"requestId": request_id})

    def wait(self, operation: dict, timeout_s: float = 900) -> dict:
        """Wait for a zonal operation to be DONE (zoneOperations.wait returns after at most 2 minutes),
        at most `timeout_s` and never past the calls' deadline."""
        deadline = min(time.monotonic() + timeout_s, self.deadline or float("inf"))
        while operation.get("status") != "DONE":
            if time.monotonic() > deadline:
                raise ApiError(0, "Timeout", f"operation {operation.get('name')} not done after {timeout_s:.0f} s")
            operation = self.call("POST", f"operations/{operation['name']}/wait")
        return operation

    def get(self, name: str) -> dict:
        return self.call("GET", f"instances/{name}")

    def list(self, filter_: str) -> list[dict]:
        """Every instance of the zone `filter_` selects, all pages (500 a page, the most
        instances.list returns: https://cloud.google.com/compute/docs/reference/rest/v1/instances/list)."""
        items, token = [], None
        while True:
            params = {"filter": filter_, "maxResults": 500, **({"pageToken": token} if token else {})}
            page = self.call("GET", "instances", params=params)
            items += page.get("items", [])
            token = page.get("nextPageToken")
            if not token:
                return items

    def delete(self, name: str) -> dict:
        return self.call("DELETE", f"instances/{name}")

    def guest_attribute(self, name: str, namespace: str, key: str) -> str | None:
        """The guest attribute <namespace>/<key> the instance wrote about itself, or None when it
        wrote none (404). Needs enable-guest-attributes on the instance
        (https://cloud.google.com/compute/docs/reference/rest/v1/instances/getGuestAttributes)."""
        try:
            doc = self.call("GET", f"instances/{name}/getGuestAttributes",
                            params={"queryPath": f"{namespace}/{key}"})
        except ApiError as err:
            if err.status == 404:
                return None
            raise
        for item in (doc.get("queryValue") or {}).get("items") or []:
            if item.get("namespace") == namespace and item.get("key") == key:
                return str(item.get("value", ""))
        return doc.get("variableValue")


class Dns:
    """The Cloud DNS calls the power programs make, on A records of one managed zone: a change of
    many record sets at once (changes.create, all or nothing), the zone's records (rrsets.list),
    and one record set per call (rrsets create, patch, delete) for when a change is refused and
    each record must fail or pass alone."""

    def __init__(self, project: str, zone: str):
        self.zone_url = f"{endpoint('DNS', DNS)}/projects/{project}/managedZones/{zone}"
        self.base = f"{self.zone_url}/rrsets"
        self.deadline: float | None = None      # time.monotonic() after which no call is retried

    def change(self, additions: list[dict] = (), deletions: list[dict] = ()) -> dict:
        """One changes.create: every addition and deletion, or none. A deletion must match the record
        set as it is (ttl and rrdatas too), an addition must not exist unless deleted in the same
        change (https://cloud.google.com/dns/docs/reference/rest/v1/changes/create). Cloud DNS
        answers before the change is served (status "pending"): a node's name is looked up only
        once it has booted and registered, long after that."""
        body = {"additions": list(additions), "deletions": list(deletions)}
        return call("POST", f"{self.zone_url}/changes", body, deadline=self.deadline)

    def list_a(self) -> dict[str, dict]:
        """name -> record set, of the zone's A records, all pages (the page size is the server's:
        https://cloud.google.com/dns/docs/reference/rest/v1/resourceRecordSets/list)."""
        records, token = {}, None
        while True:
            page = call("GET", self.base, params={"pageToken": token} if token else None, deadline=self.deadline)
            for rrset in page.get("rrsets") or []:
                if rrset.get("type") == "A":
                    records[rrset["name"]] = {k: rrset[k] for k in ("name", "type", "ttl", "rrdatas") if k in rrset}
            token = page.get("nextPageToken")
            if not token:
                return records

    def upsert_a(self, name: str, address: str, ttl: int) -> dict:
        """Create or replace the A record `name` (a fully qualified name, ending in a dot)."""
        body = {"name": name, "type": "A", "ttl": ttl, "rrdatas": [address]}
        try:
            return call("POST", self.base, body, deadline=self.deadline)
        except ApiError as err:
            if err.status != 409:           # alreadyExists: a node launched again
                raise
        return call("PATCH", f"{self.base}/{urllib.parse.quote(name, safe='')}/A", body, deadline=self.deadline)

    def delete_a(self, name: str) -> bool:
        """Delete the A record `name`: True when it was there, False when there was none."""
        try:
            call("DELETE", f"{self.base}/{urllib.parse.quote(name, safe='')}/A", deadline=self.deadline)
            return True
        except ApiError as err:
            if err.status == 404:
                return False
            raise


def operation_error(operation: dict) -> tuple[str, str] | None:
    """(code, message) of a failed operation's first error, or None."""
    errors = (operation.get("error") or {}).get("errors") or []
    if not errors:
        return None
    return str(errors[0].get("code") or "OperationError"), str(errors[0].get("message") or "")
