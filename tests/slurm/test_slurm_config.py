"""The rendered Slurm configuration, line by line: the example stacks and the edge cases of node
counts, pools, accounting and accelerators. test_real_slurmctld.py feeds the same texts to a
real slurmctld."""
from __future__ import annotations

import copy
import dataclasses
import re
from pathlib import Path

import pytest

from aicluster.design.cluster import design_cluster
from aicluster.render.slurm_config import (DCGM_MAX_TIMEOUT_S, KILL_WAIT_DEFAULT_S, KILL_WAIT_MAX_S, SLURM_CONFIG_FILES,
                                    SUSPEND_TIMEOUT_S, SlurmRuntime, render_slurm_configs)
from aicluster.spec.cluster import parse_spec
from tests.support import AWS_MIN, stack_spec

RT = SlurmRuntime(controller_host="head", controller_addr="10.0.0.10")


def design(spec: dict):
    return design_cluster(parse_spec(spec))


def render(spec: dict, runtime: SlurmRuntime = RT) -> dict[str, str]:
    return render_slurm_configs(design(spec), runtime)


def spec(*pools: dict, **extra) -> dict:
    s = copy.deepcopy(AWS_MIN)
    s["pools"] = list(pools)
    s.update(extra)
    return s


def settings(conf: str) -> dict[str, str]:
    """The global `Key=Value` lines of slurm.conf (node and partition lines left out); fails on a
    key set twice, which Slurm would silently resolve to the last one."""
    out: dict[str, str] = {}
    for line in lines(conf):
        key, _, value = line.partition("=")
        if key in ("NodeName", "PartitionName"):
            continue
        assert key not in out, f"{key} set twice"
        out[key] = value
    return out


def lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def starting(text: str, prefix: str) -> list[str]:
    return [ln for ln in lines(text) if ln.startswith(prefix)]


# --- the example stacks ----------------------------------------------------------------------


def test_p5_stack_slurm_conf():
    conf = render(stack_spec("aws-p5-slurm"))["slurm.conf"]
    s = settings(conf)
    assert s["ClusterName"] == "p5-train"
    assert s["SlurmctldHost"] == "head(10.0.0.10)"
    assert s["SlurmUser"] == "slurm"
    assert (s["SlurmctldPort"], s["SlurmdPort"]) == ("6817", "6818")
    assert s["AuthType"] == "auth/munge"
    assert s["StateSaveLocation"] == "/var/spool/slurmctld"
    assert s["SlurmdSpoolDir"] == "/var/spool/slurmd"
    assert s["SlurmctldPidFile"] == "/run/slurm/slurmctld.pid"
    assert s["SlurmctldLogFile"] == "/var/log/slurm/slurmctld.log"
    assert s["SlurmctldParameters"].split(",") == ["enable_configless", "cloud_dns", "idle_on_node_suspend"]
    assert s["PrivateData"] == "cloud"
    assert s["TreeWidth"] == "65533"
    assert s["ReturnToService"] == "2"
    assert s["JobRequeue"] == "1"
    assert s["PrologFlags"] == "Alloc,Contain"
    assert s["Prolog"] == "/opt/aicluster/bin/aicluster-gpu-healthcheck"
    # The same check, periodically on every node (issue 13, finding 10): before, only a prolog.
    assert s["HealthCheckProgram"] == "/opt/aicluster/bin/aicluster-gpu-healthcheck"
    assert (s["HealthCheckInterval"], s["HealthCheckNodeState"]) == ("300", "ANY")
    # Room for the prolog's opt-in DCGM diagnostic (300 s) and its fast checks; Slurm's default is 10.
    assert s["BatchStartTimeout"] == "360"
    # 70B x 14 B/param = 980 GB at the balance model's 11.7 GB/s: 84 s, twice that from SIGTERM to SIGKILL.
    assert s["KillWait"] == "168"
    assert s["PropagateResourceLimitsExcept"] == "MEMLOCK"
    assert s["SelectType"] == "select/cons_tres"
    assert s["SelectTypeParameters"] == "CR_Core_Memory"
    assert s["ProctrackType"] == "proctrack/cgroup"
    assert s["TaskPlugin"] == "task/affinity,task/cgroup"
    assert s["JobAcctGatherType"] == "jobacct_gather/cgroup"
    assert s["GresTypes"] == "gpu"
    assert s["TopologyPlugin"] == "topology/tree"
    assert s["LaunchParameters"] == "enable_nss_slurm,use_interactive_step"
    # nohold_on_prolog_fail: a failed health check (the prolog) requeues the job without holding it
    # (ParallelCluster's setting; slurm.conf man page 22.05 and later).
    assert s["SchedulerParameters"] == "bf_continue,salloc_wait_nodes,nohold_on_prolog_fail"
    assert s["ResumeProgram"] == "/opt/aicluster/bin/aicluster-resume"
    assert s["SuspendProgram"] == "/opt/aicluster/bin/aicluster-suspend"
    assert s["ResumeFailProgram"] == "/opt/aicluster/bin/aicluster-resume-fail"
    assert s["SuspendTime"] == "600"                 # spec default: 10 idle minutes
    assert s["SuspendTimeout"] == str(SUSPEND_TIMEOUT_S)
    assert s["ResumeTimeout"] == "1800"              # 30 minutes for a p5 to boot and register
    assert (s["ResumeRate"], s["SuspendRate"]) == ("0", "0")
    assert "SuspendExcNodes" not in s                # min_nodes 0: nothing always on
    # slurm.accounting managed: slurmdbd on the head (its database in RDS), fairshare.
    assert (s["AccountingStorageType"], s["AccountingStorageHost"]) == ("accounting_storage/slurmdbd", "10.0.0.10")
    assert s["PriorityType"] == "priority/multifactor"

    assert starting(conf, "NodeName=") == [
        "NodeName=gpu-[1-16] CPUs=192 Boards=1 SocketsPerBoard=2 CoresPerSocket=48 ThreadsPerCore=2 RealMemory=1992294 Gres=gpu:h100:8 "
        "Features=p5.48xlarge,gpu,h100,efa,dynamic State=CLOUD",
    ]
    assert starting(conf, "PartitionName=") == [
        "PartitionName=gpu Nodes=gpu-[1-16] Default=YES State=UP MaxTime=INFINITE "
        "DefMemPerCPU=10376 OverSubscribe=EXCLUSIVE",
    ]


def test_p5_stack_other_files():
    files = render(stack_spec("aws-p5-slurm"))
    assert lines(files["gres.conf"]) == ["NodeName=gpu-[1-16] Name=gpu Type=h100 File=/dev/nvidia[0-7]"]
    assert lines(files["topology.conf"]) == ["SwitchName=gpu Nodes=gpu-[1-16]"]
    assert lines(files["cgroup.conf"]) == [
        "ConstrainCores=yes", "ConstrainRAMSpace=yes", "ConstrainDevices=yes", "ConstrainSwapSpace=no",
    ]


def test_p4d_stack_static_and_dynamic_nodes():
    files = render(stack_spec("aws-p4d-small"))
    conf = files["slurm.conf"]
    assert settings(conf)["ClusterName"] == "p4d-small"
    assert starting(conf, "NodeName=") == [
        "NodeName=a100-1 CPUs=96 Boards=1 SocketsPerBoard=2 CoresPerSocket=24 ThreadsPerCore=2 RealMemory=1120665 Gres=gpu:a100:8 "
        "Features=p4d.24xlarge,a100,gpu,efa,static State=CLOUD",
        "NodeName=a100-2 CPUs=96 Boards=1 SocketsPerBoard=2 CoresPerSocket=24 ThreadsPerCore=2 RealMemory=1120665 Gres=gpu:a100:8 "
        "Features=p4d.24xlarge,a100,gpu,efa,dynamic State=CLOUD",
    ]
    assert settings(conf)["SuspendExcNodes"] == "a100-1"
    assert starting(conf, "PartitionName=") == [
        "PartitionName=a100 Nodes=a100-[1-2] Default=YES State=UP MaxTime=INFINITE "
        "DefMemPerCPU=11673 OverSubscribe=EXCLUSIVE",
    ]
    assert lines(files["gres.conf"]) == ["NodeName=a100-[1-2] Name=gpu Type=a100 File=/dev/nvidia[0-7]"]
    assert lines(files["topology.conf"]) == ["SwitchName=a100 Nodes=a100-[1-2]"]


@pytest.mark.parametrize("stack", ["aws-p5-slurm", "aws-p4d-small"])
def test_every_file_says_who_rendered_it_and_how_it_is_published(stack):
    files = render(stack_spec(stack))
    assert set(files) == set(SLURM_CONFIG_FILES)
    for name, text in files.items():
        header = text.split("\n\n")[0]
        assert header.startswith(f"# {name} for cluster ")
        assert "rendered by aicluster" in header
        assert "scontrol reconfigure" in header
        assert text.endswith("\n") and not text.endswith("\n\n\n")
        assert "None" not in text


# --- edge cases ------------------------------------------------------------------------------


def test_min_nodes_zero_has_no_static_line_and_no_suspend_exc_nodes():
    conf = render(spec({"name": "gpu", "instance_type": "p5.48xlarge", "min_nodes": 0, "max_nodes": 4}))["slurm.conf"]
    assert [ln.split()[0] for ln in starting(conf, "NodeName=")] == ["NodeName=gpu-[1-4]"]
    assert "static" not in conf.split("# --- nodes")[1]
    assert "SuspendExcNodes" not in settings(conf)


def test_min_equal_max_has_no_dynamic_line():
    conf = render(spec({"name": "gpu", "instance_type": "p5.48xlarge", "min_nodes": 4, "max_nodes": 4}))["slurm.conf"]
    nodes = starting(conf, "NodeName=")
    assert len(nodes) == 1
    assert nodes[0].startswith("NodeName=gpu-[1-4] ")
    assert "Features=p5.48xlarge,gpu,h100,efa,static " in nodes[0]
    assert settings(conf)["SuspendExcNodes"] == "gpu-[1-4]"


def test_static_nodes_of_every_pool_are_never_suspended():
    conf = render(spec(
        {"name": "gpu", "instance_type": "p5.48xlarge", "min_nodes": 2, "max_nodes": 8},
        {"name": "a100", "instance_type": "p4d.24xlarge", "min_nodes": 1, "max_nodes": 4},
    ))["slurm.conf"]
    assert settings(conf)["SuspendExcNodes"] == "gpu-[1-2],a100-1"
    assert [ln.split()[0] for ln in starting(conf, "NodeName=")] == [
        "NodeName=gpu-[1-2]", "NodeName=gpu-[3-8]", "NodeName=a100-1", "NodeName=a100-[2-4]",
    ]


def test_two_pools_two_partitions_first_is_default_and_topology_has_a_top_switch():
    files = render(spec(
        {"name": "h100", "instance_type": "p5.48xlarge", "max_nodes": 4},
        {"name": "a100", "instance_type": "p4d.24xlarge", "max_nodes": 2},
    ))
    parts = starting(files["slurm.conf"], "PartitionName=")
    assert [p.split()[:2] for p in parts] == [["PartitionName=h100", "Nodes=h100-[1-4]"],
                                              ["PartitionName=a100", "Nodes=a100-[1-2]"]]
    assert "Default=YES" in parts[0].split()
    assert "Default=YES" not in parts[1]
    assert lines(files["topology.conf"]) == [
        "SwitchName=h100 Nodes=h100-[1-4]",
        "SwitchName=a100 Nodes=a100-[1-2]",
        "SwitchName=top Switches=h100,a100",
    ]
    assert lines(files["gres.conf"]) == [
        "NodeName=h100-[1-4] Name=gpu Type=h100 File=/dev/nvidia[0-7]",
        "NodeName=a100-[1-2] Name=gpu Type=a100 File=/dev/nvidia[0-7]",
    ]


def test_top_switch_never_takes_a_pool_name():
    topo = render(spec(
        {"name": "top", "instance_type": "p5.48xlarge", "max_nodes": 2},
        {"name": "a100", "instance_type": "p4d.24xlarge", "max_nodes": 2},
    ))["topology.conf"]
    names = [ln.split()[0] for ln in lines(topo)]
    assert len(names) == len(set(names)) == 3
    assert lines(topo)[-1] == "SwitchName=top-root Switches=top,a100"


def test_accounting_on_points_at_slurmdbd_on_the_head():
    s = spec({"name": "gpu", "instance_type": "p5.48xlarge", "max_nodes": 2}, slurm={"accounting": True})
    conf = settings(render(s)["slurm.conf"])
    assert conf["AccountingStorageType"] == "accounting_storage/slurmdbd"
    assert conf["AccountingStorageHost"] == "10.0.0.10"      # the head itself by default
    assert conf["AccountingStorageTRES"] == "gres/gpu"
    named = settings(render(s, dataclasses.replace(RT, accounting_host="head"))["slurm.conf"])
    assert named["AccountingStorageHost"] == "head"


def test_accounting_off_writes_no_accounting_storage():
    conf = render(spec({"name": "gpu", "instance_type": "p5.48xlarge", "max_nodes": 2}))["slurm.conf"]
    assert not [ln for ln in lines(conf) if ln.startswith("AccountingStorage")]
    # Not even accounting_storage/none: Slurm 23.11 removed the none plugins.
    assert "accounting_storage/none" not in "\n".join(lines(conf))


def test_trainium_pool_has_no_gres_and_no_gres_conf_line():
    files = render(spec(
        {"name": "trn", "instance_type": "trn1n.32xlarge", "max_nodes": 4},
        {"name": "gpu", "instance_type": "p5.48xlarge", "max_nodes": 2},
    ))
    trn = [ln for ln in starting(files["slurm.conf"], "NodeName=") if ln.startswith("NodeName=trn")]
    assert trn == ["NodeName=trn-[1-4] CPUs=128 Boards=1 SocketsPerBoard=1 CoresPerSocket=64 ThreadsPerCore=2 RealMemory=498073 "
                   "Features=trn1n.32xlarge,trn,trainium,efa,dynamic State=CLOUD"]
    assert lines(files["gres.conf"]) == ["NodeName=gpu-[1-2] Name=gpu Type=h100 File=/dev/nvidia[0-7]"]


def test_trainium_only_cluster_has_an_empty_gres_conf():
    files = render(spec({"name": "trn", "instance_type": "trn1n.32xlarge", "max_nodes": 2}))
    assert lines(files["gres.conf"]) == []
    assert "Gres=" not in files["slurm.conf"]


def test_single_node_pool_is_not_exclusive():
    conf = render(spec({"name": "solo", "instance_type": "p5.48xlarge", "max_nodes": 1}))["slurm.conf"]
    (part,) = starting(conf, "PartitionName=")
    assert part.startswith("PartitionName=solo Nodes=solo-1 Default=YES State=UP MaxTime=INFINITE")
    assert "OverSubscribe" not in part


def test_one_gpu_nodes_name_one_device_file():
    d = design(spec({"name": "gpu", "instance_type": "p5.48xlarge", "max_nodes": 2}))
    one_gpu = dataclasses.replace(d.slurm.nodesets[0], gres="gpu:h100:1", gpu_count=1)
    d = dataclasses.replace(d, slurm=dataclasses.replace(d.slurm, nodesets=(one_gpu,)))
    assert lines(render_slurm_configs(d, RT)["gres.conf"]) == [
        "NodeName=gpu-[1-2] Name=gpu Type=h100 File=/dev/nvidia0"]


def test_spec_times_reach_power_saving():
    s = spec({"name": "gpu", "instance_type": "p5.48xlarge", "max_nodes": 2},
             slurm={"suspend_idle_min": 2.5, "resume_timeout_min": 45})
    conf = settings(render(s)["slurm.conf"])
    assert (conf["SuspendTime"], conf["ResumeTimeout"]) == ("150", "2700")


def test_runtime_paths_and_ports_reach_the_config():
    rt = SlurmRuntime(controller_host="ctl", controller_addr="192.0.2.7", conf_dir="/c", bin_dir="/b",
                      state_dir="/s", slurmd_spool_dir="/d", log_dir="/l", run_dir="/r",
                      slurm_user="alice", slurmctld_port=7001, slurmd_port=7002)
    conf = settings(render(stack_spec("aws-p5-slurm"), rt)["slurm.conf"])
    assert conf["SlurmctldHost"] == "ctl(192.0.2.7)"
    assert (conf["SlurmUser"], conf["SlurmctldPort"], conf["SlurmdPort"]) == ("alice", "7001", "7002")
    assert (conf["StateSaveLocation"], conf["SlurmdSpoolDir"]) == ("/s", "/d")
    assert (conf["SlurmctldPidFile"], conf["SlurmdPidFile"]) == ("/r/slurmctld.pid", "/r/slurmd.pid")
    assert (conf["SlurmctldLogFile"], conf["SlurmdLogFile"]) == ("/l/slurmctld.log", "/l/slurmd.log")
    for key, prog in [("ResumeProgram", "aicluster-resume"), ("SuspendProgram", "aicluster-suspend"),
                      ("ResumeFailProgram", "aicluster-resume-fail"), ("Prolog", "aicluster-gpu-healthcheck"),
                      ("HealthCheckProgram", "aicluster-gpu-healthcheck")]:
        assert conf[key] == f"/b/{prog}"


# Options a newer Slurm rejects or calls defunct: ControlMachine, FastSchedule, AccountingStorageLoc;
# in 23.11 the none plugins, select/cons_res, CgroupAutomount and the Kmem options; later
# CommunicationParameters=NoAddrCache and SlurmctldParameters=cloud_reg_addrs. AutoDetect needs an
# NVML build.
RETIRED = re.compile(r"^(ControlMachine|ControlAddr|BackupController|FastSchedule|CgroupAutomount|"
                     r"\w*Kmem\w*|CacheGroups|SchedulerPort|AutoDetect|AccountingStorageLoc)=|/none$|"
                     r"cons_res|NoAddrCache|cloud_reg_addrs", re.M)


@pytest.mark.parametrize("stack", ["aws-p5-slurm", "aws-p4d-small"])
def test_no_option_removed_in_newer_slurm(stack):
    for name, text in render(stack_spec(stack)).items():
        body = "\n".join(lines(text))
        assert not RETIRED.search(body), f"{name}: {RETIRED.search(body).group(0)}"


def test_non_slurm_cluster_is_refused():
    d = design(spec({"name": "gpu", "instance_type": "p5.48xlarge", "max_nodes": 2}, scheduler="kubernetes",
                    kubernetes={"api_access": "vpc"}))
    with pytest.raises(ValueError, match="not slurm"):
        render_slurm_configs(d, RT)


# --- health check and checkpoint room (issue 13, deliverables 5 and 6) -------------------------


def test_batch_start_timeout_covers_the_health_check_scripts_longest_dcgm_run():
    """The script caps its DCGM diagnostic at DCGM_MAX_TIMEOUT; BatchStartTimeout is sized from the
    same number, so a prolog that runs it to the end never outlasts the launch."""
    script = (Path(__file__).resolve().parents[2] / "components" / "aicluster" / "node" / "bin" / "aicluster-gpu-healthcheck").read_text()
    assert re.search(r"^DCGM_MAX_TIMEOUT=(\d+)$", script, re.M).group(1) == str(DCGM_MAX_TIMEOUT_S)
    conf = settings(render(stack_spec("aws-p5-slurm"))["slurm.conf"])
    assert int(conf["BatchStartTimeout"]) > DCGM_MAX_TIMEOUT_S


def test_kill_wait_without_a_workload_is_slurms_default():
    conf = settings(render(spec({"name": "gpu", "instance_type": "p5.48xlarge", "max_nodes": 2}))["slurm.conf"])
    assert conf["KillWait"] == str(KILL_WAIT_DEFAULT_S)


def test_kill_wait_grows_with_the_checkpoint_and_stops_at_slurms_limit():
    p5 = copy.deepcopy(stack_spec("aws-p5-slurm"))
    small = int(settings(render(p5)["slurm.conf"])["KillWait"])
    p5["workload"]["model_params_b"] = 700
    bigger = int(settings(render(p5)["slurm.conf"])["KillWait"])
    assert bigger > 9 * small          # ten times the checkpoint, ten times the room (rounding aside)
    p5["workload"]["model_params_b"] = 100_000
    assert settings(render(p5)["slurm.conf"])["KillWait"] == str(KILL_WAIT_MAX_S)
