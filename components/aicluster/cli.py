"""The `aicluster` command. Exit codes: 0 done, 1 internal error, 2 bad input (SpecError)."""
from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Sequence

from aicluster.commands.stacks import DEFAULT_STACK
from aicluster.errors import SpecError

EXIT_OK, EXIT_INTERNAL, EXIT_BAD_INPUT = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aicluster",
        description="Plan, render and check balanced AI training clusters offline (no cloud credentials, "
                    "no Pulumi CLI), then deploy, inspect and tear them down (`new`, `up`, `status`, `destroy`).")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    plan = sub.add_parser("plan", help="plan a stack offline: resources, rendered files, balance report")
    plan.add_argument("file", nargs="?", metavar="FILE",
                      help="a stack file (stacks/Pulumi.<stack>.yaml) or a bare spec YAML file")
    plan.add_argument("--stack", "-s", metavar="NAME",
                      help=f"a stack of your project (default: its one stack) or an example stack (default: {DEFAULT_STACK})")
    plan.add_argument("--format", "-f", choices=("text", "markdown", "json"), default="text")
    plan.add_argument("--out", "-o", metavar="DIR", type=Path,
                      help="also write plan.json and every rendered file (user data, configs) to DIR")

    catalog = sub.add_parser("catalog", help="print the hardware and service facts, with sources")
    catalog.add_argument("name", nargs="?", metavar="TYPE",
                         help="an instance type, alias, TPU generation or FSx deployment type")
    catalog.add_argument("--format", "-f", choices=("text", "json"), default="text")

    check = sub.add_parser("check", help="run the policy pack offline over stacks: exit 1 on a mandatory violation")
    check.add_argument("file", nargs="?", metavar="FILE",
                       help="a stack file, a bare spec YAML, or a hand-written Pulumi program (.py)")
    check.add_argument("--stack", "-s", metavar="NAME", help="a stack in stacks/")
    check.add_argument("--all", "-a", action="store_true", dest="all_stacks",
                       help="every stack in stacks/ (the default without FILE or --stack)")
    check.add_argument("--config", "-c", metavar="FILE",
                       help="policy config JSON, as for `pulumi preview --policy-pack-config` "
                            "(default: the pack's own defaults = policies/config/default.json)")
    check.add_argument("--waivers", "-w", metavar="FILE",
                       help="waivers YAML/JSON: rule, resource, reason, expires (an expired waiver fails)")
    check.add_argument("--format", "-f", choices=("text", "markdown", "json", "sarif", "junit", "github"),
                       default="text")

    estimate = sub.add_parser("estimate", help="estimate step time, memory, layout, days and $ to train a "
                                                "workload on a cluster (or rank clusters with --compare)")
    estimate.add_argument("file", metavar="FILE",
                          help="a workload file (examples/workloads/) or a stack or spec file with a workload model")
    estimate.add_argument("--format", "-f", choices=("text", "json"), default="text")
    estimate.add_argument("--compare", action="store_true",
                          help="rank every cluster in the file's `clusters:` (and `cluster:`) by days and by $")

    schema = sub.add_parser("schema", help="print the JSON Schema of the cluster spec (for editors), "
                                           "or the spec reference in Markdown (docs/spec-reference.md)")
    schema.add_argument("--format", "-f", choices=("json", "markdown"), default="json")
    sub.add_parser("stacks", help="list the stacks of your project, or the example stacks")
    bake = sub.add_parser("bake-files", help="write the tar an image builder unpacks at / and bakes a node image "
                                             "from (docs/images.md, bringing your own image)")
    bake.add_argument("--cloud", choices=("aws", "gcp"), required=True)
    bake.add_argument("--out", "-o", metavar="FILE", type=Path, required=True, help="where to write the tar")
    for module in _command_modules():
        module.add_parser(sub)
    return parser


# The lifecycle commands live each in its own module of aicluster.commands, which adds its own
# subparser (`add_parser(sub)`) and runs it (`run(args) -> exit code`); heavy imports wait for run().
LIFECYCLE_COMMANDS = ("diff", "preflight", "project", "deploy", "teardown")


def _command_modules() -> list:
    import importlib

    return [importlib.import_module(f"aicluster.commands.{name}") for name in LIFECYCLE_COMMANDS]


def _one_shot_process() -> None:
    """`aicluster` runs one command and exits: keep Python's cyclic garbage collector out of it.
    A plan builds hundreds of thousands of long-lived SDK objects that every full collection
    walks again, and the collection at interpreter exit walks them once more; together that was
    over a third of `aicluster plan`'s wall time (bench/plan_scaling.py). Memory grows by a few
    percent (reference counting still frees everything that is not in a cycle)."""
    import atexit
    import gc

    gc.disable()
    atexit.register(gc.freeze)   # atexit runs before the interpreter's final collection


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:   # the command line, not a caller such as a test: this process ends with the command
        _one_shot_process()
    args = _parser().parse_args(argv)
    if not args.command:
        _parser().print_help()
        return EXIT_BAD_INPUT
    try:
        run = _COMMANDS.get(args.command) or args.run    # a lifecycle command sets its own `run`
        return run(args)
    except SpecError as exc:
        print(exc, file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # `aicluster plan | head`
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - the last line of defence: a bug, not bad input
        if os.environ.get("AICLUSTER_DEBUG"):
            traceback.print_exc()
        print(f"aicluster: internal error: {type(exc).__name__}: {exc}\n"
              "This is a bug in aicluster, not in your spec; rerun with AICLUSTER_DEBUG=1 for details.",
              file=sys.stderr)
        return EXIT_INTERNAL


def _cmd_plan(args: argparse.Namespace) -> int:
    from aicluster.commands.plan_report import write_outputs
    from aicluster.commands.planner import plan_stack
    from aicluster.commands import plan_report

    from aicluster.commands.stacks import stack_target

    target = stack_target(args.file, args.stack)
    out = None
    if args.out:   # checked before planning: a bad --out fails at once, before anything is printed
        from aicluster.commands.out_dir import prepare

        out = prepare(args.out)
    result = plan_stack(target)
    if args.format == "json":
        print(json.dumps(plan_report.to_json(result), indent=2, sort_keys=True))
    elif args.format == "markdown":
        print("\n".join(plan_report.markdown(result)))
    else:
        print("\n".join(plan_report.text(result)))
    if out is not None:
        written = write_outputs(result, out)
        print(f"\nwrote {len(written)} files to {args.out}", file=sys.stderr)
    return EXIT_OK


def _cmd_bake_files(args: argparse.Namespace) -> int:
    from aicluster.render import image_bake, node_image

    if args.out.is_dir():
        raise SpecError.one("--out", str(args.out), "a file to write the tar to (this is a directory)",
                            subject="argument")
    args.out.write_bytes(image_bake.bake_tar(args.cloud))
    print(f"contents {node_image.contents_key(args.cloud)}: wrote {args.out}; on the machine to bake, as root:")
    for line in image_bake.bake_lines(args.cloud, str(args.out)):
        print(f"  {line}")
    return EXIT_OK


def _cmd_check(args: argparse.Namespace) -> int:
    from aicluster.commands.check import render, run_check

    report = run_check(args.file, args.stack, args.all_stacks, args.config, args.waivers)
    print(render(report, args.format))
    return report.exit_code


def _cmd_catalog(args: argparse.Namespace) -> int:
    from aicluster.commands.catalog_view import describe, describe_json, overview

    if args.format == "json":
        print(json.dumps(describe_json(args.name), indent=2, sort_keys=True))
    else:
        print("\n".join(describe(args.name) if args.name else overview()))
    return EXIT_OK


def _cmd_estimate(args: argparse.Namespace) -> int:
    from aicluster.commands.estimate import run

    print(run(args.file, args.format, args.compare))
    return EXIT_OK


def _cmd_schema(args: argparse.Namespace) -> int:
    from aicluster.spec.cluster import json_schema

    if args.format == "markdown":
        from aicluster.commands.spec_docs import markdown

        sys.stdout.write(markdown(json_schema()))
    else:
        print(json.dumps(json_schema(), indent=2))
    return EXIT_OK


def _cmd_stacks(args: argparse.Namespace) -> int:
    from aicluster.commands.stacks import stack_names

    print("\n".join(stack_names()))
    return EXIT_OK


_COMMANDS = {"plan": _cmd_plan, "check": _cmd_check, "catalog": _cmd_catalog, "estimate": _cmd_estimate,
             "schema": _cmd_schema, "stacks": _cmd_stacks, "bake-files": _cmd_bake_files}

if __name__ == "__main__":
    sys.exit(main())
