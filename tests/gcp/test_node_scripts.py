"""The programs GCP nodes run, run for real against fakes: the NCCL environment per NIC stack
(aicluster-gcp-fabric with a fake metadata server and a fake sysfs), the GPU health check's GCP
fabric counts, aicluster-secret over Secret Manager, aicluster-sync over Cloud Storage, the
Managed Lustre import, and the mount script with the GCP Lustre client and NFS. shellcheck reads
every GCP shell script (required: CI installs it)."""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from aicluster.mounts import Mount
from aicluster.render.templates import render
from tests.support import GCP_PROJECT, ROOT, node_programs, stack_spec
from tests.support.fake_gcp import FakeGcp
from tests.support.bucket_objects import as_bytes

SCRIPTS = ROOT / "components" / "aicluster" / "node" / "bin"
FABRIC = SCRIPTS / "aicluster-gcp-fabric"


@pytest.fixture
def fake():
    server = FakeGcp(project=GCP_PROJECT).start()
    yield server
    server.stop()


def test_gcp_shell_scripts_pass_shellcheck():
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck is required: apt-get install shellcheck (.ci/run installs it)"
    scripts = [SCRIPTS / "aicluster-gcp-fabric", SCRIPTS / "aicluster-gcp-node-bootstrap"]
    for script in scripts:
        run = subprocess.run([shellcheck, "--severity=style", str(script)], capture_output=True, text=True)
        assert run.returncode == 0, f"{script.name}:\n{run.stdout}"


# --- the NCCL environment per NIC stack ----------------------------------------------------------


def node(tmp_path, fake, stack, host_nics, gpu_nics, names, lib_dir="/var/lib/x/lib64"):
    """A node with `names` as its interfaces in NIC order, behind the fake metadata server."""
    sysfs = tmp_path / "sys"
    for i, name in enumerate(names):
        dev = sysfs / "class" / "net" / name
        dev.mkdir(parents=True)
        mac = f"42:01:0a:00:{i // 256:02x}:{i % 256:02x}"
        (dev / "address").write_text(mac + "\n")
        fake.metadata[f"instance/network-interfaces/{i}/mac"] = mac
    (sysfs / "class" / "net" / "lo").mkdir()
    (sysfs / "class" / "net" / "lo" / "address").write_text("00:00:00:00:00:00\n")
    env_file = tmp_path / "node.env"
    env_file.write_text(f"AICLUSTER_NIC_STACK={stack}\nAICLUSTER_HOST_NICS={host_nics}\nAICLUSTER_GPU_NICS={gpu_nics}\n"
                        f"AICLUSTER_NIC_LIB_DIR={lib_dir}\n")
    env = {**os.environ, **fake.env(), "AICLUSTER_NODE_ENV": str(env_file), "AICLUSTER_ROOT": str(tmp_path / "root"),
           "AICLUSTER_SYSFS": str(sysfs)}
    run = subprocess.run(["bash", str(FABRIC), "--env-only"], env=env, capture_output=True, text=True, timeout=60)
    # The env file the TaskProlog reads; the login profile only sources it.
    profile = tmp_path / "root" / "etc" / "aicluster" / "nccl.env"
    login = tmp_path / "root" / "etc" / "profile.d" / "aicluster-nccl.sh"
    if profile.exists():
        assert ". /etc/aicluster/nccl.env" in login.read_text()
    return run, profile.read_text() if profile.exists() else ""


def exports(profile: str) -> dict[str, str]:
    out = {}
    for line in profile.splitlines():
        if line.startswith("export "):
            for part in line[len("export "):].split(" "):
                key, _, value = part.partition("=")
                out[key] = value.strip('"')
    return out


def test_tcpxo_environment_uses_this_images_interface_names(tmp_path, fake):
    names = ["enp0s12"] + [f"enp{n}s0" for n in (6, 7, 13, 14, 134, 135, 141, 142)]
    run, profile = node(tmp_path, fake, "tcpxo", 1, 8, names, "/var/lib/tcpxo/lib64")
    assert run.returncode == 0, run.stderr
    env = exports(profile)
    assert env["NCCL_FASTRAK_CTRL_DEV"] == env["NCCL_SOCKET_IFNAME"] == "enp0s12"
    assert env["NCCL_FASTRAK_IFNAME"] == ",".join(names[1:])               # every GPU NIC, in NIC order
    assert env["NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY"] == "/dev/aperture_devices"
    assert ". /var/lib/tcpxo/lib64/nccl-env-profile.sh" in profile
    assert subprocess.run(["bash", "-n", "-c", profile]).returncode == 0


def test_tcpx_environment_binds_each_gpu_nic(tmp_path, fake):
    names = ["ens4", "enp6s0", "enp12s0", "enp134s0", "enp140s0"]
    run, profile = node(tmp_path, fake, "tcpx", 1, 4, names, "/var/lib/tcpx/lib64")
    assert run.returncode == 0, run.stderr
    env = exports(profile)
    assert env["NCCL_GPUDIRECTTCPX_CTRL_DEV"] == "ens4"
    assert env["NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"] == "enp6s0,enp12s0,enp134s0,enp140s0"
    assert env["NCCL_GPUDIRECTTCPX_TX_BINDINGS"] == (
        "enp6s0:8-21,112-125;enp12s0:8-21,112-125;enp134s0:60-73,164-177;enp140s0:60-73,164-177")
    assert env["NCCL_GPUDIRECTTCPX_RX_BINDINGS"].startswith("enp6s0:22-35,126-139;")
    assert env["NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX"] == "/run/tcpx"


def test_rdma_environment_comes_from_the_gib_plugin(tmp_path, fake):
    names = ["enp0s19", "enp192s20"] + [f"enp{n}s0" for n in range(8)]
    run, profile = node(tmp_path, fake, "rdma", 2, 8, names, "/usr/local/gib/lib64")
    assert run.returncode == 0, run.stderr
    assert ". /usr/local/gib/scripts/set_nccl_env.sh" in profile
    env = exports(profile)
    assert env["NCCL_SOCKET_IFNAME"] == "enp0s19,enp192s20"                   # the two gVNIC host NICs
    assert env["LD_LIBRARY_PATH"].startswith("/usr/local/gib/lib64")


def test_a_nic_without_an_interface_fails_loudly(tmp_path, fake):
    run, profile = node(tmp_path, fake, "tcpxo", 1, 8, ["enp0s12", "enp6s0"])
    assert run.returncode != 0 and "lists no NIC 2" in run.stderr and profile == ""
    fake.metadata["instance/network-interfaces/2/mac"] = "42:01:0a:ff:ff:ff"
    run, profile = node(tmp_path / "again", fake, "tcpxo", 1, 1, ["enp0s12", "enp6s0"])
    assert run.returncode == 0
    run, profile = node(tmp_path / "third", fake, "tcpxo", 1, 2, ["enp0s12", "enp6s0"])
    assert run.returncode != 0 and "no interface has the MAC 42:01:0a:ff:ff:ff of NIC 2" in run.stderr


# --- the health check's GCP fabric counts -------------------------------------------------------


@pytest.mark.parametrize("kind, expected, present, ok", [
    ("rdma", 8, 8, True), ("rdma", 8, 7, False), ("gvnic", 9, 9, True), ("gvnic", 9, 8, False)])
def test_healthcheck_counts_rdma_devices_or_gvnic_interfaces(tmp_path, kind, expected, present, ok):
    sysfs = tmp_path / "sys"
    for i in range(present):
        if kind == "rdma":
            (sysfs / "class" / "infiniband" / f"mlx5_{i}").mkdir(parents=True)
        else:
            dev = sysfs / "class" / "net" / f"eth{i}" / "device"
            dev.mkdir(parents=True)
            (dev / "driver").symlink_to("../../../bus/pci/drivers/gve")
    (sysfs / "class" / "net").mkdir(parents=True, exist_ok=True)
    env_file = tmp_path / "node.env"
    env_file.write_text(f"AICLUSTER_GPUS=0\nAICLUSTER_FABRIC_KIND={kind}\nAICLUSTER_FABRIC_DEVICES={expected}\n")
    run = subprocess.run(["bash", str(SCRIPTS / "aicluster-gpu-healthcheck")], capture_output=True, text=True,
                         env={**os.environ, "AICLUSTER_NODE_ENV": str(env_file), "AICLUSTER_SYSFS": str(sysfs)})
    assert (run.returncode == 0) is ok, run.stdout + run.stderr
    line = next(ln for ln in run.stdout.splitlines() if ln.startswith("fabric:"))
    assert ("ok" in line) is ok and (f"found {present}" in run.stderr) is (not ok)


def test_healthcheck_refuses_an_unknown_fabric_kind(tmp_path):
    env_file = tmp_path / "node.env"
    env_file.write_text("AICLUSTER_GPUS=0\nAICLUSTER_FABRIC_KIND=infiniband\nAICLUSTER_FABRIC_DEVICES=8\n")
    run = subprocess.run(["bash", str(SCRIPTS / "aicluster-gpu-healthcheck")], capture_output=True, text=True,
                         env={**os.environ, "AICLUSTER_NODE_ENV": str(env_file)})
    assert run.returncode == 1 and "must be efa, rdma or gvnic" in run.stderr


# --- secrets, sync and imports over the fake APIs ---------------------------------------------


def program_dir(tmp_path) -> Path:
    """/opt/aicluster/bin as the node has it: the entry points, aicluster.node in ../lib."""
    bin_dir = tmp_path / "opt" / "bin"
    node_programs.install(bin_dir, ["aicluster-secret", "aicluster-sync", "aicluster-gcp-lustre-import"])
    return bin_dir


def test_secret_comes_from_secret_manager_into_a_private_file(tmp_path, fake):
    name = f"projects/{GCP_PROJECT}/secrets/aicluster-test-munge-key"
    fake.secrets[name] = b"c2VjcmV0LWtleS1ieXRlcw=="      # stored base64, as aicluster stores the munge key
    dest = tmp_path / "munge.key"
    run = subprocess.run([str(program_dir(tmp_path) / "aicluster-secret"), name, str(dest), "--base64"],
                         env={**os.environ, **fake.env()}, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert dest.read_bytes() == b"secret-key-bytes"
    assert stat.S_IMODE(dest.stat().st_mode) == 0o400
    assert [c.path for c in fake.calls] == [f"/secretmanager/v1/{name}/versions/latest:access"]


def test_sync_installs_the_published_files_from_cloud_storage(tmp_path, fake):
    from aicluster.design.cluster import design_cluster
    from aicluster.gcp.slurm import CONFIG_PREFIX, published_files
    from aicluster.spec.cluster import parse_spec

    design = design_cluster(parse_spec(stack_spec("gcp-a3mega-slurm")))
    files = published_files(design, project_id=GCP_PROJECT, controller_addr="10.0.0.2", templates={"gpu": "tmpl"},
                            placements={"gpu": "pp"}, accounting_secret=None, lustre_imports=[])
    fake.objects = {("cfg-bucket", CONFIG_PREFIX + k): as_bytes(v) for k, v in files.items()}
    root = tmp_path / "root"
    (root / "etc" / "aicluster").mkdir(parents=True)
    (root / "etc" / "aicluster" / "sync.json").write_text(json.dumps(
        {"storage": "gcs", "bucket": "cfg-bucket", "prefix": CONFIG_PREFIX, "region": "us-east4"}))
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    for name in ("scontrol", "systemctl"):
        (stubs / name).write_text("#!/bin/sh\nexit 0\n")
        (stubs / name).chmod(0o755)
    # The published slurm.conf names the head as SlurmctldHost: a real slurmctld would refuse to
    # test it on this machine, so sync tests it with a stand-in (tests/slurm/test_sync_slurmctld.py
    # tests a real one).
    from tests.support import fake_slurmctld

    env = {**os.environ, **fake.env(), "AICLUSTER_ROOT": str(root), "AICLUSTER_SCONTROL": str(stubs / "scontrol"),
           "AICLUSTER_SYSTEMCTL": str(stubs / "systemctl"), "AICLUSTER_SLURMCTLD": str(fake_slurmctld.install(stubs))}
    run = subprocess.run([str(program_dir(tmp_path) / "aicluster-sync"), "--bootstrap"],
                         env=env, capture_output=True, text=True, timeout=120)
    # The bootstrap run also runs what the files ask for; those programs need root paths, so only
    # the installation is judged here.
    installed = root / "etc" / "slurm" / "slurm.conf"
    assert installed.read_text() == files["slurm/slurm.conf"], run.stderr
    assert os.readlink(root / "opt" / "aicluster" / "bin" / "aicluster-resume") == "aicluster-gcp-power.py"
    assert json.loads((root / "etc" / "aicluster" / "cluster.json").read_text())["project"] == GCP_PROJECT
    assert any(c.path == f"/storage/v1/b/cfg-bucket/o/{CONFIG_PREFIX}manifest.json" for c in fake.calls)


def test_lustre_import_starts_each_import_once(tmp_path, fake):
    instance = f"projects/{GCP_PROJECT}/locations/us-central1-a/instances/test-scratch"
    root = tmp_path / "root"
    (root / "etc" / "aicluster").mkdir(parents=True)
    (root / "etc" / "aicluster" / "lustre-imports.json").write_text(json.dumps(
        {"imports": [{"instance": instance, "uri": "gs://datasets/tokens", "path": "/"}]}))
    env = {**os.environ, **fake.env(), "AICLUSTER_ROOT": str(root)}
    program = program_dir(tmp_path) / "aicluster-gcp-lustre-import"
    for _ in range(2):
        run = subprocess.run([str(program)], env=env, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
    (call,) = fake.requests(":importData")
    assert call.path == f"/lustre/v1/{instance}:importData"
    assert call.body["gcsPath"] == {"uri": "gs://datasets/tokens/"} and call.body["lustrePath"] == {"path": "/"}
    assert "started before; skipped" in run.stderr


# --- the mount script with the GCP clients --------------------------------------------------------


def test_mount_script_installs_the_gcp_clients_and_mounts(tmp_path):
    mounts = [Mount("172.31.0.5", "scratch", "/lustre", "lustre", "relatime,flock,_netdev", "lustre-gcp"),
              Mount("172.31.1.2", "/home", "/home", "nfs", "defaults,hard,_netdev", "nfs")]
    script = tmp_path / "mount-storage"
    script.write_text(render("scripts/mount-storage.sh.j2", mounts=mounts))
    text = script.read_text()
    assert "lustre-client-ubuntu-${codename}" in text and "lustre-client-modules-$(uname -r)" in text
    stubs = tmp_path / "bin"
    stubs.mkdir()
    calls = tmp_path / "calls"
    for name, body in {"modinfo": "exit 0", "mountpoint": "exit 1", "mount.nfs": "exit 0",
                       "mount": f'echo "mount $*" >> {calls}'}.items():
        (stubs / name).write_text(f"#!/bin/sh\n{body}\n")
        (stubs / name).chmod(0o755)
    tree = tmp_path / "root"
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "AICLUSTER_ROOT": str(tree)}
    for _ in range(2):
        run = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
    assert (tree / "etc" / "fstab").read_text().splitlines() == [m.fstab_line() for m in mounts]
    assert (tree / "etc" / "fstab").read_text().splitlines()[0].startswith("172.31.0.5@tcp:/scratch /lustre lustre")
    assert calls.read_text().splitlines() == ["mount /lustre", "mount /home"] * 2
