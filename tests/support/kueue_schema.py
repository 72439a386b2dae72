"""JSON Schemas for the Kueue objects aicluster writes, from the CRDs of the pinned Kueue release.

kubernetes-validate knows only built-in kinds. tests/data/schemas/kueue/<chart version>/ holds the
release's CustomResourceDefinitions verbatim (kubernetes-sigs/kueue config/components/crd/bases at
the release tag; tests/data/schemas/README.md names the commit and checksums), and this module turns the
openAPIV3Schema of the API version the catalog pins (charts.kueue.api_version) into a JSON Schema
that is strict where the API server is: every object whose schema lists its properties and does
not preserve unknown fields gets additionalProperties: false, so a misspelled or misplaced field
fails as the structural schema would prune or the server's strict field validation would reject
it. The CEL rules (x-kubernetes-validations) are not evaluated here; test_kueue.py checks the ones
aicluster's objects depend on (each flavor lists the covered resources in order).
"""
from __future__ import annotations

import copy
import functools
import re
from pathlib import Path

import yaml

from aicluster.design.kubernetes import versions

CRD_ROOT = Path(__file__).parent.parent / "data" / "schemas" / "kueue"

NAME = {"type": "string", "maxLength": 253,
        "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"}


def crd_dir(chart_version: str | None = None) -> Path:
    """The folder of the pinned (or the given) Kueue release's CRDs."""
    return CRD_ROOT / (chart_version or versions().charts["kueue"].version)


def _strict(node: dict) -> dict:
    """The OpenAPI v3 schema of a CRD as a closed JSON Schema (see the module's docstring). Only
    schema keywords are rewritten: a property may itself be called `description` or `default`."""
    out = {}
    for key, value in node.items():
        if key in ("description", "default"):
            continue                                   # annotations, not constraints
        if key == "properties":
            out[key] = {name: _strict(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = _strict(value)
        elif key in ("anyOf", "allOf", "oneOf"):
            out[key] = [_strict(sub) for sub in value]
        else:
            out[key] = value
    if isinstance(node.get("pattern"), str):
        out["pattern"] = _python_regex(node["pattern"])
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if node.get("x-kubernetes-int-or-string") and "anyOf" not in out:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if "properties" in node and "additionalProperties" not in node \
            and not node.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


def served_schemas(crds) -> dict[tuple[str, str], dict]:
    """(apiVersion, kind) -> closed JSON Schema (`_strict`) of every served version of every CRD
    given: apiVersion and kind fixed, metadata with a name, and a namespace exactly when the kind
    is namespaced (a cluster-scoped object carrying one is refused). For the vendored CRDs other
    than Kueue's (GMP, Karpenter)."""
    schemas = {}
    for crd in crds:
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


def _python_regex(pattern: str) -> str:
    """Go's RE2 takes inline flags anywhere (^(?i)[a-z]); Python only at the start."""
    flags = re.match(r"^\^(\(\?[a-z]+\))", pattern)
    return flags.group(1) + "^" + pattern[flags.end():] if flags else pattern


def _served(crd: dict, api_version: str) -> dict:
    group, version = api_version.split("/")
    assert crd["spec"]["group"] == group, crd["metadata"]["name"]
    for entry in crd["spec"]["versions"]:
        if entry["name"] == version:
            assert entry["served"], f"{crd['metadata']['name']} does not serve {version}"
            return entry
    raise AssertionError(f"{crd['metadata']['name']} has no version {version}")


@functools.lru_cache(maxsize=4)
def crd_schemas(chart_version: str | None = None, api_version: str | None = None) -> dict[str, dict]:
    """Kind -> closed JSON Schema of every stored CRD, at the catalog's Kueue API version."""
    api_version = api_version or versions().charts["kueue"].api_version
    schemas = {}
    for path in sorted(crd_dir(chart_version).glob("*.yaml")):
        crd = yaml.safe_load(path.read_text(encoding="utf-8"))
        entry = _served(crd, api_version)
        schema = _strict(copy.deepcopy(entry["schema"]["openAPIV3Schema"]))
        schema["properties"]["apiVersion"] = {"const": api_version}
        schema["properties"]["kind"] = {"const": crd["spec"]["names"]["kind"]}
        namespaced = crd["spec"]["scope"] == "Namespaced"
        schema["properties"]["metadata"] = {"type": "object", "required": ["name", *(["namespace"] if namespaced else [])]}
        schema["required"] = sorted({"apiVersion", "kind", "metadata", *schema.get("required", [])})
        schema["additionalProperties"] = False
        schemas[crd["spec"]["names"]["kind"]] = schema
    return schemas


def deprecated(kind: str, chart_version: str | None = None, api_version: str | None = None) -> bool:
    """Whether the stored release marks `kind` deprecated at the API version."""
    api_version = api_version or versions().charts["kueue"].api_version
    for path in crd_dir(chart_version).glob("*.yaml"):
        crd = yaml.safe_load(path.read_text(encoding="utf-8"))
        if crd["spec"]["names"]["kind"] == kind:
            return bool(_served(crd, api_version).get("deprecated"))
    raise KeyError(kind)


SCHEMAS = crd_schemas()
