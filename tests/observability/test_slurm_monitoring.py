"""What a Slurm VM runs to be watched (aicluster.render.slurm_monitoring): the configurations, checked by
what will read them, and aicluster-monitoring run for real in a scratch tree with recording stubs.

- The AWS agent's prometheus.yml passes `promtool check config --agent` (Debian's promtool) for
  every role, with and without GPUs, and scrapes exactly the exporters of the one list.
- The CloudWatch agent's configuration validates against the agent's own JSON schema (vendored,
  tests/data/schemas/cloudwatch-agent), and writes only into the cluster's log groups.
- The Ops Agent's configuration keeps to what its config generator accepts (static_configs only, no
  relabelling of cluster/location/namespace, exclude_logs filters with spaced operators and a
  quoted pattern) and names its logs as the cluster's sink routes them.
- Every stream the backends make room for is shipped by some role, on both clouds.
- The program downloads, checks and installs: a tarball whose SHA-256 is not the pin is refused
  and leaves nothing behind; a key whose fingerprint is not AWS's is refused; the AWS agent's
  configuration is filled with the node's values and passes the real promtool before it is used.
"""
from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import subprocess
import tarfile
import time
from pathlib import Path

import jsonschema
import pytest
import yaml

from aicluster.render import slurm_monitoring as mon
from aicluster.catalog.observability import Download, exporters, slurm_node_agents
from aicluster.design.telemetry_backend import SLURM_LOG_STREAMS, log_group_name, log_id
from tests.support import SCHEMAS
from tests.support.prometheus import program

CW_SCHEMA = SCHEMAS / "cloudwatch-agent" / "1.300071.0" / "schema.json"
ROLES_GPU = [(role, gpu) for role in mon.ROLES for gpu in (False, True)]
VALUES = {"cluster": "c1", "pool": "gpu", "node": "c1-gpu-3", "region": "us-east-2",
          "write_url": "https://aps-workspaces.us-east-2.amazonaws.com/workspaces/ws-0123abcd/api/v1/remote_write"}


def filled(text: str, **values: str) -> str:
    for key, token in mon.TOKENS.items():
        text = text.replace(token, values.get(key, VALUES[key]))
    return text


# --- the configurations ---------------------------------------------------------------------------

@pytest.mark.parametrize("role,gpu", ROLES_GPU)
def test_prometheus_agent_config_passes_promtool(tmp_path, role, gpu):
    path = tmp_path / "prometheus-agent.yml"
    path.write_text(filled(mon.prometheus_agent_config(role, gpu)))
    done = subprocess.run([program("promtool"), "check", "config", "--agent", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    config = yaml.safe_load(path.read_text())
    ports = {key: e.port for key, e in exporters().items()}
    targets = {job["job_name"]: job["static_configs"][0]["targets"] for job in config["scrape_configs"]}
    expected = {"node-exporter": [f"127.0.0.1:{ports['node_exporter']}"]}
    if gpu:
        expected["dcgm-exporter"] = [f"127.0.0.1:{ports['dcgm_exporter']}"]
    if role == "head":
        expected["slurm-exporter"] = [f"127.0.0.1:{ports['slurm_exporter']}"]
    assert targets == expected
    for job in config["scrape_configs"]:
        assert job["static_configs"][0]["labels"] == {"cluster": "c1", "pool": "gpu", "node": "c1-gpu-3"}
    (write,) = config["remote_write"]
    assert write["url"] == VALUES["write_url"] and write["sigv4"] == {"region": "us-east-2"}


@pytest.mark.parametrize("role", mon.ROLES)
def test_cloudwatch_agent_config_is_valid_for_the_agent(role):
    config = json.loads(filled(mon.cloudwatch_agent_config(role)))
    jsonschema.validate(config, json.loads(CW_SCHEMA.read_text()))
    groups = {entry["log_group_name"] for entry in config["logs"]["logs_collected"]["files"]["collect_list"]}
    assert groups == {log_group_name("c1", s.stream) for s in mon.log_streams(role)}
    # No retention of its own: the groups' retention is aicluster's, and setting one needs a grant
    # the nodes do not have (logs:PutRetentionPolicy).
    assert "retention_in_days" not in json.dumps(config)


def test_cloudwatch_schema_catches_a_mistake():
    """The vendored schema is strict enough to matter: an unknown key in a file entry is refused."""
    config = json.loads(filled(mon.cloudwatch_agent_config("compute")))
    config["logs"]["logs_collected"]["files"]["collect_list"][0]["log_group"] = "typo"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(config, json.loads(CW_SCHEMA.read_text()))


@pytest.mark.parametrize("role,gpu", ROLES_GPU)
def test_ops_agent_config_keeps_to_what_the_agent_accepts(role, gpu):
    config = yaml.safe_load(filled(mon.ops_agent_config(role, gpu)))
    receiver = config["metrics"]["receivers"]["prometheus"]
    assert receiver["type"] == "prometheus"
    for job in receiver["config"]["scrape_configs"]:
        # static_configs is the only discovery the Ops Agent allows; no relabelling at all here.
        assert set(job) == {"job_name", "static_configs", "scrape_interval", "scrape_timeout"}
        assert int(job["scrape_interval"].rstrip("s")) >= 10          # its minimum
    assert config["metrics"]["service"]["pipelines"]["prometheus"]["receivers"] == ["prometheus"]
    logging = config["logging"]
    streams = {s.stream: s for s in mon.log_streams(role)}
    assert set(logging["receivers"]) == {log_id("c1", s) for s in streams}
    for rid, pipeline in logging["service"]["pipelines"].items():
        assert pipeline["receivers"] == [rid]
        for name in pipeline.get("processors", []):
            processor = logging["processors"][name]
            assert processor["type"] == "exclude_logs"
            (expr,) = processor["match_any"]
            # The agent's filter grammar: spaces around the operator and a quoted pattern.
            field, op, pattern = expr.split(" ", 2)
            assert (field, op) == ("jsonPayload.message", "!~")
            assert pattern.startswith('"') and pattern.endswith('"')


def test_every_stream_the_backends_hold_is_shipped():
    shipped = {s.stream for role in mon.ROLES for s in mon.log_streams(role)}
    assert shipped == set(SLURM_LOG_STREAMS)


def test_kernel_stream_ships_only_xid_lines():
    (kernel,) = [s for s in mon.LOG_STREAMS if s.stream == "kernel"]
    assert kernel.include == "NVRM: Xid" and set(kernel.roles) == set(mon.ROLES)


# --- the program, run ---------------------------------------------------------------------------

STUBS = {
    # Serves a download from downloads/<basename of the URL>; fails like curl -f when absent.
    "curl": r'''#!/bin/bash
out="" url=""
while (($#)); do case $1 in -o) out=$2; shift 2 ;; -*) shift ;; *) url=$1; shift ;; esac; done
echo "curl $url" >> "${0%/*}/calls"
src="${0%/*}/../downloads/${url##*/}"
[[ -f $src ]] || exit 22
cp "$src" "$out"
''',
    # --show-keys prints the fingerprint in downloads/fingerprint; --verify exits with verify.rc.
    "gpg": r'''#!/bin/bash
echo "gpg $*" >> "${0%/*}/calls"
case " $* " in
  *" --show-keys "*) echo "fpr:::::::::$(cat "${0%/*}/../downloads/fingerprint"):" ;;
  *" --verify "*) exit "$(cat "${0%/*}/verify.rc" 2>/dev/null || echo 0)" ;;
esac
''',
    "hostname": '#!/bin/bash\necho "${AICLUSTER_TEST_HOSTNAME:-c1-gpu-3}"\n',
    "dpkg-query": '#!/bin/bash\nexit 1\n',
    # import writes the image; create unpacks it under ENROOT_DATA_PATH (the image's /etc/dcgm-exporter).
    "enroot": '#!/bin/bash\necho "enroot $*" >> "${0%/*}/calls"\n'
              'if [[ $1 == import ]]; then echo squashfs > "$3"; fi\n'
              'if [[ $1 == create ]]; then mkdir -p "$ENROOT_DATA_PATH/$3/etc/dcgm-exporter"; fi\n',
    "go": '#!/bin/bash\necho "go $* GOBIN=$GOBIN GOTOOLCHAIN=$GOTOOLCHAIN" >> "${0%/*}/calls"\n'
          'printf "#!/bin/sh\\n" > "$GOBIN/prometheus-slurm-exporter"; chmod +x "$GOBIN/prometheus-slurm-exporter"\n',
}
RECORDERS = ("systemctl", "systemd-run", "logger", "apt-get", "dpkg", "amazon-cloudwatch-agent-ctl")


def _tarball(top: str, files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


class Node:
    """A scratch tree, the program rendered with the digests of the tree's own release tarballs,
    and stubs in front of PATH. The agent tarball's promtool runs the real promtool."""

    def __init__(self, tmp: Path, *, tamper: str = "", machine: str = "x86_64"):
        self.tmp, self.root, self.stubs, self.downloads = tmp, tmp / "root", tmp / "bin", tmp / "downloads"
        for d in (self.root / "etc/aicluster", self.stubs, self.downloads, self.root / "opt/aicluster/bin"):
            d.mkdir(parents=True)
        for name, text in STUBS.items():
            self._stub(name, text)
        for name in RECORDERS:
            self._stub(name, f'#!/bin/bash\necho "{name} $*" >> "${{0%/*}}/calls"\n')
        # The node's architecture as `uname -m` prints it: which pins the program takes.
        self._stub("uname", f'#!/bin/bash\necho {machine}\n')
        self.calls = self.stubs / "calls"
        self.calls.touch()
        agents = slurm_node_agents()
        real_promtool = program("promtool")
        # The tree serves both architectures' tarballs, each with its own digest, so a node that took
        # the other architecture's pin fails its check.
        keys = ("node_exporter", "prometheus", "node_exporter_arm64", "prometheus_arm64")
        digests = {}
        for key in keys:
            download = getattr(agents, key)
            top = download.url.rsplit("/", 1)[1].removesuffix(".tar.gz")
            files = ({"node_exporter": f"#!/bin/sh\n# {top}\n"} if key.startswith("node_exporter") else
                     {"prometheus": f"#!/bin/sh\n# {top}\n", "promtool": f'#!/bin/sh\nexec {real_promtool} "$@"\n'})
            data = _tarball(top, files)
            (self.downloads / download.url.rsplit("/", 1)[1]).write_bytes(data)
            digests[download.url] = hashlib.sha256(data).hexdigest()
        if tamper:      # the pinned digest of that download is not what the server sends
            digests[getattr(agents, tamper).url] = "0" * 64
        (self.downloads / "fingerprint").write_text(agents.cloudwatch_agent["key_fingerprint"])
        for name in ("amazon-cloudwatch-agent.deb", "amazon-cloudwatch-agent.deb.sig", "amazon-cloudwatch-agent.gpg"):
            (self.downloads / name).write_text(name)
        self.agents = dataclasses.replace(
            agents, **{key: Download(getattr(agents, key).url, digests[getattr(agents, key).url],
                                     getattr(agents, key).version) for key in keys})
        self.program = tmp / "aicluster-monitoring"
        self.program.write_text(mon.monitoring_program(self.agents))
        self.program.chmod(0o755)
        self.env = self.root / "etc/aicluster/node.env"
        self.env.write_text(f"AICLUSTER_CLUSTER=c1\nAICLUSTER_POOL=gpu\nAICLUSTER_GPUS=8\n"
                            f"AICLUSTER_METRICS_WRITE_URL={VALUES['write_url']}\n")

    def _stub(self, name: str, text: str) -> None:
        path = self.stubs / name
        path.write_text(text)
        path.chmod(0o755)

    def run(self, *args: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "PATH": f"{self.stubs}:{os.environ['PATH']}", "AICLUSTER_ROOT": str(self.root),
               "AICLUSTER_BIN": str(self.root / "opt/aicluster/bin")}
        return subprocess.run([str(self.program), *args], capture_output=True, text=True, env=env, timeout=120)

    def calls_of(self, name: str) -> list[str]:
        return [line for line in self.calls.read_text().splitlines() if line.startswith(name + " ")]


def test_program_passes_shellcheck(tmp_path):
    path = tmp_path / "aicluster-monitoring"
    path.write_text(mon.monitoring_program())
    done = subprocess.run([program("shellcheck"), "-s", "bash", str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout


def test_aws_gpu_node_installs_exporters_and_ships(tmp_path):
    node = Node(tmp_path)
    done = node.run("--cloud", "aws", "--role", "compute")
    assert done.returncode == 0, done.stderr
    dest = node.root / "opt/aicluster/monitoring"
    assert (dest / "node_exporter").exists() and (dest / "prometheus").exists()
    assert not list(dest.glob("*.part"))
    units = node.root / "etc/systemd/system"
    node_unit = (units / "aicluster-node-exporter.service").read_text()
    assert "--web.listen-address=127.0.0.1:9100" in node_unit and "DynamicUser=yes" in node_unit
    dcgm_unit = (units / "aicluster-dcgm-exporter.service").read_text()
    assert "Environment=ENROOT_ALLOW_SUPERUSER=y" in dcgm_unit and "-a 127.0.0.1:9400" in dcgm_unit
    assert f"docker://{slurm_node_agents().dcgm_image.replace('/', '#', 1)}" in "\n".join(node.calls_of("enroot"))
    counters = (node.root / "opt/aicluster/monitoring/enroot/data/aicluster-dcgm-exporter/etc/dcgm-exporter"
                / "aicluster-counters.csv").read_text()
    assert "DCGM_FI_DEV_XID_ERRORS, gauge" in counters
    assert "-f /etc/dcgm-exporter/aicluster-counters.csv" in dcgm_unit and "RuntimeDirectory=aicluster-enroot" in dcgm_unit
    # The agent's configuration: the node's values in, checked by the real promtool, then started.
    agent = yaml.safe_load((node.root / "etc/aicluster/monitoring/prometheus-agent.yml").read_text())
    assert agent["remote_write"][0]["url"] == VALUES["write_url"]
    assert agent["remote_write"][0]["sigv4"] == {"region": "us-east-2"}
    assert {j["job_name"] for j in agent["scrape_configs"]} == {"node-exporter", "dcgm-exporter"}
    assert agent["scrape_configs"][0]["static_configs"][0]["labels"] == {"cluster": "c1", "pool": "gpu", "node": "c1-gpu-3"}
    cw = json.loads((node.root / "etc/aicluster/monitoring/cloudwatch-agent.json").read_text())
    assert {e["log_group_name"] for e in cw["logs"]["logs_collected"]["files"]["collect_list"]} == {
        "/aicluster/c1/slurmd", "/aicluster/c1/health-check", "/aicluster/c1/kernel"}
    assert any("fetch-config" in c for c in node.calls_of("amazon-cloudwatch-agent-ctl"))
    started = " ".join(node.calls_of("systemctl"))
    for unit in ("aicluster-node-exporter.service", "aicluster-dcgm-exporter.service", "aicluster-metrics-agent.service"):
        assert f"restart {unit}" in started
    assert not node.calls_of("go")            # the Slurm exporter runs on the head only


def test_a_second_run_downloads_nothing(tmp_path):
    node = Node(tmp_path)
    assert node.run("--cloud", "aws", "--role", "compute").returncode == 0
    node.calls.write_text("")
    done = node.run("--cloud", "aws", "--role", "compute")
    assert done.returncode == 0, done.stderr
    assert not [c for c in node.calls_of("curl") if ".tar.gz" in c]
    assert not [c for c in node.calls_of("enroot") if " import " in c]


def test_an_aarch64_node_installs_the_same_versions_from_the_arm64_pins(tmp_path):
    # Grace-Blackwell nodes (p6e-gb200, a4x) are aarch64: the same releases, their arm64 assets.
    node = Node(tmp_path, machine="aarch64")
    done = node.run("--cloud", "aws", "--role", "compute")
    assert done.returncode == 0, done.stderr
    fetched = node.calls_of("curl")
    agents = slurm_node_agents()
    for download in (agents.node_exporter_arm64, agents.prometheus_arm64):
        assert f"curl {download.url}" in fetched
    assert not [c for c in fetched if "amd64" in c], fetched
    assert "curl https://amazoncloudwatch-agent.s3.amazonaws.com/ubuntu/arm64/latest/amazon-cloudwatch-agent.deb" in fetched
    dest = node.root / "opt/aicluster/monitoring"
    assert "linux-arm64" in (dest / "node_exporter").read_text() and "linux-arm64" in (dest / "prometheus").read_text()
    assert (dest / "node_exporter.version").read_text().strip() == agents.node_exporter.version


def test_an_aarch64_gpu_node_without_enroot_skips_the_dcgm_exporter_and_says_so(tmp_path):
    """enroot has no arm64 pin, so an arm64 Slurm node has no enroot (aicluster-containers): its
    monitoring runs without the DCGM exporter, says so, and scrapes no exporter that is not there.
    Before, the set-up failed at the exporter, after node_exporter, before the agents."""
    node = Node(tmp_path, machine="aarch64")
    (node.stubs / "enroot").unlink()
    done = node.run("--cloud", "aws", "--role", "compute")
    assert done.returncode == 0, done.stderr
    assert "dcgm-exporter skipped: no containers on arm64" in done.stderr
    units = node.root / "etc/systemd/system"
    assert (units / "aicluster-node-exporter.service").exists()
    assert not (units / "aicluster-dcgm-exporter.service").exists()
    agent = yaml.safe_load((node.root / "etc/aicluster/monitoring/prometheus-agent.yml").read_text())
    assert {j["job_name"] for j in agent["scrape_configs"]} == {"node-exporter"}
    assert "restart aicluster-metrics-agent.service" in " ".join(node.calls_of("systemctl"))


def test_an_x86_64_gpu_node_without_enroot_still_fails(tmp_path):
    """amd64 is pinned: a GPU node there without enroot is a broken node, not an expected gap."""
    node = Node(tmp_path)
    (node.stubs / "enroot").unlink()
    done = node.run("--cloud", "aws", "--role", "compute")
    assert done.returncode == 1
    assert "FAILED: dcgm-exporter: enroot is not installed" in done.stderr


def test_an_x86_64_node_keeps_its_pins(tmp_path):
    node = Node(tmp_path)
    assert node.run("--cloud", "aws", "--role", "compute").returncode == 0
    fetched = node.calls_of("curl")
    assert not [c for c in fetched if "arm64" in c], fetched
    assert "curl https://amazoncloudwatch-agent.s3.amazonaws.com/ubuntu/amd64/latest/amazon-cloudwatch-agent.deb" in fetched


def test_the_program_carries_both_architectures_pins():
    text = mon.monitoring_program()
    x86, arm = text.split("  x86_64)\n", 1)[1].split("  aarch64)\n", 1)
    # The x86_64 pins are the ones every x86_64 node has installed (observability.yaml, 2026-11-24).
    assert "NODE_EXPORTER_SHA256=b51d8a76aa2a9156a55d501aca6276fae09e262259a5e4e831d2c2222f084e63" in x86
    assert "PROMETHEUS_SHA256=0e8c4d46101bd025ea8265e377d2caabc57f488fc1be1c367f37db69ea41be6f" in x86
    assert "node_exporter-1.12.1.linux-amd64.tar.gz" in x86 and "arm64" not in x86
    assert "NODE_EXPORTER_SHA256=ad35b605f9954b9f1ffddf5ba054bdc5a98d790b9eae5291e1eeb83f1ecbd0e7" in arm
    assert "PROMETHEUS_SHA256=7cecb17a6f41d59814e1a0581a1f81f79051ad5973d1ecf39e23a9f747d6572a" in arm
    assert "node_exporter-1.12.1.linux-arm64.tar.gz" in arm.split(";;", 1)[0]


def test_another_architecture_downloads_nothing(tmp_path):
    node = Node(tmp_path, machine="riscv64")
    done = node.run("--cloud", "aws", "--role", "compute")
    assert done.returncode == 1 and "this is riscv64" in done.stderr
    assert not node.calls_of("curl")


@pytest.mark.parametrize("entry,why", [
    ({"amd64": "b" * 64}, "sha256.arm64 is None"),
    ({"amd64": "b" * 64, "arm64": ""}, "sha256.arm64 is ''"),
    ({"amd64": "b" * 64, "arm64": "B" * 64}, "not a hex SHA-256"),
    ({"amd64": "b" * 64, "arm64": "b" * 64, "aarch64": "b" * 64}, "names aarch64"),
])
def test_the_catalog_refuses_an_architecture_without_its_sha256(monkeypatch, entry, why):
    from aicluster.catalog import CatalogError
    from aicluster.catalog import observability as obs
    doc = obs._doc()
    broken = {**doc, "slurm_nodes": {**doc["slurm_nodes"], "node_exporter": {**doc["slurm_nodes"]["node_exporter"],
                                                                            "sha256": entry}}}
    monkeypatch.setattr(obs, "_doc", lambda: broken)
    with pytest.raises(CatalogError, match="slurm_nodes.node_exporter.sha256") as error:
        obs.slurm_node_agents.__wrapped__()
    assert why in str(error.value)


@pytest.mark.parametrize("tamper", ["node_exporter", "prometheus"])
def test_a_download_that_is_not_the_pin_is_refused(tmp_path, tamper):
    node = Node(tmp_path, tamper=tamper)
    done = node.run("--cloud", "aws", "--role", "compute")
    assert done.returncode == 1
    assert "does not have the pinned SHA-256" in done.stderr and "refused" in done.stderr
    dest = node.root / "opt/aicluster/monitoring"
    binary = "node_exporter" if tamper == "node_exporter" else "prometheus"
    assert not (dest / binary).exists() and not list(dest.rglob("*.part"))


def test_a_key_that_is_not_aws_is_refused(tmp_path):
    node = Node(tmp_path)
    (node.downloads / "fingerprint").write_text("0" * 40)
    done = node.run("--cloud", "aws", "--role", "compute")
    assert done.returncode == 1 and "fingerprint" in done.stderr
    assert not node.calls_of("dpkg")


def test_a_bad_signature_is_refused(tmp_path):
    node = Node(tmp_path)
    (node.stubs / "verify.rc").write_text("1")
    done = node.run("--cloud", "aws", "--role", "compute")
    assert done.returncode == 1 and "signature does not verify" in done.stderr
    assert not node.calls_of("dpkg")


def test_aws_head_builds_the_slurm_exporter_from_the_checked_module(tmp_path):
    node = Node(tmp_path)
    node.env.write_text(f"AICLUSTER_CLUSTER=c1\nAICLUSTER_POOL=head\nAICLUSTER_GPUS=0\n"
                        f"AICLUSTER_METRICS_WRITE_URL={VALUES['write_url']}\n")
    done = node.run("--cloud", "aws", "--role", "head")
    assert done.returncode == 0, done.stderr
    agents = slurm_node_agents()
    (build,) = node.calls_of("go")
    assert f"install {agents.slurm_exporter_module}@v{agents.slurm_exporter_version}" in build
    assert "GOTOOLCHAIN=auto" in build
    unit = (node.root / "etc/systemd/system/aicluster-slurm-exporter.service").read_text()
    assert "-web.listen-address=127.0.0.1:9092" in unit
    assert not node.calls_of("enroot")        # no GPU on the head
    agent = yaml.safe_load((node.root / "etc/aicluster/monitoring/prometheus-agent.yml").read_text())
    assert {j["job_name"] for j in agent["scrape_configs"]} == {"node-exporter", "slurm-exporter"}


def test_gcp_node_installs_the_pinned_ops_agent_with_its_config(tmp_path, monkeypatch):
    node = Node(tmp_path)
    (node.downloads / "add-google-cloud-ops-agent-repo.sh").write_text(
        '#!/bin/bash\necho "ops-agent-repo $*" >> "$AICLUSTER_TEST_CALLS"\n')
    env = node.env.read_text().replace(f"AICLUSTER_METRICS_WRITE_URL={VALUES['write_url']}\n", "")
    node.env.write_text(env)
    monkeypatch.setenv("AICLUSTER_TEST_CALLS", str(node.calls))
    done = node.run("--cloud", "gcp", "--role", "compute")
    assert done.returncode == 0, done.stderr
    version = slurm_node_agents().ops_agent["version"]
    assert [c for c in node.calls.read_text().splitlines() if c.startswith("ops-agent-repo")] == [
        f"ops-agent-repo --also-install --version={version}"]
    config = yaml.safe_load((node.root / "etc/google-cloud-ops-agent/config.yaml").read_text())
    assert set(config["logging"]["receivers"]) == {log_id("c1", s) for s in ("slurmd", "health-check", "kernel")}
    assert "restart google-cloud-ops-agent" in " ".join(node.calls_of("systemctl"))
    assert not (node.root / "opt/aicluster/monitoring/prometheus").exists()     # no AWS agent


@pytest.mark.parametrize("line,why", [
    ("AICLUSTER_METRICS_WRITE_URL=https://evil.example.com/api/v1/remote_write", "AICLUSTER_METRICS_WRITE_URL"),
    ("AICLUSTER_CLUSTER=c1;rm -rf /", "AICLUSTER_CLUSTER"),
    ("AICLUSTER_GPUS=eight", "AICLUSTER_GPUS"),
])
def test_bad_settings_are_refused_before_anything_is_installed(tmp_path, line, why):
    node = Node(tmp_path)
    node.env.write_text(node.env.read_text() + line + "\n")
    done = node.run("--cloud", "aws", "--role", "compute")
    assert done.returncode == 1 and why in done.stderr
    assert not node.calls_of("curl") and not (node.root / "opt/aicluster/monitoring/node_exporter").exists()


def test_background_hands_the_set_up_to_a_retrying_unit(tmp_path):
    node = Node(tmp_path)
    done = node.run("--cloud", "aws", "--role", "compute", "--background")
    assert done.returncode == 0, done.stderr
    (started,) = node.calls_of("systemd-run")
    assert "--unit=aicluster-monitoring-setup" in started and "--property=Restart=on-failure" in started
    assert started.endswith(f"{node.program} --cloud aws --role compute --env {node.env}")
    assert not node.calls_of("curl")           # nothing installed in the caller's time


@pytest.mark.parametrize("cloud,write_url", [("aws", VALUES["write_url"]), ("gcp", None)])
def test_head_published_files_set_up_its_monitoring(cloud, write_url):
    files = {key: (path, content, run) for key, path, content, _, run in
             mon.head_monitoring_files(cloud, "c1", write_url)}
    path, env, run = files["aicluster/monitoring.env"]
    assert path == mon.HEAD_ENV
    assert "AICLUSTER_POOL=head\nAICLUSTER_GPUS=0\n" in env
    assert ("AICLUSTER_METRICS_WRITE_URL=" + write_url in env) if write_url else "WRITE_URL" not in env
    assert list(run) == [f"{mon.BIN}/{mon.PROGRAM}", "--cloud", cloud, "--role", "head", "--env", mon.HEAD_ENV,
                         "--background"]
    assert files[f"bin/{mon.PROGRAM}"][2] == run       # a new program sets it up again


# --- the agent, run: a real Prometheus in agent mode with the rendered configuration ----------------

NODE_SAMPLES = 'node_uname_info{nodename="c1-gpu-3",release="6.8.0"} 1\nnode_memory_MemAvailable_bytes 1.5e+12\n'
DCGM_SAMPLES = 'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-1"} 97\nDCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-1"} 0\n'


def test_a_real_agent_ships_the_nodes_series_with_its_labels(tmp_path):
    """Debian's Prometheus in agent mode runs the rendered configuration (the exporters' ports moved
    to fake exporters, the write URL to a receiver on loopback): the exporters' series arrive
    remote-written, each labelled cluster, pool and node, with the scrape's `up`. (Debian's build
    sends them unsigned: the sigv4 block is what AMP needs, and why the nodes run the upstream
    release: catalog slurm_nodes.agent.)"""
    from tests.support.prometheus import fake_exporter, free_port
    from tests.support.remote_write import remote_write_receiver

    ports = {key: e.port for key, e in exporters().items()}
    with fake_exporter(lambda: NODE_SAMPLES) as node_port, fake_exporter(lambda: DCGM_SAMPLES) as dcgm_port, \
            remote_write_receiver() as (receiver_port, received):
        url = f"http://127.0.0.1:{receiver_port}/workspaces/ws-0123abcd/api/v1/remote_write"
        text = filled(mon.prometheus_agent_config("compute", True), write_url=url)
        text = text.replace(f"127.0.0.1:{ports['node_exporter']}", f"127.0.0.1:{node_port}")
        text = text.replace(f"127.0.0.1:{ports['dcgm_exporter']}", f"127.0.0.1:{dcgm_port}")
        config = yaml.safe_load(text)
        config["global"]["scrape_interval"] = "1s"          # the test's own pace
        config["global"]["scrape_timeout"] = "1s"
        config["remote_write"][0]["queue_config"]["batch_send_deadline"] = "1s"
        path = tmp_path / "agent.yml"
        path.write_text(yaml.safe_dump(config))
        log = (tmp_path / "agent.log").open("w")
        agent = subprocess.Popen([program("prometheus"), "--enable-feature=agent", f"--config.file={path}",
                                  f"--storage.agent.path={tmp_path / 'wal'}",
                                  f"--web.listen-address=127.0.0.1:{free_port()}"], stdout=log, stderr=subprocess.STDOUT,
                                 # sigv4 needs credentials to start (the instance role's, on a node)
                                 env={**os.environ, "AWS_ACCESS_KEY_ID": "AKIDTEST", "AWS_SECRET_ACCESS_KEY": "test"})
        try:
            wanted = {"node_uname_info", "DCGM_FI_DEV_GPU_UTIL", "up"}
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                with received.lock:
                    names = {s.get("__name__") for s in received.series}
                if wanted <= names or agent.poll() is not None:
                    break
                time.sleep(0.5)
        finally:
            agent.terminate()
            agent.wait(timeout=20)
            log.close()
        assert wanted <= names, (tmp_path / "agent.log").read_text()[-2000:]
        assert {path for path, _ in received.requests} == {"/workspaces/ws-0123abcd/api/v1/remote_write"}
        with received.lock:
            ours = [s for s in received.series if s.get("__name__") in wanted]
        for labels in ours:
            assert (labels["cluster"], labels["pool"], labels["node"]) == ("c1", "gpu", "c1-gpu-3"), labels
        jobs = {s["job"] for s in ours if s["__name__"] == "up"}
        assert jobs == {"node-exporter", "dcgm-exporter"}


def test_job_names_are_the_kubernetes_collectors():
    """The same `job` label on Slurm VMs and on Kubernetes: dashboards and rules that name a job
    match both."""
    from aicluster.kubernetes import metrics as k8s_metrics

    assert (mon.NODE_JOB, mon.DCGM_JOB) == (k8s_metrics.NODE_EXPORTER, k8s_metrics.DCGM)


def test_a_role_with_no_such_configuration_says_so(tmp_path):
    """A head node whose settings claim GPUs has no configuration to install: the program stops
    and names what is missing, instead of installing an empty one."""
    node = Node(tmp_path)
    node.env.write_text(f"AICLUSTER_CLUSTER=c1\nAICLUSTER_POOL=head\nAICLUSTER_GPUS=8\n"
                        f"AICLUSTER_METRICS_WRITE_URL={VALUES['write_url']}\n")
    done = node.run("--cloud", "aws", "--role", "head")
    assert done.returncode == 1 and "no prometheus configuration for role head (GPUs: true)" in done.stderr
    assert not (node.root / "etc/aicluster/monitoring/prometheus-agent.yml").exists()


# --- a baked node image (docs/images.md) ---------------------------------------------------------


def _installed_packages(node) -> None:
    """dpkg-query answers that every package is installed (the CloudWatch agent the bake put in)."""
    node._stub("dpkg-query", '#!/bin/bash\necho "install ok installed"\n')


def test_install_only_installs_every_binary_and_configures_nothing(tmp_path):
    """What `aicluster-node-install --bake` runs: no env file, nothing configured or started."""
    node = Node(tmp_path)
    node.env.unlink()
    done = node.run("--install-only", "--cloud", "aws", "--role", "compute")
    assert done.returncode == 0, done.stderr
    dest = node.root / "opt/aicluster/monitoring"
    assert (dest / "node_exporter").exists() and (dest / "prometheus").exists() and (dest / "promtool").exists()
    assert (dest / "dcgm-exporter.sqsh.version").read_text().strip() == slurm_node_agents().dcgm_image
    assert any(c.startswith("dpkg -i ") for c in node.calls_of("dpkg"))          # the CloudWatch agent
    assert not (node.root / "etc/systemd/system").exists() or not list((node.root / "etc/systemd/system").iterdir())
    assert not node.calls_of("systemctl") and not (node.root / "etc/aicluster/monitoring").exists()


def test_a_baked_node_starts_its_monitoring_and_downloads_nothing(tmp_path):
    node = Node(tmp_path)
    assert node.run("--install-only", "--cloud", "aws", "--role", "compute").returncode == 0
    _installed_packages(node)
    node.env.write_text(node.env.read_text() + "AICLUSTER_IMAGE_CONTENTS=0123456789abcdef\n")
    node.calls.write_text("")
    done = node.run("--cloud", "aws", "--role", "compute")
    assert done.returncode == 0, done.stderr
    assert not node.calls_of("curl") and not node.calls_of("apt-get") and not node.calls_of("dpkg")
    assert not [c for c in node.calls_of("enroot") if " import " in c]
    started = " ".join(node.calls_of("systemctl"))
    assert "restart aicluster-node-exporter.service" in started and "restart aicluster-metrics-agent.service" in started


def test_a_baked_node_that_lacks_a_binary_says_so_and_downloads_nothing(tmp_path):
    node = Node(tmp_path)
    node.env.write_text(node.env.read_text() + "AICLUSTER_IMAGE_CONTENTS=0123456789abcdef\n")
    done = node.run("--cloud", "aws", "--role", "compute")
    assert done.returncode == 1
    assert (f"the baked image (contents 0123456789abcdef) lacks node_exporter {slurm_node_agents().node_exporter.version}"
            in done.stderr)
    assert not node.calls_of("curl")
