"""Run the aicluster CrossGuard pack offline: the same policy objects, pulumi_policy's own argument types.

`pulumi preview --policy-pack policies` starts `policies/__main__.py`, whose PolicyPack serves the
rules over gRPC; the engine sends each resource (Analyze) and then the whole stack (AnalyzeStack).
Here the rules are imported from `policies/rules` directly and called with the argument objects
pulumi_policy's own analyzer builds:

* `ResourceValidationArgs(type, props, urn, name, PolicyResourceOptions, provider, config)` per
  custom resource, `props` = the resource's inputs;
* `StackValidationArgs([PolicyResource ...], config)`, `props` = each resource's state (inputs plus
  what the fake cloud computed, and `id`, as a bridged provider's state has), parents,
  dependencies and property dependencies linked as the engine links them;
* every props object goes through the path the analyzer uses: protobuf Struct ->
  `json_format.MessageToDict` -> `pulumi_policy.deserialize.deserialize_properties` ->
  `unknown_checking_proxy`. So numbers arrive as floats and secrets unwrapped, exactly as in a
  real preview.

Config follows the Pulumi CLI's `--policy-pack-config` handling (LoadPolicyPackConfigFromFile and
ReconcilePolicyPackConfig in pulumi/pulumi): schema defaults, then `"all"`, then per-policy
enforcement levels and properties, validated against each policy's config schema. Offline the file
is also checked for unknown policy names and properties (the CLI ignores them silently).

What differs from the engine, on purpose:
* `retainOnDelete` is not part of the analyzer protocol's resource options; the bridge adds it to
  PolicyResourceOptions as an extra attribute `retain_on_delete` (from the captured plan), so
  AIC-STO-005 can judge it offline. Under the engine the attribute is absent.
* Property dependencies are rebuilt from values (an input that holds another resource's id, ARN,
  self link or URN depends on it); the engine records them from Output usage. Offline plans run
  with preview=False, so every value is known and the two agree.
"""
from __future__ import annotations

import asyncio
import importlib.util
import inspect
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Iterable, Mapping

from google.protobuf import json_format
from pulumi_policy import (EnforcementLevel, Policy, PolicyCustomTimeouts, PolicyResource, PolicyResourceOptions,
                           ResourceValidationArgs, ResourceValidationPolicy, StackValidationArgs,
                           StackValidationPolicy)
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.policy import _NotApplicableError
from pulumi_policy.proxy import UnknownValueError, unknown_checking_proxy

from aicluster.errors import Problem, SpecError, close_match
from aicluster.resources import shipped_dir
from aicluster.offline.capture import STACK_TYPE, CapturedResource, Plan, plain_to_struct, reveal

RULES_PACKAGE = "aicluster_policy_rules"
_LEVELS = {level.value: level for level in EnforcementLevel}


# ---------------------------------------------------------------- loading the pack


def policies_dir() -> Path:
    """The policy pack aicluster ships (policies/ of the checkout, or aicluster/policies in a wheel)."""
    return shipped_dir("policies")


def load_rules() -> tuple[ModuleType, ...]:
    """The rule modules of policies/rules, imported once as the package `aicluster_policy_rules`
    (under Pulumi the same directory is the top-level package `rules`)."""
    module = sys.modules.get(RULES_PACKAGE)
    if module is None:
        folder = policies_dir() / "rules"
        spec = importlib.util.spec_from_file_location(RULES_PACKAGE, folder / "__init__.py",
                                                      submodule_search_locations=[str(folder)])
        module = importlib.util.module_from_spec(spec)
        sys.modules[RULES_PACKAGE] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(RULES_PACKAGE, None)
            raise
    return tuple(module.RULES)


def pack_info() -> tuple[str, str]:
    load_rules()
    module = sys.modules[RULES_PACKAGE]
    return module.PACK_NAME, module.PACK_DESCRIPTION


# ---------------------------------------------------------------- config


@dataclass(frozen=True)
class PolicyConfig:
    """A policy's enforcement level and its configured properties."""
    enforcement: EnforcementLevel
    properties: dict


def _schema_of(policy: Policy) -> dict:
    """The JSON schema the Pulumi CLI validates a policy's config with (convertSchema)."""
    out: dict[str, Any] = {"type": "object"}
    if policy.config_schema is not None and policy.config_schema.properties:
        out["properties"] = policy.config_schema.properties
    if policy.config_schema is not None and policy.config_schema.required:
        out["required"] = policy.config_schema.required
    return out


def read_config_file(path: Path) -> dict[str, dict]:
    """A --policy-pack-config file, parsed as the CLI parses it: each value is an enforcement level
    or an object of properties with an optional enforcementLevel. Returns name -> {enforcementLevel?, ...}."""
    from aicluster.spec.input_files import load_json, read_text   # bounded read; duplicate keys, depth, huge integers refused

    where = str(path)
    text = read_text(path, arg="--config", what="policy config JSON file", subject="policy config")
    doc = load_json(text or "{}", where, "policy config")
    if not isinstance(doc, dict):
        raise SpecError([Problem(where, doc, "a JSON object of policy name -> level or settings")], subject="policy config")
    out: dict[str, dict] = {}
    problems = []
    for name, value in doc.items():
        if isinstance(value, str):
            value = {"enforcementLevel": value}
        if not isinstance(value, dict):
            problems.append(Problem(name, value, "an enforcement level or an object of settings"))
            continue
        level = value.get("enforcementLevel")
        if level is not None and (not isinstance(level, str) or level not in _LEVELS):
            problems.append(Problem(f"{name}.enforcementLevel", level, f"one of {', '.join(_LEVELS)}",
                                    close_match(level, _LEVELS)))
        out[name] = dict(value)
    if problems:
        raise SpecError(problems, source=where, subject="policy config")
    return out


def resolve_config(policies: Iterable[Policy], given: Mapping[str, dict] | None = None,
                   source: str | None = None) -> dict[str, PolicyConfig]:
    """ReconcilePolicyPackConfig: defaults from the schemas, then "all", then each policy's entry."""
    policies = list(policies)
    names = [p.name for p in policies]
    result: dict[str, PolicyConfig] = {}
    for policy in policies:
        props = {k: v["default"] for k, v in ((policy.config_schema.properties or {}).items()
                                              if policy.config_schema else []) if "default" in v}
        result[policy.name] = PolicyConfig(policy.enforcement_level or EnforcementLevel.ADVISORY, props)
    given = dict(given or {})
    problems: list[Problem] = []
    all_level = (given.pop("all", None) or {}).get("enforcementLevel")
    if all_level:
        result = {n: PolicyConfig(_LEVELS[all_level], c.properties) for n, c in result.items()}
    by_name = {p.name: p for p in policies}
    for name, entry in given.items():
        if name not in by_name:
            problems.append(Problem(name, name, f"a rule id of this pack: {', '.join(names)}, or all",
                                    close_match(name, names)))
            continue
        entry = dict(entry)
        level = entry.pop("enforcementLevel", None)
        allowed = list((by_name[name].config_schema.properties or {}) if by_name[name].config_schema else [])
        for key in entry:
            if key not in allowed:
                problems.append(Problem(f"{name}.{key}", entry[key],
                                        f"a setting of {name}: {', '.join(allowed) or 'it takes none'}",
                                        close_match(key, allowed)))
        current = result[name]
        result[name] = PolicyConfig(_LEVELS[level] if level else current.enforcement, {**current.properties, **entry})
    for policy in policies:
        if policy.name not in given:   # its schema's own defaults (policies/config/default.json is checked)
            continue
        import jsonschema   # only for a given config: `aicluster plan` runs the defaults

        validator = jsonschema.Draft7Validator(_schema_of(policy))
        for error in validator.iter_errors(result[policy.name].properties):
            path = ".".join(str(p) for p in error.absolute_path)
            problems.append(Problem(f"{policy.name}.{path}" if path else policy.name, error.instance, error.message))
    if problems:
        raise SpecError(problems, source=source, subject="policy config")
    # The engine hands a policy its config through a protobuf Struct (numbers become floats).
    return {n: PolicyConfig(c.enforcement, json_format.MessageToDict(plain_to_struct(c.properties)))
            for n, c in result.items()}


# ---------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class Violation:
    """One policy violation, with the resource it is about."""
    message: str
    urn: str | None
    resource_name: str | None = None
    resource_type: str | None = None


@dataclass
class Verdict:
    """One policy's verdict over a plan."""
    rule: ModuleType
    enforcement: EnforcementLevel
    violations: list[Violation] = field(default_factory=list)
    not_applicable: str | None = None
    judged: int = 0                      # resources a resource policy judged

    @property
    def policy(self) -> Policy:
        return self.rule.POLICY

    @property
    def rule_id(self) -> str:
        return self.policy.name

    @property
    def name(self) -> str:
        return self.policy.display_name or self.policy.name

    @property
    def status(self) -> str:
        """disabled | fail (mandatory violation) | warn (advisory violation) | n/a | pass"""
        if self.enforcement == EnforcementLevel.DISABLED:
            return "disabled"
        if self.violations:
            return "fail" if self.mandatory else "warn"
        return "n/a" if self.not_applicable is not None else "pass"

    @property
    def mandatory(self) -> bool:
        return self.enforcement in (EnforcementLevel.MANDATORY, EnforcementLevel.REMEDIATE)


# ---------------------------------------------------------------- engine-shaped arguments


def engine_props(value: Mapping, wire: dict | None = None) -> Any:
    """Captured plain props -> what pulumi_policy's analyzer hands a policy. `wire`, when given, is
    the props as the engine sends them (_wire_dict(value)), worked out once for many policies:
    deserialize_properties builds fresh containers from it on every call, so no policy sees what
    another one did to its props."""
    as_dict = wire if wire is not None else _wire_dict(value)
    return unknown_checking_proxy(deserialize_properties(as_dict))


def _wire_dict(value: Mapping) -> dict:
    return json_format.MessageToDict(plain_to_struct(dict(value)))


class _ResourceArgs(ResourceValidationArgs):
    """ResourceValidationArgs whose props (engine_props of the resource's wire dict) are made on the
    policy's first look at them: most policies only read the type of most resources. Each args, so
    each policy, still gets props of its own."""

    def __init__(self, wire: dict, *args: Any) -> None:
        self._wire = wire
        super().__init__(*args)

    @property
    def props(self) -> Any:
        if self._props is None:
            self._props = engine_props({}, self._wire)
        return self._props

    @props.setter
    def props(self, value: Any) -> None:
        self._props = value


def _options(r: CapturedResource) -> PolicyResourceOptions:
    opts = PolicyResourceOptions(
        r.protect, list(r.ignore_changes), r.delete_before_replace if r.delete_before_replace else None, [],
        PolicyCustomTimeouts(0, 0, 0), list(r.additional_secret_outputs), r.parent_urn)
    opts.retain_on_delete = r.retain_on_delete   # not in the analyzer protocol: see the module docstring
    return opts


def _state(r: CapturedResource) -> dict:
    state = dict(r.outputs if r.custom else r.outputs or {})
    if r.custom and r.id and "id" not in state:
        state["id"] = r.id
    return state


def _references(resources: list[CapturedResource]) -> dict[str, dict[str, list[str]]]:
    """urn -> top-level input key -> URNs it refers to (id, ARN, self link or URN in the value)."""
    by_ref: dict[str, str] = {}
    for r in resources:
        state = reveal(_state(r))
        for key in (r.urn, state.get("id"), state.get("arn"), state.get("selfLink"), state.get("selfLinkUnique")):
            if isinstance(key, str) and len(key) >= 6:
                by_ref.setdefault(key, r.urn)
    out: dict[str, dict[str, list[str]]] = {}
    for r in resources:
        deps: dict[str, list[str]] = {}
        for key, value in reveal(r.inputs).items():
            found = []
            for text in _strings(value):
                urn = by_ref.get(text)
                if urn and urn != r.urn and urn not in found:
                    found.append(urn)
            if found:
                deps[key] = found
        out[r.urn] = deps
    return out


def _strings(value: Any):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def stack_resources(plan: Plan) -> list[PolicyResource]:
    """The stack as AnalyzeStack hands it to a StackValidationPolicy."""
    resources = list(plan.resources)
    refs = _references(resources)
    made = {r.urn: PolicyResource(r.type, engine_props(_state(r)), r.urn, r.name, _options(r), None, None, [], {})
            for r in resources}
    for r in resources:
        pr = made[r.urn]
        if r.parent_urn in made:
            pr.parent = made[r.parent_urn]
        pr.dependencies = [made[d] for d in r.dependencies if d in made]
        pr.property_dependencies = {k: [made[u] for u in urns if u in made] for k, urns in refs[r.urn].items()}
    return list(made.values())


def _kind(type_token: str) -> str:
    parts = type_token.split(":")
    return ":".join(parts[:2]) if len(parts) >= 3 else type_token


def _call(policy: Policy, args: Any, report) -> str | None:
    """Run one validation; return a not-applicable reason, or None."""
    try:
        result = policy.validate(args, report)
        if inspect.isawaitable(result):
            loop = asyncio.new_event_loop()
            try:
                loop.run_until_complete(result)
            finally:
                loop.close()
    except _NotApplicableError as exc:
        return exc.reason or "not applicable"
    except UnknownValueError as exc:   # as the analyzer does: an advisory note, not a verdict
        report(f"can't run policy during preview: {exc.message}", getattr(args, "urn", None))
    return None


def run_policies(plan: Plan, config: Mapping[str, PolicyConfig] | None = None,
                 rules: Iterable[ModuleType] | None = None) -> list[Verdict]:
    """Every rule of the pack over one plan, in pack order."""
    rules = tuple(rules) if rules is not None else load_rules()
    config = dict(config) if config is not None else resolve_config([r.POLICY for r in rules])
    custom = [r for r in plan.resources if r.custom and r.type != STACK_TYPE]
    by_urn = {r.urn: r for r in plan.resources}
    wire = {}   # urn -> its inputs as the engine sends them, for every resource policy alike
    stack = None
    verdicts = []
    for rule in rules:
        policy = rule.POLICY
        cfg = config.get(policy.name) or PolicyConfig(policy.enforcement_level or EnforcementLevel.ADVISORY, {})
        level = EnforcementLevel.MANDATORY if cfg.enforcement == EnforcementLevel.REMEDIATE else cfg.enforcement
        verdict = Verdict(rule, level)
        verdicts.append(verdict)
        if level == EnforcementLevel.DISABLED:
            continue
        if isinstance(policy, ResourceValidationPolicy):
            supported = set(getattr(rule, "SUPPORTED", ()))
            skipped = []
            for r in custom:
                def report(message: str, urn: str | None = None, _r=r) -> None:
                    verdict.violations.append(Violation(message, _r.urn, _r.name, _r.type))
                if r.urn not in wire:
                    wire[r.urn] = _wire_dict(r.inputs)
                args = _ResourceArgs(wire[r.urn], r.type, None, r.urn, r.name, _options(r), None,
                                     dict(cfg.properties), {})
                reason = _call(policy, args, report)
                if _kind(r.type) in supported:
                    if reason is None:
                        verdict.judged += 1
                    else:
                        skipped.append(reason)
            if not verdict.judged and not verdict.violations:
                verdict.not_applicable = (skipped[0] if skipped else
                                          f"no {', '.join(sorted(supported))} in this stack")
        elif isinstance(policy, StackValidationPolicy):
            if stack is None:
                stack = stack_resources(plan)

            def report(message: str, urn: str | None = None) -> None:
                r = by_urn.get(urn) if urn else None
                verdict.violations.append(Violation(message, urn or None, r.name if r else None, r.type if r else None))
            verdict.not_applicable = _call(policy, StackValidationArgs(stack, dict(cfg.properties), {}), report)
    return verdicts
