"""Word vectors of a graph's concepts, kept beside its view for semantic seeds.

A graph's concepts are encoded once each, on the first query that needs
them (a concept made since the last query is encoded then), never at
ingest: ingest stays free of any model. A word's vector depends on the word
alone, so one process-wide cache of the last WORD_CACHE words serves every
graph (conversations share most of their vocabulary) and the query words
that are concepts already. 384 float32 per concept (1.5 KB; 10,000
concepts: 15 MB); about 1 ms to encode a new word on one core. Graphs not
queried lately are dropped first (at most MAX_GRAPHS kept, and at most
MAX_ROWS concept vectors over all of them: a graph's vectors grow with
every concept it ever held, so a count of graphs alone did not bound them).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable

import numpy as np

from emgas.state.view import GraphView

Encode = Callable[[list[str]], np.ndarray]
MAX_GRAPHS = 64
MAX_ROWS = 100_000  # concept vectors over every graph kept: about 150 MB
WORD_CACHE = 50_000  # words: about 75 MB
DIMENSIONS = 384


class WordVectors:
    """word -> unit vector, the least recently used dropped past `size` words."""

    def __init__(self, size: int = WORD_CACHE) -> None:
        self.size = size
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()

    def of(self, words: list[str], encode: Encode) -> np.ndarray:
        """Vectors of `words` (rows in order), encoding only those not cached."""
        new = [w for w in dict.fromkeys(words) if w not in self._vectors]
        if new:
            for word, vector in zip(new, encode(new).astype(np.float32)):
                self._vectors[word] = vector
        rows = []
        for word in words:
            self._vectors.move_to_end(word)
            rows.append(self._vectors[word])
        while len(self._vectors) > self.size:
            self._vectors.popitem(last=False)
        return np.stack(rows) if rows else np.zeros((0, DIMENSIONS), dtype=np.float32)


class ConceptVectors:
    """One graph's concept ids and their unit vectors, grown as the graph grows."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.position: dict[str, int] = {}
        self.vectors = np.zeros((0, DIMENSIONS), dtype=np.float32)

    def current(self, view: GraphView, words: WordVectors, encode: Encode) -> tuple[list[str], np.ndarray]:
        """(ids, vectors) of every concept `view` holds or once held, after
        adding those not seen before; callers skip the ones no longer held."""
        new = [cid for cid in view.index if cid not in self.position]
        if new:
            self.position.update((cid, len(self.ids) + i) for i, cid in enumerate(new))
            self.ids += new
            self.vectors = np.vstack([self.vectors, words.of(new, encode)])
        return self.ids, self.vectors

    def of(self, words: list[str], cache: WordVectors, encode: Encode) -> np.ndarray:
        """Vectors of query words: a concept's own row, else from the word cache."""
        missing = [w for w in words if w not in self.position]
        found = dict(zip(missing, cache.of(missing, encode))) if missing else {}
        rows = [self.vectors[self.position[w]] if w in self.position else found[w] for w in words]
        return np.stack(rows) if rows else np.zeros((0, DIMENSIONS), dtype=np.float32)


class VectorCache:
    """ConceptVectors per graph version, least recently queried dropped first,
    over one cache of word vectors."""

    def __init__(self, max_graphs: int = MAX_GRAPHS, max_rows: int = MAX_ROWS) -> None:
        self.max_graphs = max_graphs
        self.max_rows = max_rows
        self.words = WordVectors()
        self._graphs: OrderedDict[object, ConceptVectors] = OrderedDict()

    def of(self, key: object) -> ConceptVectors:
        found = self._graphs.pop(key, None) or ConceptVectors()
        self._graphs[key] = found
        while len(self._graphs) > self.max_graphs:
            self._graphs.popitem(last=False)
        # Rows, not graphs, are what memory holds: a few large graphs drop the
        # least recently queried others (never the one asked for now).
        while len(self._graphs) > 1 and self.rows() > self.max_rows:
            self._graphs.popitem(last=False)
        return found

    def rows(self) -> int:
        """Concept vectors held, over every graph."""
        return sum(len(g.ids) for g in self._graphs.values())
