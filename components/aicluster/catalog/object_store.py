"""Object-store read throughput per client (storage.yaml `object_store:`): what one node reads from
a bucket through the Mountpoint for S3 or the GCS FUSE CSI driver, for the balance model's data
path. One loader beside load_catalog, like efs.py, so these facts keep their source."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Mapping

from aicluster.catalog import CatalogError, _need, _read, _sourced

# The CSI driver of each cloud's datasets (the catalog's keys).
DRIVERS = {"aws": "mountpoint-s3", "gcp": "gcsfuse"}


@dataclass(frozen=True)
class ObjectStoreClient:
    """How nodes mount the object store: the catalog's client facts."""
    driver: str
    read_gbps_per_client: float | None    # GB/s (decimal); None: bounded by the node's network only
    source: str


@functools.lru_cache(maxsize=1)
def load_object_store() -> Mapping[str, ObjectStoreClient]:
    doc = _read("storage.yaml")["object_store"]
    out = {}
    for driver, entry in doc.items():
        where = f"storage.yaml object_store.{driver}"
        figure = _need(entry, "read_gbps_per_client", where)
        if figure is not None and (not isinstance(figure, (int, float)) or figure <= 0):
            raise CatalogError(f"{where}: read_gbps_per_client must be a positive number or null, not {figure!r}")
        out[driver] = ObjectStoreClient(driver, None if figure is None else float(figure), _sourced(entry, where))
    missing = set(DRIVERS.values()) - set(out)
    if missing:
        raise CatalogError(f"storage.yaml object_store: missing {sorted(missing)}")
    return out


__all__ = ["DRIVERS", "ObjectStoreClient", "load_object_store"]
