"""Slurm for NVL72 pools (issue 28, item 3), the design and the rendered files: one topology/block
block per NVLink domain (= per pool), BlockSizes, switch/nvidia_imex, the prolog flags and the IMEX
prolog, the exclusive partition, and every block node kept powered up. The real slurmctld 24.11 reads
the same files in tests/slurm/test_nvl72_slurmctld.py."""
from __future__ import annotations

import dataclasses
import shutil
import subprocess

import pytest

from aicluster.catalog.slurm_release import slurm_release
from aicluster.design.cluster import design_cluster
from aicluster.design.slurm_blocks import BLOCK, IMEX_SWITCH, TREE, block_sizes, slurm_topology
from aicluster.errors import SpecError
from aicluster.render.slurm_config import SlurmRuntime, render_slurm_configs
from aicluster.spec.cluster import parse_spec
from tests.support import AWS_MIN
from tests.support.nvl72 import nvl72_spec, nvl72_type

RT = SlurmRuntime(controller_host="head", controller_addr="10.0.0.10")
P5 = {"name": "p5", "instance_type": "p5.48xlarge", "max_nodes": 2}


def design(spec: dict):
    with nvl72_type():
        return design_cluster(parse_spec(spec))


def lines(text: str, *prefixes: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith(prefixes)]


def test_a_cluster_without_nvlink_domains_keeps_the_tree():
    d = design_cluster(parse_spec(AWS_MIN))
    topo = slurm_topology(d)
    assert (topo.plugin, topo.blocks, topo.switch_type) == (TREE, (), None)
    files = render_slurm_configs(d, RT)
    assert lines(files["slurm.conf"], "TopologyPlugin", "SwitchType", "PrologFlags", "Prolog=") == [
        "PrologFlags=Alloc,Contain", "Prolog=/opt/aicluster/bin/aicluster-gpu-healthcheck", "TopologyPlugin=topology/tree"]
    assert lines(files["topology.conf"], "SwitchName", "BlockName", "BlockSizes") == ["SwitchName=gpu Nodes=gpu-[1-4]"]


def test_one_block_per_domain_named_after_its_pool():
    d = design(nvl72_spec())
    topo = slurm_topology(d)
    assert topo.plugin == BLOCK and topo.switch_type == IMEX_SWITCH
    assert [(b.name, b.hostlist, b.nodes) for b in topo.blocks] == [("gb200a", "gb200a-[1-18]", 18),
                                                                   ("gb200b", "gb200b-[1-18]", 18)]
    assert topo.block_sizes == (18,) and topo.unblocked == ()
    files = render_slurm_configs(d, RT)
    assert lines(files["topology.conf"], "SwitchName", "BlockName", "BlockSizes") == [
        "BlockName=gb200a Nodes=gb200a-[1-18]", "BlockName=gb200b Nodes=gb200b-[1-18]", "BlockSizes=18"]


def test_slurm_conf_of_an_nvl72_cluster():
    files = render_slurm_configs(design(nvl72_spec()), RT)
    conf = files["slurm.conf"]
    assert lines(conf, "TopologyPlugin", "SwitchType", "PrologFlags", "Prolog=") == [
        "PrologFlags=Alloc,Contain,DeferBatch",
        "Prolog=/opt/aicluster/bin/aicluster-gpu-healthcheck", "Prolog=/opt/aicluster/bin/aicluster-imex-config",
        "TopologyPlugin=topology/block", "SwitchType=switch/nvidia_imex"]
    # One exclusive partition for both domains: jobs get whole nodes, and one job can span domains.
    assert lines(conf, "PartitionName") == [
        "PartitionName=gb200 Nodes=gb200a-[1-18],gb200b-[1-18] Default=YES State=UP MaxTime=INFINITE "
        "DefMemPerCPU=10376 OverSubscribe=EXCLUSIVE"]


def test_every_block_node_is_never_powered_down():
    """The power-down caveat: on Slurm 25.x a powered-down node leaves its block. Every node of every
    block is static and in SuspendExcNodes, and no block node is dynamic."""
    d = design(nvl72_spec(domains=(18, 9)))
    conf = render_slurm_configs(d, RT)["slurm.conf"]
    exc = lines(conf, "SuspendExcNodes=")[0].split("=", 1)[1].split(",")
    for block in slurm_topology(d).blocks:
        assert block.hostlist in exc
        assert all("dynamic" not in ln for ln in lines(conf, f"NodeName={block.hostlist} "))


def test_a_dynamic_node_in_a_domain_is_refused_by_the_design():
    """The spec makes every domain node static; a design built otherwise is refused, not rendered."""
    d = design(nvl72_spec(domains=(18,)))
    ns = dataclasses.replace(d.slurm.nodesets[0], static_hostlist="gb200a-[1-9]", dynamic_hostlist="gb200a-[10-18]")
    broken = dataclasses.replace(d, slurm=dataclasses.replace(d.slurm, nodesets=(ns,)))
    with pytest.raises(ValueError, match="must all be static"):
        slurm_topology(broken)


@pytest.mark.parametrize("domains, sizes", [((18,), (18,)), ((18, 18, 18), (18,)), ((9, 18), (9,)), ((9, 9), (9,))])
def test_block_sizes_are_the_base_block_only(domains, sizes):
    """topology.conf(5): the base first, each further size the base times a power of two; one size
    is always valid, and no aggregated level pairs domains that are no closer than any others."""
    assert block_sizes(domains) == sizes
    assert slurm_topology(design(nvl72_spec(domains=domains))).block_sizes == sizes


def test_block_sizes_need_a_domain():
    with pytest.raises(ValueError):
        block_sizes(())


def test_gcp_a4x_domains_are_blocks_too():
    d = design(nvl72_spec(cloud="gcp", domains=(18,)))
    assert [(b.name, b.hostlist) for b in slurm_topology(d).blocks] == [("gb200a", "gb200a-[1-18]")]


def test_other_pools_of_a_mixed_cluster_are_in_no_block():
    """One TopologyPlugin for the whole cluster on 24.11: the other pools' nodes stay out of the
    blocks (Slurm places them by plain best fit) and are named in a comment."""
    d = design(nvl72_spec(domains=(18,), others=(P5,)))
    topo = slurm_topology(d)
    assert [b.name for b in topo.blocks] == ["gb200a"] and topo.unblocked == ("p5-[1-2]",)
    text = render_slurm_configs(d, RT)["topology.conf"]
    assert "p5-[1-2]" not in "".join(lines(text, "BlockName", "SwitchName"))
    assert "# p5-[1-2]" in text


def test_a_partition_never_mixes_nvlink_domains_and_other_pools():
    spec = nvl72_spec(domains=(18,), others=(dict(P5, partition="gb200"),))
    with nvl72_type(), pytest.raises(SpecError) as info:
        parse_spec(spec)
    [problem] = [p for p in info.value.problems if p.path == "pools[1].partition"]
    assert problem.value == "gb200" and "NVLink" in problem.allowed and problem.suggestion == "p5"


def test_the_pinned_release_is_before_the_block_power_down_regression():
    """Slurm 25.x drops a powered-down node from its block (ParallelCluster writes
    Topology=default:<block> on the NodeName lines from 25.11, cookbook PR 3123), and 25.05 moves
    per-partition topology to topology.yaml. Neither applies to the 24.11 the nodes run; whoever
    moves the release past 24.x must revisit templates/slurm/topology.conf.j2 and the NodeName lines."""
    major, minor = (int(x) for x in slurm_release().release.split(".")[:2])
    assert (major, minor) < (25, 5), "Slurm 25.x: see design/slurm_blocks.py on block topology and power-down"


def test_the_imex_prolog_reaches_every_gcp_node_of_an_nvl72_cluster_only(tmp_path):
    """AWS nodes fetch every program by its content key (tests/aws/test_boot_programs.py); GCP nodes
    carry theirs in metadata, so only clusters whose slurm.conf names the IMEX prolog carry it."""
    import yaml

    from aicluster.gcp.cluster import compute_user_data

    def paths(d, pool):
        text = compute_user_data(d, pool, [], controller_addr="10.0.0.10", munge_secret="s", bucket="b")
        return {f["path"] for f in yaml.safe_load(text)["write_files"]}

    prolog = "/opt/aicluster/bin/aicluster-imex-config"
    mixed = design(nvl72_spec(cloud="gcp", domains=(18,), others=({"name": "h100", "instance_type": "h100",
                                                                   "max_nodes": 2},)))
    assert prolog in paths(mixed, "gb200a") and prolog in paths(mixed, "h100")
    cloud_init = shutil.which("cloud-init")
    assert cloud_init, "cloud-init is required for this test (.ci/run installs it)"
    path = tmp_path / "gb200a.yaml"
    path.write_text(compute_user_data(mixed, "gb200a", [], controller_addr="10.0.0.10", munge_secret="s", bucket="b"))
    run = subprocess.run([cloud_init, "schema", "--config-file", str(path)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    plain = design_cluster(parse_spec({"name": "tg", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a",
                                       "pools": [{"name": "h100", "instance_type": "h100", "max_nodes": 2}]}))
    assert prolog not in paths(plain, "h100")
