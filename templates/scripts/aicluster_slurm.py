"""The Slurm power programs' core, the same on every cloud: resume and suspend, Slurm hostlists,
scontrol, setting nodes DOWN with a reason, logging, reading the action from the link name and the
cluster's config.

A cloud's program (aicluster-power.py on AWS, aicluster-gcp-power.py on GCP) keeps only its cloud
calls, in a `Cloud` (launch, locate, delete, find and list instances) and a `NodeRecords` (write
and delete node-name records), and hands them to `main`. Installed next to them in
/opt/aicluster/bin; they import it from their own directory. Standard library only.

The same programs run the reconcile loop (`aicluster-reconcile`, a fourth link, run by a systemd
timer on the head: aicluster_reconcile.py), which keeps Slurm's view of the fleet and the cloud's
equal. What the programs and the loop hand each other lives under STATE_DIR (pending suspends).
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass

DEFAULT_CONFIG = "/etc/aicluster/cluster.json"
DEFAULT_LOG = "/var/log/aicluster/power.log"
ACTIONS = ("resume", "suspend", "resume-fail")
RECONCILE = "reconcile"                 # the fourth action: no hostlist (aicluster_reconcile.py)
DEFAULT_STATE_DIR = "/var/lib/aicluster"
# Drain and DOWN reasons aicluster sets start with these, so the reconcile loop knows what it may
# replace: a node an administrator drained by hand (any other reason) is never touched.
HEALTH_REASON = "aicluster-health"      # the health check failed (aicluster-gpu-healthcheck)
EVENT_REASON = "aicluster-event"        # a scheduled event, spot interruption, maintenance, preemption
BOOTSTRAP_REASON = "aicluster-bootstrap"  # the node's set-up failed before slurmd started
# Where a node that failed its set-up says why: an EC2 tag on its own instance, a GCE guest attribute.
BOOTSTRAP_ERROR_TAG = "aicluster-bootstrap-error"
BOOTSTRAP_ERROR_ATTRIBUTE = ("aicluster", "bootstrap-error")    # (namespace, key)
MAX_REASON = 200            # characters of a cloud error kept in a Slurm node reason
MAX_HOSTS = 100_000         # a hostlist that expands further is a typo, not a cluster
# TTL of the node-name A records the resume programs write: well under SuspendTimeout (300 s), so
# a node relaunched with a new address is never looked up at its old one.
NODE_RECORD_TTL_S = 60
NODE_RE = re.compile(r"^([a-z0-9](?:[a-z0-9-]*[a-z0-9])?)-([0-9]+)$")

log = logging.getLogger("aicluster-power")


# --- hostlists ------------------------------------------------------------------------------


def expand_hostlist(expr: str) -> list[str]:
    """Expand a Slurm hostlist as `scontrol show hostnames` does: comma or space separated
    groups, each with any number of bracket sets of numbers and zero-padded ranges
    (`gpu-[08-10,3]`, `rack[1-2]-n[1-4]`). Order and duplicates are kept. Raises ValueError."""
    names: list[str] = []
    for group in _split_top(expr):
        names.extend(_expand_group(group))
        if len(names) > MAX_HOSTS:
            raise ValueError(f"hostlist {expr!r} expands to more than {MAX_HOSTS} names")
    return names


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


def scontrol(*args: str) -> bool:
    """Run scontrol (AICLUSTER_SCONTROL overrides the path); log and return False on failure."""
    command = [os.environ.get("AICLUSTER_SCONTROL", "scontrol"), *args]
    try:
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as err:
        log.error("scontrol %s failed: %s", " ".join(args), err)
        return False
    if done.returncode != 0:
        log.error("scontrol %s exited %d: %s", " ".join(args), done.returncode,
                  (done.stderr or done.stdout).strip())
        return False
    return True


def reason_text(code: str, message: str) -> str:
    """`<code>: <message>` on one line, without double quotes, short enough for sinfo -R."""
    text = " ".join(f"{code}: {message}".replace('"', "'").split())
    return text if len(text) <= MAX_REASON else text[:MAX_REASON - 3] + "..."


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
    if name == f"aicluster-{RECONCILE}" and len(argv) == 1:
        return RECONCILE, ""
    if len(argv) == 2 and argv[1] == RECONCILE:
        return RECONCILE, ""
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
              f"aicluster-resume, aicluster-suspend, aicluster-resume-fail HOSTLIST and aicluster-{RECONCILE}",
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
        return action, [], config

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
    once, and the reconcile loop beside them. A missing or unreadable file reads as {} (logged)."""
    path = state_path(name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".lock", "a", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = read_state(name)
        change(data)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=f".{name}.")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    return data


def read_state(name: str) -> dict:
    path = state_path(name)
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        return data if isinstance(data, dict) else {}
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        log.error("state file %s is unreadable (%s): starting it afresh", path, err)
        return {}


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


class Cloud:
    """What a cloud's power program plugs into resume, suspend and the reconcile loop. An instance
    is named by a string (an EC2 instance id, a Compute Engine instance name)."""

    launching = "launching"             # words of the log lines
    deleting = "deleting"
    type_key = "instance_type"          # the pool's machine type in cluster.json
    chunk = 0                           # the most nodes one launch takes; 0: no limit

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

    def find(self, nodes: list[str]) -> dict[str, list[str]]:
        """node -> this cluster's live instances of it; CloudError when they cannot be listed."""
        raise NotImplementedError

    def list_cluster(self) -> list[Instance]:
        """Every live instance of this cluster (by its cluster tag or label), named for a node or
        not; CloudError when they cannot be listed."""
        raise NotImplementedError


class NodeRecords:
    """The A records <node>.<dns_domain> of the cluster's private zone (SlurmctldParameters=cloud_dns)."""

    def upsert(self, addresses: dict[str, str]) -> dict[str, tuple[str, str]]:
        """Write node -> address; node -> (code, message) of the records the cloud refused."""
        raise NotImplementedError

    def delete(self, nodes: list[str], action: str) -> bool:
        """Delete the records of `nodes` (a missing one is fine); False when the cloud refused one."""
        raise NotImplementedError


def resume(cloud: Cloud, config: dict, nodes: list[str], dns: NodeRecords | None = None) -> int:
    """Launch every pool's nodes; the number of nodes that failed and were set down."""
    by_pool: dict[str, list[str]] = {}
    for node in dict.fromkeys(nodes):
        by_pool.setdefault(pool_of(node) or "", []).append(node)
    failed = 0
    for pool_name, pool_nodes in by_pool.items():
        if pool_name not in config["pools"]:
            known = ", ".join(sorted(config["pools"])) or "none"
            what = f"no pool {pool_name!r} in cluster {config['cluster']}" if pool_name else "not a <pool>-<n> name"
            mark_down(pool_nodes, "UnknownPool", f"{what} (pools: {known})")
            failed += len(pool_nodes)
            continue
        log.info("resume: %s %s (%d x %s, pool %s)", cloud.launching, compress_hostlist(pool_nodes), len(pool_nodes),
                 config["pools"][pool_name].get(cloud.type_key), pool_name)
        size = cloud.chunk or len(pool_nodes)
        for i in range(0, len(pool_nodes), size):
            chunk = pool_nodes[i:i + size]
            try:
                failed += len(resume_nodes(cloud, pool_name, chunk, dns))
            except Exception as err:  # never silent: a bug or a bad config entry still sets them down
                log.exception("resume: pool %s failed", pool_name)
                mark_down(chunk, type(err).__name__, str(err))
                failed += len(chunk)
    return failed


def resume_nodes(cloud: Cloud, pool_name: str, nodes: list[str], dns: NodeRecords | None = None) -> list[str]:
    """Launch nodes of one pool; returns the nodes that failed, already set DOWN (as soon as their
    failure is known, so their jobs requeue) and their instances deleted."""
    try:
        launched = cloud.launch(pool_name, nodes, str(uuid.uuid4()))
    except CloudError as err:
        mark_down(nodes, err.code, err.message)
        return list(nodes)
    found, problems = cloud.locate(launched)
    for node, instance in launched.items():
        if node not in found and node not in problems:
            problems[node] = ("NoAddress", f"{instance} has no address")
    # The names first: once slurmctld has the address, a job may start on the node.
    named = {node: found[node][0] for node in launched if node not in problems}
    refused = dns.upsert(named) if dns and named else {}
    problems.update(refused)
    failed = [node for node in launched if node in problems]
    for node in failed:
        mark_down([node], *problems[node])
    for node, instance in launched.items():
        if node in problems:
            continue
        address, host = found[node]
        if scontrol("update", f"nodename={node}", f"nodeaddr={address}", f"nodehostname={host}"):
            log.info("resume: %s -> %s %s%s", node, address, host, f" ({instance})" if instance != host else "")
        else:
            failed.append(node)
            mark_down([node], "ScontrolFailed", f"could not set the address of {node} to {address}")
    if failed:
        bad = [launched[node] for node in failed]
        log.error("resume: %s %s, the instances of failed nodes", cloud.deleting, " ".join(bad))
        cloud.delete(bad)
        written = [node for node in failed if node in named and node not in refused]
        if dns and written:
            dns.delete(written, "resume")
    return failed


def suspend(cloud: Cloud, nodes: list[str], action: str = "suspend", dns: NodeRecords | None = None) -> int:
    """Delete the instances of `nodes` and their node-name records (suspend and resume-fail); 0, or 1
    when the cloud refused."""
    ok = True
    unique = list(dict.fromkeys(nodes))
    try:
        found = cloud.find(unique)
    except CloudError as err:
        log.error("%s: finding the instances of %s failed: %s: %s", action, compress_hostlist(unique), err.code,
                  err.message)
        found, ok = None, False
    if found is not None:
        missing = [n for n in unique if n not in found]
        if missing:
            log.info("%s: no instance for %s", action, compress_hostlist(missing))
        for node, instances in found.items():
            log.info("%s: %s %s (%s)", action, cloud.deleting, node, " ".join(instances))
        ok = cloud.delete([i for instances in found.values() for i in instances])
    if dns:
        ok = dns.delete(unique, action) and ok
    return 0 if ok else 1


def main(argv: list[str], program: str, required, connect) -> int:
    """A power program: the action and hostlist from argv, the cluster's config (with the keys
    `required`), then resume or suspend with the (Cloud, NodeRecords or None) `connect(config)` gives."""
    started = start(argv, program, lambda path: read_config(path, required), DEFAULT_CONFIG, DEFAULT_LOG)
    if isinstance(started, int):
        return started
    action, nodes, config = started
    cloud, dns = connect(config)
    if action == RECONCILE:
        import aicluster_reconcile      # beside this file; only the loop needs it
        return aicluster_reconcile.main(cloud, config, dns)
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
