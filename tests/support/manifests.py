"""Validation of rendered Kubernetes manifests against the pinned version's schemas and the CRD
schemas (tests/support/kueue_schema.py, jobset_schema.py, karpenter_schema.py, gmp_schema.py and dra_schema.py: the pinned releases' CRDs; gke_schema.py:
subsets of GKE's networking CRDs)."""
from __future__ import annotations

import jsonschema
import kubernetes_validate
import yaml

from aicluster.design.kubernetes import versions
from tests.support.dra_schema import SCHEMAS as DRA_SCHEMAS
from tests.support.gke_schema import SCHEMAS as GKE_SCHEMAS
from tests.support.gmp_schema import SCHEMAS as GMP_SCHEMAS
from tests.support.jobset_schema import jobset_schema
from tests.support.karpenter_schema import SCHEMAS as KARPENTER_SCHEMAS
from tests.support.kueue_schema import SCHEMAS

SCHEMA = versions().schema_version
# One checked validator per CRD schema: jsonschema.validate() re-checks the schema itself on every
# call, which was most of the GKE fuzzer's time (19 of 34 s for 10 plans).
# Keyed by identity; the schema is kept alongside so that its id cannot be reused by another object.
_VALIDATORS: dict[int, tuple[dict, jsonschema.protocols.Validator]] = {}


def _crd_validator(crd: dict) -> jsonschema.protocols.Validator:
    cached = _VALIDATORS.get(id(crd))
    if cached is None:
        cls = jsonschema.validators.validator_for(crd)
        cls.check_schema(crd)
        cached = _VALIDATORS[id(crd)] = (crd, cls(crd))
    return cached[1]


def validate(doc: dict) -> None:
    """Raise when `doc` is not a valid object of the pinned Kubernetes version."""
    if doc["apiVersion"].startswith("kueue.x-k8s.io/"):
        crd = SCHEMAS.get(doc["kind"])
    elif doc["apiVersion"].startswith("jobset.x-k8s.io/"):
        crd = jobset_schema()
    else:
        key = (doc["apiVersion"], doc["kind"])
        crd = (GKE_SCHEMAS.get(key) or KARPENTER_SCHEMAS.get(key) or GMP_SCHEMAS.get(key)
               or DRA_SCHEMAS.get(key))
    if crd is not None:
        error = jsonschema.exceptions.best_match(_crd_validator(crd).iter_errors(doc))
        if error is not None:
            raise error
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


def example_jobset(docs: list[dict]) -> dict:
    """The JobSet of an example job file (the GPU example also holds its PodDisruptionBudget)."""
    return next(d for d in docs if d["kind"] == "JobSet")


def worker_job(jobset: dict) -> dict:
    """The Job template (spec) of the example JobSet's one replicated job: the gang of workers."""
    (replicated,) = jobset["spec"]["replicatedJobs"]
    return replicated["template"]["spec"]


def worker_pod(jobset: dict) -> dict:
    """The worker pod template ({metadata, spec}) of the example JobSet."""
    return worker_job(jobset)["template"]
