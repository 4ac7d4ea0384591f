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
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Iterator

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


@dataclass(frozen=True)
class Shape:
    """The shape of the conversations (ranges are inclusive)."""

    graphs: int = 6
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


class _Words:
    """Made-up words: a Zipf-weighted vocabulary and a supply of names."""

    def __init__(self, shape: Shape, rng: random.Random) -> None:
        self.rng = rng
        self.vocabulary = self.distinct(shape.vocabulary)
        zipf = (1.0 / (rank + 2.7) ** shape.zipf_exponent for rank in range(len(self.vocabulary)))
        self.weights = list(itertools.accumulate(zipf))

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


def _text(words: _Words, names: list[str], shape: Shape) -> str:
    rng = words.rng
    count = rng.randint(*shape.turn_words)
    content = iter(words.zipf(count))
    tokens = []
    for _ in range(count):
        if rng.random() < shape.function_share:
            tokens.append(rng.choice(FUNCTION_WORDS))
        elif rng.random() < shape.name_share:
            tokens.append(rng.choice(names).capitalize())
        else:
            tokens.append(next(content))
    return _sentences(tokens, rng)


def _sentences(tokens: list[str], rng: random.Random) -> str:
    """Cut `tokens` into one to three sentences (of five words or more):
    capitalised, punctuated."""
    k = rng.randint(1, max(1, min(3, len(tokens) // 7)))
    cuts = [len(tokens) * j // k + rng.randint(-1, 1) for j in range(1, k)]
    sentences = [" ".join(tokens[a:b]) for a, b in zip([0, *cuts], [*cuts, len(tokens)])]
    return " ".join(s[0].upper() + s[1:] + rng.choice(_ENDINGS) for s in sentences)


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
    words = _Words(shape, random.Random(shape.seed))
    share, extra = divmod(turns, shape.graphs)
    return [t for g in range(shape.graphs) for t in _graph_turns(g, share + (g < extra), words, shape)]
