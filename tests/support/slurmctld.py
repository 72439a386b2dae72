"""A private munged + slurmctld on a rendered Slurm configuration (tests/slurm, tests/gcp)."""
from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from aicluster.design.slurm_blocks import slurm_topology
from aicluster.design.model import ClusterDesign
from aicluster.render.slurm_config import SlurmRuntime, kill_wait_s, render_slurm_configs
from tests.support import free_port

INSTALL_HINT = ("install Slurm and munge (Debian/Ubuntu: apt-get install slurmctld slurm-client munge; "
                "CI does it in .ci/run)")
SBIN = ("/usr/sbin", "/sbin", "/usr/local/sbin")
RECORDERS = ("aicluster-resume", "aicluster-suspend", "aicluster-resume-fail", "aicluster-gpu-healthcheck")
START_TIMEOUT_S = 30
RESUME_TIMEOUT_S = 30
# A job on a node that just powered up stays CONFIGURING after the node registers, until
# slurmctld's periodic pass (every 30 s) sees its nodes ready: measured 24 s here with an idle
# machine. Two passes and a margin, so a loaded machine (the suite runs on every core) still waits
# long enough.
JOB_START_TIMEOUT_S = 90
COMMAND_TIMEOUT_S = 30
PROLOG_TIMEOUT_S = 90


def tool(name: str) -> str:
    path = shutil.which(name) or shutil.which(name, path=os.pathsep.join(SBIN))
    assert path, f"`{name}` not found on PATH or in {', '.join(SBIN)}: {INSTALL_HINT}"
    return path


def fields(line: str) -> dict[str, str]:
    """`Key=Value Key=Value ...` of `scontrol -o show ...`."""
    return dict(re.findall(r"(\w+)=(\S*)", line))


def wait_for(what: str, check, timeout_s: float, diagnostics=lambda: ""):
    deadline = time.monotonic() + timeout_s
    delay = 0.05
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}\n{diagnostics()}")
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


_ACCOUNTING_LINK = ("accountingstoragetype", "accountingstoragehost", "accountingstoragebackuphost",
                    "accountingstorageport", "accountingstoragepass", "accountingstorageuser",
                    "accountingstorageenforce", "accountingstoragetres",
                    # Fairshare and age need slurmdbd's usage: 24.11 logs an error for each without it.
                    "priorityweightage", "priorityweightfairshare")


def without_accounting(conf: str) -> str:
    """slurm.conf without what needs slurmdbd: every AccountingStorage* key (TRES too: slurmctld
    refuses gres TRES without slurmdbd) and the fairshare and age weights."""
    return "\n".join(line for line in conf.splitlines()
                     if line.split("=", 1)[0].strip().lower() not in _ACCOUNTING_LINK) + "\n"


# A whole-second count on each side (below): this much wait makes a boot certain to look newer.
_BOOT_AFTER_RESUME_S = 3


def booted_just_now() -> list[str]:
    """The command prefix that runs a slurmd as on a freshly launched instance, called after the
    node's resume request. slurmctld takes a powering-up node only once it has booted since that
    request ("Still waiting for boot of node"); slurmd reports the machine's uptime, so it runs in a
    time namespace whose boot time is now. slurmctld reckons the boot as its own clock's whole
    second less the uptime, which sysinfo(2) rounds up: up to 2 s before the true boot, which the
    offset below sets up to 1 s early. Only a boot 3 s after the request is certainly newer
    (2 s was not: a loaded CI machine had slurmd wait for boot until the test gave up)."""
    time.sleep(_BOOT_AFTER_RESUME_S)
    uptime_s = int(float(Path("/proc/uptime").read_text().split()[0]))
    return [tool("unshare"), "--time", f"--boottime=-{uptime_s}"]


@dataclass
class Controller:
    """A private munged + slurmctld on the rendered config, all under one temp dir."""

    case: str
    design: ClusterDesign
    root: Path
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    munge_dir: Path | None = None
    munge_socket: Path | None = None
    runtime: SlurmRuntime | None = None
    # The port of a private slurmdbd (tests/slurm/test_real_slurmdbd.py), with accounting on.
    dbd_port: int | None = None

    def __post_init__(self):
        self.conf = self.root / "etc" / "slurm.conf"
        self.calls = self.root / "calls.log"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        self.env["SLURM_CONF"] = str(self.conf)

    # --- start and stop ---

    def start(self, failing_prolog: bool = False, slurmctld: bool = True) -> None:
        """munged and the configs, then slurmctld (unless `slurmctld` is False: a slurmdbd first)."""
        self.failing_prolog = failing_prolog
        munged = tool("munged")
        for name in ("slurmctld", "scontrol", "sinfo", "sbatch"):
            tool(name)
        dirs = {d: self.root / d for d in ("etc", "bin", "state", "spool", "log", "run", "munge")}
        for d in dirs.values():
            d.mkdir(parents=True, exist_ok=True)
        self._write_recorders(dirs["bin"])
        # munged insists on a socket directory that everyone can traverse and on a short path
        # (sun_path is 108 bytes): its own dir under the system temp dir, not pytest's deep one.
        self.munge_dir = Path(tempfile.mkdtemp(prefix="aicl-munge-"))
        self.munge_dir.chmod(0o755)
        self.munge_socket = self.munge_dir / "munge.socket"
        key = dirs["munge"] / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        self.runtime = SlurmRuntime(
            controller_host=socket.gethostname().split(".")[0],   # slurmctld checks it is itself
            controller_addr="127.0.0.1",
            conf_dir=str(dirs["etc"]),
            bin_dir=str(dirs["bin"]),
            state_dir=str(dirs["state"]),
            slurmd_spool_dir=str(dirs["spool"]),
            log_dir=str(dirs["log"]),
            run_dir=str(dirs["run"]),
            slurm_user=_current_user(),
            slurmctld_port=free_port(),
            slurmd_port=free_port(),
        )
        self.write_configs(self.design)
        # --force: munged runs despite file permissions it finds too open (CI temp dirs vary).
        self._spawn("munged", [munged, "--foreground", "--force", f"--key-file={key}",
                               f"--socket={self.munge_socket}", f"--pid-file={dirs['munge'] / 'munged.pid'}",
                               f"--log-file={dirs['munge'] / 'munged.log'}",
                               f"--seed-file={dirs['munge'] / 'munged.seed'}"])
        wait_for("munged's socket", lambda: self._alive("munged") and self.munge_socket.exists(),
                 START_TIMEOUT_S, self.diagnostics)
        if slurmctld:
            self.start_slurmctld()

    def write_configs(self, design: ClusterDesign) -> None:
        self.design = design
        for name, text in render_slurm_configs(design, self.runtime).items():
            if name == "slurm.conf":
                # The test's copy only: daemons and commands reach the private munged; a slurmd on
                # this small machine stands in for a big node (config_overrides: the node is what
                # slurm.conf says, not drained for fewer CPUs or less memory than a real one).
                text += (f"\n# test only\nAuthInfo=socket={self.munge_socket}\n"
                         "SlurmdParameters=config_overrides\n")
                if self.dbd_port:
                    # slurmdbd's port, and the munged for talking to it: AccountingStoragePass
                    # names that socket (slurm.conf man page), AuthInfo does not reach slurmdbd.
                    text += (f"AccountingStoragePort={self.dbd_port}\n"
                             f"AccountingStoragePass={self.munge_socket}\n")
                else:
                    # No slurmdbd here: a slurmctld with a database it cannot reach and no state
                    # refuses its first start (test_real_slurmdbd.py), as the head's sync does
                    # for its throwaway, the accounting link is left out.
                    text = without_accounting(text)
            (self.conf.parent / name).write_text(text)

    def start_slurmctld(self) -> None:
        self._spawn("slurmctld", [tool("slurmctld"), "-D", "-f", str(self.conf)])
        wait_for("slurmctld to answer `scontrol ping`", self._ping_up, START_TIMEOUT_S, self.diagnostics)

    def stop_slurmctld(self) -> None:
        self._stop("slurmctld")

    def start_slurmd(self, node: str) -> None:
        """A real slurmd as `node`, on this machine: what a launched cloud node does once the
        resume program has set its address. Needs root, as on a real node (it runs the prolog
        and puts jobs in cgroups)."""
        assert os.geteuid() == 0, "slurmd runs as root (prolog, cgroups): run this test as root (CI does)"
        self.run("scontrol", "update", f"nodename={node}", "nodeaddr=127.0.0.1",
                 f"nodehostname={socket.gethostname().split('.')[0]}")
        self._spawn("slurmd", [*booted_just_now(), tool("slurmd"), "-D", "-N", node, "-f", str(self.conf)])

    def stop(self) -> None:
        self._stop("slurmd")
        self._stop("slurmctld")             # first: it still talks to munged
        self._stop("munged")
        if self.munge_dir:
            shutil.rmtree(self.munge_dir, ignore_errors=True)

    def _stop(self, name: str) -> None:
        proc = self.procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)     # its own session: slurmscriptd too
            proc.wait(timeout=10)

    def _spawn(self, name: str, argv: list[str]) -> None:
        out = open(self.root / f"{name}.out", "ab")
        try:
            self.procs[name] = subprocess.Popen(argv, env=self.env, cwd=self.root, stdin=subprocess.DEVNULL,
                                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            out.close()

    def _alive(self, name: str) -> bool:
        proc = self.procs[name]
        if proc.poll() is not None:
            raise AssertionError(f"{name} exited with {proc.returncode}\n{self.diagnostics()}")
        return True

    def _ping_up(self) -> bool:
        self._alive("munged")
        self._alive("slurmctld")
        ping = subprocess.run([tool("scontrol"), "ping"], env=self.env, capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT_S)
        return ping.returncode == 0 and "is UP" in ping.stdout

    def _write_recorders(self, bin_dir: Path) -> None:
        for prog in RECORDERS:
            path = bin_dir / prog
            # The prolog (the GPU health check) fails on demand, as on a node with a bad GPU.
            status = 1 if prog == "aicluster-gpu-healthcheck" and self.failing_prolog else 0
            path.write_text(f'#!/bin/sh\necho "$(basename "$0") $*" >> {self.calls}\nexit {status}\n')
            path.chmod(0o755)     # slurmctld refuses programs that group or others may write
        # The TaskProlog (NCCL environment): silent, as on a node without a fabric. Newer slurmd
        # releases fail a task whose TaskProlog cannot run (tests/slurm/test_task_prolog.py runs the real one).
        prolog = bin_dir / "aicluster-task-prolog"
        prolog.write_text("#!/bin/sh\nexit 0\n")
        prolog.chmod(0o755)

    def diagnostics(self) -> str:
        parts = []
        for name in ("munged.out", "munge/munged.log", "slurmctld.out", "log/slurmctld.log", "slurmd.out",
                     "log/slurmd.log", "calls.log"):
            path = self.root / name
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-40:]
                parts.append(f"--- {name} (tail)\n" + "\n".join(tail))
        return "\n".join(parts)

    # --- asking the controller ---

    def run(self, *argv: str) -> str:
        self._alive("slurmctld")
        proc = subprocess.run([tool(argv[0]), *argv[1:]], env=self.env, cwd=self.root, capture_output=True,
                              text=True, timeout=COMMAND_TIMEOUT_S)
        assert proc.returncode == 0, (f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr}\n"
                                      f"{self.diagnostics()}")
        return proc.stdout

    def config(self) -> dict[str, str]:
        """`scontrol show config` as a dict (`Key   = value` lines)."""
        return dict(re.findall(r"^(\w+)\s+= (.*)$", self.run("scontrol", "show", "config"), re.M))

    def hostnames(self, hostlist: str) -> list[str]:
        return self.run("scontrol", "show", "hostnames", hostlist).split()

    def resume_calls(self) -> list[str]:
        if not self.calls.exists():
            return []
        return [ln.split(" ", 1)[1] for ln in self.calls.read_text().splitlines()
                if ln.startswith("aicluster-resume ")]


def _current_user() -> str:
    return pwd.getpwuid(os.getuid()).pw_name


def assert_rendered_settings(ctl: Controller) -> None:
    """The settings that matter, as the running slurmctld (of any release) reads them from the
    rendered configuration of `ctl.design`."""
    values = ctl.config()
    slurm = ctl.design.slurm
    assert values["ClusterName"] == ctl.design.name
    assert values["SlurmctldParameters"].split(",") == ["enable_configless", "cloud_dns", "idle_on_node_suspend"]
    assert values["SelectType"] == "select/cons_tres"
    assert values["SelectTypeParameters"] == "CR_CORE_MEMORY"
    assert values["GresTypes"] == "gpu"
    topology = slurm_topology(ctl.design)      # tree, or block with an NVL72 pool (docs/slurm.md)
    assert values["TopologyPlugin"] == topology.plugin
    assert values["PrologFlags"] == ("Alloc,Contain,DeferBatch" if topology.blocks else "Alloc,Contain")
    if topology.blocks:
        assert values["SwitchType"] == topology.switch_type
    # A failed prolog (GPU health check) requeues the job without holding it.
    assert "nohold_on_prolog_fail" in values["SchedulerParameters"].split(","), values["SchedulerParameters"]
    assert values["ReturnToService"] == "2"
    # The periodic health check and the room the prolog and a checkpoint get (issue 13).
    assert values["HealthCheckProgram"].endswith("/bin/aicluster-gpu-healthcheck")
    assert values["HealthCheckInterval"] == "300 sec"
    assert values["HealthCheckNodeState"] == "ANY"
    assert values["BatchStartTimeout"] == "360 sec"
    assert values["KillWait"] == f"{kill_wait_s(ctl.design)} sec"
    assert values["JobRequeue"] == "1"
    assert values["TreeWidth"] == "65533"
    assert values["SuspendTime"] == f"{slurm.suspend_time_s} sec"
    assert values["ResumeTimeout"] == f"{slurm.resume_timeout_s} sec"
    assert values["ResumeProgram"].endswith("/bin/aicluster-resume")
    assert values["SuspendProgram"].endswith("/bin/aicluster-suspend")
    assert values["ResumeFailProgram"].endswith("/bin/aicluster-resume-fail")
    assert values["SuspendExcNodes"] == (",".join(slurm.suspend_exc_nodes) or "(null)")


# Lines a first start of slurmctld logs as errors or warnings that say nothing about the config.
_NOT_THE_CONFIG = re.compile(
    r"state file|NOTE: Trying backup state save file|Configured MailProg is invalid|"
    r"accounting information gathered, but not stored|"
    r"collecting accounting information you have asked for it not to be stored|"
    # Debian 12's slurmctld 22.05 without libpmix installed: the machine's, not the config's.
    r"mpi/pmix|PMIx|MPI: Cannot create context|"
    # slurmctld's clock self-test at start: a loaded test machine's latency.
    r"High latency for \d+ calls to gettimeofday")
_COMPLAINT = re.compile(r"error|warning|fatal|deprecated|obsolete|ignor|unrecognized|disabled", re.I)


def config_complaints(ctl: "Controller") -> list[str]:
    """What slurmctld logged against the config (renamed, deprecated or ignored parameters, a
    disabled feature): its error and warning lines, less those that say nothing about the config."""
    log = (ctl.root / "log" / "slurmctld.log").read_text()
    return [line for line in log.splitlines() if _COMPLAINT.search(line) and not _NOT_THE_CONFIG.search(line)]
