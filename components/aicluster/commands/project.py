"""`aicluster new DIR`: a Pulumi project of the user's own, outside this repository.

The project is small on purpose: Pulumi.yaml (python runtime, its own virtualenv), a two-line
`__main__.py` that runs the installed package's program, one stack file holding the provider's
region (and project) and the cluster spec under `aicluster:cluster`, a requirements.txt pinning
the aicluster that made it, a .gitignore and a README.md with the next commands. Every aicluster
command run inside DIR finds it (commands/stacks.py), so `aicluster plan` there plans its stack.

The spec comes from a bare spec file or a stack file (`--from`), an example stack (`--stack`), or
the default example; it is validated (parsed, designed) before anything is written, and DIR must
not exist or be empty: nothing of the user's is ever overwritten.
"""
from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aicluster.errors import Problem, SpecError

# Pulumi's rules for names (pulumi/sdk go/common/tokens): a project name is letters, digits,
# `_`, `.` and `-` (at most 100); a stack name the same.
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
_EXAMPLE_GCP_PROJECT = "example-ml-project"    # the example stacks' placeholder gcp:project


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "new", help="make a Pulumi project of your own for one cluster (Pulumi.yaml, __main__.py, one stack file)",
        description="Write a Pulumi project for one cluster into DIR (which must not exist or be empty): "
                    "Pulumi.yaml, __main__.py (runs the installed aicluster), Pulumi.<stack>.yaml with the "
                    "provider config and the spec under aicluster:cluster, requirements.txt, .gitignore and "
                    "README.md. Then, inside DIR: aicluster plan, check, preflight, diff, up, status, destroy.")
    parser.add_argument("dir", metavar="DIR", type=Path, help="the project's folder (created; must be empty)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--from", dest="source", metavar="SPEC",
                        help="a bare cluster spec YAML or a stack file (Pulumi.<stack>.yaml) to start from")
    source.add_argument("--stack", "-s", metavar="NAME",
                        help="an example stack to start from (`aicluster stacks`; default: aws-p5-slurm)")
    parser.add_argument("--name", "-n", metavar="STACK",
                        help="the stack's name (default: the source stack's name, or the spec's `name`)")
    parser.set_defaults(run=run)


@dataclass(frozen=True)
class NewProject:
    """What `new` writes: the folder, the stack's name and every file's text."""
    root: Path
    project: str
    stack: str
    files: dict[str, str]


def run(args: argparse.Namespace) -> int:
    made = create_project(args.dir, source=args.source, example=args.stack, stack=args.name)
    print(f"wrote the Pulumi project {made.project} to {made.root}: {', '.join(sorted(made.files))}")
    print(f"next: cd {made.root} && aicluster plan   (README.md there lists every step to `aicluster up`)")
    return 0


def create_project(folder: Path, *, source: str | None = None, example: str | None = None,
                   stack: str | None = None) -> NewProject:
    """Validate everything, then write the project into `folder`; a SpecError (exit 2) leaves the
    file system as it was."""
    from aicluster.commands import stacks

    _check_empty(folder)
    if source is not None and example is not None:
        raise SpecError.one("--stack", example, "either --from SPEC or --stack NAME, not both", subject="argument")
    if source is not None:
        config = stacks.read_stack(source)
    else:
        config = _read_example(example or stacks.DEFAULT_STACK)
    spec = _validated_spec(config)
    is_stack_file = config.path.name.startswith("Pulumi.")
    name = stack or (config.name if is_stack_file else spec.name)
    if not _NAME.match(name):
        raise SpecError.one("--name", name, "a stack name of letters, digits, `_`, `.` and `-` (at most 100)",
                            subject="argument")
    project = _project_name(folder)
    files = project_files(project, name, _stack_config(config.config, spec), spec)
    _write(folder, files)
    return NewProject(folder, project, name, files)


def _check_empty(folder: Path) -> None:
    if folder.exists() and not folder.is_dir():
        raise SpecError.one("DIR", str(folder), "a folder to create (this is a file)", subject="argument")
    if folder.is_dir() and any(folder.iterdir()):
        raise SpecError.one("DIR", str(folder), "a new or empty folder (this one has files; aicluster new never "
                                                "overwrites them)", subject="argument")


def _read_example(name: str):
    from aicluster.commands import stacks

    path = stacks.examples_dir() / f"Pulumi.{name}.yaml"
    if not path.is_file():
        names = stacks.example_names()
        raise SpecError.one("--stack", name, f"an example stack: {', '.join(names)}", names, subject="argument")
    return stacks.read_stack(str(path))


def _validated_spec(config) -> Any:
    """The spec parsed and designed, as `aicluster plan` does before it runs the program."""
    from aicluster.cluster import check_buildable, check_provider_region
    from aicluster.design.cluster import design_cluster
    from aicluster.spec.cluster import parse_spec

    source = str(config.path)
    spec = parse_spec(config.spec_data, source=source)
    try:
        check_provider_region(spec, config.config.get(f"{spec.cloud}:region"))
        check_buildable(design_cluster(spec))
    except SpecError as exc:
        raise exc.with_source(source) from None
    return spec


def _project_name(folder: Path) -> str:
    """The Pulumi project's name: the folder's, in the characters Pulumi allows."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", folder.resolve().name).strip("-.")[:100]
    return name or "aicluster-cluster"


def _stack_config(config: dict[str, Any], spec: Any) -> dict[str, Any]:
    """The stack's config: the provider's region first (the spec's), the source's other keys
    (gcp:project, ...), and the spec last."""
    from aicluster.commands.stacks import SPEC_KEY

    encrypted = sorted(k for k, v in config.items() if isinstance(v, dict) and "secure" in v)
    if encrypted:    # encrypted with the source stack's key: the new stack could not read them
        raise SpecError([Problem(f"config.{k}", "secure: ...", "a plain value: secrets encrypted for another stack "
                                                               "cannot be copied; leave them out and set them in the "
                                                               "new project with `pulumi config set --secret`")
                         for k in encrypted], subject="stack file")
    out: dict[str, Any] = {f"{spec.cloud}:region": spec.region}
    out.update((k, v) for k, v in config.items() if k != SPEC_KEY)
    out[SPEC_KEY] = config[SPEC_KEY]
    return out


def installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("aicluster")
    except PackageNotFoundError:   # run from a checkout without an install: the checkout's version
        import tomllib

        from aicluster.resources import CHECKOUT_DIR

        return tomllib.loads((CHECKOUT_DIR / "pyproject.toml").read_text())["project"]["version"]


def _installed_from() -> str | None:
    """Where the installed aicluster came from when not from a package index (a clone, a wheel file)."""
    import json
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        direct = distribution("aicluster").read_text("direct_url.json")
    except PackageNotFoundError:
        return None
    try:
        url = json.loads(direct).get("url") if direct else None
    except ValueError:
        return None
    return url if isinstance(url, str) and url.startswith("file://") else None


def project_files(project: str, stack: str, config: dict[str, Any], spec: Any) -> dict[str, str]:
    """Every file of the project, by its path in DIR."""
    import yaml

    version = installed_version()
    where = _installed_from()
    pulumi_yaml = yaml.safe_dump({
        "name": project,
        "description": f"aicluster: the {spec.cloud} cluster {spec.name} ({spec.scheduler})",
        "runtime": {"name": "python", "options": {"toolchain": "pip", "virtualenv": ".venv"}},
        "main": "__main__.py",
    }, sort_keys=False)
    stack_yaml = (f"# Stack {stack}: the cluster spec is `aicluster:cluster` (its keys: `aicluster schema "
                  "--format markdown`).\n# Plan it offline with `aicluster plan`; deploy with `aicluster up`.\n"
                  + yaml.safe_dump({"config": config}, sort_keys=False, default_flow_style=False, width=100))
    requirements = f"aicluster=={version}\n"
    if where:
        requirements = (f"# This aicluster was installed from {where}; where it is on no package index, install\n"
                        f"# it from there into .venv (README.md, step 1) instead of this line.\n" + requirements)
    return {
        "Pulumi.yaml": "# A Pulumi project made by `aicluster new`; the cluster spec is in the stack file.\n"
                       + pulumi_yaml,
        "__main__.py": '"""Pulumi entry point: the installed aicluster builds the cluster from this stack\'s '
                       '`aicluster:cluster`."""\nfrom aicluster.cluster import program\n\nprogram()\n',
        f"Pulumi.{stack}.yaml": stack_yaml,
        "requirements.txt": requirements,
        ".gitignore": ".venv/\n__pycache__/\n*.pyc\n# `aicluster plan --out plan`: rendered files, made again at will\nplan/\n",
        "README.md": _readme(project, stack, spec, config, version, where),
    }


def _readme(project: str, stack: str, spec: Any, config: dict[str, Any], version: str, where: str | None) -> str:
    install = f"pip install -r requirements.txt" if not where else f"pip install {where.removeprefix('file://')}"
    gcp_project = config.get("gcp:project")
    if spec.cloud == "aws":
        credentials = ("AWS credentials for the account to deploy into: `aws configure` or `aws sso login`, or\n"
                       "`AWS_PROFILE`; the region is the stack's `aws:region`.")
    else:
        credentials = ("Google Cloud credentials: `gcloud auth application-default login`. The stack's\n"
                       "`gcp:project` is the project to deploy into"
                       + (": it is still the example's placeholder, set yours with\n"
                          "`pulumi config set gcp:project YOUR-PROJECT` (or edit the stack file)."
                          if gcp_project in (None, _EXAMPLE_GCP_PROJECT) else "."))
    return f"""# {project}

An AI training cluster ({spec.cloud}, {spec.scheduler}): a Pulumi project made by `aicluster new`
with aicluster {version}. The cluster spec is `aicluster:cluster` in `Pulumi.{stack}.yaml`; its keys
are in aicluster's spec reference (`aicluster schema --format markdown`).

Every `aicluster` command run in this folder (or below it) means this project and its one stack.

## 1. Install

```sh
python -m venv .venv && . .venv/bin/activate
{install}
```

Pulumi runs `__main__.py` in `.venv` (Pulumi.yaml). `up`, `preview`, `status` and `destroy` need the
Pulumi CLI (https://www.pulumi.com/docs/install/); everything before them works without it.

## 2. Plan and check, offline

```sh
aicluster plan                # resources, rendered files, balance report: no cloud, no Pulumi CLI
aicluster plan --out plan     # also every rendered file (user data, slurm.conf, manifests) in plan/
aicluster check               # the policy pack over the planned resources (exit 1 on a violation)
```

## 3. Credentials, then preflight and diff

{credentials}

```sh
aicluster preflight           # region, zone, offerings; quotas, capacity, images: what `up` would trip over
```

Before you deploy an edit of a running cluster, see what it does (stateful replacements exit 3):

```sh
git show HEAD:Pulumi.{stack}.yaml > /tmp/before.yaml   # the stack file as deployed (or a copy you kept)
aicluster diff /tmp/before.yaml Pulumi.{stack}.yaml
aicluster preview             # Pulumi's own view against the stack's state
```

## 4. Where Pulumi keeps the stack's state

Log in once, to Pulumi Cloud (`pulumi login`) or to a local backend on this machine
(`pulumi login --local`, state in ~/.pulumi) or in a folder or bucket (`pulumi login file://DIR`,
`s3://BUCKET`, `gs://BUCKET`). A local backend encrypts the stack's secrets with a passphrase:
export `PULUMI_CONFIG_PASSPHRASE` (or `PULUMI_CONFIG_PASSPHRASE_FILE`, a file holding it) in every
shell that deploys. Keep it: without it the stack's secrets cannot be read again.

## 5. Deploy, log in, tear down

```sh
aicluster up                  # plans offline, preflights a new stack, then `pulumi up` (streams its output)
aicluster preview             # what `pulumi up` would do, without doing it
aicluster status              # the stack's outputs and the command that logs you in
aicluster destroy             # back to nothing (the stack's teardown policy: aicluster's docs/teardown.md)
```

The stack is `{stack}`; pass `--stack NAME` once you add more stack files (`Pulumi.<NAME>.yaml`).
"""


def _write(folder: Path, files: dict[str, str]) -> None:
    """Write every file, or none: a failure part-way removes what this call wrote."""
    created = not folder.exists()
    written: list[Path] = []
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            path = folder / name
            with open(path, "x") as fh:     # "x": never over a file that appeared meanwhile
                written.append(path)
                fh.write(text)
    except OSError as exc:
        for path in written:
            path.unlink(missing_ok=True)
        if created:
            try:
                folder.rmdir()
            except OSError:
                pass
        raise SpecError([Problem("DIR", str(folder), f"a folder aicluster can write ({exc.strerror or exc})")],
                        subject="argument") from None
