"""In-memory `PartitionStore`: for tests and for throw-away rebuilds."""

from __future__ import annotations

import bisect
from typing import Iterator

from emgas.state.errors import StoreClosed
from emgas.state.store import Batch, PartitionStore


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

    def scan(self, prefix: bytes, start: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        self._check()
        keys = self._keys
        first = bisect.bisect_left(keys, prefix if start is None else max(prefix, start))
        past = _past(prefix)
        chosen = keys[first:] if past is None else keys[first:bisect.bisect_left(keys, past, first)]
        return zip(chosen, map(self._data.__getitem__, chosen))  # no Python frame per item (a scratch state's load)

    def write(self, batch: Batch) -> None:
        self._check()
        # Validate everything before touching anything: all or none.
        for key, value in batch.items():
            if not isinstance(key, bytes) or not (value is None or isinstance(value, bytes)):
                raise TypeError("keys and values must be bytes")
        added, removed = [], set()
        for key, value in batch.items():
            if value is None:
                if self._data.pop(key, None) is not None:
                    removed.add(key)
            else:
                if key not in self._data:
                    added.append(key)
                self._data[key] = value
        self._reindex(added, removed)

    def _reindex(self, added: list[bytes], removed: set[bytes]) -> None:
        """Keep `_keys` sorted: a few keys by bisection, many in one merge
        (a sort of two sorted runs is linear), so a large batch costs O(n)."""
        added = [k for k in added if k not in removed] if removed else added
        removed = {k for k in removed if k not in self._data}
        if len(added) + len(removed) < 64:
            for key in removed:
                self._keys.pop(bisect.bisect_left(self._keys, key))
            for key in added:
                bisect.insort(self._keys, key)
            return
        keys = [k for k in self._keys if k not in removed] if removed else self._keys
        keys.extend(sorted(added))
        keys.sort()
        self._keys = keys

    def close(self) -> None:
        self._closed = True


def _past(prefix: bytes) -> bytes | None:
    """The least key above every key starting with `prefix` (its last byte
    below 0xff raised by one, the 0xff bytes after it dropped); None when
    there is none (a prefix of 0xff bytes only, or none)."""
    stem = prefix.rstrip(b"\xff")
    return stem[:-1] + bytes([stem[-1] + 1]) if stem else None
