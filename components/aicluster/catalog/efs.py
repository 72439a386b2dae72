"""Amazon EFS facts (storage.yaml `efs:`): how aws/home.py builds the shared /home and how nodes
mount it. One loader beside load_catalog, so the EFS facts keep their source without widening
the Catalog every other module constructs."""
from __future__ import annotations

import functools
from dataclasses import dataclass

from aicluster.catalog import _need, _read, _sourced


@dataclass(frozen=True)
class EfsFacts:
    """The EFS facts of the catalog."""
    performance_mode: str
    throughput_mode: str
    per_client_max_mibps: int
    nfs_port: int
    mount_options: str
    transition_to_ia: str
    transition_to_primary: str
    source: str


@functools.lru_cache(maxsize=1)
def load_efs() -> EfsFacts:
    e = _read("storage.yaml")["efs"]
    where = "storage.yaml efs"
    return EfsFacts(
        performance_mode=str(_need(e, "performance_mode", where)),
        throughput_mode=str(_need(e, "throughput_mode", where)),
        per_client_max_mibps=int(_need(e, "per_client_max_mibps", where)),
        nfs_port=int(_need(e, "nfs_port", where)),
        mount_options=str(_need(e, "mount_options", where)),
        transition_to_ia=str(_need(e, "transition_to_ia", where)),
        transition_to_primary=str(_need(e, "transition_to_primary", where)),
        source=_sourced(e, where),
    )


__all__ = ["EfsFacts", "load_efs"]
