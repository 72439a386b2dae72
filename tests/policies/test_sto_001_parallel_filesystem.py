"""AIC-STO-001 parallel-filesystem, over hand-written stacks."""
from __future__ import annotations

import pulumi_gcp as gcp

from tests.support import handwritten as hw

RULE = "AIC-STO-001"


def test_passes_with_fsx_for_lustre():
    assert hw.check(RULE, lambda: hw.efa_cluster()).status == "pass"


def test_fails_a_multi_node_gpu_cluster_without_one():
    def program():
        _, subnet, sg = hw.network()
        pg = hw.placement_group()
        for i in range(4):
            hw.instance(f"node{i}", subnet, sg, placement=pg, tags={**hw.TAGS, "aicluster-pool": "gpu"})
    verdict = hw.check(RULE, program)
    assert verdict.status == "fail"
    assert "4 nodes (32 GPUs: 4 x p5.48xlarge) and no parallel filesystem" in hw.messages(verdict)


def test_nfs_alone_is_not_a_parallel_filesystem():
    def program():
        net, sub = hw.gcp_network()
        for i in range(2):
            hw.gce_instance(f"a3-{i}", sub)
        gcp.filestore.Instance("home", tier="BASIC_SSD", location="us-central1-a",
                               file_shares=gcp.filestore.InstanceFileSharesArgs(name="home", capacity_gb=2560),
                               networks=[gcp.filestore.InstanceNetworkArgs(network=net.name, modes=["MODE_IPV4"])])
    verdict = hw.check(RULE, program)
    assert verdict.status == "fail" and "only home (Filestore BASIC_SSD (NFS))" in hw.messages(verdict)


def test_managed_lustre_counts():
    def program():
        net, sub = hw.gcp_network()
        for i in range(2):
            hw.gce_instance(f"a3-{i}", sub)
        gcp.lustre.Instance("lustre", capacity_gib="36000", per_unit_storage_throughput="250", filesystem="fs",
                            instance_id="lustre", location="us-central1-a", network=net.id)
    assert hw.check(RULE, program).status == "pass"


def test_one_node_needs_no_parallel_filesystem():
    def program():
        _, subnet, sg = hw.network()
        hw.instance("node", subnet, sg)
    assert hw.check(RULE, program).status == "n/a"
