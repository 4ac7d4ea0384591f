"""Answering queries outside the consumer group, so hand-offs do not pause graphs.

The group protocol stops every member's partitions for the whole of a
rebalance (eager rebalancing: aiokafka has no cooperative protocol), and
the new owner of a partition then catches up before it can answer. So the
queries topic is not consumed through the group: each worker reads every
partition of it by manual assignment (no group, never paused) and answers
the partitions it is the *announced owner* of:

- when a graph-events partition becomes ready here (caught up after an
  assignment), the worker announces it: a record on `emgas.owners`
  (compacted, key = the partition, value = the worker's name);
- a worker answers partition p while the latest announcement of p names
  it: whether p is assigned to it and ready, or was revoked from it and
  its new owner is still catching up. So the previous owner keeps serving,
  from its state as of the hand-off, until the new one announces itself;
- while covering (p no longer assigned here), it answers read-only: no
  reinforcement is appended (the new owner may answer the same query once
  it has announced, and a query must reinforce at most once), and digest
  queries, which must reflect the owner's state, are left to the owner;
- once another worker has announced a partition revoked here, its state
  here is committed and closed (`PartitionStates.release`): memory follows
  the partitions a worker holds;
- a partition assigned back to the worker that announced it is covered
  the same way until it has caught up, if this process served it (after a
  restart the state is as of its last commit, not of a hand-off: it is held
  instead, as below);
- any other partition assigned here and still catching up holds its
  queries and answers them once it is ready: after a first start nobody
  else can answer, and after a takeover the announced owner may be the
  worker that stopped. If that owner is alive and covering, the query gets
  two replies, and only this one reinforces.

A query both answer gets two replies; the client keeps the first (replies
are matched by request id). A worker that stops cleanly says up to which
query it answered each partition it served (`streams.runtime.answered`),
so that the next owner does not answer those again.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from typing import Any, Awaitable, Callable, Coroutine

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from emgas.processors.codec import decode_request, encode
from emgas.processors.errors import DecodeError
from emgas.processors.events import ActivationReply, DigestQuery, Reply
from emgas.streams.kafka.requests import client_timeout_s
from emgas.streams.runtime.answered import ANSWERED_SUFFIX, AnsweredQueries, answered_key
from emgas.streams.runtime.dlq import guarded
from emgas.streams.errors import ServingStopped
from emgas.streams.runtime.metrics import Metrics
from emgas.streams.c_heap import return_freed_memory
from emgas.streams.runtime.partitions import PartitionStates
from emgas.streams.runtime.ports import GraphLog
from emgas.streams.runtime.recovery import Recovery
from emgas.streams.settings import Settings

log = logging.getLogger(__name__)
POLL_MS = 100  # longest wait for records, so announcements are made promptly


class Owners:
    """Partition -> the worker whose announcement of it is the latest, and the
    offset before which a worker that stopped answered its queries (read from
    `emgas.owners`: keys `<p>` and `<p>/answered`)."""

    def __init__(self, me: str) -> None:
        self.me = me
        self.latest: dict[int, str] = {}
        self.answered: dict[int, int] = {}

    def read(self, key: bytes | None, value: bytes | None) -> None:
        if key is None or value is None:
            return
        try:
            if key.endswith(ANSWERED_SUFFIX):
                self.answered[int(key[: -len(ANSWERED_SUFFIX)])] = int(value)
            else:
                self.latest[int(key)] = value.decode()
        except (ValueError, UnicodeDecodeError):
            log.warning("ignored a record of the owners topic that names no partition: key %r", key)

    def announced_here(self, partition: int) -> bool:
        return self.latest.get(partition) == self.me

    def announced_elsewhere(self, partition: int) -> bool:
        return self.latest.get(partition, self.me) != self.me


class QueryServer:
    """Reads every queries partition and the owners topic; answers as the module says."""

    def __init__(
        self, settings: Settings, states: PartitionStates, recovery: Recovery, metrics: Metrics,
        log: GraphLog,
    ) -> None:
        self.settings = settings
        self.states = states
        self.recovery = recovery
        self.metrics = metrics
        self.log = log  # replies, announcements, the retrievals' reinforcement, dead letters
        self.owners = Owners(settings.worker_name)
        self._announced: set[int] = set()
        # Partitions this process has served: only their state is as of a hand-off. After a
        # restart, a partition announced in an earlier life has a state as of its last commit.
        self._served_here: set[int] = set()
        self._held: set[asyncio.Task[Any]] = set()
        self._held_answering = 0  # held queries (not digests) being answered now
        self._held_answered = asyncio.Event()  # set when none is
        self.leaving = False  # set by `hand_over`: announce nothing more
        self._since_ms = 0  # queries sent before this (ms since the epoch) are not answered
        self.answered = AnsweredQueries()  # said on a clean stop, for the next owner
        self._running: asyncio.Task[None] | None = None

    async def run(self) -> None:
        """Until cancelled or `stop`ped, or until the worker stops under it (its
        producer gone: `ServingStopped`), which ends serving, not the worker."""
        self._running = asyncio.current_task()
        try:
            await self._serve()
        except ServingStopped:
            log.info("the worker is stopping: no more queries answered here")

    async def stop(self) -> None:
        """End `run` (the worker is about to stop its producer): answer nothing
        more, and say up to which query each partition served here was answered."""
        task, self._running = self._running, None
        if task is not None and task is not asyncio.current_task() and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await self._say_answered()

    async def _say_answered(self) -> None:
        """For each partition this process served: the offset before which it
        answered every query it read as owner, on the owners topic, where it
        says more than the last one said (`streams.runtime.answered`)."""
        for partition in sorted(self._served_here):
            through = self.answered.through(partition)
            if through is None or through <= self.owners.answered.get(partition, 0):
                continue
            try:
                await self.log.send(self.settings.owners_topic, answered_key(partition), str(through).encode(),
                                OWNERS_PARTITIONS - 1)
            except (KafkaError, ServingStopped) as err:
                log.info("could not say which queries of partition %s were answered: %s", partition, err)
                return

    async def _serve(self) -> None:
        # Earliest by default, as `_assign` seeks: aiokafka applies a default reset already
        # under way when it returns, over a `seek_to_beginning` asked meanwhile (its offset
        # request does not check the strategy), and with "latest" a worker whose loop was busy
        # at start (a catch-up) read the owners topic from its end: blind to every announcement
        # and answered offset before it.
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.settings.bootstrap_servers(), enable_auto_commit=False, auto_offset_reset="earliest",
            fetch_max_wait_ms=self.settings.fetch_wait_ms(), check_crcs=False, **self.settings.kafka_options(),
        )
        await consumer.start()
        try:
            await self._assign(consumer)
            # Until the group has given this worker its partitions, it would take a query of a
            # partition about to be its own for another's and answer it never (its client would
            # wait its whole timeout); before then it serves no partition, so reading can wait.
            await self.recovery.first_assignment.wait()
            while True:
                batches = await consumer.getmany(timeout_ms=POLL_MS)
                for tp, records in batches.items():
                    for record in records:
                        await self._take(tp.topic, record)
                await self._announce()
                self._release_handed_over()
        finally:
            for task in self._held:
                task.cancel()
            await consumer.stop()

    async def _assign(self, consumer: AIOKafkaConsumer) -> None:
        """Every queries partition from one query timeout ago (older queries' clients
        have given up), every owners partition from its start (it is compacted: the
        latest word per partition)."""
        queries = [TopicPartition(self.settings.queries_topic, p) for p in range(self.settings.partitions)]
        owners = [TopicPartition(self.settings.owners_topic, p) for p in range(OWNERS_PARTITIONS)]
        consumer.assign(queries + owners)
        self._since_ms = int((time.time() - self.settings.query_timeout_s) * 1000)
        found = await consumer.offsets_for_times({tp: self._since_ms for tp in queries})
        for tp in queries:
            if found.get(tp) is None:
                # No answer by time (the embedded broker gives none; a real one, when no
                # query is that recent): read from the start, skipping the older ones.
                await consumer.seek_to_beginning(tp)
            else:
                consumer.seek(tp, found[tp].offset)
        await consumer.seek_to_beginning(*owners)

    async def _take(self, topic: str, record: Any) -> None:
        if topic == self.settings.owners_topic:
            self.owners.read(record.key, record.value)
            return
        partition, offset = record.partition, record.offset
        self.answered.read(partition, offset)
        if record.timestamp < self._since_ms:  # sent before this server started: its client has given up on it
            return
        if self._expired(record) or self._answered_before(record):
            return
        if partition in self.recovery.ready_partitions():
            await self._answer(record, covering=False)
        elif self.owners.announced_here(partition) and partition in self._served_here:
            self.answered.missed(partition, offset)
            await self._answer(record, covering=True)  # revoked, or given back and still catching up
        elif partition in self.recovery.assigned_partitions():
            # Catching up here: whoever was announced may be gone (a takeover), never was (a first
            # start), or be this worker before a restart (its state then lags the log: not covered).
            self._later(record, self._answer_when_ready(record))
        else:
            self.answered.missed(partition, offset)  # its owner answers it

    def _later(self, record: Any, answering: Coroutine[Any, Any, bool | None]) -> None:
        """`answering` run as a task of its own, held (cancelled if serving ends);
        True or None when it has answered the query as owner (`self.answered`)."""
        partition, offset = record.partition, record.offset
        self.answered.later(partition, offset)

        def done(task: asyncio.Task[bool | None]) -> None:
            self._held.discard(task)
            answered = not task.cancelled() and task.exception() is None and task.result() is not False
            self.answered.done(partition, offset, answered)

        task: asyncio.Task[bool | None] = asyncio.create_task(answering)
        self._held.add(task)
        task.add_done_callback(done)

    def _answered_before(self, record: Any) -> bool:
        """Whether the partition's previous owner answered this query before it
        stopped (it said so: `streams.runtime.answered`)."""
        if record.offset >= self.owners.answered.get(record.partition, 0):
            return False
        self.metrics.answered_before.inc()
        return True

    def _expired(self, record: Any) -> bool:
        """Whether the query's client has given up on it (counted): it was sent
        longer ago than its client waits (its header, `streams.kafka.requests`),
        or than the query timeout. Its client has asked again, if it still
        wants an answer, so answering it would only make the queries behind it
        wait, and a server that fell behind (a burst, a rebalance, a starved
        CPU, a catch-up that held queries) would stay behind. A partition's
        digests are kept as long as their client waits, which grows with the
        partition (`admin.live_digests`): not bounded by the query timeout,
        and without the header never given up."""
        age_s = time.time() - record.timestamp / 1000
        client_s = client_timeout_s(record.headers)
        if age_s <= min(self.settings.query_timeout_s, client_s or math.inf):
            return False
        if _asks_digests(record.value) and (client_s is None or age_s <= client_s):
            return False
        self.metrics.expired.inc()
        return True

    async def _answer_when_ready(self, record: Any) -> bool:
        """Held while the partition caught up: its client may have given up
        meanwhile, or its previous owner answered it (said once caught up, as
        the owners topic is read meanwhile). False if the partition was revoked."""
        if not await self.recovery.wait(record.partition):
            return False
        if not self._expired(record) and not self._answered_before(record):
            if _digest_query(record.value) is not None:
                # Every query held for the partition wakes now: digests (a
                # verification: a quarter of a second for a graph of 3,000 turns)
                # once the queries that woke with them, whose clients wait a
                # second or so, are answered and their replies sent.
                await asyncio.sleep(0)  # those queries start first
                while self._held_answering:
                    self._held_answered.clear()
                    await self._held_answered.wait()
                await self._answer(record, covering=False)
                return True
            self._held_answering += 1
            try:
                await self._answer(record, covering=False)
            finally:
                self._held_answering -= 1
                if not self._held_answering:
                    self._held_answered.set()
        return True

    async def _answer(self, record: Any, covering: bool) -> None:
        try:
            request = guarded(decode_request, record.value)
        except DecodeError as err:
            # Whoever answers the partition dead-letters it (twice, in the instant of an
            # announcement: a duplicate dead letter rather than a lost one).
            await self.log.dead_letter(record, err)
            return
        if covering and isinstance(request, DigestQuery):
            return
        if isinstance(request, DigestQuery):
            # A digest states the partition's offset: not part way through a batch, when
            # each graph is at an offset of its own (`PartitionStates.folding`).
            await self.states.settled(record.partition)
        worker = self.states.worker(record.partition)
        if isinstance(request, DigestQuery) and request.graph_id is None:
            # Every graph of the partition: seconds of hashing, done on a thread, of
            # the state as of this moment, while this server goes on to the next query.
            self._later(record, self._send_digests(request, record.partition, worker.digests_later(request)))
            return
        reply, due = worker.on_request(request, time.perf_counter)
        self._count(request, reply, covering)
        await self.log.send(request.reply_to, request.request_id.encode(), encode(reply), None)
        if not covering:
            await self.log.append(due)

    async def _send_digests(self, request: DigestQuery, partition: int, digests: Callable[[], Reply]) -> None:
        reply = await self.states.in_thread(partition, digests)
        self._count(request, reply, covering=False)
        await self.log.send(request.reply_to, request.request_id.encode(), encode(reply), None)

    def _count(self, request: Any, reply: Reply, covering: bool) -> None:
        self.metrics.queries.labels(request.type, getattr(reply, "code", "ok")).inc()
        if covering:
            self.metrics.covered.inc()
        if isinstance(reply, ActivationReply):
            self.metrics.latency.observe(reply.timings.total_ms / 1000.0)

    async def hand_over(self, leave_group: Callable[[], Awaitable[None]], timeout_s: float) -> list[int]:
        """Before this worker stops: leave the group, so its partitions move now,
        and keep answering them (covering) until each is announced by its new
        owner, for `timeout_s` at most. The partitions not handed over. A worker
        alone (no other worker has ever announced a partition) stops at once."""
        mine = [p for p in range(self.settings.partitions) if self.owners.announced_here(p)]
        self.leaving = True
        others = set(self.owners.latest.values()) - {self.owners.me}
        if not mine or not others:  # nobody else has ever announced a partition: no one to hand over to
            return mine
        await leave_group()
        deadline = time.monotonic() + timeout_s
        while any(self.owners.announced_here(p) for p in mine) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        left = [p for p in mine if self.owners.announced_here(p)]
        log.info("handed over partitions %s%s", [p for p in mine if p not in left],
                 f"; not in {timeout_s:g} s: {left}" if left else "")
        return left

    async def _announce(self) -> None:
        """Name this worker the owner of each partition newly ready here."""
        ready = set(self.recovery.ready_partitions()) if not self.leaving else set()
        self._announced &= ready
        for partition in sorted(ready - self._announced):
            try:
                await self.log.send(self.settings.owners_topic, str(partition).encode(),
                                self.settings.worker_name.encode(), OWNERS_PARTITIONS - 1)
            except KafkaError as err:
                log.warning("could not announce partition %s: %s (trying again)", partition, err)
                return
            self._announced.add(partition)
            self._served_here.add(partition)
            log.info("partition %s: announced as served here", partition)

    def _release_handed_over(self) -> None:
        """Close the state of each partition revoked here once another worker has
        announced it: nothing is left to cover, and a worker's memory then follows
        the partitions it holds (`PartitionStates.release`, then the freed pages
        handed back to the system: `return_freed_memory`)."""
        assigned = set(self.recovery.assigned_partitions())
        released = []
        for partition in self.states.open_partitions():
            if partition in assigned or not self.owners.announced_elsewhere(partition):
                continue
            if self.states.release(partition):
                self._served_here.discard(partition)
                released.append(partition)
                log.info("partition %s: served by %s now; its state here is closed",
                         partition, self.owners.latest[partition])
        if released:
            return_freed_memory()


OWNERS_PARTITIONS = 1  # a handful of small records: one partition keeps them in order


def _digest_query(raw: bytes) -> DigestQuery | None:
    """The digest query (of a graph or a partition) a query record holds; None
    for any other request, and for anything undecodable."""
    try:
        request = decode_request(raw)
    except DecodeError:
        return None
    return request if isinstance(request, DigestQuery) else None


def _asks_digests(raw: bytes) -> bool:
    """Whether a query record asks a partition's digests (a verification, whose
    client waits longer than a query's timeout); anything undecodable is not."""
    query = _digest_query(raw)
    return query is not None and query.graph_id is None
