"""Applying a graph event: one pure `evolve(event, slice, params) -> Writes` per type.

The caller (`state.projector`, through the type's rule in the one table
of rules, `state.rules.RULES`, which pairs each type with its evolve here)
checks idempotency (offset, duplicate turn, tick,
retrieval, forget), loads the `Slice` of the graph version the event
needs, calls `evolve`, and applies the writes it returns
(`processors.writes`) to the store and the in-memory graph. Every decision
about what changes is made here, from the event and the slice alone: no
store, no clock, no environment. So the same log gives the same graph,
whoever folds it and however the writes are batched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from emgas.processors.events import Consolidate, Decay, Forget, GraphVersionSwitched, Retrieved, TurnIngested
from emgas.processors.graph import (
    ConceptState, GraphMeta, GraphParams, GraphRef, Passage, concept_after_mention, concept_after_retrieval, replaced,
)
from emgas.processors.pruning import (
    PairState, PairTable, expired_concepts, expired_mask, isolated_ids, lost_edges, outlived_its_edges, pair_state,
)
from emgas.processors.writes import (
    AddPassage, CoOccur, Forgetting, KeepEdges, MarkRetrieval, PrunePassage, PutConcept, PutMeta, Refolded,
    Register, RemoveConcept, RemoveLink, RemovePairs, SetTopics, SwitchVersion, Writes,
)


@dataclass(frozen=True)
class Slice:
    """The part of one graph version an event needs, as stored before it.

    Only what the event names is loaded: `concepts` and `pairs` hold the
    records found (absent: none stored; a turn needs no pairs: its
    `CoOccur` write counts them where they are kept); `neighbours`, `sources` (concept ->
    turn ids of its passages), `passages` (turn id -> the concepts its
    passage names) and `links` (the (concept, turn) links that exist) cover
    the concepts a tick lists; `present`: the
    concepts of the graph among those a consolidation names, `topic_ids`
    the version's topics before it; `isolated_edges` the edges (neighbour ->
    pair) of each concept a tick lists as isolated (and `concepts` its
    record). A forget sees
    the graph's `versions`, their `turn_ids` and the `refolds` the caller
    computed (see `state.projector.PartitionState.refolds`).
    """

    ref: GraphRef
    meta: GraphMeta = GraphMeta()
    concepts: Mapping[str, ConceptState] = field(default_factory=dict)
    pairs: PairTable = field(default_factory=PairTable)
    neighbours: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    sources: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    passages: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    links: frozenset[tuple[str, str]] = frozenset()
    present: frozenset[str] = frozenset()
    isolated_edges: Mapping[str, Mapping[str, PairState]] = field(default_factory=dict)
    topic_ids: tuple[str, ...] = ()
    versions: tuple[GraphRef, ...] = ()
    turn_ids: Mapping[GraphRef, frozenset[str]] = field(default_factory=dict)
    refolds: Mapping[GraphRef, Refolded | None] = field(default_factory=dict)


def pair_after(old: PairState | None, at) -> PairState:  # noqa: ANN001 - a datetime
    """A co-occurrence at event time `at`: c(x, y) + 1, last = max(last, at)
    (the first one: count 1, last = at)."""
    if old is None:
        return pair_state(1, at)
    return pair_state(old.count + 1, old.last if old.last > at else at)


def evolve_turn(event: TurnIngested, s: Slice, params: GraphParams) -> Writes:
    """A turn not yet applied: each concept mentioned (`concept_after_mention`),
    +1 on every pair of its distinct concepts (`CoOccur`, see `pair_after`),
    N + 1, clock = max, first_seen = min, and its passage at place `seq` = N
    (0-based, log order)."""
    at, meta = event.timestamp, s.meta
    held = s.concepts.get
    concepts = [
        PutConcept(concept_after_mention(held(c.id), c.id, c.text, c.importance, at, params, meta))
        for c in event.concepts
    ]
    ids = tuple(sorted(c.id for c in event.concepts))
    passage = Passage(
        turn_id=event.turn_id, speaker=event.speaker, text=event.text, timestamp=at,
        session_id=event.session_id, metadata=event.metadata, concept_ids=ids, seq=meta.turns,
    )
    clock = at if meta.clock is None else max(meta.clock, at)
    first_seen = at if meta.first_seen is None else min(meta.first_seen, at)
    meta = replaced(meta, {"turns": meta.turns + 1, "clock": clock, "first_seen": first_seen})
    return (Register(), PutMeta(meta), *concepts, AddPassage(passage), CoOccur(ids, at))


def evolve_switch(event: GraphVersionSwitched, s: Slice, params: GraphParams) -> Writes:
    """From here on the graph is served from and ingests into `event.version`."""
    return (SwitchVersion(event.version),)


def evolve_retrieved(event: Retrieved, s: Slice, params: GraphParams) -> Writes:
    """Each boosted concept still in the graph: `concept_after_retrieval`
    (A + on_grid(amount), retrievals + 1); the request is marked applied."""
    boosted = tuple(
        PutConcept(concept_after_retrieval(s.concepts[b.id], b.amount, event.timestamp, s.meta, params))
        for b in event.boosts
        if b.id in s.concepts
    )
    return (*boosted, MarkRetrieval(event.request_id))


def after_tick(meta: GraphMeta, tick: Decay) -> GraphMeta:
    """The meta a decay tick leaves: decayed_to = its time, decay = its parameters."""
    return replaced(meta, {"decayed_to": tick.timestamp, "decay": tick.params})


def evolve_decay(event: Decay, s: Slice, params: GraphParams) -> Writes:
    """A tick at t: of what the event lists, what still qualifies at t
    (`processors.pruning`: a concept reinforced since the decision is
    kept, and so is an isolated one whose lost edges would all have gone
    before its newest mention), with the edges of removed concepts, their passage links, and the
    passages no remaining concept links to. meta: decayed_to = t."""
    at, decay = event.timestamp, event.params
    # Each concept once: a tick that lists one twice removes it once.
    listed = [s.concepts[cid] for cid in dict.fromkeys(c.id for c in event.concepts if c.reason == "activation")
              if cid in s.concepts]
    concepts = [c.id for c in expired_concepts(listed, at, decay)]
    expired = expired_mask(s.pairs, at, decay)
    edges = [edge for edge, gone in zip(s.pairs.edges, expired.tolist()) if gone]
    kept = s.pairs.where(~expired)
    pruned = {cid: s.concepts[cid] for cid in concepts}
    isolated = {
        c.id for c in event.concepts
        if c.reason == "isolated"
        and not outlived_its_edges(s.concepts.get(c.id), lost_edges(s.isolated_edges.get(c.id, {}), pruned), decay)
    }
    neighbours = lambda cid: s.neighbours.get(cid, ())  # noqa: E731
    concepts += isolated_ids(concepts, edges, neighbours, isolated.__contains__)
    gone = set(concepts)
    all_edges = set(edges)
    links = []
    for cid in concepts:
        all_edges.update((cid, other) if cid < other else (other, cid) for other in neighbours(cid))
        links += [(cid, turn_id) for turn_id in s.sources.get(cid, ())]
    touched = sorted({turn_id for _, turn_id in links})
    orphaned = tuple(
        turn_id
        for turn_id in touched
        if turn_id in s.passages
        and not any((c, turn_id) in s.links for c in s.passages[turn_id] if c not in gone)
    )
    return (
        PutMeta(after_tick(s.meta, event)),
        *((KeepEdges(kept),) if len(kept) else ()),
        *((RemovePairs(tuple(sorted(all_edges))),) if all_edges else ()),
        *(RemoveConcept(cid) for cid in concepts),
        *(RemoveLink(cid, turn_id) for cid, turn_id in links),
        *(PrunePassage(turn_id) for turn_id in orphaned),
    )


def evolve_consolidate(event: Consolidate, s: Slice, params: GraphParams) -> Writes:
    """The event's topics replace the version's, each keeping only members
    still in the graph, and only if two or more are left."""
    topics = []
    for topic in event.topics:
        members = tuple(m for m in topic.members if m in s.present)
        if len(members) == len(topic.members) >= 2:
            topics.append(topic)  # every member still here: the topic as it is (a copy would equal it)
        elif len(members) >= 2:
            topics.append(topic.model_copy(update={"members": members}))
    meta = replaced(s.meta, {"consolidated_to": event.timestamp})
    return (PutMeta(meta), SetTopics(tuple(topics), s.topic_ids))


def evolve_forget(event: Forget, s: Slice, params: GraphParams) -> Writes:
    """Turns: tombstoned; each version holding one is replaced by its re-fold
    without them, or erased if none of its turns is left. The whole graph:
    every version erased, every turn id it held tombstoned."""
    if event.whole_graph:
        erased = s.versions
        tombstones = set().union(*(s.turn_ids.get(ref, frozenset()) for ref in erased))
        refolded: dict[GraphRef, Refolded] = {}
    else:
        erased = tuple(ref for ref, records in s.refolds.items() if records is None)
        refolded = {ref: records for ref, records in s.refolds.items() if records is not None}
        tombstones = set(event.turn_ids)
    forgetting = Forgetting(
        graph_id=event.graph_id,
        request_id=event.request_id,
        tombstones=tuple(sorted(tombstones)),
        refolded=refolded,
        erased=tuple(erased),
        clear_active=bool(erased) and all(ref in erased for ref in s.versions),
    )
    return (forgetting,)
