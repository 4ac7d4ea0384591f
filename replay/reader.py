"""Reading ranges of a topic partition back from Kafka (plain aiokafka).

No consumer group: partitions are assigned by hand and read between two
offsets, so a reader never joins a rebalance and never moves anyone's
committed position. Live recovery and offline replay both read with it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Mapping, Protocol

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError
from aiokafka.partitioner import murmur2

from emgas.replay.errors import LogTruncated, LogUnavailable



class SealedOpener(Protocol):
    """What opens the sealed records a reader reads (`replay.keyring.KeyRing` is one)."""

    async def open(self, partition: int, values: list[bytes], times_ms: Callable[[int], int]) -> list[bytes]:
        """The values of one partition's records, each sealed one whose key is known opened."""
        ...

    async def close(self) -> None:
        ...

# Records fetched per partition per request: big, because a reader streams.
FETCH_BYTES = 8 * 1024 * 1024
# For a read of a few records (a log's first ones, one offset): the broker
# still returns a whole first batch however large, so nothing is missed,
# and 8 MB of records after them are neither sent nor parsed (aiokafka
# parses every record it fetches: about 0.1 s for 8 MB of graph events).
FEW_RECORDS_BYTES = 64 * 1024
RETRY_BACKOFF_MS = 10


def partition_of(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner (Java, aiokafka, Faust) gives `key`."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def _times(records: list[Any]) -> Callable[[int], int]:
    """The Kafka timestamp of the `k`th of `records`."""
    return lambda k: records[k].timestamp


@dataclass(frozen=True)
class LogRecord:
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes


class LogReader:
    """Use as `async with LogReader(servers) as reader: ...`."""

    def __init__(
        self,
        bootstrap_servers: str,
        fetch_max_wait_ms: int = 10,
        timeout_s: float = 10.0,
        client_options: Mapping[str, Any] | None = None,
        keys: SealedOpener | None = None,
        own_keys: bool = False,
    ) -> None:
        """`client_options`: extra aiokafka options (security, see `streams.kafka.security`);
        `keys`: the key ring that opens the sealed records read (`replay.keyring`), closed
        with the reader when `own_keys`."""
        self._servers = bootstrap_servers
        self.keys, self._own_keys = keys, own_keys
        self._timeout_s = timeout_s
        self._reads = 0  # reads begun, so that one ending late does not pause the next
        self._consumer = AIOKafkaConsumer(
            **(client_options or {}),
            bootstrap_servers=bootstrap_servers,
            enable_auto_commit=False,
            auto_offset_reset="none",  # a position outside the log is an error, not a silent jump
            fetch_max_wait_ms=fetch_max_wait_ms,
            max_partition_fetch_bytes=FETCH_BYTES,
            fetch_max_bytes=FETCH_BYTES * 4,
            check_crcs=False,  # the mock cluster writes CRC 0 on control batches
            isolation_level="read_committed",
            # The first offsets asked of a topic wait one backoff for its
            # metadata (aiokafka asks for it, then sleeps before it tries
            # again): 0.1 s of a takeover at aiokafka's default.
            retry_backoff_ms=RETRY_BACKOFF_MS,
        )

    async def __aenter__(self) -> "LogReader":
        try:
            await asyncio.wait_for(self._consumer.start(), self._timeout_s)
        except (KafkaError, OSError, asyncio.TimeoutError) as exc:
            await self._consumer.stop()
            raise LogUnavailable(f"cannot reach Kafka at {self._servers}: {exc!r}") from None
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._consumer.stop()
        if self.keys is not None and self._own_keys:
            await self.keys.close()

    async def partitions(self, topic: str) -> list[int]:
        # The consumer's own `partitions_for_topic` only knows topics it has
        # already seen, so fetch fresh metadata (aiokafka has no public call).
        try:
            cluster = await asyncio.wait_for(self._consumer._client.fetch_all_metadata(), self._timeout_s)
        except (KafkaError, asyncio.TimeoutError) as exc:
            raise LogUnavailable(f"cannot read the metadata of {topic!r}: {exc!r}") from None
        parts = cluster.partitions_for_topic(topic)
        if not parts:
            raise LogUnavailable(f"topic {topic!r} does not exist")
        return sorted(parts)

    async def bounds(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
        """partition -> (first offset still in the log, end offset = next to be written)."""
        tps = [TopicPartition(topic, p) for p in partitions]
        try:
            # Both asked at once: one round trip to the partitions' leaders, not two.
            starts, ends = await asyncio.wait_for(
                asyncio.gather(self._consumer.beginning_offsets(tps), self._consumer.end_offsets(tps)), self._timeout_s)
        except (KafkaError, asyncio.TimeoutError) as exc:
            raise LogUnavailable(f"cannot read the offsets of {topic!r}: {exc!r}") from None
        return {tp.partition: (starts[tp], ends[tp]) for tp in tps}

    async def read(
        self, topic: str, partition: int, start: int, stop: int, fetch_bytes: int = FETCH_BYTES,
        open_sealed: bool = True,
    ) -> AsyncIterator[list[LogRecord]]:
        """Batches of the records with start <= offset < stop, in offset order,
        fetched `fetch_bytes` at a time (`FEW_RECORDS_BYTES` for a few records).
        Sealed records come opened by the reader's keys; with `open_sealed`
        False, as the log holds them (a scan for records that are never
        sealed, a log's start or its checkpoints, waits for no key).

        LogTruncated if `start` is below the first offset still retained
        (records would be missing from the rebuild).
        """
        if start >= stop:
            return
        tp = TopicPartition(topic, partition)
        first, _ = (await self.bounds(topic, [partition]))[partition]
        if start < first:
            raise LogTruncated(
                f"{topic}[{partition}] starts at offset {first} now: offsets {start}..{first - 1} "
                "were dropped by retention and cannot be replayed"
            )
        self._reads += 1
        this_read = self._reads
        self._fetch_bytes(fetch_bytes)
        self._consumer.assign([tp])
        self._consumer.seek(tp, start)
        position = start
        try:
            while position < stop:
                fetched = records = await self._fetch(tp)
                if not records:
                    position = await self._position(tp)
                    if position >= stop:
                        break  # only control records (transaction markers) were left
                    raise LogUnavailable(f"{topic}[{partition}]: no records at offset {position} within {self._timeout_s:g} s")
                records = [r for r in records if r.offset < stop]
                values = [r.value for r in records]
                if records and self.keys is not None and open_sealed:  # sealed turns and snapshots: what was sealed
                    values = await self.keys.open(partition, values, _times(records))
                batch = [LogRecord(partition, r.offset, r.timestamp, r.key, v) for r, v in zip(records, values)]
                position = fetched[-1].offset + 1
                if batch:
                    yield batch
        finally:
            # The consumer fetches ahead of what was taken; records past the
            # range (up to `fetch_bytes` more) would be fetched and parsed
            # in the background for nothing while the caller goes on. A read
            # left early ends when its generator is collected, maybe after
            # the next read has begun: that one is not paused.
            if self._reads == this_read:
                self._consumer.pause(tp)

    def _fetch_bytes(self, limit: int) -> None:
        """The per-partition fetch size from the next fetch on. aiokafka
        takes it only at construction; its fetcher reads this attribute
        for every request (`tests/unit/replay/test_logstate.py` checks it is there)."""
        self._consumer._fetcher._max_partition_fetch_bytes = limit

    async def _fetch(self, tp: TopicPartition) -> list[Any]:
        """The next records of `tp` (none within the timeout: []); LogUnavailable
        for a broker error (a leader lost, an offset out of range)."""
        try:
            fetched = await self._consumer.getmany(tp, timeout_ms=int(self._timeout_s * 1000))
        except KafkaError as exc:
            raise LogUnavailable(f"{tp.topic}[{tp.partition}]: cannot fetch: {exc!r}") from None
        return fetched.get(tp, [])

    async def _position(self, tp: TopicPartition) -> int:
        try:
            return await asyncio.wait_for(self._consumer.position(tp), self._timeout_s)
        except (KafkaError, asyncio.TimeoutError) as exc:
            raise LogUnavailable(f"{tp.topic}[{tp.partition}]: no position: {exc!r}") from None
