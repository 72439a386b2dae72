"""Standing cost (aicluster.design.standing_cost, priced by aicluster.catalog.standing): what a
planned cluster pays per hour and per 730-hour month with zero compute nodes up, on both clouds.
Instance prices come from aicluster.catalog.pricing; here a stand-in quotes them so the figures
are fixed whatever that price list says."""
from __future__ import annotations

import pytest

from aicluster.catalog import CatalogError, standing
from aicluster.catalog.pricing import Quote, instance_price
from aicluster.catalog.service_prices import unit_price
from aicluster.catalog.standing import HOURS_PER_MONTH, price_standing, standing_item
from aicluster.design.standing_cost import plan_lines, standing_cost, standing_items
from tests.support.stack_plans import STACK_NAMES, stack_result


def _Quote(usd_per_hour: float) -> Quote:
    return Quote(usd_per_hour, None, None, "on-demand", "test", "stand-in on-demand", "test", "2026-11-28")


_QUOTES = {"m7i.2xlarge": 0.4032, "m7i.xlarge": 0.2016, "n2-standard-8": 0.3885, "n2-standard-4": 0.1942}


@pytest.fixture
def quotes(monkeypatch):
    """aicluster.catalog.pricing.instance_price stood in for, so these figures hold whatever the price
    list says: known types priced, others None."""
    asked = []

    def quote(cloud, instance_type, region):
        asked.append((cloud, instance_type, region))
        usd = _QUOTES.get(instance_type)
        return None if usd is None else _Quote(usd)
    monkeypatch.setattr(standing, "_instance_quote", quote)
    return asked


def _line(cost, item):
    (line,) = [ln for ln in cost.lines if ln.item == item]
    return line


def test_unit_prices_are_per_region_and_never_borrowed():
    fsx = unit_price("aws", "fsx_lustre", "PERSISTENT_2-500", "us-east-1")
    assert (fsx.usd, fsx.unit, fsx.checked) == (0.34, "GB-month", "2026-11-28")
    assert "aws.amazon.com/fsx/lustre/pricing" in fsx.basis
    assert unit_price("aws", "fsx_lustre", "PERSISTENT_2-500", "eu-north-1") is None     # not listed: no price
    assert unit_price("aws", "fsx_lustre", "PERSISTENT_2-333", "us-east-1") is None      # no such tier
    assert unit_price("gcp", "gke", "cluster", "asia-south2").usd == 0.10                 # one price everywhere
    with pytest.raises(CatalogError):
        unit_price("aws", "fsx_lustre_typo", "PERSISTENT_2-500", "us-east-1")


def test_aws_slurm_stack_pays_for_fsx_efs_head_login_nat_rds_secrets_key_and_zone(quotes):
    cost = standing_cost(stack_result("aws-p5-slurm").design)
    fsx = _line(cost, "FSx for Lustre")
    assert fsx.what == "24,000 GiB PERSISTENT_2 at 500 MB/s/TiB"
    assert fsx.usd_per_hour == pytest.approx(24000 * 0.34 / 730)          # $8,160 a month
    assert _line(cost, "head node").usd_per_hour == pytest.approx(0.4032)
    assert _line(cost, "login nodes").what == "1 x m7i.2xlarge"
    assert _line(cost, "head node root disk").usd_per_hour == pytest.approx(100 * 0.08 / 730)
    assert _line(cost, "NAT gateway").usd_per_hour == 0.045
    assert _line(cost, "public IPv4").usd_per_hour == 0.005
    assert _line(cost, "accounting database (RDS)").usd_per_hour == pytest.approx(0.065 + 20 * 0.115 / 730)
    assert _line(cost, "secrets").what == "2 secret(s)"                      # munge key + slurmdbd password
    assert {"KMS key", "node DNS zone", "EFS"} <= {ln.item for ln in cost.lines}
    assert cost.unpriced == ()
    assert cost.usd_per_hour == pytest.approx(sum(ln.usd_per_hour for ln in cost.lines))
    assert cost.usd_per_month == pytest.approx(cost.usd_per_hour * HOURS_PER_MONTH)
    assert ("aws", "m7i.2xlarge", "us-east-1") in quotes


def test_usage_priced_things_are_notes_with_their_unit_prices(quotes):
    cost = standing_cost(stack_result("aws-p5-slurm").design)
    efs = _line(cost, "EFS")
    assert efs.usd_per_hour == 0 and "0 GB counted" in efs.what
    notes = "\n".join(cost.usage_notes)
    assert "EFS: $0.3 per GB-month stored" in notes
    assert "NAT gateway data: $0.045 per GB processed" in notes
    assert "logs (CloudWatch Logs, kept 30 days" in notes and "$0.5 per GB ingested" in notes
    assert "each compute node that comes up adds ~114M samples a month ($10.25)" in notes


def test_metric_samples_of_the_always_on_nodes_are_estimated_and_priced(quotes):
    """Head + login, ~1,300 node_exporter series each (usage_estimates), every 30 s: 87,600 samples
    per series a month, at AMP's first-tier $0.90 per 10M samples."""
    cost = standing_cost(stack_result("aws-p5-slurm").design)
    metrics = _line(cost, "metrics")
    samples = 2 * 1300 * 87_600
    assert metrics.what == "228M samples a month: 2 always-on node(s) x ~1,300 series, every 30 s"
    assert metrics.usd_per_hour == pytest.approx(samples / 1e7 * 0.90 / 730)
    assert "PrometheusHostMetricsHowMany" in metrics.basis


def test_metric_samples_past_the_first_tier_are_priced_at_the_next():
    many = standing_item("metrics", "metrics", "aws", "us-east-1", nodes=100, gpus=0, scrape_interval_s=30)
    (line,) = price_standing([many]).lines
    samples = 100 * 1300 * 87_600
    assert line.usd_per_hour == pytest.approx((2e9 / 1e7 * 0.90 + (samples - 2e9) / 1e7 * 0.35) / 730)
    huge = standing_item("metrics", "metrics", "gcp", "us-east4", nodes=10_000, gpus=0, scrape_interval_s=30)
    assert "no catalog price" in price_standing([huge]).unpriced[0]        # past GMP's first 50B: not guessed


def test_static_compute_nodes_are_scraped_but_not_counted_as_standing_cost(quotes):
    cost = standing_cost(stack_result("aws-gb200-slurm").design)
    notes = "\n".join(cost.usage_notes)
    assert "pool nvl72a: 18 x p6e-gb200.36xlarge stay up (min_nodes): compute cost" in notes
    # 36 static + head + login scraped; Slurm arm64 nodes run no DCGM exporter (no enroot pin)
    assert _line(cost, "metrics").what.startswith("4,327M samples a month: 38 always-on node(s) x ~1,300 series, ")
    assert not any("p6e" in ln.what for ln in cost.lines)


def test_static_gpus_on_kubernetes_send_their_dcgm_fields(quotes):
    cost = standing_cost(stack_result("gcp-a4x-gke").design)
    assert "+ 72 GPU(s) x 14 DCGM fields" in _line(cost, "metrics").what      # 18 x a4x-highgpu-4g


def test_eks_pays_the_control_plane_fee_and_its_system_nodes(quotes):
    cost = standing_cost(stack_result("aws-p5-eks").design)
    assert _line(cost, "control plane").usd_per_hour == 0.10
    assert _line(cost, "system nodes").usd_per_hour == pytest.approx(2 * 0.2016)
    assert "head node" not in {ln.item for ln in cost.lines}
    assert any("extended support, $0.60 per hour" in n for n in cost.usage_notes)


def test_gcp_prices_cloud_nat_per_vm_and_says_which_items_have_no_price(quotes):
    cost = standing_cost(stack_result("gcp-a3mega-slurm").design)
    nat = _line(cost, "Cloud NAT")
    assert nat.usd_per_hour == pytest.approx(2 * 0.0014 + 0.005)           # head + login, one NAT IP
    # us-east4 has no public Managed Lustre or Filestore figure: Iowa's and us-east1's stand in, and say so.
    lustre = _line(cost, "Managed Lustre")
    assert lustre.usd_per_hour == pytest.approx(36000 * 0.34 / 730)
    assert lustre.what == "36,000 GiB at 500 MB/s/TiB (approximated: us-central1's price)"
    filestore = _line(cost, "Filestore")
    assert filestore.usd_per_hour == pytest.approx(1024 * 0.25 / 730) and "us-east1's price" in filestore.what
    assert cost.unpriced == ()
    assert cost.usd_per_hour == pytest.approx(sum(ln.usd_per_hour or 0 for ln in cost.lines))


def test_gke_fee_and_the_free_tier_it_does_not_assume(quotes):
    cost = standing_cost(stack_result("gcp-tpu-v5p-gke").design)
    assert _line(cost, "control plane").usd_per_hour == 0.10
    assert any("free tier ($74.40 a month)" in n for n in cost.usage_notes)


def test_cloud_sql_is_priced_from_its_custom_tier_where_the_region_has_prices():
    item = standing_item("cloud_sql", "accounting database (Cloud SQL)", "gcp", "us-central1", tier="db-custom-1-3840",
                         edition="ENTERPRISE", disk_gib=20, disk_type="PD_SSD", availability="ZONAL")
    (line,) = price_standing([item]).lines
    assert line.usd_per_hour == pytest.approx(0.0413 + 0.007 * 3.75 + 20 * 0.17 / 730)
    regional = standing_item("cloud_sql", "db", "gcp", "us-central1", tier="db-custom-1-3840", edition="ENTERPRISE",
                             disk_gib=20, disk_type="PD_SSD", availability="REGIONAL")
    assert price_standing([regional]).unpriced == ("db: db-custom-1-3840 (ENTERPRISE, REGIONAL), 20 GB PD_SSD "
                                                   "(no catalog price: the catalog prices zonal db-custom tiers only)",)


def test_cloud_sql_in_europe_west1_is_priced_from_the_emea_skus_and_us_east4_stays_unpriced():
    """europe-west1 bills the continent-wide 'in EMEA' SKUs (same USD rates as the Americas ones);
    us-east4 has its own Northern Virginia SKUs, not read yet, so it is not given Iowa's."""
    def db(region):
        return standing_item("cloud_sql", "accounting database (Cloud SQL)", "gcp", region, tier="db-custom-1-3840",
                             edition="ENTERPRISE", disk_gib=20, disk_type="PD_SSD", availability="ZONAL")
    (line,) = price_standing([db("europe-west1")]).lines
    assert line.usd_per_hour == pytest.approx(0.0413 + 0.007 * 3.75 + 20 * 0.17 / 730)
    assert price_standing([db("us-east4")]).unpriced[0].endswith("(no catalog price: Cloud SQL enterprise in us-east4)")


def test_an_instance_type_without_a_price_is_unpriced_not_zero(quotes):
    cost = price_standing([standing_item("instance", "head node", "aws", "us-east-1", type="c7i.8xlarge", count=1)])
    assert cost.usd_per_hour == 0 and cost.unpriced == (
        "head node: 1 x c7i.8xlarge (no catalog price: aws c7i.8xlarge in us-east-1 on demand)",)


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_every_stack_has_a_standing_cost_with_a_total_line(stack):
    cost = standing_cost(stack_result(stack).design)
    lines = plan_lines(cost)
    assert cost.lines and any(line.startswith("total ") and "/month (730 h)" in line for line in lines)
    kinds = {i.kind for i in standing_items(stack_result(stack).design)}
    assert {"metrics", "logs"} <= kinds            # usage-priced: always a note, never left out
    assert len(cost.usage_notes) >= 2


def test_gcp_filesystems_are_priced_where_the_catalog_has_their_tier_and_region():
    lustre = standing_item("managed_lustre", "Managed Lustre", "gcp", "us-central1", gib=72000, mbps_per_tib=125)
    home = standing_item("filestore", "Filestore", "gcp", "us-central1", gib=1024, tier="ZONAL")
    big = standing_item("filestore", "Filestore", "gcp", "us-central1", gib=20480, tier="ZONAL")
    cost = price_standing([lustre, home, big])
    assert [ln.usd_per_hour for ln in cost.lines[:2]] == pytest.approx([72000 * 0.145 / 730, 1024 * 0.25 / 730])
    assert cost.unpriced == ("Filestore: 20,480 GiB ZONAL (no catalog price: ZONAL-10to100TiB in us-central1 "
                             "(cloud.google.com/filestore/pricing))",)


@pytest.mark.parametrize("tier, usd", [(125, 0.145), (250, 0.21), (500, 0.34), (1000, 0.60)])
def test_every_managed_lustre_tier_is_priced_in_iowa_and_other_regions_say_they_borrow_it(tier, usd):
    """Iowa's four capacity SKUs are quoted publicly; us-east4/us-east5/europe-west1 are not, so they
    take Iowa's figure and every line says APPROXIMATED; a region with no stand-in stays unpriced."""
    iowa = standing_item("managed_lustre", "Managed Lustre", "gcp", "us-central1", gib=36000, mbps_per_tib=tier)
    (line,) = price_standing([iowa]).lines
    assert line.usd_per_hour == pytest.approx(36000 * usd / 730) and "APPROXIMATED" not in line.basis
    for region in ("us-east4", "us-east5", "europe-west1"):
        other = standing_item("managed_lustre", "Managed Lustre", "gcp", region, gib=36000, mbps_per_tib=tier)
        (line,) = price_standing([other]).lines
        assert line.usd_per_hour == pytest.approx(36000 * usd / 730)
        assert f"{region}, APPROXIMATED by us-central1's price" in line.basis
    far = standing_item("managed_lustre", "Managed Lustre", "gcp", "asia-northeast1", gib=36000, mbps_per_tib=tier)
    assert price_standing([far]).unpriced[0].startswith("Managed Lustre: 36,000 GiB")


def test_a_public_head_pays_for_its_address_on_both_clouds_in_the_plan_and_the_pack(quotes):
    """slurm.head_node.public_ip: the NAT's address and the head's on AWS, the head's on GCP; the
    pack reads the same off the instance (associatePublicIpAddress, an access config)."""
    import importlib

    from aicluster.offline.policy_bridge import RULES_PACKAGE, load_rules, stack_resources
    from tests.support.stack_plans import result_with_spec, stack_spec_data
    load_rules()
    model = importlib.import_module(f"{RULES_PACKAGE}.model")
    pack = importlib.import_module(f"{RULES_PACKAGE}.model.standing")
    for stack, count in (("aws-p5-slurm", 2), ("gcp-a3mega-slurm", 1)):
        spec = stack_spec_data(stack)
        spec.setdefault("slurm", {}).setdefault("head_node", {})["public_ip"] = True
        result = result_with_spec(stack, spec)
        cost = standing_cost(result.design)
        assert _line(cost, "public IPv4").what == f"{count} address(es)"
        assert pack.standing_items_from_resources(model.build(stack_resources(result.plan))) == \
            standing_items(result.design)


def _price_rows() -> list[str]:
    from aicluster.catalog.service_prices import _services
    rows = []
    for (cloud, name), s in _services().items():
        for tier, regions in s.prices.items():
            by: dict[float, list[str]] = {}
            for region, usd in regions.items():
                by.setdefault(usd, []).append("every region" if region == "*" else region)
            cells = "; ".join(f"{', '.join(rs)}: {usd:g}" for usd, rs in by.items())
            rows.append(f"| {cloud} | `{name}` | `{tier}` | {cells} per {s.unit} |")
    return rows


def test_docs_costs_lists_every_catalog_price():
    from pathlib import Path
    doc = (Path(__file__).resolve().parents[1] / "docs" / "costs.md").read_text(encoding="utf-8")
    missing = [row for row in _price_rows() if row not in doc.splitlines()]
    assert not missing, "docs/costs.md is stale; its price table must list:\n" + "\n".join(missing)


def test_head_and_login_nodes_are_priced_from_the_instance_price_list():
    """No stand-in: the real aicluster.catalog.pricing answers the on-demand price of the head's type."""
    cost = standing_cost(stack_result("aws-p5-slurm").design)
    quote = instance_price("aws", "m7i.2xlarge", "us-east-1")
    assert quote is not None and _line(cost, "head node").usd_per_hour == pytest.approx(quote.usd_per_hour)
    assert _line(cost, "head node").basis == f"each: {quote.describe()}"
