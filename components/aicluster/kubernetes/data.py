"""The pods' identities and datasets inside the cluster, the same way on EKS and GKE: one
Kubernetes ServiceAccount per `kubernetes.service_accounts` entry (on GKE annotated with its Google
service account), and per `kubernetes.datasets` entry a static, read-only PersistentVolume of the
cloud's object-store CSI driver bound one-to-one (claimRef) to its claim.

The manifests come from pure functions (service_account_manifest, dataset_manifests) that the plan
and the schema tests use as they are; the cloud modules add only the identities' cloud halves
(aws/pod_identity.py, gcp/workload_identity.py).
"""
from __future__ import annotations

from typing import Mapping

import pulumi
import pulumi_kubernetes as k8s

from aicluster.design.model import ClusterDesign
from aicluster.design.pod_identity import (CSI_DRIVERS, GCSFUSE_POD_ANNOTATION, GCSFUSE_STORAGE_LIMIT_ANNOTATION,
                                  GSA_ANNOTATION, Dataset, PodIdentity)

# A static object-store volume's capacity is required by Kubernetes and ignored by both drivers
# (Mountpoint CSI docs/CONFIGURATION.md; GKE Cloud Storage FUSE static provisioning).
NOMINAL_CAPACITY = "1Ti"
MIB_PER_GIB = 1024


def service_account_manifest(design: ClusterDesign, identity: PodIdentity, gsa_email: str | None = None) -> dict:
    meta = {"name": identity.name, "namespace": identity.namespace,
            "labels": {"aicluster-cluster": design.name, "aicluster-identity": "pod"}}
    if gsa_email is not None:
        meta["annotations"] = {GSA_ANNOTATION: gsa_email}
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta}


def dataset_volume_name(design: ClusterDesign, ds: Dataset) -> str:
    return f"{design.name}-{ds.name}"


def mount_options(ds: Dataset, region: str) -> list[str]:
    """Mountpoint: the region and the prefix (read-only comes from ReadOnlyMany). GCS FUSE: implicit
    directories, the prefix as the root (only-dir), and the file cache when asked for."""
    if ds.driver == CSI_DRIVERS["aws"]:
        return [f"region {region}"] + ([f"prefix {ds.prefix}/"] if ds.prefix else [])
    options = ["implicit-dirs"] + ([f"only-dir={ds.prefix}"] if ds.prefix else [])
    if ds.cache_gib:
        options += [f"file-cache:max-size-mb:{ds.cache_gib * MIB_PER_GIB}", "file-cache:cache-file-for-range-read:true"]
    return options


def volume_attributes(ds: Dataset, region: str) -> dict[str, str]:
    """Mountpoint v2: authenticate as the pod (its Pod Identity; the driver has no S3 permission),
    STS in the cluster's region (no IMDS lookup: nodes keep hop limit 1), the emptyDir cache on the
    node's ephemeral storage (the RAID0 instance store). GCS FUSE authenticates as the pod always."""
    if ds.driver == CSI_DRIVERS["aws"]:
        attrs = {"bucketName": ds.bucket, "authenticationSource": "pod", "stsRegion": region}
        if ds.cache_gib:
            attrs |= {"cache": "emptyDir", "cacheEmptyDirSizeLimit": f"{ds.cache_gib}Gi"}
        return attrs
    return {}


def dataset_manifests(design: ClusterDesign, ds: Dataset, region: str) -> tuple[dict, dict]:
    """(PersistentVolume, PersistentVolumeClaim): static, ReadOnlyMany, Retain (deleting either never
    touches the bucket), no storage class, the volume reserved for its one claim."""
    labels = {"aicluster-cluster": design.name, "aicluster-dataset": ds.name}
    volume = dataset_volume_name(design, ds)
    csi: dict = {"driver": ds.driver,
                 # GCS FUSE takes the bucket as the handle; Mountpoint needs a handle unique per volume.
                 "volumeHandle": volume if ds.driver == CSI_DRIVERS["aws"] else ds.bucket,
                 "readOnly": True}
    attrs = volume_attributes(ds, region)
    if attrs:
        csi["volumeAttributes"] = attrs
    pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume, "labels": labels},
          "spec": {"capacity": {"storage": NOMINAL_CAPACITY}, "volumeMode": "Filesystem",
                   "accessModes": ["ReadOnlyMany"], "persistentVolumeReclaimPolicy": "Retain",
                   "storageClassName": "", "mountOptions": mount_options(ds, region),
                   "claimRef": {"namespace": ds.namespace, "name": ds.name}, "csi": csi}}
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
           "metadata": {"name": ds.name, "namespace": ds.namespace, "labels": labels},
           "spec": {"accessModes": ["ReadOnlyMany"], "storageClassName": "", "volumeName": volume,
                    "resources": {"requests": {"storage": NOMINAL_CAPACITY}}}}
    return pv, pvc


def pod_identities_and_datasets(name: str, design: ClusterDesign, namespaces: Mapping[str, pulumi.Resource],
                                gsa_emails: Mapping[str, pulumi.Input[str]], opts: pulumi.ResourceOptions) -> None:
    """The ServiceAccounts and dataset volumes, each after its namespace (`namespaces`: the training
    namespace and the teams', by name). `gsa_emails`: PodIdentity.key -> Google service account
    email (GKE; empty on EKS, where the Pod Identity association needs no annotation)."""
    kd = design.kubernetes

    def after(namespace: str) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[namespaces[namespace]]))

    for ident in kd.identities:
        email = gsa_emails.get(ident.key)
        meta = pulumi.Output.from_input(email).apply(
            lambda e, i=ident: service_account_manifest(design, i, e)["metadata"]) if email is not None else \
            service_account_manifest(design, ident)["metadata"]
        k8s.core.v1.ServiceAccount(f"{name}-sa-{ident.key}", metadata=meta, opts=after(ident.namespace))
    for ds in kd.datasets:
        pv, pvc = dataset_manifests(design, ds, design.region)
        volume = k8s.core.v1.PersistentVolume(f"{name}-dataset-{ds.name}-pv", metadata=pv["metadata"], spec=pv["spec"],
                                              opts=opts)
        k8s.core.v1.PersistentVolumeClaim(
            f"{name}-dataset-{ds.name}-pvc", metadata=pvc["metadata"], spec=pvc["spec"],
            opts=pulumi.ResourceOptions.merge(after(ds.namespace), pulumi.ResourceOptions(depends_on=[volume])))


# ---------------------------------------------------------------- the plan's summary


def data_summary(design: ClusterDesign) -> dict:
    """The plan summary's identities and datasets (EKS and GKE alike)."""
    kd = design.kubernetes
    via = "EKS Pod Identity (IAM role)" if design.cloud == "aws" else "GKE Workload Identity (Google service account)"
    scheme = "s3" if design.cloud == "aws" else "gs"
    return {
        "pod_identities": {f"{i.namespace}/{i.name}": {
            "via": via, "buckets": [f"{scheme}://{g.bucket}" + (f"/{g.prefix}" if g.prefix else "") + f" ({g.access})"
                                    for g in i.grants]} for i in kd.identities},
        "datasets": {f"{d.namespace}/{d.name}": {
            "uri": d.uri, "volume": dataset_volume_name(design, d), "driver": d.driver,
            "service_account": d.service_account, "cache_gib": d.cache_gib} for d in kd.datasets},
    }


def data_lines(summary: Mapping) -> list[str]:
    lines = []
    for account, i in (summary.get("pod_identities") or {}).items():
        lines.append(f"  pod identity {account}: {i['via']} -> " + ", ".join(i["buckets"]))
    for claim, d in (summary.get("datasets") or {}).items():
        cache = f", {d['cache_gib']} GiB read cache per node" if d["cache_gib"] else ", no cache"
        pod = "serviceAccountName " + d["service_account"]
        if d["driver"] == CSI_DRIVERS["gcp"]:
            pod += f', annotation {GCSFUSE_POD_ANNOTATION}: "true"'
            if d["cache_gib"]:   # the file cache is the sidecar's emptyDir, within its ephemeral-storage limit
                pod += f', {GCSFUSE_STORAGE_LIMIT_ANNOTATION}: "{d["cache_gib"]}Gi" or more'
        lines.append(f"  dataset {claim}: {d['uri']} read-only, PersistentVolume {d['volume']} ({d['driver']}){cache}; "
                     f"pods mount claim {claim.split('/')[1]} with {pod}")
    return lines
