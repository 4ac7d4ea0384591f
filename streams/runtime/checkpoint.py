"""The commit order of the apply agent, in one place.

A batch of graph events is applied to the partition states' transactions
(`state.transaction`); then, in this order:

1. produce what the events emitted (decay ticks, consolidations) to
   `emgas.graph-events`, without waiting for each acknowledgement;
2. flush the producer: await every acknowledgement, so each emitted
   event is in the log;
3. commit each touched partition state, with the offset of the last event
   it applied, in one atomic RocksDB batch;
4. return to Faust, which acknowledges the batch's messages and commits
   the consumer offsets later.

A crash before 3 loses nothing: the state is still at its last commit,
and recovery (`streams.runtime.recovery`) reads the log again from the state's own
offset (not the consumer group's), applying each event once; an emitted
tick produced twice is skipped by the fold as a duplicate. A crash after 3
and before 4 redelivers events at or below the state's offset, which the
fold skips. The consumer group's offsets are never what the state trusts.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

from emgas.processors.events import GraphEvent
from emgas.state.steps import PartitionWorker

Send = Callable[[GraphEvent], Awaitable[Awaitable[Any]]]  # returns the ack's future


class Checkpoint:
    """What one batch touched: the workers to commit and the events to emit."""

    def __init__(self, send: Send, hold_s: float = 0.0) -> None:
        self._send = send
        self._hold_s = hold_s  # the crash tests' window between 2 and 3
        self._workers: dict[int, PartitionWorker] = {}
        self._emitted: list[GraphEvent] = []

    def add(self, worker: PartitionWorker, emitted: list[GraphEvent]) -> None:
        self._workers[id(worker)] = worker
        self._emitted += emitted

    async def commit(self) -> None:
        """Emit (1), flush (2), commit the states (3), in that order."""
        acks = [await self._send(event) for event in self._emitted]
        await asyncio.gather(*acks)
        if self._hold_s and self._workers:
            await asyncio.sleep(self._hold_s)
        for worker in self._workers.values():
            worker.state.commit()
        self._emitted = []
        self._workers = {}
