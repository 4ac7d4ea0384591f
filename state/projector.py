"""The one way to apply a graph event: live workers and replay both use it.

A partition's state is its store, the typed repository over it and the
in-memory views of its graph versions. Applying an event at log offset `o`:

- `o` at or below the stored offset: a redelivery (e.g. after a crash
  between writing state and committing the consumer offset); skipped.
- a turn already stored in its graph version (same turn_id): a duplicate
  publish; only the offset advances.
- a decay tick or consolidation not later than the graph's last one, or a
  retrieval whose request was applied: a duplicate emission; only the
  offset advances.
- a turn forgotten on request, or a forget request already applied:
  only the offset advances.
- otherwise the core computes the change, and the change, `o` and the
  event (in its graph version's journal) are written in one atomic batch,
  then mirrored into the view.

So every valid event changes the state exactly once, whatever the
delivery guarantees of the transport.

Forgetting (`Forget`) re-folds each graph version that holds a forgotten
turn from its journal, without that turn, into a scratch state with this
same fold, and swaps the version's records for the result: the graph is
then, bit for bit, the one whose log never held the turn (counts, PPMI
inputs, activations with their decay, pruning, topics, passage places).
Its cost is a replay of that graph version.
"""

from __future__ import annotations

from enum import Enum

from processors.codec import decode_graph_event, encode
from processors.events import Consolidate, Decay, Forget, GraphEvent, GraphVersionSwitched, Retrieved, TurnIngested
from processors.graph import GraphMeta, GraphParams, GraphRef, apply_turn, concept_after_retrieval
from processors.pruning import expired_concepts, expired_edges, isolated_by
from state.memory import MemoryStore
from state.repository import NO_OFFSET, Entry, GraphRepository
from state.store import PartitionStore
from state.view import GraphView, load_view


# A graph version's records after forgetting (None: no turn left, so no version).
Refolds = dict[GraphRef, list[tuple[bytes, bytes]] | None]


class Outcome(str, Enum):
    APPLIED = "applied"
    DUPLICATE_TURN = "duplicate_turn"
    DUPLICATE_TICK = "duplicate_tick"
    DUPLICATE_RETRIEVAL = "duplicate_retrieval"
    UNKNOWN_GRAPH = "unknown_graph"
    ALREADY_APPLIED = "already_applied"
    FORGOTTEN_TURN = "forgotten_turn"
    DUPLICATE_FORGET = "duplicate_forget"


class PartitionState:
    """The materialised state of one partition of `emgas.graph-events`."""

    def __init__(self, store: PartitionStore, params: GraphParams) -> None:
        self.repo = GraphRepository(store)
        self.params = params
        self.views: dict[GraphRef, GraphView] = {
            ref: load_view(self.repo, ref, params.decay) for ref in self.repo.graph_refs()
        }
        self._offset = self.repo.applied_offset()

    @property
    def applied_offset(self) -> int:
        return self._offset

    def view(self, graph_id: str, version: int | None = None) -> GraphView | None:
        """The view of `graph_id` at `version` (default: the active one)."""
        return self.views.get(GraphRef(graph_id, version or self.repo.active_version(graph_id)))

    def apply(self, event: GraphEvent, offset: int, refolds: Refolds | None = None) -> Outcome:
        """Apply the event at log `offset`. `refolds`: for a `Forget`, what
        `refolds(event)` returned for this state (None: computed here)."""
        if offset <= self._offset:
            return Outcome.ALREADY_APPLIED
        if isinstance(event, GraphVersionSwitched):
            self.repo.switch_version(event.graph_id, event.version, offset)
            outcome = Outcome.APPLIED
        elif isinstance(event, TurnIngested):
            outcome = self._apply_turn(event, offset)
        elif isinstance(event, Forget):
            outcome = self._apply_forget(event, offset, refolds)
        else:
            outcome = self._apply_dynamics(event, offset)
        self._offset = offset
        return outcome

    def _apply_turn(self, event: TurnIngested, offset: int) -> Outcome:
        ref = GraphRef(event.graph_id, event.graph_version or self.repo.active_version(event.graph_id))
        if self.repo.has_turn(ref, event.turn_id):
            self.repo.mark_offset(offset)
            return Outcome.DUPLICATE_TURN
        if self.repo.is_forgotten(event.graph_id, event.turn_id):
            self.repo.mark_offset(offset)
            return Outcome.FORGOTTEN_TURN
        existing = self.repo.concepts(ref, [c.id for c in event.concepts])
        delta = apply_turn(event, ref.version, existing, self.params, self.repo.meta(ref))
        created = self.repo.write(delta, Entry(offset, encode(event)))
        self._view(ref).apply(delta, created)
        return Outcome.APPLIED

    def _view(self, ref: GraphRef) -> GraphView:
        view = self.views.get(ref)
        if view is None:
            view = self.views[ref] = GraphView(ref, self.params.decay)
        return view

    def _apply_dynamics(self, event: Decay | Consolidate | Retrieved, offset: int) -> Outcome:
        ref = GraphRef(event.graph_id, event.graph_version)
        if ref not in self.views:
            self.repo.mark_offset(offset)
            return Outcome.UNKNOWN_GRAPH
        if isinstance(event, Decay):
            return self._apply_decay(ref, event, offset)
        if isinstance(event, Consolidate):
            return self._apply_consolidate(ref, event, offset)
        return self._apply_retrieval(ref, event, offset)

    def _apply_retrieval(self, ref: GraphRef, event: Retrieved, offset: int) -> Outcome:
        if self.repo.has_retrieval(ref, event.request_id):
            self.repo.mark_offset(offset)
            return Outcome.DUPLICATE_RETRIEVAL
        meta = self.repo.meta(ref)
        existing = self.repo.concepts(ref, [b.id for b in event.boosts])
        boosted = [
            concept_after_retrieval(existing[b.id], b.amount, event.timestamp, meta)
            for b in event.boosts
            if b.id in existing
        ]
        self.repo.write_retrieval(ref, boosted, Entry(offset, encode(event)), event.request_id)
        for concept in boosted:
            self.views[ref].note_concept(concept)
        return Outcome.APPLIED

    def _apply_decay(self, ref: GraphRef, event: Decay, offset: int) -> Outcome:
        """Remove what the tick lists and still qualifies (see `processors.pruning`)."""
        meta = self.repo.meta(ref)
        if meta.decayed_to is not None and event.timestamp <= meta.decayed_to:
            self.repo.mark_offset(offset)
            return Outcome.DUPLICATE_TICK
        view, at, params = self.views[ref], event.timestamp, event.params
        listed = {c.id for c in event.concepts if c.reason == "activation"}
        concepts = [c.id for c in expired_concepts(self.repo.concepts(ref, listed).values(), at, params)]
        listed_edges = self.repo.pairs(ref, [(e.a, e.b) for e in event.edges])
        edges = [(e.a, e.b) for e in expired_edges(listed_edges, at, params)]
        for edge in listed_edges.keys() - set(edges):  # co-occurred since the decision: due later
            view.note_edge(edge, listed_edges[edge])
        isolated = {c.id for c in event.concepts if c.reason == "isolated"}
        concepts += [
            c.id for c in isolated_by(concepts, edges, view.neighbour_ids, isolated.__contains__)
        ]
        meta = meta.model_copy(update={"decayed_to": at, "decay": params})
        self._remove(ref, meta, concepts, edges, Entry(offset, encode(event)))
        if view.needs_compaction():
            self.views[ref] = load_view(self.repo, ref, self.params.decay)
        return Outcome.APPLIED

    def _remove(
        self, ref: GraphRef, meta: GraphMeta, concepts: list[str], edges: list[tuple[str, str]], entry: Entry
    ) -> None:
        """Remove concepts (with their edges and passage links), edges, and
        the passages no remaining concept links to."""
        view = self.views[ref]
        gone = set(concepts)
        all_edges = set(edges)
        sources = []
        for cid in concepts:
            all_edges.update(tuple(sorted((cid, other))) for other in view.neighbour_ids(cid))
            sources += [(cid, turn_id) for turn_id in self.repo.sources(ref, cid)]
        touched = sorted({turn_id for _, turn_id in sources})
        orphaned = [
            turn_id
            for turn_id, passage in self.repo.passages(ref, touched).items()
            if not self.repo.linked(ref, turn_id, [c for c in passage.concept_ids if c not in gone])
        ]
        self.repo.write_removals(ref, meta, concepts, sorted(all_edges), sources, orphaned, entry)
        for a, b in edges:
            if a not in gone and b not in gone:
                view.remove_edge(a, b)
        for cid in concepts:
            view.remove_concept(cid)
        for turn_id in orphaned:
            view.forget_passage(turn_id)

    def _apply_consolidate(self, ref: GraphRef, event: Consolidate, offset: int) -> Outcome:
        meta = self.repo.meta(ref)
        if meta.consolidated_to is not None and event.timestamp <= meta.consolidated_to:
            self.repo.mark_offset(offset)
            return Outcome.DUPLICATE_TICK
        view = self.views[ref]
        topics = []
        for topic in event.topics:
            members = tuple(m for m in topic.members if m in view.index)
            if len(members) >= 2:
                topics.append(topic.model_copy(update={"members": members}))
        meta = meta.model_copy(update={"consolidated_to": event.timestamp})
        self.repo.write_topics(ref, meta, topics, Entry(offset, encode(event)))
        view.set_topics(topics)
        return Outcome.APPLIED

    def refolds(self, event: Forget) -> Refolds:
        """What forgetting `event`'s turns makes of each graph version holding
        one of them: its records re-folded without them, or None where no
        turn is left. Reads the state and writes nothing, so a worker can
        compute it off the event loop and hand it to `apply`."""
        refolds: Refolds = {}
        if event.whole_graph:
            return refolds
        turn_ids = set(event.turn_ids)
        for ref in self.repo.graph_refs():
            if ref.graph_id == event.graph_id and any(self.repo.has_turn(ref, t) for t in turn_ids):
                refolds[ref] = self._refolded(ref, turn_ids)
        return refolds

    def _apply_forget(self, event: Forget, offset: int, refolds: Refolds | None) -> Outcome:
        """Tombstone the turns; swap in the re-folded versions (or, for the
        whole graph, erase every version)."""
        if self.repo.has_forget(event.graph_id, event.request_id):
            self.repo.mark_offset(offset)
            return Outcome.DUPLICATE_FORGET
        if event.whole_graph:
            erased = [ref for ref in self.repo.graph_refs() if ref.graph_id == event.graph_id]
            turn_ids = set().union(*(self.repo.turn_ids(ref) for ref in erased))
            refolded = {}
        else:
            refolds = self.refolds(event) if refolds is None else refolds
            erased = [ref for ref, records in refolds.items() if records is None]  # nothing left
            refolded = {ref: records for ref, records in refolds.items() if records is not None}
            turn_ids = set(event.turn_ids)
        self.repo.write_forgetting(event.graph_id, event.request_id, sorted(turn_ids), refolded, erased, offset)
        for ref in erased:
            self.views.pop(ref, None)
        for ref in refolded:
            self.views[ref] = load_view(self.repo, ref, self.params.decay)
        return Outcome.APPLIED

    def _refolded(self, ref: GraphRef, forgotten: set[str]) -> list[tuple[bytes, bytes]] | None:
        """The records `ref` would have if its journal never held the turns
        `forgotten`: the rest of its journal folded, in order and at the same
        offsets, into a scratch state whose active version is `ref`'s. None:
        no turn is left, so the version would not exist."""
        scratch = PartitionState(MemoryStore(), self.params)
        scratch.repo.switch_version(ref.graph_id, ref.version, NO_OFFSET)
        for entry in self.repo.journal(ref):
            event = decode_graph_event(entry.event)
            if not (isinstance(event, TurnIngested) and event.turn_id in forgotten):
                scratch.apply(event, entry.offset)
        if ref not in scratch.views:
            return None
        return list(scratch.repo.records(ref))

    def close(self) -> None:
        self.repo.store.close()
