"""BM25 over passage text (Robertson–Spärck Jones, Okapi weighting).

    score(q, d) = Σ_{t ∈ q} idf(t) · f(t,d)·(k1 + 1) / (f(t,d) + k1·(1 − b + b·|d|/avgdl))
    idf(t) = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))

f(t,d): occurrences of term t in d; |d|: terms in d; N: passages. Terms
are the lemmas of the words that are not stopwords (`processors.extract.
content_words`): on LoCoMo that is the strongest of the variants tried
(raw tokens, lemmas, stopwords removed, both), so the floor is not a straw
man. Pure: an index built from (id, text) pairs.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Iterable

from emgas.processors.extract import content_words as terms


class BM25:
    def __init__(self, passages: Iterable[tuple[str, str]], k1: float = 1.5, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.ids: list[str] = []
        self.freqs: list[Counter[str]] = []
        self.lengths: list[int] = []
        postings: dict[str, list[int]] = {}
        for pid, text in passages:
            tokens = terms(text)
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
        for t in set(terms(query)):
            for i in self.postings.get(t, ()):
                f = self.freqs[i][t]
                norm = f + self.k1 * (1.0 - self.b + self.b * self.lengths[i] / self.avgdl)
                totals[i] = totals.get(i, 0.0) + self.idf[t] * f * (self.k1 + 1.0) / norm
        return {self.ids[i]: s for i, s in totals.items()}


def top(scores: dict[str, float], k: int) -> list[str]:
    """The k best ids; ties by id."""
    return [pid for pid, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]]
