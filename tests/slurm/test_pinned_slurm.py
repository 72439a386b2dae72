"""One pinned Slurm (issue 15, item 8): head, login and compute nodes of every Slurm stack install
the catalog's slurm-wlm package version (catalog/slurm_release.yaml), pin it with apt and hold it,
so no node ever runs another Slurm than its controller. And a node whose image brings another
slurmd never joins."""
from __future__ import annotations

import pytest
import yaml

from aicluster.catalog.slurm_release import ROLES, slurm_release
from tests.support.node_bootstrap import AWS_SCRIPT, GCP_SCRIPT, aws, ec2_endpoint, meta, node  # noqa: F401
from tests.support import STACK_NAMES, stack_spec
from tests.support.stack_plans import stack_result

PIN = slurm_release()
SLURM_PACKAGES = {"slurmd", "slurmctld", "slurmdbd", "slurm-client", "sackd", "slurm-wlm", "slurmrestd"}


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


def _versions(doc: dict) -> dict[str, str | None]:
    """Slurm package -> the version cloud-init installs it at (None: unpinned)."""
    out = {}
    for entry in doc.get("packages", []):
        name, version = (entry[0], entry[1]) if isinstance(entry, list) else (entry, None)
        if name in SLURM_PACKAGES:
            out[name] = version
    return out


@pytest.mark.parametrize("stack", slurm_stacks())
def test_every_role_installs_the_one_pinned_slurm(stack):
    seen = {}
    for key, doc in _user_data(stack).items():
        role = _role(key, doc)
        if role is None:
            continue
        files = {f["path"]: f["content"] for f in doc.get("write_files", [])}
        if role == "compute":
            # The bootstrap installs slurmd=<AICLUSTER_SLURM_VERSION> (test below).
            env = dict(line.split("=", 1) for line in files["/etc/aicluster/node.env"].splitlines() if "=" in line)
            seen[role] = {"slurmd": env.get("AICLUSTER_SLURM_VERSION")}
            continue
        versions = _versions(doc)
        assert set(versions) == set(PIN.packages[role]), (key, versions)
        seen[role] = versions
        # The apt pin, written before cloud-init installs packages, and the hold after.
        assert files["/etc/apt/preferences.d/aicluster-slurm"].strip() == PIN.apt_preferences.strip(), key
        holds = [c for c in doc["runcmd"] if isinstance(c, list) and c[:2] == ["apt-mark", "hold"]]
        assert holds == [["apt-mark", "hold", *PIN.hold_args(role).split()]], key
    assert set(seen) == set(ROLES), f"{stack}: roles with Slurm: {sorted(seen)}"
    versions = {v for role in seen.values() for v in role.values()}
    assert versions == {PIN.package_version}, f"{stack}: {seen}"


@pytest.mark.parametrize("script", [AWS_SCRIPT, GCP_SCRIPT], ids=["aws", "gcp"])
def test_the_bootstraps_install_the_node_env_version(script):
    text = script.read_text()
    assert '"slurmd=$slurm_version"' in text
    assert "apt-mark hold " + PIN.hold_args("compute") in text
    assert "apt-get install -y -q slurmd " not in text       # never an unpinned slurmd


def test_the_pin_is_a_build_of_its_release():
    assert PIN.package_version.startswith(PIN.upstream_version + "-")
    assert PIN.upstream_version.startswith(PIN.release + ".")
    assert "checked on" in PIN.source


# --- the compute bootstrap, run ------------------------------------------------------------------

def _installing_apt_get(node) -> None:
    """apt-get that records, and on `install` puts a slurmd answering the pinned version on PATH."""
    (node.root / "etc" / "apt" / "preferences.d").mkdir(parents=True)
    (node.bin / "slurmd").unlink()
    stub = node.bin / "apt-get"
    stub.write_text('#!/bin/bash\necho "apt-get $*" >> "${0%/*}/calls"\n'
                    'if [[ $* == *install* ]]; then\n'
                    f'  printf "#!/bin/bash\\necho slurm-wlm {PIN.upstream_version}\\n" > "${{0%/*}}/slurmd"\n'
                    '  chmod +x "${0%/*}/slurmd"\nfi\n')
    stub.chmod(0o755)


def test_a_node_without_slurm_installs_the_pin_and_holds_it(aws):
    _installing_apt_get(aws)
    run = aws.run(AWS_SCRIPT)
    assert run.returncode == 0, run.stderr
    calls = aws.calls()
    assert f"apt-get install -y -q slurmd={PIN.package_version} munge python3-boto3" in calls
    assert "apt-mark hold slurmd slurm-wlm-basic-plugins" in calls
    pin = (aws.root / "etc" / "apt" / "preferences.d" / "aicluster-slurm").read_text()
    assert pin.splitlines() == [ln for ln in PIN.apt_preferences.splitlines() if not ln.startswith("#")]
    assert aws.slurmd_started()


def test_an_image_with_another_slurmd_never_joins(aws):
    (aws.bin / "slurmd.version").write_text("slurm-wlm 24.11.5\n")
    run = aws.run(AWS_SCRIPT)
    assert run.returncode != 0
    assert not aws.slurmd_started()
    assert aws.error_tag() == f"packages: slurmd is slurm-wlm 24.11.5, the cluster runs {PIN.upstream_version}"


def test_a_node_env_without_the_version_never_joins(aws):
    env = (aws.root / "etc" / "aicluster" / "node.env")
    env.write_text("".join(ln + "\n" for ln in env.read_text().splitlines() if not ln.startswith("AICLUSTER_SLURM_VERSION=")))
    run = aws.run(AWS_SCRIPT)
    assert run.returncode != 0 and not aws.slurmd_started()
    assert "AICLUSTER_SLURM_VERSION" in aws.error_tag()
