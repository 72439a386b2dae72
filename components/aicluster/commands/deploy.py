"""`aicluster up`, `preview` and `status`: one project's stack, through Pulumi's Automation API.

`up` and `preview` plan the stack offline first, exactly as `aicluster plan` does: a bad spec
exits 2 before Pulumi is touched. `up` then runs the preflight checks (commands/preflight.py)
before a stack's first deployment (a stack with nothing in its state), and refuses to go on when
one fails (`--skip-preflight` bypasses it). Both stream Pulumi's own output.

`status` prints the stack's outputs and the command that logs in: Slurm through SSM (AWS) or
IAP (GCP) to the head node, Kubernetes through the cloud's kubeconfig command.

Only commands/automation.py touches pulumi.automation; without the Pulumi CLI these commands
exit 2 with the install hint, and every other command still works.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import Any, Callable, Mapping

from aicluster.commands import automation
from aicluster.commands.automation import StackRef
from aicluster.errors import Problem, SpecError

EXIT_OK, EXIT_FAILED = 0, 1
_EXAMPLE_GCP_PROJECT = "example-ml-project"   # the example stacks' placeholder


def add_parser(sub: Any) -> None:
    up = sub.add_parser("up", help="deploy the stack with Pulumi (offline plan and preflight first)",
                        description="Plan the stack offline (a bad spec stops here), run preflight before the "
                                    "stack's first deployment, then `pulumi up`, streaming its output. Needs the "
                                    "Pulumi CLI, a backend (`pulumi login`) and, for a local backend, "
                                    "PULUMI_CONFIG_PASSPHRASE.")
    automation.add_stack_arguments(up)
    up.add_argument("--skip-preflight", action="store_true",
                    help="deploy a new stack without running `aicluster preflight` first")
    up.set_defaults(run=run)

    preview = sub.add_parser("preview", help="what `pulumi up` would change (offline plan first)",
                             description="Plan the stack offline (a bad spec stops here), then `pulumi preview`, "
                                         "streaming its output. Changes nothing.")
    automation.add_stack_arguments(preview)
    preview.set_defaults(run=run)

    status = sub.add_parser("status", help="the deployed stack's outputs and how to log in to the cluster")
    automation.add_stack_arguments(status)
    status.add_argument("--format", "-f", choices=("text", "json"), default="text")
    status.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.command == "status":
        return status(args)
    return deploy(args, preview=args.command == "preview")


# ------------------------------------------------------------------------------- up and preview


def deploy(args: argparse.Namespace, *, preview: bool) -> int:
    ref = automation.stack_ref(args)
    result = _plan_offline(ref)
    _check_gcp_project(result.stack.config, result.spec)
    _check_virtualenv(ref)
    print(f"planned {ref.stack} offline: {len(result.plan.resources)} resources "
          f"({result.spec.cloud} {result.spec.region}, {result.spec.scheduler}); "
          f"{'previewing' if preview else 'deploying'} with Pulumi", flush=True)
    try:
        stack = automation.open_stack(ref, create=True)
        if preview:
            automation.call("preview", ref, stack.preview, on_output=_echo)
            return EXIT_OK
        if not getattr(args, "skip_preflight", False) and not automation.deployed_resources(stack, ref):
            if not _preflight(result.stack):
                return EXIT_FAILED
        outcome = automation.call("up", ref, stack.up, on_output=_echo)
    except automation.StackCommandFailed as exc:
        print(exc, file=sys.stderr)
        return EXIT_FAILED
    summary = getattr(outcome, "summary", None)
    print(f"\nstack {ref.stack}: {getattr(summary, 'result', 'done')}; `aicluster status` prints its outputs and "
          "how to log in")
    return EXIT_OK


def _echo(line: str) -> None:
    print(line, flush=True)


def _plan_offline(ref: StackRef):
    from aicluster.commands.planner import plan_stack

    return plan_stack(str(automation.stack_file(ref)))


def _check_gcp_project(config: Mapping[str, Any], spec: Any) -> None:
    """GCP deploys into `gcp:project` (or GOOGLE_PROJECT and its aliases, as the provider reads
    them); the offline plan invents one, `pulumi up` must not."""
    import os

    if spec.cloud != "gcp":
        return
    project = config.get("gcp:project") or next(
        (os.environ[k] for k in ("GOOGLE_PROJECT", "GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT")
         if os.environ.get(k)), None)
    if not project or project == _EXAMPLE_GCP_PROJECT:
        raise SpecError([Problem("gcp:project", project, "your Google Cloud project: `pulumi config set gcp:project "
                                                         "ID` in the project folder, or edit the stack file")],
                        subject="stack config")


def _check_virtualenv(ref: StackRef) -> None:
    """Pulumi runs the program in Pulumi.yaml's `runtime.options.virtualenv` and stops when that
    folder is missing; say how to make it before Pulumi is started."""
    import yaml

    try:
        project = yaml.safe_load((ref.project_dir / "Pulumi.yaml").read_text())
        venv = project["runtime"]["options"]["virtualenv"]
    except (OSError, yaml.YAMLError, KeyError, TypeError):
        return
    if isinstance(venv, str) and venv and not (ref.project_dir / venv).is_dir():
        raise SpecError([Problem("runtime.options.virtualenv", venv,
                                 f"a virtual environment with aicluster installed, which Pulumi runs the program in: "
                                 f"in {ref.project_dir}, `python -m venv {venv} && {venv}/bin/pip install -r "
                                 "requirements.txt` (or `pulumi install`)")], subject="Pulumi project")


def _preflight(stack_config: Any) -> bool:
    """Run preflight (live: the cloud's quotas, capacity and permissions, with the credentials
    `up` will use) before a stack's first deployment; True when no check failed."""
    try:
        from aicluster.commands import preflight
    except ImportError:
        raise SpecError([Problem("preflight", None, "aicluster.commands.preflight, which this aicluster lacks: "
                                                    "rerun with --skip-preflight to deploy without it")],
                        subject="environment") from None
    print("preflight, before the stack's first deployment:", flush=True)
    report = preflight.run_preflight(stack_config, live=True)
    render = getattr(preflight, "render_text", None)
    print(render(report) if render else "\n".join(f"  {check}" for check in report.checks), flush=True)
    if report.failed:
        failed = [c for c in report.checks if getattr(c, "status", None) == "failed"]
        print(f"preflight failed{f' ({len(failed)} checks)' if len(failed) > 1 else ''}: nothing was deployed; "
              "fix what it says, or rerun with --skip-preflight", file=sys.stderr)
        return False
    return True


# ------------------------------------------------------------------------------------ status


def status(args: argparse.Namespace) -> int:
    ref = automation.stack_ref(args)
    try:
        stack = automation.open_stack(ref, create=False)
        outputs = automation.call("stack output", ref, stack.outputs)
        resources = automation.deployed_resources(stack, ref)
    except automation.StackCommandFailed as exc:
        print(exc, file=sys.stderr)
        return EXIT_FAILED
    values = {name: _plain(value) for name, value in sorted(outputs.items())}
    access = values.get("access") if isinstance(values.get("access"), dict) else _access_from_stack_file(ref)
    login = login_commands(access, values, resources)
    if args.format == "json":
        print(json.dumps({"project": str(ref.project_dir), "stack": ref.stack, "outputs": values,
                          "resources": len(resources), "login": login}, indent=2, sort_keys=True))
        return EXIT_OK
    print(f"stack {ref.stack} ({ref.project_dir}): {len(resources)} resources")
    if not values:
        print("no outputs: the stack has not been deployed (`aicluster up`)")
    else:
        print("outputs")
        for name, value in values.items():
            shown = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
            print(f"  {name}: {shown}")
    if login:
        print("log in")
        for line in login:
            print(f"  {line}")
    return EXIT_OK


_SECRET = "[secret]"


def _plain(value: Any) -> Any:
    """An automation OutputValue (or a plain value from a fake) -> its value; secrets stay hidden."""
    if hasattr(value, "secret") and hasattr(value, "value"):
        return _SECRET if value.secret else value.value
    return value


def _access_from_stack_file(ref: StackRef) -> dict:
    """For a stack deployed before the program exported `access`: the same facts from the spec."""
    from aicluster.cluster import access_facts
    from aicluster.commands.stacks import read_stack
    from aicluster.design.cluster import design_cluster
    from aicluster.spec.cluster import parse_spec

    stack = read_stack(str(automation.stack_file(ref)))
    design = design_cluster(parse_spec(stack.spec_data, source=str(stack.path)))
    return access_facts(design, stack.config.get("gcp:project"))


def login_commands(access: Mapping[str, Any], outputs: Mapping[str, Any], resources: list[dict]) -> list[str]:
    """The commands that reach the cluster, from its `access` facts, outputs and state."""
    cloud, scheduler = access.get("cloud"), access.get("scheduler")
    region, zone, project = access.get("region"), access.get("zone"), access.get("project")
    name = str(access.get("cluster", ""))
    q: Callable[[Any], str] = lambda v: shlex.quote(str(v))
    project_arg = f" --project {q(project)}" if project else ""
    if scheduler == "kubernetes" and cloud == "aws":
        eks = outputs.get("eks_cluster") or name
        return [f"aws eks update-kubeconfig --name {q(eks)} --region {q(region)}", "kubectl get nodes"]
    if scheduler == "kubernetes" and cloud == "gcp":
        gke = outputs.get("gke_cluster") or name
        return [f"gcloud container clusters get-credentials {q(gke)} --region {q(region)}{project_arg}",
                "kubectl get nodes"]
    head = access.get("head") or f"{name}-head"
    if cloud == "aws":
        instance = _aws_head_id(resources, str(head))
        if instance is None:
            return [f"aws ec2 describe-instances --region {q(region)} --filters Name=tag:Name,Values={q(head)} "
                    "Name=instance-state-name,Values=running --query 'Reservations[].Instances[].InstanceId' "
                    "--output text   # the head node's id; then: aws ssm start-session --target <id>"]
        return [f"aws ssm start-session --target {q(instance)} --region {q(region)}", "sinfo"]
    if cloud == "gcp":
        return [f"gcloud compute ssh {q(head)} --tunnel-through-iap --zone {q(zone)}{project_arg}", "sinfo"]
    return []


def _aws_head_id(resources: list[dict], head: str) -> str | None:
    """The head node's instance id from the state: the aws:ec2 Instance tagged Name=<head>."""
    for resource in resources:
        if resource.get("type") != "aws:ec2/instance:Instance":
            continue
        state = resource.get("outputs") or {}
        tags = state.get("tags") or resource.get("inputs", {}).get("tags") or {}
        if isinstance(tags, Mapping) and tags.get("Name") == head:
            found = resource.get("id") or state.get("id")
            return str(found) if found else None
    return None
