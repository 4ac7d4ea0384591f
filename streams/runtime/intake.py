"""The agents' intake: each fetch's records, a batch per topic, straight from the consumer.

Faust hands records to agents one at a time: a message object per record,
four tasks to deliver it (`Service.wait_first`), a queue put and get, an
event and an acknowledgement per record. On the development machine that
was about half of a busy worker's CPU, more than extraction and the fold
together. The worker's consumer (`streams.runtime.patches`, 7) puts each
fetch's records of the worker's two topics here instead, as aiokafka
returns them; an agent takes a batch, processes it, and marks it `done`,
which acknowledges its offsets to Faust's commit bookkeeping in one step.

What Faust's delivery guaranteed still holds:
- a batch is acknowledged only after the agent has processed it, so a
  turn's offset is committed only once its graph event is in the log;
- a rebalance drops the batches no agent has started (Faust's flow control
  clears the intake as it clears its own buffers), and waits for a batch
  in hand to be done (each batch is tracked as one unacknowledged message);
- the consumer stops fetching while `depth` batches wait (backpressure).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, Callable, Iterable

# Batches that may wait, over both topics, before the consumer stops fetching.
DEPTH = 4


class Batch:
    """A fetch's records of one topic, in log order per partition. To Faust's
    consumer it is one message in hand until `done` (it tracks it weakly:
    a batch dropped by a rebalance stops counting when it is freed)."""

    __slots__ = ("records", "acked", "refcount", "__weakref__")

    def __init__(self, records: list[Any]) -> None:
        self.records = records
        self.acked = False  # read by Faust's consumer when it waits for messages in hand
        self.refcount = 1  # logged by Faust's consumer when that wait is long

    def __repr__(self) -> str:
        return f"<Batch of {len(self.records)} records>"


class Intake:
    """Batches waiting per topic. `put` is the consumer's side, `take` and
    `done` the agents'; `clear` is Faust's flow control (a rebalance)."""

    def __init__(self, topics: Iterable[str], depth: int = DEPTH) -> None:
        self._waiting: dict[str, deque[Batch]] = {topic: deque() for topic in topics}
        self._arrived = {topic: asyncio.Event() for topic in self._waiting}
        self._room = asyncio.Event()
        self._room.set()
        self._depth = depth
        self.acknowledge: Callable[[list[Any]], None] = lambda records: None  # set by the consumer

    def takes(self, topic: str) -> bool:
        return topic in self._waiting

    def put(self, topic: str, records: list[Any]) -> Batch:
        batch = Batch(records)
        self._waiting[topic].append(batch)
        self._arrived[topic].set()
        self._update_room()
        return batch

    def has_room(self) -> bool:
        return self._room.is_set()

    async def room(self) -> None:
        """Wait until fewer than `depth` batches wait."""
        await self._room.wait()

    async def take(self, topic: str) -> Batch:
        """The topic's next batch, waiting for one if none waits."""
        waiting, arrived = self._waiting[topic], self._arrived[topic]
        while not waiting:
            arrived.clear()
            await arrived.wait()
        return self._pop(topic)

    async def take_up_to(self, topic: str, most: int, within_s: float) -> list[Batch]:
        """The topic's next batch, and those that arrive within `within_s` of
        it while fewer than `most` records are taken: under a light load a
        fetch holds a few records, and each batch costs the agent about the
        same (a commit's checks, a thread's hand-off for extraction, the
        sends awaited together), whatever its size."""
        batches = [await self.take(topic)]
        taken = len(batches[0].records)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within_s
        waiting, arrived = self._waiting[topic], self._arrived[topic]
        while taken < most:
            if not waiting:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                arrived.clear()
                try:
                    await asyncio.wait_for(arrived.wait(), remaining)
                except asyncio.TimeoutError:
                    break
                continue
            batch = self._pop(topic)
            batches.append(batch)
            taken += len(batch.records)
        return batches

    def done(self, batch: Batch) -> None:
        """The agent has processed `batch`: its offsets may be committed."""
        if not batch.acked:
            batch.acked = True
            self.acknowledge(batch.records)

    def clear(self) -> None:
        """Drop every waiting batch (a rebalance: their partitions may have moved)."""
        for waiting in self._waiting.values():
            waiting.clear()
        self._update_room()

    def _pop(self, topic: str) -> Batch:
        """The topic's oldest waiting batch (there is one), taken."""
        batch = self._waiting[topic].popleft()
        self._update_room()
        return batch

    def waiting(self) -> int:
        return sum(len(waiting) for waiting in self._waiting.values())

    def _update_room(self) -> None:
        if self.waiting() < self._depth:
            self._room.set()
        else:
            self._room.clear()
