"""When a graph is due a decay tick or a consolidation, and what it says.

The emitter side of memory dynamics: a live worker (and the in-process
`emgas.testing.LocalLog`) asks after each applied event, and appends what is due to
the log; the fold (`state.projector`) applies it like any other event.

- Decay: windows are [k·W, (k+1)·W) of event time. When a graph's clock
  (the latest event time of its turns) enters a window that starts after
  its last tick, a tick at that window's start is due. Its lists come from
  the view's due-time heaps, checked against the stored records.
- Consolidation: the same with windows of `consolidate_every_s`; the
  topics come from the view's counts (`processors.topics`).
- Idle graphs: their clock is taken to move on at wall-clock speed from
  the wall time their last turn was applied, so a graph nobody talks to
  still gets ticks. Each tick carries its explicit time, so the log, not
  the wall clock, decides what a replay does.

A tick already emitted but not yet applied is remembered, so it is not
emitted twice; after a restart it may be, and the fold skips the copy.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from emgas.processors.dynamics import window_index, window_start
from emgas.processors.events import Consolidate, Decay, Forget, GraphEvent, PrunedConcept
from emgas.processors.fold_codec import FoldEvent, is_turn
from emgas.processors.graph import ConceptState, GraphParams, GraphRef
from emgas.processors.pruning import expired_concepts, expired_edges, expired_mask, isolated_by, outlived_its_edges
from emgas.processors.topics import topics_of
from emgas.state.projector import PartitionState

Trigger = Literal["window", "idle", "manual"]


class Scheduler:
    def __init__(self, params: GraphParams) -> None:
        self.params = params
        self._ticked: dict[GraphRef, datetime] = {}
        self._consolidated: dict[GraphRef, datetime] = {}
        self._last_turn_wall: dict[GraphRef, datetime] = {}

    def applied(self, event: FoldEvent, ref: GraphRef, wall: datetime) -> None:
        """Note an applied event (turns restart a graph's idle time; after a
        forget, what was emitted for the graph's versions no longer counts)."""
        if is_turn(event):
            self._last_turn_wall[ref] = wall
        elif isinstance(event, Forget):
            for memory in (self._ticked, self._consolidated, self._last_turn_wall):
                for gone in [r for r in memory if r.graph_id == event.graph_id]:
                    del memory[gone]

    def due(
        self, state: PartitionState, ref: GraphRef, clock: datetime | None = None, trigger: Trigger = "window"
    ) -> list[GraphEvent]:
        """Events `ref` is due at `clock` (default: its latest turn's time)."""
        meta = state.repo.meta(ref)
        if ref not in state.views or meta.clock is None or meta.first_seen is None:
            return []
        clock = clock or meta.clock
        events: list[GraphEvent] = []
        window = self.params.window_s
        if window > 0:
            tick = window_start(clock, window)
            if _is_new(tick, meta.decayed_to or window_start(meta.first_seen, window), self._ticked.get(ref)):
                events.append(self.decay(state, ref, tick, trigger))
                self._ticked[ref] = tick
        every = self.params.consolidate_every_s
        if every > 0:
            at = window_start(clock, every)
            if _is_new(at, meta.consolidated_to or window_start(meta.first_seen, every), self._consolidated.get(ref)):
                events.append(self.consolidate(state, ref, at))
                self._consolidated[ref] = at
        return events

    def windows_entered(self, before: datetime | None, times: list[datetime]) -> list[datetime]:
        """The clocks, in order, at which a graph whose clock was `before`
        enters a new decay or consolidation window as turns of event times
        `times` are applied one by one (the clock is their running maximum):
        the clocks `due` is asked at when a batch is applied at once, so a
        batch crossing several windows ticks each, as turn by turn would."""
        entered: list[datetime] = []
        clock = before
        windows = None if before is None else self._windows(before)  # the clock's, kept as it moves
        for at in times:
            if clock is not None and at <= clock:
                continue
            now = self._windows(at)
            if clock is None or now != windows:
                entered.append(at)
            clock, windows = at, now
        return entered

    def _windows(self, clock: datetime) -> tuple[int | None, int | None]:
        """The indices of the decay and consolidation windows holding `clock`
        (`window_start`'s k: two clocks share a window when they share its k),
        computed for every turn of a batch, so without a datetime each."""
        window, every = self.params.window_s, self.params.consolidate_every_s
        return (window_index(clock, window) if window > 0 else None, window_index(clock, every) if every > 0 else None)

    def idle_due(self, state: PartitionState, wall: datetime) -> list[GraphEvent]:
        """Ticks for graphs whose last turn was applied at least a window ago (wall time)."""
        events: list[GraphEvent] = []
        for ref in sorted(state.views):
            since = self._last_turn_wall.setdefault(ref, wall)
            meta = state.repo.meta(ref)
            idle = wall - since
            window = timedelta(seconds=self.params.window_s)
            if meta.clock is not None and window > timedelta(0) and idle >= window:
                events += self.due(state, ref, meta.clock + idle, "idle")
        return events

    def decay(self, state: PartitionState, ref: GraphRef, at: datetime, trigger: Trigger) -> Decay:
        """A tick at `at`: what falls below the thresholds there."""
        view, params = state.views[ref], self.params.decay
        records = state.repo.concepts(ref, set(view.due_concepts(at)))
        concepts = expired_concepts(records.values(), at, params)
        # Edges of expiring concepts stay listed: if the concept is kept
        # (reinforced before the tick applies), its due edges still go.
        candidates = view.pair_table(view.due_edges(at))
        expired = expired_mask(candidates, at, params)
        edges = expired_edges(candidates.where(expired), at, params)
        view.note_pairs(candidates.where(~expired))  # co-occurred since they were filed: filed again
        isolated = isolated_by([c.id for c in concepts], [(e.a, e.b) for e in edges], view.neighbour_ids)
        isolated = self._not_outlived(state, ref, isolated, {c.id: records[c.id] for c in concepts})
        return Decay(
            graph_id=ref.graph_id, graph_version=ref.version, timestamp=at, trigger=trigger,
            params=params, concepts=tuple(concepts + isolated), edges=tuple(edges),
        )

    def _not_outlived(
        self, state: PartitionState, ref: GraphRef, isolated: list[PrunedConcept], pruned: dict[str, ConceptState]
    ) -> list[PrunedConcept]:
        """The isolated concepts whose edges would not all have gone before
        their newest mention (`processors.pruning.outlived_its_edges`)."""
        view = state.views[ref]
        ids = [c.id for c in isolated]
        records = state.repo.concepts(ref, ids)
        edges = view.edges_of({cid: view.neighbour_ids(cid) for cid in ids})
        return [
            c for c in isolated
            if not outlived_its_edges(
                records.get(c.id), [(pair, pruned.get(o)) for o, pair in sorted(edges[c.id].items())], self.params.decay
            )
        ]

    def consolidate(self, state: PartitionState, ref: GraphRef, at: datetime) -> Consolidate:
        view = state.views[ref]
        counts, texts, pairs = view.snapshot(self.params.topics.min_pair_count, paired_only=True)
        topics = topics_of(pairs, counts, texts, view.turns, self.params.topics)
        return Consolidate(graph_id=ref.graph_id, graph_version=ref.version, timestamp=at, topics=topics)


def _is_new(at: datetime, applied: datetime, emitted: datetime | None) -> bool:
    """Whether a tick at `at` is later than the last applied and the last emitted one."""
    return at > applied and (emitted is None or at > emitted)
