"""A `GraphLog` (streams.runtime.ports) that keeps what a worker's parts send, for unit tests."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Iterable

from emgas.processors.errors import DecodeError
from emgas.processors.events import GraphEvent


class RecordingLog:
    """Keeps every graph event, turn, dead letter and record sent, in order;
    each event appended gets the next offset; acknowledgements are immediate."""

    def __init__(self) -> None:
        self.events: list[GraphEvent] = []
        self.turns: list[tuple[str, str, str, bytes]] = []
        self.dead_letters: list[tuple[Any, DecodeError]] = []
        self.sent: list[tuple[str, bytes | None, bytes]] = []

    async def send_event(self, event: GraphEvent) -> asyncio.Future[None]:
        self.events.append(event)
        done = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done

    async def acknowledged(self, acks: list[Awaitable[Any]]) -> None:
        await asyncio.gather(*acks)

    async def append(self, events: Iterable[GraphEvent]) -> None:
        self.events += events

    async def append_at(self, events: list[GraphEvent]) -> list[int]:
        first = len(self.events)
        self.events += events
        return list(range(first, len(self.events)))

    async def append_turns(self, extracted: list[tuple[str, str, str, bytes]]) -> None:
        self.turns += extracted

    async def dead_letter(self, message: Any, err: DecodeError) -> None:
        self.dead_letters.append((message, err))

    async def send(self, topic: str, key: bytes | None, value: bytes, partition: int | None) -> None:
        self.sent.append((topic, key, value))
