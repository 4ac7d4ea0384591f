"""A Python client: publish turns, ask activation and digest queries, await replies.

Plain aiokafka (murmur2 key partitioning, like the Java client), so it
behaves like any other Kafka client. Replies are read from every partition
of the reply topic by manual assignment (no consumer group, no rebalance
wait) and matched to requests by `request_id`.
"""

from __future__ import annotations

import asyncio
import logging
import itertools
import uuid
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Iterator, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError
from pydantic import ValidationError

from emgas.processors.codec import decode_reply, encode
from emgas.processors.errors import DecodeError
from emgas.processors.events import (
    ActivationQuery, ContentEvent, DigestQuery, DigestReply, Forget, PassageQuery, SnapshotStarted, QueryParams, Reply, StatsQuery, Turn,
    TurnIngested,
)
from emgas.streams.kafka.partitioner import KeyPartitioner
from emgas.streams.kafka.reader import key_ring
from emgas.streams.kafka.sealer import Sealer
from emgas.streams.kafka.requests import timeout_header
from emgas.streams.kafka.security import connection_reasons, unreachable
from emgas.streams.errors import BrokerError, QueryTimeout, RequestError
from emgas.streams.logs import quiet_transient_kafka_errors
from emgas.streams.settings import PRODUCE_BATCH_BYTES, Settings

FORGET_POLL_S = 0.2  # how often `forget` asks whether its request has been applied
log = logging.getLogger(__name__)
PUBLISH_CHUNK = 500  # records sent before their acks are awaited
T = TypeVar("T")


def chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """`items` in lists of at most `size`, in order."""
    iterator = iter(items)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


def forget_request(graph_id: str, turn_ids: Iterable[str] = (), whole_graph: bool = False) -> Forget:
    """A request to forget these turns of `graph_id`, or the whole graph."""
    try:
        return Forget(
            graph_id=graph_id, request_id=uuid.uuid4().hex, timestamp=datetime.now(timezone.utc),
            turn_ids=tuple(turn_ids), whole_graph=whole_graph,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "request"
        raise RequestError(f"invalid forget request ({where}): {first['msg']}") from None


class MemoryClient:
    """Use as `async with MemoryClient(settings) as client: ...`."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._servers = settings.bootstrap_servers()
        self._producer: AIOKafkaProducer | None = None
        self._replies: AIOKafkaConsumer | None = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: dict[str, asyncio.Future[Reply]] = {}
        self._listen_lock = asyncio.Lock()
        self._warned_partitions = False

    async def __aenter__(self) -> "MemoryClient":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        quiet_transient_kafka_errors()
        self._producer = AIOKafkaProducer(
            bootstrap_servers=self._servers, acks="all", enable_idempotence=True, linger_ms=0,
            max_batch_size=PRODUCE_BATCH_BYTES, partitioner=KeyPartitioner(), **self.settings.kafka_options()
        )
        try:
            with connection_reasons() as reasons:
                await asyncio.wait_for(self._producer.start(), self.settings.query_timeout_s)
        except (KafkaError, OSError, asyncio.TimeoutError) as exc:
            await self._producer.stop()
            self._producer = None
            raise BrokerError(unreachable(self._servers, exc, reasons, self.settings.kafka)) from None

    async def close(self) -> None:
        """Stop reading replies and the producer, each within the query timeout
        (a producer flushing sends to a broker that went away would otherwise wait for ever)."""
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
        for client in (self._replies, self._producer):
            if client is not None:
                try:
                    await asyncio.wait_for(client.stop(), self.settings.query_timeout_s)
                except asyncio.TimeoutError:
                    log.warning("a Kafka client did not stop within %g s; left behind", self.settings.query_timeout_s)

    async def publish(
        self, turns: Iterable[Turn], chunk: int = PUBLISH_CHUNK, progress: Callable[[int], None] | None = None
    ) -> int:
        """Send turns to the turns topic, keyed by graph_id, `chunk` at a time,
        each chunk acked before the next (`progress(n)` after each); returns the count."""
        return await self._send_keyed(self.settings.turns_topic, turns, chunk, progress)

    async def ask(
        self,
        graph_id: str,
        text: str | None = None,
        seeds: tuple[str, ...] = (),
        params: QueryParams | None = None,
        timeout_s: float | None = None,
        graph_version: int | None = None,
        reinforce: bool = True,
        at: datetime | None = None,
    ) -> Reply:
        """Send an activation query and wait for its reply (QueryTimeout if none comes)."""
        query = ActivationQuery(
            request_id=uuid.uuid4().hex, graph_id=graph_id, graph_version=graph_version,
            text=text, seeds=seeds, reply_to=self.settings.replies_topic, params=params or QueryParams(),
            reinforce=reinforce, at=at,
        )
        return await self._request(query, f"graph {graph_id!r}", timeout_s, key=graph_id.encode())

    async def stats(self, graph_id: str, top: int = 10, timeout_s: float | None = None) -> Reply:
        """A graph's size and its `top` most mentioned concepts (a StatsReply, or an ErrorReply)."""
        query = StatsQuery(request_id=uuid.uuid4().hex, graph_id=graph_id, top=top, reply_to=self.settings.replies_topic)
        return await self._request(query, f"graph {graph_id!r}", timeout_s, key=graph_id.encode())

    async def passages(
        self, graph_id: str, turn_ids: Iterable[str] = (), prefix: str | None = None, timeout_s: float | None = None
    ) -> Reply:
        """The passages of these turns the graph holds, and those whose turn id
        starts with `prefix` (a PassagesReply, or an ErrorReply)."""
        query = PassageQuery(
            request_id=uuid.uuid4().hex, graph_id=graph_id, turn_ids=tuple(turn_ids), turn_id_prefix=prefix,
            reply_to=self.settings.replies_topic,
        )
        return await self._request(query, f"graph {graph_id!r}", timeout_s, key=graph_id.encode())

    async def digests(self, graph_id: str | None = None, timeout_s: float | None = None) -> list[Reply]:
        """The live digests: of `graph_id`'s versions (one reply), or of every
        graph (one reply per partition of the queries topic)."""
        if graph_id is not None:
            query = DigestQuery(request_id=uuid.uuid4().hex, graph_id=graph_id, reply_to=self.settings.replies_topic)
            return [await self._request(query, f"graph {graph_id!r}", timeout_s, key=graph_id.encode())]
        requests = [
            self._request(
                DigestQuery(request_id=uuid.uuid4().hex, reply_to=self.settings.replies_topic),
                f"partition {p}", timeout_s, partition=p,
            )
            for p in await self.query_partitions()
        ]
        return list(await asyncio.gather(*requests))

    async def partition_count(self, topic: str) -> int:
        """How many partitions `topic` has, from the broker's metadata."""
        assert self._producer is not None, "client not started"
        try:
            found = await asyncio.wait_for(self._producer.partitions_for(topic), self.settings.query_timeout_s)
        except (KafkaError, asyncio.TimeoutError):
            raise BrokerError(f"topic {topic!r} does not exist (has a worker started on this broker?)") from None
        return len(found)

    async def query_partitions(self) -> list[int]:
        """Every partition of the queries topic, as its metadata says: a
        request for every graph must reach them all, whatever this client's
        `partitions` setting (a disagreeing one is said once, as a warning)."""
        count = await self.partition_count(self.settings.queries_topic)
        if count != self.settings.partitions and not self._warned_partitions:
            self._warned_partitions = True
            log.warning(
                "topic %s has %d partitions, not the %d of EMGAS_PARTITIONS: asking all %d "
                "(set EMGAS_PARTITIONS=%d to match)",
                self.settings.queries_topic, count, self.settings.partitions, count, count,
            )
        return list(range(count))

    async def append_event(self, event: ContentEvent | SnapshotStarted) -> tuple[int, int]:
        """Append one graph event keyed by its graph; its (partition, offset) once acknowledged."""
        assert self._producer is not None, "client not started"
        sent = await self._producer.send_and_wait(self.settings.graph_events_topic, encode(event), key=event.graph_id.encode())
        return sent.partition, sent.offset

    async def emit(self, events: Iterable[ContentEvent], progress: Callable[[int], None] | None = None) -> int:
        """Append graph events to the graph-events topic, keyed by graph_id (admin use:
        re-derived versions, version switches), a chunk at a time; waits for every ack.
        Turns are sealed as a worker seals them (`streams.kafka.sealer`), where
        sealing is on and this process has the key-encryption key."""
        assert self._producer is not None, "client not started"
        sealer = self._sealer()
        sent = 0
        for batch in chunks(events, PUBLISH_CHUNK):
            values = await _sealed_values(sealer, batch)
            futures = [await self._producer.send(self.settings.graph_events_topic, value, key=e.graph_id.encode())
                       for e, value in zip(batch, values)]
            await asyncio.gather(*futures)
            sent += len(futures)
            if progress is not None:
                progress(len(futures))
        return sent

    def _sealer(self) -> Sealer | None:
        kek = self.settings.kek() if self.settings.seal else None
        if self.settings.seal and kek is None:
            log.warning("no key-encryption key here (EMGAS_KEY_ENCRYPTION_KEY, EMGAS_KEY_ENCRYPTION_KEY_FILE or "
                        "%s/key-encryption-key): the turns are written to the log unsealed", self.settings.home)
        if kek is None:
            return None
        producer = self._producer
        assert producer is not None

        async def produce(topic: str, key: bytes, value: bytes | None, partition: int) -> Any:
            return await producer.send(topic, value, key=key, partition=partition)

        return Sealer(kek, key_ring(self.settings, kek), self.settings.keys_topic, self.settings.partitions, produce,
                      reads_back=False)

    async def forget(self, event: Forget, timeout_s: float | None = None) -> int:
        """Append a forget request (see `forget_request`) and wait until the
        graph's worker has applied it; returns its log offset. A digest poll
        no worker answers (a hand-over under way, a worker still starting) is
        asked again until `timeout_s` (default: the query timeout) has passed."""
        graph_id = event.graph_id
        assert self._producer is not None, "client not started"
        sent = await self._producer.send_and_wait(self.settings.graph_events_topic, encode(event), key=graph_id.encode())
        timeout = timeout_s or self.settings.query_timeout_s
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            poll_s = max(0.1, min(deadline - loop.time(), self.settings.query_timeout_s))
            try:
                [reply] = await self.digests(graph_id, poll_s)
            except QueryTimeout:
                reply = None
            if isinstance(reply, DigestReply) and reply.applied_offset >= sent.offset:
                return sent.offset
            if loop.time() > deadline:
                raise QueryTimeout(
                    f"the forget request for graph {graph_id!r} (log offset {sent.offset}) is in the log "
                    f"but was not applied within {timeout:g} s; it will be when a worker runs"
                )
            await asyncio.sleep(FORGET_POLL_S)

    async def _send_keyed(
        self, topic: str, events: Iterable[Turn | ContentEvent], chunk: int, progress: Callable[[int], None] | None
    ) -> int:
        """Send keyed by graph_id; a chunk's acks are awaited before the next is sent,
        so a long file holds at most one chunk in flight."""
        assert self._producer is not None, "client not started"
        sent = 0
        for batch in chunks(events, chunk):
            futures = [await self._producer.send(topic, encode(e), key=e.graph_id.encode()) for e in batch]
            await asyncio.gather(*futures)
            sent += len(futures)
            if progress is not None:
                progress(len(futures))
        return sent

    async def _request(
        self, request: ActivationQuery | DigestQuery | StatsQuery | PassageQuery, about: str, timeout_s: float | None,
        key: bytes | None = None, partition: int | None = None,
    ) -> Reply:
        assert self._producer is not None, "client not started"
        await self._listen()
        waiter = self._pending[request.request_id] = asyncio.get_running_loop().create_future()
        timeout = timeout_s or self.settings.query_timeout_s
        deadline = asyncio.get_running_loop().time() + timeout
        try:
            # The send too is bounded: a request never waits past its timeout.
            await asyncio.wait_for(self._producer.send_and_wait(
                self.settings.queries_topic, encode(request), key=key, partition=partition,
                headers=timeout_header(timeout),  # a worker skips the request once this client gave up
            ), timeout)
            return await asyncio.wait_for(waiter, max(0.0, deadline - asyncio.get_running_loop().time()))
        except asyncio.TimeoutError:
            raise QueryTimeout(
                f"no reply to request {request.request_id} for {about} within {timeout:g} s "
                "(is a worker running?)"
            ) from None
        finally:
            self._pending.pop(request.request_id, None)

    async def _listen(self) -> None:
        """Start reading the reply topic from its current end (once, even when
        called by several concurrent requests)."""
        async with self._listen_lock:
            if self._replies is None:
                await self._start_listening()

    async def _start_listening(self) -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self._servers, enable_auto_commit=False,
            fetch_max_wait_ms=self.settings.fetch_wait_ms(), **self.settings.kafka_options(),
        )
        topic = self.settings.replies_topic
        assert self._producer is not None
        try:
            partitions = await asyncio.wait_for(
                self._producer.partitions_for(topic), self.settings.query_timeout_s
            )
        except (KafkaError, asyncio.TimeoutError):
            raise BrokerError(f"reply topic {topic!r} does not exist") from None
        await consumer.start()
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_end(*tps)
        for tp in tps:  # resolve positions now, so no reply sent after this is missed
            await consumer.position(tp)
        self._replies = consumer
        self._reader = asyncio.create_task(self._read_replies(consumer))

    async def _read_replies(self, consumer: AIOKafkaConsumer) -> None:
        async for message in consumer:
            try:
                reply = decode_reply(message.value)
            except DecodeError:
                continue  # not ours to judge: another client's garbage
            waiter = self._pending.get(reply.request_id or "")
            if waiter is not None and not waiter.done():
                waiter.set_result(reply)


async def _sealed_values(sealer: Sealer | None, events: list[ContentEvent]) -> list[bytes]:
    """Each event's bytes, its turns sealed (their keys written first) when `sealer`."""
    values = [encode(e) for e in events]
    if sealer is None:
        return values
    turns = [k for k, e in enumerate(events) if isinstance(e, TurnIngested)]
    sealed = await sealer.seal_turns([
        (events[k].graph_id, events[k].turn_id, events[k].timestamp.isoformat(), values[k])  # type: ignore[union-attr]
        for k in turns
    ])
    for k, value in zip(turns, sealed):
        values[k] = value
    return values
