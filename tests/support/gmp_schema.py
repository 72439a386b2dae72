"""JSON Schemas for the Google Cloud Managed Service for Prometheus objects aicluster writes on GKE
(PodMonitoring), from the CRDs of a pinned prometheus-engine release.

tests/data/schemas/gmp/<version>/ holds the release's CustomResourceDefinitions verbatim
(GoogleCloudPlatform/prometheus-engine charts/operator/crds at the release tag; tests/data/schemas/
README.md names the commit and checksums). GKE runs the operator itself and picks its version, so
the pin is the newest release, not something aicluster installs. They are made strict exactly as
the Kueue ones (kueue_schema._strict): an unknown or misplaced field fails.
"""
from __future__ import annotations

import functools
from pathlib import Path

import yaml

from tests.support.kueue_schema import served_schemas

VERSION = "0.17.2"
CRD_DIR = Path(__file__).parent.parent / "data" / "schemas" / "gmp" / VERSION


@functools.lru_cache(maxsize=1)
def crd_schemas() -> dict[tuple[str, str], dict]:
    """(apiVersion, kind) -> closed JSON Schema of every served version of every stored CRD."""
    return served_schemas(yaml.safe_load(p.read_text(encoding="utf-8")) for p in sorted(CRD_DIR.glob("*.yaml")))


SCHEMAS = crd_schemas()
