"""Filesystems, one finder per kind: FSx for Lustre, Managed Lustre (GCP), Filestore and EFS (NFS)."""
from __future__ import annotations

from typing import Any

from aicluster.catalog import load_catalog

from .._props import get, items, number
from .cluster import Filesystem
from .common import gcp_zone, hints, subnet_zones
from .index import Index
from .kinds import EFS, FILESTORE, FSX, GCP_LUSTRE, SUBNET


def _fsx(ix: Index, r: Any) -> Filesystem:
    """Throughput: perUnitStorageThroughput, else the deployment type's baseline in the catalog."""
    p = ix.props(r)
    deployment = get(p, "deploymentType") or "SCRATCH_1"   # the API's default deployment type
    tier = load_catalog().fsx.get(deployment) if isinstance(deployment, str) else None
    tput = number(get(p, "perUnitStorageThroughput"))
    if tput is None and tier is not None:
        tput = tier.baseline_mbps_per_tib
    return Filesystem(key=r.name, resource=r, kind="fsx-lustre", parallel=True,
                      capacity_gib=number(get(p, "storageCapacity")), throughput_mbps_per_tib=tput,
                      zones=subnet_zones(ix, ix.refs(r, "subnetIds", {SUBNET})),
                      hints=hints(ix.tags(r)), detail=f"FSx for Lustre {deployment}")


def _gcp_lustre(ix: Index, r: Any) -> Filesystem:
    p = ix.props(r)
    return Filesystem(key=r.name, resource=r, kind="gcp-lustre", parallel=True,
                      capacity_gib=number(get(p, "capacityGib")),
                      throughput_mbps_per_tib=number(get(p, "perUnitStorageThroughput")),
                      zones=gcp_zone(get(p, "location")), hints=hints(ix.tags(r)), detail="Managed Lustre")


def _filestore(ix: Index, r: Any) -> Filesystem:
    """NFS, not a parallel filesystem; its capacity is the sum of its file shares."""
    p = ix.props(r)
    capacity = sum(number(get(s, "capacityGb")) or 0 for s in items(p, "fileShares")) or None
    return Filesystem(key=r.name, resource=r, kind="filestore", parallel=False, capacity_gib=capacity,
                      throughput_mbps_per_tib=None, zones=gcp_zone(get(p, "location")),
                      hints=hints(ix.tags(r)), detail=f"Filestore {get(p, 'tier')} (NFS)")


def _efs(ix: Index, r: Any) -> Filesystem:
    """NFS for homes, not a parallel filesystem; elastic, so no capacity. Regional: no one zone."""
    p = ix.props(r)
    return Filesystem(key=r.name, resource=r, kind="efs", parallel=False, capacity_gib=None,
                      throughput_mbps_per_tib=None, zones=set(), hints=hints(ix.tags(r)),
                      detail=f"Amazon EFS {get(p, 'throughputMode') or 'bursting'} (NFS)")


FINDERS = ((FSX, _fsx), (GCP_LUSTRE, _gcp_lustre), (FILESTORE, _filestore), (EFS, _efs))


def find(ix: Index) -> list[Filesystem]:
    return [make(ix, r) for token, make in FINDERS for r in ix.of(token)]
