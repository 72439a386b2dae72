"""aicluster-login-bootstrap, run for real in a scratch tree: the munge key, sackd in configless
mode (never slurmd), the filesystems' mount script, the fabric check and its expectations fetched
from the configuration bucket (moto's S3 server stands in for S3), and the compute nodes' own
aicluster-containers (enroot and pyxis) run on a node with no GPU. systemctl, munge/unmunge, sinfo,
srun, sackd, logger and the container tools (tests/support/container_tools.py) are recording stubs;
install, ln, sed, timeout and python3 (boto3) are real.

Its own harness rather than tests/support/node_bootstrap.py: that one drives the compute nodes'
join (EC2's and GCE's metadata servers, slurmd); a login node reads neither."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer

from aicluster.catalog.node_local import containers
from aicluster.catalog.slurm_release import nccl_check_config
from aicluster.render.login_files import CLUSTER_JSON_KEY, MOUNT_SCRIPT_KEY, NCCL_CHECK_KEY
from aicluster.render.node_local_files import CONTAINERS_PROGRAM, containers_program, pyxis_artifact_dir
from aicluster.render.node_programs import program_text
from tests.support import free_port
from tests.support.container_tools import CONTAINER_TOOL_STUBS, install_readers, pins, write_stubs

SCRIPT = Path(__file__).resolve().parents[2] / "components" / "aicluster" / "node" / "bin" / "aicluster-login-bootstrap"
BUCKET, REGION, CONTROLLER = "demo-config", "us-east-1", "10.0.0.5:6817"
MOUNT = '#!/bin/bash\necho mounted >> "$AICLUSTER_ROOT/mounted"\n'
NCCL_CHECK = program_text("aicluster-nccl-check")
PINS = containers()
# pyxis as the head publishes it (aicluster-pyxis-build): the plugin, then its SHA-256 beside it.
PYXIS_KEY = f"{pyxis_artifact_dir(pins())}/amd64/spank_pyxis.so"
PYXIS = b"fake spank_pyxis.so"


def cluster_json(*instance_types: str) -> bytes:
    """cluster.json as the head publishes it: the check's expectations and how pools are launched."""
    return json.dumps({"cluster": "demo", "region": REGION, "nccl_check": nccl_check_config(instance_types),
                       "pools": {"gpu": {"launch_template": "lt-0123", "subnet": "subnet-0123"}},
                       "log_file": "/var/log/aicluster/power.log"}).encode()


def publish_everything(client) -> None:
    client.put_object(Bucket=BUCKET, Key=MOUNT_SCRIPT_KEY, Body=MOUNT.encode())
    client.put_object(Bucket=BUCKET, Key=NCCL_CHECK_KEY, Body=NCCL_CHECK.encode())
    client.put_object(Bucket=BUCKET, Key=CLUSTER_JSON_KEY, Body=cluster_json("p5.48xlarge"))
    client.put_object(Bucket=BUCKET, Key=PYXIS_KEY, Body=PYXIS)
    client.put_object(Bucket=BUCKET, Key=PYXIS_KEY + ".sha256",
                      Body=f"{hashlib.sha256(PYXIS).hexdigest()}  spank_pyxis.so\n".encode())


def unpublish_everything(client) -> None:
    for key in (MOUNT_SCRIPT_KEY, NCCL_CHECK_KEY, CLUSTER_JSON_KEY):
        client.delete_object(Bucket=BUCKET, Key=key)


@pytest.fixture(scope="module")
def s3():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port())
    server.start()
    endpoint = f"http://127.0.0.1:{server._server.server_port}"
    client = boto3.client("s3", region_name=REGION, endpoint_url=endpoint,
                          aws_access_key_id="test", aws_secret_access_key="test")
    client.create_bucket(Bucket=BUCKET)
    yield endpoint, client
    server.stop()


def node(tmp: Path, endpoint: str) -> tuple[dict, Path]:
    root, stubs, programs = tmp / "root", tmp / "stubs", tmp / "opt"
    for d in (root / "etc" / "aicluster", stubs, programs):
        d.mkdir(parents=True)
    (root / "etc" / "aicluster" / "login.env").write_text(
        f"AICLUSTER_CLOUD=aws\nAICLUSTER_REGION={REGION}\nAICLUSTER_CONTROLLER={CONTROLLER}\n"
        f"AICLUSTER_MUNGE_SECRET=arn:aws:secretsmanager:{REGION}:123456789012:secret:munge\n"
        f"AICLUSTER_BUCKET={BUCKET}\nAICLUSTER_MOUNT_KEY={MOUNT_SCRIPT_KEY}\n"
        f"AICLUSTER_NCCL_CHECK_KEY={NCCL_CHECK_KEY}\nAICLUSTER_CLUSTER_JSON_KEY={CLUSTER_JSON_KEY}\n")
    stub = {name: f'#!/bin/bash\necho "{name} $*" >> "{stubs}/calls"\n'
            for name in ("systemctl", "logger", "sackd", "munge", "aicluster-secret", "groupadd", "useradd",
                         "srun")}
    # No slurm user or group on this node (only the client packages ran): getent finds nothing.
    stub["getent"] = f'#!/bin/bash\necho "getent $*" >> "{stubs}/calls"\nexit 2\n'
    stub["unmunge"] = f'#!/bin/bash\ncat >/dev/null\necho unmunge >> "{stubs}/calls"\n'
    stub["sinfo"] = f'#!/bin/bash\necho "sinfo $*" >> "{stubs}/calls"\nexit "$(cat {stubs}/sinfo.rc 2>/dev/null || echo 0)"\n'
    for name, text in stub.items():
        path = (programs if name == "aicluster-secret" else stubs) / name
        path.write_text(text)
        path.chmod(0o755)
    # The login node's programs as its user data installs them: the compute nodes' container
    # installer (rendered with the digests of what the fake curl downloads) and aicluster.node.gcp.
    # No slurmd and no nvidia-container-cli here.
    (programs / CONTAINERS_PROGRAM).write_text(containers_program(pins()))
    (programs / CONTAINERS_PROGRAM).chmod(0o755)
    write_stubs(stubs, CONTAINER_TOOL_STUBS)
    (stubs / "python3").symlink_to(sys.executable)
    install_readers(programs, stubs)
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "AICLUSTER_ROOT": str(root), "AICLUSTER_BIN": str(programs),
           "AICLUSTER_POLL_S": "0", "AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "test",
           "AWS_SECRET_ACCESS_KEY": "test", "HOME": str(tmp), "CALLS": str(stubs / "calls"),
           "AWS_DEFAULT_REGION": REGION}
    return env, stubs


def run(env, *args):
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=120)


def test_joins_with_sackd_never_slurmd_and_mounts_the_published_filesystems(s3, tmp_path):
    endpoint, client = s3
    publish_everything(client)
    env, stubs = node(tmp_path, endpoint)
    result = run(env)
    assert result.returncode == 0, result.stderr
    calls = (stubs / "calls").read_text().splitlines()
    assert calls[0].startswith("aicluster-secret arn:aws:secretsmanager:") and "--owner munge:munge" in calls[0]
    assert "systemctl enable sackd" in calls and "systemctl restart sackd" in calls
    assert "systemctl enable --now aicluster-login-refresh.timer" in calls
    assert not [c for c in calls if "slurmd" in c]
    # sackd's user, with the ids Debian's slurmd and slurmctld give it on the other nodes.
    assert "groupadd --system --gid 64030 slurm" in calls
    assert [c for c in calls if c.startswith("useradd --system --uid 64030 --gid slurm ")]
    unit = (Path(env["AICLUSTER_ROOT"]) / "etc/systemd/system/sackd.service").read_text()
    assert f"ExecStart=/usr/sbin/sackd --systemd --conf-server {CONTROLLER}\n" in unit
    assert "User=slurm" in unit and "RuntimeDirectory=slurm" in unit
    root = Path(env["AICLUSTER_ROOT"])
    assert (root / "mounted").read_text() == "mounted\n"
    assert os.access(root / "usr/local/sbin/aicluster-mount-storage", os.X_OK)


def test_installs_the_published_fabric_check_with_only_the_facts_it_reads(s3, tmp_path):
    endpoint, client = s3
    publish_everything(client)
    env, _ = node(tmp_path, endpoint)
    assert run(env).returncode == 0
    root, programs = Path(env["AICLUSTER_ROOT"]), Path(env["AICLUSTER_BIN"])
    check = programs / "aicluster-nccl-check"
    assert check.read_text() == NCCL_CHECK and os.access(check, os.X_OK)
    # On users' PATH, as the program itself (the link follows each refresh).
    link = root / "usr/local/bin/aicluster-nccl-check"
    assert link.is_symlink() and os.readlink(link) == str(check)
    facts = json.loads((root / "etc/aicluster/cluster.json").read_text())
    # The expectations of the cluster's pools; nothing of how the head launches their nodes.
    assert facts == {"cluster": "demo", "region": REGION, "nccl_check": nccl_check_config(["p5.48xlarge"])}
    assert oct((root / "etc/aicluster/cluster.json").stat().st_mode & 0o777) == "0o644"


def test_a_pool_added_later_reaches_the_fabric_check_on_the_next_refresh(s3, tmp_path):
    endpoint, client = s3
    publish_everything(client)
    env, _ = node(tmp_path, endpoint)
    assert run(env).returncode == 0
    client.put_object(Bucket=BUCKET, Key=CLUSTER_JSON_KEY, Body=cluster_json("p5.48xlarge", "p5en.48xlarge"))
    result = run(env, "--refresh")
    assert result.returncode == 0, result.stderr
    facts = json.loads((Path(env["AICLUSTER_ROOT"]) / "etc/aicluster/cluster.json").read_text())
    assert facts["nccl_check"] == nccl_check_config(["p5.48xlarge", "p5en.48xlarge"])
    assert set(facts["nccl_check"]["expected"]) == {"p5.48xlarge", "p5en.48xlarge"}


def test_runs_the_compute_nodes_container_installer_without_gpus(s3, tmp_path):
    """enroot and pyxis at the catalog's pins, no libnvidia-container (no GPU here), and enroot's
    images under /var/tmp/enroot (no /scratch on a login node)."""
    endpoint, client = s3
    publish_everything(client)
    env, stubs = node(tmp_path, endpoint)
    result = run(env)
    assert result.returncode == 0, result.stderr
    calls = (stubs / "calls").read_text()
    for package in PINS.enroot.packages:
        assert PINS.enroot.url(package) in calls
    assert "git " not in calls and "make " not in calls                 # nothing cloned or built here
    root = Path(env["AICLUSTER_ROOT"])
    assert (root / PINS.pyxis.plugin.lstrip("/")).read_bytes() == PYXIS   # the head's build; plugstack.conf names it
    assert "libnvidia-container" not in calls
    conf = (root / "etc/enroot/enroot.conf").read_text()
    assert "ENROOT_DATA_PATH       /var/tmp/enroot/data/user-${UID}" in conf
    assert "ENROOT_CACHE_PATH      /var/tmp/enroot/cache/user-${UID}" in conf
    assert f"enroot {PINS.enroot.version} and pyxis {PINS.pyxis.version} ready" in result.stderr


def test_a_failed_container_install_fails_the_set_up(s3, tmp_path):
    endpoint, client = s3
    publish_everything(client)
    env, _ = node(tmp_path, endpoint)
    result = run({**env, "TAMPER": Path(PINS.enroot.url("enroot")).name})   # not the pinned .deb
    assert result.returncode == 1
    assert "aicluster-containers failed" in result.stderr
    assert (Path(env["AICLUSTER_ROOT"]) / "mounted").exists()           # mounted before, all the same


def test_slurm_joins_before_the_head_publishes_and_the_timer_catches_up(s3, tmp_path):
    endpoint, client = s3
    unpublish_everything(client)
    env, _ = node(tmp_path, endpoint)
    result = run(env)
    assert result.returncode == 0, result.stderr
    assert "filesystems not mounted yet" in result.stderr
    assert "aicluster-nccl-check not installed yet" in result.stderr
    assert run(env, "--refresh").returncode == 1          # the timer's run fails until it is published
    client.put_object(Bucket=BUCKET, Key=MOUNT_SCRIPT_KEY, Body=MOUNT.encode())
    refresh = run(env, "--refresh")
    assert refresh.returncode == 1 and "published cluster.json" in refresh.stderr   # still no fabric check
    root = Path(env["AICLUSTER_ROOT"])
    assert (root / "mounted").read_text() == "mounted\n"  # the filesystems did not wait for it
    publish_everything(client)
    assert run(env, "--refresh").returncode == 0
    assert (Path(env["AICLUSTER_BIN"]) / "aicluster-nccl-check").read_text() == NCCL_CHECK


def test_a_published_file_of_the_wrong_kind_is_refused(s3, tmp_path):
    endpoint, client = s3
    publish_everything(client)
    client.put_object(Bucket=BUCKET, Key=NCCL_CHECK_KEY, Body=b"<Error>AccessDenied</Error>")
    client.put_object(Bucket=BUCKET, Key=CLUSTER_JSON_KEY, Body=b"{not json")
    env, _ = node(tmp_path, endpoint)
    result = run(env, "--refresh")
    assert result.returncode == 1
    assert f"{CLUSTER_JSON_KEY}: not JSON" in result.stderr
    assert not (Path(env["AICLUSTER_ROOT"]) / "etc/aicluster/cluster.json").exists()
    client.put_object(Bucket=BUCKET, Key=CLUSTER_JSON_KEY, Body=cluster_json("p5.48xlarge"))
    client.put_object(Bucket=BUCKET, Key=PYXIS_KEY, Body=PYXIS)
    client.put_object(Bucket=BUCKET, Key=PYXIS_KEY + ".sha256",
                      Body=f"{hashlib.sha256(PYXIS).hexdigest()}  spank_pyxis.so\n".encode())
    result = run(env, "--refresh")
    assert result.returncode == 1 and f"{NCCL_CHECK_KEY}: not a script" in result.stderr
    assert not (Path(env["AICLUSTER_BIN"]) / "aicluster-nccl-check").exists()


def test_an_unreachable_controller_fails_the_set_up(s3, tmp_path):
    env, stubs = node(tmp_path, s3[0])
    (stubs / "sinfo.rc").write_text("1")
    result = run(env)
    assert result.returncode == 1 and f"is slurmctld up at {CONTROLLER}" in result.stderr


def test_shellcheck():
    result = subprocess.run(["shellcheck", "--severity=style", str(SCRIPT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("rc", [0, 1])
def test_starts_its_monitoring_in_the_background_and_a_failure_is_not_fatal(s3, tmp_path, rc):
    endpoint, client = s3
    publish_everything(client)
    env, stubs = node(tmp_path, endpoint)
    programs = Path(env["AICLUSTER_BIN"])
    (programs / "aicluster-monitoring").write_text(f'#!/bin/bash\necho "aicluster-monitoring $*" >> "{stubs}/calls"\nexit {rc}\n')
    (programs / "aicluster-monitoring").chmod(0o755)
    result = run(env)
    assert result.returncode == 0, result.stderr
    started = [c for c in (stubs / "calls").read_text().splitlines() if c.startswith("aicluster-monitoring ")]
    login_env = Path(env["AICLUSTER_ROOT"]) / "etc/aicluster/login.env"
    assert started == [f"aicluster-monitoring --cloud aws --role login --env {login_env} --background"]
    assert ("this node is not monitored" in result.stderr) == bool(rc)


# --- a baked image: the login node's boot installs nothing (docs/images.md) -----------------------

# Anything that installs, downloads or builds: recorded, never run (curl and apt-get already are).
INSTALLERS = ("apt-get", "apt-mark", "curl", "wget", "git", "make", "gcc", "cc", "docker", "ctr", "configure",
              "aicluster-install-slurm")


def baked_login(tmp: Path, endpoint: str, contents: str | None, *, sackd: bool = True) -> tuple[dict, Path]:
    """A login node whose image holds what the bake installs: sackd, munge, the pinned enroot (dpkg
    answers its version) and pyxis with the record the bake writes; the real aicluster-node-install,
    and the image's manifest naming `contents` (none: a stock image, nothing installed yet)."""
    from aicluster.render.node_image import MANIFEST
    from tests.support import node_programs

    env, stubs = node(tmp, endpoint)
    root, programs = Path(env["AICLUSTER_ROOT"]), Path(env["AICLUSTER_BIN"])
    node_programs.install(programs, ["aicluster-node-install"], python=sys.executable)
    node_programs.record_slurm_install(programs, stubs / "calls")
    for name in INSTALLERS:
        if not name.startswith("aicluster-"):
            (stubs / name).write_text(f'#!/bin/bash\necho "{name} $*" >> "{stubs}/calls"\n')
            (stubs / name).chmod(0o755)
    if not sackd:
        (stubs / "sackd").unlink()
    plugin = root / PINS.pyxis.plugin.lstrip("/")
    plugin.parent.mkdir(parents=True)
    plugin.write_bytes(PYXIS)
    Path(f"{plugin}.version").write_text(PYXIS_KEY + "\n")
    env["DPKG_VERSION"] = f"{PINS.enroot.version}-1"
    if contents:
        login_env = root / "etc/aicluster/login.env"
        login_env.write_text(login_env.read_text() + f"AICLUSTER_IMAGE_CONTENTS={contents}\n")
        (root / MANIFEST.lstrip("/")).write_text(json.dumps({
            "contents": contents, "built_at": "2026-11-28T07:00:00Z",
            "found": {"slurmd": "slurm 24.11.5", "nvidia_driver": ""}}))
    return env, stubs


def installs(stubs: Path) -> list[str]:
    calls = (stubs / "calls").read_text().splitlines() if (stubs / "calls").exists() else []
    return [c for c in calls if c.split()[0] in INSTALLERS]


def test_a_login_node_on_its_baked_image_joins_and_installs_nothing(s3, tmp_path):
    from aicluster.render.node_image import contents_key

    endpoint, client = s3
    publish_everything(client)
    key = contents_key("aws")
    env, stubs = baked_login(tmp_path, endpoint, key)
    result = run(env)
    assert result.returncode == 0, result.stderr
    assert installs(stubs) == []
    assert f"baked image: contents {key}" in result.stderr
    assert "systemctl restart sackd" in (stubs / "calls").read_text()


def test_the_same_login_boot_without_a_baked_image_does_install(s3, tmp_path):
    """The control: a stock image (no sackd) installs munge and builds Slurm, and the recorders see it."""
    from aicluster.catalog.slurm_release import slurm_release

    endpoint, client = s3
    publish_everything(client)
    env, stubs = baked_login(tmp_path, endpoint, None, sackd=False)
    r = slurm_release()
    login_env = Path(env["AICLUSTER_ROOT"]) / "etc/aicluster/login.env"
    login_env.write_text(login_env.read_text() + f"AICLUSTER_SLURM_VERSION={r.version}\n"
                         f"AICLUSTER_SLURM_SHA256={r.sha256}\nAICLUSTER_SLURM_SIZE={r.size}\n"
                         f"AICLUSTER_SLURM_URLS={' '.join(r.urls)}\n")
    run(env)
    seen = installs(stubs)
    assert "apt-get install -y -q munge" in seen
    assert f"aicluster-install-slurm {r.install_args()}" in seen


def test_a_login_node_on_another_image_never_joins(s3, tmp_path):
    endpoint, client = s3
    publish_everything(client)
    env, stubs = baked_login(tmp_path, endpoint, "00000000deadbeef")
    login_env = Path(env["AICLUSTER_ROOT"]) / "etc/aicluster/login.env"
    from aicluster.render.node_image import contents_key
    login_env.write_text(login_env.read_text().replace("AICLUSTER_IMAGE_CONTENTS=00000000deadbeef",
                                                       f"AICLUSTER_IMAGE_CONTENTS={contents_key('aws')}"))
    result = run(env)
    assert result.returncode == 1 and installs(stubs) == []
    assert f"baked for contents 00000000deadbeef, this cluster's pins are {contents_key('aws')}" in result.stderr
    calls = stubs / "calls"
    assert not calls.exists() or "sackd" not in calls.read_text()      # never joined
