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
Edges and neighbours are the graph's node slots (ints), not id pairs: every
listed edge's retention is computed for the whole group at once
(`expired_at`), and what the ticks remove is kept as slot-pair keys.
`tests/unit/state/test_tick_group.py` holds the group to the rule applied tick by
tick.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Collection, Iterable, Iterator, Mapping, Protocol, Sequence

import numpy as np

from emgas.processors.dynamics import DecayParams, microseconds, seconds
from emgas.processors.graph import ConceptState, activation_at
from emgas.processors.pruning import edge_end_at_us, expired_at, isolated_ids, last_mentioned, outlived

Link = tuple[str, str]  # (concept id, turn id)
_NO_INTS = np.zeros(0, dtype=np.int64)


class ListedConcept(Protocol):
    id: str
    reason: str


class ListedEdge(Protocol):
    a: str
    b: str


class PruningTick(Protocol):
    """What a decision reads of a tick: a `Decay`, or the fold's row of one."""

    @property
    def timestamp(self) -> datetime: ...

    @property
    def params(self) -> DecayParams: ...

    @property
    def concepts(self) -> Sequence[ListedConcept]: ...

    @property
    def edges(self) -> Sequence[ListedEdge]: ...


@dataclass(frozen=True)
class ListedEdges:
    """The edges each tick of a group lists that exist before its first
    tick, as node slots: tick k's at [starts[k], starts[k + 1]), each once
    as listed (a tick may list an edge both ways round: then twice), in
    (a, b) id order, with its count c(a, b), its last co-occurrence (µs
    since 1970) and its key (`slot_key` of its ends)."""

    starts: list[int] = field(default_factory=lambda: [0])
    a: list[int] = field(default_factory=list)
    b: list[int] = field(default_factory=list)
    keys: list[int] = field(default_factory=list)
    counts: np.ndarray = field(default_factory=lambda: _NO_INTS)
    last_us: np.ndarray = field(default_factory=lambda: _NO_INTS)


@dataclass(frozen=True)
class GroupReads:
    """What the ticks of a group read, as it is before the first of them:
    the records of the concepts they list (`concepts`, those held) and
    their node slots (`slots`; `ids`: each slot's id, `size` slots in all),
    the listed edges that exist (`edges`), each listed concept's neighbours
    (slots), the turns of its passages (`sources`), the concepts each of
    those passages names (`passages`) and, per passage, those of them that
    link to it (`linked`: the (concept, turn) links that exist); per concept
    listed as isolated (its slot), each neighbour's (count c(a, b), last
    co-occurrence µs)."""

    concepts: Mapping[str, ConceptState] = field(default_factory=dict)
    slots: Mapping[str, int] = field(default_factory=dict)
    ids: Sequence[str] = ()
    size: int = 0
    edges: ListedEdges = field(default_factory=ListedEdges)
    neighbours: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    sources: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    passages: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    linked: Mapping[str, Collection[str]] = field(default_factory=dict)
    isolated_edges: Mapping[int, Mapping[int, tuple[int, int]]] = field(default_factory=dict)


def slot_key(a: int, b: int, size: int) -> int:
    """One int for the edge between slots a and b, either way round (size: the slots in all)."""
    return a * size + b if a < b else b * size + a


def slot_keys(a: np.ndarray, b: np.ndarray, size: int) -> np.ndarray:
    """`slot_key` of each (a[k], b[k])."""
    return np.minimum(a, b) * size + np.maximum(a, b)


@dataclass(frozen=True)
class TickDecision:
    """What one tick removes (`evolve_decay`'s writes but its meta's):
    `concepts` (RemoveConcept, in its order: for their activation in id
    order, then the isolated ones), `edges` (RemovePairs: the expired ones
    and those of the removed concepts, as `slot_key`s), `links` (RemoveLink,
    in order), `orphaned` (PrunePassage: passages no remaining concept
    links to); `kept`: the listed edges that exist and are not due, as
    their places in `GroupReads.edges` (KeepEdges: their due times move later)."""

    concepts: tuple[str, ...]
    edges: frozenset[int]
    links: tuple[Link, ...]
    orphaned: tuple[str, ...]
    kept: tuple[int, ...]


class Removed:
    """What the ticks decided so far remove: concepts (ids and slots), edges
    (`slot_key`s), links (as the concepts still linking to each passage they
    left), and the ends of the removed edges (their neighbours changed)."""

    def __init__(self, reads: GroupReads) -> None:
        self.size = reads.size
        self.slots = reads.slots
        self.concepts: set[str] = set()
        self.concept_slots: set[int] = set()
        self.edges: set[int] = set()
        self.touched: set[int] = set()
        self._read_linked = reads.linked
        self._linked: dict[str, set[str]] = {}  # the passages links were removed from: who still links

    def still_linked(self, turn_id: str) -> Collection[str]:
        """The concepts that link to the held passage `turn_id`, less the links removed."""
        linked = self._linked.get(turn_id)
        return self._read_linked[turn_id] if linked is None else linked

    def add(self, decision: TickDecision) -> None:
        size, touched = self.size, self.touched
        self.edges |= decision.edges
        for key in decision.edges:
            touched.add(key // size)
            touched.add(key % size)
        self.concepts.update(decision.concepts)
        self.concept_slots.update(self.slots[cid] for cid in decision.concepts)
        for cid, turn_id in decision.links:
            linked = self._linked.get(turn_id)
            if linked is None:
                read = self._read_linked.get(turn_id)
                if read is None:  # a passage not held: no link to it counts
                    continue
                linked = self._linked[turn_id] = set(read)
            linked.discard(cid)


def decide_ticks(ticks: Iterable[PruningTick], reads: GroupReads) -> Iterator[TickDecision]:
    """Each tick's decision in turn, on `reads` less what the ticks before it removed."""
    ticks = list(ticks)
    expired = _expired_flags(ticks, reads.edges)
    removed = Removed(reads)
    for k, tick in enumerate(ticks):
        decision = decide_tick(tick, reads, removed, _listed(k, reads.edges, expired))
        removed.add(decision)
        yield decision


def _expired_flags(ticks: list[PruningTick], edges: ListedEdges) -> list[bool]:
    """Per listed edge of the group, whether its retention at its tick's
    time is below its tick's θ_e (`expired_at`; ticks only remove, so an
    edge's count and last co-occurrence are those read before the first)."""
    starts = edges.starts
    flags: list[bool] = []
    k = 0
    while k < len(ticks):  # a run of ticks with the same parameters at once
        end = k + 1
        while end < len(ticks) and ticks[end].params == ticks[k].params:
            end += 1
        lo, hi = starts[k], starts[end]
        at_us = np.repeat(
            np.array([microseconds(t.timestamp) for t in ticks[k:end]], dtype=np.int64), np.diff(starts[k:end + 1]),
        )
        flags += expired_at(edges.counts[lo:hi], edges.last_us[lo:hi], at_us, ticks[k].params).tolist()
        k = end
    return flags


def _listed(k: int, edges: ListedEdges, expired: list[bool]) -> Iterator[tuple[int, int, bool]]:
    """Tick k's listed edges that exist: (place in `edges`, key, expired)."""
    lo, hi = edges.starts[k], edges.starts[k + 1]
    return zip(range(lo, hi), edges.keys[lo:hi], expired[lo:hi])


def decide_tick(
    tick: PruningTick, reads: GroupReads, removed: Removed, listed_edges: Iterable[tuple[int, int, bool]],
) -> TickDecision:
    """`evolve_decay` of `tick` at t on the group's reads less `removed`: of
    what it lists, the concepts whose base activation at t is below θ
    (`activation_at`: A · factor(t − t_ref), unitless), the edges whose
    retention at t is below θ_e (R = exp(−Δt / (S · c(a, b))), Δt in s:
    `listed_edges`, each with whether it is; the others kept), the concepts
    listed as isolated that those removals leave without an edge (unless
    they outlived their edges), the edges and links of the removed
    concepts, and the passages none of the remaining concepts links to."""
    decay, slots, held_records, gone_concepts = tick.params, reads.slots, reads.concepts, removed.concepts
    held = {}
    activation: dict[str, None] = {}  # each once, as the rule
    isolated_listed: dict[str, None] = {}
    for c in tick.concepts:
        cid = c.id
        if cid in held_records and cid not in gone_concepts:
            held[cid] = held_records[cid]
        (activation if c.reason == "activation" else isolated_listed)[cid] = None
    concepts: list[str] = []
    if activation:
        at, threshold = tick.timestamp, decay.concept_threshold
        listed = sorted(cid for cid in activation if cid in held)
        concepts = [cid for cid in listed if activation_at(held[cid], at, decay) < threshold]
    gone = removed.edges
    expired: list[int] = []
    kept: list[int] = []
    for j, key, due in listed_edges:
        if key not in gone:
            (expired if due else kept).append(j)
    neighbours = {slots[cid]: _neighbours(slots[cid], reads, removed) for cid in {**activation, **isolated_listed}
                  if cid in slots}
    pruned = {slots[cid]: held[cid] for cid in concepts}
    edges, ids = reads.edges, reads.ids
    isolated = {
        slots[cid] for cid in isolated_listed if cid in slots and not _outlived(cid, held, neighbours, reads, pruned, decay)
    }
    if isolated:
        lost = isolated_ids(pruned, [(edges.a[j], edges.b[j]) for j in expired],
                            lambda slot: neighbours.get(slot, ()), isolated.__contains__)
        concepts += sorted(ids[slot] for slot in lost)  # in id order, as the rule's
    all_edges = {edges.keys[j] for j in expired}
    links: list[Link] = []
    size, sources = reads.size, reads.sources
    for cid in concepts:
        slot = slots[cid]
        all_edges.update(slot_key(slot, other, size) for other in neighbours.get(slot, ()))
        if cid not in gone_concepts:
            links += [(cid, turn_id) for turn_id in sources.get(cid, ())]
    orphaned = _orphaned(links, concepts, reads, removed) if links else ()
    return TickDecision(tuple(concepts), frozenset(all_edges), tuple(links), orphaned, tuple(kept))


def _neighbours(slot: int, reads: GroupReads, removed: Removed) -> tuple[int, ...]:
    """The slot's neighbours less the edges removed (none for a removed concept)."""
    if slot in removed.concept_slots:
        return ()
    found = reads.neighbours.get(slot, ())
    if slot not in removed.touched:
        return found
    gone, size = removed.edges, reads.size
    return tuple(other for other in found if slot_key(slot, other, size) not in gone)


def _outlived(
    cid: str, held: Mapping[str, ConceptState], neighbours: Mapping[int, tuple[int, ...]], reads: GroupReads,
    pruned: Mapping[int, ConceptState], decay: DecayParams,
) -> bool:
    """`outlived_its_edges` of a listed concept's live edges (its neighbours
    less what the group removed), each with its partner where this tick
    prunes it for its activation. Where the tick prunes none, no end can
    raise or be NaN (`edge_end_at_us` without a partner: a finite time plus
    a lifetime, finite or inf), so the first end not before the newest
    mention decides (`outlived` takes their latest); with a partner pruned,
    every end is computed, in order, as the rule computes them (one may
    raise: a power law's time to θ past a float's range)."""
    concept = held.get(cid)
    slot = reads.slots[cid]
    pairs = reads.isolated_edges.get(slot, {})
    if pruned or concept is None:
        lost = (pairs[other] + (other,) for other in neighbours.get(slot, ()) if other in pairs)
        return outlived(concept, (edge_end_at_us(count, last, pruned.get(other), decay) for count, last, other in lost))
    mentioned = last_mentioned(concept)
    if mentioned is None:
        return False
    before = seconds(mentioned)
    some = False
    for other in neighbours.get(slot, ()):
        pair = pairs.get(other)
        if pair is not None:
            if not edge_end_at_us(pair[0], pair[1], None, decay) < before:
                return False
            some = True
    return some


def _orphaned(links: list[Link], concepts: list[str], reads: GroupReads, removed: Removed) -> tuple[str, ...]:
    """The turns of `links` whose passage (held) no concept but the removed
    ones links to any more, in turn id order."""
    gone = set(concepts)
    held = reads.passages
    return tuple(
        turn_id for turn_id in sorted({turn_id for _, turn_id in links})
        if turn_id in held and gone.issuperset(removed.still_linked(turn_id))
    )
