"""Instance and TPU prices per region and capacity type, from catalog/prices.yaml (the one copy).

`instance_price(cloud, type, region, capacity)` and `tpu_price(generation, region, capacity)` answer a
`Quote`: the figure to plan with, the range where the price moves (spot), and one line saying what
the figure is, with its source and checked date. A region or capacity type the file does not list
answers None: never another region's price in silence. Where a figure is derived or approximated
(a ratio of regions, a capacity block priced from on-demand), the file says so in `note` and the
quote's basis repeats it. `no_price(...)` words the refusal the same way for every caller.

Loaded once and cached: the plan and the policy pack call this for every pool.
"""
from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from aicluster.catalog import CatalogError, load_yaml
from aicluster.catalog.tpu_slices import host_generation

_FILE = Path(__file__).with_name("prices.yaml")
CAPACITY_TYPES = ("on-demand", "spot", "reservation", "capacity-block", "flex-start")
# Reservations bill at the on-demand rate: EC2 On-Demand Capacity Reservations "are charged the
# equivalent On-Demand rate whether you run instances in them or not" (EC2 User Guide, Capacity
# Reservation pricing and billing); Compute Engine reservations are "charged at the same on-demand
# rate as the VMs they reserve" unless a committed use discount applies (Compute Engine docs,
# Reservations of Compute Engine zonal resources, Pricing).
# Where a price is quoted with no region given (what-ifs, the catalog's summary): the regions both
# clouds' price lists start from.
REFERENCE_REGIONS = {"aws": "us-east-1", "gcp": "us-central1"}
RESERVATION_BASIS = "a reservation bills at the on-demand rate unless a Savings Plan or committed-use discount applies"


@dataclass(frozen=True)
class Quote:
    usd_per_hour: float          # the figure to plan with
    low: float | None            # range (spot), else None
    high: float | None
    capacity: str                # on-demand | spot | reservation | capacity-block | flex-start
    region: str
    basis: str                   # one line: what the figure is ("us-east-1 spot, median of 6 zones, range ...")
    source: str
    checked: str                 # date

    def times(self, factor: float) -> "Quote":
        """The same quote for `factor` units (nodes, chips): range and figure scaled."""
        scale = (lambda v: None if v is None else v * factor)
        return Quote(self.usd_per_hour * factor, scale(self.low), scale(self.high), self.capacity, self.region,
                     self.basis, self.source, self.checked)

    def describe(self) -> str:
        """`$55.04/h (us-east-1 on-demand list price ...; <source>, checked 2026-11-28)`: the basis
        carries the range where there is one."""
        return f"${self.usd_per_hour:,.2f}/h ({self.basis}; {self.source}, checked {self.checked})"


@dataclass(frozen=True)
class _Entry:
    usd: float
    low: float | None
    high: float | None
    basis: str
    source: str
    checked: str


def _need(e: Mapping, key: str, where: str) -> Any:
    if key not in e:
        raise CatalogError(f"{_FILE.name} {where}: missing `{key}`")
    return e[key]


def _positive(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise CatalogError(f"{_FILE.name} {where}: {value!r} is not a positive price in USD per hour")
    return float(value)


def _entry(e: Any, region: str, capacity: str, sources: Mapping[str, Mapping], where: str, unit: str) -> _Entry:
    if not isinstance(e, dict):
        raise CatalogError(f"{_FILE.name} {where}: a mapping with usd (or zones) and source")
    key = _need(e, "source", where)
    if key not in sources:
        raise CatalogError(f"{_FILE.name} {where}: source {key!r} is not one of {', '.join(sources)}")
    src = sources[key]
    note = f"; {e['note']}" if e.get("note") else ""
    if "zones" in e:
        # AWS spot: one price per availability zone; plan with the median, show the range.
        zones = [_positive(z, f"{where}.zones") for z in _need(e, "zones", where)]
        if not zones:
            raise CatalogError(f"{_FILE.name} {where}: zones is empty")
        mid = statistics.median(zones)
        basis = (f"{region} {capacity}, median of {len(zones)} zone(s) {unit}, "
                 f"range ${min(zones):,.4g}-${max(zones):,.4g}{note}")
        return _Entry(mid, min(zones), max(zones), basis, str(src["source"]), str(src["checked"]))
    usd = _positive(_need(e, "usd", where), where)
    if capacity == "spot":
        # GCP: one Spot price per region (it may change once a day): the range is that one figure.
        return _Entry(usd, usd, usd, f"{region} spot {unit}, one regional price{note}", str(src["source"]),
                      str(src["checked"]))
    what = {"on-demand": "on-demand list price", "capacity-block": "Capacity Block effective hourly rate"}
    return _Entry(usd, None, None, f"{region} {what.get(capacity, capacity)} {unit}{note}", str(src["source"]),
                  str(src["checked"]))


def _table(raw: Any, sources: Mapping[str, Mapping], where: str, unit: str) -> dict[tuple[str, str, str], _Entry]:
    out: dict[tuple[str, str, str], _Entry] = {}
    for name, caps in (raw or {}).items():
        if not isinstance(caps, dict):
            raise CatalogError(f"{_FILE.name} {where}.{name}: capacity type -> region -> price")
        for capacity, regions in caps.items():
            if capacity not in CAPACITY_TYPES or capacity == "reservation":
                raise CatalogError(f"{_FILE.name} {where}.{name}: capacity type {capacity!r} is not one of "
                                   f"{', '.join(c for c in CAPACITY_TYPES if c != 'reservation')} "
                                   "(a reservation is priced from on-demand)")
            for region, e in (regions or {}).items():
                out[(name, capacity, region)] = _entry(e, region, capacity, sources,
                                                       f"{where}.{name}.{capacity}.{region}", unit)
    return out


@dataclass(frozen=True)
class _Prices:
    instances: Mapping[tuple[str, str, str, str], _Entry]     # (cloud, type, capacity, region)
    tpus: Mapping[tuple[str, str, str], _Entry]               # (generation, capacity, region)


@lru_cache(maxsize=1)
def _load() -> _Prices:
    with open(_FILE, encoding="utf-8") as fh:
        raw = load_yaml(fh)
    sources = raw.get("sources") or {}
    for key, s in sources.items():
        for field in ("source", "checked"):
            if not (isinstance(s, dict) and s.get(field)):
                raise CatalogError(f"{_FILE.name} sources.{key}: missing `{field}`")
    instances = {}
    for cloud in ("aws", "gcp"):
        for (name, cap, region), e in _table(raw.get(cloud), sources, cloud, "per instance-hour").items():
            instances[(cloud, name, cap, region)] = e
    tpus = _table(raw.get("tpus"), sources, "tpus", "per chip-hour")
    return _Prices(instances, tpus)


def _quote(table: Mapping, key: tuple, region: str, capacity: str) -> Quote | None:
    if capacity not in CAPACITY_TYPES:
        raise CatalogError(f"capacity type {capacity!r} is not one of {', '.join(CAPACITY_TYPES)}")
    if capacity == "reservation":
        od = table.get((*key, "on-demand", region))
        if od is None:
            return None
        return Quote(od.usd, None, None, capacity, region, f"{od.basis}; {RESERVATION_BASIS}", od.source, od.checked)
    e = table.get((*key, capacity, region))
    if e is None:
        return None
    return Quote(e.usd, e.low, e.high, capacity, region, e.basis, e.source, e.checked)


def instance_price(cloud: str, instance_type: str, region: str, capacity: str = "on-demand") -> Quote | None:
    """USD per instance-hour of `instance_type` in `region` on `capacity`; None where the catalog has no
    figure for exactly that region and capacity type (see `no_price` for the words)."""
    return _quote(_load().instances, (cloud, instance_type), region, capacity)


def tpu_price(generation: str, region: str, capacity: str = "on-demand") -> Quote | None:
    """USD per chip-hour of a TPU generation (v5p, v6e, ...) in `region` on `capacity`; None where the
    catalog has no figure there."""
    return _quote(_load().tpus, (generation,), region, capacity)


def no_price(what: str, region: str, capacity: str) -> str:
    """The one wording of a missing price: `no catalog price for p5.48xlarge in eu-west-1 (spot)`."""
    return f"no catalog price for {what} in {region} ({capacity})"


def price_table(cloud: str, instance_type: str) -> dict[str, dict[str, Quote]]:
    """Every region's quote per capacity type for one type (for `aicluster catalog`): capacity -> region -> Quote."""
    out: dict[str, dict[str, Quote]] = {}
    for (c, name, cap, region) in _load().instances:
        if c == cloud and name == instance_type:
            out.setdefault(cap, {})[region] = instance_price(cloud, instance_type, region, cap)
    return out


def tpu_table(generation: str) -> dict[str, dict[str, Quote]]:
    """Every region's per-chip quote per capacity type for one TPU generation."""
    out: dict[str, dict[str, Quote]] = {}
    for (name, cap, region) in _load().tpus:
        if name == generation:
            out.setdefault(cap, {})[region] = tpu_price(generation, region, cap)
    return out


def reference_price(cloud: str, instance_type: str) -> Quote | None:
    """The one figure shown where no region is known (`aicluster estimate` what-ifs, the catalog's
    summary): us-east-1 (AWS) or us-central1 (GCP) on-demand, else, for a type sold only by capacity
    block, its capacity block rate. The quote's region says which; callers say it is not their region."""
    region = REFERENCE_REGIONS[cloud]
    return instance_price(cloud, instance_type, region) or instance_price(cloud, instance_type, region, "capacity-block")


def _no_region_given(q: Quote | None) -> Quote | None:
    return None if q is None else dataclasses.replace(q, basis=f"no region given, so {q.basis}")


def chip_price(generation: str, region: str | None, capacity: str = "on-demand") -> Quote | None:
    """USD per chip-hour of a TPU generation in `region` on `capacity`. `region` None (a slice on
    paper): us-central1 on-demand, and the basis says it is not the slice's region."""
    if region is None:
        return _no_region_given(tpu_price(generation, REFERENCE_REGIONS["gcp"]))
    return tpu_price(generation, region, capacity)


def node_price(instance: Any, region: str | None, capacity: str = "on-demand") -> Quote | None:
    """USD per hour of one node of a pool: an instance type, or a TPU host (per-chip price x its
    chips). `region` None (a cluster on paper, e.g. `aicluster estimate --accelerator h100`): the
    reference price, us-east-1 / us-central1 on-demand, and the basis says it is not the pool's region."""
    gen = host_generation(instance)
    if gen:
        q = chip_price(gen, region, capacity)
        if q is None:
            return None
        n = instance.accelerator_count
        return q.times(n) if region is None else \
            dataclasses.replace(q.times(n), basis=f"{q.basis} x {n} chip(s) per host")
    if region is None:
        return _no_region_given(reference_price(instance.cloud, instance.name))
    return instance_price(instance.cloud, instance.name, region, capacity)


def price_missing(what: str, region: str | None, capacity: str = "on-demand") -> str:
    """Why a price of `what` (an instance type, `TPU v5p`) is None, in `no_price`'s words."""
    if region is None:
        return (f"no catalog price for {what} (no region given, and none in "
                f"{' / '.join(REFERENCE_REGIONS.values())})")
    return no_price(what, region, capacity)


def node_price_missing(instance: Any, region: str | None, capacity: str = "on-demand") -> str:
    """Why `node_price` is None, in `no_price`'s words."""
    gen = host_generation(instance)
    return price_missing(f"TPU {gen}" if gen else instance.name, region, capacity)


__all__ = ["CAPACITY_TYPES", "REFERENCE_REGIONS", "Quote", "chip_price", "instance_price", "no_price", "node_price",
           "node_price_missing", "price_missing", "price_table", "reference_price", "tpu_price", "tpu_table"]
