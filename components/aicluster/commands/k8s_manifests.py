"""Kubernetes objects of a plan as files: what `aicluster plan --out DIR` writes under k8s/.

A pulumi_kubernetes resource's inputs are the object itself (apiVersion, kind, metadata, spec or
data), so a captured resource is a manifest as it would be applied. Helm releases become a file
with the chart, its pinned version and the values; the example ConfigMap's entries (the training
job per pool and its script) are also written out on their own, ready for `kubectl create -f`.
"""
from __future__ import annotations

from typing import Any

import yaml

from aicluster.offline.capture import CapturedResource, reveal

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
EXAMPLES_DIR = "k8s/examples"


def manifest(resource: CapturedResource) -> dict[str, Any] | None:
    """The Kubernetes object a resource applies, or None for non-object types (providers, Helm)."""
    if not resource.type.startswith("kubernetes:") or resource.type == HELM_RELEASE:
        return None
    obj = reveal(resource.inputs)
    if not isinstance(obj, dict) or "apiVersion" not in obj or "kind" not in obj:
        return None
    order = ["apiVersion", "kind", "metadata"]
    return {k: obj[k] for k in order if k in obj} | {k: v for k, v in sorted(obj.items()) if k not in order}


def _dump(obj: Any) -> str:
    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False)


def kubernetes_files(resource: CapturedResource) -> dict[str, str]:
    """Relative path -> content for one captured resource (empty for anything else)."""
    if resource.type == HELM_RELEASE:
        i = reveal(resource.inputs)
        release = {k: i[k] for k in ("name", "chart", "version", "namespace") if k in i}
        if isinstance(i.get("repositoryOpts"), dict) and i["repositoryOpts"].get("repo"):
            release["repository"] = i["repositoryOpts"]["repo"]
        release["values"] = i.get("values", {})
        return {f"k8s/helm/{i.get('name', resource.name)}.yaml": _dump(release)}
    obj = manifest(resource)
    if obj is None:
        return {}
    meta = obj.get("metadata") or {}
    name = meta.get("name", resource.name)
    where = meta.get("namespace", "cluster")
    files = {f"k8s/{where}/{obj['kind'].lower()}-{name}.yaml": _dump(obj)}
    if obj["kind"] == "ConfigMap":
        # Here, not at the top: every plan (a Slurm one too) reads this module, only a Kubernetes
        # plan needs the Kubernetes design.
        from aicluster.design.kubernetes import EXAMPLES_CONFIGMAP
    if obj["kind"] == "ConfigMap" and name == EXAMPLES_CONFIGMAP and isinstance(obj.get("data"), dict):
        for key, content in obj["data"].items():
            files[f"{EXAMPLES_DIR}/{key}"] = content
    return files
