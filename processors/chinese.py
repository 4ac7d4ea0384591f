"""Chinese terms: the words and character bigrams that concepts, query
seeds and the BM25 baseline are made of.

Chinese has no spaces, and a segmenter cuts the same idea differently in a
statement and in a question ("我同事身高164厘米" / "我同事有多高来着"), so one
segmentation is a weak key. Terms are therefore, in text order:

- jieba's search-mode words: each word of the precise cut and the dictionary
  words inside it (中华人民共和国 → 中华, 华人, 人民, 共和, 共和国, 中华人民共和国),
  minus function words;
- the character bigrams of each run of CJK characters (金融科技论坛 → 金融,
  融科, 科技, 技论, 论坛), minus those made of function characters only.

Search-mode words and bigrams together find more of what was said than
any one cut's words, and every bigram is kept, even one that spans
a word boundary ("的地" in "…的地点是…"): it still tells one attribute from
another. (What each choice was worth: docs/retrieval.md, "Why the
extractor and activation are shaped this way".)

`weights` gives each term jieba's inverse document frequency (its corpus
of Chinese text; unknown terms get the median), the tf-idf a concept's
importance is made from. Pure: jieba's dictionary and idf table are data,
read once per process (`lexicon`; a worker reads them decoded from disk,
`service.chinese_lexicon`).

The search-mode cut is jieba's, computed by jieba-rs (`rjieba`, its Rust
port with the same dictionary and model, much faster) wherever the two give
the same words. They differ only where an ASCII letter or digit touches
one of `.+#&_%-` (an e-mail address, "Gel-Kayano26"): jieba splits such a
token at the symbol, jieba-rs keeps it whole. Those texts go to jieba
itself (`_JIEBA_ONLY`), so the words are jieba's everywhere;
`tests/unit/processors/test_chinese_cut.py` holds the two to that (how they were
compared: docs/retrieval.md).
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter
from functools import lru_cache
from typing import Any, Callable, Collection, Mapping, NamedTuple, cast


_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
# Where jieba-rs cuts otherwise than jieba: an ASCII letter or digit next to
# one of the symbols jieba's block pattern holds besides them (`re_han_default`).
_JIEBA_ONLY = re.compile(r"[A-Za-z0-9][.+#&_%\-]|[.+#&_%\-][A-Za-z0-9]")
_HAS_WORD_CHAR = re.compile(r"\w")
# Function words and question words: they say how something is asked, not
# what about (什么, 另外, 来着 made seeds that matched every statement).
STOPWORDS = frozenset(
    "的 了 是 在 有 和 与 及 或 就 都 也 还 又 很 把 被 给 让 对 为 从 到 着 过 吗 呢 吧 啊 呀 哦 嗯 么 啥 "
    "我 你 您 他 她 它 我们 你们 他们 她们 它们 咱们 自己 这 那 这个 那个 这些 那些 这样 那样 这里 那里 "
    "什么 怎么 怎样 怎么样 如何 为什么 哪 哪里 哪儿 哪个 哪些 多少 几 谁 是不是 有没有 "
    "来着 另外 还有 以及 而且 但是 可是 不过 然后 所以 因为 如果 一下 一个 一些 请问 告诉 知道 记得 "
    "可以 能 会 要 想 说 做 吗 呢 其 之 啦 嘛 呗".split()
)
# A bigram made only of these says nothing about the topic (我的, 是的, 了吗).
_FUNCTION_CHARS = frozenset("的了是在有和与及就都也还又很把被给让对为从到着过吗呢吧啊呀么啥我你您他她它们这那个其之")
BIGRAM_WEIGHT = 0.5  # a bigram counts half an occurrence: words are the stronger key
# A bigram that is no word (`is_fragment`: 豆把, 了一, 的运) a quarter: a turn keeps
# only its best terms, and a short memory has more terms than that, so at a
# bigram's weight fragments crowd out its words (运动鞋, 茉莉花).
FRAGMENT_WEIGHT = 0.25


def words(text: str) -> list[str]:
    """jieba's search-mode words of `text`, lower case, in order, without
    function words, punctuation, numbers or single CJK characters."""
    kept = _KEPT
    if len(kept) > _KEPT_MOST:
        kept.clear()
    out = []
    for raw in search_cut(text):
        word = kept.get(raw, "")  # "": not met yet (a kept word is never empty)
        if word == "":
            word = kept[raw] = _kept_word(raw)
        if word is not None:
            out.append(word)
    return out


def _kept_word(raw: str) -> str | None:
    """What `words` keeps of a cut word: lower case, stripped; None for a
    function word, punctuation, a number or a single CJK character."""
    word = raw.strip().lower()
    if not word or word in STOPWORDS or word.isdigit() or not _HAS_WORD_CHAR.search(word):
        return None
    if len(word) < 2 and _CJK_RUN.fullmatch(word):
        return None
    return word


# `_kept_word` per cut word met: a language's words repeat from turn to turn.
# Emptied when it holds _KEPT_MOST (a long-lived worker meets new words
# without end); a race between threads writes the same value.
_KEPT: dict[str, str | None] = {}
_KEPT_MOST = 200_000


def search_cut(text: str) -> list[str]:
    """jieba's `cut_for_search` of `text` (with its HMM for unknown words):
    by jieba-rs, or by jieba where the two differ (`_JIEBA_ONLY`)."""
    if _JIEBA_ONLY.search(text):
        return list(_jieba().cut_for_search(text))
    return _rjieba().cut_for_search(text, True)


@lru_cache(maxsize=1)
def _jieba() -> Any:
    """jieba, imported where a text or the lexicon first needs it (its
    import is 9 ms of every process's start; an English one never needs it)."""
    import jieba

    jieba.setLogLevel(logging.WARNING)
    return jieba


@lru_cache(maxsize=1)
def _rjieba() -> Any:
    """jieba-rs; importing it reads its dictionary (about 0.1 s and 34 MiB),
    so only a process that reads Chinese pays it."""
    import rjieba

    return rjieba


def cjk_runs(text: str) -> list[str]:
    """The runs of CJK characters in `text`, in order."""
    return _CJK_RUN.findall(text)


def without_cjk(text: str) -> str:
    """`text` with each CJK run replaced by a space (what is left: other scripts)."""
    return _CJK_RUN.sub(" ", text)


def bigrams(text: str) -> list[str]:
    """Character bigrams of each CJK run of `text`, in order, except those of
    function characters only and function words."""
    out = []
    function = _FUNCTION_CHARS
    for run in cjk_runs(text):
        for i in range(len(run) - 1):
            pair = run[i : i + 2]
            if pair not in STOPWORDS and not (pair[0] in function and pair[1] in function):
                out.append(pair)
    return out


def is_fragment(term: str, words_nearby: Collection[str] = ()) -> bool:
    """True for a character bigram that is no word: two CJK characters that
    jieba's dictionary does not hold as a word (its count is 0 or absent) and
    that are not among `words_nearby` (words cut from the text it came from,
    where jieba's model may find a name the dictionary lacks). Such a term
    stays a retrieval feature; it is not shown to a person as a concept."""
    if len(term) != 2 or not _CJK_RUN.fullmatch(term):
        return False
    return _no_word(term, words_nearby, lexicon().two_char_words)


def _no_word(pair: str, words_nearby: Collection[str], two_char_words: frozenset[str]) -> bool:
    """`is_fragment` of two CJK characters: not among `words_nearby`, and not a
    word of jieba's dictionary (`Lexicon.two_char_words`)."""
    return pair not in words_nearby and pair not in two_char_words


class Lexicon(NamedTuple):
    """What `weights` and `is_fragment` read of jieba's data."""

    two_char_words: frozenset[str]  # the dictionary's words of two characters with a count above 0
    idf: Mapping[str, float]  # term -> jieba's inverse document frequency (natural log)
    median_idf: float  # what a term it does not list gets


def jieba_lexicon() -> Lexicon:
    """The lexicon read from jieba: its dictionary (about 0.5 s) and its
    idf table (importing `jieba.analyse`, which also reads a part-of-speech
    table: about 0.4 s). A bigram is a word where the dictionary counts it
    above 0 (it lists every word's prefixes at 0)."""
    jieba = _jieba()
    jieba.dt.check_initialized()
    from jieba import analyse

    table = analyse.default_tfidf
    words = frozenset(w for w, count in cast(Mapping[str, int], jieba.dt.FREQ).items() if count and len(w) == 2)
    return Lexicon(words, table.idf_freq, table.median_idf)


_lexicon_source: Callable[[], Lexicon] = jieba_lexicon
_lexicon_lock = threading.Lock()
_lexicon: list[Lexicon] = []  # the one read, once read


def read_lexicon_with(source: Callable[[], Lexicon]) -> None:
    """Read the lexicon with `source` from now on (`service.chinese_lexicon`
    keeps it decoded on disk), in place of `jieba_lexicon`; one read
    already stays."""
    global _lexicon_source
    _lexicon_source = source


def lexicon() -> Lexicon:
    """The lexicon, read on first use, once per process (only a process
    that reads Chinese pays it): an extraction and a query that both need
    it first wait for one read."""
    if not _lexicon:
        with _lexicon_lock:
            if not _lexicon:
                _lexicon.append(_lexicon_source())
    return _lexicon[0]


def characters(text: str) -> list[str]:
    """The CJK characters of `text` that are not function characters, once
    each, in order: single characters carry meaning in Chinese (车, 猫, 牙)
    that no word or bigram of a short text may share with the question."""
    return list(dict.fromkeys(ch for run in cjk_runs(text) for ch in run if ch not in _FUNCTION_CHARS
                              and ch not in STOPWORDS))


def terms(text: str) -> list[str]:
    """Words, then bigrams: every key `text` can be found by."""
    return words(text) + bigrams(text)


def weights(text: str) -> dict[str, float]:
    """term -> tf · idf, where tf counts a word 1, a bigram that is a word
    BIGRAM_WEIGHT and one that is no word FRAGMENT_WEIGHT per occurrence, and
    idf is jieba's (natural log; unknown terms: the median; `lexicon`)."""
    cut = words(text)
    tf: dict[str, float] = dict(Counter(cut))
    nearby = set(cut)
    table = lexicon()
    dictionary = table.two_char_words
    for pair in bigrams(text):  # each two CJK characters: `is_fragment` without its checks of that (`_no_word`, inlined)
        fragment = pair not in nearby and pair not in dictionary
        tf[pair] = tf.get(pair, 0) + (FRAGMENT_WEIGHT if fragment else BIGRAM_WEIGHT)
    idf, median = table.idf.get, table.median_idf
    return {term: count * idf(term, median) for term, count in tf.items()}

