"""catalog/prices.yaml through aicluster.catalog.pricing: every entry sourced, dated and positive,
spot ranges around the planned figure, no silent fallback to another region, reservations at the
on-demand rate, TPU prices per chip, p6e-gb200 by capacity block, and every catalog type priced
where a stack or the catalog's offerings put it."""
from __future__ import annotations

import re

import pytest

from aicluster.catalog import CatalogError, load_catalog
from aicluster.catalog import pricing
from aicluster.catalog.pricing import (CAPACITY_TYPES, instance_price, no_price, node_price, node_price_missing,
                                       price_table, tpu_price)
from aicluster.catalog.tpu_slices import host_instance, tpu_slice
from tests.support.stack_plans import STACK_NAMES

DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _all_quotes():
    prices = pricing._load()
    for (cloud, name, cap, region) in prices.instances:
        yield f"{cloud} {name}", instance_price(cloud, name, region, cap)
    for (gen, cap, region) in prices.tpus:
        yield f"tpu {gen}", tpu_price(gen, region, cap)


def test_every_entry_has_a_source_a_date_and_a_positive_price_and_spot_brackets_its_plan():
    quotes = list(_all_quotes())
    assert len(quotes) > 300
    for what, q in quotes:
        assert q.source and DATE.match(q.checked), what
        assert q.usd_per_hour > 0 and q.capacity in CAPACITY_TYPES and q.region in q.basis, what
        if q.capacity == "spot":
            assert q.low is not None and q.low <= q.usd_per_hour <= q.high, (what, q)
        else:
            assert q.low is None and q.high is None, (what, q)


def test_loaded_once():
    assert pricing._load() is pricing._load()


def test_aws_spot_plans_with_the_median_of_its_zones():
    q = instance_price("aws", "p5.48xlarge", "us-east-1", "spot")
    assert (q.usd_per_hour, q.low, q.high) == (pytest.approx((25.8774 + 27.6948) / 2), 20.9934, 30.326)
    assert q.basis.startswith("us-east-1 spot, median of 6 zone(s)")


def test_no_region_falls_back_silently():
    """No figure for exactly that region and capacity type is None, with the words callers print;
    an approximated figure (a region scaled from us-east-1) says so in its basis."""
    assert instance_price("aws", "p5.48xlarge", "eu-west-1") is None
    assert instance_price("aws", "p5.48xlarge", "eu-west-1", "spot") is None
    assert instance_price("gcp", "a3-megagpu-8g", "us-east4", "flex-start") is None
    assert tpu_price("v5p", "asia-east1") is None
    assert no_price("p5.48xlarge", "eu-west-1", "spot") == "no catalog price for p5.48xlarge in eu-west-1 (spot)"
    tokyo = instance_price("aws", "p5.48xlarge", "ap-northeast-1")
    assert tokyo.usd_per_hour != instance_price("aws", "p5.48xlarge", "us-east-1").usd_per_hour
    assert "approximated: us-east-1 x" in tokyo.basis
    with pytest.raises(CatalogError, match="capacity type 'preemptible'"):
        instance_price("aws", "p5.48xlarge", "us-east-1", "preemptible")


def test_a_reservation_bills_at_on_demand_and_says_so():
    od = instance_price("gcp", "a3-ultragpu-8g", "europe-west1")
    res = instance_price("gcp", "a3-ultragpu-8g", "europe-west1", "reservation")
    assert res.usd_per_hour == od.usd_per_hour and res.capacity == "reservation"
    assert "a reservation bills at the on-demand rate" in res.basis and "approximated" in res.basis


def test_p6e_gb200_is_priced_by_capacity_block_only():
    assert instance_price("aws", "p6e-gb200.36xlarge", "us-east-1") is None
    q = instance_price("aws", "p6e-gb200.36xlarge", "us-east-1", "capacity-block")
    assert q.usd_per_hour == pytest.approx(113.9328 / 8 * 4) and "approximated" in q.basis
    assert pricing.reference_price("aws", "p6e-gb200.36xlarge") == q    # `aicluster catalog` shows it, not "unknown"


def test_tpu_hosts_are_priced_per_chip():
    host = host_instance(tpu_slice(load_catalog().tpus["v5p"], "4x4x4"))
    q = node_price(host, "us-east5", "spot")
    assert q.usd_per_hour == pytest.approx(4 * tpu_price("v5p", "us-east5", "spot").usd_per_hour)
    assert q.basis.endswith("x 4 chip(s) per host")
    assert node_price(host, "asia-east1") is None
    assert node_price_missing(host, "asia-east1") == "no catalog price for TPU v5p in asia-east1 (on-demand)"


def test_a_cluster_on_paper_says_it_is_priced_at_the_reference_region():
    p5 = load_catalog().instance_types["aws"]["p5.48xlarge"]
    q = node_price(p5, None)
    assert q.usd_per_hour == 55.04 and q.basis.startswith("no region given, so us-east-1 on-demand")


def test_every_accelerated_type_and_tpu_the_stacks_use_has_a_price_in_the_stacks_region():
    from aicluster.commands.stacks import read_stack
    for name in STACK_NAMES:
        spec = read_stack(name).spec_data
        for pool in spec["pools"]:
            cap = pool.get("capacity", "on-demand")
            cap = cap.get("type", "on-demand") if isinstance(cap, dict) else cap
            if "tpu" in pool:
                assert tpu_price(pool["tpu"]["type"], spec["region"], cap), (name, pool)
                continue
            it = load_catalog().resolve(spec["cloud"], pool["instance_type"])
            assert instance_price(spec["cloud"], it.name, spec["region"], cap), (name, it.name, cap)


def test_every_accelerated_catalog_type_has_a_price_somewhere_or_is_listed_as_unpriced():
    """A type with no public figure read is left out on purpose; the list is short and known."""
    unpriced = {(c, n) for c, ts in load_catalog().instance_types.items() for n, t in ts.items()
                if t.accelerator.kind != "cpu" and not price_table(c, n)}
    assert unpriced == {("aws", "trn2.48xlarge"), ("gcp", "a4-highgpu-8g")}


def test_every_tpu_generation_but_tpu7x_is_priced_per_chip_where_it_is_offered():
    from aicluster.catalog.pricing import tpu_table
    assert {g for g in load_catalog().tpus if not tpu_table(g)} == {"tpu7x"}    # no public figure read
    assert tpu_price("v4", "us-central2").usd_per_hour == 3.22                    # the only v4 region
    assert tpu_price("v5e", "us-central1").usd_per_hour == 1.2
