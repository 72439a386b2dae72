"""`aicluster destroy`: tear a stack down with each stored thing's `on_delete` policy
(docs/teardown.md).

1. Read the spec (the truth about policy) and plan it offline: the program's own options and
   final-backup fields for that spec.
2. Export the stack's state and work out the teardown (teardown_state.py): what is kept (retained
   stateful resources and all they need), what is deleted, what is backed up first. Refuse (exit 2,
   nothing touched) where the state does not carry the policy yet: an `up` must put it there.
3. Confirm: type the stack's name (or --yes; with no terminal and no --yes: refuse, exit 2).
4. Take the final backups the cloud's delete does not take (final_backups.py: EFS, Filestore) and
   wait for them. One fails: stop, nothing deleted.
5. Unprotect exactly the deletable resources (one state import), then `stack.destroy(target=...)`
   of everything but what is kept. The destroy fails: protect again what is still there, say what
   is where.
6. Say what remains, why, and how to delete each for real.
Exit: 0 done, 1 a step failed (said what state things are in), 2 bad input or refused.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from aicluster.errors import Problem, SpecError

EXIT_OK, EXIT_FAILED, EXIT_REFUSED = 0, 1, 2


def add_parser(sub: Any) -> None:
    from aicluster.commands.automation import add_stack_arguments

    parser = sub.add_parser(
        "destroy", help="tear a deployed stack down, each stored thing by its on_delete policy "
                        "(retain | snapshot | delete; docs/teardown.md)")
    parser.add_argument("file", nargs="?", metavar="FILE", help="the stack file (Pulumi.<stack>.yaml) of the stack")
    add_stack_arguments(parser)
    parser.add_argument("--yes", "-y", action="store_true",
                        help="do not ask: destroy without typing the stack's name")
    parser.add_argument("--format", "-f", choices=("text", "json"), default="text")
    parser.add_argument("--backup-vault", metavar="NAME",
                        help="aws: the AWS Backup vault of EFS final backups (default: Default)")
    parser.add_argument("--backup-role", metavar="ARN",
                        help="aws: the IAM role AWS Backup assumes for them (default: the account's "
                             "service-role/AWSBackupDefaultServiceRole)")
    parser.set_defaults(run=run)


@dataclass
class Report:
    stack: str
    status: str = "planned"                 # planned | refused | stopped | done
    message: str = ""
    kept: list[dict] = field(default_factory=list)
    deleted: list[dict] = field(default_factory=list)
    backups: list[dict] = field(default_factory=list)
    remaining: list[dict] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)


def _stack_ref(args: argparse.Namespace):
    from aicluster.commands import automation

    if args.file and args.stack:
        raise SpecError.one("--stack", args.stack, "either --stack NAME or FILE, not both", subject="argument")
    if not args.file:
        return automation.stack_ref(args)
    path = Path(args.file)
    if not path.is_file() or not path.name.startswith("Pulumi.") or path.suffix not in (".yaml", ".yml"):
        raise SpecError.one("FILE", args.file, "a stack file Pulumi.<stack>.yaml of a Pulumi project "
                                               "(destroy needs the stack it names)", subject="argument")
    from aicluster.commands.stacks import find_project

    project = find_project(path.resolve().parent)
    root = project.root if project is not None else path.resolve().parent
    return automation.StackRef(root, path.name[len("Pulumi."):-len(path.suffix)])


def _spec_and_plan(stack_file: Path):
    from aicluster.commands.planner import plan_stack

    result = plan_stack(str(stack_file))
    return result.spec, result.plan


def run(args: argparse.Namespace) -> int:
    from aicluster.commands import automation

    ref = _stack_ref(args)
    stack_file = Path(args.file) if args.file else automation.stack_file(ref)
    spec, plan = _spec_and_plan(stack_file)
    out = _printer(args.format)
    report = Report(ref.stack)
    code = destroy(ref, spec, plan.resources, yes=args.yes, report=report, log=out,
                   vault=getattr(args, "backup_vault", None), role=getattr(args, "backup_role", None))
    if args.format == "json":
        print(json.dumps(asdict(report), indent=2, sort_keys=True, default=str))
    else:
        print("\n".join(text(report)))
    return code


def _printer(fmt: str) -> Callable[[str], None]:
    stream = sys.stderr if fmt == "json" else sys.stdout
    return lambda line: print(line, file=stream, flush=True)


CONFIRM: Callable[[str], str] = input      # tests swap it


def _confirm(stack: str, yes: bool) -> None:
    if yes:
        return
    if not (sys.stdin and sys.stdin.isatty()):
        raise SpecError.one("--yes", None, "--yes to destroy without a terminal to confirm on (or run it in a "
                                           "terminal and type the stack's name)", subject="argument")
    answer = CONFIRM(f"Type the stack's name ({stack}) to destroy it: ").strip()
    if answer != stack:
        raise SpecError.one("confirmation", answer, f"the stack's name, {stack}: nothing was destroyed",
                            subject="argument")


def destroy(ref: Any, spec: Any, planned: list, *, yes: bool, report: Report, log: Callable[[str], None],
            vault: str | None = None, role: str | None = None) -> int:
    """Steps 2-6 (module doc) on an opened stack; fills `report`, returns the exit code."""
    from aicluster.commands import automation, teardown_state as ts
    from pulumi.automation import Deployment

    # A missing stack, login or passphrase: SpecError (exit 2) through automation.call.
    stack = automation.call("stack select", ref, automation.open_stack, ref)
    exported = automation.call("stack export", ref, stack.export_stack)
    deployment = dict(exported.deployment or {})
    plan = ts.plan_teardown(deployment, planned, ts.stored_things(spec))
    report.kept = [_item(i) for i in (*plan.kept, *plan.needed)]
    report.deleted = [_item(i) for i in plan.deleted]
    if plan.mismatches:
        report.status = "refused"
        report.message = _mismatch_text(plan.mismatches, spec)
        raise SpecError([Problem(m.path or ts.urn_name(m.urn), m.state,
                                 f"{m.field} {json.dumps(m.spec, default=str)} on {ts.urn_name(m.urn)} first "
                                 f"(`aicluster up`, or `pulumi up --target '{m.urn}'`: changed in place)")
                         for m in plan.mismatches], subject=f"stack {ref.stack}")
    for line in _plan_lines(plan):
        log(line)
    if not plan.targets:
        report.status = "done"
        report.message = "nothing to delete: everything in the stack is kept"
        report.remaining = remains(plan, spec)
        return EXIT_OK
    _confirm(ref.stack, yes)

    # Final backups first: one failing stops everything, before any state edit or deletion.
    results = _backups(plan, spec, vault, role, log)
    report.backups = [asdict(r) for r in results]
    failed = [r for r in results if not r.ok]
    if failed:
        report.status = "stopped"
        report.message = ("a final backup failed; nothing was deleted and the state is unchanged. "
                          + "; ".join(f"{r.what}: {r.error}" for r in failed)
                          + (". Backups that completed stay: " + ", ".join(r.backup_id for r in results if r.ok)
                             if any(r.ok for r in results) else ""))
        report.remaining = remains(plan, spec, everything=deployment)
        return EXIT_FAILED
    report.steps.append(f"final backups: {len(results)} completed" if results else "no final backup to take")

    if plan.unprotect:
        try:
            stack.import_stack(Deployment(version=exported.version,
                                          deployment=ts.unprotected(deployment, plan.unprotect)))
        except Exception as exc:   # noqa: BLE001 - the state is as it was: nothing deleted
            report.status = "stopped"
            report.message = (f"unprotecting {len(plan.unprotect)} resources failed ({type(exc).__name__}: {exc}); "
                              "nothing was deleted and the state is as it was")
            return EXIT_FAILED
        report.steps.append(f"unprotected {len(plan.unprotect)}: " + ", ".join(ts.urn_name(u) for u in plan.unprotect))
    try:
        stack.destroy(target=list(plan.targets), on_output=log)
    except Exception as exc:   # noqa: BLE001 - say what is where, protect again what is left
        after = dict(stack.export_stack().deployment or {})
        left = ts.remaining(after, plan.targets)
        still = ts.remaining(after, plan.unprotect)
        if still:
            try:
                stack.import_stack(Deployment(version=exported.version, deployment=ts.reprotected(after, still)))
                protected = f"protected again: {', '.join(ts.urn_name(u) for u in still)}"
            except Exception as again:   # noqa: BLE001
                protected = (f"protecting them again failed ({again}); still unprotected: "
                             f"{', '.join(ts.urn_name(u) for u in still)}")
        elif plan.unprotect:
            protected = "every unprotected resource was deleted"
        else:
            protected = "nothing was unprotected"
        report.status = "stopped"
        report.message = (f"the destroy failed ({type(exc).__name__}: {str(exc)[:2000]}); "
                          f"{len(plan.targets) - len(left)} of {len(plan.targets)} resources deleted, "
                          f"{len(left)} still in the stack; {protected}. Run aicluster destroy again.")
        report.remaining = remains(plan, spec, everything=after)
        return EXIT_FAILED
    after = dict(stack.export_stack().deployment or {})
    left = ts.remaining(after, plan.targets)
    report.status = "done" if not left else "stopped"
    report.steps.append(f"deleted {len(plan.targets) - len(left)} resources")
    report.remaining = remains(plan, spec, everything=after)
    if left:
        report.message = f"the destroy ended with {len(left)} targeted resources still in the stack: " \
                         + ", ".join(ts.urn_name(u) for u in left)
        return EXIT_FAILED
    report.message = (f"{len(report.remaining)} resources remain, as their on_delete says" if report.remaining
                      else "the stack holds nothing more")
    return EXIT_OK


def _backups(plan: Any, spec: Any, vault: str | None, role: str | None, log: Callable[[str], None]) -> list:
    from aicluster.commands import final_backups as fb

    results = []
    aws_items = [i for i in plan.backups if i.backup == "aws-backup"]
    if aws_items:
        vault_name, role_arn = fb.aws_backup_settings(spec.region, vault, role)
        why = fb.vault_problem(spec.region, vault_name)
        if why:
            return [fb.BackupResult(i.urn, f"AWS Backup job of {i.id}", None,
                                    f"backup vault {vault_name} is not usable ({why}); create it: aws backup "
                                    f"create-backup-vault --backup-vault-name {vault_name}, or name one with "
                                    "--backup-vault") for i in aws_items]
        for item in aws_items:
            arn = item.outputs.get("arn") or f"arn:aws:elasticfilesystem:{spec.region}::file-system/{item.id}"
            results.append(fb.efs_backup(item.urn, arn, spec.region, vault_name, role_arn, spec.name, log))
    for item in plan.backups:
        if item.backup == "filestore-backup":
            shares = item.inputs.get("fileShares") or item.outputs.get("fileShares") or {}
            share = shares.get("name") if isinstance(shares, dict) else (shares[0] or {}).get("name")
            results.append(fb.filestore_backup(item.urn, item.id, share, spec.name, log))
    return results


def _item(item: Any) -> dict:
    return {"urn": item.urn, "type": item.type, "id": item.id, "kind": item.kind, "policy": item.policy,
            "path": item.path, "why": item.why, "backup": item.backup}


def _plan_lines(plan: Any) -> list[str]:
    lines = [f"destroy: {len(plan.targets)} resources to delete, {len(plan.kept) + len(plan.needed)} kept"]
    for item in plan.deleted:
        how = {"snapshot": "final backup, then delete", "delete": "delete"}.get(item.policy, item.policy)
        lines.append(f"  - {item.name} ({item.type}): {how}" + (f" [{item.path}]" if item.path else ""))
    for item in plan.kept:
        lines.append(f"  = {item.name} ({item.type}): kept, {item.why}")
    return lines


def _mismatch_text(mismatches: Any, spec: Any) -> str:
    return ("the stack's state does not carry the spec's on_delete yet: "
            + "; ".join(f"{m.urn.rsplit('::', 1)[-1]} {m.field}={m.state!r} (spec wants {m.spec!r})" for m in mismatches)
            + ". Run `aicluster up` (the change is in place), then destroy again. Nothing was done.")


# ---------------------------------------------------------------- what remains, and how to delete it


def remains(plan: Any, spec: Any, everything: dict | None = None) -> list[dict]:
    """The kept resources (still in the state, when it is given) with why and the commands that
    delete each for real."""
    from aicluster.commands.teardown_state import remaining

    # Dependents before what they need (the state lists resources in creation order).
    items = [*reversed(plan.kept), *reversed(plan.needed)]
    present = set(remaining(everything, [i.urn for i in items])) if everything is not None else {i.urn for i in items}
    out = []
    for item in items:
        if item.urn not in present:
            continue
        commands = delete_commands(item, spec)
        if item.path:
            commands.append(f"or set {item.path}: delete, run `pulumi up --target '{item.urn}'` (in place), "
                            "then `aicluster destroy` again")
        out.append({"urn": item.urn, "type": item.type, "id": item.id, "why": item.why, "commands": commands})
    return out


def _name(item: Any) -> str:
    return str(item.id or "").rsplit("/", 1)[-1]


def _location(item: Any) -> str:
    parts = str(item.id or "").split("/")
    return parts[parts.index("locations") + 1] if "locations" in parts else str(item.outputs.get("location", ""))


def delete_commands(item: Any, spec: Any) -> list[str]:
    """The cloud CLI lines that delete one kept resource for real (after which `pulumi state
    delete` forgets it)."""
    from aicluster.design.stateful import type_key

    key, rid, region = type_key(item.type), item.id, spec.region
    if key == "aws:rds/instance":    # the provider's id is the DbiResourceId; the CLI takes the identifier
        rid = item.outputs.get("identifier") or item.inputs.get("identifier") or rid
    aws = f"aws --region {region}"
    table: dict[str, list[str]] = {
        "aws:fsx/lustreFileSystem": [f"{aws} fsx delete-file-system --file-system-id {rid} "
                                     "--lustre-configuration SkipFinalBackup=false"],
        "aws:fsx/dataRepositoryAssociation": [f"{aws} fsx delete-data-repository-association --association-id {rid} "
                                              "--no-delete-data-in-file-system"],
        "aws:efs/fileSystem": [f"{aws} efs describe-mount-targets --file-system-id {rid}  # delete each: "
                               "efs delete-mount-target --mount-target-id ...",
                               f"{aws} efs delete-file-system --file-system-id {rid}"],
        "aws:rds/instance": [f"{aws} rds modify-db-instance --db-instance-identifier {rid} --no-deletion-protection "
                             "--apply-immediately",
                             f"{aws} rds delete-db-instance --db-instance-identifier {rid} "
                             f"--final-db-snapshot-identifier {rid}-final"],
        "aws:amp/workspace": [f"{aws} amp delete-workspace --workspace-id {rid}"],
        "aws:kms/key": [f"{aws} kms schedule-key-deletion --key-id {rid} --pending-window-in-days 30"],
        "aws:secretsmanager/secret": [f"{aws} secretsmanager delete-secret --secret-id {rid} --recovery-window-in-days 7"],
        "aws:secretsmanager/secretVersion": ["deleted with its secret"],
        "aws:ec2/instance": [f"{aws} ec2 modify-instance-attribute --instance-id {rid} --no-disable-api-termination",
                             f"{aws} ec2 terminate-instances --instance-ids {rid}"],
        "aws:ec2/subnet": [f"{aws} ec2 delete-subnet --subnet-id {rid}"],
        "aws:ec2/securityGroup": [f"{aws} ec2 delete-security-group --group-id {rid}"],
        "aws:ec2/vpc": [f"{aws} ec2 delete-vpc --vpc-id {rid}"],
        "aws:rds/subnetGroup": [f"{aws} rds delete-db-subnet-group --db-subnet-group-name {rid}"],
        "aws:rds/parameterGroup": [f"{aws} rds delete-db-parameter-group --db-parameter-group-name {rid}"],
        "aws:cloudwatch/logGroup": [f"{aws} logs delete-log-group --log-group-name {rid}"],
        "gcp:filestore/instance": [f"gcloud filestore instances update {_name(item)} --location {_location(item)} "
                                   "--no-deletion-protection",
                                   f"gcloud filestore instances delete {_name(item)} --location {_location(item)}"],
        "gcp:lustre/instance": [f"gcloud lustre instances delete {_name(item)} --location {_location(item)}"],
        "gcp:sql/databaseInstance": [f"gcloud sql instances patch {_name(item)} --no-deletion-protection",
                                     f"gcloud sql instances delete {_name(item)}"],
        "gcp:sql/database": ["deleted with its Cloud SQL instance"],
        "gcp:compute/instance": [f"gcloud compute instances update {_name(item)} --zone {spec.zone} "
                                 "--no-deletion-protection",
                                 f"gcloud compute instances delete {_name(item)} --zone {spec.zone} --delete-disks all"],
        "gcp:secretmanager/secret": [f"gcloud secrets delete {_name(item)}"],
        "gcp:secretmanager/secretVersion": ["deleted with its secret"],
        "gcp:compute/subnetwork": [f"gcloud compute networks subnets delete {_name(item)} --region {region}"],
        "gcp:compute/network": [f"gcloud compute networks delete {_name(item)}"],
    }
    if key.startswith("random:") or key.startswith("tls:"):
        return ["in Pulumi's state only: nothing in the cloud"]
    found = table.get(key)
    return list(found) if found else [f"delete {rid} ({item.type}) in the cloud's console or CLI"]


def text(report: Report) -> list[str]:
    lines = [f"aicluster destroy {report.stack}: {report.status}" + (f": {report.message}" if report.message else "")]
    lines += [f"  {step}" for step in report.steps]
    for backup in report.backups:
        state = backup["backup_id"] if backup["backup_id"] else f"FAILED: {backup['error']}"
        lines.append(f"  backup: {backup['what']}: {state}")
    if report.remaining:
        lines.append("")
        lines.append(f"What remains in the cloud ({len(report.remaining)}), and how to delete it for real, "
                     "in this order (each before what it needs):")
        for r in report.remaining:
            lines.append(f"  {r['urn'].rsplit('::', 1)[-1]} ({r['type']}, {r['id']}): {r['why']}")
            lines += [f"      {c}" for c in r["commands"]]
    return lines
