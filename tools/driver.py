"""An in-process log and worker: what the live pipeline does, without Kafka.

Events are appended to a list (the log) and handed, in order, to the same
step function as the live apply agent (`service.steps`); whatever becomes due
is appended too. Queries answered here append their reinforcement like the
live query agent. The state commits every `COMMIT_EVERY` events (reads see
what is not committed yet). Used by simulations, tests and the evaluation
command, and its log replays like the real one.
"""

from __future__ import annotations

from collections import deque
from datetime import datetime, timezone
from typing import Iterable

from emgas.processors.activation import ActivationParams
from emgas.processors.events import ActivationQuery, ActivationReply, ErrorReply, GraphEvent
from emgas.processors.errors import QueryError
from emgas.processors.extract import ExtractionParams
from emgas.processors.graph import GraphParams
from emgas.state.memory import MemoryStore
from emgas.state.projector import Outcome, PartitionState
from emgas.service.steps import PartitionSteps
from emgas.state.store import PartitionStore
from emgas.state.transaction import COMMIT_EVERY

_NO_WALL = datetime(1970, 1, 1, tzinfo=timezone.utc)


class LocalLog:
    def __init__(self, params: GraphParams, store: PartitionStore | None = None) -> None:
        self.params = params
        self.worker = PartitionSteps(PartitionState(store or MemoryStore(), params), params)
        self.log: list[GraphEvent] = []
        self.outcomes: list[Outcome] = []

    @property
    def state(self) -> PartitionState:
        return self.worker.state

    @property
    def scheduler(self):  # noqa: ANN201 - the worker's Scheduler
        return self.worker.scheduler

    def append(self, event: GraphEvent) -> None:
        """Append and apply `event`, then everything that becomes due because of it."""
        queue = deque([event])
        while queue:
            event = queue.popleft()
            self.log.append(event)
            outcome, due = self.worker.on_graph_event(event, len(self.log) - 1, _NO_WALL)
            self.outcomes.append(outcome)
            queue.extend(due)
            if len(self.log) % COMMIT_EVERY == 0:
                self.state.commit()

    def extend(self, events: Iterable[GraphEvent]) -> None:
        for event in events:
            self.append(event)

    def tick(self, graph_id: str, at: datetime) -> None:
        """An explicit tick (what the idle scheduler or `emgas tick` emits)."""
        ref = self.state.ref(graph_id)
        self.extend(self.scheduler.due(self.state, ref, at, "manual"))

    def ask(
        self, query: ActivationQuery, activation: ActivationParams, extraction: ExtractionParams
    ) -> ActivationReply:
        """Answer like the query agent, appending the reinforcement it emits."""
        self.worker.activation, self.worker.extraction = activation, extraction
        reply, due = self.worker.on_request(query, lambda: 0.0)
        if isinstance(reply, ErrorReply):
            raise QueryError(reply.code, reply.message)
        self.extend(due)
        return reply
