"""Synthetic LoCoMo-shaped conversations, for benchmarks (`emgas bench`).

Why it exists: the fold's speed depends on the shape of the stream it folds
(turns per session, the gaps that bring decay ticks and consolidations,
how many concepts a turn has and how often they come back), and the one
data set of that shape at hand, LoCoMo, is licensed and must not be needed
to run a benchmark. This writes, seeded and deterministic, conversations of
that shape from nothing:

- several graphs, two speakers each, taking turns;
- sessions of ~15-30 turns a few minutes apart, sessions days apart;
- turns of ~15-30 words: common English function words (stopwords, which
  extraction drops) mixed with made-up, pronounceable words drawn from a
  Zipf-distributed vocabulary of a few thousand, and now and then a name,
  so that extraction (`processors.extract.ingest`) finds ~8-12 concepts
  per turn, some of them recurring often and most rarely, as in real talk.

The words mean nothing; only the statistics are meant to be realistic.

`Shape(language="zh")` writes Chinese conversations of the same shape:
words drawn from jieba's dictionary (two and three characters, the most
frequent first, Zipf-weighted by that rank), function words that are
stopwords of the Chinese extraction, names of a surname and one or two
given characters, no spaces, Chinese punctuation.
"""

from __future__ import annotations

import itertools
import random
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Iterator, Literal

from emgas.processors.chinese import STOPWORDS
from emgas.processors.events import Turn

START = datetime(2023, 1, 2, 9, 0, tzinfo=timezone.utc)

# Function words, every one a stopword of extraction's English list.
FUNCTION_WORDS = (
    "the", "a", "and", "to", "of", "in", "i", "you", "it", "that", "is", "was", "for", "on", "with",
    "my", "we", "have", "but", "so", "just", "about", "this", "at", "be", "not", "are", "they", "what",
    "do", "me", "your", "really", "like", "know", "some", "when", "there", "all", "if", "our", "from",
    "can", "would", "will", "been", "had", "how", "out", "up", "too", "also", "then", "very", "much",
)
_ONSETS = ("b", "br", "ch", "d", "dr", "f", "fl", "g", "gr", "h", "j", "k", "l", "m", "n", "p", "pl",
           "r", "s", "sh", "sl", "st", "t", "th", "tr", "v", "w", "z")
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "i", "o", "ee", "oo", "ai", "ou")
_CODAS = ("", "", "", "", "n", "r", "l", "s", "t", "m", "nd", "st", "ck")
_ENDINGS = (".", ".", ".", "?", "!")

# Chinese function words, every one a stopword of the Chinese extraction.
ZH_FUNCTION_WORDS = (
    "的", "了", "是", "在", "有", "和", "就", "都", "也", "还", "很", "把", "给", "对", "从", "到", "着", "过",
    "吗", "呢", "吧", "啊", "我", "你", "他", "她", "我们", "你们", "他们", "这个", "那个", "这些", "什么",
    "怎么", "然后", "所以", "因为", "但是", "不过", "一个", "一些", "一下", "可以", "能", "会", "要", "想", "说",
)
_ZH_SURNAMES = "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈"
_ZH_GIVEN = "伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚桂英华玉兰萍红鹏建文辉力斌宇浩凯晨欣怡佳雪琳颖"
_ZH_ENDINGS = ("。", "。", "。", "？", "！")
_HAN = re.compile(r"[\u4e00-\u9fff]{2,3}")
ZH_MIN_FREQUENCY = 50  # jieba's count: rarer words are names of places, books, idioms


@dataclass(frozen=True)
class Shape:
    """The shape of the conversations (ranges are inclusive)."""

    graphs: int = 6
    language: Literal["en", "zh"] = "en"
    vocabulary: int = 4000
    zipf_exponent: float = 1.0
    names_per_graph: int = 12
    session_turns: tuple[int, int] = (15, 30)
    turn_words: tuple[int, int] = (15, 30)
    minutes_between_turns: tuple[int, int] = (1, 5)
    days_between_sessions: tuple[int, int] = (1, 9)
    function_share: float = 0.55  # of a turn's words
    name_share: float = 0.06  # of its other words: a name instead of a vocabulary word
    seed: int = 7


# Chinese conversations about as MemDaily's are: shorter turns than the
# English ones, since the Chinese extraction keeps bigrams beside words.
# MemDaily's first 3,000 turns: 24.7 characters, 12.3 concepts and 82 pairs
# a turn; these 17.7, 14.6 and 107 (a little more for the fold to do),
# extracted at the same rate (2,940 and 2,740 turns/s, 27 Nov).
CHINESE = Shape(language="zh", turn_words=(6, 14))


class _Words:
    """Made-up words: a Zipf-weighted vocabulary and a supply of names."""

    function_words: tuple[str, ...] = FUNCTION_WORDS

    def __init__(self, shape: Shape, rng: random.Random) -> None:
        self.rng = rng
        self.vocabulary = self.drawn_vocabulary(shape.vocabulary)
        zipf = (1.0 / (rank + 2.7) ** shape.zipf_exponent for rank in range(len(self.vocabulary)))
        self.weights = list(itertools.accumulate(zipf))

    def drawn_vocabulary(self, count: int) -> list[str]:
        return self.distinct(count)

    def word(self) -> str:
        syllables = self.rng.choice((2, 2, 2, 3))
        return "".join(self.rng.choice(_ONSETS) + self.rng.choice(_VOWELS) + self.rng.choice(_CODAS) for _ in range(syllables))

    def distinct(self, count: int, taken: frozenset[str] = frozenset()) -> list[str]:
        out: dict[str, None] = {}
        while len(out) < count:
            w = self.word()
            if len(w) >= 4 and w not in FUNCTION_WORDS and w not in taken:
                out[w] = None
        return list(out)

    def zipf(self, k: int) -> list[str]:
        return self.rng.choices(self.vocabulary, cum_weights=self.weights, k=k)

    def sentences(self, tokens: list[str]) -> str:
        """Cut `tokens` into one to three sentences (`spans`): capitalised, punctuated."""
        sentences = [" ".join(tokens[a:b]) for a, b in self.spans(len(tokens))]
        return " ".join(s[0].upper() + s[1:] + self.rng.choice(_ENDINGS) for s in sentences)

    def spans(self, n: int) -> list[tuple[int, int]]:
        """One to three (start, end) spans cutting n tokens into sentences of five or more."""
        k = self.rng.randint(1, max(1, min(3, n // 7)))
        cuts = [n * j // k + self.rng.randint(-1, 1) for j in range(1, k)]
        return list(zip([0, *cuts], [*cuts, n]))


class _ChineseWords(_Words):
    """Words of jieba's dictionary, the most frequent `shape.vocabulary` of
    two or three characters that are no stopword, Zipf-weighted in that
    order; names of a surname and one or two given characters."""

    function_words = ZH_FUNCTION_WORDS

    def drawn_vocabulary(self, count: int) -> list[str]:
        return _dictionary_words(count)

    def word(self) -> str:
        given = "".join(self.rng.choice(_ZH_GIVEN) for _ in range(self.rng.choice((1, 2, 2))))
        return self.rng.choice(_ZH_SURNAMES) + given

    def distinct(self, count: int, taken: frozenset[str] = frozenset()) -> list[str]:
        out: dict[str, None] = {}
        while len(out) < count:
            name = self.word()
            if name not in taken:
                out[name] = None
        return list(out)

    def sentences(self, tokens: list[str]) -> str:
        return "".join("".join(tokens[a:b]) + self.rng.choice(_ZH_ENDINGS) for a, b in self.spans(len(tokens)))


def _dictionary_words(count: int) -> list[str]:
    """The `count` most frequent words of jieba's dictionary (ties in
    character order) of two or three Han characters, seen at least
    ZH_MIN_FREQUENCY times, that the Chinese extraction does not stop."""
    import jieba  # noqa: PLC0415 - only Chinese conversations need it

    found = []
    with jieba.get_dict_file() as lines:
        for line in lines:
            word, frequency = line.decode("utf-8").split(" ")[:2]
            if int(frequency) >= ZH_MIN_FREQUENCY and _HAN.fullmatch(word) and word not in STOPWORDS:
                found.append((-int(frequency), word))
    return [word for _, word in sorted(found)[:count]]


def _text(words: _Words, names: list[str], shape: Shape) -> str:
    rng = words.rng
    count = rng.randint(*shape.turn_words)
    content = iter(words.zipf(count))
    tokens = []
    for _ in range(count):
        if rng.random() < shape.function_share:
            tokens.append(rng.choice(words.function_words))
        elif rng.random() < shape.name_share:
            tokens.append(rng.choice(names).capitalize())
        else:
            tokens.append(next(content))
    return words.sentences(tokens)


def _graph_turns(graph: int, count: int, words: _Words, shape: Shape) -> Iterator[Turn]:
    rng = words.rng
    names = words.distinct(shape.names_per_graph, frozenset(words.vocabulary))
    speakers = [names[0].capitalize(), names[1].capitalize()]
    at = START + timedelta(hours=graph)
    session, n = 0, 0
    while n < count:
        for i in range(min(rng.randint(*shape.session_turns), count - n)):
            yield Turn(
                graph_id=f"synthetic-{graph}", turn_id=f"s{session}-t{i}", speaker=speakers[i % 2],
                text=_text(words, names, shape), timestamp=at, session_id=f"session-{session}",
            )
            at += timedelta(minutes=rng.randint(*shape.minutes_between_turns), seconds=rng.randint(0, 59))
            n += 1
        session += 1
        at += timedelta(days=rng.randint(*shape.days_between_sessions), hours=rng.randint(-3, 3))


def conversations(turns: int, shape: Shape = Shape()) -> list[Turn]:
    """`turns` turns spread evenly over `shape.graphs` graphs, graph after
    graph, each graph's in time order. The same arguments give the same turns."""
    words = (_ChineseWords if shape.language == "zh" else _Words)(shape, random.Random(shape.seed))
    share, extra = divmod(turns, shape.graphs)
    return [t for g in range(shape.graphs) for t in _graph_turns(g, share + (g < extra), words, shape)]
