"""A fake of the Filestore API's backups on loopback HTTP (Filestore v1: projects.locations.backups
.create returns a long-running operation; operations.get reads it), for `aicluster destroy`'s
final backups (commands/final_backups.py). There is no Filestore emulator.

- POST /projects/P/locations/REGION/backups?backupId=ID with {sourceInstance, sourceFileShare}:
  400 unless the source names an instance in a zone of REGION and a share; 409 for an id that
  exists; else an operation that is done after `polls` reads.
- `fail`: the operation ends done with an error (what a backup of a busy instance can do).
"""
from __future__ import annotations

import json
import re
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class FakeFilestore:
    polls: int = 2
    fail: bool = False
    requests: list = field(default_factory=list)
    backups: dict = field(default_factory=dict)
    operations: dict = field(default_factory=dict)
    _server: ThreadingHTTPServer | None = None

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> "FakeFilestore":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _reply(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                self._reply(*fake.handle("POST", self.path, body, self.headers.get("Authorization")))

            def do_GET(self):
                self._reply(*fake.handle("GET", self.path, None, self.headers.get("Authorization")))

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()

    def handle(self, method: str, raw: str, body, auth) -> tuple[int, dict]:
        url = urllib.parse.urlsplit(raw)
        path, query = url.path.removeprefix("/v1/"), dict(urllib.parse.parse_qsl(url.query))
        self.requests.append((method, path, query, body))
        if auth != "Bearer test-token":
            return 401, {"error": {"code": 401, "message": "Request had invalid authentication credentials."}}
        if method == "POST" and (m := re.fullmatch(r"projects/([^/]+)/locations/([^/]+)/backups", path)):
            project, region = m.groups()
            backup_id = query.get("backupId", "")
            source = (body or {}).get("sourceInstance", "")
            ok = re.fullmatch(rf"projects/{re.escape(project)}/locations/{re.escape(region)}-[a-z]/instances/[^/]+", source)
            if not ok or not (body or {}).get("sourceFileShare") or not re.fullmatch(r"[a-z][-a-z0-9]{0,62}", backup_id):
                return 400, {"error": {"code": 400, "message": f"invalid backup request {source!r} {backup_id!r}"}}
            name = f"{path}/{backup_id}"
            if name in self.backups:
                return 409, {"error": {"code": 409, "message": "Resource already exists"}}
            self.backups[name] = dict(body, state="CREATING")
            op = f"projects/{project}/locations/{region}/operations/operation-{len(self.operations) + 1}"
            self.operations[op] = {"name": op, "left": self.polls, "backup": name}
            return 200, {"name": op, "done": False}
        if method == "GET" and path in self.operations:
            op = self.operations[path]
            op["left"] -= 1
            if op["left"] > 0:
                return 200, {"name": path, "done": False}
            if self.fail:
                self.backups.pop(op["backup"], None)
                return 200, {"name": path, "done": True, "error": {"code": 9, "message": "instance busy: another "
                                                                   "operation is in progress"}}
            self.backups[op["backup"]]["state"] = "READY"
            return 200, {"name": path, "done": True, "response": {"name": op["backup"], "state": "READY"}}
        return 404, {"error": {"code": 404, "message": f"no {method} {path}"}}
