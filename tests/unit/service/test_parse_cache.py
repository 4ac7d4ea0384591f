"""A lexicon's parse cached on disk: parsed once, then loaded, out of the collector's reach."""

import gc

import pytest

from emgas.service import parse_cache


def test_a_parse_is_cached_and_loaded_the_same(tmp_path):
    parses = []

    def parse():
        parses.append(1)
        return [{"word": ["sense", 1]}, {"other": []}]

    first = parse_cache.cached(tmp_path, "lexicon", 1, (10, 20), parse, "a lexicon")
    again = parse_cache.cached(tmp_path, "lexicon", 1, (10, 20), parse, "a lexicon")
    assert first == again and len(parses) == 1
    parse_cache.cached(tmp_path, "lexicon", 2, (10, 20), parse, "a lexicon")  # a new format: parsed again
    assert len(parses) == 2


def test_an_unreadable_cache_is_parsed_again(tmp_path, caplog):
    parse_cache.cached(tmp_path, "lexicon", 1, 0, lambda: ["old"], "a lexicon")
    [path] = tmp_path.glob("lexicon-*")
    path.write_bytes(b"not zlib")
    assert parse_cache.cached(tmp_path, "lexicon", 1, 0, lambda: ["new"], "a lexicon") == ["new"]
    assert "unreadable" in caplog.text


@pytest.mark.parametrize("enabled", [True, False])
def test_a_load_leaves_the_collector_as_it_was_and_its_values_frozen(tmp_path, enabled):
    parse_cache.cached(tmp_path, "lexicon", 1, 0, lambda: [[str(i)] for i in range(1000)], "a lexicon")
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        frozen = gc.get_freeze_count()
        values = parse_cache.cached(tmp_path, "lexicon", 1, 0, lambda: [], "a lexicon")
        assert gc.isenabled() is enabled
        assert len(values) == 1000 and gc.get_freeze_count() >= frozen + 1000  # no collection traverses them
        assert not any(obj is values for obj in gc.get_objects())
    finally:
        gc.unfreeze()
        (gc.enable if was else gc.disable)()


def test_a_cache_that_holds_something_else_is_parsed_again(tmp_path, caplog):
    parse_cache.cached(tmp_path, "lexicon", 1, 0, lambda: ["old"], "a lexicon")
    is_dict = lambda values: isinstance(values, dict)  # noqa: E731
    assert parse_cache.cached(tmp_path, "lexicon", 1, 0, lambda: {"new": 1}, "a lexicon", is_dict) == {"new": 1}
    assert "something else" in caplog.text
    assert parse_cache.cached(tmp_path, "lexicon", 1, 0, lambda: pytest.fail("parsed again"), "a lexicon", is_dict) == {"new": 1}


def test_a_folder_that_cannot_be_written_still_gives_the_parse(tmp_path, caplog):
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert parse_cache.cached(blocked / "sub", "lexicon", 1, 0, lambda: ["parsed"], "a lexicon") == ["parsed"]
    assert "could not keep" in caplog.text
