"""The data keys of a log's sealed records, and opening them (`processors.sealing`).

Data keys are kept in key sets, each a record of the key topic
(`emgas.keys`, compacted), keyed by its graph and set id, in the
partition of its graph (the partition of the graph's events in
`emgas.graph-events`), its value the set's keys encrypted under the
key-encryption key. A set's writer waits for its acknowledgement before it
appends the records its keys seal, so a reader that has read a key
partition to its end knows every key of the sealed records it has read
of that partition; one it does not know then is gone (its set written
again without it when its turn was forgotten, or a tombstone).

Opening gives back each sealed record with the bytes that were sealed,
so the fold sees what an unsealed log holds; a record whose key is gone
stays sealed, and the fold applies nothing for it (`Outcome.ERASED`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

from emgas.processors.sealing import (
    SEALED_PREFIX, Envelope, KeyEncryptionKey, SealError, envelope_of, graph_key_prefix, open_sealed,
)
from emgas.replay.errors import LogUnavailable, ReplayError
from emgas.replay.reader import LogReader

log = logging.getLogger(__name__)
# A key written just before its record may not be readable yet where the
# key topic is replicated (the high watermark moves after the followers
# fetch): a missing key of a record this recent is read for again, every
# RETRY_S, before it counts as gone.
RECENT_MS = 30_000
RETRY_S = 0.05
RETRIES = 60
PLAIN_HELD = 20_000  # turns sealed here and not yet read back (about 1 KB each)
OPENED_HELD = 200_000  # data keys of the key sets opened, kept at once (about 200 bytes each)


NO_KEK = ("the log holds sealed turns and no key-encryption key is configured "
          "(EMGAS_KEY_ENCRYPTION_KEY or EMGAS_KEY_ENCRYPTION_KEY_FILE: the one its workers use)")


class KeysUnavailable(LogUnavailable):
    """Sealed records and no key-encryption key to open them, or keys
    wrapped by another one: the fold would silently miss their turns."""


class KeyRing:
    """The key sets of the partitions read so far (as the topic holds them,
    opened when first used) and of the records sealed here. Use one per
    process and `close` it; `reader` makes the reader of the key topic when
    first needed."""

    def __init__(self, kek: KeyEncryptionKey | None, topic: str, reader: Callable[[], LogReader]) -> None:
        self.kek, self.topic = kek, topic
        self._make_reader = reader
        self._reader: LogReader | None = None
        self._sets: dict[int, dict[bytes, bytes]] = {}  # partition -> record key -> the key set's record value
        self._opened: dict[bytes, dict[str, bytes]] = {}  # record key -> key id -> data key, of the sets used
        self._flat: dict[tuple[str, str], bytes] = {}  # (graph, key id) -> data key, of the sets used
        self._read_to: dict[int, int] = {}  # partition -> next offset of the key topic to read
        self._reading = asyncio.Lock()  # one read of the key topic at a time: its reader reads one partition at a time
        self.erased = 0  # sealed records met whose key is gone
        # key id -> the bytes this process sealed under it, until it reads the record back
        # (a worker folds the turns it extracted: opening them again would cost their decryption)
        self._plain: dict[str, bytes] = {}

    def add(self, partition: int, key: bytes, value: bytes | None) -> None:
        """A key set this process wrote (None: erased), so its own records open without a read."""
        held = self._sets.setdefault(partition, {})
        if value is None:
            held.pop(key, None)
        else:
            held[key] = value
        old = self._opened.pop(key, None)
        if old:
            graph_id = key.partition(b"\x00")[0].decode()
            for key_id in old:
                self._flat.pop((graph_id, key_id), None)

    def remember(self, key_id: str, event: bytes) -> None:
        """What this process sealed under `key_id`, so that reading it back costs no decryption
        (`PLAIN_HELD` at most: the oldest go, read back by another worker or not at all)."""
        self._plain[key_id] = event
        if len(self._plain) > PLAIN_HELD:
            del self._plain[next(iter(self._plain))]

    def graphs(self, partition: int) -> set[str]:
        """The graphs with key sets held of `partition`."""
        return {k.partition(b"\x00")[0].decode() for k in self._sets.get(partition, {}) if not k.startswith(b"\x00")}

    def graph_sets(self, partition: int, graph_id: str, prefix: str = "") -> list[bytes]:
        """The record keys of the key sets held of `graph_id` whose set id starts with `prefix`."""
        start = graph_key_prefix(graph_id) + prefix.encode()
        return sorted(k for k in self._sets.get(partition, {}) if k.startswith(start))

    def keys_of(self, partition: int, record_key: bytes) -> dict[str, bytes]:
        """Key id -> data key of a held key set (empty: none held)."""
        opened = self._opened.get(record_key)
        if opened is None:
            value = self._sets.get(partition, {}).get(record_key)
            if value is None:
                return {}
            if self.kek is None:
                raise KeysUnavailable(NO_KEK)
            try:
                opened = self._opened[record_key] = self.kek.open_keys(record_key, value)
            except SealError as err:
                raise KeysUnavailable(f"{self.topic}: {err}") from None
            if len(self._flat) > OPENED_HELD:  # a cache of what `_sets` holds sealed: emptied, not grown for ever
                self._opened, self._flat = {record_key: opened}, {}
            graph_id = record_key.partition(b"\x00")[0].decode()
            self._flat.update(((graph_id, key_id), data_key) for key_id, data_key in opened.items())
        return opened

    def _data_key(self, partition: int, envelope: Envelope) -> bytes | None:
        found = self._flat.get((envelope.graph_id, envelope.key_id))
        return found if found is not None else self.keys_of(partition, envelope.key).get(envelope.key_id)

    async def open(self, partition: int, values: list[bytes], times_ms: Callable[[int], int]) -> list[bytes]:
        """The values of records of one partition of the graph-events topic,
        each sealed one whose key is known (after reading the key partition
        to its end) as the bytes that were sealed; `times_ms(k)`: the Kafka
        timestamp of the `k`th."""
        sealed = [(k, envelope_of(v)) for k, v in enumerate(values) if v is not None and v.startswith(SEALED_PREFIX)]
        if not sealed:
            return values
        if self.kek is None:
            raise KeysUnavailable(NO_KEK)  # folding on would silently drop their turns
        plain, data_key_of = self._plain, self._data_key
        missing = {e.key_id: (k, e.key) for k, (e, _) in sealed
                   if e.key_id not in plain and data_key_of(partition, e) is None}
        if missing:
            newest = max(times_ms(k) for k, _ in missing.values())
            await self._read_until_known(partition, {kid: key for kid, (_, key) in missing.items()}, newest)
        opened = list(values)
        for k, (envelope, data) in sealed:
            known = plain.pop(envelope.key_id, None)
            if known is not None:
                opened[k] = known
                continue
            data_key = data_key_of(partition, envelope)
            if data_key is None:
                self.erased += 1
                log.debug("sealed %s of graph %r: its key is gone", envelope.key_id, envelope.graph_id)
                continue
            try:
                opened[k] = open_sealed(envelope, data, data_key)
            except SealError as err:
                raise KeysUnavailable(f"{self.topic}: {err}") from None
        return opened

    async def _read_until_known(self, partition: int, missing: dict[str, bytes], newest_ms: int) -> None:
        """Read the key partition to its end; again, a moment later, while a
        key (id -> its set's record key) is missing for a record written in
        the last `RECENT_MS`."""
        for _ in range(RETRIES):
            await self.refresh(partition)
            if all(kid in self.keys_of(partition, key) for kid, key in missing.items()):
                return
            if time.time() * 1000 - newest_ms > RECENT_MS:
                return
            await asyncio.sleep(RETRY_S)

    async def prefetch(self, partition: int) -> None:
        """`refresh`, ahead of the records that need it: a catch-up's first
        sealed record then finds its keys read while the log's checks made
        their round trips. A read that fails is left to the one that needs it
        (which retries, or says why), so nothing is raised here."""
        if self.kek is None:
            return  # nothing could be opened: the first sealed record says so
        try:
            await self.refresh(partition)
        except ReplayError as err:  # the broker away, the key topic's start moved: the next read says so
            log.debug("reading the key sets of partition %s ahead failed: %s", partition, err)

    async def refresh(self, partition: int) -> None:
        """Read the key topic's `partition` from where it was left to its end."""
        async with self._reading:
            reader = await self._started()
            first, end = (await reader.bounds(self.topic, [partition]))[partition]
            start = max(first, self._read_to.get(partition, first))
            async for batch in reader.read(self.topic, partition, start, end):
                for record in batch:
                    if record.key is not None:
                        self.add(partition, record.key, record.value)  # a newer version, or a tombstone
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
