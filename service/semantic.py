"""Word vectors of a graph's concepts, kept beside its view for semantic seeds.

A word's vector depends on the word alone, so one process-wide cache of
the last WORD_CACHE words serves every graph (conversations share most of
their vocabulary) and the query words that are concepts already; with a
`WordStore` it is also kept on disk, so a word is encoded once per machine
(about 1 ms on one core), not once per process. Ingest stays free of any
model. 384 float32 per concept (1.5 KB; 10,000 concepts: 15 MB). Graphs
not queried lately are dropped first (at most MAX_GRAPHS kept, and at
most MAX_ROWS concept vectors over all of them: a graph's vectors grow
with every concept it ever held, so a count of graphs alone did not bound
them).

When a graph's concepts are encoded:
- in process (evaluation, tests): on the first query that needs them, as
  the query asks (`VectorCache()`);
- in a worker (`VectorCache.serve_from`, see `service.retrieval.warm_up`):
  by a background thread, from the disk where it can: a partition's graphs
  once it has caught up and serves queries (`prefetch`), and a concept
  made since when a query first finds it without a vector (that query goes
  on without it). So no query and no takeover waits for the encoder; a
  query right after a takeover may have fewer semantic seeds for a moment.
  A query's own words not known on disk are encoded as it asks (the
  encoder's session built then if it is not yet: `encoder.on_demand`).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import OrderedDict
from typing import Callable

import numpy as np

from emgas.state.view import GraphView
from emgas.service.word_store import WordStore

log = logging.getLogger(__name__)

Encode = Callable[[list[str]], np.ndarray]
MAX_GRAPHS = 64
MAX_ROWS = 100_000  # concept vectors over every graph kept: about 150 MB
WORD_CACHE = 50_000  # words: about 75 MB
DIMENSIONS = 384


class WordVectors:
    """word -> unit vector, the least recently used dropped past `size` words
    (and, with a `store`, kept on disk). Safe to use from several threads."""

    def __init__(self, size: int = WORD_CACHE, store: WordStore | None = None) -> None:
        self.size = size
        self.store = store
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.RLock()

    def known(self, words: list[str]) -> dict[str, np.ndarray]:
        """The vectors of those of `words` known in memory or on disk (nothing is encoded)."""
        with self._lock:
            found = {w: self._vectors[w] for w in words if w in self._vectors}
            missing = [w for w in dict.fromkeys(words) if w not in found]
            if missing and self.store is not None:
                stored = self.store.get(missing)
                for word, vector in stored.items():
                    self._vectors[word] = vector
                found.update(stored)
            self._trim()
            return found

    def of(self, words: list[str], encode: Encode) -> np.ndarray:
        """Vectors of `words` (rows in order), encoding only those not known."""
        found = self.known(words)
        new = [w for w in dict.fromkeys(words) if w not in found]
        if new:
            encoded = dict(zip(new, encode(new).astype(np.float32)))
            if self.store is not None:
                self.store.put(encoded)
            found.update(encoded)
            with self._lock:
                self._vectors.update(encoded)
                self._trim()
        return np.stack([found[w] for w in words]) if words else np.zeros((0, DIMENSIONS), dtype=np.float32)

    def _trim(self) -> None:
        while len(self._vectors) > self.size:
            self._vectors.popitem(last=False)


class Background:
    """One thread that encodes the words it is given, into a `WordVectors`."""

    def __init__(self, words: WordVectors, encode: Encode) -> None:
        self._words, self._encode = words, encode
        self._queue: queue.Queue[list[str]] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="emgas-word-vectors", daemon=True)
        self._thread.start()

    def submit(self, words: list[str]) -> None:
        if words:
            self._queue.put(words)

    def idle(self) -> bool:
        """Whether every word submitted has been encoded."""
        return self._queue.unfinished_tasks == 0

    def _run(self) -> None:
        while True:
            words = self._queue.get()
            try:
                for start in range(0, len(words), 64):
                    self._words.of(words[start:start + 64], self._encode)
            except Exception:  # noqa: BLE001 - a failed encoding costs those words their seeds, not the thread
                log.exception("encoding %s words in the background failed", len(words))
            finally:
                self._queue.task_done()


class ConceptVectors:
    """One graph's concept ids and their unit vectors, grown as the graph grows."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.position: dict[str, int] = {}
        self._block = np.zeros((0, DIMENSIONS), dtype=np.float32)  # rows past len(ids): room to grow
        self.vectors = self._block  # the rows of `ids`: a view of the block
        self._submitted: set[str] = set()  # handed to the background encoder, not added yet

    def current(
        self, view: GraphView, words: WordVectors, encode: Encode, background: Background | None = None
    ) -> tuple[list[str], np.ndarray]:
        """(ids, vectors) of every concept `view` holds or once held, after
        adding those not seen before; callers skip the ones no longer held.
        With `background`, a new concept whose word has no known vector is
        left out and handed to it (a later call adds it)."""
        new = [cid for cid in view.index if cid not in self.position]
        if not new:
            return self.ids, self.vectors
        if background is None:
            self._add(new, words.of(new, encode))
            return self.ids, self.vectors
        found = words.known(new)
        ready = [cid for cid in new if cid in found]
        if ready:
            self._add(ready, np.stack([found[cid] for cid in ready]))
        background.submit([cid for cid in new if cid not in found and cid not in self._submitted])
        self._submitted.update(cid for cid in new if cid not in found)
        return self.ids, self.vectors

    def prefetch(self, view: GraphView, background: Background) -> int:
        """Hand every concept of `view` not added or handed over yet to `background`."""
        new = [cid for cid in view.index if cid not in self.position and cid not in self._submitted]
        background.submit(new)
        self._submitted.update(new)
        return len(new)

    def _add(self, ids: list[str], vectors: np.ndarray) -> None:
        """Append rows. The block grows by doubling: a graph whose concepts
        arrive a few at a time (a takeover's prefetch, then every new turn's)
        is copied about log2(rows) times, not once per batch, which had left
        the freed copies' pages to the allocator (a worker's memory grew
        with every takeover). Rows already handed out are never written again."""
        start, end = len(self.ids), len(self.ids) + len(ids)
        if end > len(self._block):
            block = np.empty((max(end, 2 * len(self._block), 64), DIMENSIONS), dtype=np.float32)
            block[:start] = self._block[:start]
            self._block = block
        self._block[start:end] = vectors
        self.position.update((cid, start + i) for i, cid in enumerate(ids))
        self.ids += ids
        self.vectors = self._block[:end]
        self._submitted.difference_update(ids)

    @property
    def capacity(self) -> int:
        """Rows the block has room for (the held ones included)."""
        return len(self._block)

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
        self.background: Background | None = None
        self._graphs: OrderedDict[object, ConceptVectors] = OrderedDict()

    def serve_from(self, store: WordStore | None, encode: Encode) -> None:
        """A worker's mode: words kept in `store` across processes, new concepts
        encoded in the background, never by a query."""
        self.words.store = store
        if self.background is None:
            self.background = Background(self.words, encode)

    def current(self, view: GraphView, encode: Encode) -> tuple[list[str], np.ndarray]:
        """`ConceptVectors.current` of `view`'s graph version, in this cache's mode."""
        return self.of(view.ref).current(view, self.words, encode, self.background)

    def warm(self, view: GraphView, encode: Encode) -> None:
        """Every concept of `view` encoded now (from the disk where known)."""
        self.of(view.ref).current(view, self.words, encode)

    def prefetch(self, view: GraphView) -> int:
        """In a worker's mode: the concepts of `view` not added yet handed to
        the background encoder (which reads the disk first), so the graph's
        next queries find them without waiting; how many. In process: none."""
        if self.background is None:
            return 0
        return self.of(view.ref).prefetch(view, self.background)

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

    def drop(self, keys: list[object]) -> int:
        """Forget the vectors of these graph versions (a partition handed to
        another worker: its graphs are no longer asked here); the rows dropped."""
        return sum(len(g.ids) for g in (self._graphs.pop(key, None) for key in keys) if g is not None)

    def rows(self) -> int:
        """Concept vectors held, over every graph."""
        return sum(len(g.ids) for g in self._graphs.values())
