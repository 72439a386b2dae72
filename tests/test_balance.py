"""Worked examples for aicluster.design.balance; every number is derived by hand in the comment beside it.

Tolerances: where the worked example rounds ("~68 s", "~3.8 %") the tolerance is half
the last printed digit; elsewhere the expected value is the exact expression and approx's default
(relative 1e-6) only absorbs float rounding.
"""
import json

import pytest

from aicluster.design.balance import (
    CHECKPOINT_BYTES_PER_PARAM, GOOD_READ_MBPS_PER_ACCELERATOR, TRAINING_STATE_BYTES_PER_PARAM,
    FilesystemShape, PoolShape, WorkloadShape, assess, from_design, report_lines, to_dict,
)
from aicluster.catalog import load_catalog
from aicluster.design.cluster import design_cluster
from aicluster.spec.cluster import parse_spec

AWS = load_catalog().instance_types["aws"]
GCP = load_catalog().instance_types["gcp"]
W70 = WorkloadShape(model_params_b=70, checkpoint_interval_min=30, max_checkpoint_stall_pct=5)
FSX_24000 = FilesystemShape("fsx", 24000, 500)
P5_16 = PoolShape("gpu", AWS["p5.48xlarge"], 16, 32, region="us-east-1")


def test_constants_match_their_sources():
    assert GOOD_READ_MBPS_PER_ACCELERATOR == pytest.approx(58.59375)   # 15 GBps / 256 GPUs (NVIDIA DGX SuperPOD RA-11333-001 V11)
    assert TRAINING_STATE_BYTES_PER_PARAM == 2 + 2 + 12                 # ZeRO section 3.1
    assert CHECKPOINT_BYTES_PER_PARAM == 14


def test_storage_md_checkpoint_example():
    # 28.8 TiB x 500 MB/s/TiB = 14.4 GB/s; 70e9 x 14 B = 980 GB; 980 / 14.4 = 68.06 s; / 1800 s = 3.78 %
    fs = FilesystemShape("fsx", 28.8 * 1024, 500)
    for pools in ([], [P5_16]):   # with or without clients (16 p5 clients = 200 GB/s, not the bound)
        b = assess(pools, [fs], W70)
        assert b.fs_throughput_gbs == pytest.approx(14.4)
        assert b.checkpoint_gb == pytest.approx(980)
        assert b.checkpoint_write_s == pytest.approx(68, abs=0.5)      # 980 GB / 14.4 GB/s, "~68 s"
        assert b.checkpoint_stall_pct == pytest.approx(3.8, abs=0.05)  # 68 s / 30 min, "~3.8 %"
        assert b.checkpoint_within_budget is True


def test_sixteen_p5_balanced():
    b = assess([P5_16], [FSX_24000], W70)
    (p,) = b.pools
    assert p.accelerators == b.accelerators == 128
    assert p.bf16_pflops == b.bf16_pflops == pytest.approx(128 * 989 / 1000)   # 126.6
    assert b.hbm_gib == pytest.approx(128 * 80) == 10240
    assert p.fabric_gbps_per_accelerator == pytest.approx(400)   # 32 cards x 100 Gbps / 8 GPUs
    assert p.fabric_fraction_wired == pytest.approx(1.0)
    assert b.usd_per_hour == pytest.approx(16 * 55.04)
    # 24000 / 1024 TiB x 500 = 11718.75 MB/s; / 128 = 91.55 MB/s per GPU
    assert b.fs_throughput_gbs == pytest.approx(11.71875)
    assert b.fs_mbps_per_accelerator == pytest.approx(91.55, abs=0.005)
    assert b.fs_meets_floor is True
    # 70e9 x 16 B = 1120 GB <= 0.8 x 10240 GiB (8796 GB)
    assert b.training_state_gb == pytest.approx(1120)
    assert b.training_state_fits is True
    # 980 GB / 11.71875 GB/s = 83.63 s; / 1800 s = 4.646 % <= 5 %
    assert b.checkpoint_write_s == pytest.approx(83.6, abs=0.05)
    assert b.checkpoint_stall_pct == pytest.approx(4.65, abs=0.005)
    assert b.checkpoint_within_budget is True
    assert b.findings == ()


def test_tighter_budget_fails_the_checkpoint():
    b = assess([P5_16], [FSX_24000], WorkloadShape(70, 30, 4))   # 4.65 % > 4 %
    assert b.checkpoint_within_budget is False
    (finding,) = b.findings
    assert "budget 4 %" in finding and "limited by the filesystem" in finding


def test_half_wired_p5_and_p4d_fabric():
    half = assess([PoolShape("gpu", AWS["p5.48xlarge"], 16, 16)], [FSX_24000]).pools[0]
    assert half.fabric_fraction_wired == pytest.approx(0.5)
    assert half.fabric_gbps_per_accelerator == pytest.approx(200)
    b = assess([PoolShape("a100", AWS["p4d.24xlarge"], 2, 4)], [])
    # 4 EFA devices x 100 Gbps card = 400 Gbps per node / 8 GPUs = 50 (efa-acc-inst-types.html of the EC2 User Guide: p4d, 4 cards)
    assert b.pools[0].fabric_gbps_per_accelerator == pytest.approx(50)
    assert b.pools[0].fabric_fraction_wired == pytest.approx(1.0)


def test_half_wired_multi_node_pool_is_a_finding_single_node_is_not():
    b = assess([PoolShape("gpu", AWS["p5.48xlarge"], 16, 16)], [FSX_24000])
    assert any("pool gpu" in f and "50%" in f for f in b.findings)
    assert assess([PoolShape("gpu", AWS["p5.48xlarge"], 1, 0)], [FilesystemShape("f", 2400, 250)]).findings == ()


def test_gcp_fabric():
    mega = assess([PoolShape("h100", GCP["a3-megagpu-8g"], 4, 8)], []).pools[0]
    assert mega.fabric_gbps_per_accelerator == pytest.approx(1600 / 8)   # 8 GPU NICs share 1600 Gbps
    assert mega.fabric_fraction_wired == pytest.approx(1.0)
    a2 = assess([PoolShape("a100", GCP["a2-highgpu-8g"], 2, 0)], [])
    assert a2.pools[0].fabric_gbps_per_accelerator == 0 and a2.pools[0].fabric_fraction_wired == 0
    assert any("no GPU NICs" in f for f in a2.findings)
    single = assess([PoolShape("a100", GCP["a2-highgpu-8g"], 1, 0)], [])
    assert not any("no GPU NICs" in f for f in single.findings)


def test_under_provisioned_storage_fails_the_floor():
    b = assess([P5_16], [FilesystemShape("fsx", 1200, 125)])
    # 1200 / 1024 x 125 = 146.5 MB/s / 128 GPUs = 1.14 MB/s
    assert b.fs_mbps_per_accelerator == pytest.approx(1200 / 1024 * 125 / 128)
    assert b.fs_meets_floor is False
    (finding,) = b.findings
    assert "58.6 MB/s floor" in finding
    # 58.59375 x 128 = 7500 MB/s: 7500 / 125 x 1024 = 61440 GiB, or 15360 GiB at 500
    assert "61440 GiB at 125" in finding and "15360 GiB at 500" in finding


def test_405b_does_not_fit_two_p4d():
    b = assess([PoolShape("a100", AWS["p4d.24xlarge"], 2, 4)], [FilesystemShape("f", 2400, 250)],
               WorkloadShape(405, 30, 5))
    assert b.training_state_gb == pytest.approx(6480)   # 405e9 x 16 B, vs 640 GiB of HBM
    assert b.training_state_fits is False
    assert any("training state 6480 GB" in f for f in b.findings)


def test_clients_network_bounds_the_checkpoint():
    # one p4d client: one 100 Gbps card = 12.5 GB/s, below 96000 GiB x 1000 MB/s/TiB = 93.75 GB/s
    b = assess([PoolShape("a100", AWS["p4d.24xlarge"], 1, 4)], [FilesystemShape("f", 96000, 1000)],
               WorkloadShape(7, 30, 5))
    assert b.checkpoint_write_s == pytest.approx(7 * 14 / 12.5)


def test_unknowns_are_none_not_crashes():
    b = assess([PoolShape("a10", AWS["g5.48xlarge"], 2, 1)], [FSX_24000])   # A10G TFLOPS unknown
    assert b.pools[0].bf16_pflops is None and b.bf16_pflops is None
    assert b.usd_per_hour == pytest.approx(2 * 16.288)
    unpriced = assess([P5_16, PoolShape("h200", AWS["p5e.48xlarge"], 2, 32)], [FSX_24000])
    assert unpriced.usd_per_hour is None
    assert unpriced.pools[0].usd_per_hour == pytest.approx(16 * 55.04)
    assert any("?" in line for line in report_lines(b))


def test_empty_and_storage_less_clusters():
    b = assess([], [])
    assert b.accelerators == 0 and b.fs_meets_floor is None and b.findings == ()
    no_fs = assess([P5_16], [], W70)
    assert no_fs.checkpoint_write_s is None and no_fs.checkpoint_within_budget is None
    assert any("no shared filesystem" in f for f in no_fs.findings)


SPEC = {"name": "demo", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
        "pools": [{"name": "gpu", "instance_type": "p5.48xlarge", "max_nodes": 16}],
        "storage": [{"name": "fsx", "type": "lustre", "mount": "/fsx", "capacity_gib": 24000,
                     "throughput_mbps_per_tib": 500}],
        "workload": {"model_params_b": 70}}


def test_from_design_agrees_with_assess_and_serialises():
    b = from_design(design_cluster(parse_spec(SPEC)))
    assert b == assess([P5_16], [FSX_24000], W70)
    assert json.loads(json.dumps(to_dict(b)))["pools"][0]["accelerators"] == 128
    text = "\n".join(report_lines(b))
    assert "gpu" in text and "p5.48xlarge x 16" in text and "91.6 MB/s per GPU" in text
    assert report_lines(b)[-1] == "balanced: no findings"


LLAMA_70B = {"layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8, "ffn_hidden": 28672, "vocab": 128256,
             "seq_len": 8192}


def test_from_design_counts_a_described_model_without_model_params_b():
    # Llama 3 70B's shape counts 70.55 B parameters (perf.flops.parameter_count): the balance sizes
    # its training state and checkpoint from that, as if model_params_b said so.
    from aicluster.perf import ModelShape
    from aicluster.perf.flops import parameter_count

    counted = parameter_count(ModelShape(**LLAMA_70B)) / 1e9
    assert 70 < counted < 71
    described = {**SPEC, "workload": {"model": LLAMA_70B}}
    b = from_design(design_cluster(parse_spec(described)))
    assert b == assess([P5_16], [FSX_24000], WorkloadShape(counted, 30, 5))
    assert b.checkpoint_gb == pytest.approx(counted * 14)
    # model_params_b, when given, still wins over the count
    both = {**SPEC, "workload": {"model_params_b": 70, "model": LLAMA_70B}}
    assert from_design(design_cluster(parse_spec(both))) == assess([P5_16], [FSX_24000], W70)


def test_report_lists_every_pool_and_findings():
    b = assess([P5_16, PoolShape("small", AWS["p4d.24xlarge"], 2, 2)], [FilesystemShape("f", 1200, 125)], W70)
    lines = report_lines(b)
    assert any(line.startswith("gpu ") for line in lines) and any(line.startswith("small ") for line in lines)
    assert "findings:" in lines and len(lines) == lines.index("findings:") + 1 + len(b.findings)


def test_headroom_is_what_decides_a_tight_fit():
    # 2 p4d = 640 GiB = 687.2 GB of HBM; 40e9 x 16 B = 640 GB: fits raw, not in the 80 % (549.8 GB)
    pools, fs, w = [PoolShape("a100", AWS["p4d.24xlarge"], 2, 4)], [], WorkloadShape(40, 30, 5)
    assert assess(pools, fs, w).training_state_fits is False
    assert assess(pools, fs, w, memory_headroom_pct=0).training_state_fits is True


def test_fraction_is_capped_at_one():
    # a policy pack may count more devices than the hardware's fabric figure covers
    over = assess([PoolShape("gpu", AWS["p5.48xlarge"], 2, 40)], []).pools[0]
    assert over.fabric_fraction_wired == 1.0


def test_a_spot_pool_costs_its_regions_spot_figure_in_the_plan():
    """The spec's region and the pool's capacity type price the pool (catalog/prices.yaml): 16 x p5
    on Spot in us-east-1 at the median of the region's zone prices, not the on-demand $55.04, and the
    training model's hardware carries the same per-GPU figure. No region (a what-if) is priced at
    us-east-1 on-demand and says so."""
    from aicluster.catalog.pricing import instance_price
    from aicluster.design.workload import hardware

    spec = {**SPEC, "pools": [{**SPEC["pools"][0], "capacity": "spot"}]}
    design = design_cluster(parse_spec(spec))
    spot = instance_price("aws", "p5.48xlarge", "us-east-1", "spot")
    b = from_design(design)
    assert b.usd_per_hour == pytest.approx(16 * spot.usd_per_hour) and b.usd_per_hour < 16 * 55.04
    assert b.pools[0].price_basis.startswith("us-east-1 spot, median of 6 zone(s)")
    assert any(line.strip().startswith("gpu: us-east-1 spot") for line in report_lines(b))
    hw, _ = hardware(design)
    assert hw.usd_per_accelerator_hour == pytest.approx(spot.usd_per_hour / 8)
    assert hw.price_basis.startswith("us-east-1 spot")
    paper = assess([PoolShape("gpu", AWS["p5.48xlarge"], 16, 32)], [])
    assert paper.usd_per_hour == pytest.approx(16 * 55.04)
    assert paper.pools[0].price_basis.startswith("no region given, so us-east-1 on-demand")


def test_a_gcp_pool_and_a_tpu_pool_are_priced_in_their_region():
    """GCP had no catalog price before prices.yaml: an A3 Mega pool in us-east4 and a v5p slice in
    us-east5 (per chip-hour x chips) now have one."""
    from aicluster.catalog.pricing import instance_price, tpu_price
    from aicluster.catalog.tpu_slices import host_instance, tpu_slice

    a3 = assess([PoolShape("gpu", GCP["a3-megagpu-8g"], 2, 8, region="us-east4")], [])
    assert a3.usd_per_hour == pytest.approx(2 * instance_price("gcp", "a3-megagpu-8g", "us-east4").usd_per_hour)
    host = host_instance(tpu_slice(load_catalog().tpus["v5p"], "4x4x4"))
    tpu = assess([PoolShape("tpu", host, 16, 0, region="us-east5")], [])
    assert tpu.usd_per_hour == pytest.approx(64 * tpu_price("v5p", "us-east5").usd_per_hour)
    eu = assess([PoolShape("tpu", host, 16, 0, region="asia-east1")], [])
    assert eu.usd_per_hour is None and eu.pools[0].price_basis == "no catalog price for TPU v5p in asia-east1 (on-demand)"
