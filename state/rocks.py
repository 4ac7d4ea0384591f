"""RocksDB `PartitionStore` through rocksdict (raw bytes mode, WriteBatch)."""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Iterator, Sequence, cast

from rocksdict import BlockBasedOptions, Cache, Options, Rdict, WriteBatch, WriteBufferManager, WriteOptions

from emgas.state.errors import StoreClosed, StoreUnavailable
from emgas.state.store import Batch, PartitionStore


# One memory budget for every store a process opens (a worker opens one per
# partition it holds). With RocksDB's defaults each store had its own 64 MiB
# memtable (two while one flushes) and its own block cache, so a worker's
# resident memory grew with every write until each of its partitions had
# filled a memtable: about 7 MiB per 1,000 turns, past 1 GiB for 8 partitions.
# The write buffer manager flushes the store being written when the
# memtables of all of them together near MEMTABLE_BUDGET_BYTES.
MEMTABLE_BUDGET_BYTES = 64 * 2**20
MEMTABLE_BYTES = 16 * 2**20  # one store's memtable, at most
BLOCK_CACHE_BYTES = 64 * 2**20  # data blocks read, shared by every store
_shared: tuple[Cache, WriteBufferManager] | None = None


def _memory() -> tuple[Cache, WriteBufferManager]:
    global _shared
    if _shared is None:
        _shared = Cache(BLOCK_CACHE_BYTES), WriteBufferManager(MEMTABLE_BUDGET_BYTES, False)
    return _shared


class RocksStore(PartitionStore):
    def __init__(self, path: Path, write_ahead_log: bool = True) -> None:
        """The store at `path` (made if missing). `write_ahead_log=False`:
        writes skip RocksDB's log and reach the files when the memtables
        flush (at the latest, at `close`), so a process that dies loses
        what was written since the last flush. For a store that is
        complete only once its writer closes it: a replay's (a replay
        refuses a directory that is not empty, so one that died is never
        resumed). The fold of 6,000 synthetic turns into one store: its
        commit and close 204 ms with the log, 169 without (docs/performance.md)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        cache, memtables = _memory()
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        options.set_write_buffer_size(MEMTABLE_BYTES)
        options.set_write_buffer_manager(memtables)
        # A turn looks up every pair of its concepts, most of them new: bloom
        # filters answer "not here" without reading a block.
        table = BlockBasedOptions()
        table.set_bloom_filter(10, False)
        table.set_block_cache(cache)
        options.set_block_based_table_factory(table)
        try:
            self._db: Rdict | None = Rdict(str(path), options)
        except Exception as exc:  # rocksdict raises plain Exception (e.g. the lock of a running worker)
            raise StoreUnavailable(f"cannot open the state at {path}: {exc}") from None
        if not write_ahead_log:
            writes = WriteOptions()
            writes.disable_wal = True  # type: ignore[method-assign,assignment]  # a property, stubbed as a method
            self._db.set_write_options(writes)

    def _open(self) -> Rdict:
        if self._db is None:
            raise StoreClosed("rocksdb store is closed")
        return self._db

    def get(self, key: bytes) -> bytes | None:
        return self._open().get(key)

    def multi_get(self, keys: Sequence[bytes]) -> list[bytes | None]:
        return cast(list[bytes | None], self._open()[list(keys)]) if keys else []

    def scan(self, prefix: bytes, start: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        from_key = prefix if start is None else max(prefix, start)
        items = cast(Iterator[tuple[bytes, bytes]], self._open().items(from_key=from_key))  # keys and values are bytes here
        for key, value in items:
            if not key.startswith(prefix):
                break
            yield key, value

    def write(self, batch: Batch) -> None:
        # In key order: the memtable's skip list inserts a key after the one
        # before it from where that one went in (a commit of 67,000 records,
        # 31 MB: 150-170 ms written as staged, 60-70 in order; sorting the
        # keys about 15).
        wb = WriteBatch(raw_mode=True)
        keys = sorted(batch)
        values = list(map(batch.__getitem__, keys))
        if None in values:
            for key, value in zip(keys, values):
                if value is None:
                    wb.delete(key)
                else:
                    wb.put(key, value)
        else:  # the common commit: no Python frame per record
            deque(map(wb.put, keys, values), maxlen=0)
        self._open().write(wb)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
