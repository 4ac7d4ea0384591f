"""The commit order of the apply agent, in one place.

A batch of graph events is applied to the partition states' transactions
(`state.transaction`); then, in this order:

1. produce what the events emitted (decay ticks, consolidations) to
   `emgas.graph-events`, without waiting for each acknowledgement;
2. flush the producer: await every acknowledgement, so each emitted
   event is in the log;
3. commit each touched partition state, with the offset of the last event
   it applied, in one atomic RocksDB batch, when its `CommitPacing` says
   so (at most every `EMGAS_STATE_COMMIT_INTERVAL_S`: a commit rewrites
   every pair row changed since the last one, and hub rows are long), and
   no thread reads its store (a digest hashing the partition: a later
   batch commits it; a forced commit waits for the thread);
4. mark the batch done (`streams.runtime.intake`): its records are
   acknowledged to Faust, which commits the consumer offsets later.

A crash before 3 loses nothing: the state is still at its last commit,
and recovery (`streams.runtime.recovery`) reads the log again from the state's own
offset (not the consumer group's), applying each event once; an emitted
tick produced twice is skipped by the fold as a duplicate. A crash after 3
and before 4 redelivers events at or below the state's offset, which the
fold skips. The consumer group's offsets are never what the state trusts.
"""

from __future__ import annotations

import asyncio
import time
from typing import Awaitable, Callable

from emgas.processors.events import GraphEvent
from emgas.service.steps import PartitionSteps
from emgas.streams.runtime.ports import GraphLog


class CommitPacing:
    """When a partition state is committed: after a batch once `interval_s`
    (wall seconds) have passed since its last commit (0: after every batch).
    Recovery reads the log from the state's own offset, so a state committed
    less often loses nothing in a crash: the events after it are folded
    again (and the ticks they made due are emitted again, which the fold
    skips as duplicates)."""

    def __init__(self, interval_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s = interval_s
        self._clock = clock
        self._last: dict[int, float] = {}  # id of a state -> when it was last committed

    def due(self, worker: PartitionSteps) -> bool:
        last = self._last.get(id(worker.state))
        return self.interval_s <= 0 or last is None or self._clock() - last >= self.interval_s

    def committed(self, worker: PartitionSteps) -> None:
        self._last[id(worker.state)] = self._clock()


EVERY_BATCH = CommitPacing(0.0)


CommitState = Callable[[PartitionSteps], Awaitable[None]]


async def commit_here(worker: PartitionSteps) -> None:
    worker.state.commit()


class BatchCommit:
    """What one batch touched: the workers to commit and the events to emit."""

    def __init__(
        self, log: GraphLog, pacing: CommitPacing = EVERY_BATCH,
        reading: Callable[[int], bool] = lambda partition: False, commit_state: CommitState = commit_here,
    ) -> None:
        self._log = log
        self._pacing = pacing
        self._reading = reading  # whether a thread reads a partition's store now: not committed to meanwhile
        self._commit_state = commit_state  # the worker's: `PartitionStates.commit`
        self._workers: dict[int, PartitionSteps] = {}
        self._emitted: list[GraphEvent] = []

    def add(self, worker: PartitionSteps, emitted: list[GraphEvent]) -> None:
        self._workers[id(worker)] = worker
        self._emitted += emitted

    async def commit(self, force: bool = False) -> None:
        """Emit (1), flush (2), commit the states (3), in that order; a state
        only when its pacing says so, unless `force` (a reader of the store
        off the event loop needs it committed)."""
        acks = [await self._log.send_event(event) for event in self._emitted]
        if acks or self._workers:
            await self._log.acknowledged(acks)
        for worker in self._workers.values():
            if self._reading(worker.partition):
                if not force:
                    continue  # committed by a later batch, or the idle timer
                while self._reading(worker.partition):
                    await asyncio.sleep(0.02)
            if force or self._pacing.due(worker):
                await self._commit_state(worker)
                self._pacing.committed(worker)
        self._emitted = []
        self._workers = {}
