"""Hostile input through the real `aicluster` command (issue 11): every case ends in exit 2 with a
SpecError that names the argument or the YAML path, never exit 1 ("internal error"), a traceback,
a hang or unbounded memory.

Each case runs `python -m aicluster.cli` in a subprocess under RLIMIT_AS = 1 GiB (a normal plan
needs about 200 MiB of resident memory and runs under that limit too) with a generous wall-clock
timeout that only catches hangs; no timing is asserted (benchmarks, under bench/, measure; tests
assert behaviour). The child's peak resident memory, from wait4, is checked against 1 GiB too, and
printed with the wall time (`pytest -s` shows them).

Also here: duplicate keys in every file kind, the loader's own properties (anchors and merge keys
still work, bool and int keys that collide), YAML tags that build no JSON value (!!binary, !!set) in
every YAML file the command reads, nesting refused by aicluster's own limit with its path even where
libyaml stops first (0.2.6, in PyYAML 6.0.4), the sort-based overlap checks against brute force,
the input limits at their boundary, `aicluster check` on programs that exit or declare nothing,
and `plan --out` never writing through a symlink, removing an earlier plan's files, refusing a
folder of someone else's files.
"""
from __future__ import annotations

import contextlib
import io
import ipaddress
import json
import os
import re
import resource
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import AWS_MIN, ROOT

GIB = 1 << 30
HANG_TIMEOUT_S = float(os.environ.get("AICLUSTER_HANG_TIMEOUT_S", 120))   # only a hang reaches it


# ---------------------------------------------------------------- running the command


def aicluster(*args: str, timeout: float = HANG_TIMEOUT_S) -> tuple[int, str, str, float, int]:
    """(exit code, stdout, stderr, wall seconds, peak RSS bytes) of the command in a child process
    limited to 1 GiB of address space."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (GIB, GIB))

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "aicluster.cli", *args], cwd=ROOT, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=err, preexec_fn=limit)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - start
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    rss = usage.ru_maxrss * 1024   # kilobytes on Linux
    print(f"\n[{wall:5.2f} s, {rss / (1 << 20):6.0f} MiB, exit {code}] aicluster {' '.join(args)[:100]}")
    assert wall < timeout, f"killed after {timeout} s: the command hung"
    return code, stdout, stderr, wall, rss


def assert_bad_input(args: list[str], *fragments: str) -> str:
    code, out, err, _, rss = aicluster(*args)
    assert code == 2, f"exit {code}\nstdout: {out[-2000:]}\nstderr: {err[-2000:]}"
    assert "Traceback" not in err and "internal error" not in err, err
    assert err.startswith("invalid "), err
    assert len(err) < 20_000, "the report of one bad input stays short"
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in:\n{err}"
    assert rss < GIB
    return err


def spec_text(extra: str = "", pools: str | None = None) -> str:
    return ("name: test\ncloud: aws\nregion: us-east-1\nzone: us-east-1a\npools:\n"
            + (pools if pools is not None else "  - name: gpu\n    instance_type: p5.48xlarge\n    max_nodes: 2\n")
            + extra)


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


WAIVER = "waivers:\n  - rule: AIC-NET-001\n    resource: '*'\n    reason: a reason long enough\n    expires: {expires}\n"


# ---------------------------------------------------------------- 1. what used to exit 1


@pytest.mark.parametrize("depth", [1000, 100_000])
def test_yaml_nested_a_thousand_deep_or_more(tmp_path, depth):
    path = write(tmp_path, "deep.yaml", spec_text("tags: " + "[" * depth + "]" * depth + "\n"))
    assert_bad_input(["plan", path], "tags[0][0]", "at most 32 levels of nesting", "line 9")


def test_yaml_nested_deep_in_block_style(tmp_path):
    text = spec_text("tags:\n" + "".join(" " * (i + 1) + f"k{i}:\n" for i in range(1200)) + " " * 1202 + "x: 1\n")
    assert_bad_input(["plan", write(tmp_path, "deep.yaml", text)], "tags.k0.k1.k2", "levels of nesting")


@pytest.mark.parametrize("literal", ["1" + "0" * 5000, "0x1" + "0" * 50_000, "1" + ":1" * 3000],
                         ids=["decimal-5001-digits", "hex", "base-60"])
def test_an_integer_past_pythons_4300_digits(tmp_path, literal):
    pools = f"  - name: gpu\n    instance_type: p5.48xlarge\n    max_nodes: {literal}\n"
    assert_bad_input(["plan", write(tmp_path, "big.yaml", spec_text(pools=pools))],
                     "pools[0].max_nodes", "an integer of at most 100 digits", "line 8")


def test_a_big_but_convertible_integer_gets_the_fields_own_message(tmp_path):
    pools = f"  - name: gpu\n    instance_type: p5.48xlarge\n    max_nodes: {10 ** 30}\n"
    assert_bad_input(["plan", write(tmp_path, "big.yaml", spec_text(pools=pools))],
                     "pools[0].max_nodes", "a number <= 100000")


def test_an_invalid_date_in_a_spec(tmp_path):
    text = spec_text().replace("name: test", "name: 2026-02-30")
    assert_bad_input(["plan", write(tmp_path, "date.yaml", text)], "  - name: '2026-02-30' is not valid")


def test_an_invalid_date_in_a_waiver(tmp_path):
    waivers = write(tmp_path, "w.yaml", WAIVER.format(expires="2026-02-30"))
    assert_bad_input(["check", "--stack", "aws-p4d-small", "--waivers", waivers],
                     "waivers[0].expires: '2026-02-30' is not valid; a date")


def test_a_valid_date_still_waives(tmp_path, capsys):
    """YAML dates arrive as text now (as Pulumi reads stack files); a waiver's date still parses."""
    from aicluster.commands.check import read_waivers

    path = Path(write(tmp_path, "w.yaml", WAIVER.format(expires="2099-02-28")))
    assert read_waivers(path, ["AIC-NET-001"])[0].expires.isoformat() == "2099-02-28"


UNREADABLE = {   # how to make it -> (what it is, fragment of the message)
    "directory": "not a directory",
    "fifo": "this is a FIFO",
    "dev-zero": "this is a character device",
    "symlink-loop": "aicluster can open",
    "under-a-file": "a folder on its path is a file",
    "missing": "an existing",
}


def unreadable(tmp_path: Path, kind: str) -> str:
    if kind == "directory":
        (tmp_path / "adir.yaml").mkdir()
        return str(tmp_path / "adir.yaml")
    if kind == "fifo":
        os.mkfifo(tmp_path / "fifo.yaml")
        return str(tmp_path / "fifo.yaml")
    if kind == "dev-zero":
        return "/dev/zero"
    if kind == "symlink-loop":
        os.symlink(tmp_path / "loop.yaml", tmp_path / "loop.yaml")
        return str(tmp_path / "loop.yaml")
    if kind == "under-a-file":
        (tmp_path / "file").write_text("x")
        return str(tmp_path / "file" / "spec.yaml")
    return str(tmp_path / "missing.yaml")


@pytest.mark.parametrize("kind", list(UNREADABLE))
@pytest.mark.parametrize("option", ["FILE", "--config", "--waivers"])
def test_an_unreadable_file(tmp_path, kind, option):
    """Works as root too: a directory, a FIFO (must not block), /dev/zero (must not read forever),
    a symlink loop, a path through a file. Permission denied is below (not as root)."""
    path = unreadable(tmp_path, kind)
    args = ["plan", path] if option == "FILE" else ["check", "--stack", "aws-p4d-small", option, path]
    assert_bad_input(args, option, UNREADABLE[kind])


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
@pytest.mark.parametrize("option", ["FILE", "--config", "--waivers"])
def test_a_file_without_read_permission(tmp_path, option):
    path = tmp_path / "secret.yaml"
    path.write_text(spec_text())
    path.chmod(0)
    args = ["plan", str(path)] if option == "FILE" else ["check", "--stack", "aws-p4d-small", option, str(path)]
    assert_bad_input(args, option, "permission denied")


@pytest.mark.parametrize("option", ["FILE", "--config", "--waivers"])
def test_permission_denied_as_root_too(tmp_path, monkeypatch, option):
    """Root reads any file, so EACCES is simulated where the file is opened."""
    import aicluster.spec.input_files as input_files

    path = write(tmp_path, "secret.yaml", spec_text())
    real_open = os.open

    def denied(name, *args, **kwargs):
        if str(name) == path:
            raise PermissionError(13, "Permission denied", name)
        return real_open(name, *args, **kwargs)

    monkeypatch.setattr(input_files.os, "open", denied)
    args = ["plan", path] if option == "FILE" else ["check", "--stack", "aws-p4d-small", option, path]
    code, out, err = cli(*args)
    assert code == 2 and f"{option}: '{path}' is not valid" in err and "permission denied" in err, err


def test_a_program_that_is_not_a_regular_file(tmp_path):
    (tmp_path / "prog.py").mkdir()
    assert_bad_input(["check", str(tmp_path / "prog.py")], "FILE", "not a directory")


def test_out_given_a_file(tmp_path):
    target = tmp_path / "out"
    target.write_text("mine")
    assert_bad_input(["plan", "--stack", "aws-p4d-small", "--out", str(target)], "--out", "this is a file")
    assert target.read_text() == "mine"


def test_text_that_is_not_utf8(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(spec_text("tags:\n  team: caf\xe9\n").encode("latin-1"))
    assert_bad_input(["plan", str(path)], "UTF-8 text", "line 10")


# ---------------------------------------------------------------- 2. size


def test_a_file_over_one_mib(tmp_path):
    path = write(tmp_path, "big.yaml", spec_text("tags:\n" + "".join(f"  k{i}: v\n" for i in range(120_000))))
    assert os.path.getsize(path) > 1 << 20
    assert_bad_input(["plan", path], "FILE", "at most 1,048,576 bytes")


@pytest.mark.parametrize("same", [False, True], ids=["distinct", "all-the-same"])
def test_four_thousand_ssh_cidrs(tmp_path, same):
    """46 s and 5 GB before (the overlap check compared every pair and reported every pair)."""
    cidrs = ["10.0.0.0/8"] * 4000 if same else [f"10.{i // 256}.{i % 256}.0/24" for i in range(4000)]
    text = spec_text("network:\n  ssh_ingress_cidrs:\n" + "".join(f"    - {c}\n" for c in cidrs))
    assert_bad_input(["plan", write(tmp_path, "cidrs.yaml", text)],
                     "network.ssh_ingress_cidrs: '4000 items'", "at most 60 items", "60 inbound rules")


def test_a_billion_laughs(tmp_path):
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for prev, name in zip("abcdefg", "bcdefgh"):
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 10) + "]")
    text = spec_text("\n".join(lines).replace("a: &a", "x1: &a") + "\n")
    assert_bad_input(["plan", write(tmp_path, "laughs.yaml", text)], "at most 100,000 values")


def test_a_recursive_alias(tmp_path):
    assert_bad_input(["plan", write(tmp_path, "loop.yaml", spec_text("tags: &t {a: *t}\n"))], "recursive")


def test_a_huge_key_is_shown_short(tmp_path):
    err = assert_bad_input(["plan", write(tmp_path, "key.yaml", spec_text("? " + "k" * 60_000 + "\n: 1\n"))], "unknown key")
    assert max(len(line) for line in err.splitlines()) < 1000


@pytest.mark.parametrize("path, limit", [
    (("pools",), 64), (("storage",), 16), (("network", "ssh_ingress_cidrs"), 60),
    (("kubernetes", "api_access_cidrs"), 40), (("kubernetes", "admins"), 32),
    (("kubernetes", "control_plane_subnet_ids"), 16)])
def test_every_list_limit_at_its_boundary(path, limit):
    """limit items pass the size check (they may fail others); limit + 1 is refused by path."""
    from aicluster.errors import SpecError
    from aicluster.spec.cluster import parse_spec

    def spec_with(n: int) -> dict:
        data = json.loads(json.dumps(AWS_MIN))
        node = data
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = [{"name": f"p{i}", "instance_type": "h100", "max_nodes": 1} if path == ("pools",) else
                          f"x{i}" for i in range(n)]
        return data

    def problems(n: int) -> list[str]:
        try:
            parse_spec(spec_with(n))
        except SpecError as exc:
            return [str(p) for p in exc.problems]
        return []

    shown = ".".join(path)
    assert not [p for p in problems(limit) if p.startswith(f"{shown}: '{limit} items'")]
    over = problems(limit + 1)
    assert len(over) == 1 and over[0].startswith(f"{shown}: '{limit + 1} items' is not valid; a list of at most "
                                                 f"{limit} items ("), over


def test_the_limits_are_documented_in_one_module():
    from aicluster import limits

    assert set(limits.SPEC_LISTS.values()) <= set(limits.ALL.values())
    for name, limit in limits.ALL.items():
        assert limit.value > 0 and limit.what and len(limit.source) > 20, name


# ---------------------------------------------------------------- 4. the policy gate


@pytest.mark.parametrize("body, shown", [
    ("import sys\nsys.exit(0)\n", "sys.exit(0)"),
    ("import sys\nsys.exit(3)\n", "sys.exit(3)"),
    ("raise SystemExit\n", "sys.exit(None)"),
    ("import os\nos._exit(0)\n", "os._exit(0)"),
    ("x = 1\n", "no resources"),
    ("import pulumi\npulumi.export('x', 1)\n", "no resources"),
])
def test_check_never_passes_a_program_that_exits_or_declares_nothing(tmp_path, body, shown):
    assert_bad_input(["check", write(tmp_path, "prog.py", body)], shown, "a Pulumi program that declares")


def test_check_still_judges_a_program_that_declares_resources():
    code, out, err, _, _ = aicluster("check", str(ROOT / "tests" / "policies" / "seeded" / "world_open_ssh.py"))
    assert code == 1 and "FAIL   AIC-SEC-004" in out, err


# ---------------------------------------------------------------- 5. duplicate keys


def cli(*args: str) -> tuple[int, str, str]:
    from aicluster.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


DUPLICATES = [
    ("second-pools-list", "spec.yaml", spec_text("pools:\n  - name: other\n    instance_type: h100\n    max_nodes: 1\n"),
     "pools: 'pools' is not valid; each key once per mapping: it is set at line 5 and again at line 9"),
    ("nested-key", "spec.yaml",
     spec_text(pools="  - name: gpu\n    instance_type: p5.48xlarge\n    max_nodes: 2\n    max_nodes: 3\n"),
     "pools[0].max_nodes: 'max_nodes' is not valid; each key once per mapping: it is set at line 8 and again at line 9"),
    ("bool-keys-that-collide", "spec.yaml", spec_text("tags:\n  yes: a\n  true: b\n"),
     "tags.true: 'true' is not valid; each key once per mapping"),
    ("stack-file-config", "Pulumi.dup.yaml",
     "config:\n  aws:region: us-east-1\n  aws:region: us-west-2\n  aicluster:cluster: {}\n",
     "config.aws:region: 'aws:region' is not valid; each key once per mapping: it is set at line 2 and again at line 3"),
]


@pytest.mark.parametrize("name, text, fragment", [c[1:] for c in DUPLICATES], ids=[c[0] for c in DUPLICATES])
def test_duplicate_keys_in_specs_and_stack_files(tmp_path, name, text, fragment):
    code, out, err = cli("plan", write(tmp_path, name, text))
    assert code == 2 and fragment in err and "Traceback" not in err, err


def test_duplicate_keys_in_waivers(tmp_path):
    text = WAIVER.format(expires="2099-01-01").replace("    resource: '*'\n", "    resource: '*'\n    resource: x\n")
    code, _, err = cli("check", "--stack", "aws-p4d-small", "--waivers", write(tmp_path, "w.yaml", text))
    assert code == 2 and "waivers[0].resource: 'resource' is not valid; each key once per mapping" in err, err
    assert "line 3 and again at line 4" in err


@pytest.mark.parametrize("text, fragment", [
    ('{"all": "advisory",\n "all": "mandatory"}', "all: 'all' is not valid; each key once per object"),
    ('{"AIC-STO-002": {\n  "floorMbpsPerAccelerator": 10,\n  "floorMbpsPerAccelerator": 20}}',
     "AIC-STO-002.floorMbpsPerAccelerator: 'floorMbpsPerAccelerator' is not valid; each key once per object: "
     "it is given twice (the object at line 1)"),
])
def test_duplicate_keys_in_policy_configs(tmp_path, text, fragment):
    code, _, err = cli("check", "--stack", "aws-p4d-small", "--config", write(tmp_path, "c.json", text))
    assert code == 2 and fragment in err, err


@pytest.mark.parametrize("text, fragment", [
    ('{"all": {"enforcementLevel": []}}', "all.enforcementLevel: [] is not valid"),
    ('{"AIC-STO-002": {"floorMbpsPerAccelerator": NaN}}', "a finite number"),
    ('{"AIC-STO-002": {"floorMbpsPerAccelerator": 1e999}}', "a finite number"),
    ('{"AIC-STO-002": {"floorMbpsPerAccelerator": 1' + "0" * 5000 + '}}', "at most 100 digits"),
    ("[" * 5000 + "]" * 5000, "levels of nesting"),
])
def test_policy_config_values_that_used_to_crash(tmp_path, text, fragment):
    code, _, err = cli("check", "--stack", "aws-p4d-small", "--config", write(tmp_path, "c.json", text))
    assert code == 2 and fragment in err and "internal error" not in err, err


def test_the_loader_keeps_what_yaml_allows():
    from aicluster.spec.input_files import load_yaml

    doc = load_yaml("base: &b {x: 1, y: 2}\nuse:\n  <<: *b\n  y: 3\nlist: [*b, *b]\nwhen: 2026-02-28\n"
                    "n: 0x10\nf: 1.5\n", "t.yaml")
    assert doc == {"base": {"x": 1, "y": 2}, "use": {"x": 1, "y": 3}, "list": [{"x": 1, "y": 2}] * 2,
                   "when": "2026-02-28", "n": 16, "f": 1.5}


def test_the_loader_is_libyaml_where_pyyaml_has_it():
    from aicluster.spec.input_files import _Loader

    if yaml.__with_libyaml__:
        assert issubclass(_Loader, yaml.CSafeLoader)


def test_the_shipped_stacks_and_catalog_have_no_duplicate_keys():
    from aicluster.spec.input_files import load_yaml

    for path in [*(ROOT / "stacks").glob("*.yaml"), *(ROOT / "components" / "aicluster" / "catalog").glob("*.yaml"),
                 *(ROOT / "tests" / "policies" / "seeded").glob("*.yaml")]:
        load_yaml(path.read_text(encoding="utf-8"), str(path))


# ---------------------------------------------------------------- 6. YAML tags no JSON value has

STACK_WITH = ("config:\n  aws:region: us-east-1\n  {line}\n  aicluster:cluster:\n    name: test\n"
              "    cloud: aws\n    region: us-east-1\n    zone: us-east-1a\n    pools:\n"
              "      - {{name: gpu, instance_type: p5.48xlarge, max_nodes: 2}}\n")

# (id, file name, text, what the report says): Pulumi config values are JSON, so a tag that builds
# bytes, a set or pairs used to reach the offline engine's json.dumps (exit 1, TypeError).
TAGGED = [
    ("stack-other-key-binary", "Pulumi.t.yaml", STACK_WITH.format(line="other:blob: !!binary aGVsbG8="),
     "config.other:blob: '!!binary' is not valid; a plain string, number, true/false, null, list or mapping"),
    ("stack-other-key-set", "Pulumi.t.yaml", STACK_WITH.format(line="other:names: !!set {a, b}"),
     "config.other:names: '!!set' is not valid"),
    ("stack-other-key-omap", "Pulumi.t.yaml", STACK_WITH.format(line="other:pairs: !!omap [{a: 1}]"),
     "config.other:pairs: '!!omap' is not valid"),
    ("stack-other-key-nested", "Pulumi.t.yaml", STACK_WITH.format(line="other:obj: {list: [1, !!binary aGk=]}"),
     "config.other:obj.list[1]: '!!binary' is not valid"),
    ("stack-key-binary", "Pulumi.t.yaml", STACK_WITH.format(line="? !!binary aGk=\n  : x"),
     "config.<key>: '!!binary' is not valid"),
    ("stack-local-tag", "Pulumi.t.yaml", STACK_WITH.format(line="other:x: !vault secret/x"),
     "config.other:x: '!vault' is not valid"),
    ("spec-tags-set", "spec.yaml", spec_text("tags: !!set {a, b}\n"), "tags: '!!set' is not valid"),
    ("spec-str-on-a-mapping", "spec.yaml", spec_text("tags: !!str {a: b}\n"), "tags: '!!str' is not valid"),
]


@pytest.mark.parametrize("name, text, fragment", [c[1:] for c in TAGGED], ids=[c[0] for c in TAGGED])
def test_yaml_tags_that_build_no_json_value(tmp_path, name, text, fragment):
    code, out, err = cli("plan", write(tmp_path, name, text))
    assert code == 2 and fragment in err and "Traceback" not in err and "internal error" not in err, err
    assert "line " in err and "without the tag" in err


def test_yaml_tags_in_a_stack_file_through_the_command(tmp_path):
    """The issue's case in a child process: exit 2, not exit 1 with a TypeError."""
    for line in ("other:blob: !!binary aGVsbG8=", "other:names: !!set {a, b}"):
        path = write(tmp_path, "Pulumi.t.yaml", STACK_WITH.format(line=line))
        assert_bad_input(["plan", path], f"config.{line.split(': ')[0]}: '{line.split()[1]}' is not valid", "line 3")


def test_yaml_tags_in_workload_and_waivers_files(tmp_path):
    workload = write(tmp_path, "w.yaml", "model_params_b: 7\ncluster: {stack: !!binary YXdzLXA1LXNsdXJt}\n")
    code, _, err = cli("estimate", workload)
    assert code == 2 and "cluster.stack: '!!binary' is not valid" in err, err
    waivers = write(tmp_path, "waivers.yaml", WAIVER.format(expires="2099-01-01").replace(
        "reason: a reason long enough", "reason: !!binary YSByZWFzb24gbG9uZyBlbm91Z2g="))
    code, _, err = cli("check", "--stack", "aws-p4d-small", "--waivers", waivers)
    assert code == 2 and "waivers[0].reason: '!!binary' is not valid" in err, err


def test_the_loader_takes_a_lone_equals_sign_as_text():
    """YAML 1.1's value key `=`, which no safe constructor builds, is the string "=" (as Pulumi reads it)."""
    from aicluster.spec.input_files import load_yaml

    assert load_yaml("other:sep: =\nlist: [=, a]\n", "t.yaml") == {"other:sep": "=", "list": ["=", "a"]}


# ---------------------------------------------------------------- 7. a parser that stops first


class StopsFirst:
    """Stands for a libyaml that gives up before handing over any event: 0.2.6 (PyYAML 6.0.4's
    wheels) refuses nesting past 1,000 levels while its scanner looks up to 1,024 characters ahead
    on a line, so `[[[[...` on one line fails before aicluster's own limit of 32 sees an event. Here
    the limit is 40 levels (counted in brackets), or `refuse` names text it fails on."""

    LIMIT = 40
    refuse = "\x00never"

    def __init__(self, text: str):
        from aicluster.spec.input_files import _PyLoader

        self._inner = _PyLoader(text)
        depth = deepest = 0
        for ch in text:
            depth += (ch in "[{") - (ch in "]}")
            deepest = max(deepest, depth)
        self._fails = deepest > self.LIMIT or self.refuse in text

    def check_event(self, *kinds):
        if self._fails:
            raise yaml.scanner.ScannerError("while increasing flow level", None, "exceeded maximum nesting depth",
                                            self._inner.get_mark())
        return self._inner.check_event(*kinds)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def test_a_parser_that_stops_before_the_depth_limit_keeps_the_path(monkeypatch):
    """Whichever PyYAML and libyaml are installed: the depth problem keeps its YAML path and line."""
    import aicluster.spec.input_files as input_files
    from aicluster.errors import SpecError

    monkeypatch.setattr(input_files, "_Loader", StopsFirst)
    with pytest.raises(SpecError) as err:
        input_files.load_yaml(spec_text("tags: " + "[" * 50 + "]" * 50 + "\n"), "deep.yaml")
    text = str(err.value)
    assert "tags[0][0]" in text and "at most 32 levels of nesting" in text and "line 9" in text, text
    assert "exceeded maximum nesting depth" not in text


def test_a_parser_that_stops_keeps_its_own_message_where_nothing_of_ours_is_wrong(monkeypatch):
    import aicluster.spec.input_files as input_files
    from aicluster.errors import SpecError

    monkeypatch.setattr(input_files, "_Loader", StopsFirst)
    monkeypatch.setattr(StopsFirst, "refuse", "refuse-me")
    with pytest.raises(SpecError) as err:
        input_files.load_yaml(spec_text("tags: {a: refuse-me}\n"), "t.yaml")
    assert "'<file>' is not valid; valid YAML at line 1, column 1: exceeded maximum nesting depth" in str(err.value)


# ---------------------------------------------------------------- sub-quadratic checks, by brute force


def brute_force_overlaps(cidrs):
    return {i for i, a in enumerate(cidrs) for j, b in enumerate(cidrs)
            if i != j and a.version == b.version and a.overlaps(b)}


networks = st.builds(lambda addr, prefix: ipaddress.ip_network(f"{ipaddress.IPv4Address(addr)}/{prefix}",
                                                                 strict=False),
                     st.integers(0, 2 ** 32 - 1), st.integers(0, 32)) | \
    st.builds(lambda addr, prefix: ipaddress.ip_network(f"{ipaddress.IPv6Address(addr)}/{prefix}", strict=False),
              st.integers(0, 2 ** 128 - 1), st.integers(0, 128))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24", "10.2.0.0/16", "192.168.0.0/16",
                                 "0.0.0.0/0", "fd00::/8", "fd00:1::/32"]).map(ipaddress.ip_network) | networks,
                max_size=12))
def test_cidr_overlaps_match_brute_force(cidrs):
    from aicluster.spec.cluster import _overlapping_cidrs

    pairs = _overlapping_cidrs(list(enumerate(cidrs)))
    reported = {i for pair in pairs for i in pair}
    assert reported == brute_force_overlaps(cidrs)
    for i, j in pairs:
        assert j < i and cidrs[i].overlaps(cidrs[j])
    assert len(pairs) < max(len(cidrs), 1)    # at most one problem per CIDR, never one per pair


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["a", "b", "fsx", "a-b"]), min_size=1, max_size=3), max_size=8))
def test_mount_overlaps_match_brute_force(parts):
    from aicluster.spec.cluster import ClusterSpec, _mount_overlap_problems

    mounts = ["/" + "/".join(p) for p in parts]
    spec = ClusterSpec.model_validate({**AWS_MIN, "storage": [
        {"name": f"s{i}", "type": "lustre", "mount": m, "capacity_gib": 1200} for i, m in enumerate(mounts)]})
    problems = _mount_overlap_problems(spec)
    pairs = [tuple(int(x) for x in re.findall(r"storage\[(\d+)\]", str(p))[:2]) for p in problems]
    nested = {i for i, a in enumerate(mounts) for j, b in enumerate(mounts)
              if i != j and (a == b or a.startswith(b + "/") or b.startswith(a + "/"))}
    assert {i for pair in pairs for i in pair} == nested      # every mount that nests is named
    for i, j in pairs:                                         # at the later one, naming the earlier
        assert j < i and (mounts[i] == mounts[j] or mounts[i].startswith(mounts[j] + "/")
                          or mounts[j].startswith(mounts[i] + "/"))
    assert len(problems) < max(len(mounts), 1)


# ---------------------------------------------------------------- 3. plan --out

FIRST = {"plan.json": json.dumps({"stack": "a", "plan": {}, "files": ["slurm/slurm.conf", "user-data/a.yaml",
                                                                        "only-first/deep/x.sh"]}),
         "slurm/slurm.conf": "first conf", "user-data/a.yaml": "a", "only-first/deep/x.sh": "x"}
SECOND = {"plan.json": json.dumps({"stack": "b", "plan": {}, "files": ["slurm/slurm.conf", "user-data/b.yaml"]}),
          "slurm/slurm.conf": "second conf", "user-data/b.yaml": "b"}


def files_on_disk(out: Path) -> set[str]:
    return {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() or p.is_symlink()}


def test_out_removes_the_files_of_an_earlier_plan(tmp_path):
    from aicluster.commands.out_dir import write_tree

    out = tmp_path / "out"
    write_tree(out, FIRST)
    assert files_on_disk(out) == set(FIRST) | {".aicluster-out.json"}
    write_tree(out, SECOND)
    assert files_on_disk(out) == set(SECOND) | {".aicluster-out.json"}
    assert not (out / "only-first").exists()        # its folders too, once empty
    assert (out / "slurm" / "slurm.conf").read_text() == "second conf"


def test_out_never_writes_through_a_symlink(tmp_path):
    from aicluster.commands.out_dir import write_tree

    out, victim, victim_dir = tmp_path / "out", tmp_path / "victim.txt", tmp_path / "victim-dir"
    victim.write_text("precious")
    victim_dir.mkdir()
    (victim_dir / "keep").write_text("precious")
    write_tree(out, FIRST)
    (out / "slurm" / "slurm.conf").unlink()
    (out / "slurm" / "slurm.conf").symlink_to(victim)                        # a file of the plan
    (out / "user-data" / "a.yaml").unlink()
    (out / "user-data").rmdir()
    (out / "user-data").symlink_to(victim_dir, target_is_directory=True)      # a folder of the plan
    (out / "plan.json").unlink()
    (out / "plan.json").symlink_to(victim)
    write_tree(out, FIRST)
    assert victim.read_text() == "precious"
    assert sorted(p.name for p in victim_dir.iterdir()) == ["keep"]
    for relative in ("slurm/slurm.conf", "plan.json", "user-data"):
        assert not (out / relative).is_symlink(), relative
    assert (out / "slurm" / "slurm.conf").read_text() == "first conf"
    assert (out / "user-data" / "a.yaml").read_text() == "a"


def test_out_removes_a_stale_symlink_not_its_target(tmp_path):
    from aicluster.commands.out_dir import write_tree

    out, victim = tmp_path / "out", tmp_path / "victim.txt"
    victim.write_text("precious")
    write_tree(out, FIRST)
    (out / "only-first" / "deep" / "x.sh").unlink()
    (out / "only-first" / "deep" / "x.sh").symlink_to(victim)
    write_tree(out, SECOND)
    assert victim.read_text() == "precious" and not (out / "only-first").exists()


def test_out_replaces_files_whole_not_in_place(tmp_path):
    """Each file is written beside and renamed over the old one: a hard link made to the old file
    keeps the old text (an in-place write would change it through the shared inode)."""
    out = tmp_path / "out"
    assert cli("plan", "--stack", "aws-p4d-small", "--out", str(out))[0] == 0
    os.link(out / "slurm" / "slurm.conf", tmp_path / "old-slurm.conf")
    (tmp_path / "old-slurm.conf").write_text("old text")       # the inode out/slurm/slurm.conf has now
    assert cli("plan", "--stack", "aws-p4d-small", "--out", str(out))[0] == 0
    assert (tmp_path / "old-slurm.conf").read_text() == "old text"
    assert (out / "slurm" / "slurm.conf").read_text().startswith("#")
    assert not list(out.rglob(".aicluster-tmp-*"))


def test_out_refuses_a_folder_of_someone_elses_files(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    code, stdout, err = cli("plan", "--stack", "aws-p4d-small", "--out", str(out))
    assert code == 2 and "--out" in err and "notes.txt" in err and "never deletes" in err, err
    assert stdout == ""                     # refused before planning or printing anything
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_out_refuses_a_planted_symlink_in_an_otherwise_empty_folder(tmp_path):
    out, victim = tmp_path / "out", tmp_path / "victim.txt"
    victim.write_text("precious")
    out.mkdir()
    (out / "plan.json").symlink_to(victim)
    code, _, err = cli("plan", "--stack", "aws-p4d-small", "--out", str(out))
    assert code == 2 and "plan.json" in err, err
    assert victim.read_text() == "precious" and (out / "plan.json").is_symlink()


def test_out_keeps_a_users_file_added_to_an_earlier_plan(tmp_path):
    from aicluster.errors import SpecError
    from aicluster.commands.out_dir import write_tree

    out = tmp_path / "out"
    write_tree(out, FIRST)
    (out / "slurm" / "my-notes.txt").write_text("mine")
    with pytest.raises(SpecError, match="slurm/my-notes.txt"):
        write_tree(out, SECOND)
    assert (out / "slurm" / "my-notes.txt").read_text() == "mine"
    assert (out / "slurm" / "slurm.conf").read_text() == "first conf"     # nothing written


def test_out_takes_a_folder_written_before_the_manifest(tmp_path):
    """An --out folder from before .aicluster-out.json: plan.json's `files` say what was written."""
    from aicluster.commands.out_dir import write_tree

    out = tmp_path / "out"
    write_tree(out, FIRST)
    (out / ".aicluster-out.json").unlink()
    write_tree(out, SECOND)
    assert files_on_disk(out) == set(SECOND) | {".aicluster-out.json"}


def test_out_dir_itself_may_be_a_symlink_the_user_named(tmp_path):
    from aicluster.commands.out_dir import write_tree

    real, link = tmp_path / "real", tmp_path / "link"
    real.mkdir()
    link.symlink_to(real, target_is_directory=True)
    write_tree(link, SECOND)
    assert (real / "plan.json").is_file() and link.is_symlink()


def test_out_manifest_cannot_point_outside(tmp_path):
    """A tampered manifest naming ../victim removes nothing outside DIR."""
    from aicluster.commands.out_dir import write_tree

    out, victim = tmp_path / "out", tmp_path / "victim.txt"
    victim.write_text("precious")
    write_tree(out, SECOND)
    manifest = json.loads((out / ".aicluster-out.json").read_text())
    manifest["files"] += ["../victim.txt", str(victim), "slurm/../../victim.txt"]
    (out / ".aicluster-out.json").write_text(json.dumps(manifest))
    write_tree(out, SECOND)
    assert victim.read_text() == "precious"
    assert stat.S_ISREG(os.lstat(out / "plan.json").st_mode)


def test_plan_out_twice_through_the_command(tmp_path):
    """The whole path through the command: a second plan into the same DIR, with a symlink planted
    where it writes, leaves exactly its own files and writes nothing outside."""
    out, victim = tmp_path / "out", tmp_path / "victim.txt"
    victim.write_text("precious")
    code, _, err = cli("plan", "--stack", "aws-p5-slurm", "--out", str(out))
    assert code == 0, err
    first = set(json.loads((out / "plan.json").read_text())["files"])
    (out / "slurm" / "slurm.conf").unlink()
    (out / "slurm" / "slurm.conf").symlink_to(victim)
    code, _, err = cli("plan", "--stack", "aws-p4d-small", "--out", str(out))
    assert code == 0, err
    second = set(json.loads((out / "plan.json").read_text())["files"])
    assert first - second                                   # the two plans differ in their files
    assert victim.read_text() == "precious"
    assert not (out / "slurm" / "slurm.conf").is_symlink()
    # Beside the rendered files: the plan itself and the deployer's policy (both plans are AWS).
    assert files_on_disk(out) == second | {"plan.json", ".aicluster-out.json", "deployer-policy.json"}
