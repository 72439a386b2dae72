"""The Slurm power programs' core, the same on every cloud: resume and suspend, Slurm hostlists,
scontrol, setting nodes DOWN with a reason, logging, reading the action from the link name and the
cluster's config.

A cloud's program (aicluster-power.py on AWS, aicluster-gcp-power.py on GCP) keeps only its cloud
calls, in a `Cloud` (launch, locate, delete, find and list instances) and a `NodeRecords` (write
and delete node-name records), and hands them to `main`, with the reconcile loop's own `main`.
Installed with them in /opt/aicluster/lib (aicluster/render/node_programs.py). Standard library only.

The same programs run the reconcile loop (`aicluster-reconcile`, a fourth link, run by a systemd
timer on the head: aicluster.node.reconcile), which keeps Slurm's view of the fleet and the cloud's
equal. What the programs and the loop hand each other lives under STATE_DIR (pending suspends).
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

DEFAULT_CONFIG = "/etc/aicluster/cluster.json"
DEFAULT_LOG = "/var/log/aicluster/power.log"
ACTIONS = ("resume", "suspend", "resume-fail")
RECONCILE = "reconcile"                 # the fourth action: no hostlist (aicluster.node.reconcile)
STATUS_FLAG = "--status"                # `aicluster-reconcile --status`: print the roll, act on nothing
DEFAULT_STATE_DIR = "/var/lib/aicluster"
# Drain and DOWN reasons aicluster sets start with these, so the reconcile loop knows what it may
# replace: a node an administrator drained by hand (any other reason) is never touched.
HEALTH_REASON = "aicluster-health"      # the health check failed (aicluster-gpu-healthcheck)
EVENT_REASON = "aicluster-event"        # a scheduled event, spot interruption, maintenance, preemption
BOOTSTRAP_REASON = "aicluster-bootstrap"  # the node's set-up failed before slurmd started
ROLL_REASON = "aicluster-roll"          # a rolling update: the node's instance runs an older version
# Drained because its NVLink domain is degraded by another node (aicluster-gpu-healthcheck imex):
# deliberately not one of the reasons the reconcile loop replaces for (a fresh instance cannot mend
# a peer); the health check resumes the node once the domain is whole again.
IMEX_DOMAIN_REASON = "aicluster-imex-domain"
# The tag or label the resume programs put on every instance they launch: the version of its pool
# it was launched from (cluster.json pools[].version: the launch template version on AWS, the
# instance template's name on GCP), so the reconcile loop knows from the listing which nodes run
# an older one (the roll, aicluster.node.reconcile).
VERSION_TAG = "aicluster-node-version"
# Where a node that failed its set-up says why: an EC2 tag on its own instance, a GCE guest attribute.
BOOTSTRAP_ERROR_TAG = "aicluster-bootstrap-error"
BOOTSTRAP_ERROR_ATTRIBUTE = ("aicluster", "bootstrap-error")    # (namespace, key)
MAX_REASON = 200            # characters of a cloud error kept in a Slurm node reason
MAX_HOSTS = 100_000         # a hostlist that expands further is a typo, not a cluster
# TTL of the node-name A records the resume programs write: well under SuspendTimeout (300 s), so
# a node relaunched with a new address is never looked up at its old one.
NODE_RECORD_TTL_S = 60
NODE_RE = re.compile(r"^([a-z0-9](?:[a-z0-9-]*[a-z0-9])?)-([0-9]+)$")
REASON_CODE_RE = re.compile(r"^([^\s:]+):(?: |$)")     # reason_text's `<code>: `
# The role tag or label (aicluster-role) of the instances the power programs launch: the pools'
# launch templates carry it. Head, login and any other role are never the programs' to end.
COMPUTE_ROLE = "compute"
# Resume at scale (resume, suspend): slurmctld passes a per-job breakdown of a resume in this file.
RESUME_FILE_ENV = "SLURM_RESUME_FILE"
PENDING_SUSPEND = "pending-suspend.json"     # suspends that did not finish (reconcile retries them)
PENDING_REJECTED = "pending-suspend.rejected.json"  # its entries of the wrong shape, kept for the operator
DEFAULT_RESUME_TIMEOUT_S = 1800             # cluster.json without resume_timeout_s: Slurm's 30 min
RESUME_BUDGET_FRACTION = 1 / 3              # of ResumeTimeout for cloud calls; the rest is boot time
SUSPEND_BUDGET_S = 120                      # retries of a suspend; what is left goes to the loop
CALL_BUDGET_S = 60                          # retries of one call when no deadline was set
BACKOFF_BASE_S = 0.5                        # full-jitter exponential backoff under throttling
BACKOFF_CAP_S = 20.0
LAUNCH_PARALLELISM = 8                      # jobs launched at once (one launch call each)
SCONTROL_BATCH = 100                        # nodes per `scontrol update nodename=... nodeaddr=...`
# An instance in one of these states is going away: a resume gives its node a new one.
LEAVING_STATES = ("stopping", "stopped", "shutting-down", "terminated", "suspending", "suspended")

log = logging.getLogger("aicluster-power")


# --- hostlists ------------------------------------------------------------------------------


def expand_hostlist(expr: str) -> list[str]:
    """Expand a Slurm hostlist as `scontrol show hostnames` does: comma or space separated
    groups, each with any number of bracket sets of numbers and zero-padded ranges
    (`gpu-[08-10,3]`, `rack[1-2]-n[1-4]`). Order and duplicates are kept. Raises ValueError, also
    for more than MAX_HOSTS names: counted before any is made, so `gpu-[1-99999]x[1-99999]` (ten
    billion names) is refused at once instead of filling the head's memory."""
    names: list[str] = []
    for group in _split_top(expr):
        if len(names) + _count_group(group) > MAX_HOSTS:
            raise ValueError(f"hostlist {expr!r} expands to more than {MAX_HOSTS} names")
        names.extend(_expand_group(group))
    return names


def _count_group(group: str) -> int:
    """How many names `group` expands to: the product of its bracket sets' sizes, none made.
    Stops counting once past MAX_HOSTS (the number is then only known to be too large)."""
    total, rest = 1, group
    while (start := rest.find("[")) >= 0:
        end = rest.index("]", start)
        total *= _count_range(rest[start + 1:end], group)
        if total > MAX_HOSTS:
            return total
        rest = rest[end + 1:]
    return total


def _count_range(body: str, group: str) -> int:
    count = 0
    for item in body.split(","):
        lo, dash, hi = item.partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            raise ValueError(f"bad range {item!r} in hostlist {group!r}")
        if dash and int(hi) < int(lo):
            raise ValueError(f"descending range {item!r} in hostlist {group!r}")
        count += int(hi) - int(lo) + 1 if dash else 1
    return count


def _split_top(expr: str) -> list[str]:
    groups, current, depth = [], "", 0
    for char in expr:
        if char == "[":
            if depth:
                raise ValueError(f"nested '[' in hostlist {expr!r}")
            depth = 1
        elif char == "]":
            if not depth:
                raise ValueError(f"unmatched ']' in hostlist {expr!r}")
            depth = 0
        if not depth and (char == "," or char.isspace()):
            if current:
                groups.append(current)
            current = ""
            continue
        current += char
    if depth:
        raise ValueError(f"unclosed '[' in hostlist {expr!r}")
    if current:
        groups.append(current)
    return groups


def _expand_group(group: str) -> list[str]:
    start = group.find("[")
    if start < 0:
        return [group]
    end = group.index("]", start)
    head, body, tail = group[:start], group[start + 1:end], group[end + 1:]
    rest = _expand_group(tail)
    return [f"{head}{number}{suffix}" for number in _expand_range(body, group) for suffix in rest]


def _expand_range(body: str, group: str) -> list[str]:
    numbers: list[str] = []
    for item in body.split(","):
        lo, dash, hi = item.partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            raise ValueError(f"bad range {item!r} in hostlist {group!r}")
        if not dash:
            numbers.append(lo)
            continue
        first, last = int(lo), int(hi)
        if last < first:
            raise ValueError(f"descending range {item!r} in hostlist {group!r}")
        if last - first + len(numbers) > MAX_HOSTS:
            raise ValueError(f"range {item!r} in hostlist {group!r} is too large")
        numbers.extend(str(n).zfill(len(lo)) for n in range(first, last + 1))
    return numbers


def compress_hostlist(names) -> str:
    """The inverse, for log lines and `scontrol update nodename=`: `gpu-[1-3,5],infer-1`."""
    groups: dict[tuple[str, int], list[int]] = {}
    plain: list[str] = []
    for name in dict.fromkeys(names):
        match = re.match(r"^(.*?)([0-9]+)$", name)
        if not match:
            plain.append(name)
            continue
        prefix, digits = match.groups()
        width = len(digits) if digits.startswith("0") and len(digits) > 1 else 0
        groups.setdefault((prefix, width), []).append(int(digits))
    parts = []
    for (prefix, width), numbers in groups.items():
        numbers.sort()
        ranges, first = [], numbers[0]
        for prev, cur in zip(numbers, numbers[1:] + [None]):
            if cur is not None and cur == prev + 1:
                continue
            lo, hi = str(first).zfill(width), str(prev).zfill(width)
            ranges.append(lo if first == prev else f"{lo}-{hi}")
            first = cur
        parts.append(f"{prefix}{ranges[0]}" if len(numbers) == 1 else f"{prefix}[{','.join(ranges)}]")
    return ",".join(parts + plain)


def pool_of(node: str) -> str | None:
    """`gpu-a-12` -> `gpu-a`: the pool is everything before the last `-<digits>`."""
    match = NODE_RE.match(node)
    return match.group(1) if match else None


# --- slurm ----------------------------------------------------------------------------------


# slurmctld answers these while it is busy (a burst of RPCs, a blocking name lookup, a restart):
# the request may go through a moment later, so it is retried; any other refusal is final.
SCONTROL_BUSY = ("Socket timed out", "Unable to contact slurm controller", "Slurm backup controller in standby mode",
                 "Resource temporarily unavailable")
SCONTROL_ATTEMPTS = 4


def scontrol(*args: str) -> bool:
    """Run scontrol (AICLUSTER_SCONTROL overrides the path), retrying while slurmctld is busy; log
    and return False on failure."""
    command = [os.environ.get("AICLUSTER_SCONTROL", "scontrol"), *args]
    for attempt in range(1, SCONTROL_ATTEMPTS + 1):
        try:
            done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  universal_newlines=True, timeout=60)
        except (OSError, subprocess.SubprocessError) as err:
            log.error("scontrol %s failed: %s", " ".join(args), err)
            return False
        if done.returncode == 0:
            return True
        said = (done.stderr or done.stdout).strip()
        if attempt < SCONTROL_ATTEMPTS and any(busy in said for busy in SCONTROL_BUSY):
            log.warning("scontrol %s: %s; trying again", " ".join(args), said)
            time.sleep(min(2 ** attempt, 10) * random.uniform(0.5, 1.0))
            continue
        log.error("scontrol %s exited %d: %s", " ".join(args), done.returncode, said)
        return False
    return False


def reason_text(code: str, message: str) -> str:
    """`<code>: <message>` on one line, without double quotes, short enough for sinfo -R."""
    text = " ".join(f"{code}: {message}".replace('"', "'").split())
    return text if len(text) <= MAX_REASON else text[:MAX_REASON - 3] + "..."


def pool_version(config: dict, pool: str) -> str | None:
    """The version a pool's nodes should run (cluster.json pools[].version, as a string), or None
    for a cluster.json rendered before pools carried one: launch from the latest, roll nothing."""
    version = ((config.get("pools") or {}).get(pool) or {}).get("version")
    return None if version in (None, "") else str(version)


def reason_code(reason: str) -> str | None:
    """The code of a reason in reason_text's form (`<code>: <message>`, or `<code>:` with no
    message), else None: `aicluster-health: xid 79` -> `aicluster-health`; an operator's
    `aicluster-healthy-maintenance` or a bare `aicluster-event` has none."""
    match = REASON_CODE_RE.match(reason)
    return match.group(1) if match else None


def mark_down(nodes: list[str], code: str, message: str) -> None:
    reason = reason_text(code, message)
    hostlist = compress_hostlist(nodes)
    log.error("resume: marking %s DOWN: %s", hostlist, reason)
    scontrol("update", f"nodename={hostlist}", "state=down", f'reason="{reason}"')


# --- logging and arguments ------------------------------------------------------------------


def setup_logging(path: str | None) -> None:
    log.setLevel(logging.INFO)
    log.propagate = False
    for old in list(log.handlers):
        log.removeHandler(old)
        old.close()
    formatter = logging.Formatter(f"%(asctime)s %(levelname)s aicluster-power[{os.getpid()}] %(message)s")
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    problem = None
    if path:
        try:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            handlers.append(logging.FileHandler(path, encoding="utf-8"))
        except OSError as err:
            problem = f"cannot write {path}: {err}; logging to stderr only"
    for handler in handlers:
        handler.setFormatter(formatter)
        log.addHandler(handler)
    if problem:
        log.warning(problem)


def parse_args(argv: list[str]) -> tuple[str, str] | None:
    """(action, hostlist) from the link name (aicluster-resume HOSTLIST) or from the first
    argument (aicluster-power.py resume HOSTLIST); None when neither fits."""
    name = os.path.basename(argv[0])
    if name == f"aicluster-{RECONCILE}" and (len(argv) == 1 or argv[1:] == [STATUS_FLAG]):
        return RECONCILE, " ".join(argv[1:])
    if argv[1:2] == [RECONCILE] and argv[2:] in ([], [STATUS_FLAG]):
        return RECONCILE, " ".join(argv[2:])
    if name.startswith("aicluster-") and name[len("aicluster-"):] in ACTIONS and len(argv) >= 2:
        return name[len("aicluster-"):], ",".join(argv[1:])
    if len(argv) >= 3 and argv[1] in ACTIONS:
        return argv[1], ",".join(argv[2:])
    return None


def start(argv: list[str], program: str, load_config, default_config: str,
          default_log: str) -> tuple[str, list[str], dict] | int:
    """The common start of a power program: the action and hostlist from argv, the cluster's
    config file (AICLUSTER_CONFIG overrides), logging (AICLUSTER_LOG overrides), the expanded
    hostlist. Returns (action, nodes, config), or the exit code when there is nothing more to do:
    2 for bad usage; 1 for a bad hostlist or an unreadable config, after setting the nodes of a
    resume DOWN with the reason, so Slurm never waits on nodes nobody launches."""
    parsed = parse_args(argv)
    if parsed is None:
        print(f"usage: {program} {'|'.join(ACTIONS)} HOSTLIST | {RECONCILE}, or through the links "
              f"aicluster-resume, aicluster-suspend, aicluster-resume-fail HOSTLIST and aicluster-{RECONCILE} [{STATUS_FLAG}]",
              file=sys.stderr)
        return 2
    action, expr = parsed
    config_path = os.environ.get("AICLUSTER_CONFIG", default_config)
    config, problem = None, None
    try:
        config = load_config(config_path)
    except (OSError, ValueError) as err:
        problem = f"cannot read {config_path}: {err}"
    setup_logging(os.environ.get("AICLUSTER_LOG") or (config or {}).get("log_file") or default_log)
    if action == RECONCILE:
        if config is None:
            log.error("%s: %s", action, problem)
            return 1
        return action, [expr] if expr else [], config

    try:
        nodes = expand_hostlist(expr)
    except ValueError as err:
        log.error("%s: %s", action, err)
        if action == "resume":
            scontrol("update", f"nodename={expr}", "state=down", f'reason="{reason_text("BadHostlist", str(err))}"')
        return 1
    log.info("%s %s (%d nodes)", action, compress_hostlist(nodes), len(nodes))
    if config is None:
        log.error("%s %s: %s", action, compress_hostlist(nodes), problem)
        if action == "resume":
            mark_down(nodes, "ConfigError", problem or "")
        else:       # the instances may still run: the reconcile loop retries once it can read it
            record_pending_suspend({n: [] for n in nodes}, action, f"ConfigError: {problem}")
        return 1
    return action, nodes, config


def read_config(path: str, required) -> dict:
    """The cluster's facts (cluster.json, published by aicluster); ValueError names a missing key."""
    with open(path, encoding="utf-8") as handle:
        config = json.load(handle)
    for key in required:
        if key not in config:
            raise ValueError(f"{path}: missing {key!r}")
    return config


# --- state shared by the power programs and the reconcile loop --------------------------------


def state_path(name: str) -> str:
    """A file under STATE_DIR (AICLUSTER_STATE_DIR overrides /var/lib/aicluster)."""
    return os.path.join(os.environ.get("AICLUSTER_STATE_DIR", DEFAULT_STATE_DIR), name)


def update_state(name: str, change) -> dict:
    """Read the JSON object in state file `name`, apply `change(data)` (which edits it in place)
    and write it back atomically, under an exclusive lock: slurmctld runs several power programs at
    once, and the reconcile loop beside them. A missing file reads as {}; one that is not a JSON
    object is set aside first (set_aside_file), never dropped."""
    path = state_path(name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".lock", "a", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = _read_locked(name)
        change(data)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=f".{name}.")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    return data


def _load(path: str):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _read_locked(name: str) -> dict:
    """The state file's object, with its lock held: a file that is not valid JSON, or valid JSON of
    another shape (a list, a string), is set aside and reads as {}."""
    path = state_path(name)
    try:
        data = _load(path)
    except FileNotFoundError:
        return {}
    except ValueError as err:
        set_aside_file(path, f"it is not valid JSON ({err})")
        return {}
    if isinstance(data, dict):
        return data
    set_aside_file(path, f"it holds a JSON {json_type(data)}, not an object")
    return {}


def set_aside_file(path: str, why: str) -> None:
    """Rename a state file aicluster cannot read to <path>.invalid-<UTC time> (logged), so a pass
    starts afresh without losing what it held: its instances, if any run, are found again by their
    tags, and an operator can read what was there."""
    aside = f"{path}.invalid-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}"
    try:
        os.replace(path, aside)
    except OSError as err:
        log.error("state file %s is unusable (%s) and cannot be moved aside: %s", path, why, err)
        return
    log.error("state file %s is unusable: %s; moved to %s, starting it afresh", path, why, aside)


def read_state(name: str) -> dict:
    """The JSON object in state file `name` ({} when missing). One of the wrong shape or not JSON
    at all is set aside under the file's lock (set_aside_file) and reads as {}: never silently."""
    path = state_path(name)
    try:
        data = _load(path)
    except FileNotFoundError:
        return {}
    except ValueError:
        data = None
    except OSError as err:
        log.error("state file %s is unreadable (%s)", path, err)
        return {}
    if isinstance(data, dict):
        return data
    try:
        return update_state(name, lambda data: None)   # under the lock: set aside, start afresh
    except OSError as err:
        log.error("state file %s is unusable and cannot be rewritten: %s", path, err)
        return {}


def json_type(value) -> str:
    """The JSON name of a parsed value's type: object, array, string, number, boolean, null."""
    for kind, name in ((bool, "boolean"), (dict, "object"), (list, "array"), (str, "string"), ((int, float), "number")):
        if isinstance(value, kind):
            return name
    return "null" if value is None else type(value).__name__


def pending_problem(entry) -> str | None:
    """What is wrong with one entry of pending-suspend.json ({since, instances, action, error}, as
    record_pending_suspend writes it), or None."""
    if not isinstance(entry, dict):
        return f"it is a JSON {json_type(entry)}, not an object"
    instances = entry.get("instances")
    if instances is not None and not (isinstance(instances, list) and all(isinstance(i, str) for i in instances)):
        return f"its instances are {instances!r}, not a list of names"
    since = entry.get("since")
    if since is not None and (isinstance(since, bool) or not isinstance(since, (int, float))):
        return f"its since is {since!r}, not a time"
    for key in ("action", "error"):
        if entry.get(key) is not None and not isinstance(entry.get(key), str):
            return f"its {key} is {entry.get(key)!r}, not text"
    return None


def reject_pending(node: str, entry, why: str) -> None:
    """Move an entry of pending-suspend.json that pending_problem refuses into
    pending-suspend.rejected.json (logged): the other entries go on. Whatever instances it meant
    are still found by their tags: once their node is powered down the reconcile loop ends them."""
    log.error("%s: the entry of %s is unusable (%s): %r; moved to %s", PENDING_SUSPEND, node, why, entry,
              state_path(PENDING_REJECTED))

    def take(data: dict) -> None:
        if data.get(node) == entry:     # unchanged since it was read: a fresh record stays
            data.pop(node)
            _keep_rejected({node: entry}, why)

    update_state(PENDING_SUSPEND, take)


def _keep_rejected(entries: dict, why: str) -> None:
    """node -> [{entry, why, at}, ...] in pending-suspend.rejected.json, the latest last."""
    now = time.time()

    def add(data: dict) -> None:
        for node, entry in entries.items():
            kept = data.get(node)
            data[node] = (kept if isinstance(kept, list) else [kept] if kept is not None else []) + [
                {"entry": entry, "why": why, "at": now}]

    update_state(PENDING_REJECTED, add)


# --- resume and suspend ----------------------------------------------------------------------


class CloudError(Exception):
    """A cloud's refusal, as a Slurm reason gives it: its code and its message."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message


@dataclass(frozen=True)
class Instance:
    """One live instance of the cluster as the cloud lists it (Cloud.list_cluster)."""
    id: str                              # EC2 instance id, Compute Engine instance name
    node: str | None                     # its Slurm node name (tag or label); None: never named
    pool: str | None
    state: str                           # "pending", "running" or "stopping" (the cloud's word, lower case)
    launched_at: float                   # epoch seconds
    resume_id: str | None = None         # the resume request that launched it (tagged at launch)
    events: tuple[str, ...] = ()         # scheduled events, interruption or maintenance notices (text)
    bootstrap_error: str | None = None   # why its set-up failed (BOOTSTRAP_ERROR_TAG / _ATTRIBUTE)
    # The value of its cluster tag or label, as the cloud reports it ("" when it has none). None: this
    # cloud's program does not report it, and only its listing's own filter stands for it.
    cluster: str | None = None
    role: str | None = None              # its aicluster-role tag or label (compute, head, login); None: none
    address: str | None = None           # its private IP: the NodeAddr slurmctld has for its node, if in use
    version: str | None = None           # its pool's version it was launched from (VERSION_TAG); None: unknown


def not_ours(instance: Instance, config: dict) -> str | None:
    """Why resume, suspend and the reconcile loop may not end or adopt `instance`, or None when
    they may: it must carry this cluster's tag value (a listing may return another cluster's
    instances: a filter lost, a bug), no role but compute (head and login nodes carry the cluster
    tag too, and the head's termination protection makes EC2 refuse a whole batch), and be of one
    of this cluster's Slurm pools: a pool of cluster.json, or the resume-id tag the resume program
    puts on everything it launches (a pool since removed from the spec)."""
    if instance.cluster is not None and instance.cluster != config["cluster"]:
        return f"it carries cluster {instance.cluster!r}, not {config['cluster']!r}"
    if instance.role not in (None, COMPUTE_ROLE):
        return f"it is a {instance.role} instance"
    if instance.pool not in (config.get("pools") or {}) and not instance.resume_id:
        return "it is of no Slurm pool of this cluster (no pool of cluster.json, no resume-id)"
    return None


class Cloud:
    """What a cloud's power program plugs into resume, suspend and the reconcile loop. An instance
    is named by a string (an EC2 instance id, a Compute Engine instance name)."""

    launching = "launching"             # words of the log lines
    deleting = "deleting"
    type_key = "instance_type"          # the pool's machine type in cluster.json
    chunk = 0                           # the most nodes one launch takes; 0: no limit
    deadline: float | None = None       # time.monotonic() by which retried calls give up (set by resume/suspend)

    def launch(self, pool: str, nodes: list[str], request_id: str) -> dict[str, str]:
        """All of `nodes` or none: node -> its instance. CloudError after deleting what this launch
        left behind (never another launch's instances). `request_id` is a UUID, new for every
        launch and the same for every retry of it: the cloud's idempotency key (EC2 ClientToken,
        GCE requestId), and tagged or labelled on what it launches."""
        raise NotImplementedError

    def locate(self, launched: dict[str, str]) -> tuple[dict[str, tuple[str, str]], dict[str, tuple[str, str]]]:
        """Name each instance for its node; (node -> (address, host name), node -> (code, message)
        of the nodes that failed)."""
        raise NotImplementedError

    def delete(self, instances: list[str]) -> bool:
        """Delete instances (a missing one is fine); False when the cloud refused one."""
        raise NotImplementedError

    def delete_refused(self, instances: list[str]) -> list[str]:
        """Delete instances; those the cloud refused (a cloud that knows which overrides this)."""
        return [] if self.delete(instances) else list(instances)

    def find(self, nodes: list[str]) -> dict[str, list[str]]:
        """node -> this cluster's live instances of it; CloudError when they cannot be listed. What
        suspend deletes: only instances whose cluster tag or label the cloud's program has checked
        is this cluster's (never the listing's filter alone), of no role but compute."""
        raise NotImplementedError

    def list_cluster(self) -> list[Instance]:
        """Every live instance of this cluster (by its cluster tag or label), named for a node or
        not, head and login nodes too; CloudError when they cannot be listed. Each reports its
        cluster, role and pool, which `not_ours` checks before anything is ended or adopted."""
        raise NotImplementedError


class NodeRecords:
    """The A records <node>.<dns_domain> of the cluster's private zone (SlurmctldParameters=cloud_dns)."""

    def upsert(self, addresses: dict[str, str]) -> dict[str, tuple[str, str]]:
        """Write node -> address; node -> (code, message) of the records the cloud refused."""
        raise NotImplementedError

    def delete(self, nodes: list[str], action: str) -> bool:
        """Delete the records of `nodes` (a missing one is fine); False when the cloud refused one."""
        raise NotImplementedError


def resume_budget_s(config: dict) -> float:
    """How long a resume program may spend on cloud calls: a third of ResumeTimeout (cluster.json
    resume_timeout_s). The rest is the node's own: booting, set-up, slurmd registering; slurmctld
    counts both against ResumeTimeout and runs resume-fail when it is over."""
    return float(config.get("resume_timeout_s") or DEFAULT_RESUME_TIMEOUT_S) * RESUME_BUDGET_FRACTION


def with_backoff(call, transient, deadline: float | None, what: str, base_s: float | None = None,
                 cap_s: float | None = None):
    """`call()`, retried while `transient(err)` says the error may pass (throttling, a lost
    connection, a 5xx), with "full jitter" exponential backoff: sleep uniform(0, min(cap, base *
    2**attempt)) (https://aws.amazon.com/blogs/architecture/exponential-backoff-and-jitter/), until
    `deadline` (time.monotonic()); then the last error is raised. Returns (result, attempts)."""
    base_s = BACKOFF_BASE_S if base_s is None else base_s
    cap_s = BACKOFF_CAP_S if cap_s is None else cap_s
    if deadline is None:            # a caller that set none (the reconcile loop): a minute per call
        deadline = time.monotonic() + CALL_BUDGET_S
    attempt = 0
    while True:
        attempt += 1
        try:
            return call(), attempt
        except Exception as err:            # classified by `transient`; anything else is raised
            if not transient(err):
                raise
            pause = random.uniform(0, min(cap_s, base_s * 2 ** min(attempt, 30)))
            if time.monotonic() + pause > deadline:
                log.error("%s: giving up after %d attempts: %s", what, attempt, err)
                raise
            if attempt in (1, 4) or attempt % 10 == 0:
                log.warning("%s: %s; retrying (attempt %d)", what, err, attempt + 1)
            time.sleep(pause)


def bounded_map(function, items: list, parallelism: int) -> list:
    """function(item) for every item, at most `parallelism` at a time; results in order."""
    if len(items) <= 1 or parallelism <= 1:
        return [function(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(parallelism, len(items))) as pool:
        return list(pool.map(function, items))


# --- resume: per job, all or nothing ---------------------------------------------------------


@dataclass(frozen=True)
class ResumeGroup:
    """Nodes launched all or nothing: one job's nodes (SLURM_RESUME_FILE), or one pool's nodes
    that no job of the file names."""
    what: str                       # "job 140814", "pool gpu": for the log and the DOWN reason
    nodes: tuple[str, ...]


def resume_file_jobs(path: str | None = None) -> list[tuple[str, list[str]]] | None:
    """(job id, nodes to resume) of each job in SLURM_RESUME_FILE: the JSON slurmctld writes for its
    ResumeProgram: {"all_nodes_resume": hostlist, "jobs": [{"job_id": n, "nodes_resume": hostlist,
    "nodes_alloc": ..., "partition": ..., ...}]} (23.02 and later,
    https://slurm.schedmd.com/power_save.html), or {"all_nodes": hostlist, "jobs": [{"job_id": n,
    "nodes": hostlist}]} (22.05, as a real 22.05.8 slurmctld writes it). None when there is no file or it is unreadable
    (logged): every node then belongs to its pool's group."""
    path = path if path is not None else os.environ.get(RESUME_FILE_ENV)
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        entries = data.get("jobs") or []
    except (OSError, ValueError, AttributeError) as err:
        log.warning("resume: %s %s is unreadable (%s): launching per pool", RESUME_FILE_ENV, path, err)
        return None
    jobs = []
    for entry in entries:
        try:
            jobs.append((str(entry["job_id"]), expand_hostlist(entry.get("nodes_resume") or entry.get("nodes") or "")))
        except (KeyError, TypeError, ValueError) as err:
            log.warning("resume: skipping a job of %s: %r (%s)", path, entry, err)
    return jobs


def resume_groups(nodes: list[str], jobs: list[tuple[str, list[str]]] | None) -> list[ResumeGroup]:
    """Each job's nodes (of `nodes`) in a group of its own, so one job's shortfall never fails
    another's; a node that two jobs name goes with the first. Nodes no job names: a group per pool,
    as without a resume file."""
    wanted, taken, groups = dict.fromkeys(nodes), set(), []
    for job_id, job_nodes in jobs or []:
        mine = [n for n in dict.fromkeys(job_nodes) if n in wanted and n not in taken]
        if mine:
            groups.append(ResumeGroup(f"job {job_id}", tuple(mine)))
            taken.update(mine)
    by_pool: dict[str, list[str]] = {}
    for node in wanted:
        if node not in taken:
            by_pool.setdefault(pool_of(node) or "", []).append(node)
    groups.extend(ResumeGroup(f"pool {pool}", tuple(pool_nodes)) for pool, pool_nodes in by_pool.items())
    return groups


def resume(cloud: Cloud, config: dict, nodes: list[str], dns: NodeRecords | None = None, *,
           jobs: list[tuple[str, list[str]]] | None = None) -> int:
    """Launch the nodes, all or nothing per job (`jobs`, or SLURM_RESUME_FILE), several jobs at
    once; a node that already has a live instance is not launched again, its address is set again.
    Every cloud call ends by the resume budget (resume_budget_s). Returns the number of nodes that
    failed and were set DOWN."""
    cloud.deadline = time.monotonic() + resume_budget_s(config)
    wanted = list(dict.fromkeys(nodes))
    known = [n for n in wanted if (pool_of(n) or "") in config["pools"]]
    failed = mark_unknown_pools([n for n in wanted if n not in known], config)
    if not known:
        return failed
    try:
        live = live_instances(cloud, known, config)
    except Exception as err:  # noqa: BLE001 - a bug too must set them down, never leave them waiting
        code, message = (err.code, err.message) if isinstance(err, CloudError) else (type(err).__name__, str(err))
        # Launching without knowing could give a node a second instance: set them down instead.
        mark_down(known, code, f"listing the cluster's instances before launching failed: {message}")
        return failed + len(known)
    if live:
        log.info("resume: %s already running (%s): not launched again, their addresses set again",
                 compress_hostlist(live), " ".join(live.values()))
        forget_pending_suspend({node: [instance] for node, instance in live.items()})
    groups = resume_groups([n for n in known if n not in live], jobs if jobs is not None else resume_file_jobs())
    launched: dict[str, str] = {}
    down: list = []
    for group, got in zip(groups, bounded_map(lambda g: launch_group(cloud, config, g, down), groups, LAUNCH_PARALLELISM)):
        if got is None:
            failed += len(group.nodes)
        else:
            launched.update(got)
    failed += len(name_nodes(cloud, {**live, **launched}, dns, fresh=set(launched)))
    for nodes, problem in down:
        mark_down(nodes, *problem)
    return failed


def mark_unknown_pools(nodes: list[str], config: dict) -> int:
    by_pool: dict[str, list[str]] = {}
    for node in nodes:
        by_pool.setdefault(pool_of(node) or "", []).append(node)
    for pool_name, pool_nodes in by_pool.items():
        known = ", ".join(sorted(config["pools"])) or "none"
        what = f"no pool {pool_name!r} in cluster {config['cluster']}" if pool_name else "not a <pool>-<n> name"
        mark_down(pool_nodes, "UnknownPool", f"{what} (pools: {known})")
    return len(nodes)


def live_instances(cloud: Cloud, nodes: list[str], config: dict | None = None) -> dict[str, str]:
    """node -> the live instance it already has, of `nodes` (CloudError when they cannot be listed).
    An instance on its way out (stopping, shutting down) does not count: the node gets a new one,
    nor does one `not_ours` refuses (another cluster's, a head or login node): it is never adopted."""
    wanted = set(nodes)
    live: dict[str, str] = {}
    try:
        instances = cloud.list_cluster()
    except NotImplementedError:         # a cloud without list_cluster: its node-name lookup
        return {node: ids[0] for node, ids in cloud.find(nodes).items() if ids}
    for instance in sorted(instances, key=lambda i: (i.launched_at, i.id)):
        if instance.node not in wanted:
            continue
        why = not_ours(instance, config) if config else None
        if why:
            log.error("resume: not adopting %s for %s: %s", instance.id, instance.node, why)
            continue
        if instance.state not in LEAVING_STATES:
            if instance.node in live:
                log.warning("resume: %s has more than one live instance (%s, %s); keeping the first",
                            instance.node, live[instance.node], instance.id)
                continue
            live[instance.node] = instance.id
    return live


def launch_group(cloud: Cloud, config: dict, group: ResumeGroup, down: list | None = None) -> dict[str, str] | None:
    """Launch one group, pool by pool in launches of at most `cloud.chunk` nodes, all or nothing:
    node -> instance, or None after setting every node of the group DOWN and deleting what it
    launched (a deletion the cloud refuses is left in pending-suspend.json for the reconcile loop)."""
    by_pool: dict[str, list[str]] = {}
    for node in group.nodes:
        by_pool.setdefault(pool_of(node) or "", []).append(node)
    got: dict[str, str] = {}
    for pool_name, pool_nodes in by_pool.items():
        size = cloud.chunk or len(pool_nodes)
        for i in range(0, len(pool_nodes), size):
            chunk = pool_nodes[i:i + size]
            log.info("resume: %s %s (%d x %s, pool %s, %s)", cloud.launching, compress_hostlist(chunk), len(chunk),
                     config["pools"][pool_name].get(cloud.type_key), pool_name, group.what)
            try:
                got.update(cloud.launch(pool_name, chunk, str(uuid.uuid4())))
                continue
            except CloudError as err:
                problem = (err.code, err.message)
            except Exception as err:  # never silent: a bug or a bad config entry still sets them down
                log.exception("resume: %s (pool %s) failed", group.what, pool_name)
                problem = (type(err).__name__, str(err))
            if got:
                log.error("resume: %s %s, launched for %s, which cannot start whole", cloud.deleting,
                          " ".join(got.values()), group.what)
                delete_or_record(cloud, got, "resume-fail", f"{problem[0]}: {problem[1]}")
            if down is None:
                mark_down(list(group.nodes), *problem)
            else:
                down.append((list(group.nodes), problem))
            return None
    return got


def name_nodes(cloud: Cloud, launched: dict[str, str], dns: NodeRecords | None = None,
               fresh: set[str] | None = None) -> list[str]:
    """Hand each node's address to its name record and to Slurm; the nodes that failed, set DOWN
    (as soon as their failure is known, so their jobs requeue). The instances of failed nodes in
    `fresh` (None: all of them) are deleted; an instance a node already had is never deleted here."""
    if not launched:
        return []
    found, problems = cloud.locate(launched)
    for node, instance in launched.items():
        if node not in found and node not in problems:
            problems[node] = ("NoAddress", f"{instance} has no address")
    # The names first: once slurmctld has the address, a job may start on the node.
    named = {node: found[node][0] for node in launched if node not in problems}
    refused = dns.upsert(named) if dns and named else {}
    problems.update(refused)
    for node in launched:
        if node in problems:
            mark_down([node], *problems[node])
    failed = [node for node in launched if node in problems]
    failed += set_addresses({node: found[node] for node in launched if node not in problems}, launched)
    if failed:
        own = [n for n in failed if fresh is None or n in fresh]
        kept = [n for n in failed if n not in own]
        if kept:
            log.error("resume: %s keep their running instances (%s); the reconcile loop looks after them",
                      compress_hostlist(kept), " ".join(launched[n] for n in kept))
        stuck = delete_or_record(cloud, {n: launched[n] for n in own}, "resume-fail", "set DOWN by resume")
        written = [n for n in own if n in named and n not in refused and n not in stuck]
        if dns and written:
            dns.delete(written, "resume")
    return failed


def set_addresses(found: dict[str, tuple[str, str]], launched: dict[str, str]) -> list[str]:
    """`scontrol update nodename=a,b nodeaddr=x,y nodehostname=p,q`, SCONTROL_BATCH nodes a call
    (the lists in the same order); a refused batch is retried node by node, so one bad node fails
    alone. The nodes that failed, set DOWN."""
    failed: list[str] = []
    items = list(found.items())
    for i in range(0, len(items), SCONTROL_BATCH):
        batch = items[i:i + SCONTROL_BATCH]
        done = batch if set_address_batch(batch) else [
            item for item in batch if len(batch) > 1 and set_address_batch([item])]
        failed += [node for node, _ in batch if node not in dict(done)]
        for node, (address, host) in done:
            instance = launched[node]
            log.info("resume: %s -> %s %s%s", node, address, host, f" ({instance})" if instance != host else "")
    for node in failed:
        mark_down([node], "ScontrolFailed", f"could not set the address of {node} to {found[node][0]}")
    return failed


def set_address_batch(batch: list[tuple[str, tuple[str, str]]]) -> bool:
    return scontrol("update", "nodename=" + ",".join(n for n, _ in batch),
                    "nodeaddr=" + ",".join(a for _, (a, _) in batch),
                    "nodehostname=" + ",".join(h for _, (_, h) in batch))


def resume_nodes(cloud: Cloud, pool_name: str, nodes: list[str], dns: NodeRecords | None = None) -> list[str]:
    """Launch nodes of one pool, all or nothing, and name them; returns the nodes that failed,
    already set DOWN and their instances deleted."""
    launched = launch_group(cloud, {"pools": {pool_name: {}}}, ResumeGroup(f"pool {pool_name}", tuple(nodes)))
    if launched is None:
        return list(nodes)
    return name_nodes(cloud, launched, dns)


# --- suspend: never a paid instance left unseen ----------------------------------------------


def delete_or_record(cloud: Cloud, instances: dict[str, str | list[str]], action: str, why: str) -> set[str]:
    """Delete the instances (node -> instance or instances); the nodes whose deletion the cloud
    refused, recorded in pending-suspend.json for the reconcile loop to retry."""
    by_node = {node: [ids] if isinstance(ids, str) else list(ids) for node, ids in instances.items()}
    every = [i for ids in by_node.values() for i in ids]
    refused = set(cloud.delete_refused(every)) if every else set()
    stuck = {node: [i for i in ids if i in refused] for node, ids in by_node.items() if refused.intersection(ids)}
    if stuck:
        record_pending_suspend(stuck, action, f"the cloud refused to delete them ({why})")
    return set(stuck)


def record_pending_suspend(stuck: dict[str, list[str]], action: str, error: str) -> None:
    """Add node -> {since, instances, action, error} to pending-suspend.json (logged). The
    reconcile loop retries them; an entry is never dropped here, only merged."""
    now = time.time()
    log.error("%s: %s left for the reconcile loop in %s: %s", action, compress_hostlist(stuck),
              state_path(PENDING_SUSPEND), error)

    def add(data: dict) -> None:
        for node, ids in stuck.items():
            old = data.get(node, {})
            problem = pending_problem(old)
            if problem:                 # kept aside, never merged: it would carry its fault along
                log.error("%s: the entry of %s is unusable (%s): %r; moved to %s", PENDING_SUSPEND, node, problem,
                          old, state_path(PENDING_REJECTED))
                _keep_rejected({node: old}, problem)
                old = {}
            data[node] = {"since": old.get("since") or now, "action": action, "error": error[:MAX_REASON * 2],
                          "instances": sorted(set(old.get("instances") or []) | set(ids))}

    try:
        update_state(PENDING_SUSPEND, add)
    except OSError as err:
        log.error("%s: cannot write %s: %s; the reconcile loop finds the instances by the cluster tag",
                  action, state_path(PENDING_SUSPEND), err)


def forget_pending_suspend(settled: dict[str, list[str]]) -> None:
    """Take from pending-suspend.json the instances that no longer wait for deletion: deleted just
    now, or in use again (node -> ids). An entry left with no instance goes: its suspend is done, or
    its node is up again."""
    pending = read_state(PENDING_SUSPEND)
    if not any(node in pending for node in settled):
        return

    def remove(data: dict) -> None:
        for node, ids in settled.items():
            entry = data.get(node)
            if node not in data or pending_problem(entry):     # the loop sets a bad one aside
                continue
            left = [i for i in entry.get("instances") or [] if i not in set(ids)]
            if left:
                entry["instances"] = left
            else:
                data.pop(node)
                log.info("%s: taken out of %s", node, PENDING_SUSPEND)

    try:
        update_state(PENDING_SUSPEND, remove)
    except OSError as err:
        log.error("cannot update %s: %s", state_path(PENDING_SUSPEND), err)


def suspend(cloud: Cloud, nodes: list[str], action: str = "suspend", dns: NodeRecords | None = None) -> int:
    """Delete the instances of `nodes` (suspend and resume-fail), retried within SUSPEND_BUDGET_S;
    their name records go only once their instances are gone or going. What could not be deleted,
    or looked up, is recorded in pending-suspend.json for the reconcile loop. 0, or 1 when anything
    is left over."""
    cloud.deadline = time.monotonic() + SUSPEND_BUDGET_S
    unique = list(dict.fromkeys(nodes))
    try:
        found = cloud.find(unique)
    except CloudError as err:
        log.error("%s: finding the instances of %s failed: %s: %s", action, compress_hostlist(unique), err.code,
                  err.message)
        # Whether they still run is unknown: their records stay, the loop looks again.
        record_pending_suspend({n: [] for n in unique}, action, f"finding their instances failed: {err.code}: "
                               f"{err.message}")
        return 1
    missing = [n for n in unique if n not in found]
    if missing:
        log.info("%s: no instance for %s", action, compress_hostlist(missing))
    for node, instances in found.items():
        log.info("%s: %s %s (%s)", action, cloud.deleting, node, " ".join(instances))
    stuck = delete_or_record(cloud, found, action, f"{action} {compress_hostlist(unique)}")
    forget_pending_suspend({**{n: [] for n in missing}, **{n: ids for n, ids in found.items() if n not in stuck}})
    gone = [n for n in unique if n not in stuck]
    if stuck:
        log.error("%s: keeping the DNS records of %s: their instances still run", action, compress_hostlist(stuck))
    ok = not stuck
    if dns and gone:
        ok = dns.delete(gone, action) and ok
    return 0 if ok else 1


def main(argv: list[str], program: str, required, connect, reconcile) -> int:
    """A power program: the action and hostlist from argv, the cluster's config (with the keys
    `required`), then resume or suspend with the (Cloud, NodeRecords or None) `connect(config)` gives;
    the reconcile action runs `reconcile(cloud, config, dns)` (aicluster.node.reconcile.main)."""
    started = start(argv, program, lambda path: read_config(path, required), DEFAULT_CONFIG, DEFAULT_LOG)
    if isinstance(started, int):
        return started
    action, nodes, config = started
    cloud, dns = connect(config)
    if action == RECONCILE:
        # The loop is handed in by the power program: it imports this module, so this one cannot import it.
        if nodes == [STATUS_FLAG]:
            return reconcile(cloud, config, dns, show_status=True)
        return reconcile(cloud, config, dns)
    return run_action(action, nodes, lambda: resume(cloud, config, nodes, dns),
                      lambda: suspend(cloud, nodes, action, dns))


def run_action(action: str, nodes: list[str], resume, suspend) -> int:
    """The common end of a power program: resume (returns how many nodes failed and are DOWN)
    or suspend/resume-fail (returns the exit code), logged the same way on every cloud."""
    hostlist = compress_hostlist(nodes)
    if action == "resume":
        failed = resume()
        if failed:
            log.error("resume %s: %d of %d nodes failed and are DOWN", hostlist, failed, len(nodes))
            return 1
        log.info("resume %s: done", hostlist)
        return 0
    return suspend()
