"""JSON Schemas for the custom resources aicluster writes on GKE, as kueue_schema.py does for Kueue.

kubernetes-validate knows only built-in kinds. These are the subsets of the CRDs that cover every
field aicluster sets, closed with additionalProperties: false so a misspelled or misplaced field
fails as the API server's structural schema would prune or reject it:

- GKENetworkParamSet and Network (networking.gke.io/v1): GoogleCloudPlatform/gke-networking-api
  apis/network/v1 (GKENetworkParamSetSpec: vpc, vpcSubnet, deviceMode enum DPDK-VFIO | NetDevice |
  RDMA, podIPv4Ranges, networkAttachment; NetworkSpec: type enum L2 | L3 | Device, provider,
  parametersRef {group, kind, name, namespace}, routes, ...).

JobSets validate against the pinned JobSet release's own CRD (jobset_schema.py).
"""
from __future__ import annotations

from tests.support.kueue_schema import NAME

OBJECT_META = {"type": "object", "required": ["name"]}


def _kind(api_version: str, kind: str, spec: dict, namespaced: bool) -> dict:
    return {"type": "object", "additionalProperties": False, "required": ["apiVersion", "kind", "metadata", "spec"],
            "properties": {"apiVersion": {"const": api_version}, "kind": {"const": kind},
                           "metadata": {"type": "object", "required": ["name", *(["namespace"] if namespaced else [])]},
                           "spec": spec}}


GKE_NETWORK_PARAM_SET = _kind("networking.gke.io/v1", "GKENetworkParamSet", {
    "type": "object", "additionalProperties": False, "properties": {
        "vpc": {"type": "string", "minLength": 1},
        "vpcSubnet": {"type": "string", "minLength": 1},
        "deviceMode": {"enum": ["DPDK-VFIO", "NetDevice", "RDMA"]},
        "podIPv4Ranges": {"type": "object", "additionalProperties": False, "required": ["rangeNames"],
                          "properties": {"rangeNames": {"type": "array", "minItems": 1, "items": {"type": "string"}}}},
        "networkAttachment": {"type": "string"}}}, namespaced=False)

NETWORK = _kind("networking.gke.io/v1", "Network", {
    "type": "object", "additionalProperties": False, "required": ["type"], "properties": {
        "type": {"enum": ["L2", "L3", "Device"]},
        "provider": {"enum": ["GKE"]},
        "parametersRef": {"type": "object", "additionalProperties": False, "required": ["group", "kind", "name"],
                          "properties": {"group": {"type": "string"}, "kind": {"type": "string"},
                                         "name": NAME, "namespace": {"type": "string"}}},
        "routes": {"type": "array", "items": {"type": "object", "required": ["to"]}},
        "gateway4": {"type": "string"}, "externalDHCP4": {"type": "boolean"}}}, namespaced=False)

SCHEMAS = {("networking.gke.io/v1", "GKENetworkParamSet"): GKE_NETWORK_PARAM_SET,
           ("networking.gke.io/v1", "Network"): NETWORK}
