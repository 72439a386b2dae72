"""The spec reference in Markdown, rendered from the cluster spec's JSON Schema (pure: no I/O).

`aicluster schema --format markdown` prints it; docs/spec-reference.md is that output, and
tests/test_docs.py keeps the two equal. Sections follow the spec's nesting: the top level first,
then every object in the order its key appears (`network`, `network.existing`, `pools[]`, ...).
Each section is one table: key, type, default, allowed values and the field's description."""
from __future__ import annotations

import json
from typing import Any, Iterator, Mapping

REGENERATE = "aicluster schema --format markdown > docs/spec-reference.md"

_Schema = Mapping[str, Any]


def markdown(schema: _Schema) -> str:
    """The whole reference page, ending with a newline."""
    defs = schema.get("$defs", {})
    lines = [
        "# Spec reference",
        "",
        f"<!-- Generated from the pydantic schema; do not edit. Regenerate with: {REGENERATE} -->",
        "",
        "Generated from the cluster spec's schema (`aicluster schema`). The spec lives under the",
        "stack config key `aicluster:cluster`; unknown keys are refused. Guidance that goes beyond",
        "one key (which keys go together, per-cloud behaviour, worked examples) is in",
        "[spec.md](spec.md).",
        "",
    ]
    if schema.get("description"):
        lines += [_text(schema["description"]), ""]
    for path, obj in _sections(schema, defs):
        lines += [f"## `{path}`" if path else "## Top level", ""]
        if obj.get("description") and path:
            lines += [_text(obj["description"]), ""]
        lines += _table(obj, defs)
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def _sections(schema: _Schema, defs: _Schema) -> Iterator[tuple[str, _Schema]]:
    """(path, object schema) for the top level and every nested object, depth first, each once."""
    seen: set[str] = set()

    def walk(path: str, obj: _Schema) -> Iterator[tuple[str, _Schema]]:
        yield path, obj
        for key, prop in obj.get("properties", {}).items():
            for suffix, name in _refs(prop):
                if name in seen:
                    continue
                seen.add(name)
                child = f"{path}.{key}{suffix}" if path else f"{key}{suffix}"
                yield from walk(child, defs[name])

    yield from walk("", schema)


def _refs(prop: _Schema, suffix: str = "") -> Iterator[tuple[str, str]]:
    """The object definitions a property refers to, with `[]` for list items."""
    if "$ref" in prop:
        yield suffix, prop["$ref"].rsplit("/", 1)[-1]
    for option in (*prop.get("anyOf", ()), *prop.get("allOf", ())):
        yield from _refs(option, suffix)
    if isinstance(prop.get("items"), Mapping):
        yield from _refs(prop["items"], suffix + "[]")


def _table(obj: _Schema, defs: _Schema) -> list[str]:
    required = set(obj.get("required", ()))
    rows = ["| key | type | default | allowed | description |", "|---|---|---|---|---|"]
    for key, prop in obj.get("properties", {}).items():
        default = "required" if key in required else _default(prop)
        rows.append("| " + " | ".join(_cell(c) for c in (
            f"`{key}`", _type(prop), default, _allowed(prop), _text(prop.get("description", "")))) + " |")
    return rows


def _type(prop: _Schema) -> str:
    if "$ref" in prop:
        return "object"
    if "anyOf" in prop:
        kinds = [_type(option) for option in prop["anyOf"] if option.get("type") != "null"]
        return " or ".join(dict.fromkeys(kinds))
    kind = prop.get("type", "")
    if kind == "array":
        return f"list of {_type(prop.get('items', {}))}"
    if kind == "object" and isinstance(prop.get("additionalProperties"), Mapping):
        return f"map of {_type(prop['additionalProperties'])}"
    return {"integer": "integer", "number": "number", "string": "string", "boolean": "boolean"}.get(kind, kind or "any")


def _default(prop: _Schema) -> str:
    if "default" not in prop:
        return ""
    value = prop["default"]
    if value is None:
        return "none"
    if isinstance(value, Mapping) and ("$ref" in prop or any("$ref" in o for o in prop.get("anyOf", ()))):
        return "see below" if value else "`{}`"
    return f"`{json.dumps(value, sort_keys=True)}`" if not isinstance(value, str) else f"`{value}`"


def _allowed(prop: _Schema) -> str:
    parts: list[str] = []
    for option in (prop, *prop.get("anyOf", ())):
        if option is not prop and option.get("type") == "null":
            continue
        parts += _constraints(option)
    if isinstance(prop.get("items"), Mapping) and "$ref" not in prop["items"]:
        parts += [f"each: {c}" for c in _constraints(prop["items"])]
    if isinstance(prop.get("additionalProperties"), Mapping):
        parts += [f"values: {c}" for c in _constraints(prop["additionalProperties"])]
    if isinstance(prop.get("propertyNames"), Mapping):
        parts += [f"keys: {c}" for c in _constraints(prop["propertyNames"])]
    return "; ".join(dict.fromkeys(parts))


def _constraints(prop: _Schema) -> list[str]:
    out: list[str] = []
    if "enum" in prop:
        out.append(", ".join(f"`{v}`" for v in prop["enum"]))
    if "const" in prop:
        out.append(f"`{prop['const']}`")
    low = ("> " + _num(prop["exclusiveMinimum"])) if "exclusiveMinimum" in prop else \
          (">= " + _num(prop["minimum"])) if "minimum" in prop else ""
    high = ("< " + _num(prop["exclusiveMaximum"])) if "exclusiveMaximum" in prop else \
           ("<= " + _num(prop["maximum"])) if "maximum" in prop else ""
    if low or high:
        out.append(", ".join(x for x in (low, high) if x))
    if "minLength" in prop or "maxLength" in prop:
        out.append(f"{prop.get('minLength', 0)}-{prop['maxLength']} chars" if "maxLength" in prop
                   else f"at least {prop['minLength']} chars")
    if "pattern" in prop:
        out.append(f"pattern `{prop['pattern']}`")
    if "minItems" in prop or "maxItems" in prop:
        out.append(f"{prop.get('minItems', 0)}-{prop['maxItems']} items" if "maxItems" in prop
                   else f"at least {prop['minItems']} items")
    return out


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _text(text: str) -> str:
    return " ".join(str(text).split())


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
