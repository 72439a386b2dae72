"""A rendered built-in Kubernetes object (a manifest dict) as its typed pulumi_kubernetes resource:
the one dispatch the in-cluster components share (the health agent, the metrics exporters).
Custom resources go through k8s_resources.KubernetesObject instead."""
from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s


def builtin_resource(name: str, doc: dict, opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """The typed resource of `doc` (kind, metadata and its kind's fields); ValueError for a kind
    this does not know."""
    meta, kind = doc["metadata"], doc["kind"]
    if kind == "Namespace":
        return k8s.core.v1.Namespace(name, metadata=meta, opts=opts)
    if kind == "ConfigMap":
        return k8s.core.v1.ConfigMap(name, metadata=meta, data=doc["data"], opts=opts)
    if kind == "Secret":
        return k8s.core.v1.Secret(name, metadata=meta, type=doc["type"], opts=opts)
    if kind == "ServiceAccount":
        return k8s.core.v1.ServiceAccount(name, metadata=meta, opts=opts)
    if kind == "ClusterRole":
        return k8s.rbac.v1.ClusterRole(name, metadata=meta, rules=doc["rules"], opts=opts)
    if kind == "ClusterRoleBinding":
        return k8s.rbac.v1.ClusterRoleBinding(name, metadata=meta, role_ref=doc["roleRef"], subjects=doc["subjects"],
                                              opts=opts)
    if kind == "Role":
        return k8s.rbac.v1.Role(name, metadata=meta, rules=doc["rules"], opts=opts)
    if kind == "RoleBinding":
        return k8s.rbac.v1.RoleBinding(name, metadata=meta, role_ref=doc["roleRef"], subjects=doc["subjects"], opts=opts)
    if kind == "ValidatingAdmissionPolicy":
        return k8s.admissionregistration.v1.ValidatingAdmissionPolicy(name, metadata=meta, spec=doc["spec"], opts=opts)
    if kind == "ValidatingAdmissionPolicyBinding":
        return k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(name, metadata=meta, spec=doc["spec"],
                                                                             opts=opts)
    if kind == "DaemonSet":
        return k8s.apps.v1.DaemonSet(name, metadata=meta, spec=doc["spec"], opts=opts)
    if kind == "Deployment":
        return k8s.apps.v1.Deployment(name, metadata=meta, spec=doc["spec"], opts=opts)
    raise ValueError(f"no resource for {kind}")
