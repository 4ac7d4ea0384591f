"""jieba's lexicon kept decoded on disk (`service.chinese_lexicon`), and read
from jieba as `weights` and `is_fragment` read it before (`processors.chinese`)."""

import marshal
import zlib

import jieba
import pytest

from emgas.processors import chinese
from emgas.processors.chinese import Lexicon
from emgas.service import chinese_lexicon

SMALL = Lexicon(frozenset({"金融", "科技"}), {"金融": 7.5, "论坛": 9.25}, 11.5)


@pytest.fixture(scope="module")
def from_jieba():
    return chinese.jieba_lexicon()


def test_a_bigram_is_a_word_where_jiebas_dictionary_counts_it(from_jieba):
    jieba.dt.check_initialized()
    counts = jieba.dt.FREQ
    two = [w for w in counts if len(w) == 2]
    assert any(counts[w] == 0 for w in two), "the dictionary lists prefixes at 0: the case that must not count"
    assert all((w in from_jieba.two_char_words) == bool(counts[w]) for w in two)
    assert all(len(w) == 2 for w in from_jieba.two_char_words)


def test_the_idf_is_jieba_analyses_table(from_jieba):
    import jieba.analyse

    table = jieba.analyse.default_tfidf
    assert from_jieba.idf is table.idf_freq and from_jieba.median_idf == table.median_idf


def test_a_cached_lexicon_is_the_one_read_and_is_read_once(tmp_path, from_jieba):
    reads = []

    def read():
        reads.append(1)
        return from_jieba

    source = chinese_lexicon.cached_source(tmp_path, read)
    first, again = source(), source()
    assert first == from_jieba and again == from_jieba and len(reads) == 1
    assert type(again.idf) is dict and again.median_idf == from_jieba.median_idf
    assert chinese_lexicon.cache_file(tmp_path).exists()


def held_as_cached(value: object) -> bytes:
    """What the parse cache writes for `value`."""
    return zlib.compress(marshal.dumps(value))


@pytest.mark.parametrize(
    "held", [b"not zlib", zlib.compress(b"\xe9"), held_as_cached((1, 2)), held_as_cached((frozenset(), {}, "11.5"))]
)
def test_an_unreadable_file_is_read_again_and_rewritten(tmp_path, held):
    chinese_lexicon.cache_file(tmp_path).write_bytes(held)
    assert chinese_lexicon.cached_source(tmp_path, lambda: SMALL)() == SMALL
    assert chinese_lexicon.cached_source(tmp_path, lambda: pytest.fail("read again"))() == SMALL


def test_a_folder_that_cannot_be_written_still_gives_the_lexicon(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert chinese_lexicon.cached_source(blocked / "sub", lambda: SMALL)() == SMALL


def test_install_routes_the_lexicon_through_the_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(chinese, "_lexicon", [])
    monkeypatch.setattr(chinese, "_lexicon_source", lambda: pytest.fail("read from jieba"))
    chinese_lexicon.cache_file(tmp_path).write_bytes(held_as_cached((SMALL.two_char_words, SMALL.idf, SMALL.median_idf)))
    chinese_lexicon.install(tmp_path)
    assert chinese.lexicon() == SMALL
    assert chinese.is_fragment("融科") and not chinese.is_fragment("金融")
    # 金融 and 论坛 cut as words and bigrams that are words here (论坛 not in this
    # lexicon's words: a word nearby); 融论 a bigram that is no word (the median idf)
    assert chinese.weights("金融论坛") == {"金融": 1.5 * 7.5, "论坛": 1.5 * 9.25, "融论": 0.25 * 11.5}
