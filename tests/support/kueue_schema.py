"""JSON Schemas for the Kueue objects aicluster writes (kueue.x-k8s.io/v1beta1, Kueue 0.14).

kubernetes-validate knows only built-in kinds; these are the subset of Kueue's CRD schemas
(charts/kueue/templates/crd/kueue.x-k8s.io_{resourceflavors,clusterqueues,localqueues}.yaml in
kubernetes-sigs/kueue) that covers the fields aicluster sets, closed with additionalProperties:
false so a misspelled or misplaced field fails the way the API server's structural schema would
prune or reject it. The CRD's CEL rule that each flavor lists the covered resources in order is
checked in test_kueue.py.
"""
from __future__ import annotations

# The Kubernetes quantity format (apimachinery resource.Quantity, as the CRDs spell it).
QUANTITY = {"anyOf": [{"type": "integer"}, {
    "type": "string",
    "pattern": r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$",
}]}
NAME = {"type": "string", "maxLength": 253,
        "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"}
TOLERATION = {"type": "object", "additionalProperties": False, "properties": {
    "key": {"type": "string"}, "operator": {"enum": ["Equal", "Exists"]}, "value": {"type": "string"},
    "effect": {"enum": ["NoSchedule", "PreferNoSchedule", "NoExecute"]}, "tolerationSeconds": {"type": "integer"}}}
LABEL_SELECTOR = {"type": "object", "additionalProperties": False, "properties": {
    "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
    "matchExpressions": {"type": "array", "items": {"type": "object", "required": ["key", "operator"]}}}}


def _kind(kind: str, spec: dict, namespaced: bool) -> dict:
    return {"type": "object", "additionalProperties": False, "required": ["apiVersion", "kind", "metadata", "spec"],
            "properties": {"apiVersion": {"const": "kueue.x-k8s.io/v1beta1"}, "kind": {"const": kind},
                           "metadata": {"type": "object", "required": ["name", *(["namespace"] if namespaced else [])]},
                           "spec": spec}}


RESOURCE_FLAVOR = _kind("ResourceFlavor", {"type": "object", "additionalProperties": False, "properties": {
    "nodeLabels": {"type": "object", "maxProperties": 8, "additionalProperties": {"type": "string"}},
    "nodeTaints": {"type": "array", "maxItems": 8},
    "tolerations": {"type": "array", "maxItems": 8, "items": TOLERATION},
    "topologyName": {"type": "string"}}}, namespaced=False)

CLUSTER_QUEUE = _kind("ClusterQueue", {"type": "object", "additionalProperties": False, "properties": {
    "cohort": {"type": "string"},
    "namespaceSelector": LABEL_SELECTOR,
    "queueingStrategy": {"enum": ["StrictFIFO", "BestEffortFIFO"]},
    "stopPolicy": {"enum": ["None", "Hold", "HoldAndDrain"]},
    "resourceGroups": {"type": "array", "maxItems": 16, "items": {
        "type": "object", "additionalProperties": False, "required": ["coveredResources", "flavors"], "properties": {
            "coveredResources": {"type": "array", "minItems": 1, "maxItems": 16, "items": {"type": "string"}},
            "flavors": {"type": "array", "minItems": 1, "maxItems": 16, "items": {
                "type": "object", "additionalProperties": False, "required": ["name", "resources"], "properties": {
                    "name": NAME,
                    "resources": {"type": "array", "minItems": 1, "maxItems": 16, "items": {
                        "type": "object", "additionalProperties": False, "required": ["name", "nominalQuota"],
                        "properties": {"name": {"type": "string"}, "nominalQuota": QUANTITY,
                                       "borrowingLimit": QUANTITY, "lendingLimit": QUANTITY}}}}}}}}}}},
    namespaced=False)

LOCAL_QUEUE = _kind("LocalQueue", {"type": "object", "additionalProperties": False, "required": ["clusterQueue"],
                                   "properties": {"clusterQueue": NAME,
                                                  "stopPolicy": {"enum": ["None", "Hold", "HoldAndDrain"]}}},
                    namespaced=True)

SCHEMAS = {"ResourceFlavor": RESOURCE_FLAVOR, "ClusterQueue": CLUSTER_QUEUE, "LocalQueue": LOCAL_QUEUE}
