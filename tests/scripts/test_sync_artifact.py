"""aicluster-sync --publish-artifact FILE KEY (issue 24, item 9): how the head publishes what it
builds once for every node (pyxis, aicluster-pyxis-build) in the cluster's own bucket, run as a
subprocess against moto's S3 and a loopback stand-in for Cloud Storage's JSON API.

The object first, then its SHA-256 beside it (what a node reads first); a key whose digest is
published is never rewritten; nothing outside the artifacts prefix (the only one the head's grant
allows) is written."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import threading
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import boto3
import pytest

from tests.support.node_programs import module_command
BUCKET = "demo-config"
ARTIFACT_PREFIX = "artifacts/"      # node_local_files.ARTIFACT_PREFIX (test_containers.py checks they agree)
KEY = f"{ARTIFACT_PREFIX}pyxis/0.24.0-9c4cdb79a673/slurm-23.11.4-1.2ubuntu5/amd64/spank_pyxis.so"
BUILD = b"\x7fELF the head's build of spank_pyxis.so\n"


@pytest.fixture
def s3(moto_endpoint):
    urllib.request.urlopen(urllib.request.Request(f"{moto_endpoint}/moto-api/reset", method="POST")).close()
    client = boto3.client("s3", region_name="us-east-1", endpoint_url=moto_endpoint,
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    client.create_bucket(Bucket=BUCKET)
    return client, moto_endpoint


def publish(tmp_path, data: bytes, key: str, settings: dict, env: dict) -> subprocess.CompletedProcess:
    root = tmp_path / "root"
    (root / "etc" / "aicluster").mkdir(parents=True, exist_ok=True)
    (root / "etc" / "aicluster" / "sync.json").write_text(json.dumps(settings))
    build = tmp_path / "spank_pyxis.so"
    build.write_bytes(data)
    full = {**os.environ, "AICLUSTER_ROOT": str(root), **env}
    full.pop("JOURNAL_STREAM", None)
    return subprocess.run([*module_command("sync"), "--publish-artifact", str(build), key], env=full,
                          capture_output=True, text=True, timeout=120)


def aws(tmp_path, s3, data: bytes = BUILD, key: str = KEY) -> subprocess.CompletedProcess:
    _, endpoint = s3
    return publish(tmp_path, data, key, {"bucket": BUCKET, "prefix": "head/", "region": "us-east-1"},
                   {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                    "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": os.devnull,
                    "AWS_SHARED_CREDENTIALS_FILE": os.devnull})


def body(client, key: str) -> bytes:
    return client.get_object(Bucket=BUCKET, Key=key)["Body"].read()


def test_publishes_the_build_then_its_sha256_beside_it(tmp_path, s3):
    client, _ = s3
    r = aws(tmp_path, s3)
    assert r.returncode == 0, r.stderr
    assert body(client, KEY) == BUILD
    assert body(client, KEY + ".sha256") == f"{hashlib.sha256(BUILD).hexdigest()}  spank_pyxis.so\n".encode()


def test_a_published_build_is_never_rewritten(tmp_path, s3):
    """A replaced head builds again (different bytes, same key): the first build stays, so every
    node, and any node reading it now, gets one build from start to end."""
    client, _ = s3
    assert aws(tmp_path, s3).returncode == 0
    r = aws(tmp_path, s3, data=b"another build\n")
    assert r.returncode == 0, r.stderr
    assert "kept, never rewritten" in r.stderr
    assert body(client, KEY) == BUILD
    assert body(client, KEY + ".sha256").split()[0].decode() == hashlib.sha256(BUILD).hexdigest()


def test_an_object_left_without_its_digest_is_written_again(tmp_path, s3):
    """A build interrupted between its two writes left the object alone: no node reads it (a node
    reads the digest first), and the next try writes both."""
    client, _ = s3
    client.put_object(Bucket=BUCKET, Key=KEY, Body=b"half of an earlier try")
    assert aws(tmp_path, s3).returncode == 0
    assert body(client, KEY) == BUILD and body(client, KEY + ".sha256").startswith(hashlib.sha256(BUILD).hexdigest().encode())


@pytest.mark.parametrize("key", ["head/manifest.json", "compute/aicluster-containers/x", f"{ARTIFACT_PREFIX}../head/x",
                                 f"{KEY}.sha256", f"{ARTIFACT_PREFIX}pyxis//x"])
def test_nothing_outside_the_artifacts_prefix_is_written(tmp_path, s3, key):
    client, _ = s3
    r = aws(tmp_path, s3, key=key)
    assert r.returncode == 1 and "is not an object key under artifacts/" in r.stderr
    assert "Contents" not in client.list_objects_v2(Bucket=BUCKET)


class FakeStorage:
    """Cloud Storage's JSON API, as far as publishing goes: media download (GET .../o/NAME?alt=media)
    and simple media upload (POST /upload/storage/v1/b/B/o?uploadType=media&name=NAME)."""

    def __init__(self):
        self.objects, self.uploads = {}, []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def reply(self, status: int, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                url = urllib.parse.urlsplit(self.path)
                name = urllib.parse.unquote(url.path.split("/o/", 1)[1])
                if name not in fake.objects:
                    return self.reply(404, json.dumps({"error": {"code": 404, "message": "No such object",
                                                                 "errors": [{"reason": "notFound"}]}}).encode())
                self.reply(200, fake.objects[name])

            def do_POST(self):
                url = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(url.query))
                data = self.rfile.read(int(self.headers["Content-Length"]))
                fake.uploads.append((url.path, query, self.headers.get("Authorization"), data))
                fake.objects[query["name"]] = data
                self.reply(200, b"{}")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def env(self) -> dict:
        host, port = self.server.server_address
        return {"AICLUSTER_GCP_STORAGE": f"http://{host}:{port}/storage/v1", "AICLUSTER_GCP_TOKEN": "fake-token"}


@pytest.fixture
def gcs():
    fake = FakeStorage()
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


def test_gcp_publishes_with_simple_media_uploads(tmp_path, gcs):
    settings = {"bucket": BUCKET, "prefix": "head/", "region": "us-central1", "storage": "gcs"}
    # aicluster-sync reads and writes Cloud Storage with aicluster.node.gcp, as on the head.
    r = publish(tmp_path, BUILD, KEY, settings, gcs.env)
    assert r.returncode == 0, r.stderr
    assert [(path, q["uploadType"], q["name"], auth) for path, q, auth, _ in gcs.uploads] == [
        (f"/upload/storage/v1/b/{BUCKET}/o", "media", KEY, "Bearer fake-token"),
        (f"/upload/storage/v1/b/{BUCKET}/o", "media", KEY + ".sha256", "Bearer fake-token")]
    assert gcs.objects[KEY] == BUILD
    assert gcs.objects[KEY + ".sha256"] == f"{hashlib.sha256(BUILD).hexdigest()}  spank_pyxis.so\n".encode()
