"""JSON Schemas for the Google Cloud Managed Service for Prometheus objects aicluster writes on GKE
(PodMonitoring, ClusterRules), from the CRDs of a pinned prometheus-engine release.

tests/data/schemas/gmp/<version>/ holds the release's CustomResourceDefinitions verbatim
(GoogleCloudPlatform/prometheus-engine charts/operator/crds at the release tag; tests/data/schemas/
README.md names the commit and checksums). GKE runs the operator itself and picks its version, so
the pin is the newest release, not something aicluster installs. They are made strict exactly as
the Kueue ones (kueue_schema._strict): an unknown or misplaced field fails.
"""
from __future__ import annotations

import copy
import functools
from pathlib import Path

import yaml

from tests.support.kueue_schema import _strict

VERSION = "0.17.2"
CRD_DIR = Path(__file__).parent.parent / "data" / "schemas" / "gmp" / VERSION


@functools.lru_cache(maxsize=1)
def crd_schemas() -> dict[tuple[str, str], dict]:
    """(apiVersion, kind) -> closed JSON Schema of the served v1 of every stored CRD."""
    schemas = {}
    for path in sorted(CRD_DIR.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text(encoding="utf-8"))
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for entry in crd["spec"]["versions"]:
            if not entry.get("served"):
                continue
            api = f"{group}/{entry['name']}"
            schema = _strict(copy.deepcopy(entry["schema"]["openAPIV3Schema"]))
            schema["properties"]["apiVersion"] = {"const": api}
            schema["properties"]["kind"] = {"const": kind}
            namespaced = crd["spec"]["scope"] == "Namespaced"
            schema["properties"]["metadata"] = {"type": "object",
                                                "required": ["name", *(["namespace"] if namespaced else [])]}
            if not namespaced:
                schema["properties"]["metadata"]["not"] = {"required": ["namespace"]}
            schema["required"] = sorted({"apiVersion", "kind", "metadata", *schema.get("required", [])})
            schema["additionalProperties"] = False
            schemas[(api, kind)] = schema
    return schemas


SCHEMAS = crd_schemas()
