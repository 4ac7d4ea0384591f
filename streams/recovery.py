"""Bringing an assigned partition's local state up to the log before use.

A worker's state for partition p says which offset of `emgas.graph-events`
it reflects (written atomically with the state). When p is assigned (at
start-up or by a rebalance), the local state may lag the log: the worker
crashed, p was served by another worker meanwhile, or this worker never
held p and has no state at all. Faust resumes p from the group's committed
offset, which knows nothing of the local state, so before the agents touch
p a catch-up reads the log from the state's offset + 1 to the current end
with the same fold as replay. Messages Faust then delivers at or below the
state's offset are skipped by the projector, so nothing is lost and
nothing is applied twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Iterable

from replay.errors import LogTruncated, ReplayError
from replay.fold import Selection
from replay.run import log_reader
from replay.rebuild import rebuild_partition
from streams.partitions import PartitionStates
from streams.settings import Settings

log = logging.getLogger(__name__)
RETRY_S = 1.0


class Recovery:
    """Per graph-events partition: a catch-up task and a future that says
    whether the partition is ready (True) or was revoked first (False)."""

    def __init__(self, settings: Settings, states: PartitionStates) -> None:
        self.settings = settings
        self.states = states
        self._ready: dict[int, asyncio.Future[bool]] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self.assignment_seen = False  # the group has given this worker its partitions once

    def _partitions(self, tps: Iterable[Any]) -> list[int]:
        return sorted(tp.partition for tp in tps if tp.topic == self.settings.graph_events_topic)

    async def on_assigned(self, sender: Any, assigned: Iterable[Any], **_: Any) -> None:
        self.assignment_seen = True
        for partition in self._partitions(assigned):
            self.ready(partition)

    async def on_revoked(self, sender: Any, revoked: Iterable[Any], **_: Any) -> None:
        for partition in self._partitions(revoked):
            task = self._tasks.pop(partition, None)
            if task is not None:
                task.cancel()
            future = self._ready.pop(partition, None)
            if future is not None and not future.done():
                future.set_result(False)

    def ready(self, partition: int) -> asyncio.Future[bool]:
        """The partition's readiness, starting its catch-up if none is under way."""
        future = self._ready.get(partition)
        if future is None:
            future = self._ready[partition] = asyncio.get_running_loop().create_future()
            self._tasks[partition] = asyncio.create_task(self._catch_up(partition, future))
        return future

    def assigned_partitions(self) -> list[int]:
        """Graph-events partitions assigned here (caught up or not)."""
        return sorted(self._ready)

    def ready_partitions(self) -> list[int]:
        """Partitions assigned here and caught up."""
        return sorted(p for p, f in self._ready.items() if f.done() and f.result())

    async def wait(self, partition: int) -> bool:
        """True once the partition is caught up; False if it was revoked meanwhile."""
        return await asyncio.shield(self.ready(partition))

    async def _catch_up(self, partition: int, future: asyncio.Future[bool]) -> None:
        started = time.perf_counter()
        read = await self._read_to_end(partition)
        if read:
            log.info("partition %s caught up: %s events in %.2f s", partition, read, time.perf_counter() - started)
        self._tasks.pop(partition, None)
        if not future.done():
            future.set_result(True)

    async def _read_to_end(self, partition: int) -> int:
        """Fold the log after the state's offset into the state; the number of
        records read. Retries while the log cannot be read."""
        state = self.states.get(partition)
        topic = self.settings.graph_events_topic
        while True:
            try:
                async with log_reader(self.settings) as reader:
                    _, end = (await reader.bounds(topic, [partition]))[partition]
                    counts = await rebuild_partition(reader, topic, partition, state, end, Selection())
                    return counts.read
            except LogTruncated as err:
                # Serve what there is, loudly: `emgas replay --verify` shows the gap.
                log.error("partition %s cannot be fully recovered: %s", partition, err)
                return 0
            except ReplayError as err:
                log.warning("catch-up of partition %s failed (%s); retrying in %s s", partition, err, RETRY_S)
                await asyncio.sleep(RETRY_S)
