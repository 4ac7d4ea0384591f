"""BM25 over passage text (Robertson–Spärck Jones, Okapi weighting).

    score(q, d) = Σ_{t ∈ q} idf(t) · f(t,d)·(k1 + 1) / (f(t,d) + k1·(1 − b + b·|d|/avgdl))
    idf(t) = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))

f(t,d): occurrences of term t in d; |d|: terms in d; N: passages. Terms
of a space-delimited text are the lemmas of the words that are not
stopwords (`processors.extract.content_words`): on LoCoMo that is the
strongest of the variants tried (raw tokens, lemmas, stopwords removed,
both), so the floor is not a straw man. A Chinese text has no spaces: its
terms are jieba's search-mode words ("words", `processors.chinese.words`)
(ASCII words among them lower-cased) or, the second baseline, its
characters and character bigrams ("chars", no segmenter at all; ASCII
words as lemmas). Pure: an index
built from (id, text) pairs.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Iterable, Literal

from emgas.processors import chinese
from emgas.processors.extract import ExtractionParams, content_words, detect_language

Tokens = Literal["words", "chars"]
_LANGUAGE = ExtractionParams()  # only its language detection is used


def terms(text: str, tokens: Tokens = "words") -> list[str]:
    """The index terms of `text`: lemmas of content words; for Chinese,
    search-mode words ("words") or characters and bigrams ("chars")."""
    if detect_language(text, _LANGUAGE) != "zh":
        return content_words(text)
    if tokens == "words":
        return chinese.words(text)
    runs = chinese.cjk_runs(text)
    return (
        [ch for run in runs for ch in run]
        + [run[i : i + 2] for run in runs for i in range(len(run) - 1)]
        + content_words(chinese.without_cjk(text))
    )


class BM25:
    def __init__(
        self, passages: Iterable[tuple[str, str]], k1: float = 1.5, b: float = 0.75, tokens: Tokens = "words"
    ) -> None:
        self.k1, self.b, self.tokens = k1, b, tokens
        self.ids: list[str] = []
        self.freqs: list[Counter[str]] = []
        self.lengths: list[int] = []
        postings: dict[str, list[int]] = {}
        for pid, text in passages:
            tokens = terms(text, self.tokens)
            counts = Counter(tokens)
            for t in counts:
                postings.setdefault(t, []).append(len(self.ids))
            self.ids.append(pid)
            self.freqs.append(counts)
            self.lengths.append(len(tokens))
        n = len(self.ids)
        self.avgdl = sum(self.lengths) / n if n else 0.0
        self.postings = postings
        self.idf = {t: math.log(1.0 + (n - len(p) + 0.5) / (len(p) + 0.5)) for t, p in postings.items()}

    def scores(self, query: str) -> dict[str, float]:
        """Passage id -> BM25 score, for passages sharing a term with the query."""
        totals: dict[int, float] = {}
        for t in set(terms(query, self.tokens)):
            for i in self.postings.get(t, ()):
                f = self.freqs[i][t]
                norm = f + self.k1 * (1.0 - self.b + self.b * self.lengths[i] / self.avgdl)
                totals[i] = totals.get(i, 0.0) + self.idf[t] * f * (self.k1 + 1.0) / norm
        return {self.ids[i]: s for i, s in totals.items()}


def top(scores: dict[str, float], k: int) -> list[str]:
    """The k best ids; ties by id."""
    return [pid for pid, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]]
