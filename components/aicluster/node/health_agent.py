#!/usr/bin/env python3
"""aicluster-node-health: the GPU node health agent of aicluster's Kubernetes clusters (EKS and GKE).

Runs as a DaemonSet on every GPU node (components/aicluster/kubernetes/health.py renders it) and, every
AICLUSTER_HEALTH_INTERVAL seconds, runs the very health check the Slurm nodes run
(aicluster/node/bin/aicluster-gpu-healthcheck: GPU count, ECC, row remapping, NVLink, fatal Xids,
EFA / RDMA device count) in the host's mount and network namespaces (nsenter into PID 1: the
host's nvidia-smi, fi_info, kernel log and sysfs), in its "manual" role: it reports and never
drains anything. The expectations (AICLUSTER_GPUS, AICLUSTER_FABRIC_KIND, AICLUSTER_FABRIC_DEVICES;
on NVL72 pools AICLUSTER_NVLINK_DOMAIN_NODES and AICLUSTER_IMEX=dra, which add the nvlink-fabric
and imex checks) come from the pool's env file in the agent's ConfigMap and reach the check on its
stdin.

One scheme marks the node, all three parts set together from one decision:
  condition  AiclusterGpuHealthy   True (passed), False (failed), Unknown (not decided yet)
  label      aicluster.io/gpu-health=passed|failed   (the example jobs require `passed`)
  taint      aicluster.io/gpu-unhealthy=<check>:NoSchedule while failed

Flapping: a failure that is a timeout (nvidia-smi or the kernel log did not answer) marks the node
failed only when the next run fails too; any other failure (an Xid, a missing GPU, ECC, a link
down) at once. A failed node is marked passed again only after PASS_AFTER passing runs in a row.
A run that could not judge the node (nsenter failed, the script could not read its expectations,
a tool missing, the agent's own time limit) changes nothing: it never untaints, never taints.

Repair: with AICLUSTER_REPAIR_AFTER > 0, a node that stays failed that long has its kubelet stopped
(systemctl stop kubelet, on the host): the node turns NotReady, which is what GKE node auto-repair
(and EKS node auto repair's Ready rule) act on by recreating the node. At most AICLUSTER_REPAIR_CAP
nodes of the pool are NotReady for this at once; above that the node stays tainted for a person.

Liveness: every time round its loop the agent writes the time to AICLUSTER_HEARTBEAT (a file in
a memory-backed emptyDir); the DaemonSet's liveness probe runs this same file with `--alive PATH
MAX_AGE_S`, which fails when the heartbeat is missing or older than MAX_AGE_S: a loop stuck past
every timeout it sets (a hung API call, a child that never returns) gets the container restarted.

Standard library only. The pure functions (parse_check, next_state, node_patch, status_patch,
repair_due, repair_allowed, alive) hold the logic and carry the unit tests
(tests/k8s/test_node_health_agent.py).
"""
from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, replace
from datetime import datetime, timezone

CONDITION = "AiclusterGpuHealthy"
LABEL = "aicluster.io/gpu-health"
TAINT_KEY = "aicluster.io/gpu-unhealthy"
PASSED, FAILED, UNDECIDED = "passed", "failed", "undecided"
# The taint a node is born with when an autoscaler launches it for a waiting job (Karpenter's
# NodePool startupTaints on EKS, the node pool's taints on GKE: aicluster.kubernetes.capacity). The node
# carries the label the jobs select, so the autoscaler can promise it, but it has no verdict yet;
# the first check removes the taint (a pass) or replaces it with ours (a failure). Cluster
# autoscaler leaves taints of this prefix out of its node templates (StartupTaintPrefix).
STARTUP_TAINT_KEY = "startup-taint.cluster-autoscaler.kubernetes.io/aicluster-gpu-unchecked"

# A timeout needs a second failing run in a row (a busy driver answers late once in a while);
# anything else is a finding that holds until the node reboots (the check reads Xids since boot).
FAIL_AFTER_TIMEOUT = 2
# A failed node needs this many passing runs in a row before jobs may land on it again.
PASS_AFTER = 3
# The check bounds each command itself (about 25 s in all, some 45 s on an NVL72 node with its IMEX
# calls, aicluster/node/bin/aicluster-gpu-healthcheck);
# this bounds the whole run, nsenter included.
CHECK_TIMEOUT_S = 120
SCRIPT_NAME = "aicluster-gpu-healthcheck"
# Failures that say the check could not look, not that the node is bad.
NOT_RUN_CHECKS = ("config",)
NOT_RUN_DETAILS = ("is not installed",)
TIMEOUT_DETAILS = ("did not answer", "did not finish")

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
HEARTBEAT_ENV = "AICLUSTER_HEARTBEAT"
# The longest one time round the loop can take with every call at its own limit: the Node read, the
# check (CHECK_TIMEOUT_S), the two patches, the pool's nodes (API_TIMEOUT_S each) and stopping the
# kubelet (KUBELET_STOP_TIMEOUT_S); the probe's limit must exceed it plus the interval.
API_TIMEOUT_S = 30
KUBELET_STOP_TIMEOUT_S = 60
LOOP_WORST_S = CHECK_TIMEOUT_S + 4 * API_TIMEOUT_S + KUBELET_STOP_TIMEOUT_S


# ---------------------------------------------------------------- pure logic


@dataclass(frozen=True)
class CheckResult:
    outcome: str                      # pass | fail | unknown
    failures: tuple[tuple[str, str], ...] = ()   # (check, detail) of each failing check
    note: str = ""                    # why a run is unknown, or the passing summary

    @property
    def timeouts_only(self) -> bool:
        return bool(self.failures) and all(any(t in d for t in TIMEOUT_DETAILS) for _, d in self.failures)

    @property
    def first(self) -> str:
        return f"{self.failures[0][0]}: {self.failures[0][1]}" if self.failures else ""


def parse_check(exit_code: int | None, stdout: str, stderr: str) -> CheckResult:
    """The check's verdict from its exit status (None: it ran past CHECK_TIMEOUT_S) and output:
    stdout holds "<check>: <result>" per check ("<check>: FAIL" for a failure), stderr
    "aicluster-gpu-healthcheck: <check>: <reason>" per failure."""
    if exit_code is None:
        return CheckResult("unknown", note=f"the check did not finish within {CHECK_TIMEOUT_S}s")
    results = {}
    for line in stdout.splitlines():
        check, sep, text = line.partition(": ")
        if sep and check and " " not in check:
            results[check] = text.strip()
    reasons = {}
    for line in stderr.splitlines():
        prog, sep, rest = line.partition(": ")
        check, sep2, detail = rest.partition(": ")
        if prog == SCRIPT_NAME and sep and sep2 and check not in reasons:
            reasons[check] = detail.strip()
    failed = [c for c, text in results.items() if text == "FAIL"]
    tail = (stderr.strip().splitlines() or [""])[-1][:200]
    if exit_code == 0:
        if failed or "gpu-count" not in results:
            return CheckResult("unknown", note=f"exit 0 but output unexpected: {stdout.strip()[:200]!r}")
        return CheckResult("pass", note=", ".join(f"{c} {t}" for c, t in results.items())[:300])
    if not failed:
        # nsenter or bash failed (126/127), or the check stopped before any check ran.
        return CheckResult("unknown", note=f"exit {exit_code}: {tail or 'no output'}")
    failures = tuple((c, reasons.get(c, "failed")) for c in failed)
    if all(c in NOT_RUN_CHECKS or any(d in detail for d in NOT_RUN_DETAILS) for c, detail in failures):
        return CheckResult("unknown", failures=failures,
                           note="could not run: " + "; ".join(f"{c}: {d}" for c, d in failures))
    return CheckResult("fail", failures=tuple(f for f in failures if f[0] not in NOT_RUN_CHECKS))


@dataclass(frozen=True)
class HealthState:
    status: str = UNDECIDED           # passed | failed | undecided (no verdict yet)
    fails_in_row: int = 0
    passes_in_row: int = 0
    failed_since: float | None = None
    reason: str = "NotChecked"
    message: str = "the GPU health check has not run yet"
    check: str = ""                   # the failing check the taint names


def initial_state(node: dict, now: float) -> HealthState:
    """What the node says from before this agent started (a restart must not untaint a node)."""
    taints = (node.get("spec") or {}).get("taints") or []
    if any(t.get("key") == STARTUP_TAINT_KEY for t in taints):
        return HealthState()          # launched for a job, never checked: its label promises nothing yet
    label = ((node.get("metadata") or {}).get("labels") or {}).get(LABEL)
    if label == FAILED:
        return HealthState(FAILED, failed_since=now, reason="GpuCheckFailed",
                           message="failed before this agent started")
    if label == PASSED:
        return HealthState(PASSED, reason="GpuCheckPassed", message="passed before this agent started")
    return HealthState()


def next_state(prev: HealthState, result: CheckResult, now: float) -> HealthState:
    if result.outcome == "unknown":
        # Nothing learned: keep the verdict (and its taint), say why in the message.
        return replace(prev, message=f"check could not run: {result.note}"[:1000],
                       reason=prev.reason if prev.status != UNDECIDED else "GpuCheckNotRun")
    if result.outcome == "fail":
        fails = prev.fails_in_row + 1
        confirmed = not result.timeouts_only or fails >= FAIL_AFTER_TIMEOUT
        if prev.status == FAILED or confirmed:
            return HealthState(FAILED, fails, 0, prev.failed_since if prev.status == FAILED else now,
                               "GpuCheckFailed", result.first[:1000], result.failures[0][0])
        return replace(prev, fails_in_row=fails, passes_in_row=0,
                       message=f"one timeout, confirming on the next run: {result.first}"[:1000])
    passes = prev.passes_in_row + 1
    if prev.status == FAILED and passes < PASS_AFTER:
        return replace(prev, fails_in_row=0, passes_in_row=passes,
                       message=f"passed {passes} of {PASS_AFTER} runs needed to clear the failure")
    return HealthState(PASSED, 0, passes, None, "GpuCheckPassed", result.note[:1000])


def _our_taint(state: HealthState) -> dict:
    # A taint value is a label value: 63 characters of [-_.A-Za-z0-9], alphanumeric at both ends.
    value = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in state.check)[:63].strip("-_.") or "unknown"
    return {"key": TAINT_KEY, "value": value, "effect": "NoSchedule"}


def node_patch(node: dict, state: HealthState) -> dict | None:
    """The JSON merge patch of the Node (label and taints) for `state`, or None when the node
    already matches. Taints are a list without a merge key, so the patch carries the whole list
    and the node's resourceVersion: a concurrent change by someone else fails it (409), and the
    next run retries on fresh data."""
    if state.status == UNDECIDED:
        return None
    meta, spec = node.get("metadata") or {}, node.get("spec") or {}
    taints = list(spec.get("taints") or [])
    others = [t for t in taints if t.get("key") not in (TAINT_KEY, STARTUP_TAINT_KEY)]
    ours = [t for t in taints if t.get("key") == TAINT_KEY]
    if state.status == FAILED:
        want = _our_taint(state)
        keep = [t for t in ours if t.get("effect") == want["effect"]][:1]
        new_taints = others + (keep or [want])
    else:
        new_taints = others
    label_ok = (meta.get("labels") or {}).get(LABEL) == state.status
    if label_ok and new_taints == taints:
        return None
    patch: dict = {"metadata": {"resourceVersion": meta.get("resourceVersion")}}
    if not label_ok:
        patch["metadata"]["labels"] = {LABEL: state.status}
    if new_taints != taints:
        patch["spec"] = {"taints": new_taints}
    return patch


def condition_status(state: HealthState) -> str:
    return {PASSED: "True", FAILED: "False"}.get(state.status, "Unknown")


def status_patch(node: dict, state: HealthState, now: float) -> dict:
    """The strategic merge patch of the Node's status: our condition, merged by its type."""
    stamp = datetime.fromtimestamp(now, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = condition_status(state)
    prior = next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == CONDITION), None)
    changed = prior is None or prior.get("status") != status
    return {"status": {"conditions": [{
        "type": CONDITION, "status": status, "reason": state.reason, "message": state.message,
        "lastHeartbeatTime": stamp,
        "lastTransitionTime": stamp if changed else prior.get("lastTransitionTime", stamp)}]}}


def repair_due(state: HealthState, now: float, repair_after_s: int) -> bool:
    return (repair_after_s > 0 and state.status == FAILED and state.failed_since is not None
            and now - state.failed_since >= repair_after_s)


def _ready(node: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def repair_allowed(pool_nodes: list[dict], own_name: str, cap: int) -> bool:
    """Whether this node may be taken down for repair: fewer than `cap` other nodes of its pool
    are failed by this check and already NotReady (being repaired)."""
    in_repair = [n for n in pool_nodes if (n.get("metadata") or {}).get("name") != own_name
                 and ((n.get("metadata") or {}).get("labels") or {}).get(LABEL) == FAILED and not _ready(n)]
    return len(in_repair) < cap


# ---------------------------------------------------------------- the node and the API server


def run_check(script: str, env_text: str, host_path: str, host_ld_path: str) -> CheckResult:
    """The shared check, in the host's mount and network namespaces, its expectations on stdin.
    Only what the check needs goes into its environment (no AICLUSTER_DCGM_LEVEL: a DCGM
    diagnostic would take the GPUs from under a running job)."""
    env = {"PATH": f"{host_path}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".lstrip(":"),
           "LC_ALL": "C", "AICLUSTER_NODE_ENV": "/dev/stdin"}
    if host_ld_path:
        env["LD_LIBRARY_PATH"] = host_ld_path
    argv = ["nsenter", "--target", "1", "--mount", "--net", "--", "/bin/bash", "-c", script, SCRIPT_NAME]
    try:
        done = subprocess.run(argv, input=env_text, capture_output=True, text=True, env=env, timeout=CHECK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return parse_check(None, "", "")
    except OSError as exc:
        return CheckResult("unknown", note=f"cannot start nsenter: {exc}")
    return parse_check(done.returncode, done.stdout, done.stderr)


def stop_kubelet() -> bool:
    done = subprocess.run(["nsenter", "--target", "1", "--mount", "--", "systemctl", "stop", "kubelet"],
                          capture_output=True, text=True, timeout=KUBELET_STOP_TIMEOUT_S, check=False)
    return done.returncode == 0


class Api:
    """The few Kubernetes API calls the agent makes, with its service account's token (re-read each
    call: bound tokens rotate) and the cluster's CA."""

    def __init__(self) -> None:
        host = os.environ["KUBERNETES_SERVICE_HOST"]
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        self.base = f"https://{'[' + host + ']' if ':' in host else host}:{port}"     # IPv6 in brackets
        self.ssl = ssl.create_default_context(cafile=f"{SA_DIR}/ca.crt")

    def _call(self, method: str, path: str, body: dict | None = None, content_type: str = "application/json") -> dict:
        with open(f"{SA_DIR}/token", encoding="utf-8") as f:
            token = f.read().strip()
        req = urllib.request.Request(self.base + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": content_type,
                                              "Accept": "application/json"})
        with urllib.request.urlopen(req, context=self.ssl, timeout=API_TIMEOUT_S) as resp:
            return json.load(resp)

    def node(self, name: str) -> dict:
        return self._call("GET", f"/api/v1/nodes/{urllib.parse.quote(name)}")

    def patch_node(self, name: str, patch: dict) -> None:
        self._call("PATCH", f"/api/v1/nodes/{urllib.parse.quote(name)}", patch, "application/merge-patch+json")

    def patch_status(self, name: str, patch: dict) -> None:
        self._call("PATCH", f"/api/v1/nodes/{urllib.parse.quote(name)}/status", patch,
                   "application/strategic-merge-patch+json")

    def nodes(self, selector: str) -> list[dict]:
        return self._call("GET", "/api/v1/nodes?labelSelector=" + urllib.parse.quote(selector)).get("items", [])


# ---------------------------------------------------------------- liveness


def beat(path: str, now: float) -> None:
    """Record one time round the loop (written whole: the probe never reads half a number)."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(f"{now:.0f}\n")
    os.replace(tmp, path)


def alive(path: str, now: float, max_age_s: float) -> tuple[bool, str]:
    """Whether the loop went round within max_age_s, and why not."""
    try:
        with open(path, encoding="utf-8") as f:
            last = float(f.read().strip())
    except (OSError, ValueError) as exc:
        return False, f"no heartbeat at {path}: {exc}"
    age = now - last
    if age > max_age_s:
        return False, f"the loop last went round {age:.0f}s ago (more than {max_age_s:.0f}s): stuck"
    return True, f"the loop went round {age:.0f}s ago"


def probe(argv: list[str]) -> int:
    """`--alive PATH MAX_AGE_S`: the liveness probe's command (exit 0: alive)."""
    if len(argv) != 2:
        print("usage: aicluster_node_health.py --alive HEARTBEAT_FILE MAX_AGE_S", file=sys.stderr)
        return 2
    ok, why = alive(argv[0], time.time(), float(argv[1]))
    print(why, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


def log(message: str) -> None:
    print(f"{datetime.now(timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')} {message}", flush=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--alive"]:
        return probe(argv[1:])
    node_name = os.environ["NODE_NAME"]
    interval = int(os.environ.get("AICLUSTER_HEALTH_INTERVAL", "60"))
    repair_after = int(os.environ.get("AICLUSTER_REPAIR_AFTER", "0"))
    repair_cap = int(os.environ.get("AICLUSTER_REPAIR_CAP", "1"))
    pool_selector = os.environ["AICLUSTER_POOL_SELECTOR"]
    with open(os.environ["AICLUSTER_HEALTH_SCRIPT"], encoding="utf-8") as f:
        script = f.read()
    with open(os.environ["AICLUSTER_HEALTH_ENV"], encoding="utf-8") as f:
        env_text = f.read()
    host_path = os.environ.get("AICLUSTER_HOST_PATH", "")
    host_ld_path = os.environ.get("AICLUSTER_HOST_LD_LIBRARY_PATH", "")
    heartbeat = os.environ.get(HEARTBEAT_ENV, "")
    api = Api()
    state: HealthState | None = None
    while True:
        try:
            if heartbeat:
                beat(heartbeat, time.time())
            node = api.node(node_name)
            now = time.time()
            state = state or initial_state(node, now)
            result = run_check(script, env_text, host_path, host_ld_path)
            new = next_state(state, result, now)
            if new.status != state.status or result.outcome != "pass":
                log(f"{node_name}: {result.outcome} -> {new.status}: {new.message}")
            # Kept before the API calls: a failed patch is retried from this state on the next run.
            state = new
            patch = node_patch(node, state)
            if patch:
                api.patch_node(node_name, patch)
            api.patch_status(node_name, status_patch(node, state, now))
            if repair_due(state, now, repair_after):
                if repair_allowed(api.nodes(pool_selector), node_name, repair_cap):
                    log(f"{node_name}: failed for {int(now - state.failed_since)}s: stopping the kubelet "
                        "so that node auto repair replaces the node")
                    stop_kubelet()
                else:
                    log(f"{node_name}: repair held: {repair_cap} node(s) of the pool are already being repaired")
        except (urllib.error.URLError, OSError, ValueError, KeyError) as exc:
            # A 409 (the node changed under the patch) lands here too; the next run starts afresh.
            log(f"{node_name}: {type(exc).__name__}: {exc}")
        time.sleep(interval)


if __name__ == "__main__":
    sys.exit(main())
