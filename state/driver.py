"""An in-process log and worker: what the live pipeline does, without Kafka.

Events are appended to a list (the log), applied in order through the one
fold, and whatever the scheduler finds due afterwards is appended too,
exactly as the live apply agent does. Queries answered here append their
reinforcement like the live query agent. Used by simulations, tests and
the evaluation command, and its log replays like the real one.
"""

from __future__ import annotations

from collections import deque
from datetime import datetime, timezone
from typing import Iterable

from processors.activation import ActivationParams
from processors.events import ActivationQuery, ActivationReply, GraphEvent
from processors.extract import ExtractionParams
from processors.graph import GraphParams
from state.memory import MemoryStore
from state.projector import Outcome, PartitionState
from state.retrieval import answer, reinforcement
from state.scheduler import Scheduler, active_ref, ref_of
from state.store import PartitionStore

_NO_WALL = datetime(1970, 1, 1, tzinfo=timezone.utc)


class LocalLog:
    def __init__(self, params: GraphParams, store: PartitionStore | None = None) -> None:
        self.params = params
        self.state = PartitionState(store or MemoryStore(), params)
        self.scheduler = Scheduler(params)
        self.log: list[GraphEvent] = []
        self.outcomes: list[Outcome] = []

    def append(self, event: GraphEvent) -> None:
        """Append and apply `event`, then everything that becomes due because of it."""
        queue = deque([event])
        while queue:
            event = queue.popleft()
            self.log.append(event)
            self.outcomes.append(self.state.apply(event, len(self.log) - 1))
            ref = ref_of(self.state, event)
            self.scheduler.applied(event, ref, _NO_WALL)
            queue.extend(self.scheduler.due(self.state, ref))

    def extend(self, events: Iterable[GraphEvent]) -> None:
        for event in events:
            self.append(event)

    def tick(self, graph_id: str, at: datetime) -> None:
        """An explicit tick (what the idle scheduler or `emgas tick` emits)."""
        ref = active_ref(self.state, graph_id)
        self.extend(self.scheduler.due(self.state, ref, at, "manual"))

    def ask(
        self, query: ActivationQuery, activation: ActivationParams, extraction: ExtractionParams
    ) -> ActivationReply:
        """Answer like the query agent, appending the reinforcement it emits."""
        reply = answer(self.state, query, activation, extraction, lambda: 0.0)
        retrieved = reinforcement(self.state, query, reply, self.params)
        if retrieved is not None:
            self.append(retrieved)
        return reply

