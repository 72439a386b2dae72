"""NVL72 pools on the real Slurm 24.11 (issue 28, item 3): the release the nodes run
(catalog/slurm_release.yaml), from Debian trixie's chroot (tests/support/slurm_release.py).

slurmctld 24.11 takes the rendered slurm.conf and topology.conf of a cluster of three NVLink domains
(topology/block, one block per domain, switch/nvidia_imex, two prologs) and logs nothing against
them; `scontrol show topology` holds the blocks; and the scheduler places jobs as the design means:
a job that fits in a domain within one block, a job of two domains (`-N 36 --segment=18`, or plain
`-N 36`) on two whole blocks, any two when a block between them is busy. The nodes are CLOUD nodes
that never power up: `sbatch --test-only` asks the scheduler where a job would run without running
it. A mixed cluster (an NVL72 pool and a p5 pool) logs only that the p5 nodes are in no block, and
its p5 jobs still run there.

switch/nvidia_imex, both halves: slurmctld allocates each job a channel, and a real slurmd 24.11 (one
node of a domain, powered up by hand) gives the job's srun step exactly that channel,
/dev/nvidia-caps-imex-channels/channel<N>, and its batch step none, as 24.11 does. The test machine
has no NVIDIA driver, so the test's copy of slurm.conf names the device's major number
(SwitchParameters=imex_dev_major, which slurmd otherwise reads from /proc/devices), drops the GPUs
from the node (no /dev/nvidia*), and leaves out cloud_dns (no DNS zone: srun takes the address
slurmctld sends). The step's private /dev needs "/" to be a mount point and cgroups /sys: the slurmd
wrapper of this test binds both into the chroot.

Needs the release (`sudo .ci/install-slurm-release`) and root, as test_slurm_2411.py."""
from __future__ import annotations

import re
import subprocess


import pytest

from aicluster.design.cluster import design_cluster
from aicluster.design.slurm_blocks import slurm_topology
from aicluster.spec.cluster import parse_spec
from tests.support.nvl72 import nvl72_spec, nvl72_type
from tests.support.slurm_release import RELEASE, Release, first_on_path
from tests.support.slurmctld import COMMAND_TIMEOUT_S, Controller, config_complaints, fields, tool, wait_for

P5 = {"name": "p5", "instance_type": "p5.48xlarge", "max_nodes": 2}
CLUSTERS = {
    "nvl72": nvl72_spec(domains=(18, 18, 18)),
    "mixed": nvl72_spec(domains=(18,), others=(P5,), name="mixed"),
}


@pytest.fixture(scope="module")
def release_bin(tmp_path_factory):
    return Release.installed().wrappers(tmp_path_factory.mktemp("slurm-2411-nvl72-bin"))


def _controller(case: str, tmp_path_factory, release_bin):
    with nvl72_type():
        design = design_cluster(parse_spec(CLUSTERS[case]))
    with first_on_path(release_bin):
        ctl = Controller(f"nvl72-{case}", design, tmp_path_factory.mktemp(f"slurmctld-2411-{case}"))
        try:
            ctl.start()
            assert ctl.config()["SLURM_VERSION"].startswith(f"{RELEASE}.")
            yield ctl
        finally:
            ctl.stop()


@pytest.fixture(scope="module")
def nvl72(tmp_path_factory, release_bin):
    yield from _controller("nvl72", tmp_path_factory, release_bin)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory, release_bin):
    yield from _controller("mixed", tmp_path_factory, release_bin)


def where(ctl: Controller, *args: str) -> list[str]:
    """The nodes `sbatch --test-only` says the job would start on (it runs nothing)."""
    done = subprocess.run([tool("sbatch"), "--test-only", *args, "--wrap", "true"], env=ctl.env, cwd=ctl.root,
                          capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    found = re.search(r"to start at \S+ using \d+ processors on nodes (\S+) in partition", done.stderr)
    assert done.returncode == 0 and found, f"sbatch --test-only {' '.join(args)}: {done.stderr}"
    return ctl.hostnames(found.group(1))


def blocks_of(ctl: Controller, nodes: list[str]) -> dict[str, int]:
    """block name -> how many of `nodes` it holds, from the design's blocks."""
    held = {}
    for block in slurm_topology(ctl.design).blocks:
        n = len(set(ctl.hostnames(block.hostlist)) & set(nodes))
        if n:
            held[block.name] = n
    return held


def test_slurmctld_2411_takes_the_nvl72_config_and_says_nothing_against_it(nvl72):
    said = config_complaints(nvl72)
    assert said == [], "\n".join(said)
    values = nvl72.config()
    assert values["TopologyPlugin"] == "topology/block"
    assert values["SwitchType"] == "switch/nvidia_imex"
    assert values["PrologFlags"] == "Alloc,Contain,DeferBatch"
    # Two Prolog lines, both kept (24.11 lists them as Prolog[0], Prolog[1]).
    prologs = re.findall(r"^Prolog\[\d+\]\s+= \S+/(\S+)$", nvl72.run("scontrol", "show", "config"), re.M)
    assert prologs == ["aicluster-gpu-healthcheck", "aicluster-imex-config"]
    # The power-down caveat: every block node is one slurmctld never suspends.
    exc = set(nvl72.hostnames(values["SuspendExcNodes"]))
    assert all(set(nvl72.hostnames(b.hostlist)) <= exc for b in slurm_topology(nvl72.design).blocks)
    part = fields(nvl72.run("scontrol", "-o", "show", "partition", "gb200"))
    assert part["OverSubscribe"] == "EXCLUSIVE"


def test_scontrol_shows_one_block_per_domain(nvl72):
    rows = [fields(ln) for ln in nvl72.run("scontrol", "show", "topology").splitlines() if ln.strip()]
    assert [(r["BlockName"], r["Nodes"], r["BlockSize"]) for r in rows] == [
        ("gb200a", "gb200a-[1-18]", "18"), ("gb200b", "gb200b-[1-18]", "18"), ("gb200c", "gb200c-[1-18]", "18")]
    # 24.11 keeps a node that is powered down (these never powered up) in its block: the 25.x
    # regression the static nodes guard against is not this release's.
    node = fields(nvl72.run("scontrol", "-o", "show", "node", "gb200b-7"))
    assert "POWERED_DOWN" in node["State"].split("+"), node["State"]


@pytest.mark.parametrize("nodes", [18, 9, 1])
def test_a_job_that_fits_in_a_domain_gets_one_block(nvl72, nodes):
    placed = where(nvl72, "-p", "gb200", "-N", str(nodes))
    assert len(placed) == nodes and len(blocks_of(nvl72, placed)) == 1, placed


@pytest.mark.parametrize("args", [["-N", "36", "--segment=18"], ["-N", "36"]], ids=["segments", "plain"])
def test_a_job_of_two_domains_gets_two_whole_blocks(nvl72, args):
    placed = where(nvl72, "-p", "gb200", *args)
    assert sorted(blocks_of(nvl72, placed).values()) == [18, 18], placed


def test_two_domains_apart_still_make_a_job_when_the_one_between_is_busy(nvl72):
    """BlockSizes is the base alone: no aggregated pairs, so a job larger than a domain takes the free
    domains whatever their order in topology.conf. With BlockSizes=18,36 the same 24.11 pairs
    gb200a+gb200b and refuses `-N 34` here ("Requested node configuration is not available"), though
    gb200a and gb200c hold 35 free nodes (tried 2026-11-28). A job that fits in one domain still
    avoids the domain with a busy node."""
    nvl72.run("scontrol", "update", "nodename=gb200b-[1-18]", "state=drain", "reason=test: busy")
    nvl72.run("scontrol", "update", "nodename=gb200a-3", "state=drain", "reason=test: busy")
    try:
        assert blocks_of(nvl72, where(nvl72, "-p", "gb200", "-N", "34", "--segment=17")) == {"gb200a": 17,
                                                                                            "gb200c": 17}
        placed = blocks_of(nvl72, where(nvl72, "-p", "gb200", "-N", "34"))
        assert set(placed) == {"gb200a", "gb200c"} and sum(placed.values()) == 34, placed
        assert blocks_of(nvl72, where(nvl72, "-p", "gb200", "-N", "18")) == {"gb200c": 18}
    finally:
        nvl72.run("scontrol", "update", "nodename=gb200b-[1-18],gb200a-3", "state=resume")


def test_a_mixed_cluster_says_only_that_the_other_nodes_are_in_no_block(mixed):
    said = config_complaints(mixed)
    assert len(said) == 1 and said[0].endswith("warning: blocks lack access to 2 nodes: p5-[1-2]"), said
    assert mixed.config()["TopologyPlugin"] == "topology/block"
    assert where(mixed, "-p", "p5", "-N", "2") == ["p5-1", "p5-2"]
    assert blocks_of(mixed, where(mixed, "-p", "gb200", "-N", "18")) == {"gb200a": 18}


# --- slurmd: the job's IMEX channel ---------------------------------------------------------------

IMEX_MAJOR = 511          # any major: the channel is a device node in the step's own tmpfs
NODE = "gb200a-1"


class ImexNode(Controller):
    """The rendered configuration, with the test machine's three differences (module docstring)."""

    def write_configs(self, design) -> None:
        super().write_configs(design)
        conf = self.conf.read_text().replace("cloud_dns,", "")
        conf = re.sub(r" Gres=gpu:\S+", "", conf) + f"SwitchParameters=imex_dev_major={IMEX_MAJOR}\n"
        self.conf.write_text(conf)
        (self.conf.parent / "gres.conf").write_text("")


def registered(ctl: Controller, node: str) -> bool:
    """The node's slurmd has registered and slurmctld takes it as booted. Right after `power_up` the
    state is already IDLE+CLOUD+POWERING_UP: a job sent then waits in CONFIGURING for the boot."""
    states = set(fields(ctl.run("scontrol", "-o", "show", "node", node))["State"].split("+"))
    return "IDLE" in states and not states & {"POWERING_UP", "NOT_RESPONDING", "DOWN"}


@pytest.fixture(scope="module")
def imex_node(tmp_path_factory, release_bin):
    wrappers = Release.installed().wrappers(tmp_path_factory.mktemp("slurm-2411-slurmd-bin"))
    slurmd = wrappers / "slurmd"
    slurmd.write_text(slurmd.read_text().replace(
        'mount --rbind /proc "$root/proc"\n',
        'mount --bind "$root" "$root"\nmount --rbind /proc "$root/proc"\nmount --rbind /sys "$root/sys"\n'))
    with nvl72_type():
        design = design_cluster(parse_spec(nvl72_spec(domains=(18,), name="imex")))
    with first_on_path(wrappers):
        ctl = ImexNode("nvl72-imex", design, tmp_path_factory.mktemp("slurmd-2411-imex"))
        try:
            ctl.start()
            # A recording stand-in for the IMEX prolog: this test is about the switch plugin's channel
            # (tests/scripts/test_imex_config.py runs the real program). The real one, run by a slurmd
            # that inherits the test worker's environment, stalled the job for minutes in a full run.
            prolog = ctl.root / "bin" / "aicluster-imex-config"
            prolog.write_text(f'#!/bin/sh\necho "aicluster-imex-config $*" >> {ctl.calls}\nexit 0\n')
            prolog.chmod(0o755)
            ctl.run("scontrol", "update", f"nodename={NODE}", "state=power_up")
            ctl.start_slurmd(NODE)
            wait_for(f"{NODE} to register", lambda: registered(ctl, NODE), 60, ctl.diagnostics)
            yield ctl
        finally:
            ctl.stop()


def test_slurmd_gives_the_job_s_step_its_own_imex_channel(imex_node):
    out = imex_node.root / "job.out"
    script = ("srun sh -c 'for c in /dev/nvidia-caps-imex-channels/*; do stat -c \"step %n %F %t:%T\" $c; done'; "
              "ls /dev/nvidia-caps-imex-channels | sed 's/^/batch /'; echo end")
    submitted = imex_node.run("sbatch", "-p", "gb200", "-N", "1", "-w", NODE, "-o", str(out), "--wrap", script)
    job = re.search(r"Submitted batch job (\d+)", submitted).group(1)
    # 180 s: on a loaded 2-core machine (the whole suite beside it) the job's two prologs, the batch
    # step and the srun step took over 60 s; alone it takes a few seconds.
    wait_for("the job's output", lambda: out.exists() and "end" in out.read_text(), 180,
             lambda: imex_node.run("scontrol", "-o", "show", "job", job) + imex_node.diagnostics())
    said = [ln for ln in out.read_text().splitlines() if ln.startswith(("step ", "batch "))]
    # One channel, a character device of the configured major; the batch step sees none on 24.11.
    assert len(said) == 1 and re.fullmatch(rf"step /dev/nvidia-caps-imex-channels/channel(\d+) character special "
                                           rf"file {IMEX_MAJOR:x}:([0-9a-f]+)", said[0]), out.read_text()
    channel = int(re.search(r"channel(\d+)", said[0]).group(1))
    assert channel > 0 and said[0].endswith(f":{channel:x}")
    assert fields(imex_node.run("scontrol", "-o", "show", "job", job))["JobState"] == "COMPLETED"
