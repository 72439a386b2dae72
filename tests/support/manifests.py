"""Validation of rendered Kubernetes manifests against the pinned version's schemas and the CRD
subsets (tests/support/kueue_schema.py, gke_schema.py)."""
from __future__ import annotations

import jsonschema
import kubernetes_validate
import yaml

from aicluster.kubernetes_design import versions
from tests.support.gke_schema import SCHEMAS as GKE_SCHEMAS
from tests.support.kueue_schema import SCHEMAS

SCHEMA = versions().schema_version


def validate(doc: dict) -> None:
    """Raise when `doc` is not a valid object of the pinned Kubernetes version."""
    crd = SCHEMAS.get(doc["kind"]) if doc["apiVersion"].startswith("kueue.x-k8s.io/") else \
        GKE_SCHEMAS.get((doc["apiVersion"], doc["kind"]))
    if crd is not None:
        jsonschema.validate(doc, crd)
        # A CRD object's metadata is a Kubernetes ObjectMeta: check it through a kind that has one.
        kubernetes_validate.validate({"apiVersion": "v1", "kind": "ConfigMap", "metadata": doc["metadata"]},
                                     SCHEMA, strict=True)
        if doc["kind"] == "JobSet":   # each replicated job is a batch/v1 JobTemplateSpec
            for job in doc["spec"]["replicatedJobs"]:
                kubernetes_validate.validate({"apiVersion": "batch/v1", "kind": "Job",
                                              "metadata": {"name": job["name"], **job["template"].get("metadata", {})},
                                              "spec": job["template"]["spec"]}, SCHEMA, strict=True)
        return
    kubernetes_validate.validate(doc, SCHEMA, strict=True)


def rendered_manifests(files: dict[str, str]) -> dict[str, list[dict]]:
    return {name: [d for d in yaml.safe_load_all(text) if d]
            for name, text in files.items() if name.startswith("k8s/") and name.endswith(".yaml")
            and not name.startswith("k8s/helm/")}
