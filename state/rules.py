"""One rule per graph event type: its guard, the slice it loads and its evolve, together.

The fold (`PartitionState.apply` and `apply_batch`) looks the event's type
up here and nowhere else; a rule sees the state only as a `FoldState`:

- `guard(state, event, ref, meta)`: why the event changes nothing but the
  offset (an `Outcome`), or None when it applies;
- `load(state, event, ref, meta, refolds)`: the `Slice` of the graph
  version the event needs, read from the store and the in-memory graph;
- `evolve(event, slice, params)`: the pure rule of `processors.evolve`,
  which returns the writes (`processors.writes`) to apply;
- the facts the fold needs of the type: which graph version the event
  names (`version_of`), how its writes reach the in-memory graph
  (`views`), whether it is journaled and whether it may leave the graph
  to be compacted.

Every per-type fact of a graph event is here; the log's own records
(identity, snapshots, checkpoints, sealed records) have their table beside
the fold that applies them (`state.projector.LOG_RECORDS`).

A type with no rule here fails loudly (`UnregisteredEvent`) before its
guard, so a new event type cannot be skipped or half-applied in silence.
Adding one: its schema in `processors.events`, its evolve in
`processors.evolve`, its rule here (and a write type if it writes
something new).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any, Callable, Mapping, Protocol

from emgas.processors.events import Consolidate, Decay, Forget, GraphVersionSwitched, Retrieved, TurnIngested
from emgas.processors.evolve import (
    Slice, evolve_consolidate, evolve_decay, evolve_forget, evolve_retrieved, evolve_switch, evolve_turn,
)
from emgas.processors.fold_codec import ConsolidateRow, DecayRow, TurnRow
from emgas.processors.graph import GraphMeta, GraphParams, GraphRef
from emgas.processors.writes import Refolded, Writes
from emgas.state.repository import GraphRepository
from emgas.state.view_cache import Views

# A graph version's records after forgetting (None: no turn left, so no version).
Refolds = dict[GraphRef, Refolded | None]


class FoldState(Protocol):
    """What a rule reads of a partition's state: its records, its graphs in
    memory and, for a forget, what re-folding leaves. The fold
    (`state.projector.PartitionState`) is one; the rules never import it."""

    repo: GraphRepository
    views: Views

    def refolds(self, event: Forget) -> Refolds:
        """Each graph version holding one of the event's turns, re-folded without them."""
        ...


class Outcome(str, Enum):
    APPLIED = "applied"
    DUPLICATE_TURN = "duplicate_turn"
    DUPLICATE_TICK = "duplicate_tick"
    DUPLICATE_RETRIEVAL = "duplicate_retrieval"
    UNKNOWN_GRAPH = "unknown_graph"
    ALREADY_APPLIED = "already_applied"
    FORGOTTEN_TURN = "forgotten_turn"
    DUPLICATE_FORGET = "duplicate_forget"
    REJECTED = "rejected"
    LOG_STARTED = "log_started"
    LOG_STARTED_AGAIN = "log_started_again"
    SNAPSHOT_STARTED = "snapshot_started"
    SNAPSHOT_PART = "snapshot_part"
    SNAPSHOT_COMPLETED = "snapshot_completed"
    SNAPSHOT_IGNORED = "snapshot_ignored"
    CHECKPOINT = "checkpoint"
    ERASED = "erased"  # a sealed record whose data key is gone (`processors.sealing`)


# The event parameter is Any: each rule's functions take its own event type,
# and RULES pairs every type with the functions written for it.
Guard = Callable[[FoldState, Any, GraphRef, GraphMeta], Outcome | None]
Load = Callable[[FoldState, Any, GraphRef, GraphMeta, Refolds | None], Slice]
Evolve = Callable[[Any, Slice, GraphParams], Writes]
VersionOf = Callable[[Any], "int | None"]


class ViewChange(str, Enum):
    """How an applied event's writes reach the in-memory graph (`state.view`)."""

    INCREMENTAL = "incremental"  # applied to its version's view, write by write
    NONE = "none"  # none: a version switch (the version's view is loaded when first read)
    SWAP = "swap"  # a forget: each version it re-folded is loaded again, each it erased dropped


def graph_version(event: Any) -> int | None:
    """The version an event names in its `graph_version` (None: the graph's active one)."""
    return event.graph_version


def active_version(event: object) -> None:
    """An event of a whole graph names no version: it applies to the graph's active one."""
    return None


def switched_to(event: GraphVersionSwitched) -> int:
    """A version switch applies to the version it switches to."""
    return event.version


@dataclass(frozen=True)
class Rule:
    guard: Guard
    load: Load
    evolve: Evolve
    journaled: bool = True  # kept in its version's journal (re-folded by a forget)
    compacts: bool = False  # may leave the graph with enough dead slots to rebuild it
    views: ViewChange = ViewChange.INCREMENTAL
    version_of: VersionOf = graph_version  # the graph version the event applies to


class UnregisteredEvent(TypeError):
    """A graph event type with no rule: a missing rule, never a poison event."""

    def __init__(self, event: object) -> None:
        super().__init__(
            f"no rule registered for the graph event type {type(event).__name__} "
            "(state.rules.RULES: its guard, slice and evolve)"
        )


# An event decoded for the fold as a row (`processors.fold_codec`) has its
# model's rule: a tick's guard, slice and evolve read only fields its row
# has; a turn's and a consolidation's rows are folded in runs
# (`state.turn_run`), which read of their rule only what rows have.
_MODEL_OF_ROW: Mapping[type, type] = {DecayRow: Decay, TurnRow: TurnIngested, ConsolidateRow: Consolidate}


def _rule_of(event: object) -> Rule | None:
    """The rule of `event`'s type (of a row: its model's), None if there is none."""
    return RULES.get(_MODEL_OF_ROW.get(type(event), type(event)))


def rule_for(event: object) -> Rule:
    """The rule of `event`'s type (of a row: its model's); UnregisteredEvent if there is none."""
    rule = _rule_of(event)
    if rule is None:
        raise UnregisteredEvent(event)
    return rule


def evolve(event: object, slice_: Slice, params: GraphParams) -> Writes:
    """The writes `event` makes to the graph version in `slice_`, in order:
    its rule's evolve (UnregisteredEvent for a type with no rule)."""
    return rule_for(event).evolve(event, slice_, params)


def version_named(event: object) -> int | None:
    """The graph version `event` applies to (None: the graph's active one):
    its rule's `version_of`; a record of the log's own that names a graph
    (a snapshot's), its `graph_version`."""
    rule = _rule_of(event)
    return getattr(event, "graph_version", None) if rule is None else rule.version_of(event)


# -- guards -------------------------------------------------------------------


def _turn_guard(state: FoldState, event: TurnIngested, ref: GraphRef, meta: GraphMeta) -> Outcome | None:
    if state.repo.has_turn(ref, event.turn_id):
        return Outcome.DUPLICATE_TURN
    if state.repo.is_forgotten(event.graph_id, event.turn_id):
        return Outcome.FORGOTTEN_TURN
    return None


def _forget_guard(state: FoldState, event: Forget, ref: GraphRef, meta: GraphMeta) -> Outcome | None:
    return Outcome.DUPLICATE_FORGET if state.repo.has_forget(event.graph_id, event.request_id) else None


def _always(state: FoldState, event: object, ref: GraphRef, meta: GraphMeta) -> Outcome | None:
    return None


def _retrieval_guard(state: FoldState, event: Retrieved, ref: GraphRef, meta: GraphMeta) -> Outcome | None:
    if ref not in state.views:
        return Outcome.UNKNOWN_GRAPH
    return Outcome.DUPLICATE_RETRIEVAL if state.repo.has_retrieval(ref, event.request_id) else None


def _tick_guard(last_of: Callable[[GraphMeta], datetime | None]) -> Guard:
    """A tick of a known version, later than the last one of its kind."""

    def guard(state: FoldState, event: Decay | Consolidate, ref: GraphRef, meta: GraphMeta) -> Outcome | None:
        if ref not in state.views:
            return Outcome.UNKNOWN_GRAPH
        last = last_of(meta)
        return Outcome.DUPLICATE_TICK if last is not None and event.timestamp <= last else None

    return guard


# -- slices ---------------------------------------------------------------------


def _meta_only(state: FoldState, event: object, ref: GraphRef, meta: GraphMeta, refolds: Refolds | None) -> Slice:
    return Slice(ref=ref, meta=meta)


def _turn_slice(state: FoldState, event: TurnIngested, ref: GraphRef, meta: GraphMeta,
                refolds: Refolds | None) -> Slice:
    """The turn's concepts as stored (its pairs are counted where they are kept)."""
    return Slice(ref=ref, meta=meta, concepts=state.repo.concepts(ref, [c.id for c in event.concepts]))


def _retrieved_slice(state: FoldState, event: Retrieved, ref: GraphRef, meta: GraphMeta,
                     refolds: Refolds | None) -> Slice:
    return Slice(ref=ref, meta=meta, concepts=state.repo.concepts(ref, {b.id for b in event.boosts}))


def _decay_slice(state: FoldState, event: Decay, ref: GraphRef, meta: GraphMeta, refolds: Refolds | None) -> Slice:
    """The listed concepts with their neighbours, passages (from the view)
    and those passages' links; the listed edges; the edges of the
    concepts listed as isolated."""
    view, repo = state.views[ref], state.repo
    listed = sorted({c.id for c in event.concepts})
    neighbours = {cid: tuple(view.neighbour_ids(cid)) for cid in listed}
    sources = {cid: tuple(view.passage_ids[view.index[cid]]) for cid in listed if cid in view.index}
    passages = repo.passage_concepts(ref, sorted({t for turns in sources.values() for t in turns}))
    candidates = [(c, t) for t, named in passages.items() for c in named]
    isolated = [c.id for c in event.concepts if c.reason == "isolated"]
    return Slice(
        ref=ref, meta=meta,
        concepts=repo.concepts(ref, [c.id for c in event.concepts]),
        pairs=view.pair_table((e.a, e.b) for e in event.edges),
        neighbours=neighbours,
        sources=sources, passages=passages, links=repo.links(ref, candidates, passages),
        isolated_edges=view.edges_of({cid: neighbours[cid] for cid in isolated}),
    )


def _consolidate_slice(state: FoldState, event: Consolidate, ref: GraphRef, meta: GraphMeta,
                       refolds: Refolds | None) -> Slice:
    view = state.views[ref]
    named = {m for topic in event.topics for m in topic.members}
    return Slice(
        ref=ref, meta=meta, present=frozenset(m for m in named if m in view.index),
        topic_ids=tuple(t.id for t in view.topics),
    )


def _forget_slice(state: FoldState, event: Forget, ref: GraphRef, meta: GraphMeta, refolds: Refolds | None) -> Slice:
    versions = tuple(r for r in state.repo.graph_refs() if r.graph_id == event.graph_id)
    if event.whole_graph:
        turn_ids = {r: frozenset(state.repo.turn_ids(r)) for r in versions}
        return Slice(ref=ref, meta=meta, versions=versions, turn_ids=turn_ids)
    return Slice(ref=ref, meta=meta, versions=versions, refolds=state.refolds(event) if refolds is None else refolds)


RULES: Mapping[type, Rule] = {
    TurnIngested: Rule(_turn_guard, _turn_slice, evolve_turn),
    Retrieved: Rule(_retrieval_guard, _retrieved_slice, evolve_retrieved),
    Decay: Rule(_tick_guard(lambda meta: meta.decayed_to), _decay_slice, evolve_decay, compacts=True),
    Consolidate: Rule(_tick_guard(lambda meta: meta.consolidated_to), _consolidate_slice, evolve_consolidate),
    GraphVersionSwitched: Rule(
        _always, _meta_only, evolve_switch, journaled=False, views=ViewChange.NONE, version_of=switched_to,
    ),
    Forget: Rule(
        _forget_guard, _forget_slice, evolve_forget, journaled=False, views=ViewChange.SWAP, version_of=active_version,
    ),
}
