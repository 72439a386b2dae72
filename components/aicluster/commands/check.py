"""`aicluster check`: plan stacks offline, run the policy pack over them, report, gate.

    aicluster check [FILE | --stack NAME | --all] [--config FILE] [--waivers FILE]
                    [--format text|markdown|json|sarif|junit|github]

FILE is a stack file, a bare spec YAML, or a hand-written Pulumi program (`.py`, run under the
same offline mocks with no stack config). Without a target every stack in stacks/ is checked.

Exit codes: 1 when any mandatory rule has a violation no active waiver covers, or any waiver has
expired; 0 otherwise (advisory violations warn); 2 for bad input (stack, spec, program, config or
waivers file), raised as SpecError.

Waivers (YAML or JSON): `waivers: [{rule, resource, reason, expires, stack?}]`. `resource` is a
URN, a resource name or a glob over either (`*` for stack-wide findings); `expires` an ISO date. A
waiver turns a matching violation into "waived"; an expired waiver waives nothing and fails the
check, so waivers cannot outlive their reason silently.
"""
from __future__ import annotations

import datetime as dt
import fnmatch
import hashlib
import json
import os
import runpy
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from aicluster import limits
from aicluster.errors import Problem, SpecError, close_match
from aicluster.spec.input_files import load_yaml, read_text
from aicluster.offline.capture import Plan
from aicluster.offline.policy_bridge import (PolicyConfig, Verdict, Violation, load_rules, pack_info, read_config_file,
                                    resolve_config, run_policies)

FORMATS = ("text", "markdown", "json", "sarif", "junit", "github")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
TOOL_URI = "https://github.com/aicluster/aicluster"
_STATUS_WORD = {"pass": "PASS", "fail": "FAIL", "warn": "WARN", "n/a": "N/A", "disabled": "OFF", "waived": "WAIVED"}


# ---------------------------------------------------------------- waivers


@dataclass(frozen=True)
class Waiver:
    """A waived rule, and why."""
    rule: str
    resource: str
    reason: str
    expires: dt.date
    stack: str | None = None
    index: int = 0

    def expired(self, today: dt.date) -> bool:
        return today > self.expires

    def matches(self, stack: str, rule_id: str, violation: Violation) -> bool:
        if rule_id != self.rule or (self.stack and not fnmatch.fnmatchcase(stack, self.stack)):
            return False
        if self.resource == "*":
            return True
        candidates = [c for c in (violation.urn, violation.resource_name) if c]
        return any(c == self.resource or fnmatch.fnmatchcase(c, self.resource) for c in candidates)

    def describe(self) -> str:
        return f"waiver #{self.index + 1} ({self.rule} on {self.resource}, expires {self.expires.isoformat()})"


_WAIVER_KEYS = ("rule", "resource", "reason", "expires", "stack")


def read_waivers(path: Path, rule_ids: Sequence[str]) -> list[Waiver]:
    where = str(path)
    # JSON is YAML here too; bounded and strict (input_files): duplicate keys, deep nesting, a
    # date that is no date (2026-02-30 stays text and is refused below) are bad input.
    doc = load_yaml(read_text(path, arg="--waivers", what="waivers YAML or JSON file", subject="waivers file"),
                    where, "waivers file")
    entries = doc.get("waivers") if isinstance(doc, dict) else doc
    if doc is None:
        entries = []
    if not isinstance(entries, list):
        raise SpecError([Problem("waivers", entries, "a list of {rule, resource, reason, expires}")],
                        source=where, subject="waivers file")
    if len(entries) > limits.WAIVERS.value:
        raise SpecError([Problem("waivers", f"{len(entries)} waivers", f"at most {limits.WAIVERS.value} waivers "
                                 f"({limits.WAIVERS.source})")], source=where, subject="waivers file")
    problems: list[Problem] = []
    out: list[Waiver] = []
    for i, entry in enumerate(entries):
        at = f"waivers[{i}]"
        before = len(problems)
        if not isinstance(entry, dict):
            problems.append(Problem(at, entry, "an object with rule, resource, reason, expires"))
            continue
        for key in entry:
            if key not in _WAIVER_KEYS:
                problems.append(Problem(f"{at}.{key}", entry[key], f"unknown key; allowed: {', '.join(_WAIVER_KEYS)}",
                                        close_match(str(key), _WAIVER_KEYS)))
            elif isinstance(entry[key], str) and len(entry[key]) > limits.WAIVER_TEXT.value:
                problems.append(Problem(f"{at}.{key}", f"<{len(entry[key]):,} characters>",
                                        f"at most {limits.WAIVER_TEXT.value} characters ({limits.WAIVER_TEXT.source})"))
        rule = entry.get("rule")
        if rule not in rule_ids:
            problems.append(Problem(f"{at}.rule", rule, "a rule id of the pack", close_match(rule, rule_ids)))
        resource = entry.get("resource")
        if not isinstance(resource, str) or not resource.strip():
            problems.append(Problem(f"{at}.resource", resource, "a URN, a resource name, a glob, or * for the stack"))
        reason = entry.get("reason")
        if not isinstance(reason, str) or len(reason.strip()) < 10:
            problems.append(Problem(f"{at}.reason", reason, "a sentence saying why (10 characters or more)"))
        expires = entry.get("expires")
        if isinstance(expires, dt.datetime):
            expires = expires.date()
        elif isinstance(expires, str):   # YAML dates arrive as text (input_files): 2026-02-30 is refused here
            try:
                expires = dt.date.fromisoformat(expires.strip())
            except ValueError:
                try:
                    expires = dt.datetime.fromisoformat(expires.strip()).date()
                except ValueError:
                    expires = None
        if not isinstance(expires, dt.date):
            problems.append(Problem(f"{at}.expires", entry.get("expires"), "a date, YYYY-MM-DD (every waiver expires)"))
        stack = entry.get("stack")
        if stack is not None and not isinstance(stack, str):
            problems.append(Problem(f"{at}.stack", stack, "a stack name or glob"))
        if len(problems) == before:
            out.append(Waiver(rule, resource.strip(), reason.strip(), expires, stack, i))
    if problems:
        raise SpecError(problems, source=where, subject="waivers file")
    return out


# ---------------------------------------------------------------- results


@dataclass
class Finding:
    """One violation as `aicluster check` reports it."""
    violation: Violation
    waiver: Waiver | None = None


@dataclass
class RuleResult:
    """One rule's result over one stack."""
    verdict: Verdict
    findings: list[Finding] = field(default_factory=list)

    @property
    def rule_id(self) -> str:
        return self.verdict.rule_id

    @property
    def status(self) -> str:
        if self.verdict.status in ("fail", "warn") and all(f.waiver for f in self.findings):
            return "waived"
        return self.verdict.status

    @property
    def open_findings(self) -> list[Finding]:
        return [f for f in self.findings if f.waiver is None]


@dataclass
class StackResult:
    """`aicluster check`'s results for one stack."""
    name: str
    source: Path | None
    results: list[RuleResult]
    resources: dict[str, Any]          # urn -> CapturedResource, for locations

    @property
    def mandatory_violations(self) -> int:
        return sum(len(r.open_findings) for r in self.results if r.verdict.mandatory and r.verdict.status == "fail")

    @property
    def advisory_violations(self) -> int:
        return sum(len(r.open_findings) for r in self.results if r.verdict.status == "warn")


@dataclass
class CheckReport:
    """`aicluster check`'s results for every stack checked."""
    stacks: list[StackResult]
    waivers: list[Waiver]
    config_source: str
    today: dt.date

    @property
    def expired_waivers(self) -> list[Waiver]:
        return [w for w in self.waivers if w.expired(self.today)]

    @property
    def unused_waivers(self) -> list[Waiver]:
        used = {id(f.waiver) for s in self.stacks for r in s.results for f in r.findings if f.waiver}
        return [w for w in self.waivers if not w.expired(self.today) and id(w) not in used]

    @property
    def exit_code(self) -> int:
        failed = any(s.mandatory_violations for s in self.stacks) or self.expired_waivers
        return 1 if failed else 0

    @property
    def rules(self) -> list[Any]:
        return list(load_rules())


def judge(name: str, source: Path | None, plan: Plan, config: dict[str, PolicyConfig],
          waivers: Sequence[Waiver], today: dt.date) -> StackResult:
    results = []
    for verdict in run_policies(plan, config):
        result = RuleResult(verdict)
        for violation in verdict.violations:
            waiver = next((w for w in waivers if not w.expired(today) and w.matches(name, verdict.rule_id, violation)),
                          None)
            result.findings.append(Finding(violation, waiver))
        results.append(result)
    return StackResult(name, source, results, {r.urn: r for r in plan.resources})


# ---------------------------------------------------------------- targets


class _ProgramExited(Exception):
    """The program tried to end the process (sys.exit, os._exit) instead of returning."""

    def __init__(self, how: str):
        super().__init__(how)
        self.how = how


def _program_plan(path: Path) -> Plan:
    """A hand-written Pulumi program, run under the offline mocks as `pulumi preview` would run it.

    A policy gate must never pass by accident: a program that exits (sys.exit with any code, also
    0, or os._exit) or that declares no resource is bad input, not an empty, passing check."""
    from aicluster.offline.engine import run_program

    folder = str(path.parent.resolve())

    def hard_exit(code: int = 0) -> None:
        raise _ProgramExited(f"os._exit({code!r})")

    def program() -> None:
        sys.path.insert(0, folder)
        try:
            runpy.run_path(str(path), run_name="__main__")
        except SystemExit as exc:   # BaseException: it would end `aicluster check` with the program's code
            raise _ProgramExited(f"sys.exit({exc.code!r})") from None
        finally:
            if sys.path and sys.path[0] == folder:
                sys.path.pop(0)

    real_exit, os._exit = os._exit, hard_exit   # only while the program runs: it would end the process
    try:
        plan = run_program(program, stack=path.stem, config={})
    except SpecError:
        raise
    except (_ProgramExited, SystemExit) as exc:   # SystemExit: raised from an Output's callback
        how = exc.how if isinstance(exc, _ProgramExited) else f"sys.exit({exc.code!r})"
        raise SpecError([Problem(str(path), how, "a Pulumi program that declares its resources and returns: it "
                                 "ended the process, so no policy could judge it (exit or not, the check "
                                 "does not pass)")], subject="program") from None
    except Exception as exc:  # noqa: BLE001 - a broken program is bad input, not an aicluster bug
        raise SpecError([Problem(str(path), type(exc).__name__, f"a Pulumi program that runs offline: {exc}")],
                        subject="program") from None
    finally:
        os._exit = real_exit
    if not plan.custom_resources():
        raise SpecError([Problem(str(path), "no resources", "a Pulumi program that declares at least one resource "
                                 "(a policy check of nothing would pass by accident)")], subject="program")
    return plan


def plan_targets(file: str | None, stack: str | None, all_stacks: bool) -> list[tuple[str, Path | None, Plan]]:
    from aicluster.commands.planner import plan_stack
    from aicluster.commands.stacks import stack_names

    chosen = [x for x in (file and "FILE", stack and "--stack", all_stacks and "--all") if x]
    if len(chosen) > 1:
        raise SpecError([Problem(chosen[1], file or stack, "one of FILE, --stack NAME or --all")], subject="argument")
    if file and file.endswith(".py"):
        path = Path(file)
        # A regular, readable file of bounded size (runpy reads it again to run it).
        read_text(path, arg="FILE", what="Pulumi program (.py)", subject="program")
        return [(path.stem, path, _program_plan(path))]
    targets = [file or stack] if (file or stack) else stack_names()
    if not targets:
        raise SpecError([Problem("--all", "stacks/", "a folder with at least one Pulumi.<stack>.yaml")], subject="argument")
    out = []
    for target in targets:
        result = plan_stack(target)
        out.append((result.stack.name, result.stack.path, result.plan))
    return out


def load_config(path: str | None) -> tuple[dict[str, PolicyConfig], str]:
    policies = [r.POLICY for r in load_rules()]
    if not path:
        return resolve_config(policies), "pack defaults"
    given = read_config_file(Path(path))
    return resolve_config(policies, given, source=path), path


def run_check(file: str | None = None, stack: str | None = None, all_stacks: bool = False,
              config_path: str | None = None, waivers_path: str | None = None,
              today: dt.date | None = None) -> CheckReport:
    today = today or dt.date.today()
    config, source = load_config(config_path)
    rule_ids = [r.POLICY.name for r in load_rules()]
    waivers = read_waivers(Path(waivers_path), rule_ids) if waivers_path else []
    stacks = [judge(name, path, plan, config, waivers, today)
              for name, path, plan in plan_targets(file, stack, all_stacks or not (file or stack))]
    return CheckReport(stacks, waivers, source, today)


# ---------------------------------------------------------------- shared wording


def _shown(path: Path | None) -> str:
    if path is None:
        return ""
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return str(path)
    return str(path) if relative.startswith("..") else relative


def _level(v: Verdict) -> str:
    return v.enforcement.value


def rule_line(r: RuleResult) -> str:
    v = r.verdict
    line = f"{_STATUS_WORD[r.status]:<6} {v.rule_id} {v.name} ({_level(v)})"
    if r.status == "n/a":
        line += f": {v.not_applicable}"
    elif r.findings:
        line += f": {len(r.findings)} violation{'s' if len(r.findings) != 1 else ''}"
    return line


def finding_lines(f: Finding) -> list[str]:
    where = f" [{f.violation.resource_name}]" if f.violation.resource_name else ""
    lines = [f"- {f.violation.message}{where}"]
    if f.waiver:
        lines.append(f"  waived by {f.waiver.describe()}: {f.waiver.reason}")
    return lines


def verdict_lines(verdicts: Iterable[Verdict]) -> list[str]:
    """One line per rule, plus each violation: the `aicluster plan` view (no waivers)."""
    lines = []
    for v in verdicts:
        r = RuleResult(v, [Finding(x) for x in v.violations])
        lines.append(rule_line(r))
        lines += ["       " + line for f in r.findings for line in finding_lines(f)]
    return lines


def summary(report: CheckReport) -> str:
    mandatory = sum(s.mandatory_violations for s in report.stacks)
    advisory = sum(s.advisory_violations for s in report.stacks)
    waived = sum(1 for s in report.stacks for r in s.results for f in r.findings if f.waiver)
    parts = [f"{mandatory} mandatory violation{'s' if mandatory != 1 else ''}", f"{advisory} advisory", f"{waived} waived"]
    if report.expired_waivers:
        parts.append(f"{len(report.expired_waivers)} expired waiver{'s' if len(report.expired_waivers) != 1 else ''}")
    return ", ".join(parts) + f" -> exit {report.exit_code}"


def _waiver_lines(report: CheckReport) -> list[str]:
    lines = [f"EXPIRED {w.describe()}: {w.reason} - renew it with a new date or fix the finding"
             for w in report.expired_waivers]
    lines += [f"unused  {w.describe()}: matches no violation" for w in report.unused_waivers]
    return lines


# ---------------------------------------------------------------- formats


def to_text(report: CheckReport) -> str:
    name, _ = pack_info()
    lines = [f"aicluster check: {len(report.stacks)} stack{'s' if len(report.stacks) != 1 else ''}, "
             f"{len(report.rules)} rules of {name}, config: {report.config_source}"]
    for s in report.stacks:
        lines += ["", f"stack {s.name} ({_shown(s.source)})"]
        for r in s.results:
            lines.append("  " + rule_line(r))
            lines += ["         " + line for f in r.findings for line in finding_lines(f)]
    waiver_lines = _waiver_lines(report)
    if waiver_lines:
        lines += ["", *waiver_lines]
    lines += ["", f"result: {summary(report)}"]
    return "\n".join(lines)


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(report: CheckReport) -> str:
    lines = ["## aicluster check", "", f"Config: `{report.config_source}`. Result: **{summary(report)}**.", ""]
    for s in report.stacks:
        lines += [f"### `{s.name}`", "", "| rule | name | enforcement | result | details |", "|---|---|---|---|---|"]
        for r in s.results:
            v = r.verdict
            details = "<br>".join(_md(line.strip()) for f in r.findings for line in finding_lines(f)) or \
                _md(v.not_applicable or "")
            lines.append(f"| `{v.rule_id}` | {v.name} | {_level(v)} | {_STATUS_WORD[r.status]} | {details} |")
        lines.append("")
    waiver_lines = _waiver_lines(report)
    if waiver_lines:
        lines += ["### Waivers", "", *[f"- {_md(line)}" for line in waiver_lines], ""]
    return "\n".join(lines).rstrip() + "\n"


def to_json(report: CheckReport) -> dict:
    name, _ = pack_info()
    return {
        "pack": name,
        "config": report.config_source,
        "date": report.today.isoformat(),
        "exit_code": report.exit_code,
        "summary": summary(report),
        "stacks": [{
            "stack": s.name,
            "source": _shown(s.source),
            "mandatory_violations": s.mandatory_violations,
            "advisory_violations": s.advisory_violations,
            "rules": [{
                "id": r.verdict.rule_id, "name": r.verdict.name,
                "severity": r.verdict.policy.severity.value if r.verdict.policy.severity else None,
                "enforcement": _level(r.verdict), "status": r.status,
                "not_applicable": r.verdict.not_applicable,
                "violations": [{
                    "message": f.violation.message, "urn": f.violation.urn, "resource": f.violation.resource_name,
                    "type": f.violation.resource_type,
                    "waiver": None if f.waiver is None else {
                        "reason": f.waiver.reason, "expires": f.waiver.expires.isoformat(), "resource": f.waiver.resource},
                } for f in r.findings],
            } for r in s.results],
        } for s in report.stacks],
        "waivers": [{"rule": w.rule, "resource": w.resource, "reason": w.reason, "expires": w.expires.isoformat(),
                     "stack": w.stack, "expired": w.expired(report.today),
                     "used": w not in report.unused_waivers} for w in report.waivers],
    }


def _location(s: StackResult, violation: Violation) -> tuple[str, int]:
    """The file a finding belongs to and the best line in it: the pool's entry in a spec, the
    resource's name in a program, else the cluster key."""
    if s.source is None:
        return "", 1
    uri = _shown(s.source).replace(os.sep, "/")
    try:
        lines = read_text(s.source, arg="FILE", what="stack file", subject="stack").splitlines()
    except SpecError:   # gone or changed since it was planned: point at its top
        return uri, 1
    resource = s.resources.get(violation.urn) if violation.urn else None
    needles = []
    if resource is not None:
        tags = resource.inputs.get("tags") if isinstance(resource.inputs.get("tags"), dict) else {}
        if tags.get("aicluster-pool"):
            needles.append(f"name: {tags['aicluster-pool']}")
        needles += [f'"{resource.name}"', f"'{resource.name}'"]
    needles += ["aicluster:cluster"]
    for needle in needles:
        for i, line in enumerate(lines, 1):
            if needle in line:
                return uri, i
    return uri, 1


def to_sarif(report: CheckReport) -> dict:
    name, description = pack_info()
    rules = report.rules
    index = {r.POLICY.name: i for i, r in enumerate(rules)}
    level = {"mandatory": "error", "remediate": "error", "advisory": "warning", "disabled": "none"}
    results = []
    for s in report.stacks:
        for r in s.results:
            for f in r.findings:
                uri, line = _location(s, f.violation)
                result: dict[str, Any] = {
                    "ruleId": r.rule_id,
                    "ruleIndex": index[r.rule_id],
                    "level": level[_level(r.verdict)],
                    "message": {"text": f"{f.violation.message} (stack {s.name})"},
                    "locations": [{
                        "physicalLocation": {"artifactLocation": {"uri": uri, "uriBaseId": "%SRCROOT%"},
                                             "region": {"startLine": line}},
                        "logicalLocations": [{"fullyQualifiedName": f.violation.urn or f"stack {s.name}",
                                              "name": f.violation.resource_name or s.name, "kind": "resource"}],
                    }],
                    "partialFingerprints": {"aiclusterFinding/v1": hashlib.sha256(
                        f"{s.name}|{r.rule_id}|{f.violation.urn}".encode()).hexdigest()},
                    "properties": {"stack": s.name, "enforcement": _level(r.verdict)},
                }
                if f.waiver:
                    result["suppressions"] = [{"kind": "external", "status": "accepted",
                                               "justification": f"{f.waiver.reason} (expires {f.waiver.expires})"}]
                results.append(result)
    notifications = [{"level": "error", "message": {"text": f"{w.describe()} has expired: {w.reason}"}}
                     for w in report.expired_waivers]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "aicluster",
                "fullName": f"aicluster check ({name})",
                "informationUri": TOOL_URI,
                "semanticVersion": "0.1.0",
                "rules": [{
                    "id": rule.POLICY.name,
                    "name": rule.POLICY.display_name,
                    "shortDescription": {"text": rule.POLICY.description},
                    "fullDescription": {"text": (rule.__doc__ or rule.POLICY.description).strip()},
                    "help": {"text": rule.POLICY.remediation_steps or "",
                             "markdown": f"**Remediation:** {rule.POLICY.remediation_steps or ''}"},
                    "defaultConfiguration": {"level": level[(rule.POLICY.enforcement_level.value
                                                             if rule.POLICY.enforcement_level else "advisory")]},
                    "properties": {"tags": list(rule.POLICY.tags or []),
                                   "severity": rule.POLICY.severity.value if rule.POLICY.severity else None,
                                   "problem.severity": {"high": "error", "critical": "error", "medium": "warning",
                                                        "low": "recommendation"}.get(
                                       rule.POLICY.severity.value if rule.POLICY.severity else "", "warning")},
                } for rule in rules],
            }},
            "invocations": [{"executionSuccessful": True, "exitCode": report.exit_code,
                             "toolExecutionNotifications": notifications}],
            "originalUriBaseIds": {"%SRCROOT%": {"description": {"text": "the repository root"}}},
            "results": results,
            "properties": {"config": report.config_source, "description": description},
        }],
    }


def to_junit(report: CheckReport) -> str:
    suites = ET.Element("testsuites", name="aicluster check")
    total = failures = skipped = 0
    for s in report.stacks:
        suite = ET.SubElement(suites, "testsuite", name=f"aicluster.{s.name}")
        counts = {"tests": 0, "failures": 0, "skipped": 0, "errors": 0}
        for r in s.results:
            v = r.verdict
            case = ET.SubElement(suite, "testcase", classname=f"aicluster.{s.name}", name=f"{v.rule_id} {v.name}")
            counts["tests"] += 1
            details = "\n".join(line for f in r.findings for line in finding_lines(f))
            if r.status == "fail":
                counts["failures"] += 1
                failure = ET.SubElement(case, "failure", type=v.rule_id,
                                        message=f"{len(r.open_findings)} mandatory violation(s)")
                failure.text = details
            elif r.status in ("n/a", "disabled"):
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message=v.not_applicable or "disabled by the policy config")
            elif details:
                ET.SubElement(case, "system-out").text = f"{r.status}:\n{details}"
        for key, value in counts.items():
            suite.set(key, str(value))
        total, failures, skipped = total + counts["tests"], failures + counts["failures"], skipped + counts["skipped"]
    if report.expired_waivers:
        suite = ET.SubElement(suites, "testsuite", name="aicluster.waivers", tests=str(len(report.waivers)),
                              failures=str(len(report.expired_waivers)), skipped="0", errors="0")
        for w in report.waivers:
            case = ET.SubElement(suite, "testcase", classname="aicluster.waivers", name=w.describe())
            if w.expired(report.today):
                ET.SubElement(case, "failure", type="expired-waiver", message="waiver expired").text = w.reason
        total += len(report.waivers)
        failures += len(report.expired_waivers)
    suites.set("tests", str(total))
    suites.set("failures", str(failures))
    suites.set("skipped", str(skipped))
    suites.set("errors", "0")
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _gh_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_property(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def to_github(report: CheckReport) -> str:
    """GitHub Actions workflow commands: an annotation per finding, on the stack file."""
    lines = []
    for s in report.stacks:
        for r in s.results:
            for f in r.open_findings:
                uri, line = _location(s, f.violation)
                command = "error" if r.status == "fail" else "warning"
                props = [f"file={_gh_property(uri)}", f"line={line}"] if uri else []
                props.append(f"title={_gh_property(f'{r.rule_id} {r.verdict.name} ({s.name})')}")
                lines.append(f"::{command} {','.join(props)}::{_gh_data(f.violation.message)}")
    for w in report.expired_waivers:
        lines.append(f"::error title={_gh_property('expired waiver')}::{_gh_data(w.describe() + ': ' + w.reason)}")
    lines.append(f"::notice title=aicluster check::{_gh_data(summary(report))}")
    return "\n".join(lines)


def render(report: CheckReport, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(to_json(report), indent=2)
    if fmt == "sarif":
        return json.dumps(to_sarif(report), indent=2)
    if fmt == "junit":
        return to_junit(report).rstrip("\n")
    if fmt == "markdown":
        return to_markdown(report).rstrip("\n")
    if fmt == "github":
        return to_github(report)
    return to_text(report)


def verdicts_for_plan(plan: Plan) -> list[Verdict]:
    """The pack's verdicts on one plan with the pack's default config (for `aicluster plan`)."""
    config, _ = load_config(None)
    return run_policies(plan, config)
