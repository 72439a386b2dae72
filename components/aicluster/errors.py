"""SpecError: the one exception bad user input may raise.

Every problem names where it is in the YAML (``pools[1].max_nodes``), the value found, what is
allowed, and a close match when one exists. The CLI prints it and exits 2; `pulumi up` shows it
without a traceback.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from aicluster import limits


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input, at a path, and what was expected there."""
    path: str
    value: Any
    allowed: str
    suggestion: str | None = None

    def __str__(self) -> str:
        path = self.path or "<root>"
        if len(path) > limits.PATH_CHARS.value:   # a hostile key must not make the report huge
            path = path[:limits.PATH_CHARS.value - 3] + "..."
        text = f"{path}: {_show(self.value)} is not valid; {self.allowed}"
        if self.suggestion:
            text += f" (did you mean {self.suggestion}?)"
        return text


class SpecError(ValueError):
    """A spec that cannot be built. Holds every problem found, not just the first."""

    def __init__(self, problems: Sequence[Problem], source: str | None = None, subject: str = "cluster spec"):
        self.problems = tuple(problems)
        self.source = source
        self.subject = subject
        super().__init__(self.render())

    @classmethod
    def one(cls, path: str, value: Any, allowed: str, choices: Iterable[str] = (),
            subject: str = "cluster spec") -> "SpecError":
        return cls([Problem(path, value, allowed, close_match(value, choices))], subject=subject)

    def render(self) -> str:
        where = f" in {self.source}" if self.source else ""
        noun = "problem" if len(self.problems) == 1 else "problems"
        lines = [f"invalid {self.subject}{where} ({len(self.problems)} {noun}):"]
        shown = limits.PROBLEMS_SHOWN.value
        lines += [f"  - {p}" for p in self.problems[:shown]]
        if len(self.problems) > shown:
            lines.append(f"  ... and {len(self.problems) - shown} more (fix these and run again)")
        return "\n".join(lines)

    def with_source(self, source: str) -> "SpecError":
        return SpecError(self.problems, source, self.subject)


def join_path(*parts: str | int) -> str:
    """('pools', 1, 'max_nodes') -> 'pools[1].max_nodes'."""
    out = ""
    for part in parts:
        if part == "[key]":  # pydantic's marker for "the key itself" in a mapping
            continue
        if isinstance(part, int):
            out += f"[{part}]"
        elif part != "":
            out += f".{part}" if out else str(part)
    return out


def close_match(value: Any, choices: Iterable[str]) -> str | None:
    """The nearest choice to a misspelled value, or None if nothing is near enough."""
    if not isinstance(value, str) or not value or len(value) > 256:   # difflib is quadratic in length
        return None
    options = sorted(set(choices))
    if value in options:
        return None
    lowered = value.lower()
    for option in options:  # case slips and truncations: "P5.48XLARGE", "p5.48x"
        if option.lower() == lowered:
            return option
    by_lower = {o.lower(): o for o in options}
    found = difflib.get_close_matches(lowered, list(by_lower), n=1, cutoff=0.6)
    if found:
        return by_lower[found[0]]
    prefixed = [o for o in options if o.lower().startswith(lowered)]
    return prefixed[0] if prefixed else None


def _bounded_repr(value: Any, depth: int = 0) -> str:
    """repr() bounded in depth and width, in the value's own order: a hostile, deeply nested
    value must not crash the error report (plain repr recurses until RecursionError)."""
    if depth > 3:
        return "..."
    if isinstance(value, (list, tuple)):
        items = [_bounded_repr(v, depth + 1) for v in value[:6]] + (["..."] if len(value) > 6 else [])
        return "[" + ", ".join(items) + "]"
    if isinstance(value, dict):
        items = [f"{_bounded_repr(k, 3)}: {_bounded_repr(v, depth + 1)}" for k, v in list(value.items())[:6]]
        return "{" + ", ".join(items + (["..."] if len(value) > 6 else [])) + "}"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return f"<an integer of about {int(value.bit_length() * 0.30103) + 1} digits>"   # repr refuses > 4300
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a value whose repr fails must not hide the problem
        return f"<{type(value).__name__}>"
    return text[:200]


def _show(value: Any) -> str:
    text = _bounded_repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
