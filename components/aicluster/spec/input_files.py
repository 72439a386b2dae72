"""Reading the files a user hands aicluster: bounded, and strict where parsers are lenient.

Every spec, stack file, policy config and waivers file goes through here, so each gets the same
guarantees (limits.py):

- `read_text`: a regular file only (a directory, FIFO, device or socket is refused before it is
  read, so `--config /dev/zero` or a FIFO neither exhausts memory nor blocks), read with a bounded
  read, decoded as UTF-8. Every OSError becomes a SpecError naming the argument.
- `load_yaml`: libyaml's parser where PyYAML has it (the same documents, several times faster than
  pure Python); a first pass over the parser's events refuses nesting deeper than the limit (before
  libyaml's recursive composer could crash on it; PyYAML's own parser redoes the pass where libyaml
  gives up first, so the problem keeps its path), alias expansion past the value limit ("billion
  laughs") and recursive aliases; a pass over the composed nodes refuses duplicate keys at any depth
  (YAML says keys are unique; a second `pools:` would silently replace the first), over-long
  scalars, integer literals Python will not convert and tags that build no JSON value (!!binary,
  !!set, !!omap, local tags). Timestamps stay the text written (as Pulumi reads stack files), so
  2026-02-30 is refused by the field that wants a date, by path.
- `load_json`: the same refusals for JSON (duplicate keys, depth, integer literals).

Every problem names its path in the document and, for YAML, its line.
"""
from __future__ import annotations

import json
import json.decoder
import math
import json.scanner
import os
import stat
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.events import (AliasEvent, MappingEndEvent, MappingStartEvent, ScalarEvent, SequenceEndEvent,
                         SequenceStartEvent)
from yaml.nodes import MappingNode, ScalarNode, SequenceNode
from yaml.parser import Parser

from aicluster import limits
from aicluster.errors import Problem, SpecError, join_path

_INT_TAG = "tag:yaml.org,2002:int"
_MERGE_TAG = "tag:yaml.org,2002:merge"


# ---------------------------------------------------------------- reading


_FILE_KINDS = {stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFCHR: "a character device",
               stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket"}


def read_text(path: str | Path, *, arg: str, what: str, subject: str) -> str:
    """The text of a regular file of at most limits.FILE_BYTES, or a SpecError on `arg`.

    `what` names the file in messages ("stack or spec YAML file"); `subject` is the SpecError's
    subject for a file that is not UTF-8."""
    where = str(path)
    limit = limits.FILE_BYTES.value

    def refuse(allowed: str) -> SpecError:
        return SpecError([Problem(arg, where, allowed)], subject="argument")

    # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused right after.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(where, flags)
    except FileNotFoundError:
        raise refuse(f"an existing {what}") from None
    except PermissionError:
        raise refuse(f"{what} aicluster may read (permission denied)") from None
    except IsADirectoryError:
        raise refuse(f"{what}, not a directory") from None
    except NotADirectoryError:
        raise refuse(f"an existing {what} (a folder on its path is a file)") from None
    except (OSError, ValueError) as exc:   # ELOOP, ENAMETOOLONG, a NUL in the name ...
        raise refuse(f"{what} aicluster can open ({getattr(exc, 'strerror', None) or exc})") from None
    chunks: list[bytes] = []
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise refuse(f"{what}, not a directory")
        if not stat.S_ISREG(info.st_mode):
            kind = _FILE_KINDS.get(stat.S_IFMT(info.st_mode), "not a regular file")
            raise refuse(f"a regular file holding the {what}; this is {kind}")
        if info.st_size > limit:
            raise refuse(f"{what} of at most {limit:,} bytes (limits.FILE_BYTES); it has {info.st_size:,}")
        size = 0
        while True:   # bounded: never more than limit + 1 bytes, whatever st_size said
            chunk = os.read(fd, min(1 << 16, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise refuse(f"{what} of at most {limit:,} bytes (limits.FILE_BYTES); it has more")
    except OSError as exc:
        raise refuse(f"{what} aicluster can read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise SpecError([Problem(where, "<file>", f"UTF-8 text (line {line} holds the byte "
                                                  f"{data[exc.start:exc.start + 1]!r}, which is not)")],
                        subject=subject) from None


# ---------------------------------------------------------------- YAML


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):   # type: ignore[misc]
    """The safe loader (libyaml's parser when available); timestamps stay the text written."""


class _PyLoader(yaml.SafeLoader):
    """PyYAML's own parser: streams events at any depth (see _scan_events)."""


def _as_text(loader: SafeConstructor, node: ScalarNode) -> str:
    """2026-02-28 stays "2026-02-28", as Pulumi (Go yaml.v3 into interface{}) hands it to the program,
    and 2026-02-30 no longer crashes the constructor: the field that wants a date parses it and
    names it when it is no date. A lone `=` (YAML 1.1's value key, which no constructor builds) is
    the string "=", as Pulumi reads it."""
    return node.value


for _loader in (_Loader, _PyLoader):
    _loader.add_constructor("tag:yaml.org,2002:timestamp", _as_text)
    _loader.add_constructor("tag:yaml.org,2002:value", _as_text)

# The tags a node may carry, by kind: what Pulumi config and JSON hold (a string, number, bool,
# null, list or mapping). !!binary (bytes), !!set (a set), !!omap and !!pairs (lists of pairs) and
# local tags (!thing) build values nothing downstream takes: Pulumi config values are JSON.
_Y = "tag:yaml.org,2002:"
_PLAIN_TAGS = {
    ScalarNode: frozenset(_Y + t for t in ("str", "int", "float", "bool", "null", "timestamp", "value")),
    SequenceNode: frozenset({_Y + "seq"}),
    MappingNode: frozenset({_Y + "map"}),
}


def _mark(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "an unknown line"


def load_yaml(text: str, source: str, subject: str = "cluster spec") -> Any:
    """One YAML document as Python data, or a SpecError (and nothing else) naming path and line."""
    try:
        _check_events(text, source, subject)
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            problems = _node_problems(node, loader)
            if problems:
                raise SpecError(problems, source, subject)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except SpecError:
        raise
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" at {_mark(where)}" if where is not None else ""
        raise SpecError([Problem(source, "<file>", f"valid YAML{at}: {getattr(exc, 'problem', None) or exc}")],
                        subject=subject) from None
    except RecursionError:   # the limits keep nesting far below this; kept as the last line of defence
        raise SpecError([Problem(source, "<file>", f"at most {limits.YAML_DEPTH.value} levels of nesting")],
                        subject=subject) from None
    except (ValueError, OverflowError) as exc:   # a value the constructor cannot build (e.g. !!int x)
        raise SpecError([Problem(source, "<file>", f"values YAML can read: {exc}")], subject=subject) from None


def _check_events(text: str, source: str, subject: str) -> None:
    """Depth, expanded size and recursive aliases (_scan_events), with libyaml's parser where PyYAML
    has it and PyYAML's own where libyaml stops first.

    libyaml 0.2.6 (PyYAML 6.0.4's wheels) refuses nesting past 1,000 levels in its scanner, which
    looks up to 1,024 characters ahead on a line for a possible mapping key: `[[[[...` 1,000 deep on
    one line fails before the parser hands over its first events, so the limit here (32 levels) never
    saw them and the message lost its YAML path. When libyaml fails, PyYAML's pure-Python parser (no
    nesting limit, the same events, a bounded lookahead) runs up to the same point: it names the
    path of a problem of ours that lies before libyaml's error, and otherwise libyaml's error stands.
    Only a file libyaml refuses pays for the second pass, at most a few seconds for FILE_BYTES."""
    try:
        _scan_events(text, source, subject, _Loader)
    except yaml.YAMLError as libyaml_error:
        if issubclass(_Loader, Parser):   # no libyaml: that was PyYAML's parser already
            raise
        try:
            _scan_events(text, source, subject, _PyLoader)
        except yaml.YAMLError:
            pass
        raise libyaml_error from None


def _scan_events(text: str, source: str, subject: str, loader_class: type) -> None:
    """Depth, expanded size and recursive aliases, from the parser's events (no recursion here or in
    the parsers; the composer, which runs next, recurses once per level)."""
    max_depth, max_values = limits.YAML_DEPTH.value, limits.YAML_VALUES.value
    loader = loader_class(text)
    # One frame per open collection: [is_mapping, key or index, awaiting_key, anchor, values at start]
    frames: list[list[Any]] = []
    sizes: dict[str, int] = {}      # anchor -> values it expands to
    open_anchors: dict[str, int] = {}
    count = 0
    try:
        while loader.check_event():
            event = loader.get_event()
            kind = type(event)
            if kind is MappingEndEvent or kind is SequenceEndEvent:
                frame = frames.pop()
                if frame[3] is not None:
                    sizes[frame[3]] = count - frame[4]
                    open_anchors[frame[3]] -= 1
                continue
            if kind is not ScalarEvent and kind is not AliasEvent and \
                    kind is not MappingStartEvent and kind is not SequenceStartEvent:
                continue   # stream and document events
            if frames:   # where this node sits in its parent
                parent = frames[-1]
                if parent[0]:
                    if parent[2]:
                        parent[1] = event.value if kind is ScalarEvent else "<key>"
                    parent[2] = not parent[2]
                else:
                    parent[1] += 1
            if kind is ScalarEvent:
                count += 1
                if event.anchor is not None:
                    sizes[event.anchor] = 1
            elif kind is AliasEvent:
                if open_anchors.get(event.anchor):
                    raise _event_problem(frames, event, "*" + event.anchor, "an alias of a finished node: this one "
                                         "sits inside the node it names (a recursive structure)", source, subject)
                count += sizes.get(event.anchor, 1)   # an unknown anchor: the composer reports it
            else:
                count += 1
                if len(frames) >= max_depth:
                    raise _event_problem(frames, event, "<nested value>",
                                         f"at most {max_depth} levels of nesting (limits.YAML_DEPTH)", source, subject)
                frames.append([kind is MappingStartEvent, "" if kind is MappingStartEvent else -1, True,
                               event.anchor, count - 1])
                if event.anchor is not None:
                    open_anchors[event.anchor] = open_anchors.get(event.anchor, 0) + 1
            if count > max_values:
                raise _event_problem(frames, event, f"more than {max_values:,} values",
                                     f"at most {max_values:,} values, every use of an alias counted "
                                     "(limits.YAML_VALUES)", source, subject)
    finally:
        loader.dispose()


def _event_problem(frames: list[list[Any]], event: Any, value: Any, allowed: str, source: str,
                   subject: str) -> SpecError:
    path = join_path(*(f[1] if f[0] else max(f[1], 0) for f in frames))
    return SpecError([Problem(path, value, f"{allowed} ({_mark(event.start_mark)})")], source, subject)


def _node_problems(root: Any, loader: Any) -> list[Problem]:
    """Duplicate keys, over-long scalars and integer literals, and tags that build no JSON value
    (!!binary, !!set, ...), each at its path and line."""
    max_chars, max_digits = limits.SCALAR_CHARS.value, limits.INT_DIGITS.value
    problems: list[Problem] = []
    seen: set[int] = set()
    stack: list[tuple[Any, tuple]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        if id(node) in seen:   # an anchored node, met again through an alias
            continue
        seen.add(id(node))
        if node.tag not in _PLAIN_TAGS[type(node)]:
            problems.append(_tag_problem(node, path))
            continue
        if isinstance(node, ScalarNode):
            problem = _scalar_problem(node, path, max_chars, max_digits)
            if problem:
                problems.append(problem)
        elif isinstance(node, SequenceNode):
            stack.extend((child, path + (i,)) for i, child in reversed(list(enumerate(node.value))))
        elif isinstance(node, MappingNode):
            first: dict[Any, Any] = {}
            children = []
            for key_node, value_node in node.value:
                if key_node.tag == _MERGE_TAG:
                    children.append((value_node, path + ("<<",)))
                    continue
                if not isinstance(key_node, ScalarNode):
                    children.append((key_node, path + ("<key>",)))
                    children.append((value_node, path + ("<value>",)))
                    continue
                problem = _scalar_problem(key_node, path + ("<key>",), max_chars, max_digits)
                if problem is None and key_node.tag not in _PLAIN_TAGS[ScalarNode]:
                    problem = _tag_problem(key_node, path + ("<key>",))
                if problem:
                    problems.append(problem)
                    continue
                key = loader.construct_object(key_node)
                shown = key if isinstance(key, (str, int)) and not isinstance(key, bool) else key_node.value
                try:
                    earlier = first.get(key)
                except TypeError:   # unhashable: the constructor reports it
                    earlier = None
                if earlier is not None:
                    problems.append(Problem(join_path(*path, shown), key_node.value,
                                            f"each key once per mapping: it is set at line "
                                            f"{earlier.start_mark.line + 1} and again at line "
                                            f"{key_node.start_mark.line + 1} (YAML keeps only the last)"))
                else:
                    try:
                        first[key] = key_node
                    except TypeError:
                        pass
                children.append((value_node, path + (shown,)))
            stack.extend(reversed(children))
    return problems


def _tag_problem(node: Any, path: tuple) -> Problem:
    tag = node.tag
    shown = "!!" + tag[len(_Y):] if tag.startswith(_Y) else tag
    return Problem(join_path(*path), shown[:100],
                   f"a plain string, number, true/false, null, list or mapping (what Pulumi config and JSON hold), "
                   f"without the tag {shown[:100]} ({_mark(node.start_mark)})")


def _scalar_problem(node: ScalarNode, path: tuple, max_chars: int, max_digits: int) -> Problem | None:
    value = node.value
    if len(value) > max_chars:
        return Problem(join_path(*path), f"<{len(value):,} characters>",
                       f"at most {max_chars:,} characters (limits.SCALAR_CHARS; {_mark(node.start_mark)})")
    if node.tag == _INT_TAG and len(value) > max_digits:
        return Problem(join_path(*path), f"<an integer of {len(value):,} characters>",
                       f"an integer of at most {max_digits} digits (limits.INT_DIGITS; {_mark(node.start_mark)})")
    return None


# ---------------------------------------------------------------- JSON


class _Duplicate(dict):
    """A JSON object that repeated a key (kept to name its path; never returned)."""

    key: str = ""
    line: int | None = None


class _BigInt(str):
    """An integer literal over limits.INT_DIGITS (kept as text to name its path)."""


def _object(pairs: list[tuple[str, Any]]) -> dict:
    out = dict(pairs)
    if len(out) == len(pairs):
        return out
    dup = _Duplicate(out)
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            dup.key = key
            break
        seen.add(key)
    return dup


class _NotFinite(str):
    """NaN, Infinity or a number past the float range (1e999): not JSON, kept to name its path."""


def _int(text: str) -> Any:
    return int(text) if len(text) <= limits.INT_DIGITS.value else _BigInt(text)


def _float(text: str) -> Any:
    value = float(text)
    return value if math.isfinite(value) else _NotFinite(text)


def load_json(text: str, source: str, subject: str) -> Any:
    """A JSON document as Python data, or a SpecError naming the path (and line) of each problem."""
    try:
        doc = json.loads(text, object_pairs_hook=_object, parse_int=_int, parse_float=_float,
                         parse_constant=_NotFinite)
    except json.JSONDecodeError as exc:
        raise SpecError([Problem(source, "<file>", f"valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}")],
                        subject=subject) from None
    except RecursionError:
        raise SpecError([Problem(source, "<file>", f"at most {limits.YAML_DEPTH.value} levels of nesting "
                                                   "(limits.YAML_DEPTH)")], subject=subject) from None
    problems = _json_problems(doc)
    if any(p.allowed.startswith("each key once") for p in problems):
        problems = _json_problems(_json_lines(text))   # again, with the line of each such object
    if problems:
        raise SpecError(problems, source, subject)
    return doc


def _json_lines(text: str) -> Any:
    """The document again, through the pure-Python scanner, with the line of each object that
    repeats a key (only when one does: it is slower)."""
    decoder = json.JSONDecoder(object_pairs_hook=_object, parse_int=_int, parse_float=_float,
                               parse_constant=_NotFinite)

    def parse_object(s_and_end, *args, **kwargs):
        s, end = s_and_end
        obj, after = json.decoder.JSONObject(s_and_end, *args, **kwargs)
        if isinstance(obj, _Duplicate):
            obj.line = s.count("\n", 0, end) + 1
        return obj, after

    decoder.parse_object = parse_object
    decoder.scan_once = json.scanner.py_make_scanner(decoder)
    return decoder.decode(text)


def _json_problems(doc: Any) -> list[Problem]:
    max_depth, max_values, max_chars = limits.YAML_DEPTH.value, limits.YAML_VALUES.value, limits.SCALAR_CHARS.value
    problems: list[Problem] = []
    stack: list[tuple[Any, tuple]] = [(doc, ())]
    count = 0
    while stack:
        value, path = stack.pop()
        count += 1
        if count > max_values:
            return [Problem("", f"more than {max_values:,} values", f"at most {max_values:,} values "
                                                                    "(limits.YAML_VALUES)")]
        if isinstance(value, (dict, list)) and len(path) >= max_depth:
            problems.append(Problem(join_path(*path), "<nested value>",
                                    f"at most {max_depth} levels of nesting (limits.YAML_DEPTH)"))
            continue
        if isinstance(value, _Duplicate):
            at = f" (the object at line {value.line})" if value.line else ""
            problems.append(Problem(join_path(*path, value.key), value.key,
                                    f"each key once per object: it is given twice{at}; JSON keeps only the last"))
        if isinstance(value, _BigInt):
            problems.append(Problem(join_path(*path), f"<an integer of {len(value):,} characters>",
                                    f"an integer of at most {limits.INT_DIGITS.value} digits (limits.INT_DIGITS)"))
        elif isinstance(value, _NotFinite):
            problems.append(Problem(join_path(*path), str(value), "a finite number (JSON has no NaN or Infinity)"))
        elif isinstance(value, str) and len(value) > max_chars:
            problems.append(Problem(join_path(*path), f"<{len(value):,} characters>",
                                    f"at most {max_chars:,} characters (limits.SCALAR_CHARS)"))
        elif isinstance(value, dict):
            for key, child in reversed(list(value.items())):
                if len(key) > max_chars:
                    problems.append(Problem(join_path(*path, "<key>"), f"<{len(key):,} characters>",
                                            f"at most {max_chars:,} characters (limits.SCALAR_CHARS)"))
                stack.append((child, path + (key,)))
        elif isinstance(value, list):
            stack.extend((child, path + (i,)) for i, child in reversed(list(enumerate(value))))
    return problems
