"""A throwaway MariaDB server with TLS and the head's real aicluster-accounting script, which
starts a real slurmdbd against it (tests/slurm/test_real_slurmdbd.py).

The MariaDB server stands in for the managed database (RDS for MariaDB, Cloud SQL for MySQL): on
127.0.0.1, a free port, TLS required (`require_secure_transport`), its certificate signed by a CA
made here with openssl, the slurm user allowed only over TLS (REQUIRE SSL).
"""
from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from aicluster.catalog.accounting_db import accounting_catalog
from tests.support import ROOT, free_port
from tests.support.slurmctld import START_TIMEOUT_S, tool, wait_for

INSTALL_HINT = ("install MariaDB, slurmdbd and openssl (Debian/Ubuntu: apt-get install mariadb-server-core "
                "mariadb-client-core slurmdbd openssl; .ci/install-system-deps does it)")
SCRIPT = ROOT / "components" / "aicluster" / "node" / "bin" / "aicluster-accounting"
DB_NAME = "slurm_acct_db"
DB_USER = "slurm"
# How long the script waits for sacctmgr to answer: slurmdbd creates its tables on first start.
SCRIPT_WAIT_S = 60
SCRIPT_TIMEOUT_S = 120


def program(name: str) -> str:
    try:
        return tool(name)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; {INSTALL_HINT}") from None


def _current_user() -> str:
    return pwd.getpwuid(os.getuid()).pw_name


def _run(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, **kwargs)
    assert proc.returncode == 0, f"{' '.join(argv)} failed ({proc.returncode}): {proc.stdout}{proc.stderr}"
    return proc


def _gone(pid: int) -> bool:
    """Exited; a zombie counts (the daemon's parent, the fake systemctl, is gone: nobody reaps it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@dataclass(frozen=True)
class Tls:
    ca: Path        # the CA certificate slurmdbd verifies the server with
    cert: Path      # the server's certificate, signed by the CA, for 127.0.0.1
    key: Path


def make_ca(directory: Path, name: str) -> tuple[Path, Path]:
    """A self-signed CA: (certificate, key)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca, key = directory / f"{name}.pem", directory / f"{name}.key"
    _run([program("openssl"), "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
          "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(ca)])
    return ca, key


def make_tls(directory: Path) -> Tls:
    """A throwaway CA and a server certificate it signs, for 127.0.0.1 (the database's address)."""
    ca, ca_key = make_ca(directory, "test-ca")
    key, csr, cert = directory / "server.key", directory / "server.csr", directory / "server.pem"
    ext = directory / "server.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl = program("openssl")
    _run([openssl, "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", str(key),
          "-out", str(csr)])
    _run([openssl, "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
          "-days", "1", "-extfile", str(ext), "-out", str(cert)])
    return Tls(ca=ca, cert=cert, key=key)


class MariaDB:
    """mariadbd on a fresh datadir, 127.0.0.1 and a free port, TLS required; the database and the
    slurm user (password, REQUIRE SSL) that the cloud's managed instance would have."""

    def __init__(self, root: Path, tls: Tls, password: str):
        self.root, self.tls, self.password = root, tls, password
        self.port = free_port()
        # sun_path is 108 bytes: the socket in a short dir of its own, not pytest's deep one.
        self.socket_dir = Path(tempfile.mkdtemp(prefix="aicl-db-"))
        self.socket = self.socket_dir / "mariadb.sock"
        self.log = root / "mariadbd.err"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        datadir = self.root / "data"
        user = f"--user={_current_user()}"      # mariadbd refuses to run as root unless told to
        _run([program("mariadb-install-db"), "--no-defaults", f"--datadir={datadir}", user,
              "--auth-root-authentication-method=normal", "--skip-test-db"])
        self.proc = subprocess.Popen(
            [program("mariadbd"), "--no-defaults", f"--datadir={datadir}", user, f"--socket={self.socket}",
             f"--port={self.port}", "--bind-address=127.0.0.1", f"--pid-file={self.root / 'mariadbd.pid'}",
             f"--log-error={self.log}", "--skip-log-bin", "--innodb-buffer-pool-size=64M",
             f"--ssl-ca={self.tls.ca}", f"--ssl-cert={self.tls.cert}", f"--ssl-key={self.tls.key}",
             # As the managed instances: no plain-text connection over TCP, Slurm's settings.
             "--require-secure-transport=ON",
             *[f"--{name.replace('_', '-')}={value}" for name, value in accounting_catalog().flags.items()]],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        wait_for("mariadbd to accept connections", self._up, START_TIMEOUT_S, self.diagnostics)
        self.sql(f"CREATE DATABASE {DB_NAME};"
                 f"CREATE USER '{DB_USER}'@'127.0.0.1' IDENTIFIED BY '{self.password}' REQUIRE SSL;"
                 f"GRANT ALL ON {DB_NAME}.* TO '{DB_USER}'@'127.0.0.1';")

    def _up(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"mariadbd exited with {self.proc.returncode}\n{self.diagnostics()}")
        return self.socket.exists() and self._client("SELECT 1").returncode == 0

    def _client(self, sql: str) -> subprocess.CompletedProcess:
        return subprocess.run([program("mariadb"), "--no-defaults", f"--socket={self.socket}", "-u", "root",
                               "-N", "-B", "-e", sql], capture_output=True, text=True, timeout=30)

    def sql(self, sql: str) -> str:
        """Run SQL as the server's root, over its Unix socket; the output (tab-separated)."""
        proc = self._client(sql)
        assert proc.returncode == 0, f"mariadb: {sql}: {proc.stderr}\n{self.diagnostics()}"
        return proc.stdout

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        shutil.rmtree(self.socket_dir, ignore_errors=True)

    def diagnostics(self) -> str:
        if not self.log.exists():
            return ""
        return "--- mariadbd.err (tail)\n" + "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])


class HeadAccounting:
    """The head's aicluster-accounting, run for real under AICLUSTER_ROOT=`root/head`.

    Its programs are the real ones (sacctmgr, slurmdbd) but two: the secret store (a program that
    writes the password) and systemctl, which records its calls and, on `restart slurmdbd`, runs a
    real `slurmdbd -D` on the slurmdbd.conf the script rendered. The daemon reads a copy of it in
    dbd/, which keeps every storage setting (host, port, user, password, database, SSL_CA) and
    changes only what a test on a shared machine must: the log and pid files, the user it runs as,
    its port, the private munged, and SSL_CA's path, which the script writes as the head sees it
    (without AICLUSTER_ROOT)."""

    def __init__(self, root: Path, *, settings: dict, password: str, slurm_conf: Path, munge_socket: Path,
                 port: int):
        self.root = root
        self.head = root / "head"
        self.dbd = root / "dbd"
        self.bin = root / "fake-bin"
        self.settings, self.password = settings, password
        self.slurm_conf, self.munge_socket = slurm_conf, munge_socket
        self.port = port        # slurmdbd's (DbdPort; AccountingStoragePort in slurm.conf)
        self.calls = root / "systemctl.log"
        self.pid_file = self.dbd / "launcher.pid"
        for d in (self.head / "etc" / "aicluster", self.head / "etc" / "slurm", self.dbd, self.bin):
            d.mkdir(parents=True, exist_ok=True)
        (self.head / "etc" / "aicluster" / "accounting.json").write_text(json.dumps(settings, indent=2))
        self._write_fakes()

    @property
    def conf(self) -> Path:
        """The slurmdbd.conf the script rendered."""
        return self.head / "etc" / "slurm" / "slurmdbd.conf"

    def _write_fakes(self) -> None:
        secret = self.bin / "aicluster-secret"
        # Called as `<prog> <secret-id> <outfile> --mode 0400`; records the id it was asked for.
        secret.write_text(f'#!/bin/sh\necho "$1" >> {self.root / "secret.log"}\n'
                          f"printf '%s' '{self.password}' > \"$2\"\nchmod 0400 \"$2\"\n")
        dbd, head = self.dbd, self.head
        systemctl = self.bin / "systemctl"
        systemctl.write_text(f"""#!/bin/bash
set -euo pipefail
echo "$*" >> {self.calls}
# `is-failed slurmctld`: as the test says (a file), by default no unit has failed.
[ "$1" = "is-failed" ] && {{ [ -f {self.root / "slurmctld.failed"} ]; exit; }}
[ "$*" = "restart slurmdbd" ] || exit 0
# Stop the slurmdbd a previous restart started (a zombie counts as gone: nobody reaps it here).
gone() {{ [ ! -e "/proc/$1" ] || grep -q '^[0-9]* (.*) Z' "/proc/$1/stat"; }}
if [ -f {self.pid_file} ]; then
  pid=$(cat {self.pid_file})
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 200); do gone "$pid" && break; sleep 0.1; done
fi
grep -v -E '^(LogFile|PidFile|SlurmUser)=' {head}/etc/slurm/slurmdbd.conf \\
  | sed 's|SSL_CA=/|SSL_CA={head}/|' > {dbd}/slurmdbd.conf
cat >> {dbd}/slurmdbd.conf <<EOF
LogFile={dbd}/slurmdbd.log
PidFile={dbd}/slurmdbd.pid
SlurmUser={_current_user()}
DbdPort={self.port}
AuthInfo=socket={self.munge_socket}
EOF
chmod 0600 {dbd}/slurmdbd.conf
touch {dbd}/slurm.conf
# slurmdbd reads slurmdbd.conf from the directory of SLURM_CONF.
SLURM_CONF={dbd}/slurm.conf setsid {program("slurmdbd")} -D >> {dbd}/slurmdbd.out 2>&1 < /dev/null &
echo $! > {self.pid_file}
""")
        for prog in (secret, systemctl):
            prog.chmod(0o755)

    def run(self) -> subprocess.CompletedProcess:
        """One run of the real script; not checked (the test asserts on it)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        env |= {"PATH": f"{self.bin}:{env.get('PATH', '/usr/bin:/bin')}:/usr/sbin:/sbin",
                "AICLUSTER_ROOT": str(self.head), "AICLUSTER_SECRET": str(self.bin / "aicluster-secret"),
                "AICLUSTER_ACCOUNTING_WAIT_S": str(SCRIPT_WAIT_S), "SLURM_CONF": str(self.slurm_conf)}
        return subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True,
                              timeout=SCRIPT_TIMEOUT_S)

    def run_slurmdbd(self, conf_text: str, seconds: float) -> str:
        """A slurmdbd of its own on `conf_text` (in dbd-alt/) for `seconds`; its log."""
        alt = self.root / "dbd-alt"
        alt.mkdir(exist_ok=True)
        conf = alt / "slurmdbd.conf"
        conf.write_text(conf_text)
        conf.chmod(0o600)
        (alt / "slurm.conf").touch()
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")} | {"SLURM_CONF": str(alt / "slurm.conf")}
        proc = subprocess.Popen([program("slurmdbd"), "-D"], env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=seconds)
        except subprocess.TimeoutExpired:
            proc.terminate()
            out, _ = proc.communicate(timeout=20)
        return out

    def stop(self) -> None:
        """Stop the slurmdbd the last restart started (its pid: the fake systemctl wrote it)."""
        if not self.pid_file.exists():
            return
        pid = int(self.pid_file.read_text())
        try:
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 20
            while not _gone(pid):
                if time.monotonic() > deadline:
                    os.kill(pid, signal.SIGKILL)
                    break
                time.sleep(0.1)
        except ProcessLookupError:
            pass

    def diagnostics(self) -> str:
        parts = []
        for path in (self.calls, self.dbd / "slurmdbd.log", self.dbd / "slurmdbd.out"):
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-30:]
                parts.append(f"--- {path.name} (tail)\n" + "\n".join(tail))
        return "\n".join(parts)
