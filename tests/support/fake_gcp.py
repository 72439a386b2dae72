"""A small fake of the Google APIs aicluster's node programs call, on loopback HTTP: the metadata
server, Compute Engine (bulkInsert, zone operations, instances get/list/setLabels/delete), Cloud
DNS (changes.create within its per-change limits, record sets list/create/patch/delete), Secret Manager (access), Cloud Storage (object media) and
Managed Lustre (importData).

It keeps state in memory, records every request, and can be told to fail a bulkInsert the way
Compute Engine does on a stockout (an operation that ends DONE with an error) or on a quota (an
HTTP 403 with reason QUOTA_EXCEEDED). The programs reach it through the AICLUSTER_GCP_* endpoint
variables of aicluster/node/gcp.py.

Faults, as Compute Engine shows them:
- `lose`: path suffix -> how many answers to drop. The request is carried out, then the
  connection closes without an answer (a network lost after the call).
- `throttle`: path suffix -> how many calls to refuse first with 403 rateLimitExceeded, the way
  Compute Engine refuses a spent rate quota (https://cloud.google.com/compute/api-quota).
- `stockout_names`: a bulkInsert naming any of these instances ends DONE with
  ZONE_RESOURCE_POOL_EXHAUSTED; `stockout_leaves` of its instances are still there when it ends
  (rollback of minCount not finished), labelled as the request asked.
- requestId: a repeat of a request with the same requestId is answered with the first answer and
  not carried out again, as Compute Engine does
  (https://cloud.google.com/compute/docs/reference/rest/v1/instances/bulkInsert).
- bulkInsert naming an instance that exists is refused whole with 409 alreadyExists.
- instances.list honours `labels.<key> = "<value>"` filters (several, each in parentheses),
  `name eq "<regex>"`, maxResults and pageToken; `list_ignores_labels` makes it return instances
  whatever their labels (a listing the programs must not take on trust).
- guest attributes: `guest_attributes` instance name -> {"namespace/key": value}.
- `before_bulk_insert(fake)` runs before a bulkInsert is answered: another program's instance
  appearing in between.
- Cloud DNS changes.create is all or nothing and refuses a change over the per-change limits
  (1,000 additions, 1,000 deletions, 100,000 bytes of record data) with 413; `dns_changes`
  counts them, `dns_calls()` gives every Cloud DNS request; `before_dns_change(fake)` runs before
  a change is carried out (a record deleted in between); rrsets.list pages at `dns_page_size`.
- `resources`: Compute Engine path after /compute/v1/ -> the document a GET answers (zones.get,
  machineTypes.get, regions.get with its quotas, reservations.get, images.get and
  images.getFromFamily, in any project); any other GET of a path it does not hold is 404, as
  Compute Engine answers for a resource that does not exist (`aicluster preflight`'s live checks).
"""
from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
import urllib.parse
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOKEN = "fake-token"
# Cloud DNS's limits of one change: "Additions per change 1,000", "Deletions per change 1,000",
# "Resource record data size per change 100,000 bytes" (https://cloud.google.com/dns/quotas, Limits).
DNS_CHANGE_ADDITIONS = 1000
DNS_CHANGE_DELETIONS = 1000
DNS_CHANGE_RRDATA_BYTES = 100_000


@dataclass
class Call:
    method: str
    path: str
    query: dict
    body: dict | None


@dataclass
class FakeGcp:
    project: str = "aicluster-test"
    zone: str = "us-central1-a"
    template_labels: dict = field(default_factory=dict)        # what instances get from their template
    secrets: dict = field(default_factory=dict)                # projects/p/secrets/x -> bytes
    objects: dict = field(default_factory=dict)                # (bucket, name) -> bytes
    metadata: dict = field(default_factory=dict)               # path -> text
    instances: dict = field(default_factory=dict)              # name -> instance
    dns_zones: set = field(default_factory=set)                # managed zone names that exist
    records: dict = field(default_factory=dict)                # (zone, name, type) -> record set
    fail_dns: set = field(default_factory=set)                 # record names Cloud DNS refuses (403)
    dns_changes: list = field(default_factory=list)            # (additions, deletions) of each changes.create
    dns_page_size: int = 500                                   # rrsets.list page size (the server's choice)
    before_dns_change: object = None                           # fake -> None, run first (a record changed meanwhile)
    calls: list = field(default_factory=list)
    fail_bulk_insert: tuple | None = None                      # ("operation"|"http", code, message)
    fail_set_labels: set = field(default_factory=set)          # instance names
    template_scheduling: dict = field(default_factory=lambda: {"provisioningModel": "STANDARD"})
    lose: dict = field(default_factory=dict)                   # path suffix -> answers to drop
    throttle: dict = field(default_factory=dict)               # path suffix -> 403 rateLimitExceeded first
    stockout_names: set = field(default_factory=set)           # a bulkInsert naming one of these fails
    stockout_leaves: int = 0                                   # instances a failed bulkInsert leaves behind
    guest_attributes: dict = field(default_factory=dict)       # instance -> {"namespace/key": value}
    list_ignores_labels: bool = False                          # instances.list drops its label filter
    answered: dict = field(default_factory=dict)               # requestId -> the first answer
    bulk_count: int = 0                                        # bulkInserts carried out
    before_bulk_insert: object = None                          # fake -> None, run first (a race)
    resources: dict = field(default_factory=dict)              # compute path -> document GET answers
    lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    # --- endpoints for the programs --------------------------------------------------------

    @property
    def base(self) -> str:
        host, port = self._server.server_address
        return f"http://{host}:{port}"

    def env(self) -> dict[str, str]:
        return {"AICLUSTER_GCP_TOKEN": TOKEN, "AICLUSTER_GCP_COMPUTE": f"{self.base}/compute/v1",
                "AICLUSTER_GCP_DNS": f"{self.base}/dns/v1",
                "AICLUSTER_GCP_SECRETMANAGER": f"{self.base}/secretmanager/v1",
                "AICLUSTER_GCP_STORAGE": f"{self.base}/storage/v1", "AICLUSTER_GCP_LUSTRE": f"{self.base}/lustre/v1",
                "AICLUSTER_GCP_METADATA": f"{self.base}/computeMetadata/v1"}

    def start(self) -> "FakeGcp":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):    # quiet
                pass

            def _reply(self, status: int, payload) -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self, method: str) -> None:
                url = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(url.query))
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                path = urllib.parse.unquote(url.path)
                if path.startswith("/computeMetadata/"):
                    if self.headers.get("Metadata-Flavor") != "Google":
                        return self._reply(403, b"Missing Metadata-Flavor header")
                    value = fake.metadata.get(path[len("/computeMetadata/v1/"):])
                    return self._reply(200, value.encode()) if value is not None else self._reply(404, b"not found")
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self._reply(401, {"error": {"code": 401, "status": "UNAUTHENTICATED", "message": "no token"}})
                with fake.lock:
                    fake.calls.append(Call(method, path, query, body))
                    status, payload = fake.answer(method, path, query, body)
                    lost = fake.take(fake.lose, path)
                if lost:                    # done, but the caller never hears of it
                    self.close_connection = True
                    return
                self._reply(status, payload)

            def do_GET(self):
                self._handle("GET")

            def do_POST(self):
                self._handle("POST")

            def do_DELETE(self):
                self._handle("DELETE")

            def do_PATCH(self):
                self._handle("PATCH")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()

    # --- the APIs ---------------------------------------------------------------------------

    @staticmethod
    def error(status: int, reason: str, message: str):
        return status, {"error": {"code": status, "message": message, "errors": [{"reason": reason, "message": message}]}}

    def address(self, name: str) -> str:
        n = int(hashlib.sha256(name.encode()).hexdigest(), 16)
        return f"10.0.{n % 100 + 1}.{n // 100 % 200 + 10}"

    @staticmethod
    def take(counts: dict, path: str) -> bool:
        """Use up one of the faults `counts` holds for a path ending in one of its keys."""
        for suffix, left in counts.items():
            if left and path.endswith(suffix):
                counts[suffix] = left - 1
                return True
        return False

    def answer(self, method: str, path: str, query: dict, body):
        """Throttling first, then a repeated requestId gets its first answer, then the API."""
        if self.take(self.throttle, path):
            return self.error(403, "rateLimitExceeded", "Rate Limit Exceeded")
        request_id = query.get("requestId")
        if request_id and request_id in self.answered:
            return self.answered[request_id]
        reply = self.route(method, path, query, body)
        if request_id and reply[0] < 300:
            self.answered[request_id] = reply
        return reply

    def route(self, method: str, path: str, query: dict, body):
        zone = f"/compute/v1/projects/{self.project}/zones/{self.zone}"
        if method == "GET" and path.removeprefix("/compute/v1/") in self.resources:
            return 200, self.resources[path.removeprefix("/compute/v1/")]
        if path == f"{zone}/instances/bulkInsert" and method == "POST":
            return self.bulk_insert(body)
        if m := re.fullmatch(re.escape(zone) + r"/operations/([^/]+)/wait", path):
            return 200, {"name": m.group(1), "status": "DONE"}
        if path == f"{zone}/instances" and method == "GET":
            return self.list_instances(query)
        if m := re.fullmatch(re.escape(zone) + r"/instances/([^/]+)/getGuestAttributes", path):
            value = self.guest_attributes.get(m.group(1), {}).get(query.get("queryPath", ""))
            if value is None:
                return self.error(404, "notFound", f"The resource 'guestAttributes/{query.get('queryPath')}' was not found")
            namespace, key = query["queryPath"].split("/", 1)
            return 200, {"kind": "compute#guestAttributes", "queryPath": query["queryPath"],
                         "queryValue": {"items": [{"namespace": namespace, "key": key, "value": value}]}}
        if m := re.fullmatch(re.escape(zone) + r"/instances/([^/]+)/setLabels", path):
            name = m.group(1)
            if name not in self.instances:
                return self.error(404, "notFound", f"instance {name} not found")
            if name in self.fail_set_labels:
                return self.error(412, "conditionNotMet", "Labels fingerprint either invalid or resource labels have changed")
            if body.get("labelFingerprint") != self.instances[name]["labelFingerprint"]:
                return self.error(412, "conditionNotMet", "stale label fingerprint")
            self.instances[name]["labels"] = dict(body["labels"])
            self.instances[name]["labelFingerprint"] = hashlib.md5(json.dumps(body["labels"]).encode()).hexdigest()[:12]
            return 200, {"name": f"op-labels-{name}", "status": "DONE"}
        if m := re.fullmatch(re.escape(zone) + r"/instances/([^/]+)", path):
            name = m.group(1)
            if name not in self.instances:
                return self.error(404, "notFound", f"The resource 'instances/{name}' was not found")
            if method == "DELETE":
                del self.instances[name]
                self.guest_attributes.pop(name, None)       # they belong to the instance
                return 200, {"name": f"op-delete-{name}", "status": "RUNNING"}
            return 200, self.instances[name]
        if m := re.fullmatch(rf"/dns/v1/projects/{re.escape(self.project)}/managedZones/([^/]+)/changes", path):
            if method == "POST":
                return self.change(m.group(1), body or {})
        if m := re.fullmatch(rf"/dns/v1/projects/{re.escape(self.project)}/managedZones/([^/]+)/rrsets", path):
            if method == "GET":
                return self.list_rrsets(m.group(1), query)
        if m := re.fullmatch(rf"/dns/v1/projects/{re.escape(self.project)}/managedZones/([^/]+)/rrsets(?:/([^/]+)/([^/]+))?",
                             path):
            return self.rrsets(method, *m.groups(), body)
        if m := re.fullmatch(r"/secretmanager/v1/(projects/[^/]+/secrets/[^/]+)/versions/latest:access", path):
            if m.group(1) not in self.secrets:
                return self.error(404, "notFound", f"Secret [{m.group(1)}] not found")
            return 200, {"name": f"{m.group(1)}/versions/1",
                         "payload": {"data": base64.b64encode(self.secrets[m.group(1)]).decode()}}
        if m := re.fullmatch(r"/storage/v1/b/([^/]+)/o/(.+)", path):
            key = (m.group(1), m.group(2))
            if key not in self.objects:
                return self.error(404, "notFound", "No such object")
            return 200, self.objects[key]
        if m := re.fullmatch(r"/lustre/v1/(projects/.+/instances/[^/:]+):importData", path):
            return 200, {"name": f"{m.group(1).rsplit('/instances/', 1)[0]}/operations/import-{len(self.calls)}",
                         "done": False}
        return self.error(404, "notFound", f"fake: no route for {method} {path}")

    def rrsets(self, method: str, zone: str, name: str | None, type_: str | None, body):
        """Cloud DNS record sets, as the rrsets API answers: create (409 when it exists), patch and
        delete (404 when it does not)."""
        if zone not in self.dns_zones:
            return self.error(404, "notFound", f"The 'parameters.managedZone' resource named '{zone}' does not exist.")
        if method == "POST" and name is None:
            name, type_ = body["name"], body["type"]
        if name is None:
            return self.error(404, "notFound", f"fake: no route for {method} rrsets")
        if name in self.fail_dns:
            return self.error(403, "forbidden", f"Forbidden: dns.resourceRecordSets on {name}")
        if not name.endswith("."):
            return self.error(400, "invalid", f"Invalid value for 'entity.rrset.name': '{name}'")
        key = (zone, name, type_)
        if method == "POST":
            if key in self.records:
                return self.error(409, "alreadyExists", f"The resource 'entity.rrset' named '{name} ({type_})' already exists")
            self.records[key] = {"kind": "dns#resourceRecordSet", **body}
            return 200, self.records[key]
        if key not in self.records:
            return self.error(404, "notFound", f"The 'parameters.name' resource named '{name}' does not exist.")
        if method == "PATCH":
            self.records[key] = {"kind": "dns#resourceRecordSet", **body}
            return 200, self.records[key]
        if method == "DELETE":
            del self.records[key]
            return 200, {}
        return 200, self.records[key]

    def change(self, zone: str, body: dict):
        """changes.create as Cloud DNS answers it: within the per-change limits, all or nothing. A
        deletion must match the record set as it is (404 notFound when there is none, 412
        conditionNotMet when it differs); an addition must not exist unless deleted in the same
        change (409 alreadyExists); a record name in `fail_dns` refuses the whole change (403)."""
        if zone not in self.dns_zones:
            return self.error(404, "notFound", f"The 'parameters.managedZone' resource named '{zone}' does not exist.")
        additions, deletions = body.get("additions") or [], body.get("deletions") or []
        self.dns_changes.append((len(additions), len(deletions)))
        if self.before_dns_change:
            self.before_dns_change(self)
        rrdata = sum(len(r) for rrset in additions + deletions for r in rrset.get("rrdatas") or [])
        if (len(additions) > DNS_CHANGE_ADDITIONS or len(deletions) > DNS_CHANGE_DELETIONS
                or rrdata > DNS_CHANGE_RRDATA_BYTES):
            # "If you exceed a quota with an API request, Google Cloud returns ... HTTP 413 Request
            # Entity Too Large" (https://cloud.google.com/dns/quotas).
            return self.error(413, "quotaExceeded", f"change of {len(additions)} additions, {len(deletions)} deletions, "
                                                    f"{rrdata} bytes exceeds the per-change limits")
        if refused := [r["name"] for r in additions + deletions if r["name"] in self.fail_dns]:
            return self.error(403, "forbidden", f"Forbidden: dns.changes.create on {refused[0]}")
        for i, rrset in enumerate(deletions):
            key = (zone, rrset["name"], rrset["type"])
            if key not in self.records:
                return self.error(404, "notFound", f"The 'entity.change.deletions[{i}]' resource named "
                                                   f"'{rrset['name']} ({rrset['type']})' does not exist.")
            if {k: v for k, v in self.records[key].items() if k != "kind"} != rrset:
                return self.error(412, "conditionNotMet", f"Precondition not met for 'entity.change.deletions[{i}]'")
        deleted = {(zone, r["name"], r["type"]) for r in deletions}
        for i, rrset in enumerate(additions):
            if not rrset["name"].endswith("."):
                return self.error(400, "invalid", f"Invalid value for 'entity.change.additions[{i}].name'")
            key = (zone, rrset["name"], rrset["type"])
            if key in self.records and key not in deleted:
                return self.error(409, "alreadyExists", f"The resource 'entity.change.additions[{i}]' named "
                                                        f"'{rrset['name']} ({rrset['type']})' already exists")
        for key in deleted:
            del self.records[key]
        for rrset in additions:
            self.records[(zone, rrset["name"], rrset["type"])] = {"kind": "dns#resourceRecordSet", **rrset}
        return 200, {"kind": "dns#change", "id": str(len(self.dns_changes)), "status": "pending",
                     "additions": additions, "deletions": deletions}

    def list_rrsets(self, zone: str, query: dict):
        """rrsets.list: the zone's record sets, `dns_page_size` a page unless maxResults asks for fewer."""
        if zone not in self.dns_zones:
            return self.error(404, "notFound", f"The 'parameters.managedZone' resource named '{zone}' does not exist.")
        items = [{k: v for k, v in rrset.items()} for (z, _, _), rrset in sorted(self.records.items()) if z == zone]
        start = int(query.get("pageToken") or 0)
        size = min(int(query.get("maxResults") or self.dns_page_size), self.dns_page_size)
        page = {"kind": "dns#resourceRecordSetsListResponse", "rrsets": items[start:start + size]}
        if start + size < len(items):
            page["nextPageToken"] = str(start + size)
        return 200, page

    def dns_calls(self) -> list[Call]:
        """Every Cloud DNS request, whatever it was."""
        return [c for c in self.calls if c.path.startswith("/dns/")]

    def addresses_in(self, zone: str) -> dict[str, str]:
        """name -> address of the zone's A records."""
        return {name: rrset["rrdatas"][0] for (z, name, type_), rrset in self.records.items()
                if z == zone and type_ == "A"}

    def list_instances(self, query: dict):
        items = sorted(self.instances.values(), key=lambda i: i["name"])
        filter_ = query.get("filter", "")
        if f := re.fullmatch(r'name eq "(.*)"', filter_):
            items = [i for i in items if re.fullmatch(f.group(1), i["name"])]
        elif not self.list_ignores_labels:
            for key, value in re.findall(r'labels\.([a-z0-9_-]+) = "([^"]*)"', filter_):
                items = [i for i in items if i.get("labels", {}).get(key) == value]
        start, size = int(query.get("pageToken") or 0), int(query.get("maxResults") or 500)
        page = {"items": items[start:start + size]} if items[start:start + size] else {}
        if start + size < len(items):
            page["nextPageToken"] = str(start + size)
        return 200, page

    def bulk_insert(self, body: dict):
        if self.before_bulk_insert:
            self.before_bulk_insert(self)
        if self.fail_bulk_insert and self.fail_bulk_insert[0] == "http":
            _, reason, message = self.fail_bulk_insert
            return self.error(403, reason, message)
        if self.fail_bulk_insert:
            _, code, message = self.fail_bulk_insert
            return 200, {"name": "op-bulk-failed", "status": "DONE",
                         "error": {"errors": [{"code": code, "message": message}]}}
        names = list(body["perInstanceProperties"])
        if taken := [n for n in names if n in self.instances]:
            return self.error(409, "alreadyExists", f"The resource 'projects/{self.project}/zones/{self.zone}/"
                                                    f"instances/{taken[0]}' already exists")
        self.bulk_count += 1
        if self.stockout_names & set(names):
            for name in names[:self.stockout_leaves]:
                self.create(name, body)
            return 200, {"name": f"op-bulk-{self.bulk_count}", "status": "DONE", "operationType": "bulkInsert",
                         "error": {"errors": [{"code": "ZONE_RESOURCE_POOL_EXHAUSTED", "message":
                                               f"The zone 'projects/{self.project}/zones/{self.zone}' does not "
                                               "have enough resources available to fulfill the request."}]}}
        for name in names:
            self.create(name, body)
        return 200, {"name": f"op-bulk-{self.bulk_count}", "status": "RUNNING", "operationType": "bulkInsert"}

    def create(self, name: str, body: dict) -> None:
        """One instance of a bulkInsert: the template's labels and scheduling, with the request's
        instanceProperties merged over them (JSON Merge Patch, as bulkInsert documents)."""
        properties = body.get("instanceProperties") or {}
        self.instances[name] = {
            "name": name, "zone": self.zone, "status": "RUNNING",
            "creationTimestamp": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
            "labels": {**self.template_labels, **properties.get("labels", {})},
            "labelFingerprint": "fp0",
            "scheduling": dict(self.template_scheduling),
            "networkInterfaces": [{"name": "nic0", "networkIP": self.address(name)}],
            "sourceInstanceTemplate": body["sourceInstanceTemplate"],
            "resourcePolicies": properties.get("resourcePolicies", []),
        }

    # --- what tests ask ---------------------------------------------------------------------

    def requests(self, suffix: str, method: str = "POST") -> list[Call]:
        return [c for c in self.calls if c.method == method and c.path.endswith(suffix)]
