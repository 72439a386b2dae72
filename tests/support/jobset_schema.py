"""The JSON Schema of the JobSet objects aicluster writes, from the CRD of the pinned JobSet release.

kubernetes-validate knows only built-in kinds. tests/data/schemas/jobset/<chart version>/ holds the
release's CustomResourceDefinition verbatim (kubernetes-sigs/jobset config/components/crd/bases at
the release tag, the same file as the chart's crds/; tests/data/schemas/README.md names the commit
and the checksum). Its openAPIV3Schema at the API version the catalog pins (charts.jobset.api_version)
becomes a closed JSON Schema the way kueue_schema.py does it for Kueue: every object that lists its
properties and does not preserve unknown fields rejects any other, as the API server's structural
schema and strict field validation would. The whole Pod template is in the CRD, so a misplaced field
anywhere in a worker fails here. CEL rules (x-kubernetes-validations) are not evaluated: the tests
check the ones aicluster's JobSets depend on (rule names, immutable failure policy) by hand.
"""
from __future__ import annotations

import copy
import functools
import re
from pathlib import Path

import yaml

from aicluster.design.kubernetes import versions
from tests.support.kueue_schema import _served, _strict

CRD_ROOT = Path(__file__).parent.parent / "data" / "schemas" / "jobset"
# FailurePolicyRule.name (api/jobset/v1alpha2/jobset_types.go: "must match the regular expression").
RULE_NAME = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")


def crd_file(chart_version: str | None = None) -> Path:
    """The stored CRD of the pinned (or the given) JobSet release."""
    return CRD_ROOT / (chart_version or versions().charts["jobset"].version) / "jobset.x-k8s.io_jobsets.yaml"


@functools.lru_cache(maxsize=2)
def jobset_schema(chart_version: str | None = None, api_version: str | None = None) -> dict:
    """The closed JSON Schema of a JobSet at the catalog's JobSet API version."""
    api_version = api_version or versions().charts["jobset"].api_version
    crd = yaml.load(crd_file(chart_version).read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    schema = _strict(copy.deepcopy(_served(crd, api_version)["schema"]["openAPIV3Schema"]))
    schema["properties"]["apiVersion"] = {"const": api_version}
    schema["properties"]["kind"] = {"const": crd["spec"]["names"]["kind"]}
    schema["properties"]["metadata"] = {"type": "object", "required": ["name", "namespace"]}
    schema["required"] = sorted({"apiVersion", "kind", "metadata", "spec", *schema.get("required", [])})
    schema["additionalProperties"] = False
    return schema


def rule_name_problems(jobset: dict) -> list[str]:
    """Failure policy rule names the API server refuses (the pattern JobSet documents; not in the schema)."""
    rules = ((jobset.get("spec") or {}).get("failurePolicy") or {}).get("rules") or []
    return [str(r.get("name")) for r in rules if not RULE_NAME.fullmatch(str(r.get("name", "")))]
