"""The grammar's LALR tables between processes: JSON in a private folder, never a pickle."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gerules.dsl import cache as grammar_cache
from gerules.dsl.parser import lark_parser

from .conftest import GOOD

ROOT = Path(__file__).resolve().parents[2]
OPTIONS = {"parser": "lalr", "lexer": "contextual", "propagate_positions": True,
           "maybe_placeholders": True}


def _grammar() -> str:
    return (ROOT / "grammar" / "ger.lark").read_text(encoding="utf-8")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "gerules"


def _files(cache: Path) -> list[Path]:
    return sorted(cache.glob("lark-*.json")) if cache.exists() else []


def test_the_cached_tables_parse_every_rule_file_as_fresh_ones_do(cache: Path) -> None:
    first = grammar_cache.load_parser(_grammar(), **OPTIONS)  # builds and writes
    assert len(_files(cache)) == 1 and (cache.stat().st_mode & 0o777) == 0o700
    second = grammar_cache.load_parser(_grammar(), **OPTIONS)  # reads
    texts = [p.read_text(encoding="utf-8") for p in
             [*sorted((ROOT / "rules").rglob("*.ger")), *sorted(GOOD.glob("*.ger"))]]
    assert len(texts) > 10
    for text in texts:
        assert second.parse(text) == first.parse(text) == lark_parser().parse(text)


def test_a_cache_that_others_may_write_is_not_used(cache: Path,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    grammar_cache.load_parser(_grammar(), **OPTIONS)
    (path,) = _files(cache)
    path.write_text("{not json")  # what a planted file would hold
    os.chmod(path, 0o666)
    caplog.set_level("DEBUG", logger="gerules.dsl.cache")
    parser = grammar_cache.load_parser(_grammar(), **OPTIONS)
    assert parser.parse("ruleset r\n") is not None
    assert "is not private; ignored" in caplog.text
    os.chmod(cache, 0o777)  # a folder others may write: no cache at all
    assert grammar_cache.cache_folder() is None


def test_a_broken_cache_file_is_rebuilt(cache: Path) -> None:
    grammar_cache.load_parser(_grammar(), **OPTIONS)
    (path,) = _files(cache)
    path.write_text('{"data": 1}')
    assert grammar_cache.load_parser(_grammar(), **OPTIONS).parse("ruleset r\n") is not None
    assert path.read_bytes().startswith(b'{"data":{')  # rewritten from the fresh tables


def test_no_cache_without_an_absolute_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")
    assert grammar_cache.cache_folder() is None
    assert grammar_cache.load_parser(_grammar(), **OPTIONS).parse("ruleset r\n") is not None


# ----------------------------------------------------------------------------- syntax trees


def _shipped() -> list[tuple[str, str]]:
    return [((ROOT / "rules" / p.name).read_text(encoding="utf-8"), f"rules/{p.name}")
            for p in sorted((ROOT / "rules").glob("*.ger"))]


def test_kept_trees_equal_fresh_parses_of_every_rule_file(cache: Path) -> None:
    from gerules.dsl.parser import parse_text

    files = [*_shipped(), *((p.read_text(encoding="utf-8"), f"good/{p.name}")
                            for p in sorted(GOOD.glob("*.ger")))]
    assert len(files) > 10
    for text, display in files:
        fresh = parse_text(text, display)
        assert grammar_cache.parsed(text, display) is None
        grammar_cache.keep(fresh)
        assert grammar_cache.parsed(text, display) == fresh, display
    assert len(list(cache.glob("ast-*.json"))) == len(files)


def test_a_changed_file_never_meets_its_old_tree(cache: Path) -> None:
    from gerules.dsl.parser import parse_text

    text, display = _shipped()[0]
    grammar_cache.keep(parse_text(text, display))
    assert grammar_cache.parsed(text + "\n", display) is None
    assert grammar_cache.parsed(text, "rules/other.ger") is None


@pytest.mark.parametrize("planted", ['[{"Rule": [1]}]', '[{"Path": ["/etc/passwd"]}]',
                                    '{"not": "a list"}', "[1, 2", '[{"Span": [1, 2, 3]}]'])
def test_a_bad_or_foreign_entry_is_parsed_again(cache: Path, planted: str) -> None:
    from gerules.dsl.parser import parse_text

    text, display = _shipped()[0]
    fresh = parse_text(text, display)
    grammar_cache.keep(fresh)
    (path,) = cache.glob("ast-*.json")
    path.write_text(planted)
    assert grammar_cache.parsed(text, display) is None
    os.chmod(path, 0o666)
    assert grammar_cache.parsed(text, display) is None


def test_a_process_with_the_shipped_trees_kept_never_imports_lark(cache: Path) -> None:
    import subprocess
    import sys

    code = ("import sys; from gerules.opt.optimize import rule_library; rule_library(); "
            "print('lark' in sys.modules)")
    env = {**os.environ, "XDG_CACHE_HOME": str(cache.parent)}
    first, second = (subprocess.run([sys.executable, "-c", code], env=env, check=True,
                                    capture_output=True, text=True).stdout.strip()
                     for _ in range(2))
    assert (first, second) == ("True", "False")
