"""The managed accounting database's sourced facts (accounting_db.yaml beside this module): the
engine, version and size on each cloud, slurmdbd's database flags, and the default account and QoS
aicluster-accounting configures. Pure: no Pulumi, no spec.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from aicluster.catalog import CatalogError, load_yaml


@dataclass(frozen=True)
class Qos:
    """One Slurm QOS of the accounting catalog."""
    name: str
    priority: int
    usage_factor: float


@dataclass(frozen=True)
class AccountingCatalog:
    """The accounting database facts of the catalog."""
    aws: Mapping[str, object]
    gcp: Mapping[str, object]
    flags: Mapping[str, str]
    account: str
    qos: tuple[Qos, ...]


def _need_source(holder: object, source_key: str, what: str) -> str:
    """The non-empty `source_key` of `holder` (a mapping), or a CatalogError naming `what`."""
    source = holder.get(source_key) if isinstance(holder, dict) else None
    if not isinstance(source, str) or not source.strip():
        raise CatalogError(f"accounting_db.yaml: {what} needs a non-empty `{source_key}:`")
    return source


@functools.cache
def accounting_catalog() -> AccountingCatalog:
    return accounting_catalog_from(Path(__file__).parent / "accounting_db.yaml")


def accounting_catalog_from(path: Path) -> AccountingCatalog:
    with open(path, encoding="utf-8") as fh:
        data = load_yaml(fh)
    for cloud in ("aws", "gcp"):
        if "checked on" not in _need_source(data.get(cloud), "source", cloud):
            raise CatalogError(f"accounting_db.yaml: {cloud}: a version needs its 'checked on' date in `source:`")
    _need_source(data, "flags_source", "flags")
    _need_source(data, "qos_source", "qos")
    qos = tuple(Qos(str(q["name"]), int(q["priority"]), float(q["usage_factor"])) for q in data["qos"])
    if not qos or qos[0].name != "normal":
        raise CatalogError("accounting_db.yaml: the first QoS is every job's default and must be Slurm's `normal`")
    return AccountingCatalog(aws=data["aws"], gcp=data["gcp"], flags={k: str(v) for k, v in data["flags"].items()},
                             account=str(data["account"]), qos=qos)
