"""The one way aicluster reaches a real stack: Pulumi's Automation API (it ships in the `pulumi`
package and drives the Pulumi CLI the user installs). `up`, `preview`, `status` and `destroy`
(commands/deploy.py, commands/teardown.py) open their stack here; nothing else imports
pulumi.automation, so every other command works with no Pulumi CLI installed.

Tests replace `open_stack` through `STACK_OPENER` with a fake that records the calls; the real
opener is the only code that needs the CLI.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from aicluster.errors import Problem, SpecError

INSTALL_HINT = "install it: curl -fsSL https://get.pulumi.com | sh (https://www.pulumi.com/docs/install/)"


@dataclass(frozen=True)
class StackRef:
    """Which stack of which project: the folder holding Pulumi.yaml and the stack's name."""
    project_dir: Path
    stack: str


def add_stack_arguments(parser: Any) -> None:
    """The arguments that say which stack a lifecycle command means (resolve with `stack_ref`)."""
    parser.add_argument("--stack", "-s", metavar="NAME",
                        help="the stack (Pulumi.<NAME>.yaml in the project); default: the project's only stack")
    parser.add_argument("--cwd", "-C", metavar="DIR", type=Path,
                        help="the project's folder (one holding Pulumi.yaml), default: the working directory "
                             "or the nearest folder above it with an aicluster Pulumi.yaml")


def resolve_stack(stack: str | None = None, start: str | Path | None = None) -> StackRef:
    """Which project and stack a command means: the nearest aicluster project at or above `start`
    (default: the working directory; this checkout's own project when aicluster runs from a
    checkout and no project is nearer), and `stack` in it, or its only stack. Anything else is a
    SpecError (exit 2) naming what there is."""
    from aicluster.commands.stacks import find_project

    if start is not None and not Path(start).is_dir():
        raise SpecError.one("--cwd", str(start), "a folder holding a Pulumi project (Pulumi.yaml)",
                            subject="argument")
    project = find_project(start)
    if project is None:
        raise SpecError([Problem("--cwd", str(Path(start or os.getcwd())),
                                 "a folder in (or under) an aicluster Pulumi project; make one with "
                                 "`aicluster new DIR` (docs/cli.md)")], subject="argument")
    names = project.stack_names()
    if stack is None:
        if len(names) == 1:
            return StackRef(project.root, names[0])
        allowed = (f"a stack named: the project in {project.root} has several: {', '.join(names)}" if names else
                   f"a stack file: the project in {project.root} has none (Pulumi.<stack>.yaml in {project.stack_dir})")
        raise SpecError([Problem("--stack", None, allowed)], subject="argument")
    if stack not in names:
        raise SpecError.one("--stack", stack, f"a stack of the project in {project.root} "
                                              f"(a Pulumi.<stack>.yaml in {project.stack_dir}): "
                                              f"{', '.join(names) or 'it has none'}", names, subject="argument")
    return StackRef(project.root, stack)


def stack_ref(args: Any) -> StackRef:
    """args (from a parser given `add_stack_arguments`) -> StackRef; see `resolve_stack`."""
    return resolve_stack(getattr(args, "stack", None), getattr(args, "cwd", None))


def stack_file(ref: StackRef) -> Path:
    """The stack's configuration file: Pulumi.<stack>.yaml beside Pulumi.yaml or in its stackConfigDir."""
    from aicluster.commands.stacks import find_project

    project = find_project(ref.project_dir)
    folder = project.stack_dir if project is not None and project.root == ref.project_dir else ref.project_dir
    return folder / f"Pulumi.{ref.stack}.yaml"


def pulumi_cli() -> str:
    """The Pulumi CLI's path, or a SpecError that says how to install it (exit 2, no traceback)."""
    found = shutil.which("pulumi", path=os.environ.get("PATH"))
    if not found:
        raise SpecError([Problem("pulumi", None, f"the Pulumi CLI on PATH to deploy ({INSTALL_HINT}); "
                                                 "plan, check, diff and preflight need no CLI")],
                        subject="environment")
    return found


# Where Pulumi keeps state and how it encrypts secrets (README.md, "Deploying for real").
LOGIN_HINT = ("log in to a backend once: `pulumi login` (Pulumi Cloud), `pulumi login --local` (state in "
              "~/.pulumi) or `pulumi login file://DIR` (s3://BUCKET, gs://BUCKET)")
PASSPHRASE_HINT = ("PULUMI_CONFIG_PASSPHRASE (or PULUMI_CONFIG_PASSPHRASE_FILE, a file holding it) in the "
                   "environment: a local backend (`pulumi login --local`, file://, s3://, gs://, azblob://) "
                   "encrypts the stack's secrets with this passphrase; keep it, without it they cannot be read again")
_SELF_MANAGED = ("file://", "s3://", "gs://", "azblob://")


def backend_url(project_dir: Path, env: Mapping[str, str] | None = None) -> str | None:
    """The backend the Pulumi CLI will use for this project: PULUMI_BACKEND_URL, else Pulumi.yaml's
    `backend.url`, else the one `pulumi login` saved (PULUMI_HOME or ~/.pulumi/credentials.json);
    None when there is none (not logged in)."""
    import json

    import yaml

    env = os.environ if env is None else env
    if env.get("PULUMI_BACKEND_URL"):
        return env["PULUMI_BACKEND_URL"]
    try:
        project = yaml.safe_load((project_dir / "Pulumi.yaml").read_text())
    except (OSError, yaml.YAMLError):
        project = None
    backend = project.get("backend") if isinstance(project, dict) else None
    if isinstance(backend, dict) and isinstance(backend.get("url"), str):
        return backend["url"]
    home = Path(env["PULUMI_HOME"]) if env.get("PULUMI_HOME") else Path(env.get("HOME", "~")).expanduser() / ".pulumi"
    try:
        current = json.loads((home / "credentials.json").read_text()).get("current")
    except (OSError, ValueError, AttributeError):
        current = None
    return current if isinstance(current, str) and current else None


def check_backend(ref: StackRef, env: Mapping[str, str] | None = None) -> None:
    """Refuse, before the CLI is run, what would fail inside it with a less helpful message: no
    backend at all, or a self-managed backend whose passphrase is not in the environment."""
    env = os.environ if env is None else env
    url = backend_url(ref.project_dir, env)
    if url is None and not env.get("PULUMI_ACCESS_TOKEN"):
        raise SpecError([Problem("pulumi login", None, LOGIN_HINT)], subject="environment")
    if url is None or not url.startswith(_SELF_MANAGED):
        return
    provider = _secrets_provider(stack_file(ref))
    if provider not in (None, "passphrase"):
        return          # awskms://, gcpkms://, ...: no passphrase involved
    if "PULUMI_CONFIG_PASSPHRASE" not in env and "PULUMI_CONFIG_PASSPHRASE_FILE" not in env:
        raise SpecError([Problem("PULUMI_CONFIG_PASSPHRASE", None, f"{PASSPHRASE_HINT} (backend {url})")],
                        subject="environment")


def _secrets_provider(path: Path) -> str | None:
    import yaml

    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return None
    value = doc.get("secretsprovider") if isinstance(doc, dict) else None
    return value if isinstance(value, str) else None


class StackCommandFailed(Exception):
    """A Pulumi command ran and failed (the cloud refused, a resource failed): exit 1 with
    Pulumi's own message, no traceback. Bad input and a missing CLI, backend or passphrase are
    SpecErrors (exit 2) instead."""


def call(action: str, ref: StackRef, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """fn(*args, **kwargs), an automation call for `pulumi <action>` on `ref`, with its errors
    made the CLI's: SpecError for what the user must set up, StackCommandFailed for the rest."""
    from pulumi.automation import errors

    try:
        return fn(*args, **kwargs)
    except errors.StackNotFoundError:
        raise SpecError([Problem("--stack", ref.stack, f"a stack that exists in the backend: the project in "
                                                       f"{ref.project_dir} has no stack {ref.stack} there yet "
                                                       "(`aicluster up` creates it)")], subject="argument") from None
    except errors.CommandError as exc:
        text = str(exc)
        if "passphrase" in text.lower():
            raise SpecError([Problem("PULUMI_CONFIG_PASSPHRASE", None, PASSPHRASE_HINT)],
                            subject="environment") from None
        if "PULUMI_ACCESS_TOKEN" in text or "pulumi login" in text:
            raise SpecError([Problem("pulumi login", None, LOGIN_HINT)], subject="environment") from None
        raise StackCommandFailed(f"pulumi {action} failed for stack {ref.stack} ({ref.project_dir}):"
                                 f"{_tail(text)}") from None


def _tail(text: str, lines: int = 40) -> str:
    kept = text.strip().splitlines()[-lines:]
    return "\n" + "\n".join(kept) if kept else ""


def deployed_resources(stack: Any, ref: StackRef) -> list[dict]:
    """The resources in the stack's state (`pulumi stack export`): none before its first up."""
    state = call("stack export", ref, stack.export_stack)
    deployment = getattr(state, "deployment", None) or {}
    resources = deployment.get("resources") if isinstance(deployment, Mapping) else None
    return [r for r in resources or () if isinstance(r, Mapping)]


def _real_opener(ref: StackRef, create: bool) -> Any:
    pulumi_cli()
    check_backend(ref)
    from pulumi import automation

    if create:
        return automation.create_or_select_stack(ref.stack, work_dir=str(ref.project_dir))
    return automation.select_stack(ref.stack, work_dir=str(ref.project_dir))


# (StackRef, create) -> an object with the automation Stack's methods (up, preview, destroy,
# outputs, export_stack, import_stack, ...). Tests swap it for a fake.
STACK_OPENER: Callable[[StackRef, bool], Any] = _real_opener


def open_stack(ref: StackRef, create: bool = False) -> Any:
    """The automation Stack for `ref`: selected, or created when `create` (the first `up`). A
    stack that does not exist (without `create`), a missing login or passphrase are SpecErrors;
    another Pulumi failure is StackCommandFailed."""
    return call("stack select", ref, STACK_OPENER, ref, create)
