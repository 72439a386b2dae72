"""aicluster-reconcile: one pass of the loop that keeps Slurm's view of the fleet and the cloud's equal.

Run every minute on the head node by aicluster-reconcile.timer through the `aicluster-reconcile`
link of the cloud's power program (aicluster-power.py on AWS, aicluster-gcp-power.py on GCP), which
hands `main` its Cloud and NodeRecords (aicluster.node.slurm, the core both clouds share). Standard
library only; docs/reconcile.md describes the loop for operators.

Each pass reads the cluster's instances (Cloud.list_cluster: by cluster tag or label, named for a
node or not) and keeps only those of this cluster's Slurm pools (core.not_ours: this cluster's tag
value, no role but compute, a pool of cluster.json or the resume-id tag), then slurmctld's nodes and
jobs (`scontrol -o show nodes|jobs`), and then, logging every action with its reason:

1. an instance whose set-up failed (bootstrap_error) on a node still powering up: the node goes
   DOWN with `aicluster-bootstrap: <error>` (its job requeues), then is powered down (slurmctld
   runs the SuspendProgram, which terminates the instance);
2. an instance with a scheduled event, interruption or maintenance notice: its node is drained
   with `aicluster-event: <event>`, so no new job lands; it is replaced once idle (6);
3. an instance no powered-up node owns (no node name, a node slurmctld does not know, a node
   POWERED_DOWN), older than the grace period (a younger one may be mid-resume): terminated;
4. a node that is up with several instances (two resumes of it at once): once all are older than
   the grace period, every one but the instance at the node's NodeAddr is terminated;
5. a suspend that did not finish (pending-suspend.json) of a node still powered down: retried; an
   entry of the wrong shape is moved to pending-suspend.rejected.json and the others go on;
6. the roll (roll_nodes): a node that is up on an instance of an older version than its pool's
   (cluster.json pools[].version: the launch template version on AWS, the instance template's name
   on GCP; the instance's aicluster-node-version tag or label) is powered down once it has no job
   (checked again just before), at most the pool's max_unavailable nodes out of service at once
   (powering down, always-on and not back up, drained by the roll); when the budget has room and
   no idle old node is left, a busy one is drained with `aicluster-roll: version X -> Y`, takes no
   new job, and is powered down once its job ends. Each rolling pool gets one log line a pass, and
   the pass writes aicluster_roll_nodes{pool, version="current|old"} to node_exporter's textfile
   directory; `aicluster-reconcile --status` prints the same per pool and acts on nothing;
7. a node with no job that is DOWN, or drained by aicluster (health check, event, bootstrap, roll),
   is powered down with `scontrol update state=power_down_force`, under the replacement cap;
8. an always-on node (cluster.json static_nodes, SuspendExcNodes) that is powered down: DOWN or
   aicluster's drain cleared (`state=resume`), then powered up (`state=power_up`): slurmctld runs
   the ResumeProgram, which launches a new instance, and times it with ResumeTimeout.

Never touched: an instance of a node with a job (ALLOCATED, MIXED, COMPLETING, or a node of a
running job in `scontrol show jobs`), each such check repeated just before the action, except an
extra instance of step 4, which slurmctld does not use; a node drained by hand (any reason not in
the exact form aicluster writes, `aicluster-health: `, `aicluster-event: `, `aicluster-bootstrap: `,
`aicluster-roll: `);
the head and login nodes, another cluster's instances, anything outside the Slurm pools.

Why power_down_force and power_up rather than terminating and launching here: slurmctld then knows
what happens to the node. POWER_DOWN_FORCE runs the SuspendProgram at once and, with
SlurmctldParameters=idle_on_node_suspend (slurm.conf), leaves the node IDLE+POWERED_DOWN after
SuspendTimeout, its DOWN and DRAIN cleared (https://slurm.schedmd.com/scontrol.html, State=;
https://slurm.schedmd.com/slurm.conf.html#OPT_idle_on_node_suspend; seen on 22.05.8,
tests/slurm/test_reconcile.py). A node powered up this way is POWERING_UP until its slurmd
registers, so no job starts on a half-booted instance, and a launch that never comes up ends in
ResumeTimeout and the ResumeFailProgram, as for any resume (https://slurm.schedmd.com/power_save.html).
POWER_DOWN_FORCE cancels the jobs of the node, so it is only sent to a node with none.

Exit status: 0 after a clean pass (also when paused, or when another pass holds the lock), 1 when
an action failed or the cluster could not be read; the next pass tries again.
"""
from __future__ import annotations

import fcntl
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from aicluster.node import slurm as core
from aicluster.node.slurm import compress_hostlist, log

DEFAULT_LOG = "/var/log/aicluster/reconcile.log"
PAUSE_FILE = "reconcile.paused"         # beside cluster.json: its presence pauses the loop
LOCK_FILE = "reconcile.lock"            # under STATE_DIR: one pass at a time
# The replacement cap (cluster.json "reconcile" overrides both): at most this fraction of all nodes
# (at least one) powered down for replacement per pass, and none in a pool while this fraction of
# it (at least one node) is already on its way down or back up. A health check that fails
# everywhere, or a burst of events, then takes the fleet down a few nodes a minute, not at once.
REPLACE_FRACTION = 0.10
POOL_REPLACING_FRACTION = 0.25
# ResumeTimeout when cluster.json carries none (aicluster's default: large GPU nodes boot slowly).
FALLBACK_RESUME_TIMEOUT_S = 1800
# Reasons aicluster sets on the nodes it may replace (aicluster.node.slurm).
OUR_REASONS = (core.HEALTH_REASON, core.EVENT_REASON, core.BOOTSTRAP_REASON, core.ROLL_REASON)
# The roll's gauges, in the head's node_exporter textfile directory (catalog/observability.yaml
# exporters.node_exporter.textfile_directory; cluster.json "reconcile" textfile_dir overrides).
TEXTFILE_DIR = "/var/lib/node_exporter/textfile"
ROLL_METRICS_FILE = "aicluster-roll.prom"
# Node state flags that mean a job holds the node (`scontrol show node`: the base state, or the
# COMPLETING flag while its epilog runs).
JOB_STATES = frozenset({"ALLOCATED", "MIXED", "COMPLETING"})
# Job states whose NodeList holds no node (pending) or no longer holds it (ended) (squeue(1), JOB STATE CODES). Any other state
# (RUNNING, CONFIGURING, COMPLETING, SUSPENDED, STOPPED, SIGNALING, STAGE_OUT, ...) counts as using
# its nodes: an unknown state errs on the side of the job.
JOB_STATES_WITHOUT_NODES = frozenset({"PENDING", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL",
                              "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY", "REVOKED"})
# `Reason=<text> [<user>@<time>]` of `scontrol -o show node`: the text has spaces, the stamp ends it.
REASON_RE = re.compile(r"\bReason=(.*?) \[[^\[\]@]*@[^\[\]]*\](?= \w+=|$)")
REASON_UNSTAMPED_RE = re.compile(r"\bReason=(.*?)(?= \w+=|$)")


class SlurmError(Exception):
    """slurmctld could not be asked (down, or scontrol failed): the pass stops, acting on nothing."""


# --- slurmctld's view ------------------------------------------------------------------------


@dataclass(frozen=True)
class Node:
    """One node as `scontrol -o show node` gives it."""
    name: str
    states: frozenset[str]          # the base state and its flags: IDLE+CLOUD+DRAIN+POWERED_DOWN
    reason: str = ""
    addr: str = ""                  # NodeAddr: the address slurmctld talks to (the name until resumed)

    @property
    def has_job(self) -> bool:
        return bool(self.states & JOB_STATES)

    @property
    def powered_down(self) -> bool:
        """Off, and not on its way up or down."""
        return "POWERED_DOWN" in self.states and not self.states & {"POWERING_UP", "POWERING_DOWN"}

    @property
    def powering_up(self) -> bool:
        return "POWERING_UP" in self.states

    @property
    def powering_down(self) -> bool:
        return "POWERING_DOWN" in self.states

    @property
    def down(self) -> bool:
        return "DOWN" in self.states

    @property
    def drained(self) -> bool:
        return "DRAIN" in self.states

    @property
    def ours(self) -> bool:
        """Drained or set DOWN by aicluster (health check, event, bootstrap): ours to replace. Only
        the exact form aicluster writes, `<code>: <message>` (core.reason_text): an operator's
        `aicluster-healthy-maintenance` or a bare `aicluster-event` is theirs."""
        return core.reason_code(self.reason) in OUR_REASONS

    @property
    def by_hand(self) -> bool:
        """Drained with someone else's reason: an operator's, never touched."""
        return self.drained and not self.ours

    def describe(self) -> str:
        state = "+".join(sorted(self.states))
        return f"{state}, reason {self.reason!r}" if self.reason else state


def parse_nodes(text: str) -> dict[str, Node]:
    """name -> Node of `scontrol -o show nodes` (one node a line)."""
    nodes = {}
    for line in text.splitlines():
        name, state = re.search(r"\bNodeName=(\S+)", line), re.search(r"\bState=(\S+)", line)
        if not name or not state:
            continue
        reason = REASON_RE.search(line) or REASON_UNSTAMPED_RE.search(line)
        text_reason = reason.group(1).strip() if reason else ""
        addr = re.search(r"\bNodeAddr=(\S+)", line)
        nodes[name.group(1)] = Node(name.group(1), frozenset(state.group(1).split("+")),
                                    "" if text_reason == "(null)" else text_reason, addr.group(1) if addr else "")
    return nodes


def parse_busy(text: str) -> set[str]:
    """The nodes of every job of `scontrol -o show jobs` that has not ended (or pends)."""
    busy: set[str] = set()
    for line in text.splitlines():
        state, nodes = re.search(r"\bJobState=(\S+)", line), re.search(r"\bNodeList=(\S+)", line)
        if not state or not nodes or state.group(1) in JOB_STATES_WITHOUT_NODES or nodes.group(1) == "(null)":
            continue
        busy.update(core.expand_hostlist(nodes.group(1)))
    return busy


class Slurm:
    """slurmctld through scontrol (AICLUSTER_SCONTROL overrides the path, as for the power programs)."""

    def _output(self, *args: str) -> str:
        command = [os.environ.get("AICLUSTER_SCONTROL", "scontrol"), *args]
        try:
            done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  universal_newlines=True, timeout=60)
        except (OSError, subprocess.SubprocessError) as err:
            raise SlurmError(f"scontrol {' '.join(args)}: {err}") from err
        if done.returncode != 0:
            raise SlurmError(f"scontrol {' '.join(args)} exited {done.returncode}: "
                             f"{(done.stderr or done.stdout).strip()}")
        return done.stdout

    def nodes(self) -> dict[str, Node]:
        return parse_nodes(self._output("-a", "-o", "show", "nodes"))

    def node(self, name: str) -> Node | None:
        """The node as it is now (the check repeated just before an action); None if unknown."""
        return parse_nodes(self._output("-a", "-o", "show", "node", name)).get(name)

    def busy(self) -> set[str]:
        return parse_busy(self._output("-a", "-o", "show", "jobs"))

    def update(self, node: str, *args: str) -> bool:
        return core.scontrol("update", f"nodename={node}", *args)


# --- one pass --------------------------------------------------------------------------------


class Snapshot(core.Cloud):
    """The cloud, with `find` answering from the pass's own listing: a suspend retried here deletes
    only instances listed before slurmctld was asked, never one a resume launched since."""

    def __init__(self, cloud: core.Cloud, instances: list[core.Instance]):
        self.cloud, self.instances = cloud, instances
        self.deleting = cloud.deleting

    @property
    def deadline(self):
        return self.cloud.deadline

    @deadline.setter
    def deadline(self, value) -> None:
        self.cloud.deadline = value

    def __getattr__(self, name: str):
        return getattr(self.cloud, name)        # anything else the core asks of the cloud

    def find(self, nodes: list[str]) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for instance in self.instances:
            if instance.node in nodes:
                found.setdefault(instance.node, []).append(instance.id)
        return found

    def delete(self, instances: list[str]) -> bool:
        return self.cloud.delete(instances)

    def delete_refused(self, instances: list[str]) -> list[str]:
        return self.cloud.delete_refused(instances)


@dataclass
class Pass:
    """What one pass knows and has done."""
    cloud: core.Cloud
    config: dict
    dns: core.NodeRecords | None
    slurm: Slurm
    now: float
    instances: list[core.Instance] = field(default_factory=list)
    nodes: dict[str, Node] = field(default_factory=dict)
    busy: set[str] = field(default_factory=set)
    static: set[str] = field(default_factory=set)
    failed: bool = False
    replaced: int = 0                   # nodes powered down for replacement in this pass

    @property
    def settings(self) -> dict:
        return self.config.get("reconcile") or {}

    @property
    def grace_s(self) -> float:
        """An instance younger than this may be mid-resume (a resume may take all of ResumeTimeout)."""
        timeout = float(self.config.get("resume_timeout_s") or FALLBACK_RESUME_TIMEOUT_S)
        return max(float(self.settings.get("grace_s") or 0), timeout)

    def in_use(self, name: str) -> bool:
        node = self.nodes.get(name)
        return name in self.busy or bool(node and node.has_job)

    def fail(self, message: str, *args) -> None:
        log.error("reconcile: " + message, *args)
        self.failed = True

    def fresh(self, name: str) -> Node | None:
        """The node as slurmctld has it now; None (and a failed pass) when it cannot be read."""
        try:
            return self.slurm.node(name)
        except SlurmError as err:
            self.fail("re-reading %s failed: %s", name, err)
            return None


def read_cluster(run: Pass) -> bool:
    """The cloud's instances first, then slurmctld's nodes and jobs: an instance a resume launches
    in between is then seen with its node already POWERING_UP, never as an orphan."""
    try:
        listed = [i for i in run.cloud.list_cluster() if i.state != "terminated"]
    except core.CloudError as err:
        run.fail("listing the cluster's instances failed: %s: %s", err.code, err.message)
        return False
    except NotImplementedError:
        run.fail("this cloud's power program cannot list the cluster's instances")
        return False
    run.instances = ours(run, listed)
    try:
        run.nodes = run.slurm.nodes()
        run.busy = run.slurm.busy()
    except SlurmError as err:
        run.fail("asking slurmctld failed, acting on nothing: %s", err)
        return False
    if not run.nodes:
        # Never read as "no node owns any instance": that would terminate the fleet.
        run.fail("slurmctld lists no nodes; acting on nothing")
        return False
    for hostlist in run.config.get("static_nodes") or []:
        run.static.update(core.expand_hostlist(hostlist))
    return True


def ours(run: Pass, listed: list[core.Instance]) -> list[core.Instance]:
    """The instances of this cluster's Slurm pools (core.not_ours): the only ones a pass looks at.
    Head and login nodes carry the cluster tag but no pool; another cluster's instance should never
    be listed at all, and is said loudly when it is."""
    kept, others = [], []
    for instance in listed:
        why = core.not_ours(instance, run.config)
        if why is None:
            kept.append(instance)
        elif instance.cluster is not None and instance.cluster != run.config["cluster"]:
            log.error("reconcile: the listing returned %s, which is not this cluster's: %s; never touched",
                      instance.id, why)
        else:
            others.append(f"{instance.id} ({why})")
    if others:
        log.info("reconcile: leaving alone %s", ", ".join(others))
    return kept


def handle_bootstrap_errors(run: Pass) -> None:
    """A node whose set-up failed never starts slurmd: set it DOWN with the reason (its job
    requeues), then power it down (the SuspendProgram terminates the instance)."""
    for instance in run.instances:
        node = run.nodes.get(instance.node or "")
        if not instance.bootstrap_error or node is None or not node.powering_up:
            continue
        reason = core.reason_text(core.BOOTSTRAP_REASON, instance.bootstrap_error)
        if not (node.down and core.reason_code(node.reason) == core.BOOTSTRAP_REASON):
            log.warning("reconcile: %s (%s) failed its set-up: marking it DOWN: %s", node.name, instance.id, reason)
            if not run.slurm.update(node.name, "state=down", f'reason="{reason}"'):
                run.fail("could not set %s DOWN", node.name)
                continue
        power_down(run, node.name, f"its set-up failed ({instance.bootstrap_error})", lambda now: now.down)


def drain_for_events(run: Pass) -> None:
    """Drain the node of an instance with a scheduled event, an interruption or maintenance notice."""
    for instance in run.instances:
        node = run.nodes.get(instance.node or "")
        if not instance.events or node is None or node.powered_down or node.powering_down:
            continue
        if node.drained or node.down:
            continue            # already out of service: ours is replaced, someone else's is theirs
        more = f" (+{len(instance.events) - 1} more)" if len(instance.events) > 1 else ""
        reason = core.reason_text(core.EVENT_REASON, instance.events[0] + more)
        log.warning("reconcile: draining %s: %s has %s", node.name, instance.id, "; ".join(instance.events))
        if run.slurm.update(node.name, "state=drain", f'reason="{reason}"'):
            run.nodes[node.name] = Node(node.name, node.states | {"DRAIN"}, reason)
        else:
            run.fail("could not drain %s", node.name)


def orphan_reason(run: Pass, instance: core.Instance) -> str | None:
    """Why no powered-up node owns this instance, or None when one does (or may yet)."""
    if instance.node is None:
        return "it has no node name"
    node = run.nodes.get(instance.node)
    if node is None:
        return f"slurmctld has no node {instance.node}"
    if node.powered_down and not run.in_use(node.name):
        return f"its node {node.name} is powered down"
    return None


def terminate_orphans(run: Pass) -> None:
    """Terminate instances no powered-up node owns, once older than the grace period."""
    by_node: dict[str | None, list[core.Instance]] = {}
    for instance in run.instances:
        why = orphan_reason(run, instance)
        if why is None:
            continue
        age = run.now - instance.launched_at
        if age < run.grace_s:
            log.info("reconcile: keeping %s for now: %s, but it is %.0f s old, inside the %.0f s grace "
                     "(it may be mid-resume)", instance.id, why, age, run.grace_s)
            continue
        log.warning("reconcile: terminating %s: %s (launched %.0f s ago)", instance.id, why, age)
        by_node.setdefault(instance.node, []).append(instance)
    for node, instances in by_node.items():
        if node is None or node not in run.nodes:
            refused = run.cloud.delete_refused([i.id for i in instances])
            if refused:
                run.fail("the cloud refused to delete %s", " ".join(refused))
            continue
        now = run.fresh(node)
        if now is None or not now.powered_down or now.has_job:
            log.info("reconcile: %s changed since the pass began (%s); its instances stay", node,
                     now.describe() if now else "unknown")
            continue
        # The core's suspend, for its name record and its pending-suspend bookkeeping too.
        if core.suspend(Snapshot(run.cloud, instances), [node], "reconcile", run.dns) != 0:
            run.fail("terminating the instances of %s failed", node)


def end_duplicates(run: Pass) -> None:
    """A node slurmctld has up with more than one instance (two resumes of it at once each
    launched one): once all are older than the grace period, end all but the one slurmctld uses,
    the one whose private address is the node's NodeAddr. When none is, slurmctld talks to neither:
    keep the first launched (launch time, then id: the one a later resume adopts,
    core.live_instances) unless the node has a job. Checked again just before."""
    by_node: dict[str, list[core.Instance]] = {}
    for instance in run.instances:
        node = run.nodes.get(instance.node or "")
        if node is not None and "POWERED_DOWN" not in node.states and not node.powering_down:
            by_node.setdefault(node.name, []).append(instance)
    for name, instances in sorted(by_node.items()):
        if len(instances) < 2:
            continue
        keep, why = kept_instance(run, run.nodes[name], instances)
        if keep is None:
            log.info("reconcile: %s has %d instances (%s): %s; keeping them for now", name, len(instances),
                     " ".join(i.id for i in instances), why)
            continue
        now = run.fresh(name)
        if now is None or "POWERED_DOWN" in now.states or now.powering_down or \
                kept_instance(run, now, instances)[0] != keep:
            log.info("reconcile: %s changed since the pass began (%s); its instances stay", name,
                     now.describe() if now else "unknown")
            continue
        extra = [i.id for i in instances if i is not keep]
        log.warning("reconcile: %s has %d instances: keeping %s (%s), terminating %s", name, len(instances),
                    keep.id, why, " ".join(extra))
        refused = run.cloud.delete_refused(extra)
        if refused:
            run.fail("the cloud refused to delete %s, extra instances of %s", " ".join(refused), name)
        if run.dns and keep.address:      # the name too: the other resume may have written it last
            problems = run.dns.upsert({name: keep.address})
            if problems:
                run.fail("could not point the name of %s at %s: %s", name, keep.address, problems[name])


def kept_instance(run: Pass, node: Node, instances: list[core.Instance]) -> tuple[core.Instance | None, str]:
    """(the instance of `node` to keep, why), or (None, why none may be chosen yet). Not before
    every one is older than the grace period: until then a resume may still be handing slurmctld
    the address of any of them (the last `scontrol update nodeaddr=` wins)."""
    young = [i.id for i in instances if run.now - i.launched_at < run.grace_s]
    if young:
        return None, f"{' '.join(young)} may be mid-resume (inside the {run.grace_s:.0f} s grace)"
    using = [i for i in instances if i.address and i.address == node.addr]
    if len(using) == 1:
        return using[0], f"slurmctld's NodeAddr {node.addr}"
    if run.in_use(node.name):
        return None, f"it has a job, and none is at its NodeAddr {node.addr or '(none)'}"
    first = min(instances, key=lambda i: (i.launched_at, i.id))
    return first, f"the first launched; none is at its NodeAddr {node.addr or '(none)'}"


def retry_pending_suspends(run: Pass) -> None:
    """Suspends that did not finish (pending-suspend.json), of nodes still powered down. An entry
    of the wrong shape is moved to pending-suspend.rejected.json (logged); the others go on."""
    pending = core.read_state(core.PENDING_SUSPEND)
    for name, entry in sorted(pending.items()):
        try:
            retry_pending(run, name, entry)
        except Exception:  # noqa: BLE001 - one entry's fault (a bug too) never stops the others
            log.exception("reconcile: retrying the unfinished suspend of %s failed", name)
            run.failed = True


def retry_pending(run: Pass, name: str, entry) -> None:
    problem = core.pending_problem(entry)
    if problem:
        core.reject_pending(name, entry, problem)
        return
    node = run.nodes.get(name)
    if node is not None and (not node.powered_down or run.in_use(name)):
        if not node.powering_down:
            log.warning("reconcile: %s is up again (%s): its unfinished %s (%s) waits for its next "
                        "power-down, which deletes every instance of it", name, node.describe(),
                        entry.get("action", "suspend"), " ".join(entry.get("instances") or []))
        return
    retry_suspend(run, name, entry)


def retry_suspend(run: Pass, name: str, entry: dict) -> None:
    if name in run.nodes:
        now = run.fresh(name)
        if now is None or not now.powered_down or now.has_job:
            return
    mine = [i for i in run.instances if i.node == name]
    log.info("reconcile: retrying the %s of %s (since %s: %s): %s", entry.get("action", "suspend"), name,
             time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(entry.get("since") or 0)), entry.get("error", ""),
             " ".join(i.id for i in mine) or "no instance left")
    if core.suspend(Snapshot(run.cloud, mine), [name], entry.get("action") or "suspend", run.dns) != 0:
        run.fail("the %s of %s failed again; kept in %s", entry.get("action", "suspend"), name, core.PENDING_SUSPEND)
        return

    def drop(data: dict) -> None:
        if data.get(name) == entry:     # unchanged: a newer failure of the same node stays
            data.pop(name, None)

    core.update_state(core.PENDING_SUSPEND, drop)


def replacement_reason(run: Pass, node: Node) -> str | None:
    """Why `node` should be powered down and replaced, or None."""
    if run.in_use(node.name) or node.powering_down or "POWERED_DOWN" in node.states:
        return None
    if node.powering_up:
        return None             # a DOWN launch ends in ResumeTimeout and resume-fail (slurmctld's)
    if node.by_hand:
        return None
    if node.drained and node.ours:
        return f"drained: {node.reason}"
    if node.down:
        return f"DOWN: {node.reason or 'no reason given'}"
    return None


def replacing(run: Pass, node: Node) -> bool:
    """On its way down, or (always-on) not back up yet: counts against its pool's cap. An always-on
    node that cannot come back (no capacity) holds the cap: no more of its pool goes down meanwhile.
    One drained by hand is the operator's, not a replacement: it never holds the cap."""
    if node.powering_down:
        return True
    return node.name in run.static and not node.by_hand and ("POWERED_DOWN" in node.states or node.powering_up)


def replace_nodes(run: Pass) -> None:
    """Power down idle nodes that are DOWN or drained by aicluster, under the replacement cap."""
    per_pass = max(1, int(len(run.nodes) * float(run.settings.get("replace_fraction", REPLACE_FRACTION))))
    fraction = float(run.settings.get("pool_replacing_fraction", POOL_REPLACING_FRACTION))
    pools: dict[str, list[Node]] = {}
    for node in run.nodes.values():
        pools.setdefault(core.pool_of(node.name) or "", []).append(node)
    in_flight = {pool: sum(replacing(run, n) for n in members) for pool, members in pools.items()}
    deferred = []
    for node in round_robin(pools):
        why = replacement_reason(run, node)
        if why is None:
            continue
        pool = core.pool_of(node.name) or ""
        allowed = max(1, int(len(pools[pool]) * fraction))
        if run.replaced >= per_pass or in_flight[pool] >= allowed:
            deferred.append(node.name)
            continue
        if power_down(run, node.name, why, lambda now: replacement_reason(run, now) is not None):
            in_flight[pool] += 1
    if deferred:
        log.warning("reconcile: replacement cap reached (%d a pass, %.0f%% of a pool at once): %s wait for "
                    "a later pass", per_pass, fraction * 100, compress_hostlist(deferred))


def node_order(node: Node) -> tuple:
    """gpu-2 before gpu-10."""
    match = core.NODE_RE.match(node.name)
    return (match.group(1), int(match.group(2)), "") if match else (node.name, 0, node.name)


def round_robin(pools: dict[str, list[Node]]) -> list[Node]:
    """The nodes a pool at a time, in turn: one pool's flood of drains never starves another's."""
    queues = [sorted(members, key=node_order) for _, members in sorted(pools.items())]
    ordered = []
    for i in range(max((len(q) for q in queues), default=0)):
        ordered.extend(q[i] for q in queues if i < len(q))
    return ordered


def power_down(run: Pass, name: str, why: str, still) -> bool:
    """`scontrol update state=power_down_force` of an idle node, checked again just before (no job,
    not powered down, and `still(node)`): POWER_DOWN_FORCE cancels a node's jobs. slurmctld runs the
    SuspendProgram (it terminates the instance) and the node comes back IDLE+POWERED_DOWN."""
    now = run.fresh(name)
    if now is None:
        return False
    if now.has_job or now.powering_down or "POWERED_DOWN" in now.states or not still(now):
        log.info("reconcile: not powering down %s after all: it is %s now", name, now.describe())
        return False
    log.warning("reconcile: powering down %s to replace it: %s", name, why)
    if not run.slurm.update(name, "state=power_down_force"):
        run.fail("could not power down %s", name)
        return False
    run.replaced += 1
    # On its way down from now on: the later steps' caps count it.
    run.nodes[name] = Node(name, (now.states - {"DRAIN", "DOWN"}) | {"POWERING_DOWN"}, now.reason, now.addr)
    return True


# --- the roll: nodes on an older version of their pool, replaced as they become idle -----------


@dataclass
class PoolRoll:
    """One pool's roll as a pass sees it: its version, its budget and its nodes by kind."""
    pool: str
    version: str
    budget: int
    current: list[str] = field(default_factory=list)      # up, every instance on the pool's version
    idle: list[str] = field(default_factory=list)         # up on an older version, no job, not drained
    busy: list[str] = field(default_factory=list)         # on an older version, with a job, not drained
    draining: list[str] = field(default_factory=list)     # drained by the roll, still up
    out: int = 0                    # out of service: powering down, always-on and not back up, draining
    old_versions: dict[str, str] = field(default_factory=dict)     # node -> the version it runs

    @property
    def old(self) -> int:
        return len(self.idle) + len(self.busy) + len(self.draining)


def roll_budget(config: dict, pool: str) -> int:
    """cluster.json pools[].max_unavailable (nodes, at least one; 1 when absent)."""
    try:
        return max(1, int(((config.get("pools") or {}).get(pool) or {}).get("max_unavailable") or 1))
    except (TypeError, ValueError):
        return 1


def node_version(run: Pass, name: str) -> str | None:
    """The version a node's instances run, "" when they disagree or one is unknown (old, whatever
    the pool's version), None when it has no instance in the listing (nothing to judge)."""
    versions = {i.version or "" for i in run.instances if i.node == name}
    if not versions:
        return None
    return versions.pop() if len(versions) == 1 else ""


def is_roll_drain(node: Node) -> bool:
    return node.drained and core.reason_code(node.reason) == core.ROLL_REASON


def roll_state(run: Pass) -> dict[str, PoolRoll]:
    """pool -> its roll, for every pool of cluster.json with a version (none: nothing to roll)."""
    rolls: dict[str, PoolRoll] = {}
    for pool in sorted(run.config.get("pools") or {}):
        version = core.pool_version(run.config, pool)
        if version:
            rolls[pool] = PoolRoll(pool, version, roll_budget(run.config, pool))
    for node in sorted(run.nodes.values(), key=node_order):
        roll = rolls.get(core.pool_of(node.name) or "")
        if roll is None:
            continue
        if replacing(run, node) or (is_roll_drain(node) and not node.powered_down):
            roll.out += 1
        if node.powering_down or node.powering_up or "POWERED_DOWN" in node.states:
            continue                    # off or on its way: boots the pool's version when resumed
        version = node_version(run, node.name)
        if version is None:
            continue
        if version == roll.version:
            roll.current.append(node.name)
            continue
        roll.old_versions[node.name] = version or "unknown"
        if is_roll_drain(node):
            roll.draining.append(node.name)
        elif node.by_hand or node.down or node.drained:
            continue                    # an operator's, or a failure replace_nodes sees to
        elif run.in_use(node.name):
            roll.busy.append(node.name)
        else:
            roll.idle.append(node.name)
    return rolls


def roll_reason(roll: PoolRoll, name: str) -> str:
    return core.reason_text(core.ROLL_REASON, f"version {roll.old_versions.get(name, 'unknown')} -> {roll.version}")


def roll_nodes(run: Pass) -> None:
    """Nodes whose instance runs an older version than their pool's (cluster.json pools[].version),
    replaced as they become idle, at most the pool's max_unavailable out of service at once:
    an idle one is powered down (checked again just before; an always-on one is powered up again
    by power_up_static, on the new version); when the budget has room and no idle one is left, a
    busy one is drained (`aicluster-roll: version X -> Y`), so it takes no new job, and replaced
    once its job ends. A job is never stopped. A roll drain whose node is on the pool's version
    again (the version was set back) is cleared."""
    per_pass = max(1, int(len(run.nodes) * float(run.settings.get("replace_fraction", REPLACE_FRACTION))))
    rolls = roll_state(run)
    for name, node in sorted(run.nodes.items()):
        roll = rolls.get(core.pool_of(name) or "")
        if roll is not None and is_roll_drain(node) and name in roll.current:
            log.info("reconcile: %s runs its pool's version %s again: clearing its roll drain", name, roll.version)
            if run.slurm.update(name, "state=resume"):
                run.nodes[name] = Node(name, node.states - {"DRAIN"}, "", node.addr)
                roll.out -= 1
            else:
                run.fail("could not clear the roll drain of %s", name)
    for roll in rolls.values():
        if roll.old:
            log.info("reconcile: rolling pool %s to version %s: %d current, %d old (%d idle, %d busy, %d draining), "
                     "%d of %d out of service", roll.pool, roll.version, len(roll.current), roll.old, len(roll.idle),
                     len(roll.busy), len(roll.draining), roll.out, roll.budget)
        # Drained by the roll and idle now: already counted out of service.
        for name in roll.draining:
            if run.in_use(name) or run.replaced >= per_pass:
                continue
            power_down(run, name, roll_reason(roll, name), lambda now: is_roll_drain(now) and not run.in_use(now.name))
        for name in roll.idle:
            if roll.out >= roll.budget or run.replaced >= per_pass:
                log.info("reconcile: pool %s: roll budget full (%d of %d out of service, %d powered down this "
                         "pass): %s wait", roll.pool, roll.out, roll.budget, run.replaced,
                         compress_hostlist(roll.idle[roll.idle.index(name):]))
                break
            if power_down(run, name, roll_reason(roll, name),
                          lambda now: not now.drained and not now.down and not run.in_use(now.name)):
                roll.out += 1
        else:
            for name in roll.busy:
                if roll.out >= roll.budget:
                    break
                drain_for_roll(run, roll, name)


def drain_for_roll(run: Pass, roll: PoolRoll, name: str) -> None:
    """Drain an old node that runs a job: it takes no new one and is replaced once idle."""
    now = run.fresh(name)
    if now is None or now.drained or now.down or now.powering_down or "POWERED_DOWN" in now.states:
        return
    reason = roll_reason(roll, name)
    log.warning("reconcile: draining %s for the roll: %s (its job runs on)", name, reason)
    if run.slurm.update(name, "state=drain", f'reason="{reason}"'):
        run.nodes[name] = Node(name, now.states | {"DRAIN"}, reason, now.addr)
        roll.out += 1
    else:
        run.fail("could not drain %s", name)


def write_roll_metrics(run: Pass, rolls: dict[str, PoolRoll]) -> None:
    """aicluster_roll_nodes{pool, version="current|old"} in node_exporter's textfile directory,
    written atomically (a temporary file renamed over it: the collector never reads half a file)."""
    directory = run.settings.get("textfile_dir") or os.environ.get("AICLUSTER_TEXTFILE_DIR") or TEXTFILE_DIR
    lines = ["# HELP aicluster_roll_nodes Slurm nodes that are up, on their pool's current version or an older one.",
             "# TYPE aicluster_roll_nodes gauge"]
    for roll in rolls.values():
        lines.append(f'aicluster_roll_nodes{{pool="{roll.pool}",version="current"}} {len(roll.current)}')
        lines.append(f'aicluster_roll_nodes{{pool="{roll.pool}",version="old"}} {roll.old}')
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{ROLL_METRICS_FILE}.")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, os.path.join(directory, ROLL_METRICS_FILE))
    except OSError as err:
        log.warning("reconcile: cannot write the roll metrics in %s: %s", directory, err)


def roll_metrics(run: Pass) -> None:
    """The step that writes the gauges, from the state the pass leaves (none when no pool has a
    version: a cluster.json rendered before rolling updates)."""
    rolls = roll_state(run)
    if rolls:
        write_roll_metrics(run, rolls)


def status_text(run: Pass) -> str:
    """`aicluster-reconcile --status`: per pool, its version and budget, and its nodes on it and on
    older ones."""
    rolls = roll_state(run)
    lines = []
    for pool in sorted(run.config.get("pools") or {}):
        roll = rolls.get(pool)
        if roll is None:
            lines.append(f"pool {pool}: no version in cluster.json (rendered before rolling updates): nothing to roll")
            continue
        state = "rolling" if roll.old else "up to date"
        lines.append(f"pool {pool}: version {roll.version}, {state}; budget {roll.out} of {roll.budget} out of service")
        lines.append(f"  current: {len(roll.current)} {compress_hostlist(roll.current)}".rstrip())
        for kind in ("idle", "busy", "draining"):
            names = getattr(roll, kind)
            versions = sorted({roll.old_versions[n] for n in names})
            lines.append(f"  old {kind}: {len(names)} {compress_hostlist(names)}"
                         + (f" (versions {', '.join(versions)})" if versions else ""))
    if os.path.exists(pause_path()):
        lines.append(f"paused: {pause_path()} exists")
    return "\n".join(lines) + "\n"


def power_up_static(run: Pass) -> None:
    """Always-on nodes that are powered down: cleared of DOWN or aicluster's drain, then powered up."""
    for name in sorted(run.static):
        node = run.nodes.get(name)
        if node is None or not node.powered_down or run.in_use(name) or node.by_hand:
            continue
        now = run.fresh(name)
        if now is None or not now.powered_down or now.has_job or now.by_hand:
            continue
        log.warning("reconcile: powering up always-on node %s (%s)", name, now.describe())
        if (now.down or now.drained) and not run.slurm.update(name, "state=resume"):
            run.fail("could not clear the DOWN or DRAIN of %s", name)
            continue
        if not run.slurm.update(name, "state=power_up"):
            run.fail("could not power up %s", name)


def run_pass(cloud: core.Cloud, config: dict, dns: core.NodeRecords | None = None, slurm: Slurm | None = None,
             now: float | None = None) -> int:
    """One pass; 0 when every action succeeded, 1 otherwise."""
    run = Pass(cloud, config, dns, slurm or Slurm(), time.time() if now is None else now)
    if not read_cluster(run):
        return 1
    log.info("reconcile: %d instances, %d nodes (%d with jobs)", len(run.instances), len(run.nodes),
             sum(run.in_use(n) for n in run.nodes))
    for step in (handle_bootstrap_errors, drain_for_events, terminate_orphans, end_duplicates,
                 retry_pending_suspends, roll_nodes, replace_nodes, power_up_static, roll_metrics):
        try:
            step(run)
        except Exception:  # noqa: BLE001 - one step's fault (a bug too) never stops the others
            log.exception("reconcile: %s failed", step.__name__)
            run.failed = True
    log.info("reconcile: pass %s", "failed" if run.failed else "done")
    return 1 if run.failed else 0


# --- entry point -----------------------------------------------------------------------------


def pause_path() -> str:
    return os.path.join(os.path.dirname(os.environ.get("AICLUSTER_CONFIG", core.DEFAULT_CONFIG)), PAUSE_FILE)


def status(cloud: core.Cloud, config: dict, slurm: Slurm | None = None, out=None) -> int:
    """`aicluster-reconcile --status`: the roll of every pool on stdout; acts on nothing."""
    run = Pass(cloud, config, None, slurm or Slurm(), time.time())
    if not read_cluster(run):
        return 1
    (out or sys.stdout).write(status_text(run))
    return 0


def main(cloud: core.Cloud, config: dict, dns: core.NodeRecords | None = None, show_status: bool = False) -> int:
    """The `aicluster-reconcile` action (aicluster.node.slurm.main): logging to the reconcile log, the
    pause switch, one pass at a time. `show_status` (`--status`): print the roll, act on nothing."""
    if show_status:
        return status(cloud, config)
    if not os.environ.get("AICLUSTER_LOG"):
        core.setup_logging((config.get("reconcile") or {}).get("log_file") or DEFAULT_LOG)
    if os.path.exists(pause_path()):
        log.info("reconcile: paused (%s exists; remove it to resume)", pause_path())
        return 0
    lock_path = core.state_path(LOCK_FILE)
    os.makedirs(os.path.dirname(lock_path), exist_ok=True)
    with open(lock_path, "a", encoding="utf-8") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("reconcile: another pass holds %s; skipping this one", lock_path)
            return 0
        return run_pass(cloud, config, dns)
