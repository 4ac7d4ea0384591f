"""In-memory `PartitionStore`: for tests and for throw-away rebuilds."""

from __future__ import annotations

import bisect
from typing import Iterator

from state.errors import StoreClosed
from state.store import Batch, PartitionStore


class MemoryStore(PartitionStore):
    def __init__(self) -> None:
        self._data: dict[bytes, bytes] = {}
        self._keys: list[bytes] = []  # sorted, for prefix scans
        self._closed = False

    def _check(self) -> None:
        if self._closed:
            raise StoreClosed("memory store is closed")

    def get(self, key: bytes) -> bytes | None:
        self._check()
        return self._data.get(key)

    def scan(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        self._check()
        start = bisect.bisect_left(self._keys, prefix)
        for key in self._keys[start:]:
            if not key.startswith(prefix):
                break
            yield key, self._data[key]

    def write(self, batch: Batch) -> None:
        self._check()
        # Validate everything before touching anything: all or none.
        for key, value in batch.items():
            if not isinstance(key, bytes) or not (value is None or isinstance(value, bytes)):
                raise TypeError("keys and values must be bytes")
        for key, value in batch.items():
            if value is None:
                if self._data.pop(key, None) is not None:
                    self._keys.pop(bisect.bisect_left(self._keys, key))
            else:
                if key not in self._data:
                    bisect.insort(self._keys, key)
                self._data[key] = value

    def close(self) -> None:
        self._closed = True
