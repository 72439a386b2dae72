#!/usr/bin/env python3
"""aicluster-fetch LIST: install a node's programs from the cluster's private configuration
bucket, each checked against the SHA-256 its user data pins (EC2 takes at most 16 KB of user data).

LIST: {"bucket", "region", "files": [{"key", "path", "mode"}]}. Keys are content-addressed
(.../<SHA-256>), never rewritten: the key's last part is the pin (an entry's own "sha256" wins). A missing or denied object (IAM propagates in seconds) is retried for minutes; a
checksum mismatch is not: nothing is installed, exit 1. Tests: AICLUSTER_ROOT prefixes the paths,
AICLUSTER_FETCH_RETRY_S sets the wait, AWS_ENDPOINT_URL points boto3 at another S3.
"""
import hashlib
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.environ.get("AICLUSTER_ROOT", "")
TRIES = 10
RETRY_S = float(os.environ.get("AICLUSTER_FETCH_RETRY_S", "20"))


def log(message: str) -> None:
    print(f"aicluster-fetch: {message}", file=sys.stderr, flush=True)


def s3_client(region: str):
    try:
        import boto3
    except ImportError:
        log("installing python3-boto3")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-q"], check=True, env=env)
        subprocess.run(["apt-get", "install", "-y", "-q", "python3-boto3"], check=True, env=env)
        importlib.invalidate_caches()
        import boto3
    return boto3.client("s3", region_name=region)


def read(s3, bucket: str, key: str) -> bytes:
    for attempt in range(1, TRIES + 1):
        try:
            return s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        except Exception as exc:  # noqa: BLE001 - NoSuchKey, AccessDenied, throttling: all retried
            if attempt == TRIES:
                raise
            log(f"s3://{bucket}/{key}: {type(exc).__name__}: {exc}; try {attempt + 1}/{TRIES} in {RETRY_S:g} s")
            time.sleep(RETRY_S)
    raise AssertionError("unreachable")


def install(path: str, data: bytes, mode: int) -> None:
    target = ROOT + path
    os.makedirs(os.path.dirname(target), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), prefix=".aicluster-fetch-")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(tmp, mode)
    os.replace(tmp, target)


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    with open(args[0], encoding="utf-8") as fh:
        listing = json.load(fh)
    s3 = s3_client(listing["region"])
    fetched = []
    for entry in listing["files"]:
        data = read(s3, listing["bucket"], entry["key"])
        digest, want = hashlib.sha256(data).hexdigest(), entry.get("sha256") or entry["key"].rsplit("/", 1)[-1]
        if digest != want:
            log(f"s3://{listing['bucket']}/{entry['key']}: SHA-256 {digest}, not {want}: nothing installed")
            return 1
        fetched.append((entry, data))
    for entry, data in fetched:
        install(entry["path"], data, int(entry.get("mode", "0755"), 8))
        log(f"installed {entry['path']} ({len(data)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
