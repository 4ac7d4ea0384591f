"""Word vectors of a graph's concepts, kept beside its view for semantic seeds.

A graph's concepts are encoded once each, on the first query that needs
them (a concept made since the last query is encoded then), never at
ingest: ingest stays free of any model. 384 float32 per concept (1.5 KB;
10,000 concepts: 15 MB); about 1 ms to encode one on one core.
Graphs not queried lately are dropped first (at most MAX_GRAPHS kept).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable

import numpy as np

from emgas.state.view import GraphView

Encode = Callable[[list[str]], np.ndarray]
MAX_GRAPHS = 64
DIMENSIONS = 384


class ConceptVectors:
    """One graph's concept ids and their unit vectors, grown as the graph grows."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.position: dict[str, int] = {}
        self.vectors = np.zeros((0, DIMENSIONS), dtype=np.float32)

    def current(self, view: GraphView, encode: Encode) -> tuple[list[str], np.ndarray]:
        """(ids, vectors) of every concept `view` holds or once held, after
        encoding those not seen before; callers skip the ones no longer held."""
        new = [cid for cid in view.index if cid not in self.position]
        if new:
            fresh = encode(new)
            self.position.update((cid, len(self.ids) + i) for i, cid in enumerate(new))
            self.ids += new
            self.vectors = np.vstack([self.vectors, fresh.astype(np.float32)])
        return self.ids, self.vectors


class VectorCache:
    """ConceptVectors per graph version, least recently queried dropped first."""

    def __init__(self, max_graphs: int = MAX_GRAPHS) -> None:
        self.max_graphs = max_graphs
        self._graphs: OrderedDict[object, ConceptVectors] = OrderedDict()

    def of(self, key: object) -> ConceptVectors:
        found = self._graphs.pop(key, None) or ConceptVectors()
        self._graphs[key] = found
        while len(self._graphs) > self.max_graphs:
            self._graphs.popitem(last=False)
        return found
