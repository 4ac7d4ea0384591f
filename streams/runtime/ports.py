"""The worker's one port to the log: where its results go.

Everything a worker produces goes through one `GraphLog`: the turns it
extracts, graph events it emits (ticks, retrievals' reinforcement,
snapshots, the log's own markers), dead letters with the original bytes, and records to the
request/reply topics (replies, owner announcements). The Kafka adapter is
`streams.runtime.app.Output`; the query server gets it wrapped in
`WhileRunning` (`streams.runtime.app`), so that a send after the producer
stopped ends serving instead of the worker; tests pass their own
(`tests/support/graph_log.py`).
"""

from __future__ import annotations

from typing import Any, Awaitable, Iterable, Protocol

from emgas.processors.errors import DecodeError
from emgas.processors.events import GraphEvent


class GraphLog(Protocol):
    """Where a worker's graph events, dead letters and replies go."""

    async def send_event(self, event: GraphEvent) -> Awaitable[Any]:
        """Produce a graph event without waiting: the future of its acknowledgement."""
        ...

    async def acknowledged(self, acks: list[Awaitable[Any]]) -> None:
        """Wait until the events whose acknowledgements these are (`send_event`'s) are in the log."""
        ...

    async def append(self, events: Iterable[GraphEvent]) -> None:
        """Produce graph events and wait until every one is in the log."""
        ...

    async def append_at(self, events: list[GraphEvent]) -> list[int]:
        """Produce graph events and wait: their offsets in the log."""
        ...

    async def append_turns(self, extracted: list[tuple[str, str, str, bytes]]) -> None:
        """Extracted turns, (graph, turn id, time, the bytes of its
        `turn_ingested` event), produced to the log (sealed where the log
        seals turns) and acknowledged."""
        ...

    async def dead_letter(self, message: Any, err: DecodeError) -> None:
        """A message refused, with its original bytes and the one-line reason, to the dead-letter topic."""
        ...

    async def send(self, topic: str, key: bytes | None, value: bytes, partition: int | None) -> Any:
        """One record to any topic (replies, announcements), acknowledged."""
        ...
