"""The one way to apply a graph event: live workers and replay both use it.

A partition's state is its store, the typed repository over it and the
in-memory views of its graph versions. Applying an event at log offset `o`:

- `o` at or below the stored offset: a redelivery (e.g. after a crash
  between writing state and committing the consumer offset); skipped.
- a turn already stored in its graph version (same turn_id): a duplicate
  publish; only the offset advances.
- otherwise the core computes the delta, and the delta and `o` are written
  in one atomic batch, then mirrored into the view.

So every valid event changes the state exactly once, whatever the
delivery guarantees of the transport.
"""

from __future__ import annotations

from enum import Enum

from processors.events import GraphEvent, GraphVersionSwitched, TurnIngested
from processors.graph import GraphParams, GraphRef, apply_turn
from state.repository import GraphRepository
from state.store import PartitionStore
from state.view import GraphView, load_view


class Outcome(str, Enum):
    APPLIED = "applied"
    DUPLICATE_TURN = "duplicate_turn"
    ALREADY_APPLIED = "already_applied"


class PartitionState:
    """The materialised state of one partition of `emgas.graph-events`."""

    def __init__(self, store: PartitionStore, params: GraphParams) -> None:
        self.repo = GraphRepository(store)
        self.params = params
        self.views: dict[GraphRef, GraphView] = {
            ref: load_view(self.repo, ref) for ref in self.repo.graph_refs()
        }
        self._offset = self.repo.applied_offset()

    @property
    def applied_offset(self) -> int:
        return self._offset

    def view(self, graph_id: str, version: int | None = None) -> GraphView | None:
        """The view of `graph_id` at `version` (default: the active one)."""
        return self.views.get(GraphRef(graph_id, version or self.repo.active_version(graph_id)))

    def apply(self, event: GraphEvent, offset: int) -> Outcome:
        if offset <= self._offset:
            return Outcome.ALREADY_APPLIED
        if isinstance(event, GraphVersionSwitched):
            self.repo.switch_version(event.graph_id, event.version, offset)
            outcome = Outcome.APPLIED
        else:
            outcome = self._apply_turn(event, offset)
        self._offset = offset
        return outcome

    def _apply_turn(self, event: TurnIngested, offset: int) -> Outcome:
        ref = GraphRef(event.graph_id, event.graph_version or self.repo.active_version(event.graph_id))
        if self.repo.has_turn(ref, event.turn_id):
            self.repo.mark_offset(offset)
            return Outcome.DUPLICATE_TURN
        existing = self.repo.concepts(ref, [c.id for c in event.concepts])
        delta = apply_turn(event, ref.version, existing, self.params)
        self.repo.write(delta, offset)
        self.views.setdefault(ref, GraphView(ref)).apply(delta)
        return Outcome.APPLIED

    def close(self) -> None:
        self.repo.store.close()
