"""One pinned Slurm (issue 15, item 8; issue 26): head, login and compute nodes of every Slurm stack
build the catalog's Slurm from SchedMD's source archive (catalog/slurm_release.yaml) with
aicluster-install-slurm, each download checked against the pinned SHA-256, so no node ever runs
another Slurm than its controller, and no package manager ever moves it. And a node whose image
brings another slurmd never joins. The installer itself, run for real against a fake archive:
tests/scripts/test_install_slurm.py."""
from __future__ import annotations

import sys

import pytest
import yaml

from aicluster.catalog.slurm_release import ROLES, slurm_release
from tests.support.node_bootstrap import AWS_SCRIPT, GCP_SCRIPT, aws, ec2_endpoint, meta, node  # noqa: F401
from tests.support import STACK_NAMES, node_programs, stack_spec
from tests.support.stack_plans import stack_result

PIN = slurm_release()
SLURM_PACKAGES = {"slurmd", "slurmctld", "slurmdbd", "slurm-client", "sackd", "slurm-wlm", "slurmrestd",
                  "libslurm-dev", "slurm-wlm-basic-plugins"}
INSTALLER = "/opt/aicluster/bin/aicluster-install-slurm"


def slurm_stacks() -> list[str]:
    return sorted(s for s in STACK_NAMES if stack_spec(s).get("scheduler", "slurm") == "slurm")


def _user_data(stack: str) -> dict[str, dict]:
    files = stack_result(stack).files
    return {k: yaml.safe_load(v) for k, v in files.items() if k.startswith("user-data/")}


def _role(key: str, doc: dict) -> str | None:
    if key.endswith("-slurm-head.yaml"):
        return "head"
    if "-login-" in key:
        return "login"
    if any(f.get("path") == "/etc/aicluster/node.env" for f in doc.get("write_files", [])):
        return "compute"
    return None


def _env_pin(text: str) -> tuple[str, ...]:
    env = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    return ("--version", env["AICLUSTER_SLURM_VERSION"], "--sha256", env["AICLUSTER_SLURM_SHA256"],
            "--size", env["AICLUSTER_SLURM_SIZE"], *env["AICLUSTER_SLURM_URLS"].split())


@pytest.mark.parametrize("stack", slurm_stacks())
def test_every_role_builds_the_one_pinned_slurm(stack):
    seen = {}
    for key, doc in _user_data(stack).items():
        role = _role(key, doc)
        if role is None:
            continue
        packages = {p[0] if isinstance(p, list) else p for p in doc.get("packages", [])}
        assert not packages & SLURM_PACKAGES, (key, packages)          # never a distribution's Slurm
        files = {f["path"]: f["content"] for f in doc.get("write_files", [])}
        assert "/etc/apt/preferences.d/aicluster-slurm" not in files, key
        assert not [c for c in doc.get("runcmd", []) if isinstance(c, list) and c[:1] == ["apt-mark"]], key
        if role == "head":
            (install,) = [c for c in doc["runcmd"] if isinstance(c, list) and c[0] == INSTALLER]
            seen[role] = tuple(install[1:])
            # Before anything that needs the slurm user or a Slurm daemon.
            runcmd = [c for c in doc["runcmd"] if isinstance(c, list)]
            assert runcmd.index(install) < next(i for i, c in enumerate(runcmd) if c[0] == "install")
        else:
            env = files["/etc/aicluster/login.env" if role == "login" else "/etc/aicluster/node.env"]
            seen[role] = _env_pin(env)
    assert set(seen) == set(ROLES), f"{stack}: roles with Slurm: {sorted(seen)}"
    assert set(seen.values()) == {tuple(PIN.install_args().split())}, f"{stack}: {seen}"


@pytest.mark.parametrize("script", [AWS_SCRIPT, GCP_SCRIPT], ids=["aws", "gcp"])
def test_the_bootstraps_never_install_a_distributions_slurm(script):
    text = script.read_text()
    assert '"$bin/aicluster-node-install" --slurm "${args[@]}" "${urls[@]}"' in text
    for package in ("slurmd=", "apt-get install -y -q slurmd", "apt-mark hold"):
        assert package not in text


def test_the_pin_is_of_its_release_and_sourced():
    assert PIN.version.startswith(PIN.release + ".")
    assert "checked on" in PIN.source and "checked on" in PIN.archive_source
    assert PIN.top_folder == "slurm-slurm-" + PIN.version.replace(".", "-") + "-1"


# --- the compute bootstrap, run ------------------------------------------------------------------

def _installer(node, rc: int = 0, last: str = "Slurm installed") -> None:
    """aicluster-node-install --slurm (aicluster-install-slurm) that records its arguments and, on
    success, puts a slurmd answering the pinned version on PATH; on failure its last line is the reason."""
    (node.bin / "slurmd").unlink()
    node_programs.install(node.programs, ["aicluster-node-install"], python=sys.executable)
    node_programs.record_slurm_install(
        node.programs, node.bin / "calls",
        (f'  printf "#!/bin/bash\\necho slurm {PIN.version}\\n" > {node.bin}/slurmd\n'
         f'  chmod +x {node.bin}/slurmd\n' if rc == 0 else "")
        + f'  echo "aicluster-install-slurm: {last}" >&2\n  exit {rc}\n')


def test_a_node_without_slurm_builds_the_pin(aws):
    _installer(aws)
    run = aws.run(AWS_SCRIPT)
    assert run.returncode == 0, run.stderr
    calls = aws.calls()
    assert "apt-get install -y -q munge python3-boto3" in calls
    assert f"aicluster-install-slurm {PIN.install_args()}" in calls
    assert not [c for c in calls if c.startswith("apt-mark")]
    assert aws.slurmd_started()
    assert (aws.root / "var/log/aicluster-install-slurm.log").read_text().endswith("Slurm installed\n")


def test_a_failed_build_is_the_nodes_reason(aws):
    _installer(aws, rc=1, last="FAILED: no URL gives the pinned archive")
    run = aws.run(AWS_SCRIPT)
    assert run.returncode != 0 and not aws.slurmd_started()
    assert aws.error_tag() == ("packages: aicluster-install-slurm: FAILED: no URL gives the pinned archive "
                               "(aicluster-install-slurm exit 1)")


def test_an_image_with_another_slurmd_never_joins(aws):
    (aws.bin / "slurmd.version").write_text("slurm-wlm 23.11.4\n")
    run = aws.run(AWS_SCRIPT)
    assert run.returncode != 0
    assert not aws.slurmd_started()
    assert aws.error_tag() == f"packages: slurmd is slurm-wlm 23.11.4, the cluster runs {PIN.version}"


@pytest.mark.parametrize("setting", ["AICLUSTER_SLURM_VERSION", "AICLUSTER_SLURM_SHA256", "AICLUSTER_SLURM_URLS"])
def test_a_node_env_without_the_pin_never_joins(aws, setting):
    (aws.bin / "slurmd").unlink()
    env = (aws.root / "etc" / "aicluster" / "node.env")
    env.write_text("".join(ln + "\n" for ln in env.read_text().splitlines() if not ln.startswith(setting + "=")))
    run = aws.run(AWS_SCRIPT)
    assert run.returncode != 0 and not aws.slurmd_started()
    assert setting in aws.error_tag()
