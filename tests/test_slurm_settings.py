"""Custom Slurm settings (issue 15, item 10): `slurm.settings` and per pool `slurm_settings`,
checked by aicluster.spec.slurm_settings and merged into slurm.conf by aicluster.render.slurm_config.

Real slurmctld daemons of both releases read a configuration with them in
tests/slurm/test_affinity_and_settings.py; here: the checks, the merge, and that the deny-list and
the key list stay true to the template and to slurm.conf(5)."""
from __future__ import annotations

import copy
import gzip
import re
from pathlib import Path

import pytest

from aicluster.design.cluster import design_cluster
from aicluster.errors import SpecError
from aicluster.render.slurm_config import SlurmRuntime, render_slurm_configs
from aicluster.spec.slurm_settings import (APPENDED, OVERRIDABLE, OWNED, PARTITION_KEYS, PARTITION_OWNED,
                                      SLURM_CONF_KEYS, merge_conf_settings)
from aicluster.spec.cluster import parse_spec
from tests.support import BASE_SPEC, STACK_NAMES, stack_spec
from tests.support.slurm_release import DEFAULT_ROOT

RT = SlurmRuntime(controller_host="head", controller_addr="10.0.0.10")
SLURM_STACKS = sorted(s for s in STACK_NAMES if stack_spec(s).get("scheduler", "slurm") == "slurm")


def spec_with(settings=None, pool_settings=None, **extra) -> dict:
    spec = copy.deepcopy(BASE_SPEC)
    if settings is not None:
        spec["slurm"] = {"settings": settings}
    if pool_settings is not None:
        spec["pools"][0]["slurm_settings"] = pool_settings
    spec.update(extra)
    return spec


def problems(spec: dict) -> dict[str, str]:
    with pytest.raises(SpecError) as err:
        parse_spec(spec)
    return {p.path: str(p) for p in err.value.problems}


def conf(spec: dict) -> str:
    return render_slurm_configs(design_cluster(parse_spec(spec)), RT)["slurm.conf"]


# --- refused ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("key,sets_it", [
    ("ClusterName", "the spec's `name`"), ("SlurmctldHost", "head node"), ("AuthType", "munge"),
    ("SlurmctldParameters", "configless"), ("ResumeProgram", "resume/suspend"), ("SuspendProgram", "resume/suspend"),
    ("ResumeTimeout", "slurm.resume_timeout_min"), ("SuspendTime", "slurm.suspend_idle_min"),
    ("SelectType", "cons_tres"), ("ProctrackType", "cgroup"), ("TaskProlog", "NCCL"), ("Prolog", "health check"),
    ("HealthCheckProgram", "health check"), ("StateSaveLocation", "state"), ("SlurmUser", "head node"),
    ("SlurmctldPort", "security group"), ("SlurmdPort", "security group"), ("AccountingStorageType", "slurm.accounting"),
    ("NodeName", "pools"), ("PartitionName", "pools"),
])
def test_a_key_aicluster_owns_is_refused_with_what_sets_it(key, sets_it):
    found = problems(spec_with({key: "x"}))
    assert list(found) == [f"slurm.settings.{key}"]
    assert f"aicluster sets {key}" in found[f"slurm.settings.{key}"] and sets_it in found[f"slurm.settings.{key}"]


def test_an_unknown_key_is_refused_with_a_close_match():
    found = problems(spec_with({"MaxJobCont": 20000}))
    assert "unknown key" in found["slurm.settings.MaxJobCont"]
    assert "did you mean MaxJobCount?" in found["slurm.settings.MaxJobCont"]


def test_a_key_in_another_case_is_refused_with_its_spelling():
    """Slurm ignores case: `clustername` would otherwise slip past the deny-list."""
    found = problems(spec_with({"clustername": "x", "maxjobcount": 1}))
    assert "write it as ClusterName" in found["slurm.settings.clustername"]
    assert "write it as MaxJobCount" in found["slurm.settings.maxjobcount"]


@pytest.mark.parametrize("value", ["1\nSlurmUser=root", "10 SlurmUser=root", "5#x", "", "\t"])
def test_a_value_that_could_leave_its_line_is_refused(value):
    found = problems(spec_with({"MaxJobCount": value}))
    assert "no whitespace, newline or '#'" in found["slurm.settings.MaxJobCount"]


def test_a_list_is_not_a_value():
    found = problems(spec_with({"MaxJobCount": [1, 2]}))
    assert any(path.startswith("slurm.settings.MaxJobCount") for path in found), found


def test_pool_settings_are_partition_parameters_the_pool_does_not_own():
    found = problems(spec_with(pool_settings={"Nodes": "x", "Default": "YES", "MaxJobCount": 5, "MaxTim": "1:00:00"}))
    assert "pools[].max_nodes" in found["pools[0].slurm_settings.Nodes"]
    assert "first is the default" in found["pools[0].slurm_settings.Default"]
    assert "partition parameter" in found["pools[0].slurm_settings.MaxJobCount"]
    assert "did you mean MaxTime?" in found["pools[0].slurm_settings.MaxTim"]


def test_pool_settings_need_slurm():
    spec = spec_with(pool_settings={"MaxTime": "1:00:00"}, scheduler="kubernetes")
    spec["kubernetes"] = {"api_access_cidrs": ["203.0.113.0/24"]}
    assert "pools[0].slurm_settings" in problems(spec)


# --- merged ----------------------------------------------------------------------------------------

def keys_of(text: str) -> list[str]:
    return [m.group(1) for m in re.finditer(r"^([A-Za-z]+)=", text, re.M)]


def test_a_new_key_is_added_once_in_its_own_section():
    text = conf(spec_with({"MaxJobCount": 20000, "PriorityType": "priority/multifactor", "UsePAM": True}))
    assert keys_of(text).count("MaxJobCount") == 1
    section = text.split("# --- custom settings: slurm.settings")[1]
    assert re.findall(r"^\w+=\S+$", section, re.M) == ["MaxJobCount=20000", "PriorityType=priority/multifactor",
                                                       "UsePAM=YES"]


def test_an_overridable_key_is_replaced_in_place_never_written_twice():
    text = conf(spec_with({"KillWait": 600, "TreeWidth": 128}))
    assert keys_of(text).count("KillWait") == 1 and "\nKillWait=600\n" in text
    assert keys_of(text).count("TreeWidth") == 1 and "\nTreeWidth=128\n" in text


def test_scheduler_parameters_add_to_aiclusters_never_replace_them():
    """nohold_on_prolog_fail is what requeues a job whose health-check prolog failed."""
    text = conf(spec_with({"SchedulerParameters": "bf_max_job_test=500,bf_continue"}))
    line = next(ln for ln in text.splitlines() if ln.startswith("SchedulerParameters="))
    assert line == "SchedulerParameters=bf_continue,salloc_wait_nodes,nohold_on_prolog_fail,bf_max_job_test=500"


def test_pool_settings_go_on_that_pools_partition_line():
    spec = spec_with(pool_settings={"MaxTime": "2-00:00:00", "PriorityTier": 10})
    spec["pools"].append({"name": "dev", "instance_type": "p4d.24xlarge", "max_nodes": 1})
    lines = {ln.split()[0]: ln for ln in conf(spec).splitlines() if ln.startswith("PartitionName=")}
    assert " MaxTime=2-00:00:00 " in lines["PartitionName=gpu"] and lines["PartitionName=gpu"].endswith(" PriorityTier=10")
    assert "PriorityTier" not in lines["PartitionName=dev"] and "MaxTime=INFINITE" in lines["PartitionName=dev"]


def test_no_settings_leave_the_file_as_it_was():
    text = conf(spec_with())
    assert "custom settings" not in text
    assert merge_conf_settings(text, ()) == text


# --- the lists stay true ---------------------------------------------------------------------------

@pytest.mark.parametrize("accounting", [False, True])
@pytest.mark.parametrize("stack", SLURM_STACKS)
def test_every_key_the_template_writes_is_owned_or_open_to_users(stack, accounting):
    """A key added to slurm.conf.j2 must be classified: owned (refused in slurm.settings),
    overridable (the user's value replaces it) or appended (the user's items are added)."""
    spec = stack_spec(stack)
    spec.setdefault("slurm", {})["accounting"] = accounting
    written = set(keys_of(conf(spec))) - {"NodeName", "PartitionName"}
    unclassified = written - set(OWNED) - OVERRIDABLE - APPENDED
    assert unclassified == set(), f"classify in aicluster/spec/slurm_settings.py: {sorted(unclassified)}"


def test_the_lists_name_only_real_keys():
    lines = {"NodeName", "PartitionName", "NodeSet", "DownNodes", "FrontendName", "Include"}
    assert set(OWNED) - SLURM_CONF_KEYS <= lines
    assert (OVERRIDABLE | APPENDED) <= SLURM_CONF_KEYS
    assert set(PARTITION_OWNED) <= PARTITION_KEYS
    assert not (set(OWNED) & (OVERRIDABLE | APPENDED))


def _man_page_keys(section: str) -> set[str]:
    """The top-level options of a section of slurm.conf(5), from the 24.11 chroot's man page."""
    page = Path(DEFAULT_ROOT) / "usr/share/man/man5/slurm.conf.5.gz"
    assert page.exists(), f"{page} missing: install Slurm 24.11's chroot (sudo .ci/install-slurm-release)"
    lines = gzip.decompress(page.read_bytes()).decode(errors="replace").splitlines()
    start = lines.index(f'.SH "{section}"')
    keys, depth = set(), 0
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if line.startswith(".SH"):
            break
        if line.startswith(".RS"):
            depth += 1
        elif line.startswith(".RE"):
            depth -= 1
        elif line.startswith(".TP") and depth == 0 and i + 1 < len(lines):
            m = re.match(r"\\fB([A-Za-z]+)\\fR", lines[i + 1])
            if m:
                keys.add(m.group(1))
    return keys


def test_the_key_lists_are_slurm_conf_5_of_2411():
    assert SLURM_CONF_KEYS == _man_page_keys("PARAMETERS")
    assert PARTITION_KEYS == _man_page_keys("PARTITION CONFIGURATION")
