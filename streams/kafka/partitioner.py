"""Records keyed by graph routed as the Java client routes them, each key hashed once.

Every graph event, turn and query is keyed by its graph id, and aiokafka's
default partitioner (murmur2 of the key, as the Java client, so kcat and
other clients agree on where a graph lives) hashes the key in pure Python
on every send: about 2 % of a worker's CPU under ingest, for a few hundred
distinct graph ids. `KeyPartitioner` is that partitioner with each key's
hash remembered; a record without a key goes to a random partition, as
with aiokafka's.
"""

from __future__ import annotations

from typing import Sequence

from aiokafka.partitioner import DefaultPartitioner, murmur2

# Keys whose hashes are kept; past this many the memory starts again (keys
# are graph ids: a worker sees as many as it serves graphs).
MAX_KEYS = 65_536


class KeyPartitioner:
    """aiokafka's `DefaultPartitioner`, the hash of each key kept."""

    def __init__(self) -> None:
        self._hashes: dict[bytes, int] = {}

    def __call__(self, key: bytes | None, all_partitions: Sequence[int], available: Sequence[int]) -> int:
        """The partition of `key`: murmur2(key) & 0x7FFFFFFF modulo the number of
        partitions, indexing `all_partitions` (sorted by id); no key: a random one."""
        if key is None:
            return DefaultPartitioner()(key, all_partitions, available)
        hashed = self._hashes.get(key)
        if hashed is None:
            if len(self._hashes) >= MAX_KEYS:
                self._hashes.clear()
            hashed = self._hashes[key] = murmur2(key) & 0x7FFFFFFF
        return all_partitions[hashed % len(all_partitions)]
