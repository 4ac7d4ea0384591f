"""The in-memory view that serves queries: a compact, incrementally kept adjacency.

Derived from the durable state (rebuilt by `load_view`) and kept current by
`apply` after each write, so a query never walks RocksDB key by key. Each
node's neighbour list is cached as numpy arrays (indices, pair counts) and
invalidated only when a turn touches that node; edge weights are computed
from the counts when read, exact for the current N.
"""

from __future__ import annotations

import numpy as np

from processors.association import WeightKind, outgoing_weights, specificity
from processors.activation import Neighbours
from processors.graph import ConceptState, GraphRef, TurnDelta
from state import keys
from state.repository import GraphRepository


class GraphView:
    """One graph's nodes, counts, co-occurrence adjacency and passage ids."""

    def __init__(self, ref: GraphRef) -> None:
        self.ref = ref
        self.index: dict[str, int] = {}
        self.ids: list[str] = []
        self.texts: list[str] = []
        self._counts = np.zeros(64, dtype=np.float64)
        self._adjacency: list[dict[int, int]] = []
        self.passage_ids: list[list[str]] = []
        self.turns = 0
        self._arrays: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    @property
    def size(self) -> int:
        return len(self.ids)

    @property
    def counts(self) -> np.ndarray:
        """c(x) for every node, in index order."""
        return self._counts[: self.size]

    def node(self, cid: str, text: str) -> int:
        """Index of concept `cid`, adding it if new."""
        i = self.index.get(cid)
        if i is None:
            i = self.index[cid] = len(self.ids)
            self.ids.append(cid)
            self.texts.append(text)
            self._adjacency.append({})
            self.passage_ids.append([])
            if i >= len(self._counts):
                self._counts = np.concatenate([self._counts, np.zeros_like(self._counts)])
        return i

    def set_count(self, i: int, count: int) -> None:
        self._counts[i] = count

    def add_pair(self, a: int, b: int, increment: int) -> None:
        for x, y in ((a, b), (b, a)):
            self._adjacency[x][y] = self._adjacency[x].get(y, 0) + increment
            self._arrays.pop(x, None)

    def apply(self, delta: TurnDelta) -> None:
        """Mirror a delta just written to the store."""
        turn_id = delta.passage.turn_id
        for concept in delta.concepts:
            i = self.node(concept.id, concept.text)
            self.set_count(i, concept.count)
            self.passage_ids[i].append(turn_id)
        for a, b in delta.pairs:
            self.add_pair(self.index[a], self.index[b], 1)
        self.turns += 1

    def neighbour_counts(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(neighbour indices, pair counts c(i, ·)) of node i, cached until i changes."""
        cached = self._arrays.get(i)
        if cached is None:
            row = self._adjacency[i]
            idx = np.fromiter(row.keys(), dtype=np.int64, count=len(row))
            pair = np.fromiter(row.values(), dtype=np.float64, count=len(row))
            cached = self._arrays[i] = (idx, pair)
        return cached

    def neighbours(self, kind: WeightKind, fan: bool) -> Neighbours:
        """A `Neighbours` function giving exact weights W[i, ·] for the current counts."""
        counts, n = self.counts, float(self.turns)

        def weighted(i: int) -> tuple[np.ndarray, np.ndarray]:
            idx, pair = self.neighbour_counts(i)
            return idx, outgoing_weights(kind, fan, pair, counts[i], counts[idx], n)

        return weighted

    def ids_of(self, indices: np.ndarray) -> list[str]:
        return [self.ids[int(i)] for i in indices]

    def specificity(self) -> np.ndarray:
        return specificity(self.counts, float(self.turns))


def load_view(repo: GraphRepository, ref: GraphRef) -> GraphView:
    """Rebuild a graph version's view from the durable state."""
    view = GraphView(ref)
    for _, raw in repo.store.scan(keys.section(ref, b"c")):
        concept = ConceptState.model_validate_json(raw)
        view.set_count(view.node(concept.id, concept.text), concept.count)
    source_prefix = keys.section(ref, b"s")
    for key, _ in repo.store.scan(source_prefix):
        cid, turn_id = keys.split_tail(key, source_prefix)
        view.passage_ids[view.index[cid]].append(turn_id)
    pair_prefix = keys.section(ref, b"p")
    for key, raw in repo.store.scan(pair_prefix):
        a, b = keys.split_tail(key, pair_prefix)
        view.add_pair(view.index[a], view.index[b], keys.decode_count(raw))
    view.turns = repo.turns(ref)
    return view
