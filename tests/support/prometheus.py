"""Real Prometheus for the observability tests (Debian's `prometheus` package: promtool and
prometheus): check rule files, and run a server on 127.0.0.1 scraping a fake exporter.

A missing program FAILS the test (never skips): .ci/install-system-deps installs the package."""
from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, Iterator

import pytest
import yaml


def program(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path="/usr/bin:/usr/sbin:/usr/local/bin")
    if not found:
        pytest.fail(f"{name} is missing: install Debian's prometheus and prometheus-alertmanager packages "
                    "(.ci/install-system-deps)")
    return found


def check_rules(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([program("promtool"), "check", "rules", str(path)], capture_output=True, text=True,
                          timeout=60)


def queries_as_rules(exprs: list[str]) -> str:
    """Each PromQL query as a recording rule of one group: promtool parses every expression."""
    return yaml.safe_dump({"groups": [{"name": "queries", "rules": [
        {"record": f"aicluster_test:query_{i}", "expr": e} for i, e in enumerate(exprs)]}]}, sort_keys=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def fake_exporter(body: Callable[[], str]) -> Iterator[int]:
    """An HTTP server on 127.0.0.1 serving body() (exposition text) at /metrics; yields its port."""
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            data = body().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    with serving(Handler) as port:
        yield port


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[int]:
    """A threaded HTTP server of `handler` on 127.0.0.1 (a free port, yielded), stopped on exit."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def prometheus(tmp: Path, target_port: int, rules: Path, interval: str = "1s") -> Iterator[str]:
    """A real prometheus on 127.0.0.1 (free port, storage under tmp) scraping the target with
    honor_labels (the exposition carries cluster/pool/node, as relabelling sets them in a cluster)."""
    port = free_port()
    config = tmp / "prometheus.yml"
    config.write_text(yaml.safe_dump({
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [str(rules)],
        "scrape_configs": [{"job_name": "fake", "honor_labels": True,
                            "static_configs": [{"targets": [f"127.0.0.1:{target_port}"]}]}],
    }))
    log = (tmp / "prometheus.log").open("w")
    proc = subprocess.Popen([program("prometheus"), f"--config.file={config}", f"--storage.tsdb.path={tmp / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"prometheus did not start: {(tmp / 'prometheus.log').read_text()[-2000:]}")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def api(url: str, path: str) -> dict:
    with urllib.request.urlopen(f"{url}{path}", timeout=5) as r:
        return json.loads(r.read())


def firing(url: str) -> list[dict]:
    return [a for a in api(url, "/api/v1/alerts")["data"]["alerts"] if a["state"] == "firing"]
