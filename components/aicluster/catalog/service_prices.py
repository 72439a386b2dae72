"""Unit prices of the managed services a cluster pays for while idle (service_prices.yaml): FSx and
Managed Lustre, EFS, NAT, the accounting database, the metrics and log stores, control plane fees,
secrets, keys. One price is (cloud, service, tier, region) -> USD per unit, with its source and
checked date. A region the file does not list has no price: never another region's."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Mapping

from aicluster.catalog import CatalogError, _need, _read, _sourced

_FILE = "service_prices.yaml"


@dataclass(frozen=True)
class UnitPrice:
    """One service's list price for one tier in one region."""
    cloud: str
    service: str                # "fsx_lustre", "nat_gateway", ...
    tier: str                   # "PERSISTENT_2-500", "hour", "db.t4g.medium", ...
    region: str
    usd: float                  # per `unit`
    unit: str                   # "GB-month", "hour", "10M samples", ...
    source: str
    checked: str
    approximated_by: str | None = None    # the region whose price stands in, where `region` has none

    @property
    def basis(self) -> str:
        """How the plan names the price: "$0.340 per GB-month (aws fsx_lustre PERSISTENT_2-500 us-east-1,
        <source>, checked 2026-11-28)"."""
        where = self.region if self.approximated_by is None else \
            (f"{self.region}, APPROXIMATED by {self.approximated_by}'s price: no public figure for {self.region} "
             "was found")
        return (f"${self.usd:g} per {self.unit} ({self.cloud} {self.service} {self.tier}, {where}; "
                f"{self.source}; checked {self.checked})")


@dataclass(frozen=True)
class _Service:
    unit: str
    source: str
    checked: str
    prices: Mapping[str, Mapping[str, float]]     # tier -> region ("*": all) -> USD
    approximated: Mapping[str, str]               # region with no public figure -> region that stands in


@functools.lru_cache(maxsize=1)
def _services() -> Mapping[tuple[str, str], _Service]:
    doc = _read(_FILE)
    out: dict[tuple[str, str], _Service] = {}
    for cloud in ("aws", "gcp"):
        for name, e in (doc.get(cloud) or {}).items():
            where = f"{_FILE} {cloud}.{name}"
            prices = _need(e, "prices", where)
            if not isinstance(prices, dict) or not prices:
                raise CatalogError(f"{where}: `prices` must map tiers to regions to USD")
            table = {}
            for tier, regions in prices.items():
                if not isinstance(regions, dict) or not all(isinstance(v, (int, float)) and v >= 0
                                                            for v in regions.values()):
                    raise CatalogError(f"{where}.prices.{tier}: region -> USD (a number, at least 0)")
                table[str(tier)] = {str(r): float(v) for r, v in regions.items()}
            approximated = e.get("approximated_by") or {}
            if not isinstance(approximated, dict) or not all(isinstance(v, str) for v in approximated.values()):
                raise CatalogError(f"{where}.approximated_by: region -> the region whose price stands in")
            out[(cloud, str(name))] = _Service(unit=str(_need(e, "unit", where)), source=_sourced(e, where),
                                               checked=str(_need(e, "checked", where)), prices=table,
                                               approximated={str(k): v for k, v in approximated.items()})
    return out


def unit_price(cloud: str, service: str, tier: str, region: str) -> UnitPrice | None:
    """The list price of `tier` of `service` in `region`; None where the catalog has none (an
    unknown tier, or a region the source did not give)."""
    s = _services().get((cloud, service))
    if s is None:
        raise CatalogError(f"{_FILE}: no service {cloud}.{service}")      # a caller's typo, not a missing price
    regions = s.prices.get(tier)
    if regions is None:
        return None
    usd = regions.get(region, regions.get("*"))
    if usd is not None:
        return UnitPrice(cloud, service, tier, region, usd, s.unit, s.source, s.checked)
    # A region the sources do not price, stood in for by a named neighbour: said in every basis,
    # never silent. A figure that is roughly right beats leaving the largest standing cost out.
    stand_in = s.approximated.get(region)
    if stand_in is None or stand_in not in regions:
        return None
    return UnitPrice(cloud, service, tier, region, regions[stand_in], s.unit, s.source, s.checked, stand_in)


@dataclass(frozen=True)
class UsageEstimate:
    """A volume the plan assumes to estimate a usage-priced item (service_prices.yaml usage_estimates)."""
    key: str
    value: float
    source: str
    checked: str


@functools.lru_cache(maxsize=None)
def usage_estimate(key: str) -> UsageEstimate:
    e = (_read(_FILE).get("usage_estimates") or {}).get(key)
    where = f"{_FILE} usage_estimates.{key}"
    if e is None:
        raise CatalogError(f"{where}: missing")
    return UsageEstimate(key, float(_need(e, "value", where)), _sourced(e, where), str(_need(e, "checked", where)))


def tiers(cloud: str, service: str) -> tuple[str, ...]:
    """The tiers the catalog prices for a service (for messages naming what is priced)."""
    s = _services().get((cloud, service))
    return tuple(s.prices) if s else ()


__all__ = ["UnitPrice", "UsageEstimate", "tiers", "unit_price", "usage_estimate"]
