"""Cloud TPU slices on Slurm (GCP): each slice a TPU VM Pulumi creates, its hosts one partition with
one topology switch per slice, always on (not CLOUD nodes), named into the cluster's node-name
zone. Under mocks, with a real slurmctld reading the rendered configuration, and the node-name
program against a fake metadata server."""
from __future__ import annotations

import base64
import copy
import dataclasses
import json
import os
import re
import shutil
import subprocess

import pytest

from aicluster.catalog import load_catalog
from aicluster.design.cluster import design_cluster
from aicluster.errors import SpecError
from aicluster.render.node_programs import NODE_PROGRAMS, artifact, entry_point, program_text
from aicluster.commands.planner import rendered_files
from aicluster.spec.cluster import parse_spec
from tests.support import GCP_MIN, GCP_PROJECT, ROOT
from tests.support.fake_gcp import FakeGcp
from tests.support.slurmctld import Controller, fields

V2VM = "gcp:tpu/v2Vm:V2Vm"
RECORD = "gcp:dns/recordSet:RecordSet"
ZONE = "gcp:dns/managedZone:ManagedZone"
SCRIPTS = ROOT / "components" / "aicluster" / "node" / "bin"


def tpu_spec(**extra) -> dict:
    spec = copy.deepcopy(GCP_MIN)
    spec["pools"] = [{"name": "v5p", "tpu": {"type": "v5p", "topology": "2x2x2"}, "max_nodes": 4},
                     {"name": "gpu", "instance_type": "a3-megagpu-8g", "max_nodes": 2}]
    spec["storage"] = [{"name": "scratch", "type": "lustre", "mount": "/lustre", "capacity_gib": 18000}]
    spec.update(extra)
    return spec


@pytest.fixture(scope="module")
def plan():
    from tests.support import run_spec

    return run_spec(tpu_spec())


# --- design --------------------------------------------------------------------------------------


def test_tpu_nodeset_is_always_on_with_one_switch_per_slice():
    d = design_cluster(parse_spec(tpu_spec()))
    (ns,) = [n for n in d.slurm.nodesets if n.pool == "v5p"]
    assert (ns.hostlist, ns.static_hostlist, ns.dynamic_hostlist, ns.cloud) == ("v5p-[1-4]", "v5p-[1-4]", None, False)
    assert ns.switches == (("v5p-slice-0", "v5p-[1-2]"), ("v5p-slice-1", "v5p-[3-4]"))
    assert ns.gres is None and ns.exclusive and "tpu-v5p" in ns.features and "2x2x2" in ns.features
    assert ns.cpus == 208 and ns.real_memory_mib < 448e9 / 2**20       # below the host's 448 GB
    assert "v5p-[1-4]" in d.slurm.suspend_exc_nodes


@pytest.mark.parametrize("pool, path, allowed", [
    ({"tpu": {"type": "v6e", "topology": "4x8"}, "max_nodes": 8}, "pools[0].tpu.type", "vCPUs and memory"),
    ({"tpu": {"type": "v5p", "topology": "2x2x2"}, "max_nodes": 4, "min_nodes": 2}, "pools[0].min_nodes",
     "always on"),
])
def test_slurm_needs_known_hosts_and_whole_pools(pool, path, allowed):
    spec = copy.deepcopy(GCP_MIN)
    spec["pools"] = [{"name": "tpu", **pool}]
    with pytest.raises(SpecError) as info:
        design_cluster(parse_spec(spec))
    assert any(p.path == path and allowed in p.allowed for p in info.value.problems), info.value.problems


# --- components ----------------------------------------------------------------------------------


def test_each_slice_is_a_tpu_vm_of_the_topology(plan):
    vms = sorted(plan.of_type(V2VM), key=lambda r: r.name)
    assert [v.inputs["name"] for v in vms] == ["test-v5p-0", "test-v5p-1"]
    gen = load_catalog().tpus["v5p"]
    for k, vm in enumerate(vms):
        i = vm.inputs
        assert i["acceleratorConfig"] == {"type": "V5P", "topology": "2x2x2"}
        assert i["runtimeVersion"] == gen.runtime_version and i["zone"] == GCP_MIN["zone"]
        assert i["networkConfig"]["enableExternalIps"] is False
        assert i["metadata"]["aicluster-first-node"] == str(2 * k + 1)
        assert i["tags"] == ["test-node"] and i["labels"]["aicluster-pool"] == "v5p"
        assert len(vm.outputs["networkEndpoints"]) == 2          # 2x2x2: two hosts per slice
    assert not [t for t in plan.of_type("gcp:compute/instanceTemplate:InstanceTemplate")
                if t.inputs["labels"].get("aicluster-pool") == "v5p"]


def test_every_host_is_named_in_the_node_zone(plan):
    (zone,) = plan.of_type(ZONE)
    vms = {v.inputs["metadata"]["aicluster-first-node"]: v for v in plan.of_type(V2VM)}
    records = {r.inputs["name"]: r.inputs for r in plan.of_type(RECORD)}
    assert sorted(records) == [f"v5p-{n}.test.aicluster.internal." for n in range(1, 5)]
    for name, record in records.items():
        node = int(name.split(".")[0].split("-")[1])
        first = str((node - 1) // 2 * 2 + 1)
        endpoint = vms[first].outputs["networkEndpoints"][(node - 1) % 2]
        assert record == {"managedZone": zone.outputs["name"], "name": name, "type": "A", "ttl": 60,
                          "rrdatas": [endpoint["ipAddress"]]}


def test_published_slurm_files_keep_tpu_nodes_out_of_the_power_programs(plan):
    files = rendered_files(plan)
    (tpu_line,) = [ln for ln in files["slurm/slurm.conf"].splitlines() if ln.startswith("NodeName=v5p-")]
    assert "State=CLOUD" not in tpu_line and "Gres=" not in tpu_line
    vms = sorted(plan.of_type(V2VM), key=lambda r: int(r.inputs["metadata"]["aicluster-first-node"]))
    addrs = [e["ipAddress"] for vm in vms for e in vm.outputs["networkEndpoints"]]
    assert tpu_line.startswith(f"NodeName=v5p-[1-4] NodeAddr={','.join(addrs)} ")
    gpu_lines = [ln for ln in files["slurm/slurm.conf"].splitlines() if ln.startswith("NodeName=gpu-")]
    assert gpu_lines and all(ln.endswith("State=CLOUD") for ln in gpu_lines)
    assert "SuspendExcNodes=v5p-[1-4]" in files["slurm/slurm.conf"]
    assert "SwitchName=v5p-slice-0 Nodes=v5p-[1-2]" in files["slurm/topology.conf"]
    assert "SwitchName=v5p-slice-1 Nodes=v5p-[3-4]" in files["slurm/topology.conf"]
    cluster = json.loads(files["aicluster/cluster.json"])
    assert list(cluster["pools"]) == ["gpu"] and cluster["static_nodes"] == []


def test_startup_script_installs_the_node_programs_unchanged(plan):
    (script,) = [c for n, c in rendered_files(plan).items() if n == "startup-scripts/test-v5p-0.sh"]
    embedded = {path: body for path, _, body in re.findall(r"cat > (\S+) <<'(\w+)'\n(.*?)\n\2\n", script, re.S)}
    # aicluster-secret: the entry point, and the archive of aicluster.node it runs, base64 in the
    # script and decoded back to the built bytes (`base64 -d`, as the VM's startup does).
    # The secret helper and aicluster-node-install (its Slurm installer), as every node (render/node_programs.py).
    archive = artifact(NODE_PROGRAMS)
    assert embedded["/opt/aicluster/bin/aicluster-node-install"].rstrip("\n") == \
        entry_point("aicluster-node-install", archive=archive).rstrip("\n")
    assert embedded["/opt/aicluster/bin/aicluster-secret"].rstrip("\n") == \
        entry_point("aicluster-secret", archive=archive).rstrip("\n")
    decoded = dict(re.findall(r"base64 -d > (\S+) <<'(?:\w+)'\n(.*?)\n\w+\n", script, re.S))
    assert base64.b64decode(decoded[f"/opt/aicluster/lib/{archive.name}"]) == archive.data
    for path, source in (("/opt/aicluster/bin/aicluster-gpu-healthcheck", "aicluster-gpu-healthcheck"),
                         ("/opt/aicluster/bin/aicluster-tpu-node-name", "aicluster-tpu-node-name"),
                         ("/opt/aicluster/bin/aicluster-gcp-node-bootstrap", "aicluster-gcp-node-bootstrap")):
        assert embedded[path].rstrip("\n") == program_text(source).rstrip("\n"), path
    env = dict(line.split("=", 1) for line in embedded["/etc/aicluster/node.env"].splitlines())
    addr = [i for i in plan.of_type("gcp:compute/instance:Instance")][0].outputs["networkInterfaces"][0]["networkIp"]
    assert env["AICLUSTER_CONTROLLER"] == f"{addr}:6817" and env["AICLUSTER_GPUS"] == "0"
    assert env["AICLUSTER_MUNGE_SECRET"] == f"projects/{GCP_PROJECT}/secrets/aicluster-test-munge-key"
    assert "Domains=test.aicluster.internal" in embedded["/etc/systemd/resolved.conf.d/aicluster.conf"]
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck is required (apt-get install shellcheck; .ci/run installs it)"
    for text in (script, program_text("aicluster-tpu-node-name")):
        run = subprocess.run([shellcheck, "--severity=style", "-"], input=text, capture_output=True, text=True)
        assert run.returncode == 0, run.stdout


# --- the node name, against a fake metadata server -------------------------------------------------


@pytest.fixture
def fake():
    server = FakeGcp().start()
    yield server
    server.stop()


@pytest.mark.parametrize("first, worker, name", [("1", "0", "v5p-1"), ("17", "3", "v5p-20")])
def test_node_name_is_the_slices_first_node_plus_the_worker(tmp_path, fake, first, worker, name):
    env_file = tmp_path / "node.env"
    env_file.write_text("AICLUSTER_POOL=v5p\n")
    fake.metadata["instance/attributes/aicluster-first-node"] = first
    fake.metadata["instance/attributes/agent-worker-number"] = worker
    run = subprocess.run(["bash", str(SCRIPTS / "aicluster-tpu-node-name")], capture_output=True, text=True,
                         env={**os.environ, **fake.env(), "AICLUSTER_NODE_ENV": str(env_file)}, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == name


def test_node_name_fails_without_a_worker_number(tmp_path, fake):
    env_file = tmp_path / "node.env"
    env_file.write_text("AICLUSTER_POOL=v5p\n")
    fake.metadata["instance/attributes/aicluster-first-node"] = "1"
    fake.metadata["instance/attributes/agent-worker-number"] = "x"
    run = subprocess.run(["bash", str(SCRIPTS / "aicluster-tpu-node-name")], capture_output=True, text=True,
                         env={**os.environ, **fake.env(), "AICLUSTER_NODE_ENV": str(env_file)}, timeout=60)
    assert run.returncode != 0 and "no node number" in run.stderr


# --- a real slurmctld --------------------------------------------------------------------------------


class TpuController(Controller):
    """The TPU hosts at loopback addresses, as the published slurm.conf has their VM addresses."""

    def write_configs(self, design):
        names = [n for p in design.pools if p.tpu for n in p.node_names()]
        self.runtime = dataclasses.replace(self.runtime, node_addrs={n: f"127.0.0.{i + 2}" for i, n in enumerate(names)})
        super().write_configs(design)


@pytest.fixture(scope="module")
def ctl(tmp_path_factory):
    design = design_cluster(parse_spec(tpu_spec()))
    controller = TpuController("spec-tpu-slurm", design, tmp_path_factory.mktemp("slurmctld-tpu"))
    try:
        controller.start()
        yield controller
    finally:
        controller.stop()


def test_real_slurmctld_takes_tpu_hosts_as_one_partition_with_a_switch_per_slice(ctl):
    part = fields(ctl.run("scontrol", "-o", "show", "partition", "v5p"))
    assert (part["TotalNodes"], part["OverSubscribe"], part["Default"]) == ("4", "EXCLUSIVE", "YES")
    node = fields(ctl.run("scontrol", "-o", "show", "node", "v5p-3"))
    states = node["State"].split("+")
    assert "CLOUD" not in states and "POWERED_DOWN" not in states, node["State"]
    assert node["CPUTot"] == "208" and node["Gres"] == "(null)"
    switches = {s["SwitchName"]: s for s in (fields(ln) for ln in ctl.run("scontrol", "show", "topology").splitlines()
                                             if ln.strip())}
    assert ctl.hostnames(switches["v5p-slice-0"]["Nodes"]) == ["v5p-1", "v5p-2"]
    assert ctl.hostnames(switches["v5p-slice-1"]["Nodes"]) == ["v5p-3", "v5p-4"]
    assert sorted(switches["top"]["Switches"].split(",")) == ["gpu", "v5p-slice-0", "v5p-slice-1"]
    gpu = fields(ctl.run("scontrol", "-o", "show", "node", "gpu-1"))
    assert "CLOUD" in gpu["State"].split("+")
    assert "power_save module disabled" not in (ctl.root / "log" / "slurmctld.log").read_text()


def test_policy_pack_passes_a_slurm_cluster_with_tpu_slices(plan):
    from aicluster.commands.check import verdicts_for_plan

    verdicts = {v.rule_id: v for v in verdicts_for_plan(plan)}
    assert [r for r, v in verdicts.items() if v.status in ("fail", "warn")] == []
    for rule in ("AIC-NET-004", "AIC-SEC-002", "AIC-SEC-005", "AIC-CST-001", "AIC-CMP-001"):
        assert verdicts[rule].status == "pass", (rule, verdicts[rule].not_applicable)


def test_tpu_hosts_build_the_clusters_one_slurm(plan):
    """The pin the bootstrap hands to aicluster-node-install --slurm (catalog/slurm_release.yaml)."""
    from aicluster.catalog.slurm_release import slurm_release

    (script,) = [c for n, c in rendered_files(plan).items() if n == "startup-scripts/test-v5p-0.sh"]
    env = script.split("<<'AICLUSTER_NODE_ENV'\n", 1)[1].split("\nAICLUSTER_NODE_ENV\n", 1)[0].splitlines()
    r = slurm_release()
    assert {f"AICLUSTER_SLURM_VERSION={r.version}", f"AICLUSTER_SLURM_SHA256={r.sha256}",
            f"AICLUSTER_SLURM_SIZE={r.size}", f"AICLUSTER_SLURM_URLS={' '.join(r.urls)}"} <= set(env)
