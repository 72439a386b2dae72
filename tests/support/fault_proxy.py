"""A fault-injecting HTTP proxy for moto's server on 127.0.0.1: the power programs talk to it as to
AWS (AWS_ENDPOINT_URL), it forwards every request to moto, and the rules a test sets break the
EC2 Query API calls they name (the `Action` of the form body) the way the real API breaks:

- `throttle(action, times)`: the first `times` calls get a 503 RequestLimitExceeded, as EC2
  answers a caller over its token bucket, and never reach moto;
- `refuse(action, code, times)`: a 4xx error (UnauthorizedOperation by default), not forwarded;
- `drop_after_forward(action, times)`: moto does the call (CreateFleet launches), then the
  connection closes without an answer: "the network was lost after CreateFleet";
- `shrink_fleet(capacity, to)`: a CreateFleet asking for `capacity` instances reaches moto asking
  for `to`, so moto launches and reports fewer: a partial fleet (moto itself always has capacity).

Everything else (Route 53, moto-api) passes untouched. `calls[action]` counts what arrived.
"""
from __future__ import annotations

import http.client
import threading
import urllib.parse
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ERROR_XML = ('<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{code}</Code>'
             '<Message>{message}</Message></Error></Errors><RequestID>fault-proxy</RequestID></Response>')


@dataclass
class Rule:
    action: str
    kind: str                   # "throttle", "refuse", "drop", "shrink"
    times: int | None           # None: every call
    code: str = ""
    status: int = 0
    match: str = ""             # "shrink": the TotalTargetCapacity it applies to
    to: str = ""
    used: int = 0


class FaultProxy:
    """A proxy in front of `upstream` (http://127.0.0.1:port of moto); `endpoint` is its own URL."""

    def __init__(self, upstream: str):
        parsed = urllib.parse.urlsplit(upstream)
        self.upstream = (parsed.hostname, parsed.port)
        self.rules: list[Rule] = []
        self.calls: Counter = Counter()
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                proxy.handle(self)

            do_POST = do_PUT = do_DELETE = do_HEAD = do_GET

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "FaultProxy":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    # --- rules -------------------------------------------------------------------------------

    def throttle(self, action: str, times: int | None) -> None:
        self.rules.append(Rule(action, "throttle", times, "RequestLimitExceeded", 503))

    def refuse(self, action: str, code: str = "UnauthorizedOperation", times: int | None = None,
               status: int = 403) -> None:
        self.rules.append(Rule(action, "refuse", times, code, status))

    def drop_after_forward(self, action: str, times: int | None = 1) -> None:
        self.rules.append(Rule(action, "drop", times))

    def shrink_fleet(self, capacity: int, to: int, times: int | None = None) -> None:
        self.rules.append(Rule("CreateFleet", "shrink", times, match=str(capacity), to=str(to)))

    def clear(self) -> None:
        with self.lock:
            self.rules.clear()

    def _rule_for(self, action: str, form: dict) -> Rule | None:
        with self.lock:
            self.calls[action] += 1
            for rule in self.rules:
                if rule.action != action or (rule.times is not None and rule.used >= rule.times):
                    continue
                if rule.kind == "shrink" and form.get("TargetCapacitySpecification.TotalTargetCapacity") != rule.match:
                    continue
                rule.used += 1
                return rule
        return None

    # --- forwarding ----------------------------------------------------------------------------

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        body = request.rfile.read(int(request.headers.get("Content-Length") or 0))
        form = dict(urllib.parse.parse_qsl(body.decode("utf-8", "replace"))) if body else {}
        rule = self._rule_for(form.get("Action", ""), form) if "Action" in form else None
        if rule and rule.kind in ("throttle", "refuse"):
            error = ERROR_XML.format(code=rule.code, message=f"injected {rule.code}")
            self._answer(request, rule.status, error.encode())
            return
        if rule and rule.kind == "shrink":
            form["TargetCapacitySpecification.TotalTargetCapacity"] = rule.to
            for key in ("OnDemandOptions.MinTargetCapacity", "SpotOptions.MinTargetCapacity"):
                if key in form:
                    form[key] = rule.to
            body = urllib.parse.urlencode(form).encode()
        status, headers, payload = self._forward(request, body)
        if rule and rule.kind == "drop":
            # moto did it; the caller never hears: close without a byte of answer.
            request.close_connection = True
            return
        self._answer(request, status, payload, headers)

    def _forward(self, request: BaseHTTPRequestHandler, body: bytes):
        connection = http.client.HTTPConnection(*self.upstream, timeout=120)
        try:
            headers = {k: v for k, v in request.headers.items() if k.lower() not in ("content-length", "host",
                                                                                     "connection")}
            headers["Content-Length"] = str(len(body))
            headers["Host"] = f"{self.upstream[0]}:{self.upstream[1]}"
            connection.request(request.command, request.path, body=body, headers=headers)
            response = connection.getresponse()
            payload = response.read()
            kept = [(k, v) for k, v in response.getheaders()
                    if k.lower() not in ("content-length", "transfer-encoding", "connection")]
            return response.status, kept, payload
        finally:
            connection.close()

    @staticmethod
    def _answer(request: BaseHTTPRequestHandler, status: int, payload: bytes, headers=()) -> None:
        request.send_response(status)
        for key, value in headers or [("Content-Type", "text/xml")]:
            request.send_header(key, value)
        request.send_header("Content-Length", str(len(payload)))
        request.end_headers()
        if request.command != "HEAD":
            request.wfile.write(payload)


# --- an in-process EC2 with EC2's throttling, for resumes too large for moto ----------------------


class TokenBucket:
    """EC2's throttling model: `capacity` tokens, `refill` added per second; a call takes one or is
    refused (https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html)."""

    def __init__(self, capacity: float, refill: float):
        import time

        self.clock = time.monotonic
        self.capacity, self.refill, self.tokens, self.at = capacity, refill, capacity, self.clock()

    def take(self) -> bool:
        now = self.clock()
        self.tokens = min(self.capacity, self.tokens + (now - self.at) * self.refill)
        self.at = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


class ThrottledEc2:
    """The EC2 calls the AWS power program makes, answered in memory with the API's shapes: one
    token bucket per action, the first `throttle_first` calls of every action refused outright,
    `latency` seconds per call (CreateFleet: `fleet_latency`), ClientToken honoured as EC2 does.
    Errors are botocore ClientErrors, as boto3 raises them."""

    def __init__(self, capacity: float, refill: float, throttle_first: int = 0, latency: float = 0.0,
                 fleet_latency: float = 0.0):
        self.capacity, self.refill, self.throttle_first = capacity, refill, throttle_first
        self.latency, self.fleet_latency = latency, fleet_latency
        self.buckets: dict[str, TokenBucket] = {}
        self.calls: Counter = Counter()
        self.throttled: Counter = Counter()
        self.instances: dict[str, dict] = {}
        self.tokens: dict[str, dict] = {}
        self.lock = threading.Lock()

    def _enter(self, action: str, latency: float) -> None:
        import time

        from botocore.exceptions import ClientError

        with self.lock:
            self.calls[action] += 1
            bucket = self.buckets.setdefault(action, TokenBucket(self.capacity, self.refill))
            refused = self.calls[action] <= self.throttle_first or not bucket.take()
            if refused:
                self.throttled[action] += 1
        if refused:
            raise ClientError({"Error": {"Code": "RequestLimitExceeded", "Message": "Request limit exceeded."},
                               "ResponseMetadata": {"HTTPStatusCode": 503}}, action)
        time.sleep(latency)

    def create_fleet(self, **request):
        import time

        self._enter("CreateFleet", self.fleet_latency)
        with self.lock:
            token = request.get("ClientToken")
            if token in self.tokens:
                return self.tokens[token]
            count = request["TargetCapacitySpecification"]["TotalTargetCapacity"]
            tags = {t["Key"]: t["Value"] for spec in request.get("TagSpecifications", [])
                    if spec["ResourceType"] == "instance" for t in spec["Tags"]}
            ids = []
            for _ in range(count):
                number = len(self.instances) + 1
                iid = f"i-{number:017x}"
                self.instances[iid] = {"InstanceId": iid, "State": {"Name": "pending"}, "Tags": dict(tags),
                                       "PrivateIpAddress": f"10.{number // 65536}.{number // 256 % 256}.{number % 256}",
                                       "PrivateDnsName": f"ip-{number}.ec2.internal", "LaunchTime": time.time()}
                ids.append(iid)
            answer = {"FleetId": f"fleet-{token}", "Errors": [],
                      "Instances": [{"InstanceIds": ids, "InstanceType": "p5.48xlarge", "Lifecycle": "on-demand"}]}
            if token:
                self.tokens[token] = answer
            return answer

    def create_tags(self, Resources, Tags):
        self._enter("CreateTags", self.latency)
        with self.lock:
            for iid in Resources:
                self.instances[iid]["Tags"].update({t["Key"]: t["Value"] for t in Tags})
        return {}

    def _matches(self, instance: dict, filters: list[dict]) -> bool:
        for f in filters:
            name, values = f["Name"], f["Values"]
            if name == "instance-id" and instance["InstanceId"] not in values:
                return False
            if name == "instance-state-name" and instance["State"]["Name"] not in values:
                return False
            if name.startswith("tag:") and instance["Tags"].get(name[4:]) not in values:
                return False
        return True

    def describe_instances(self, Filters=(), MaxResults=1000, NextToken=None):
        self._enter("DescribeInstances", self.latency)
        with self.lock:
            matching = [i for i in self.instances.values() if self._matches(i, Filters)]
        start = int(NextToken or 0)
        page = matching[start:start + MaxResults]
        answer = {"Reservations": [{"Instances": [
            {**i, "Tags": [{"Key": k, "Value": v} for k, v in i["Tags"].items()]} for i in page]}]}
        if start + MaxResults < len(matching):
            answer["NextToken"] = str(start + MaxResults)
        return answer

    def describe_instance_status(self, InstanceIds, IncludeAllInstances=True):
        self._enter("DescribeInstanceStatus", self.latency)
        return {"InstanceStatuses": []}

    def terminate_instances(self, InstanceIds):
        self._enter("TerminateInstances", self.latency)
        with self.lock:
            for iid in InstanceIds:
                if iid in self.instances:
                    self.instances[iid]["State"] = {"Name": "shutting-down"}
        return {}

    def live(self) -> list[dict]:
        return [i for i in self.instances.values() if i["State"]["Name"] in ("pending", "running")]
