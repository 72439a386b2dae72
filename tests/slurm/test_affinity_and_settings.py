"""Sockets, GPU-to-core binding and custom settings (issue 15, items 5 and 10) as real slurmctld
daemons of both releases read them: the machine's 22.05 and Debian trixie's 24.11 in its chroot
(tests/support/slurm_release.py).

One GCP cluster with an A3 High pool (two sockets, GPUs 0-3 bound to socket 0's cores and 4-7 to
socket 1's: catalog gpus_per_socket) and an A3 Mega pool (two sockets, no sourced GPU layout, so no
Cores=), plus custom settings at both levels. Each controller must take the files, log nothing
against them (24.11), and report: the real socket layout on the node, GRES bound to both sockets,
the cluster-level settings (aicluster's SchedulerParameters kept, the user's added) and the
pool-level ones on the pool's partition.

Needs root, slurmctld, munged and the 24.11 chroot: a missing one fails the test (never skips).
"""
from __future__ import annotations

from contextlib import nullcontext

import pytest

from aicluster.design.cluster import design_cluster
from aicluster.spec.cluster import parse_spec
from tests.support.slurm_release import RELEASE, Release, first_on_path
from tests.support.slurmctld import Controller, config_complaints, fields

SPEC = {
    "name": "affinity", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a",
    "pools": [
        {"name": "high", "instance_type": "a3-highgpu-8g", "max_nodes": 2,
         "image": "projects/my-project/global/images/family/my-a3-image",
         "slurm_settings": {"MaxTime": "2-00:00:00", "PriorityTier": 10, "DefaultTime": "01:00:00"}},
        {"name": "mega", "instance_type": "a3-megagpu-8g", "max_nodes": 2},
    ],
    "slurm": {"settings": {"MaxJobCount": 20000, "PriorityType": "priority/multifactor",
                           "MaxArraySize": 10001, "SchedulerParameters": "bf_max_job_test=500",
                           "KillWait": 120}},
}

# What a first start of a private controller logs on any release (test_slurm_2411.py's list).

@pytest.fixture(scope="module", params=["22.05", RELEASE])
def ctl(request, tmp_path_factory):
    release = request.param
    design = design_cluster(parse_spec(SPEC))
    wrappers = (first_on_path(Release.installed().wrappers(tmp_path_factory.mktemp("bin")))
                if release == RELEASE else nullcontext())
    with wrappers:
        controller = Controller("affinity", design, tmp_path_factory.mktemp(f"affinity-{release}"))
        try:
            controller.start()
            version = controller.config()["SLURM_VERSION"]
            assert version.startswith(f"{release}."), f"expected Slurm {release}, talking to {version}"
            yield controller
        finally:
            controller.stop()


def node(ctl: Controller, name: str) -> dict[str, str]:
    return fields(ctl.run("scontrol", "-o", "show", "node", name))


def test_nodes_have_their_real_sockets(ctl):
    for name, cores_per_socket in (("high-1", "52"), ("mega-1", "52")):
        n = node(ctl, name)
        assert (n["Sockets"], n["CoresPerSocket"], n["ThreadsPerCore"], n["CPUTot"]) == \
            ("2", cores_per_socket, "2", "208"), n


def test_gpus_are_bound_to_their_sockets_cores(ctl):
    """slurmctld reads gres.conf's Cores= into the GPUs' socket list: S:0-1 over the node's 8 GPUs
    (4 per socket); the Mega pool has no sourced layout, so no binding at all."""
    assert node(ctl, "high-1")["Gres"] == "gpu:h100:8(S:0-1)"
    assert node(ctl, "mega-1")["Gres"] == "gpu:h100:8"


def test_cluster_settings_are_in_effect_and_aiclusters_own_are_kept(ctl):
    config = ctl.config()
    assert config["MaxJobCount"] == "20000"
    assert config["PriorityType"] == "priority/multifactor"
    assert config["MaxArraySize"] == "10001"
    assert config["KillWait"] == "120 sec"
    items = config["SchedulerParameters"].split(",")
    assert {"nohold_on_prolog_fail", "bf_continue", "bf_max_job_test=500"} <= set(items), items
    assert config["TaskProlog"].endswith("/bin/aicluster-task-prolog")


def test_pool_settings_are_on_its_partition_only(ctl):
    parts = {f["PartitionName"]: f for f in map(fields, ctl.run("scontrol", "-o", "show", "partition").splitlines())}
    assert (parts["high"]["MaxTime"], parts["high"]["PriorityTier"], parts["high"]["DefaultTime"]) == \
        ("2-00:00:00", "10", "01:00:00"), parts["high"]
    assert parts["high"]["OverSubscribe"] == "EXCLUSIVE"        # aicluster's own, untouched
    assert (parts["mega"]["MaxTime"], parts["mega"]["PriorityTier"]) == ("UNLIMITED", "1"), parts["mega"]


def test_the_controller_says_nothing_against_the_config(ctl):
    said = config_complaints(ctl)
    assert said == [], "\n".join(said)


def test_complaints_about_the_config_are_told_from_the_machines(tmp_path):
    """The filter the two 'says nothing' tests share: a loaded machine's clock self-test is no
    complaint about the config (it failed a CI run under load); a renamed parameter is."""
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "slurmctld.log").write_text(
        "[t] error: High latency for 1000 calls to gettimeofday(): 224 microseconds\n"
        "[t] error: Could not open node state file /var/spool/slurmctld/node_state: No such file\n"
        "[t] error: SchedulerParameters: bf_busy_nodes is deprecated\n")
    said = config_complaints(type("Ctl", (), {"root": tmp_path})())
    assert said == ["[t] error: SchedulerParameters: bf_busy_nodes is deprecated"]
