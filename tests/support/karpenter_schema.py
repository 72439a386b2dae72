"""JSON Schemas for the Karpenter objects aicluster writes, from the CRDs of the pinned release.

tests/data/schemas/karpenter/<chart version>/ holds the release's CustomResourceDefinitions verbatim
(aws/karpenter-provider-aws pkg/apis/crds at the release tag; tests/data/schemas/README.md names the
commit and checksums). They are made strict exactly as the Kueue ones (kueue_schema._strict): an
unknown or misplaced field fails, as the API server's strict field validation would. The CEL rules
(x-kubernetes-validations) are not evaluated by jsonschema; `cel_rules` lists them so the tests
can check, in Python, the ones aicluster's objects depend on.
"""
from __future__ import annotations

import functools
from pathlib import Path

import yaml

from aicluster.design.kubernetes import versions
from tests.support.kueue_schema import served_schemas

CRD_ROOT = Path(__file__).parent.parent / "data" / "schemas" / "karpenter"


def crd_dir(chart_version: str | None = None) -> Path:
    return CRD_ROOT / (chart_version or versions().charts["karpenter"].version)


def _crds(chart_version: str | None = None) -> list[dict]:
    return [yaml.safe_load(p.read_text(encoding="utf-8")) for p in sorted(crd_dir(chart_version).glob("*.yaml"))]


@functools.lru_cache(maxsize=4)
def crd_schemas(chart_version: str | None = None) -> dict[tuple[str, str], dict]:
    """(apiVersion, kind) -> closed JSON Schema of every served version of every stored CRD."""
    return served_schemas(_crds(chart_version))


def cel_rules(api_version: str, kind: str, chart_version: str | None = None) -> list[str]:
    """Every x-kubernetes-validations rule of the kind's schema at that version (for the tests to
    see that a rule they evaluate by hand is still the release's)."""
    group, version = api_version.split("/")
    rules: list[str] = []

    def walk(node):
        if isinstance(node, dict):
            rules.extend(v["rule"] for v in node.get("x-kubernetes-validations", []))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for crd in _crds(chart_version):
        if crd["spec"]["group"] == group and crd["spec"]["names"]["kind"] == kind:
            for entry in crd["spec"]["versions"]:
                if entry["name"] == version:
                    walk(entry["schema"]["openAPIV3Schema"])
    return rules


SCHEMAS = crd_schemas()
