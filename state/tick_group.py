"""Pruning ticks applied ahead of their part's turns, read together.

A part of a run (`state.turn_run`) applies its pruning ticks first, one
after another, with no turn between them. Each tick reads a slice (see
`state.rules._decay_slice`): its listed concepts' records, neighbours,
passages and links, its listed edges, the edges of the concepts it lists
as isolated. Reading those for each tick alone costs more than deciding
it, so a group of ticks reads them once, for all of its ticks, before the
first (`TickReads`). Each tick's slice is then what was read, less what the
ticks before it in the group removed (`Removed`): ticks only remove, and
a tick removes a concept's record, its edges, links and orphaned passages
through writes that name them, so the slice equals the one read after the
earlier ticks were applied.

The rule's evolve (`processors.evolve.evolve_decay`) decides each tick, as
when it is applied alone.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from emgas.processors.events import Decay
from emgas.processors.evolve import Slice
from emgas.processors.graph import GraphMeta, GraphRef
from emgas.processors.pruning import Edge, PairState, PairTable, edge_key
from emgas.processors.writes import RemoveConcept, RemoveLink, RemovePairs, Write
from emgas.state.repository import GraphRepository
from emgas.state.view import GraphView


class Removed:
    """What the ticks of a group decided so far remove: concepts, edges
    (by `edge_key`), (concept, turn) links, and the ends of the edges removed."""

    def __init__(self) -> None:
        self.concepts: set[str] = set()
        self.edges: set[Edge] = set()
        self.links: set[tuple[str, str]] = set()
        self.touched: set[str] = set()  # ends of removed edges: their neighbours changed

    def add(self, writes: Iterable[Write]) -> None:
        for write in writes:
            if isinstance(write, RemovePairs):
                self.edges.update(edge_key(edge) for edge in write.edges)
                self.touched.update(end for edge in write.edges for end in edge)
            elif isinstance(write, RemoveConcept):
                self.concepts.add(write.cid)
            elif isinstance(write, RemoveLink):
                self.links.add((write.cid, write.turn_id))


class TickReads:
    """What the ticks of a group read, loaded at once from the store and the
    view as they are before the group's first tick."""

    def __init__(self, repo: GraphRepository, view: GraphView, ref: GraphRef, ticks: Sequence[Decay]) -> None:
        self.ref = ref
        listed = sorted({c.id for tick in ticks for c in tick.concepts})
        index = view.index
        self.neighbours = {cid: tuple(view.neighbour_ids(cid)) for cid in listed}
        self.sources = {cid: tuple(view.passage_ids[index[cid]]) for cid in listed if cid in index}
        self.passages = repo.passage_concepts(ref, sorted({t for turns in self.sources.values() for t in turns}))
        candidates = [(c, t) for t, named in self.passages.items() for c in named]
        self.links = repo.links(ref, candidates, self.passages)
        self.concepts = repo.concepts(ref, listed)
        self.pairs = view.pair_table((e.a, e.b) for tick in ticks for e in tick.edges)
        self.pair_row = {edge: k for k, edge in enumerate(self.pairs.edges)}
        isolated = sorted({c.id for tick in ticks for c in tick.concepts if c.reason == "isolated"})
        self.isolated_edges = view.edges_of({cid: self.neighbours[cid] for cid in isolated})

    def slice(self, tick: Decay, meta: GraphMeta, removed: Removed) -> Slice:
        """`tick`'s slice after the group's ticks that `removed` holds: as
        `state.rules._decay_slice` would load it once they are applied."""
        listed = sorted({c.id for c in tick.concepts})
        neighbours = {cid: self._neighbours(cid, removed) for cid in listed}
        sources = {cid: self.sources[cid] for cid in listed if cid in self.sources and cid not in removed.concepts}
        # A passage an earlier tick pruned is no live concept's source: it went with its last link.
        turns = sorted({t for turns in sources.values() for t in turns})
        passages = {t: self.passages[t] for t in turns if t in self.passages}
        links = frozenset(
            (c, t) for t, named in passages.items() for c in named
            if (c, t) in self.links and (c, t) not in removed.links
        )
        concepts = {c.id: self.concepts[c.id] for c in tick.concepts
                    if c.id in self.concepts and c.id not in removed.concepts}
        isolated = [c.id for c in tick.concepts if c.reason == "isolated"]
        return Slice(
            ref=self.ref, meta=meta, concepts=concepts,
            pairs=self._pairs(((e.a, e.b) for e in tick.edges), removed),
            neighbours=neighbours, sources=sources, passages=passages, links=links,
            isolated_edges={cid: self._edges_of(cid, neighbours[cid]) for cid in isolated},
        )

    def _neighbours(self, cid: str, removed: Removed) -> tuple[str, ...]:
        """`cid`'s neighbours, less the edges removed (none for a removed concept)."""
        if cid in removed.concepts:
            return ()
        found = self.neighbours[cid]
        if cid not in removed.touched:
            return found
        gone = removed.edges
        return tuple(other for other in found if edge_key((cid, other)) not in gone)

    def _pairs(self, edges: Iterable[Edge], removed: Removed) -> PairTable:
        """The table of those of `edges` that exist and were not removed, in key order."""
        rows = [self.pair_row[e] for e in sorted(set(edges)) if e in self.pair_row and edge_key(e) not in removed.edges]
        if not rows:
            return PairTable()
        table, at = self.pairs, np.array(rows, dtype=np.int64)
        return PairTable(tuple(table.edges[k] for k in rows), table.counts[at], table.last_us[at])

    def _edges_of(self, cid: str, neighbours: tuple[str, ...]) -> dict[str, PairState]:
        """`cid`'s pairs with `neighbours` (its live ones), neighbour -> pair."""
        pairs = self.isolated_edges.get(cid, {})
        return {other: pairs[other] for other in neighbours if other in pairs}
