"""A cloud and a slurmctld to run the reconcile loop (aicluster/node/reconcile.py)
against, plus loaders for the head's power modules as the programs import them (by their names).

- `FileCloud`: a `Cloud` (aicluster.node.slurm's contract) whose instances live in one JSON file,
  under a lock, so the test, the reconcile program and the power programs slurmctld runs all see
  the same fleet. `refuse_deletes` makes every deletion fail, as a throttled or refused
  TerminateInstances does.
- `FakeSlurm`: the loop's `Slurm` in memory (nodes, jobs, the updates it was sent, applied the way
  slurmctld 22.05 applies them), for the unit tests; tests/slurm/test_reconcile.py uses a real one.
- `install_power_programs`: what slurmctld runs as ResumeProgram, SuspendProgram and
  ResumeFailProgram, and the test as `aicluster-reconcile`: the real core (aicluster.node.slurm.main)
  with a FileCloud (this module run as a program).
"""
from __future__ import annotations

import fcntl
import json
import os
import shlex
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from aicluster.node import reconcile
from aicluster.node import slurm as core

ROOT = Path(__file__).resolve().parents[2]


class FileCloud(core.Cloud):
    """Instances in a JSON file: {"next": n, "refuse_deletes": bool, "instances": {id: {...}}}.
    `cluster`: the cluster tag its launches put on, and the one `find` checks (as Ec2.find does);
    `list_cluster` reports every instance in the file with the cluster it carries, as a listing
    whose filter failed would."""

    launching, deleting = "launching", "terminating"

    def __init__(self, path: str | os.PathLike, cluster: str | None = None, config: dict | None = None):
        self.path, self.cluster = Path(path), cluster
        self.config = config or {}          # cluster.json: a launch carries its pool's version

    @contextmanager
    def _state(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(f"{self.path}.lock", "a", encoding="utf-8") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = json.loads(self.path.read_text()) if self.path.exists() else {}
            data.setdefault("next", 1)
            data.setdefault("instances", {})
            yield data
            self.path.write_text(json.dumps(data, indent=1, sort_keys=True))

    # --- what the test does to the fleet ---

    def add(self, node: str | None, *, launched_at: float | None = None, events=(), bootstrap_error=None,
            pool: str | None = None, resume_id: str | None = None, cluster: str | None = None,
            role: str | None = None, version: str | None = None) -> str:
        """A running instance; `cluster` defaults to the FileCloud's, the pool to the node's."""
        with self._state() as data:
            iid = f"i-{data['next']:04d}"
            data["next"] += 1
            data["instances"][iid] = {"node": node, "pool": pool or (core.pool_of(node) if node else None),
                                      "state": "running", "launched_at": time.time() if launched_at is None
                                      else launched_at, "events": list(events), "bootstrap_error": bootstrap_error,
                                      "resume_id": resume_id, "cluster": cluster or self.cluster, "role": role,
                                      "address": address_of(iid), "version": version}
        return iid

    def set(self, iid: str, **fields) -> None:
        with self._state() as data:
            data["instances"][iid].update(fields)

    def kill(self, iid: str) -> None:
        """The instance dies (hardware, a spot reclaim): gone without anyone asking."""
        with self._state() as data:
            data["instances"].pop(iid, None)

    def refuse_deletes(self, refuse: bool) -> None:
        with self._state() as data:
            data["refuse_deletes"] = refuse

    def live(self) -> dict[str, dict]:
        with self._state() as data:
            return dict(data["instances"])

    def deleted(self) -> list[str]:
        with self._state() as data:
            return list(data.get("deleted", []))

    # --- the Cloud contract ---

    def launch(self, pool: str, nodes: list[str], request_id: str = "") -> dict[str, str]:
        version = core.pool_version(self.config, pool)
        return {node: self.add(node, pool=pool, resume_id=request_id, version=version) for node in nodes}

    def locate(self, launched: dict[str, str]):
        """Each instance's address (address_of), its id as the host name."""
        return {node: (address_of(iid), iid) for node, iid in launched.items()}, {}

    def delete(self, instances: list[str]) -> bool:
        return not self.delete_refused(instances)

    def delete_refused(self, instances: list[str]) -> list[str]:
        with self._state() as data:
            if data.get("refuse_deletes"):
                return list(instances)
            for iid in instances:
                if data["instances"].pop(iid, None) is not None:
                    data.setdefault("deleted", []).append(iid)
        return []

    def find(self, nodes: list[str]) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for iid, item in self.live().items():
            if item["node"] in nodes and item.get("cluster") == self.cluster and item.get("role") in (None, "compute"):
                found.setdefault(item["node"], []).append(iid)
        return found

    def list_cluster(self) -> list:
        return [core.Instance(id=iid, node=item["node"], pool=item["pool"], state=item["state"],
                              launched_at=item["launched_at"], resume_id=item.get("resume_id"),
                              events=tuple(item.get("events") or ()), bootstrap_error=item.get("bootstrap_error"),
                              cluster=item.get("cluster"), role=item.get("role"),
                              address=item.get("address") or address_of(iid), version=item.get("version"))
                for iid, item in sorted(self.live().items())]


def address_of(iid: str) -> str:
    """An address of TEST-NET-1 (RFC 5737: reserved, never routed) per instance: no slurmd answers
    there, so a node is up only once the test starts a slurmd as it (at 127.0.0.1). Loopback would
    let the one slurmd answer for every node."""
    return f"192.0.2.{int(iid[2:]) % 250 + 1}"


# --- a slurmctld in memory, for unit tests ---------------------------------------------------


class FakeSlurm:
    """The reconcile loop's Slurm: nodes as {name: "STATE+FLAGS"} and reasons, jobs as {node}, and
    the updates, applied as slurmctld 22.05 applies them (tests/slurm/test_reconcile.py checks the
    real one)."""

    def __init__(self, nodes: dict[str, str], reasons: dict[str, str] | None = None, busy=(),
                 addrs: dict[str, str] | None = None):
        self.states = {name: set(state.split("+")) for name, state in nodes.items()}
        self.reasons = dict(reasons or {})
        self.jobs = set(busy)
        self.addrs = dict(addrs or {})      # NodeAddr; a node's name until set
        self.updates: list[tuple[str, ...]] = []

    def _node(self, name: str):
        return reconcile.Node(name, frozenset(self.states[name]), self.reasons.get(name, ""),
                              self.addrs.get(name, name))

    def nodes(self):
        return {name: self._node(name) for name in self.states}

    def node(self, name: str):
        return self._node(name) if name in self.states else None

    def busy(self) -> set[str]:
        return set(self.jobs)

    def update(self, node: str, *args: str) -> bool:
        self.updates.append((node, *args))
        state = self.states[node]
        words = dict(a.split("=", 1) for a in args)
        change = words.get("state")
        if "reason" in words:
            self.reasons[node] = words["reason"].strip('"')
        if change == "down":          # its jobs requeue (JobRequeue=1)
            state -= {"IDLE", "ALLOCATED", "MIXED"}
            state.add("DOWN")
            self.jobs.discard(node)
        elif change == "drain":
            state.add("DRAIN")
        elif change == "power_down_force":
            state -= {"DOWN", "DRAIN", "POWERING_UP", "ALLOCATED", "MIXED"}
            state |= {"IDLE", "POWERING_DOWN"}
        elif change == "resume":
            state -= {"DOWN", "DRAIN"}
            state.add("IDLE")
            self.reasons.pop(node, None)
        elif change == "power_up":
            state -= {"POWERED_DOWN"}
            state.add("POWERING_UP")
        return True

    def actions(self) -> list[tuple[str, str]]:
        """(node, state=...) of every update, in order."""
        return [(u[0], next(a for a in u[1:] if a.startswith("state="))) for u in self.updates]


# --- the programs slurmctld runs -------------------------------------------------------------


ACTIONS = {"aicluster-resume": "resume", "aicluster-suspend": "suspend", "aicluster-resume-fail": "resume-fail",
           "aicluster-reconcile": "reconcile"}


def install_power_programs(bin_dir: Path, env: dict[str, str]) -> dict[str, Path]:
    """The head's four links, each a script that runs this module as the power program (the real
    core, aicluster.node.slurm.main, on the FileCloud at env["AICLUSTER_FAKE_CLOUD"]) with `env`."""
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in {**env, "PYTHONPATH": str(ROOT)}.items())
    programs = {}
    for name, action in ACTIONS.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\nexport {exports}\n"
                        f'exec {sys.executable} -m tests.support.reconcile_fakes {action} "$@"\n')
        path.chmod(0o755)         # slurmctld refuses programs that group or others may write
        programs[name] = path
    return programs


if __name__ == "__main__":
    sys.exit(core.main(["fake-power", *sys.argv[1:]], "fake-power", ("cluster", "pools"),
                       lambda config: (FileCloud(os.environ["AICLUSTER_FAKE_CLOUD"], config["cluster"], config), None),
                       reconcile.main))
