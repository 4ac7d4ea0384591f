"""The data keys of a log's sealed records, and opening them (`processors.sealing`).

Each data key is a record of the key topic (`emgas.keys`, compacted), keyed
by its graph and key id, in the partition of its graph (the partition
of the graph's events in `emgas.graph-events`), its value the key wrapped
by the key-encryption key. A key's writer waits for its acknowledgement
before it appends the record the key seals, so a reader that has read a
key partition to its end knows every key of the sealed records it has
read of that partition; one it does not know then is gone (a tombstone,
written when its turn was forgotten, or compacted away after one).

Opening gives back each sealed record with the bytes that were sealed,
so the fold sees what an unsealed log holds; a record whose key is gone
stays sealed, and the fold applies nothing for it (`Outcome.ERASED`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from typing import Callable, Iterable, TypeVar

from emgas.processors.sealing import (
    Envelope, KeyEncryptionKey, SealError, envelope_of, graph_key_prefix, is_sealed, open_sealed,
)
from emgas.replay.errors import LogUnavailable
from emgas.replay.reader import LogReader

log = logging.getLogger(__name__)
R = TypeVar("R")
# A key written just before its record may not be readable yet where the
# key topic is replicated (the high watermark moves after the followers
# fetch): a missing key of a record this recent is read for again, every
# RETRY_S, before it counts as gone.
RECENT_MS = 30_000
RETRY_S = 0.05
RETRIES = 60


class KeysUnavailable(LogUnavailable):
    """Sealed records and no key-encryption key to open them, or keys
    wrapped by another one: the fold would silently miss their turns."""


class KeyRing:
    """The data keys of the partitions read so far (wrapped, as the topic
    holds them) and of the records sealed here. Use one per process and
    `close` it; `reader` makes the reader of the key topic when first needed."""

    def __init__(self, kek: KeyEncryptionKey | None, topic: str, reader: Callable[[], LogReader]) -> None:
        self.kek, self.topic = kek, topic
        self._make_reader = reader
        self._reader: LogReader | None = None
        self._wrapped: dict[int, dict[bytes, bytes]] = {}  # partition -> record key -> key record value
        self._read_to: dict[int, int] = {}  # partition -> next offset of the key topic to read
        self._locks: dict[int, asyncio.Lock] = {}
        self.erased = 0  # sealed records met whose key is gone

    def add(self, partition: int, key: bytes, value: bytes) -> None:
        """A key this process wrote (so its own records open without a read)."""
        self._wrapped.setdefault(partition, {})[key] = value

    def drop(self, partition: int, keys: Iterable[bytes]) -> None:
        """Keys this process erased (tombstones written)."""
        held = self._wrapped.get(partition, {})
        for key in keys:
            held.pop(key, None)

    def graphs(self, partition: int) -> set[str]:
        """The graphs with keys held of `partition`."""
        return {k.partition(b"\x00")[0].decode() for k in self._wrapped.get(partition, {}) if not k.startswith(b"\x00")}

    def graph_keys(self, partition: int, graph_id: str, prefix: str = "") -> list[bytes]:
        """The record keys held of `graph_id` whose key id starts with `prefix`."""
        start = graph_key_prefix(graph_id) + prefix.encode()
        return sorted(k for k in self._wrapped.get(partition, {}) if k.startswith(start))

    async def open(self, partition: int, records: list[R], timestamp_ms: Callable[[R], int]) -> list[R]:
        """`records` of one partition of the graph-events topic, each sealed
        one whose key is known (after reading the key partition to its end)
        with the bytes that were sealed in its `value`."""
        sealed = [(k, envelope_of(r.value)) for k, r in enumerate(records) if is_sealed(r.value)]  # type: ignore[attr-defined]
        if not sealed:
            return records
        if self.kek is None:
            raise KeysUnavailable(
                "the log holds sealed turns and no key-encryption key is configured "
                "(EMGAS_KEY_ENCRYPTION_KEY or EMGAS_KEY_ENCRYPTION_KEY_FILE: the one its workers use)"
            )
        missing = [e.key for _, (e, _) in sealed if e.key not in self._wrapped.get(partition, {})]
        if missing:
            newest = max(timestamp_ms(records[k]) for k, (e, _) in sealed if e.key in set(missing))
            await self._read_until_known(partition, set(missing), newest)
        opened = list(records)
        held = self._wrapped.get(partition, {})
        for k, (envelope, data) in sealed:
            value = held.get(envelope.key)
            if value is None:
                self.erased += 1
                log.debug("sealed %s of graph %r: its key is gone", envelope.key_id, envelope.graph_id)
                continue
            opened[k] = dataclasses.replace(records[k], value=self._open(envelope, data, value))  # type: ignore[type-var]
        return opened

    def _open(self, envelope: Envelope, data: str, value: bytes) -> bytes:
        assert self.kek is not None
        try:
            return open_sealed(envelope, data, self.kek.unwrap(value))
        except SealError as err:
            raise KeysUnavailable(f"{self.topic}: {err}") from None

    async def _read_until_known(self, partition: int, missing: set[bytes], newest_ms: int) -> None:
        """Read the key partition to its end; again, a moment later, while a
        key is missing for a record written in the last `RECENT_MS`."""
        for _ in range(RETRIES):
            await self.refresh(partition)
            held = self._wrapped.get(partition, {})
            if all(k in held for k in missing) or time.time() * 1000 - newest_ms > RECENT_MS:
                return
            await asyncio.sleep(RETRY_S)

    async def refresh(self, partition: int) -> None:
        """Read the key topic's `partition` from where it was left to its end."""
        async with self._locks.setdefault(partition, asyncio.Lock()):
            reader = await self._started()
            first, end = (await reader.bounds(self.topic, [partition]))[partition]
            start = max(first, self._read_to.get(partition, first))
            held = self._wrapped.setdefault(partition, {})
            async for batch in reader.read(self.topic, partition, start, end):
                for record in batch:
                    if record.key is None:
                        continue
                    if record.value is None:
                        held.pop(record.key, None)  # a tombstone: the key is erased
                    else:
                        held[record.key] = record.value
            self._read_to[partition] = max(start, end)

    async def _started(self) -> LogReader:
        if self._reader is None:
            reader = self._make_reader()
            await reader.__aenter__()
            self._reader = reader
        return self._reader

    async def close(self) -> None:
        if self._reader is not None:
            reader, self._reader = self._reader, None
            await reader.__aexit__(None, None, None)
