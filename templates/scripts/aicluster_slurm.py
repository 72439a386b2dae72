"""What the Slurm power programs of every cloud share: Slurm hostlists, scontrol, setting nodes DOWN
with a reason, logging, and reading the action from the link name.

Installed next to aicluster-power.py (AWS) and aicluster-gcp-power.py (GCP) in /opt/aicluster/bin;
they import it from their own directory. Standard library only.
"""
from __future__ import annotations

import logging
import os
import re
import subprocess
import sys

ACTIONS = ("resume", "suspend", "resume-fail")
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
        print(f"usage: {program} {'|'.join(ACTIONS)} HOSTLIST, or through the links "
              "aicluster-resume, aicluster-suspend, aicluster-resume-fail HOSTLIST", file=sys.stderr)
        return 2
    action, expr = parsed
    config_path = os.environ.get("AICLUSTER_CONFIG", default_config)
    config, problem = None, None
    try:
        config = load_config(config_path)
    except (OSError, ValueError) as err:
        problem = f"cannot read {config_path}: {err}"
    setup_logging(os.environ.get("AICLUSTER_LOG") or (config or {}).get("log_file") or default_log)

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
