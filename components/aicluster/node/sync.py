#!/usr/bin/env python3
"""Keep the head node's Slurm configuration in step with the cluster (slurm-gcp's slurmsync
pattern). aicluster publishes every rendered file to S3 (AWS) or Cloud Storage (GCP) with a
manifest; this script, run at boot and by a systemd timer, pulls what changed, tests it, installs
it, restarts slurmctld and runs `scontrol reconfigure`.

So adding a pool, resizing one or changing the idle time never touches the head node's own
inputs: its user data only knows where the manifest lives.

    aicluster-sync [--bootstrap]     # --bootstrap: first run at boot, slurmctld not started yet
    aicluster-sync --publish-artifact FILE KEY
                                     # what the head built for the nodes (aicluster-pyxis-build):
                                     # FILE at KEY (under artifacts/), then its SHA-256 at KEY.sha256

A pass never loses the controller (issue 13, "Sync that cannot lose the controller"):
1. every file of the manifest is downloaded and checked (staged in memory: the files are small) first; a missing object, a
   hash that does not match the manifest's `sha256`, unreachable storage or a corrupt manifest
   fails the pass (exit 1) with nothing installed. Only a definite not-found of the manifest
   before anything was ever applied means "nothing published yet" (exit 0);
2. changed Slurm files are tested by a throwaway `slurmctld -D` on a copy of them (private port,
   state, pid and log; Slurm 22.05-24.x have no config-test flag): a configuration it rejects is
   never installed, its own error line is logged, and the pass exits 1 (the next one tries again);
3. what was applied is recorded in /var/lib/aicluster/sync/applied.json (per-file sha256 and the
   steps still pending), apart from the files on disk: a run step or a restart that failed is
   retried by the next pass, never reported "up to date";
4. the last set slurmctld ran on is kept in /var/lib/aicluster/sync/last-good/; when the restart
   after an install fails, that set is restored, slurmctld restarted on it, and an alert raised
   (an `aicluster-sync: ALERT ...` line and /var/lib/aicluster/sync/alert.json; exit 2). The same
   failed set is not retried until a new one is published or alert.json is removed.

Settings: /etc/aicluster/sync.json {"bucket", "prefix", "region"} and, on GCP, "storage": "gcs"
(read through aicluster.node.gcp). For tests: AICLUSTER_ROOT prefixes every local
path; AICLUSTER_SCONTROL / AICLUSTER_SYSTEMCTL / AICLUSTER_SLURMCTLD replace those commands;
AICLUSTER_SYNC_VALIDATE_TIMEOUT_S, AICLUSTER_SYNC_RESTART_WAIT_S, AICLUSTER_SYNC_STEP_TIMEOUT_S bound
the test slurmctld, the wait for a restarted one and each run step.
"""
from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.environ.get("AICLUSTER_ROOT", "")
SCONTROL = os.environ.get("AICLUSTER_SCONTROL", "scontrol")
SYSTEMCTL = os.environ.get("AICLUSTER_SYSTEMCTL", "systemctl")
SLURMCTLD = os.environ.get("AICLUSTER_SLURMCTLD", "")
VALIDATE_TIMEOUT_S = float(os.environ.get("AICLUSTER_SYNC_VALIDATE_TIMEOUT_S", "60"))
RESTART_WAIT_S = float(os.environ.get("AICLUSTER_SYNC_RESTART_WAIT_S", "60"))
STEP_TIMEOUT_S = float(os.environ.get("AICLUSTER_SYNC_STEP_TIMEOUT_S", "1800"))
STATE = "/var/lib/aicluster/sync"
RESTART = "restart"          # the pending step that restarts slurmctld on installed Slurm files
EXIT_FAILED, EXIT_ALERT = 1, 2
MODE = re.compile(r"0?[0-7]{3,4}")
SHA256 = re.compile(r"[0-9a-f]{64}")
# What the throwaway slurmctld must not share with the real one: its port, state, pid and log;
# and what it must not do: register with slurmdbd as the cluster's controller (slurmdbd would then
# send its updates to the throwaway's port) or run the power programs (launch, end instances).
# slurm.conf's link to slurmdbd, which the throwaway leaves out.
ACCOUNTING_KEYS = frozenset({"accountingstoragetype", "accountingstoragehost", "accountingstoragebackuphost",
                             "accountingstorageport", "accountingstoragepass", "accountingstorageuser",
                             "accountingstorageenforce", "accountingstoragetres"})   # gres TRES need slurmdbd
PROGRAM_KEYS = ("resumeprogram", "suspendprogram", "resumefailprogram", "slurmctldprimaryonprog",
                "slurmctldprimaryoffprog")


class SyncError(Exception):
    """A pass that failed: logged, exit 1, the next pass tries again."""


class NotFound(Exception):
    """The manifest is definitely not there (S3 NoSuchKey, a Cloud Storage 404)."""


def local(path: str) -> str:
    return ROOT + path


def log(message: str) -> None:
    print(f"aicluster-sync: {message}", file=sys.stderr, flush=True)


def log_error(message: str) -> None:
    # Under systemd, "<3>" gives the line journald's error priority (sd-daemon(3), SyslogLevelPrefix=);
    # JOURNAL_STREAM says stderr is the journal (systemd.exec(5)).
    prefix = "<3>" if os.environ.get("JOURNAL_STREAM") else ""
    print(f"{prefix}aicluster-sync: {message}", file=sys.stderr, flush=True)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- local files, written so that a crash leaves the old or the new file, never half of one ---

def write_atomic(target: str, data: bytes, mode: int) -> None:
    os.makedirs(os.path.dirname(target), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), prefix=".aicluster-sync-")
    try:
        os.fchmod(fd, mode)
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, target)


def disk_matches(path: str, data: bytes, mode: int) -> bool:
    target = local(path)
    try:
        with open(target, "rb") as fh:
            return fh.read() == data and (os.stat(target).st_mode & 0o7777) == mode
    except FileNotFoundError:
        return False


def read_json(path: str, default=None):
    try:
        with open(local(path), encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        return default


def write_json(path: str, value) -> None:
    write_atomic(local(path), (json.dumps(value, indent=2, sort_keys=True) + "\n").encode(), 0o644)


def ensure_link(path: str, target: str) -> bool:
    link = local(path)
    if os.path.islink(link) and os.readlink(link) == target:
        return False
    os.makedirs(os.path.dirname(link), exist_ok=True)
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(target, link)
    return True


# --- the object store ---

class GcsObjects:
    """The S3 calls sync makes, get_object(Bucket, Key)["Body"].read() and (publishing the head's
    builds) put_object(Bucket, Key, Body), over Cloud Storage."""

    def get_object(self, Bucket: str, Key: str) -> dict:  # noqa: N803 - the boto3 names sync uses
        import io

        from aicluster.node.gcp import storage_read

        return {"Body": io.BytesIO(storage_read(Bucket, Key))}

    def put_object(self, Bucket: str, Key: str, Body: bytes) -> dict:  # noqa: N803
        """A simple media upload with the VM's token: POST /upload/storage/v1/b/BUCKET/o?uploadType=media
        &name=NAME (https://cloud.google.com/storage/docs/json_api/v1/objects/insert)."""
        import urllib.parse
        import urllib.request

        from aicluster.node.gcp import STORAGE, access_token, endpoint

        upload = endpoint("STORAGE", STORAGE).replace("/storage/v1", "/upload/storage/v1", 1)
        url = (f"{upload}/b/{urllib.parse.quote(Bucket, safe='')}/o?"
               + urllib.parse.urlencode({"uploadType": "media", "name": Key}))
        request = urllib.request.Request(url, data=Body, method="POST", headers={
            "Authorization": f"Bearer {access_token()}", "Content-Type": "application/octet-stream"})
        with urllib.request.urlopen(request, timeout=120) as response:
            response.read()
        return {}


def object_store(settings: dict):
    if settings.get("storage") == "gcs":
        return GcsObjects()
    import boto3

    return boto3.client("s3", region_name=settings["region"])


def error_code(exc: Exception) -> str | None:
    error = getattr(exc, "response", None)
    return error.get("Error", {}).get("Code") if isinstance(error, dict) else None


def is_not_found(exc: Exception) -> bool:
    """A definite "no such object": S3's NoSuchKey, Cloud Storage's HTTP 404
    (aicluster.node.gcp.ApiError.status). Anything else (no network, throttling, a missing bucket) is
    a failure, never "nothing published"."""
    return getattr(exc, "status", None) == 404 or error_code(exc) in ("NoSuchKey", "404")


def listed(store, bucket: str, key: str) -> bool | None:
    """Whether S3 lists the key; None when that cannot be told (not S3, or the listing failed).
    S3 answers a GetObject of a missing key with 403, not 404, to a caller without s3:ListBucket
    on the bucket (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html), and the
    head's ListBucket is granted only with an s3:prefix condition, which a GetObject does not
    carry: a listing under the key's own name tells a missing manifest from a denied one."""
    if not hasattr(store, "list_objects_v2"):
        return None
    try:
        found = store.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1000).get("Contents", [])
    except Exception:  # noqa: BLE001 - the GetObject error is the one reported
        return None
    return any(item.get("Key") == key for item in found)


def read_object(store, bucket: str, key: str) -> bytes:
    try:
        return store.get_object(Bucket=bucket, Key=key)["Body"].read()
    except Exception as exc:  # noqa: BLE001 - boto3, botocore and aicluster.node.gcp errors alike
        if is_not_found(exc) or (error_code(exc) == "AccessDenied" and listed(store, bucket, key) is False):
            raise NotFound(f"{bucket}/{key}") from None
        raise SyncError(f"cannot read {bucket}/{key}: {type(exc).__name__}: {exc}") from None


# --- the manifest ---

def path_problem(what: str, value) -> str | None:
    if not isinstance(value, str) or not value.startswith("/") or os.path.normpath(value) != value:
        return f"{what} {value!r} is not an absolute, normalized path"
    return None


def entry_problems(index: int, entry) -> list[str]:
    if not isinstance(entry, dict):
        return [f"files[{index}] is not an object"]
    key = entry.get("key")
    problems = [path_problem(f"files[{index}].path", entry.get("path"))]
    if not isinstance(key, str) or not key or key.startswith("/") or ".." in key.split("/"):
        problems.append(f"files[{index}].key {key!r} is not an object key under the prefix")
    if not isinstance(entry.get("mode", "0644"), str) or not MODE.fullmatch(entry.get("mode", "0644")):
        problems.append(f"files[{index}].mode {entry.get('mode')!r} is not an octal mode")
    run = entry.get("run", [])
    if not isinstance(run, list) or not all(isinstance(a, str) and a for a in run) or (run and run[0][:1] != "/"):
        problems.append(f"files[{index}].run {run!r} is not a command with an absolute program")
    if not isinstance(entry.get("reconfigure", False), bool):
        problems.append(f"files[{index}].reconfigure is not true or false")
    if "sha256" in entry and not (isinstance(entry["sha256"], str) and SHA256.fullmatch(entry["sha256"])):
        problems.append(f"files[{index}].sha256 is not a hex SHA-256")
    return [p for p in problems if p]


def link_problems(index: int, link) -> list[str]:
    if not isinstance(link, dict) or not isinstance(link.get("target"), str) or not link.get("target"):
        return [f"links[{index}] is not an object with a target"]
    problem = path_problem(f"links[{index}].path", link.get("path"))
    return [problem] if problem else []


def manifest_problems(doc) -> list[str]:
    """Everything wrong with a manifest's shape (slurm_files.Published.entry() writes it)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("files"), list) or not doc["files"]:
        return ["not an object with a non-empty list of files"]
    if not isinstance(doc.get("links", []), list):
        return ["links is not a list"]
    problems = [p for i, e in enumerate(doc["files"]) for p in entry_problems(i, e)]
    problems += [p for i, link in enumerate(doc.get("links", [])) for p in link_problems(i, link)]
    paths = [e.get("path") for e in doc["files"] if isinstance(e, dict)]
    problems += [f"{p} is listed twice" for p in sorted({p for p in paths if paths.count(p) > 1}, key=str)]
    return problems


def parse_manifest(raw: bytes, where: str) -> dict:
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise SyncError(f"corrupt manifest {where}: not JSON ({exc})") from None
    problems = manifest_problems(doc)
    if problems:
        raise SyncError(f"corrupt manifest {where}: {'; '.join(problems[:5])}")
    return doc


# --- staging: the whole set, downloaded and checked before anything is installed ---

class Staged:
    """One manifest entry with its downloaded bytes."""

    def __init__(self, entry: dict, data: bytes):
        self.entry, self.data, self.sha256 = entry, data, sha256(data)
        self.path, self.mode = entry["path"], int(entry.get("mode", "0644"), 8)
        self.run = entry.get("run", [])

    def record(self) -> dict:
        return {"sha256": self.sha256, "mode": self.entry.get("mode", "0644")}


def stage(store, bucket: str, prefix: str, manifest: dict) -> list:
    staged = []
    for entry in manifest["files"]:
        try:
            data = read_object(store, bucket, prefix + entry["key"])
        except NotFound:
            raise SyncError(f"object {bucket}/{prefix}{entry['key']} (for {entry['path']}) is in the "
                            "manifest but missing: nothing installed") from None
        item = Staged(entry, data)
        if entry.get("sha256", item.sha256) != item.sha256:
            raise SyncError(f"object {bucket}/{prefix}{entry['key']} has sha256 {item.sha256}, the manifest "
                            f"says {entry['sha256']} (published while read?): nothing installed")
        staged.append(item)
    return staged


def set_id(staged: list, links: list) -> str:
    """One hash for the whole desired set: what the alert and last-good are keyed by."""
    doc = [[s.path, s.sha256, s.entry.get("mode", "0644"), s.run, bool(s.entry.get("reconfigure"))] for s in staged]
    return sha256(json.dumps([doc, links], sort_keys=True).encode())


# --- testing the Slurm files with a throwaway slurmctld ---

def slurmctld_program() -> str:
    found = SLURMCTLD or shutil.which("slurmctld") or shutil.which("slurmctld", path="/usr/sbin:/sbin:/usr/local/sbin")
    if not found:
        raise SyncError("slurmctld not found: cannot test the new Slurm configuration, so it is not installed")
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def conf_key(line: str) -> str:
    return line.split("=", 1)[0].strip().lower() if "=" in line and not line.lstrip().startswith("#") else ""


def private_conf(text: str, work: str, port: int) -> str:
    """The staged slurm.conf with the throwaway's own port, state, pid and log, and no accounting
    or power programs. Replaced rather than appended: Slurm reads a duplicate key but logs
    "specified more than once" for it. Accounting is left out, not set to accounting_storage/none
    (Slurm 23.11 removed that plugin): the throwaway must never register with the real slurmdbd,
    and with a database configured but unreachable its first start is fatal."""
    overrides = {"slurmctldport": str(port), "statesavelocation": f"{work}/state",
                 "slurmctldpidfile": f"{work}/slurmctld.pid", "slurmctldlogfile": f"{work}/slurmctld.log",
                 "slurmschedlogfile": f"{work}/sched.log"}
    present = {conf_key(line) for line in text.splitlines()}
    true = shutil.which("true") or "/bin/true"
    overrides |= {key: true for key in PROGRAM_KEYS if key in present}
    dropped = set(overrides) | {key for key in present if key in ACCOUNTING_KEYS}
    kept = [line for line in text.splitlines() if conf_key(line) not in dropped]
    return "\n".join(kept + [f"{key}={value}" for key, value in overrides.items()]) + "\n"


def slurm_user(text: str) -> str:
    users = [line.split("=", 1)[1].strip() for line in text.splitlines() if conf_key(line) == "slurmuser"]
    return users[-1] if users else "root"


def copy_conf_dir(conf_dir: str, staged: list, work: str) -> str:
    """The Slurm directory as it will be after the install: what is there now, then the staged files."""
    target = os.path.join(work, "etc")
    os.makedirs(target)
    if os.path.isdir(local(conf_dir)):
        for name in os.listdir(local(conf_dir)):
            if os.path.isfile(os.path.join(local(conf_dir), name)):
                shutil.copy(os.path.join(local(conf_dir), name), os.path.join(target, name))
    for item in staged:
        if os.path.dirname(item.path) == conf_dir:
            with open(os.path.join(target, os.path.basename(item.path)), "wb") as fh:
                fh.write(item.data)
    return target


def hand_to(work: str, user: str) -> None:
    """slurmctld drops to SlurmUser: the throwaway's directory must be that user's."""
    if os.geteuid() != 0:
        return
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        return          # slurmctld itself says what is wrong with the user
    for base, dirs, files in os.walk(work):
        for name in [base, *[os.path.join(base, n) for n in dirs + files]]:
            os.chown(name, entry.pw_uid, entry.pw_gid)


def listening_sockets(port: int) -> set[str] | None:
    """The inodes of the sockets listening on the port, from /proc/net (None where there is none)."""
    found, seen = set(), False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as fh:
                rows = fh.read().splitlines()[1:]
        except OSError:
            continue
        seen = True
        for row in rows:
            cols = row.split()
            # local_address is HEXIP:HEXPORT; state 0A is LISTEN; column 9 the inode.
            if len(cols) > 9 and cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                found.add(cols[9])
    return found if seen else None


def session_pids(sid: int) -> list[int]:
    """The processes of a session: the throwaway runs in its own, and a wrapper (a chroot, a
    namespace) may run slurmctld as its child."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 3 and fields[3] == str(sid):      # state, ppid, pgrp, session
            pids.append(int(name))
    return pids


def socket_inodes(pids: list[int]) -> set[str] | None:
    """The inodes of the processes' sockets (None where their descriptors cannot be read)."""
    inodes, readable = set(), False
    for pid in pids:
        try:
            names = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        readable = True
        for name in names:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{name}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:["):-1])
    return inodes if readable else None


def listening(port: int, sid: int) -> bool:
    """The throwaway itself listens on the port. The port was free when chosen, but anything on
    the host (another test slurmctld among them) may take it before slurmctld binds: a connect
    alone would then count a rejected configuration as accepted. Where /proc cannot say whose
    socket it is, a connect is the best there is."""
    theirs = listening_sockets(port)
    if theirs is not None:
        if not theirs:
            return False
        ours = socket_inodes(session_pids(sid))
        if ours is not None:
            return bool(ours & theirs)
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def wait_up(proc: subprocess.Popen, port: int) -> bool:
    """slurmctld opens its port only after it has read the configuration, loaded its plugins and
    its nodes: its own listening socket means the configuration was accepted."""
    deadline = time.monotonic() + VALIDATE_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if listening(port, proc.pid):
            return True
        time.sleep(0.1)
    return False


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)     # its own session: slurmscriptd too
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def rejection(work: str, timed_out: bool) -> str:
    """slurmctld's own words: its fatal line and the error just before it (the detail, e.g.
    "Parsing error at unrecognized key"), else the last lines it wrote."""
    lines = []
    for name in ("output", "slurmctld.log"):
        try:
            with open(os.path.join(work, name), encoding="utf-8", errors="replace") as fh:
                lines += [line.strip() for line in fh if line.strip()]
        except FileNotFoundError:
            pass
    fatal = next((i for i, line in enumerate(lines) if "fatal" in line.lower()), None)
    if fatal is not None:
        errors = [line for line in lines[:fatal] if "error" in line.lower()]
        said = " | ".join(errors[-1:] + [lines[fatal]])
    else:
        said = " | ".join(lines[-3:]) or "no output"
    return f"did not come up within {VALIDATE_TIMEOUT_S:.0f} s: {said}" if timed_out else said


def test_slurm_config(staged: list) -> None:
    """Start a throwaway slurmctld on a copy of the Slurm files as they will be installed; raise
    SyncError with its error line when it does not come up."""
    conf = next((s for s in staged if s.entry.get("reconfigure") and os.path.basename(s.path) == "slurm.conf"), None)
    if conf is None:
        return
    program = slurmctld_program()
    # In the system's temp dir, which SlurmUser can traverse whatever the umask made of ours.
    work = tempfile.mkdtemp(prefix="aicluster-sync-test-")
    try:
        etc = copy_conf_dir(os.path.dirname(conf.path), staged, work)
        port = free_port()
        text = conf.data.decode(errors="replace")
        with open(os.path.join(etc, "slurm.conf"), "w", encoding="utf-8") as fh:
            fh.write(private_conf(text, work, port))
        os.makedirs(os.path.join(work, "state"))
        hand_to(work, slurm_user(text))
        accepted, timed_out = run_throwaway(program, os.path.join(etc, "slurm.conf"), work, port)
        if not accepted:
            raise SyncError(f"slurmctld rejected the new configuration, not installed ({rejection(work, timed_out)}); "
                            "slurmctld keeps running on the old one")
        log("the new Slurm configuration passed a test slurmctld")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_throwaway(program: str, conf: str, work: str, port: int) -> tuple[bool, bool]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["SLURM_CONF"] = conf            # the other files (gres.conf, ...) are found beside it
    with open(os.path.join(work, "output"), "wb") as out:
        proc = subprocess.Popen([program, "-D", "-f", conf], env=env, cwd=work, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        accepted = wait_up(proc, port)
        return accepted, not accepted and proc.poll() is None
    finally:
        stop(proc)


# --- applied state, last good set, alert ---

def load_applied() -> dict:
    applied = read_json(f"{STATE}/applied.json", {})
    return applied if isinstance(applied, dict) else {}


def pending_steps(staged: list, changed: list, applied: dict, bootstrap: bool) -> list[str]:
    """Steps still to do, in manifest order, the restart last: those a failed pass left, and those
    of the files that changed now. At boot slurmctld is started after this pass, on these files."""
    wanted = set(applied.get("pending", []))
    wanted |= {f"run:{s.path}" for s in changed if s.run}
    if any(s.entry.get("reconfigure") for s in changed):
        wanted.add(RESTART)
    steps = [f"run:{s.path}" for s in staged if s.run and f"run:{s.path}" in wanted]
    return steps + ([RESTART] if RESTART in wanted and not bootstrap else [])


def record_applied(applied: dict, manifest_hash: str, files: dict, pending: list, outcome: dict | None = None) -> dict:
    steps = {**applied.get("steps", {}), **(outcome or {})}
    doc = {"manifest_sha256": manifest_hash, "files": files, "pending": pending, "steps": steps,
           "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    write_json(f"{STATE}/applied.json", doc)
    return doc


def save_last_good(staged: list, links: list, ident: str) -> None:
    """The set slurmctld now runs on: its files by hash, then its list (written last, so a crash
    leaves the previous list, whose files are still there)."""
    files_dir = local(f"{STATE}/last-good/files")
    for item in staged:
        if not os.path.exists(os.path.join(files_dir, item.sha256)):
            write_atomic(os.path.join(files_dir, item.sha256), item.data, 0o600)
    write_json(f"{STATE}/last-good/manifest.json",
               {"set": ident, "files": [{**s.entry, "sha256": s.sha256} for s in staged], "links": links})
    keep = {s.sha256 for s in staged}
    for name in os.listdir(files_dir):
        if name not in keep:
            os.unlink(os.path.join(files_dir, name))


def raise_alert(reason: str, failed_set: str, restored: str | None) -> None:
    log_error(f"ALERT {reason}")
    write_json(f"{STATE}/alert.json", {"reason": reason, "failed_set": failed_set, "restored_set": restored,
                                       "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})


def clear_alert() -> None:
    if os.path.exists(local(f"{STATE}/alert.json")):
        os.unlink(local(f"{STATE}/alert.json"))
        log("alert cleared: the published set applied")


# --- slurmctld ---

def slurmctld_active() -> bool:
    return subprocess.run([SYSTEMCTL, "is-active", "--quiet", "slurmctld"], check=False).returncode == 0


def restart_slurmctld() -> str | None:
    """Restart slurmctld, then push the files to configless slurmd's; None when it worked, else why.
    A plain reconfigure is not enough: Slurm 22.05 exits on `scontrol reconfigure` when the node
    list changed, and accounting settings only take effect on restart. Running jobs survive a
    restart (state is saved in StateSaveLocation). The unit may report success for a daemon that
    exits right after (Type=simple), so only an answered reconfigure counts."""
    try:
        restart = subprocess.run([SYSTEMCTL, "restart", "slurmctld"], check=False, timeout=300)
    except subprocess.TimeoutExpired:
        return "`systemctl restart slurmctld` did not return within 300 s"
    if restart.returncode != 0:
        return f"`systemctl restart slurmctld` exited {restart.returncode}"
    log("restarted slurmctld")
    deadline = time.monotonic() + RESTART_WAIT_S
    while True:
        if subprocess.run([SCONTROL, "reconfigure"], check=False).returncode == 0:
            log("scontrol reconfigure")
            return None
        if time.monotonic() > deadline:
            return f"slurmctld did not answer `scontrol reconfigure` within {RESTART_WAIT_S:.0f} s of its restart"
        time.sleep(2)


def power_up_static_nodes() -> None:
    """The always-on nodes (min_nodes) start powered down like every CLOUD node: ask Slurm to
    resume those that are down, so they run without waiting for a job (SuspendExcNodes keeps
    them up afterwards)."""
    try:
        with open(local("/etc/aicluster/cluster.json"), encoding="utf-8") as fh:
            static = json.load(fh).get("static_nodes", [])
    except FileNotFoundError:
        return
    for hostlist in static:
        shown = subprocess.run([SCONTROL, "-o", "show", "node", hostlist], check=False,
                               capture_output=True, text=True).stdout
        down = []
        for line in shown.splitlines():
            fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
            state = fields.get("State", "")
            if "POWERED_DOWN" in state and "POWERING_UP" not in state:
                down.append(fields.get("NodeName", ""))
        if down:
            subprocess.run([SCONTROL, "update", f"nodename={','.join(down)}", "state=power_up"], check=False)
            log(f"powering up static nodes {','.join(down)}")


# --- one pass ---

def fetch_manifest(store, settings: dict, applied: dict) -> tuple[bytes, dict] | None:
    where = f"{settings['bucket']}/{settings['prefix']}manifest.json"
    try:
        raw = read_object(store, settings["bucket"], settings["prefix"] + "manifest.json")
    except NotFound:
        if applied.get("files"):
            raise SyncError(f"manifest {where} is gone although a set was applied: nothing changed") from None
        # The head node is created while the filesystems still are, and `pulumi up` publishes the
        # configuration once they exist: until then there is nothing to install.
        log(f"nothing published at {where} yet; the timer tries again")
        return None
    return raw, parse_manifest(raw, where)


def install(changed: list, links: list) -> None:
    for item in changed:
        if not disk_matches(item.path, item.data, item.mode):
            write_atomic(local(item.path), item.data, item.mode)
            log(f"updated {item.path}")
    for link in links:
        if ensure_link(link["path"], link["target"]):
            log(f"linked {link['path']} -> {link['target']}")


def run_step(item) -> str | None:
    """Run what a file asks for (e.g. the accounting set-up); None when it worked, else why."""
    log(f"running {' '.join(item.run)}")
    try:
        done = subprocess.run([local(item.run[0]), *item.run[1:]], check=False, timeout=STEP_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{item.run[0]}: {exc}"
    return None if done.returncode == 0 else f"{' '.join(item.run)} exited {done.returncode}"


def restore(good: dict) -> dict:
    """Put the last good set's files back; return them as applied.json records them."""
    files = {}
    for entry in good["files"]:
        mode = int(entry.get("mode", "0644"), 8)
        with open(local(f"{STATE}/last-good/files/{entry['sha256']}"), "rb") as fh:
            data = fh.read()
        if not disk_matches(entry["path"], data, mode):
            write_atomic(local(entry["path"]), data, mode)
            log(f"restored {entry['path']} from the last good set")
        files[entry["path"]] = {"sha256": entry["sha256"], "mode": entry.get("mode", "0644")}
    return files


def roll_back(reason: str, ident: str, manifest_hash: str, applied: dict) -> int:
    """The restart on the new set failed: put the last good set back, restart on it, alert.
    The new set is blamed (not retried until a new one is published or the alert is removed) only
    when slurmctld then runs on the old one: retrying it every pass would take the controller down
    every minute. Otherwise the cause is elsewhere (munge, a disk), and the restart stays pending."""
    good = read_json(f"{STATE}/last-good/manifest.json")
    if not good:
        raise_alert(f"{reason}; no last good set to restore: slurmctld is down, the restart is retried "
                    "by the next pass", None, None)
        record_applied(applied, manifest_hash, applied["files"], [RESTART], {RESTART: "failed"})
        return EXIT_ALERT
    files = restore(good)
    again = restart_slurmctld()
    if again is not None:
        raise_alert(f"{reason}; restored the last good set, but slurmctld fails on it too ({again}): "
                    "the restart is retried by the next pass", None, good["set"])
        record_applied(applied, manifest_hash, files, [RESTART], {RESTART: "failed"})
        return EXIT_ALERT
    raise_alert(f"{reason}; restored the last good set and restarted slurmctld on it. This set is not "
                f"retried until a new one is published or {STATE}/alert.json is removed", ident, good["set"])
    record_applied(applied, manifest_hash, files, [], {RESTART: "failed"})
    return EXIT_ALERT


def run_pending(staged: list, pending: list, applied: dict, ident: str) -> int | None:
    """Run the pending steps in order, recording each; None when all worked, else the exit status
    (a failed restart rolls back). A failed run step stops the pass: the steps run before
    slurmctld rereads its configuration, so the restart waits for them; the next pass retries."""
    by_step = {f"run:{s.path}": s for s in staged if s.run}
    files, manifest_hash = applied["files"], applied["manifest_sha256"]
    for index, step in enumerate(pending):
        why = restart_slurmctld() if step == RESTART else run_step(by_step[step])
        if why is not None and step == RESTART:
            return roll_back(f"slurmctld failed on the new configuration: {why}", ident, manifest_hash, applied)
        if why is not None:
            record_applied(applied, manifest_hash, files, pending[index:], {step: "failed"})
            raise SyncError(f"{why}; retried by the next pass (pending: {', '.join(pending[index:])})")
        applied = record_applied(applied, manifest_hash, files, pending[index + 1:], {step: "ok"})
    return None


def apply(staged: list, links: list, manifest_hash: str, bootstrap: bool) -> int:
    applied = load_applied()
    ident = set_id(staged, links)
    alert = read_json(f"{STATE}/alert.json")
    if alert and alert.get("failed_set") == ident:
        log_error(f"ALERT still standing: {alert.get('reason')}")
        return EXIT_ALERT
    recorded = applied.get("files", {})
    # Changed: not what was applied (a pass that failed partway), or not what is on disk (a hand edit).
    changed = [s for s in staged if recorded.get(s.path) != s.record() or not disk_matches(s.path, s.data, s.mode)]
    if any(s.entry.get("reconfigure") for s in changed):
        test_slurm_config(staged)
    install(changed, links)
    pending = pending_steps(staged, changed, applied, bootstrap)
    # Recorded before any step runs: a pass that dies from here on leaves its steps pending.
    applied = record_applied(applied, manifest_hash, {s.path: s.record() for s in staged}, pending)
    status = run_pending(staged, pending, applied, ident)
    if status is not None:
        return status
    if (read_json(f"{STATE}/last-good/manifest.json") or {}).get("set") != ident:
        save_last_good(staged, links, ident)
    clear_alert()
    if not changed and not pending:
        log("up to date")
    return 0


def lock(bootstrap: bool):
    """One pass at a time. The boot pass waits (slurmctld starts on its files); a timer pass that
    finds one running leaves it to finish."""
    os.makedirs(local(STATE), exist_ok=True)
    fh = open(local(f"{STATE}/lock"), "w")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | (0 if bootstrap else fcntl.LOCK_NB))
    except BlockingIOError:
        fh.close()
        return None
    return fh


def one_pass(bootstrap: bool) -> int:
    with open(local("/etc/aicluster/sync.json"), encoding="utf-8") as fh:
        settings = json.load(fh)
    store = object_store(settings)
    fetched = fetch_manifest(store, settings, load_applied())
    if fetched is None:
        return 0
    raw, manifest = fetched
    staged = stage(store, settings["bucket"], settings["prefix"], manifest)
    status = apply(staged, manifest.get("links", []), sha256(raw), bootstrap)
    if status == 0 and not bootstrap and slurmctld_active():
        power_up_static_nodes()
    return status


# --- publishing what the head builds for the nodes ---

# The head writes here and nowhere else of the bucket (node_local_files.ARTIFACT_PREFIX; its IAM
# grant is scoped to it), and the nodes read it.
ARTIFACT_PREFIX = "artifacts/"


def artifact_key_problem(key: str) -> str | None:
    parts = key.split("/")
    if not key.startswith(ARTIFACT_PREFIX) or "" in parts or "." in parts or ".." in parts or key.endswith(".sha256"):
        return f"{key!r} is not an object key under {ARTIFACT_PREFIX}"
    return None


def publish_artifact(path: str, key: str) -> int:
    """Publish FILE at KEY, then its SHA-256 at KEY.sha256 (sha256sum's format), which a node reads
    first (aicluster-fetch --artifact): a digest is there only once its object is. A key whose
    digest is already published is never rewritten (a node may be reading it, and every node must
    get the same build): the published one stays, whatever this build's bytes."""
    problem = artifact_key_problem(key)
    if problem:
        raise SyncError(f"cannot publish {path}: {problem}")
    with open(local("/etc/aicluster/sync.json"), encoding="utf-8") as fh:
        settings = json.load(fh)
    with open(path, "rb") as fh:
        data = fh.read()
    if not data:
        raise SyncError(f"cannot publish {path}: it is empty")
    store, bucket, digest = object_store(settings), settings["bucket"], sha256(data)
    try:
        published = read_object(store, bucket, key + ".sha256").decode(errors="replace").split()
    except NotFound:
        published = []
    if published:
        if published[0] == digest:
            log(f"{bucket}/{key} is published (SHA-256 {digest})")
        else:
            log(f"{bucket}/{key} is published already (SHA-256 {published[0]}): kept, never rewritten; "
                f"this build ({digest}) is not published")
        return 0
    try:
        store.put_object(Bucket=bucket, Key=key, Body=data)
        store.put_object(Bucket=bucket, Key=key + ".sha256", Body=f"{digest}  {os.path.basename(key)}\n".encode())
    except Exception as exc:  # noqa: BLE001 - boto3, botocore and urllib errors alike
        raise SyncError(f"cannot publish {bucket}/{key}: {type(exc).__name__}: {exc}") from None
    log(f"published {bucket}/{key} ({len(data)} bytes) and its SHA-256 {digest}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="aicluster-sync")
    parser.add_argument("--bootstrap", action="store_true")
    parser.add_argument("--publish-artifact", nargs=2, metavar=("FILE", "KEY"))
    args = parser.parse_args(argv)
    if args.publish_artifact:
        try:
            return publish_artifact(*args.publish_artifact)
        except SyncError as exc:
            log_error(f"FAILED {exc}")
            return EXIT_FAILED
    held = lock(args.bootstrap)
    if held is None:
        log("another pass is running; this one leaves it to finish")
        return 0
    try:
        return one_pass(args.bootstrap)
    except SyncError as exc:
        log_error(f"FAILED {exc}")
        return EXIT_FAILED
    finally:
        held.close()


if __name__ == "__main__":
    sys.exit(main())
