"""Options newer Slurm releases reject (issue 15, item 8): slurm.conf and cgroup.conf settings that
Debian bookworm's Slurm 22.05 takes silently and Debian trixie's 24.11 refuses (fatal: the
controller does not start) or calls defunct (an error at every start and reconfigure). The nodes
run Ubuntu noble's 23.11 (catalog/slurm_release.yaml) and will move to a newer release, so no
rendered file may carry any of them.

The list is evidence, not memory: each entry's `message` is what 24.11.5's slurmctld itself writes
(test_slurm_2411_rejects_each, run on the real daemon) and 22.05.8 writes nothing about it
(test_slurm_2205_took_each), so the list cannot name an option that is still fine, and an entry is
only "removed between the two releases". The release notes that announce them: SchedMD's
RELEASE_NOTES of slurm-23.02 through slurm-24.11 (github.com/SchedMD/slurm) and
slurm.schedmd.com/slurm.conf.html, cgroup.conf.html (24.11: "defunct" options)."""
from __future__ import annotations

import re
import select
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import STACK_NAMES, free_port, stack_spec
from tests.support.slurm_release import Release
from tests.support.stack_plans import stack_result


@dataclass(frozen=True)
class Removed:
    file: str           # slurm.conf | cgroup.conf
    key: str
    value: str | None   # None: the key itself is gone; else this value (an item of a list) is
    message: str        # regex of 24.11.5's own error line about it
    instead: str        # what to do instead


REMOVED = [
    Removed("slurm.conf", "CommunicationParameters", "NoAddrCache",
            r'CommunicationParameters option "NoAddrCache" is defunct',
            "nothing: no address caching is the default"),
    Removed("slurm.conf", "SlurmctldParameters", "cloud_reg_addrs",
            r'SlurmctldParameters option "cloud_reg_addrs" is defunct',
            "nothing: cloud nodes register their address (NodeAddr from the node) by default"),
    Removed("slurm.conf", "SelectType", "select/cons_res", r"Can't find plugin for select/cons_res",
            "SelectType=select/cons_tres"),
    Removed("slurm.conf", "TopologyPlugin", "topology/hypercube",
            r"cannot find topo plugin for topology/hypercube", "topology/tree or topology/block"),
    Removed("slurm.conf", "PowerPlugin", None, r'option "PowerPlugin" is defunct', "leave it out"),
    Removed("slurm.conf", "CoreSpecPlugin", None, r'option "CoreSpecPlugin" is defunct', "leave it out"),
    Removed("slurm.conf", "ExtSensorsType", None, r'option "ExtSensorsType" is defunct', "leave it out (acct_gather)"),
    Removed("cgroup.conf", "CgroupAutomount", None, r'option "CgroupAutomount" is defunct', "leave it out"),
    Removed("cgroup.conf", "ConstrainKmemSpace", None, r"unrecognized key: ConstrainKmemSpace", "leave it out (cgroup v2)"),
    Removed("cgroup.conf", "AllowedKmemSpace", None, r"unrecognized key: AllowedKmemSpace", "leave it out (cgroup v2)"),
    Removed("cgroup.conf", "MaxKmemPercent", None, r"unrecognized key: MaxKmemPercent", "leave it out (cgroup v2)"),
    Removed("cgroup.conf", "MinKmemSpace", None, r"unrecognized key: MinKmemSpace", "leave it out (cgroup v2)"),
]
SAMPLE_VALUE = {"PowerPlugin": "power/none", "CoreSpecPlugin": "core_spec/none", "ExtSensorsType": "ext_sensors/none",
                "CgroupAutomount": "yes", "ConstrainKmemSpace": "no", "AllowedKmemSpace": "100",
                "MaxKmemPercent": "100", "MinKmemSpace": "30"}
SLURM_STACKS = sorted(s for s in STACK_NAMES if stack_spec(s).get("scheduler", "slurm") == "slurm")


def settings(text: str) -> list[tuple[str, str]]:
    """key=value pairs of a Slurm config file, every item of a line (NodeName lines carry several)."""
    out = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        out += [tuple(item.split("=", 1)) for item in line.split() if "=" in item]
    return out


def offenders(files: dict[str, str]) -> list[str]:
    found = []
    for r in REMOVED:
        for key, value in settings(files.get(r.file, "")):
            if key.lower() != r.key.lower():
                continue
            if r.value is None or r.value.lower() in (v.strip().lower() for v in value.split(",")):
                found.append(f"{r.file}: {key}={value} ({r.instead})")
    return found


@pytest.mark.parametrize("stack", SLURM_STACKS)
def test_no_stack_renders_an_option_newer_slurm_rejects(stack):
    files = stack_result(stack).files
    conf = {name: files[f"slurm/{name}"] for name in ("slurm.conf", "cgroup.conf") if f"slurm/{name}" in files}
    assert "slurm.conf" in conf
    assert offenders(conf) == []


def test_the_check_finds_each_removed_option():
    """The scan itself can fail: each entry, written as a config would carry it, is found."""
    for r in REMOVED:
        value = r.value or SAMPLE_VALUE[r.key]
        line = f"{r.key}=enable_configless,{value}" if r.key.endswith("Parameters") else f"{r.key}={value}"
        assert offenders({r.file: f"ClusterName=x\n{line}\n"}), r


# --- the evidence: the real daemons of both releases -------------------------------------------

BASE = """ClusterName=t
SlurmctldHost=localhost
SlurmUser=root
AuthType=auth/none
CredType=cred/none
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmctldPort={port}
MailProg=/bin/true
NodeName=n1 CPUs=1 State=CLOUD
PartitionName=p Nodes=n1 Default=YES
"""
STARTED = "Running as primary controller"


REJECTED = re.compile(r"defunct|unrecognized key|Can't find plugin|cannot find topo plugin|fatal")


def start_log(slurmctld: str, folder: Path, r: Removed, timeout_s: float = 10) -> str:
    """slurmctld -D's output with the entry set, until it runs as controller, says it rejects
    the entry, exits, or timeout_s passes (a controller still starting has read its config)."""
    (folder / "state").mkdir(parents=True)
    (folder / "spool").mkdir()
    line = f"{r.key}={r.value or SAMPLE_VALUE[r.key]}\n"
    conf = BASE.format(d=folder, port=free_port())
    (folder / "slurm.conf").write_text(conf + (line if r.file == "slurm.conf" else ""))
    if r.file == "cgroup.conf":
        (folder / "cgroup.conf").write_text(line)
    proc = subprocess.Popen([slurmctld, "-D", "-i", "-f", str(folder / "slurm.conf")], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines, deadline = [], time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 1)
            if not ready:
                continue
            text = proc.stdout.readline()
            if not text:
                break
            lines.append(text)
            if STARTED in text or re.search(r.message, text):
                break
    finally:
        proc.kill()
        proc.wait()
    return "".join(lines)


@pytest.fixture(scope="module")
def slurmctld_2411(tmp_path_factory):
    return str(Release.installed().wrappers(tmp_path_factory.mktemp("removed-opts-bin")) / "slurmctld")


@pytest.mark.parametrize("r", REMOVED, ids=lambda r: f"{r.key}={r.value or '*'}")
def test_slurm_2411_rejects_each(r, slurmctld_2411, tmp_path):
    # A bound, not a duration: 24.11 stops at the rejection within a second or two, but on a loaded
    # CI machine (8 workers on 2 cores) it once took over 10 s to reach cgroup.conf.
    log = start_log(slurmctld_2411, tmp_path, r, timeout_s=60)
    assert re.search(r.message, log), log


@pytest.mark.parametrize("r", REMOVED, ids=lambda r: f"{r.key}={r.value or '*'}")
def test_slurm_2205_took_each(r, tmp_path):
    log = start_log("/usr/sbin/slurmctld", tmp_path, r)
    assert "slurmctld version 22.05" in log, log
    assert not REJECTED.search(log), log
