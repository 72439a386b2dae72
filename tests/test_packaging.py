"""The distribution `aicluster` is one import package, `aicluster`, that works outside the checkout.

The wheel built from this repository is installed into a fresh virtual environment in an empty
folder (its dependencies come from the test environment's site-packages, added by path, so
neither the checkout nor its editable install is visible there). There it plans and checks a
copied stack file, its components import, and `import components` fails.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCE_ROOT = ROOT / "components"


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_code_folder_is_a_listed_package_and_the_data_folders_ship():
    setup = _pyproject()["tool"]["setuptools"]
    listed = set(setup["packages"])
    code = {".".join(p.parent.relative_to(SOURCE_ROOT).parts) for p in SOURCE_ROOT.rglob("__init__.py")
            if "__pycache__" not in p.parts}
    ours = {p for p in listed if not p.startswith(("aicluster.templates", "aicluster.policies", "aicluster.stacks"))}
    # Data folders inside the package (aicluster.node.bin: the node programs installed as they are)
    # are listed too, without an __init__, and ship all their files as package data.
    data = {p for p in ours if not SOURCE_ROOT.joinpath(*p.split("."), "__init__.py").exists()}
    assert all(setup["package-data"].get(p) == ["*"] for p in data), sorted(data)
    assert code == ours - data
    pack = {".".join(("aicluster", "policies", *p.parent.relative_to(ROOT / "policies").parts))
            for p in (ROOT / "policies").rglob("__init__.py") if "__pycache__" not in p.parts}
    assert pack <= listed, f"policy pack folders missing from packages: {sorted(pack - listed)}"
    assert setup["package-dir"] == {"": "components", "aicluster.templates": "templates",
                                    "aicluster.policies": "policies", "aicluster.stacks": "stacks"}
    assert "aicluster.stacks" in listed and setup["package-data"]["aicluster.stacks"] == ["Pulumi.*.yaml"]
    assert not (SOURCE_ROOT / "__init__.py").exists(), "components/ is a source root, not a package"
    assert (SOURCE_ROOT / "aicluster" / "py.typed").is_file()


def test_runtime_imports_are_runtime_dependencies():
    """jsonschema is imported by `aicluster check --config`; it must not come from the test extra only."""
    deps = " ".join(_pyproject()["project"]["dependencies"])
    for name in ("pulumi", "pulumi-aws", "pulumi-gcp", "pulumi-policy", "pulumi-random", "pulumi-kubernetes",
                 "jinja2", "pydantic", "pyyaml", "jsonschema"):
        assert f'{name}>=' in deps.replace('"', ""), name


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv in an empty folder with only the wheel installed; returns its python."""
    work = tmp_path_factory.mktemp("wheel")
    # Built from a copy of what the distribution is made of: a build/ folder left in the checkout
    # by an earlier build would otherwise slip removed modules into the wheel.
    source = work / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    for folder in ("components", "templates", "policies", "stacks"):
        shutil.copytree(ROOT / folder, source / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc"))
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(work / "dist"), str(source)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-3000:]
    wheel = next((work / "dist").glob("aicluster-*.whl"))
    env = work / "env"
    venv.EnvBuilder(with_pip=False).create(env)
    python = env / "bin" / "python"
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                              "--no-index", str(wheel)], capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr[-3000:]
    # The dependencies: the test environment's site-packages by path. A plain path entry runs no
    # .pth file in it, so the checkout's editable install of aicluster stays invisible.
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "zz_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def _run(python: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)


def test_the_wheel_plans_and_checks_a_copied_stack_outside_the_checkout(installed, tmp_path):
    shutil.copy(ROOT / "stacks" / "Pulumi.aws-p4d-small.yaml", tmp_path / "cluster.yaml")
    where = _run(installed, tmp_path, "-c", "import aicluster, sys; print(aicluster.__file__)")
    assert where.returncode == 0 and str(ROOT) not in where.stdout, where.stdout + where.stderr
    aicluster = installed.parent / "aicluster"
    plan = subprocess.run([str(aicluster), "plan", "cluster.yaml", "--out", "out"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert plan.returncode == 0, plan.stdout[-2000:] + plan.stderr[-2000:]
    assert (tmp_path / "out" / "slurm" / "slurm.conf").is_file()          # templates shipped
    check = subprocess.run([str(aicluster), "check", "cluster.yaml"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]   # the policy pack shipped
    assert "AIC-NET-001" in check.stdout


def test_aicluster_new_projects_plan_from_the_wheel_outside_the_checkout(installed, tmp_path):
    """The done-when of `aicluster new`: an example stack shipped in the wheel becomes a project of
    its own, and `aicluster plan` (no arguments) inside it plans that project's stack."""
    aicluster = installed.parent / "aicluster"
    shipped = _run(installed, tmp_path, "-c", "from aicluster.commands.stacks import examples_dir, example_names; "
                                              "print(examples_dir()); print(' '.join(example_names()))")
    assert shipped.returncode == 0, shipped.stderr
    folder, names = shipped.stdout.splitlines()
    assert str(ROOT) not in folder and "site-packages" in folder, folder
    assert names.split() == sorted(p.name[len("Pulumi."):-len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))
    for stack, cloud in (("aws-p4d-small", "aws"), ("gcp-a3mega-slurm", "gcp")):
        new = subprocess.run([str(aicluster), "new", f"proj-{stack}", "--stack", stack], cwd=tmp_path,
                             capture_output=True, text=True, timeout=300)
        assert new.returncode == 0, new.stdout[-2000:] + new.stderr[-2000:]
        project = tmp_path / f"proj-{stack}"
        pin = f"aicluster=={_pyproject()['project']['version']}"
        assert pin in (project / "requirements.txt").read_text().splitlines()      # the wheel's own version
        plan = subprocess.run([str(aicluster), "plan", "--format", "json"], cwd=project,
                              capture_output=True, text=True, timeout=300)
        assert plan.returncode == 0, plan.stdout[-2000:] + plan.stderr[-2000:]
        doc = json.loads(plan.stdout)
        assert doc["stack"] == stack and doc["cluster"]["cloud"] == cloud
        # `pulumi up` would run this very program: its __main__.py imports the installed package.
        main = _run(installed, project, "-c", "import ast, pathlib; ast.parse(pathlib.Path('__main__.py').read_text()); "
                                               "import aicluster.cluster as c; print(c.__file__)")
        assert main.returncode == 0 and str(ROOT) not in main.stdout, main.stdout + main.stderr


def test_the_wheel_exports_components_and_no_top_level_components(installed, tmp_path):
    ok = _run(installed, tmp_path, "-c", "from aicluster.aws import GpuPool, GpuPoolArgs; "
                                         "from aicluster.gcp import GpuPool as G, GpuPoolArgs as GA")
    assert ok.returncode == 0, ok.stderr
    gone = _run(installed, tmp_path, "-c", "import components")
    assert gone.returncode != 0 and "No module named 'components'" in gone.stderr


def _package_inits() -> list[str]:
    return sorted(".".join(p.parent.relative_to(SOURCE_ROOT).parts) for p in SOURCE_ROOT.rglob("__init__.py")
                  if "__pycache__" not in p.parts)


@pytest.mark.parametrize("package", _package_inits())
def test_every_package_declares_an_honest_all(package):
    """Every name in __all__ exists; aicluster.aws and aicluster.gcp export every component of
    theirs and its Args."""
    import importlib
    import inspect
    import pkgutil

    import pulumi

    module = importlib.import_module(package)
    assert isinstance(getattr(module, "__all__", None), (list, tuple)), f"{package} declares no __all__"
    for name in module.__all__:
        assert getattr(module, name, None) is not None, f"{package}.__all__ names {name}, which does not exist"
    if package in ("aicluster.aws", "aicluster.gcp"):
        for info in pkgutil.iter_modules(module.__path__):
            sub = importlib.import_module(f"{package}.{info.name}")
            for name, value in vars(sub).items():
                if (inspect.isclass(value) and issubclass(value, pulumi.ComponentResource)
                        and value.__module__ == sub.__name__ and not name.startswith("_")):
                    assert name in module.__all__, f"{package} does not export its component {name}"
                    assert f"{name}Args" in module.__all__ or name == "GkeNodePools", \
                        f"{package} does not export {name}Args"
