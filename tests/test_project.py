"""The project files themselves: Pulumi.yaml against Pulumi's schema, bounded dependency pins, the
licence metadata, the vendored schemas, and the fresh-machine set-up (`make test` installs or asks for
the programs the tests run)."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import jsonschema
import yaml

from tests.support import ROOT, SCHEMAS

INSTALL_SCRIPT = ROOT / ".ci" / "install-system-deps"


def test_pulumi_yaml_validates_against_the_project_schema():
    schema_path = SCHEMAS / "pulumi-project.schema.json"
    assert schema_path.is_file(), f"missing {schema_path}"
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    jsonschema.validate(project, json.loads(schema_path.read_text()))
    assert project["name"] == "aicluster"
    assert project["main"] == "__main__.py"
    assert project["stackConfigDir"] == "stacks"
    assert project["runtime"] == {"name": "python", "options": {"toolchain": "pip", "virtualenv": ".venv"}}


def test_every_dependency_has_a_lower_and_an_upper_bound():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = project["dependencies"] + project["optional-dependencies"]["test"]
    for pin in pins:
        assert re.search(r">=\s*[\d.]+", pin) and re.search(r"<\s*[\d.]+", pin), pin
    names = {re.split(r"[<>=\[]", pin)[0] for pin in project["dependencies"]}
    assert {"pulumi", "pulumi-aws", "pulumi-gcp", "pulumi-policy", "pulumi-random", "jinja2", "pydantic",
            "pyyaml"} <= names
    assert any(p.startswith("pulumi-aws>=7") and "<8" in p for p in project["dependencies"])
    assert any(p.startswith("pulumi-gcp>=10") and "<11" in p for p in project["dependencies"])
    assert any(p.startswith("pulumi-kubernetes>=4.18") and "<5" in p for p in project["dependencies"])
    assert any(p.startswith("kubernetes-validate>=") for p in project["optional-dependencies"]["test"])
    assert project["scripts"]["aicluster"] == "aicluster.cli:main"


def test_the_licence_is_an_spdx_expression_with_licence_files():
    """PEP 639: `license` is an SPDX string (the table form is deprecated) and every `license-files`
    glob matches a file (setuptools warns on one that does not, and will refuse it)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = pyproject["project"]
    assert project["license"] == "Apache-2.0"
    assert isinstance(project["license-files"], list)
    for pattern in project["license-files"]:
        assert list(ROOT.glob(pattern)), f"license-files pattern {pattern!r} matches no file"
    assert not any("License ::" in c for c in project.get("classifiers", [])), "PEP 639: no licence classifiers"
    floors = [int(m[1]) for r in pyproject["build-system"]["requires"] if (m := re.match(r"setuptools\s*>=\s*(\d+)", r))]
    assert floors and floors[0] >= 77, "setuptools 77 is the first to read PEP 639 licence metadata"


def test_vendored_schemas_match_the_checksums_their_readme_records():
    readme = (SCHEMAS / "README.md").read_text()
    recorded = {name: digest for digest, name in re.findall(r"^([0-9a-f]{64})  (\S+)$", readme, re.M)}
    schemas = sorted(str(p.relative_to(SCHEMAS)) for p in SCHEMAS.rglob("*") if p.suffix in (".json", ".yaml"))
    assert schemas and sorted(recorded) == schemas
    for name in schemas:
        assert hashlib.sha256((SCHEMAS / name).read_bytes()).hexdigest() == recorded[name], f"{name} differs from upstream"
        # A folder of CRDs shares one row (its files' common prefix and _*.yaml); any other file has its own.
        rows = {f"`{name}`", f"`{name.rsplit('_', 1)[0]}_*.yaml`"}
        assert any(row in readme for row in rows), f"{name} has no source row in the README"
    assert (SCHEMAS / "NOTICE").is_file() and (SCHEMAS / "LICENSE-Apache-2.0.txt").is_file()


def test_no_test_reads_beside_the_checkout():
    """A clone passes `make test` with nothing beside it: no test reaches into ../shared or the like."""
    outside = re.compile(r"ROOT\.parent\b|vendor-data|/work/shared|\.\./shared")
    here = Path(__file__).resolve()
    offenders = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "tests").rglob("*.py")) if p != here
                 for n, line in enumerate(p.read_text().splitlines(), 1) if outside.search(line)]
    assert not offenders, offenders


def test_make_test_and_ci_run_install_the_system_programs_through_one_script():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^test: system-deps \$\(VENV\)/\.installed$", makefile, re.M), "the check runs before the venv"
    assert ".ci/install-system-deps" in makefile
    ci_run = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if not line.lstrip().startswith("#")]
    assert ".ci/install-system-deps" in ci_run and not any("apt-get" in line for line in ci_run)
    assert os.access(INSTALL_SCRIPT, os.X_OK)


def _run_install_script(tmp_path, *args, apt_get_exit=None, uid_root=True):
    """Run the script with a PATH of a few core tools only (no cloud-init, no Slurm client, no munge
    client; a `shellcheck` that is not executable, which bash's `command -v` still names) and, when
    asked, a stub apt-get that exits with the given status and records its arguments in
    tmp_path/apt-get.calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    for tool in ("bash", "dirname", "mktemp", "rm", "tail", "env", "cat", "make"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    (bin_dir / "shellcheck").write_text("not a program\n")
    (bin_dir / "id").write_text(f"#!{shutil.which('bash')}\necho {0 if uid_root else 1000}\n")
    (bin_dir / "id").chmod(0o755)
    if apt_get_exit is not None:
        calls = tmp_path / "apt-get.calls"
        (bin_dir / "apt-get").write_text(f"#!{shutil.which('bash')}\necho \"$*\" >> {calls}\nexit {apt_get_exit}\n")
        (bin_dir / "apt-get").chmod(0o755)
    env = {"PATH": str(bin_dir), "PYTHON": sys.executable, "HOME": str(tmp_path), "CI": "true"}
    return subprocess.run([shutil.which("bash"), str(INSTALL_SCRIPT), *args], env=env, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=60)


def test_missing_programs_fail_at_once_with_the_command_to_run_when_apt_get_fails(tmp_path):
    run = _run_install_script(tmp_path, apt_get_exit=100)
    assert run.returncode == 1, run.stderr
    assert "shellcheck" in run.stderr and "cloud-init" in run.stderr and "apt-get install failed" in run.stderr
    command = re.search(r"^    (apt-get update && apt-get install -y --no-install-recommends .*)$", run.stderr, re.M)
    assert command, run.stderr
    # (Daemons in sbin, slurmdbd and mariadbd among them, are found there even on this PATH.)
    assert {"shellcheck", "cloud-init", "slurm-client", "munge", "mariadb-server-core", "mariadb-client-core",
            "openssl"} <= set(command[1].split())
    calls = (tmp_path / "apt-get.calls").read_text().splitlines()
    assert calls[0].startswith("update") and calls[1].startswith("install -y -q --no-install-recommends")


def test_missing_programs_without_apt_get_or_with_check_only_are_not_installed(tmp_path):
    no_apt = _run_install_script(tmp_path / "no-apt")
    assert no_apt.returncode == 1 and "no apt-get" in no_apt.stderr and "shellcheck" in no_apt.stderr
    check_only = _run_install_script(tmp_path / "b", "--check-only", apt_get_exit=0)
    assert check_only.returncode == 1 and "--check-only" in check_only.stderr
    assert not (tmp_path / "b" / "apt-get.calls").exists(), "--check-only must not run apt-get"


def test_without_root_or_sudo_it_prints_the_root_command(tmp_path):
    run = _run_install_script(tmp_path, apt_get_exit=0, uid_root=False)
    assert run.returncode == 1 and "sudo is not installed" in run.stderr
    assert "su -c 'apt-get update && apt-get install -y --no-install-recommends " in run.stderr
    assert not (tmp_path / "apt-get.calls").exists()


# ---------------------------------------------------------------- the lock file


LOCK = ROOT / "requirements.lock"


def _locked() -> dict[str, list[tuple[str, str]]]:
    """name -> [(version, environment marker)] of requirements.lock; each entry must carry hashes."""
    entries: dict[str, list[tuple[str, str]]] = {}
    text = LOCK.read_text().replace("\\\n", " ")
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = re.match(r"^([A-Za-z0-9_.-]+)==([^\s;]+)\s*(?:;\s*(.*?))?\s*((?:--hash=sha256:[0-9a-f]{64}\s*)+)$",
                         line.strip())
        assert match, f"requirements.lock: not an exact, hashed pin: {line[:120]}"
        name = re.sub(r"[-_.]+", "-", match.group(1)).lower()
        entries.setdefault(name, []).append((match.group(2), match.group(3) or ""))
    return entries


def test_make_installs_exactly_the_locked_versions_checked_by_hash():
    makefile = (ROOT / "Makefile").read_text()
    installed = re.search(r"^\$\(VENV\)/\.installed:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert installed, "the venv's install rule"
    recipe = installed.group(1)
    assert "--require-hashes -r $(LOCK)" in recipe and "LOCK   := requirements.lock" in makefile
    assert "--no-deps" in recipe, "aicluster itself must not resolve anything beyond the lock"
    assert "$(LOCK)" in installed.group(0).splitlines()[0], "a changed lock reinstalls"
    assert re.search(r"^lock:", makefile, re.M), "`make lock` refreshes the lock"


def test_the_lock_pins_every_package_this_venv_runs_and_satisfies_pyproject():
    """What the suite runs with is what the lock says, so a fresh machine gets what CI tested."""
    from importlib import metadata

    from packaging.markers import Marker
    from packaging.requirements import Requirement

    locked = _locked()

    def version_here(name: str) -> str | None:
        for version, marker in locked.get(name, []):
            if not marker or Marker(marker).evaluate():
                return version
        return None

    drift = []
    for dist in metadata.distributions():
        name = re.sub(r"[-_.]+", "-", dist.metadata["Name"]).lower()
        if name == "aicluster":
            continue
        if version_here(name) != dist.version:
            drift.append(f"{name}: installed {dist.version}, locked {version_here(name)}")
    assert not drift, drift
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for spec in project["dependencies"] + project["optional-dependencies"]["test"]:
        requirement = Requirement(spec.split("#")[0])
        name = re.sub(r"[-_.]+", "-", requirement.name).lower()
        assert version_here(name) is not None, f"{name} is not in the lock: run `make lock`"
        assert requirement.specifier.contains(version_here(name)), f"{name} {version_here(name)} outside {spec}"
