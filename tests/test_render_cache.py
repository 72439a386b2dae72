"""render.py's bytecode cache: where it lives, that a cached template is the template jinja2
compiles, and that a cache it cannot use is no error."""
from __future__ import annotations

import jinja2

from aicluster.render import templates as render
def _names() -> list[str]:
    return sorted(str(p.relative_to(render.TEMPLATES)) for p in render.TEMPLATES.rglob("*.j2"))


def _env(cache: jinja2.BytecodeCache | None) -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(render.TEMPLATES)), bytecode_cache=cache,
                              **render.OPTIONS)


def test_cache_dir_follows_xdg_then_home():
    assert str(render.cache_dir({"XDG_CACHE_HOME": "/x/cache", "HOME": "/h"})).startswith("/x/cache/aicluster/jinja2-")
    assert str(render.cache_dir({"XDG_CACHE_HOME": "rel", "HOME": "/h"})).startswith("/h/.cache/aicluster/jinja2-")
    assert str(render.cache_dir({"HOME": "/h"})).startswith("/h/.cache/aicluster/jinja2-")


def test_cache_dir_is_named_by_the_options(monkeypatch):
    before = render.cache_dir({"HOME": "/h"})
    monkeypatch.setitem(render.OPTIONS, "trim_blocks", False)
    assert render.cache_dir({"HOME": "/h"}) != before


def test_a_cached_template_is_the_compiled_one(tmp_path):
    names = _names()
    assert names
    cache = render.bytecode_cache({"XDG_CACHE_HOME": str(tmp_path)})
    assert cache is not None
    warm = _env(cache)
    for name in names:
        warm.get_template(name)                         # compiles and writes the cache
    assert len(list(tmp_path.rglob("*.cache"))) == len(names)
    cached, fresh = _env(render.bytecode_cache({"XDG_CACHE_HOME": str(tmp_path)})), _env(None)
    for name in names:
        a, b = cached.get_template(name), fresh.get_template(name)
        assert a.root_render_func.__code__ == b.root_render_func.__code__, name
        assert {k: f.__code__ for k, f in a.blocks.items()} == {k: f.__code__ for k, f in b.blocks.items()}, name


def test_a_changed_template_is_compiled_again(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "a.j2").write_text("one {{ x }}\n")
    cache_home = {"XDG_CACHE_HOME": str(tmp_path / "c")}

    def env() -> jinja2.Environment:
        return jinja2.Environment(loader=jinja2.FileSystemLoader(str(tmp_path / "t")),
                                  bytecode_cache=render.bytecode_cache(cache_home), **render.OPTIONS)

    assert env().get_template("a.j2").render(x=1) == "one 1\n"
    (tmp_path / "t" / "a.j2").write_text("two {{ x }}\n")
    assert env().get_template("a.j2").render(x=1) == "two 1\n"


def test_a_broken_or_unwritable_cache_only_means_compiling(tmp_path):
    cache = render.bytecode_cache({"XDG_CACHE_HOME": str(tmp_path)})
    name = _names()[0]
    _env(cache).get_template(name)
    for entry in tmp_path.rglob("*.cache"):
        entry.write_bytes(b"not bytecode")
    expected = _env(None).get_template(name).root_render_func.__code__
    assert _env(cache).get_template(name).root_render_func.__code__ == expected
    for entry in tmp_path.rglob("*.cache"):
        entry.unlink()
    cache.directory = str(tmp_path / "gone")            # writes fail: no such directory
    assert _env(cache).get_template(name).root_render_func.__code__ == expected


def test_no_cache_without_an_absolute_home():
    assert render.cache_dir({"HOME": "relative"}) is None
    assert render.bytecode_cache({"HOME": "relative"}) is None


def test_no_cache_where_it_cannot_be_made(tmp_path):
    (tmp_path / "file").write_text("")
    assert render.bytecode_cache({"XDG_CACHE_HOME": str(tmp_path / "file")}) is None
