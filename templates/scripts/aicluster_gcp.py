"""Google Cloud REST for aicluster's node programs: the metadata server, an access token for the
VM's service account, Compute Engine, Cloud DNS, Secret Manager, Cloud Storage and Managed Lustre.

Standard library only (urllib), so the head node and the compute nodes need no Google SDK: the
programs run with the distribution's python3. Installed in /opt/aicluster/bin next to the programs
that import it (aicluster-gcp-power.py, aicluster-secret, aicluster-sync, aicluster-gcp-lustre-import).

Tests point every endpoint at a local fake through the environment:
AICLUSTER_GCP_METADATA, AICLUSTER_GCP_COMPUTE, AICLUSTER_GCP_DNS, AICLUSTER_GCP_SECRETMANAGER,
AICLUSTER_GCP_STORAGE, AICLUSTER_GCP_LUSTRE; AICLUSTER_GCP_TOKEN skips the metadata server's token.
"""
from __future__ import annotations

import base64
import json
import os
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
ATTEMPTS = 6
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


def call(method: str, url: str, body: dict | None = None, params: dict | None = None, raw: bool = False):
    """One API call with the VM's token; retries rate limits and server errors with backoff.
    Returns the decoded JSON (or the raw bytes); raises ApiError."""
    if params:
        url = f"{url}?{urllib.parse.urlencode(params)}"
    data = json.dumps(body).encode() if body is not None else None
    delay = 1.0
    for attempt in range(ATTEMPTS):
        request = urllib.request.Request(url, data=data, method=method, headers={
            "Authorization": f"Bearer {access_token()}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                payload = response.read()
            return payload if raw else json.loads(payload or b"{}")
        except urllib.error.HTTPError as err:
            problem = _error_of(err.code, err.read())
            if err.code not in RETRY_STATUS or attempt == ATTEMPTS - 1:
                raise problem from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as err:
            if attempt == ATTEMPTS - 1:
                raise ApiError(0, "ConnectionError", str(err)) from None
        time.sleep(delay)
        delay = min(delay * 2, 30)
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

    def bulk_insert(self, body: dict) -> dict:
        return call("POST", f"{self.base}/instances/bulkInsert", body)

    def wait(self, operation: dict, timeout_s: float = 900) -> dict:
        """Wait for a zonal operation to be DONE (zoneOperations.wait returns after at most 2 minutes)."""
        deadline = time.monotonic() + timeout_s
        while operation.get("status") != "DONE":
            if time.monotonic() > deadline:
                raise ApiError(0, "Timeout", f"operation {operation.get('name')} not done after {timeout_s:.0f} s")
            operation = call("POST", f"{self.base}/operations/{operation['name']}/wait")
        return operation

    def get(self, name: str) -> dict:
        return call("GET", f"{self.base}/instances/{name}")

    def set_labels(self, name: str, labels: dict, fingerprint: str) -> dict:
        return call("POST", f"{self.base}/instances/{name}/setLabels",
                    {"labels": labels, "labelFingerprint": fingerprint})

    def list(self, filter_: str) -> list[dict]:
        items, token = [], None
        while True:
            params = {"filter": filter_, "maxResults": 500, **({"pageToken": token} if token else {})}
            page = call("GET", f"{self.base}/instances", params=params)
            items += page.get("items", [])
            token = page.get("nextPageToken")
            if not token:
                return items

    def delete(self, name: str) -> dict:
        return call("DELETE", f"{self.base}/instances/{name}")


class Dns:
    """The Cloud DNS calls the power programs make: A records in one managed zone, one record set
    per call (rrsets create, patch, delete), so one refused record fails one node only."""

    def __init__(self, project: str, zone: str):
        self.base = f"{endpoint('DNS', DNS)}/projects/{project}/managedZones/{zone}/rrsets"

    def upsert_a(self, name: str, address: str, ttl: int) -> dict:
        """Create or replace the A record `name` (a fully qualified name, ending in a dot)."""
        body = {"name": name, "type": "A", "ttl": ttl, "rrdatas": [address]}
        try:
            return call("POST", self.base, body)
        except ApiError as err:
            if err.status != 409:           # alreadyExists: a node launched again
                raise
        return call("PATCH", f"{self.base}/{urllib.parse.quote(name, safe='')}/A", body)

    def delete_a(self, name: str) -> bool:
        """Delete the A record `name`: True when it was there, False when there was none."""
        try:
            call("DELETE", f"{self.base}/{urllib.parse.quote(name, safe='')}/A")
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
