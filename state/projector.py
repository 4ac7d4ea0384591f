"""The one way to apply a graph event: live workers and replay both use it.

A partition's state is its store, the typed repository over it and the
in-memory views of its graphs. Applying an event at log offset `o`:

- `o` at or below the stored offset: a redelivery (e.g. after a crash
  between writing state and committing the consumer offset); skipped.
- a turn already stored (same graph, same turn_id): a duplicate publish;
  only the offset advances.
- otherwise the core computes the delta, and the delta and `o` are written
  in one atomic batch, then mirrored into the view.

So every valid event changes the state exactly once, whatever the
delivery guarantees of the transport.
"""

from __future__ import annotations

from enum import Enum

from processors.events import TurnIngested
from processors.graph import GraphParams, apply_turn
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
        self.views: dict[str, GraphView] = {
            g: load_view(self.repo, g) for g in self.repo.graph_ids()
        }
        self._offset = self.repo.applied_offset()

    @property
    def applied_offset(self) -> int:
        return self._offset

    def apply(self, event: TurnIngested, offset: int) -> Outcome:
        if offset <= self._offset:
            return Outcome.ALREADY_APPLIED
        if self.repo.has_turn(event.graph_id, event.turn_id):
            self.repo.mark_offset(offset)
            self._offset = offset
            return Outcome.DUPLICATE_TURN
        existing = self.repo.concepts(event.graph_id, [c.id for c in event.concepts])
        delta = apply_turn(event, existing, self.params)
        self.repo.write(delta, offset)
        self._offset = offset
        self.views.setdefault(event.graph_id, GraphView(event.graph_id)).apply(delta)
        return Outcome.APPLIED

    def close(self) -> None:
        self.repo.store.close()
