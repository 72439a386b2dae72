"""aicluster-imex-config (components/aicluster/node/bin), slurm.conf's IMEX prolog on NVL72 clusters:
it writes the addresses of this node's whole NVLink domain (its Slurm block) into nodes_config.cfg
and restarts nvidia-imex only when they changed; it never writes a partial list; a node in no
domain exits 0 at once; a domain node without IMEX or outside every block fails (slurmd drains it).
Run for real with fake scontrol, systemctl and logger on PATH."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "components" / "aicluster" / "node" / "bin" / "aicluster-imex-config"
DOMAIN = [f"gb200b-{i}" for i in range(1, 19)]
TOPOLOGY = ("BlockName=gb200a BlockIndex=0 Nodes=gb200a-[1-18] BlockSize=18\n"
            "BlockName=gb200b BlockIndex=1 Nodes=gb200b-[1-18] BlockSize=18\n"
            "AggregatedBlock=gb200a,gb200b BlockIndex=2 Nodes=gb200a-[1-18],gb200b-[1-18] BlockSize=36\n")

FAKE_SCONTROL = r'''#!{python}
import json, os, re, sys
state = json.load(open(os.environ["FAKE_STATE"]))
args = sys.argv[1:]
def expand(hl):
    out = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?", hl):
        m = re.fullmatch(r"(.*)\[(\d+)-(\d+)\]", part)
        out += [f"{{m.group(1)}}{{i}}" for i in range(int(m.group(2)), int(m.group(3)) + 1)] if m else [part]
    return out
if args == ["show", "topology"]:
    print(state["topology"], end="")
elif args[:2] == ["show", "hostnames"]:
    print("\n".join(expand(args[2])))
elif args[:3] == ["-o", "show", "node"]:
    for name in expand(args[3]):
        print(f"NodeName={{name}} Arch=x86_64 CoresPerSocket=36 NodeAddr={{state['addrs'].get(name, name)}} NodeHostName={{name}} State=IDLE")
else:
    sys.exit(f"fake scontrol: unexpected {{args}}")
'''
FAKE_SYSTEMCTL = r'''#!{python}
import json, os, sys
path = os.environ["FAKE_STATE"]
state = json.load(open(path))
args = sys.argv[1:]
state["calls"].append(" ".join(args))
if args[0] == "cat":
    code = 0 if state["unit"] else 1
elif args[0] == "is-active":
    print(state["active"]); code = 0 if state["active"] == "active" else 3
elif args[0] == "restart":
    state["active"] = "active"; state["restarts"] += 1; code = 0
else:
    code = 2
json.dump(state, open(path, "w"))
sys.exit(code)
'''


class Node:
    def __init__(self, root: Path):
        self.root = root
        self.bin = root / "bin"
        self.bin.mkdir()
        for name, text in (("scontrol", FAKE_SCONTROL), ("systemctl", FAKE_SYSTEMCTL)):
            (self.bin / name).write_text(text.format(python=sys.executable))
            (self.bin / name).chmod(0o755)
        (self.bin / "logger").write_text("#!/bin/sh\nexit 0\n")
        (self.bin / "logger").chmod(0o755)
        self.env_file = root / "node.env"
        self.env_file.write_text("AICLUSTER_GPUS=4\nAICLUSTER_NVLINK_DOMAIN_NODES=18\n")
        self.config = root / "imex" / "nodes_config.cfg"
        self.state_file = root / "state.json"
        self.save({"topology": TOPOLOGY, "addrs": {n: f"10.1.0.{i}" for i, n in enumerate(DOMAIN, 11)},
                   "unit": True, "active": "inactive", "restarts": 0, "calls": []})

    def state(self) -> dict:
        return json.loads(self.state_file.read_text())

    def save(self, state: dict) -> None:
        self.state_file.write_text(json.dumps(state))

    def run(self, node: str = "gb200b-7") -> subprocess.CompletedProcess:
        env = {"PATH": f"{self.bin}:/usr/bin:/bin", "FAKE_STATE": str(self.state_file), "SLURMD_NODENAME": node,
               "AICLUSTER_NODE_ENV": str(self.env_file), "AICLUSTER_IMEX_NODES_CONFIG": str(self.config)}
        return subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30)


@pytest.fixture
def node(tmp_path):
    return Node(tmp_path)


def test_passes_shellcheck():
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck is required (.ci/install-system-deps installs it)"
    done = subprocess.run([shellcheck, str(SCRIPT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout
    assert os.access(SCRIPT, os.X_OK)


def test_writes_the_whole_domain_and_starts_imex(node):
    done = node.run()
    assert done.returncode == 0, done.stderr
    assert node.config.read_text().splitlines() == [f"10.1.0.{i}" for i in range(11, 29)]
    assert node.state()["restarts"] == 1


def test_an_unchanged_domain_and_a_running_daemon_are_left_alone(node):
    assert node.run().returncode == 0
    again = node.run("gb200b-12")
    assert again.returncode == 0, again.stderr
    assert node.state()["restarts"] == 1


def test_a_replaced_node_s_new_address_restarts_imex(node):
    assert node.run().returncode == 0
    state = node.state()
    state["addrs"]["gb200b-3"] = "10.1.9.9"
    node.save(state)
    assert node.run().returncode == 0
    assert node.config.read_text().splitlines()[2] == "10.1.9.9"
    assert node.state()["restarts"] == 2


def test_a_stopped_daemon_is_started_with_the_same_list(node):
    assert node.run().returncode == 0
    state = node.state()
    state["active"] = "failed"
    node.save(state)
    assert node.run().returncode == 0
    assert node.state()["restarts"] == 2


def test_never_a_partial_list(node):
    """A node of the domain without an address yet (NodeAddr is still its name): every node must hold
    the same list, so nothing is written and the job still starts."""
    state = node.state()
    del state["addrs"]["gb200b-18"]
    node.save(state)
    done = node.run()
    assert done.returncode == 0
    assert "gb200b-18" in done.stderr and not node.config.exists()
    assert node.state()["restarts"] == 0


def test_a_node_in_no_nvlink_domain_exits_at_once(node):
    node.env_file.write_text("AICLUSTER_GPUS=8\n")
    done = node.run("p5-1")
    assert done.returncode == 0 and done.stderr == ""
    assert node.state()["calls"] == [] and not node.config.exists()


def test_a_domain_node_without_imex_fails(node):
    state = node.state()
    state["unit"] = False
    node.save(state)
    done = node.run()
    assert done.returncode == 1 and "needs NVIDIA IMEX" in done.stderr


def test_a_domain_node_in_no_block_fails(node):
    done = node.run("gb200z-1")
    assert done.returncode == 1 and "in no Slurm block" in done.stderr


def test_the_block_must_be_the_domain_node_env_names(node):
    node.env_file.write_text("AICLUSTER_NVLINK_DOMAIN_NODES=9\n")
    done = node.run()
    assert done.returncode == 1 and re.search(r"has 18 nodes.*has 9", done.stderr)
