"""Accounting that outlives the head (slurm.accounting: managed), on real daemons.

A throwaway MariaDB server on loopback stands in for the managed database (RDS for MariaDB, Cloud
SQL for MySQL): TLS required, its certificate signed by a CA made in the test. The head's real
aicluster-accounting script runs on the settings aicluster publishes (accounting.json), renders
slurmdbd.conf, and (through a systemctl that starts it) a real slurmdbd (Debian's Slurm 22.05)
connects to the database over TLS, verified against that CA. Real sacctmgr then shows the QoS and
the default account from the catalog; a second run changes nothing; and a real slurmctld on the
rendered slurm.conf (accounting on, priority/multifactor) registers with that slurmdbd and a job
it runs on a real slurmd shows up in sacct.

MariaDB, slurmdbd, openssl, Slurm and munge are required: a missing one fails the test with an
install hint (.ci/install-system-deps installs them).
"""
from __future__ import annotations

import copy
import re
import stat
import subprocess

import pytest

from aicluster.catalog.accounting_db import accounting_catalog
from aicluster.design.cluster import design_cluster
from aicluster.render.slurm_files import accounting_settings
from aicluster.spec.cluster import parse_spec
from tests.support import free_port, slurmd_spec
from tests.support.accounting_db import DB_NAME, DB_USER, HeadAccounting, MariaDB, make_ca, make_tls
from tests.support.slurmctld import (COMMAND_TIMEOUT_S, PROLOG_TIMEOUT_S, RESUME_TIMEOUT_S, START_TIMEOUT_S,
                                       Controller, fields, tool, wait_for)

PASSWORD = "Acct-db-pw-1"          # what the cloud's secret store holds
SECRET_ID = "acct-accounting-db"   # the secret's name in accounting.json
SPEC = copy.deepcopy(slurmd_spec("acct")) | {"slurm": {"accounting": "managed"}}


class Accounting:
    """MariaDB, a private munged, the script's slurmdbd; slurmctld and slurmd in the last test."""

    def __init__(self, root):
        self.design = design_cluster(parse_spec(SPEC))
        self.tls = make_tls(root / "tls")
        self.db = MariaDB(root / "mariadb", self.tls, PASSWORD)
        dbd_port = free_port()
        self.ctl = Controller("acct", self.design, root / "slurm", dbd_port=dbd_port)
        self.dbd_port = dbd_port
        self.head: HeadAccounting | None = None
        self.first_run: subprocess.CompletedProcess | None = None

    def start(self, root) -> None:
        self.db.start()
        # What the cloud fills in once it made the database: its address and its CA (Cloud SQL's
        # way; RDS's is a URL the script fetches).
        endpoint = {"host": "127.0.0.1", "port": self.db.port, "tls_ca_pem": self.tls.ca.read_text()}
        self.settings = accounting_settings(self.design, SECRET_ID, endpoint)
        self.ctl.start(slurmctld=False)          # munged and the rendered configs; slurmctld later
        self.head = HeadAccounting(root / "accounting", settings=self.settings, password=PASSWORD,
                                   slurm_conf=self.ctl.conf, munge_socket=self.ctl.munge_socket,
                                   port=self.dbd_port)
        self.first_run = self.head.run()

    def stop(self) -> None:
        self.ctl.stop()
        if self.head is not None:
            self.head.stop()
        self.db.stop()

    def diagnostics(self) -> str:
        parts = [self.ctl.diagnostics(), self.db.diagnostics()]
        if self.head is not None:
            parts.append(self.head.diagnostics())
        return "\n".join(parts)

    def show(self, *args: str) -> list[str]:
        """`sacctmgr -n -P show ...` lines: what slurmdbd has in the database."""
        proc = subprocess.run([tool("sacctmgr"), "-n", "-P", "show", *args], env=self.ctl.env, capture_output=True,
                              text=True, timeout=COMMAND_TIMEOUT_S)
        assert proc.returncode == 0, f"sacctmgr show {' '.join(args)}: {proc.stderr}\n{self.diagnostics()}"
        return [ln for ln in proc.stdout.splitlines() if ln]

    def state(self) -> dict[str, list[str]]:
        """Everything the script manages, as sacctmgr shows it."""
        return {"cluster": self.show("cluster", "format=cluster"),
                "qos": self.show("qos", "format=name,priority,usagefactor"),
                "account": self.show("account", "format=account,descr,org"),
                "assoc": self.show("assoc", "format=cluster,account,user,qos,defaultqos,fairshare")}


@pytest.fixture(scope="module")
def acc(tmp_path_factory):
    root = tmp_path_factory.mktemp("slurmdbd")
    accounting = Accounting(root)
    try:
        accounting.start(root)
        yield accounting
    finally:
        accounting.stop()


def _script_ok(acc: Accounting, run: subprocess.CompletedProcess) -> None:
    assert run.returncode == 0, f"aicluster-accounting failed ({run.returncode}):\n{run.stderr}\n{acc.diagnostics()}"


def test_slurmdbd_reaches_the_managed_database_over_verified_tls(acc):
    _script_ok(acc, acc.first_run)
    assert "slurmdbd ready (managed database)" in acc.first_run.stderr
    assert acc.head.calls.read_text().splitlines() == ["enable slurmdbd", "restart slurmdbd",
                                                       "is-failed --quiet slurmctld"]
    assert (acc.head.root / "secret.log").read_text().split() == [SECRET_ID]
    conf = acc.head.conf
    assert stat.S_IMODE(conf.stat().st_mode) == 0o600        # it holds the password
    lines = conf.read_text().splitlines()
    ca_path = "/etc/slurm/accounting-db-ca.pem"              # as the head sees it
    for line in ("StorageType=accounting_storage/mysql", "StorageHost=127.0.0.1", f"StoragePort={acc.db.port}",
                 f"StorageUser={DB_USER}", f"StorageLoc={DB_NAME}", f"StoragePass={PASSWORD}",
                 f"StorageParameters=SSL_CA={ca_path}"):
        assert line in lines, (line, lines)
    assert (acc.head.head / ca_path.lstrip("/")).read_text().strip() == acc.tls.ca.read_text().strip()
    # The server takes nothing but TLS over TCP (require_secure_transport, REQUIRE SSL): slurmdbd
    # made its tables, so it connected over TLS; the server counted the handshakes.
    tables = acc.db.sql(f"SHOW TABLES FROM {DB_NAME}").split()
    assert "qos_table" in tables and f"{acc.design.name}_job_table" in tables, tables
    accepts = acc.db.sql("SHOW GLOBAL STATUS LIKE 'Ssl_accepts'").split()
    assert int(accepts[1]) >= 1, accepts


def test_a_database_certificate_from_another_ca_is_refused(acc, tmp_path):
    """SSL_CA is enforced: the same slurmdbd.conf with another CA does not reach the database.
    (Slurm 22.05 with Debian's libmariadb 3.3 checks the chain, not the host name: it has no
    StorageParameters option for it; docs/accounting.md.)"""
    other_ca, _ = make_ca(tmp_path, "other-ca")
    text = (acc.head.dbd / "slurmdbd.conf").read_text()
    text = re.sub(r"(?m)^StorageParameters=.*$", f"StorageParameters=SSL_CA={other_ca}", text)
    text = re.sub(r"(?m)^(LogFile|PidFile|DbdPort)=.*$", "", text)
    text += f"LogFile={tmp_path / 'slurmdbd.log'}\nPidFile={tmp_path / 'slurmdbd.pid'}\nDbdPort={free_port()}\n"
    out = acc.head.run_slurmdbd(text, seconds=4)
    log = (tmp_path / "slurmdbd.log").read_text()
    assert "TLS/SSL error" in log and "certificate" in log, (out, log)
    assert "started" not in log, log


def test_qos_and_default_account_are_the_catalogs(acc):
    _script_ok(acc, acc.first_run)
    catalog = accounting_catalog()
    qos = {name: (int(prio), float(factor))
           for name, prio, factor in (ln.split("|") for ln in acc.show("qos", "format=name,priority,usagefactor"))}
    assert qos == {q.name: (q.priority, q.usage_factor) for q in catalog.qos}
    assert acc.design.name in acc.show("cluster", "format=cluster")
    accounts = {ln.split("|")[0]: ln for ln in acc.show("account", "format=account,descr,org")}
    assert accounts[catalog.account] == f"{catalog.account}|aicluster default account|aicluster"
    assoc = [ln.split("|") for ln in acc.show("assoc", "format=cluster,account,user,qos,defaultqos,fairshare")]
    account_assoc = [a for a in assoc if a[1] == catalog.account and a[2] == ""]
    assert len(account_assoc) == 1, assoc
    cluster, _, _, qos_list, default_qos, fairshare = account_assoc[0]
    assert cluster == acc.design.name
    assert sorted(qos_list.split(",")) == sorted(q.name for q in catalog.qos)
    assert default_qos == "normal" == catalog.qos[0].name
    assert fairshare == "1"


def test_a_second_run_changes_nothing(acc):
    _script_ok(acc, acc.first_run)
    before, conf_before = acc.state(), acc.head.conf.read_text()
    second = acc.head.run()
    _script_ok(acc, second)
    assert acc.state() == before
    assert acc.head.conf.read_text() == conf_before


def test_a_slurmctld_that_died_without_its_database_is_started_again(acc):
    """slurmctld's first start is fatal while slurmdbd is out of reach (no state, no TRES from the
    database: test_slurmctld_refuses_its_first_start_without_slurmdbd); once the script has
    slurmdbd answering, it starts a slurmctld that failed, and leaves a running one alone."""
    _script_ok(acc, acc.first_run)
    (acc.head.root / "slurmctld.failed").touch()
    again = acc.head.run()
    _script_ok(acc, again)
    calls = acc.head.calls.read_text().splitlines()
    assert calls[-2:] == ["is-failed --quiet slurmctld", "restart slurmctld"]
    assert calls.count("restart slurmctld") == 1         # not on the first run: nothing had failed


def test_slurmctld_refuses_its_first_start_without_slurmdbd(acc):
    """Why the script restarts a failed slurmctld: the real 22.05 slurmctld, with accounting on, no
    state files and its slurmdbd stopped, exits instead of waiting for it."""
    _script_ok(acc, acc.first_run)
    acc.head.stop()                                  # slurmdbd down
    try:
        with pytest.raises(AssertionError, match="no TRES from it"):
            acc.ctl.start_slurmctld()
    finally:
        acc.ctl.stop_slurmctld()
        _script_ok(acc, acc.head.run())              # slurmdbd back for the tests after this one


def test_slurmctld_with_accounting_registers_and_its_jobs_reach_sacct(acc):
    """The rendered slurm.conf with accounting on: slurmctld registers with the slurmdbd, takes
    priority/multifactor, and a job run on a real slurmd is recorded (sacct)."""
    _script_ok(acc, acc.first_run)
    ctl = acc.ctl
    ctl.start_slurmctld()
    config = ctl.config()
    assert config["AccountingStorageType"] == "accounting_storage/slurmdbd"
    assert config["AccountingStorageHost"] == "127.0.0.1"
    assert config["PriorityType"] == "priority/multifactor"
    assert config["PriorityWeightFairShare"] == "10000"
    assert config["PriorityWeightQOS"] == "5000"

    def registered():
        rows = [ln.split("|") for ln in acc.show("cluster", "format=cluster,controlhost,controlport")]
        return [r for r in rows if r[0] == acc.design.name and r[2] == str(ctl.runtime.slurmctld_port)]

    wait_for("slurmctld to register with slurmdbd", registered, START_TIMEOUT_S, acc.diagnostics)

    # The QoS priorities from slurmdbd reach the job priorities: PriorityWeightQOS times the QoS's
    # priority over the highest. Jobs that wait (--begin: no age yet) under one user (the same
    # fairshare) differ only by their QoS.
    weight, top = int(config["PriorityWeightQOS"]), max(q.priority for q in accounting_catalog().qos)
    priority = {}
    for q in accounting_catalog().qos:
        out = ctl.run("sbatch", "-p", "trn", f"--qos={q.name}", "--begin=now+1hour", "-o", "/dev/null",
                      "--wrap", "true")
        waiting = re.search(r"Submitted batch job (\d+)", out).group(1)
        priority[q.name] = int(fields(ctl.run("scontrol", "-o", "show", "job", waiting))["Priority"])
        ctl.run("scancel", waiting)
    low = min(accounting_catalog().qos, key=lambda q: q.priority)
    assert {name: p - priority[low.name] for name, p in priority.items()} == {
        q.name: weight * (q.priority - low.priority) // top for q in accounting_catalog().qos}, priority

    out = ctl.run("sbatch", "-N", "1", "-p", "trn", "-w", "trn-1", "-o", "/dev/null", "--wrap", "true")
    job_id = re.search(r"Submitted batch job (\d+)", out).group(1)
    wait_for("ResumeProgram to be called for trn-1", lambda: "trn-1" in ctl.resume_calls(),
             RESUME_TIMEOUT_S, acc.diagnostics)
    ctl.start_slurmd("trn-1")

    def finished():
        job = fields(ctl.run("scontrol", "-o", "show", "job", job_id))
        return job if job["JobState"] in ("COMPLETED", "FAILED", "NODE_FAIL", "CANCELLED") else None

    job = wait_for("the job to finish", finished, PROLOG_TIMEOUT_S, acc.diagnostics)
    assert job["JobState"] == "COMPLETED", (job, acc.diagnostics())

    def recorded():
        rows = [ln.split("|") for ln in ctl.run("sacct", "-n", "-P", "-X", "-j", job_id,
                                                 "--format=jobid,state,qos,cluster").splitlines() if ln]
        return rows if rows and rows[0][1] == "COMPLETED" else None

    rows = wait_for("the job's record in sacct", recorded, START_TIMEOUT_S, acc.diagnostics)
    assert rows == [[job_id, "COMPLETED", "normal", acc.design.name]], rows
