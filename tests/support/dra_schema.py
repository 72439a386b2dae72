"""JSON Schema of the ComputeDomain objects aicluster writes, from the CRD of the pinned NVIDIA DRA
driver release.

tests/data/schemas/dra-driver-gpu/<chart version>/ holds the release's ComputeDomain
CustomResourceDefinition verbatim (NVIDIA/k8s-dra-driver-gpu deployments/helm/nvidia-dra-driver-gpu/
crds at the release tag; tests/data/schemas/README.md names the commit and the checksum). It is made
strict as the Kueue ones are (kueue_schema._strict): an unknown or misplaced field fails, as the API
server's strict field validation would. The one CEL rule (the spec is immutable) concerns updates,
which a schema check cannot see.
"""
from __future__ import annotations

import functools
from pathlib import Path

import yaml

from aicluster.design.kubernetes import versions
from tests.support.kueue_schema import served_schemas

CRD_ROOT = Path(__file__).parent.parent / "data" / "schemas" / "dra-driver-gpu"


def crd_dir(chart_version: str | None = None) -> Path:
    return CRD_ROOT / (chart_version or versions().charts["nvidia-dra-driver-gpu"].version)


@functools.lru_cache(maxsize=2)
def crd_schemas(chart_version: str | None = None) -> dict[tuple[str, str], dict]:
    """(apiVersion, kind) -> closed JSON Schema of every served version of the stored CRDs."""
    return served_schemas([yaml.safe_load(p.read_text(encoding="utf-8"))
                           for p in sorted(crd_dir(chart_version).glob("*.yaml"))])


SCHEMAS = crd_schemas()
