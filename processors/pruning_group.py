"""Pruning ticks with no other event between them, decided one after another
on what the group read once.

`evolve_decay` decides one tick from its slice (`processors.evolve.Slice`).
A group of ticks (the pruning ticks a run of turns applies ahead of its
turns: `state.tick_group`) reads once what all of them list and hang on
it (`GroupReads`), and each tick is decided here on that, less what the
ticks before it removed: ticks only remove, so that is the slice the rule
would read once the ticks before it were applied. The decisions are the
rule's, made with the same functions of `processors.pruning` on the same
values in the same order; only the objects around them are gone (a
`Slice`, a write per removal, a pruned concept's model), as a group of a
thousand ticks made a few dozen of them per tick around a few comparisons.
`tests/unit/test_tick_group.py` holds the group to the rule applied tick by
tick.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator, Mapping, Protocol, Sequence

from emgas.processors.dynamics import DecayParams, microseconds
from emgas.processors.graph import ConceptState, activation_at
from emgas.processors.pruning import Edge, PairState, edge_expired, edge_key, isolated_ids, lost_edges, outlived_its_edges

Link = tuple[str, str]  # (concept id, turn id)


class ListedConcept(Protocol):
    id: str
    reason: str


class ListedEdge(Protocol):
    a: str
    b: str


class PruningTick(Protocol):
    """What a decision reads of a tick: a `Decay`, or the fold's row of one."""

    @property
    def timestamp(self): ...  # noqa: ANN201 - a datetime

    @property
    def params(self) -> DecayParams: ...

    @property
    def concepts(self) -> Sequence[ListedConcept]: ...

    @property
    def edges(self) -> Sequence[ListedEdge]: ...


@dataclass(frozen=True)
class GroupReads:
    """What the ticks of a group read, as it is before the first of them:
    the records of the concepts they list (`concepts`, those held), each
    listed concept's neighbours, the turns of its passages (`sources`), the
    concepts each of those passages names (`passages`) and which of those
    (concept, turn) links exist (`links`); the listed edges that exist, as
    listed (either way round), with (count c(a, b), last co-occurrence µs);
    the edges (neighbour -> pair) of each concept listed as isolated."""

    concepts: Mapping[str, ConceptState] = field(default_factory=dict)
    pairs: Mapping[Edge, tuple[int, int]] = field(default_factory=dict)
    neighbours: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    sources: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    passages: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    links: frozenset[Link] = frozenset()
    isolated_edges: Mapping[str, Mapping[str, PairState]] = field(default_factory=dict)


@dataclass(frozen=True)
class TickDecision:
    """What one tick removes (`evolve_decay`'s writes but its meta's):
    `concepts` (RemoveConcept, in its order: for their activation in id
    order, then the isolated ones), `edges` (RemovePairs: the expired ones
    and those of the removed concepts, sorted), `links` (RemoveLink, in
    order), `orphaned` (PrunePassage: passages no remaining concept links
    to); `kept`: the listed edges that exist and are not due, with (count,
    last µs) (KeepEdges: their due times move later)."""

    concepts: tuple[str, ...]
    edges: tuple[Edge, ...]
    links: tuple[Link, ...]
    orphaned: tuple[str, ...]
    kept: tuple[tuple[Edge, int, int], ...]


class Removed:
    """What the ticks decided so far remove: concepts, edges (by `edge_key`),
    links, and the ends of the removed edges (their neighbours changed)."""

    def __init__(self) -> None:
        self.concepts: set[str] = set()
        self.edges: set[Edge] = set()
        self.links: set[Link] = set()
        self.touched: set[str] = set()

    def add(self, decision: TickDecision) -> None:
        for edge in decision.edges:
            self.edges.add(edge_key(edge))
            self.touched.update(edge)
        self.concepts.update(decision.concepts)
        self.links.update(decision.links)


def decide_ticks(ticks: Iterable[PruningTick], reads: GroupReads) -> Iterator[TickDecision]:
    """Each tick's decision in turn, on `reads` less what the ticks before it removed."""
    removed = Removed()
    for tick in ticks:
        decision = decide_tick(tick, reads, removed)
        removed.add(decision)
        yield decision


def decide_tick(tick: PruningTick, reads: GroupReads, removed: Removed) -> TickDecision:
    """`evolve_decay` of `tick` at t on the group's reads less `removed`: of
    what it lists, the concepts whose base activation at t is below θ
    (`activation_at`: A · factor(t − t_ref), unitless), the edges whose
    retention at t is below θ_e (R = exp(−Δt / (S · c(a, b))), Δt in s;
    the others kept), the concepts listed as isolated that those removals
    leave without an edge (unless they outlived their edges), the edges and
    links of the removed concepts, and the passages none of the remaining
    concepts links to."""
    at, decay = tick.timestamp, tick.params
    held = {c.id: reads.concepts[c.id] for c in tick.concepts if c.id in reads.concepts and c.id not in removed.concepts}
    activation = dict.fromkeys(c.id for c in tick.concepts if c.reason == "activation")  # each once, as the rule
    listed = sorted((held[cid] for cid in activation if cid in held), key=_id)
    threshold = decay.concept_threshold
    concepts = [c.id for c in listed if activation_at(c, at, decay) < threshold]
    edges, kept = _expired_edges(tick, reads, removed, at, decay)
    neighbours = {cid: _neighbours(cid, reads, removed) for cid in {c.id for c in tick.concepts}}
    pruned = {cid: held[cid] for cid in concepts}
    isolated = {
        c.id for c in tick.concepts
        if c.reason == "isolated" and not outlived_its_edges(held.get(c.id), _lost(c.id, neighbours, reads, pruned), decay)
    }
    concepts += isolated_ids(concepts, edges, lambda cid: neighbours.get(cid, ()), isolated.__contains__)
    all_edges = set(edges)
    links: list[Link] = []
    for cid in concepts:
        all_edges.update((cid, other) if cid < other else (other, cid) for other in neighbours.get(cid, ()))
        if cid not in removed.concepts:
            links += [(cid, turn_id) for turn_id in reads.sources.get(cid, ())]
    return TickDecision(tuple(concepts), tuple(sorted(all_edges)), tuple(links), _orphaned(links, concepts, reads, removed),
                        tuple(kept))


def _expired_edges(
    tick: PruningTick, reads: GroupReads, removed: Removed, at, decay: DecayParams,  # noqa: ANN001 - a datetime
) -> tuple[list[Edge], list[tuple[Edge, int, int]]]:
    """The listed edges that exist, in order: those whose retention at `at`
    is below θ_e (`edge_expired`), and the others with (count, last µs)."""
    at_us, pairs, gone = microseconds(at), reads.pairs, removed.edges
    expired: list[Edge] = []
    kept: list[tuple[Edge, int, int]] = []
    for edge in sorted({(e.a, e.b) for e in tick.edges}):
        pair = pairs.get(edge)
        if pair is None or edge_key(edge) in gone:
            continue
        count, last_us = pair
        if edge_expired(count, last_us, at_us, decay):
            expired.append(edge)
        else:
            kept.append((edge, count, last_us))
    return expired, kept


def _neighbours(cid: str, reads: GroupReads, removed: Removed) -> tuple[str, ...]:
    """`cid`'s neighbours less the edges removed (none for a removed concept)."""
    if cid in removed.concepts:
        return ()
    found = reads.neighbours.get(cid, ())
    if cid not in removed.touched:
        return found
    gone = removed.edges
    return tuple(other for other in found if edge_key((cid, other)) not in gone)


def _lost(
    cid: str, neighbours: Mapping[str, tuple[str, ...]], reads: GroupReads, pruned: Mapping[str, ConceptState],
) -> list[tuple[PairState, ConceptState | None]]:
    """`lost_edges` of `cid`'s live edges (its neighbours less what the group removed)."""
    pairs = reads.isolated_edges.get(cid, {})
    return lost_edges({other: pairs[other] for other in neighbours.get(cid, ()) if other in pairs}, pruned)


def _orphaned(links: list[Link], concepts: list[str], reads: GroupReads, removed: Removed) -> tuple[str, ...]:
    """The turns of `links` whose passage (held) no concept but the removed
    ones links to any more, in turn id order."""
    gone = set(concepts)
    unlinked, exists = removed.links, reads.links
    orphaned = []
    for turn_id in sorted({turn_id for _, turn_id in links}):
        named = reads.passages.get(turn_id)
        if named is not None and not any(
            (c, turn_id) in exists and (c, turn_id) not in unlinked for c in named if c not in gone
        ):
            orphaned.append(turn_id)
    return tuple(orphaned)


def _id(concept: ConceptState) -> str:
    return concept.id
