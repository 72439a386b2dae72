#!/usr/bin/python3
"""Load each Managed Lustre filesystem's `import_path` (gs://bucket/prefix/) once, through the
Managed Lustre API's importData (what `gcloud lustre instances import-data` calls).

Managed Lustre has no linked bucket like an FSx data repository association: data comes in with an
import job. The head node's aicluster-sync runs this whenever the published import list changes;
imports that were started once are recorded and never started again, and a retried request carries
the same request id, so the API starts each job at most once. It does not wait for the copy: the
job's operation name is logged, and `gcloud lustre operations describe` follows it.

    aicluster-gcp-lustre-import [--settings /etc/aicluster/lustre-imports.json]
                                [--state /var/lib/aicluster/lustre-imports.json]

The Lustre service agent (service-<project number>@gcp-sa-lustre.iam.gserviceaccount.com) must be
able to read the bucket. For tests: AICLUSTER_ROOT prefixes the two paths.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import uuid

from aicluster.node.gcp import LUSTRE, ApiError, call, endpoint

ROOT = os.environ.get("AICLUSTER_ROOT", "")


def log(message: str) -> None:
    print(f"aicluster-gcp-lustre-import: {message}", file=sys.stderr, flush=True)


def request_id(entry: dict) -> str:
    """The same import always carries the same request id."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{entry['instance']}|{entry['uri']}|{entry.get('path', '/')}"))


def import_request(entry: dict) -> dict:
    uri = entry["uri"] if entry["uri"].endswith("/") or entry["uri"].count("/") <= 2 else entry["uri"] + "/"
    return {"gcsPath": {"uri": uri}, "lustrePath": {"path": entry.get("path", "/")}, "requestId": request_id(entry)}


def run(settings_path: str, state_path: str) -> int:
    with open(ROOT + settings_path, encoding="utf-8") as fh:
        imports = json.load(fh).get("imports", [])
    try:
        with open(ROOT + state_path, encoding="utf-8") as fh:
            done = set(json.load(fh))
    except FileNotFoundError:
        done = set()
    failures = 0
    for entry in imports:
        key = request_id(entry)
        if key in done:
            log(f"{entry['uri']} -> {entry['instance']} was started before; skipped")
            continue
        try:
            operation = call("POST", f"{endpoint('LUSTRE', LUSTRE)}/{entry['instance']}:importData",
                             import_request(entry))
        except ApiError as err:
            log(f"import of {entry['uri']} into {entry['instance']} failed: {err.code}: {err.message}")
            failures += 1
            continue
        log(f"importing {entry['uri']} into {entry['instance']}: operation {operation.get('name')}")
        done.add(key)
        os.makedirs(os.path.dirname(ROOT + state_path), exist_ok=True)
        with open(ROOT + state_path, "w", encoding="utf-8") as fh:
            json.dump(sorted(done), fh)
    if failures:
        # Not a failed sync: the Slurm configuration must still be applied. The failed imports are
        # not recorded, so running this program again (by hand) retries exactly those.
        log(f"{failures} import(s) did not start; run {sys.argv[0]} again once the cause is fixed")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="aicluster-gcp-lustre-import")
    parser.add_argument("--settings", default="/etc/aicluster/lustre-imports.json")
    parser.add_argument("--state", default="/var/lib/aicluster/lustre-imports.json")
    args = parser.parse_args(argv)
    run(args.settings, args.state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
